//! The XDP program's cost per frame on realistic traffic, by class: the agent attaches it to a
//! veth, a capture of one class with advancing PSNs (in-order bulk data, as a mirror port sees
//! a healthy QP) is replayed through it, and the kernel's own accounting of the program
//! (`kernel.bpf_stats_enabled`: `run_time_ns` / `run_cnt`, read with bpftool) gives ns per
//! frame. `BPF_PROG_TEST_RUN` repeats one frame, so a RoCE request there is a duplicate PSN
//! after its first run: this measures the path real traffic takes.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::{Aeth, Reth};
use anyhow::bail;
use tests::netns::{Agent, Netns};
use tests::synth::pcap::{PcapOptions, Record, write_pcap};
use tests::synth::{Encap, Roce, mirror, udp_ipv4};

/// Frames of one class, each loop of the replay; PSNs advance through it.
const FRAMES: u32 = 50_000;

/// (name, frames): the classes issue 12 budgets.
fn classes() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let write = |opcode: u8, psn: u32, ack_req: bool| {
        let mut r = Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, opcode, 0x123, psn).payload(1024);
        if opcode == op::RDMA_WRITE_FIRST {
            r.ext.reth = Reth { va: 0x1000, rkey: 1, dma_len: 16 * 1024 };
        }
        r.bth.ack_req = ack_req;
        r.build()
    };
    // 16-frame messages: FIRST, 14 MIDDLE, LAST with AckReq.
    let message = |i: u32| {
        let op = match i % 16 {
            0 => op::RDMA_WRITE_FIRST,
            15 => op::RDMA_WRITE_LAST,
            _ => op::RDMA_WRITE_MIDDLE,
        };
        write(op, i, i % 16 == 15)
    };
    let middle = |i: u32| write(op::RDMA_WRITE_MIDDLE, i, false);
    let ack = |i: u32| {
        let mut a = Roce::v4([10, 0, 0, 2], [10, 0, 0, 1], 49153, op::ACKNOWLEDGE, 0x321, i);
        a.ext.aeth = Aeth::ack(31, i);
        a.build()
    };
    let cnp = |i: u32| Roce::v4([10, 0, 0, 2], [10, 0, 0, 1], 49154 + (i % 8) as u16, CNP, 0x321, 0).build();
    let udp = |i: u32| udp_ipv4([10, 0, 0, 9], [10, 0, 0, 1], 5353, 5353 + (i % 8) as u16, 64);
    // What a mirror collector port receives: each copy a frame not sighted before.
    let mirrored = |i: u32| mirror(Encap::ErspanII, &middle(i), None);
    vec![
        ("RDMA WRITE MIDDLE, in order", (0..FRAMES).map(middle).collect()),
        ("ERSPAN II copies of RDMA WRITE MIDDLE, in order", (0..FRAMES).map(mirrored).collect()),
        ("RDMA WRITE messages (FIRST, 14 MIDDLE, LAST+AckReq)", (0..FRAMES).map(message).collect()),
        ("ACK, advancing", (0..FRAMES).map(ack).collect()),
        ("CNP", (0..FRAMES).map(cnp).collect()),
        ("non-RoCE UDP", (0..FRAMES).map(udp).collect()),
    ]
}

/// The XDP program the agent `pid` holds: (run_time_ns, run_cnt), from the fdinfo of its
/// program fd (XDP is program type 6).
fn prog_stats(pid: u32) -> anyhow::Result<(u64, u64)> {
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let Ok(info) = std::fs::read_to_string(e?.path()) else { continue };
        let field =
            |k: &str| info.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse::<u64>().ok());
        if field("prog_type") == Some(6)
            && let (Some(t), Some(n)) = (field("run_time_ns"), field("run_cnt"))
        {
            return Ok((t, n));
        }
    }
    bail!("no XDP program fd with run statistics in /proc/{pid}/fdinfo")
}

pub fn sysctl(kv: &str) -> anyhow::Result<String> {
    let out = Command::new("sysctl").args(["-n", kv.split('=').next().unwrap_or(kv)]).output()?;
    let before = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if kv.contains('=') && !Command::new("sysctl").args(["-qw", kv]).status()?.success() {
        bail!("sysctl -w {kv} failed");
    }
    Ok(before)
}

/// Prints the table: per class, the program's ns per frame over `seconds` of replay.
pub fn run(seconds: u64, compare_agent: Option<&Path>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ns = Netns::new("stats");
    println!("\n### Realistic traffic through a veth (bpf_stats: the program's own run time)\n");
    print!("| frames | frames run | ns/frame | --no-timeline frames run | ns/frame |");
    if let Some(b) = compare_agent {
        print!(" {} frames run | ns/frame |", b.display());
    }
    println!("\n|---|---:|---:|---:|---:|{}", if compare_agent.is_some() { "---:|---:|" } else { "" });
    let this = tests::tools::binary();
    let was = sysctl("kernel.bpf_stats_enabled=1")?;
    let result = (|| -> anyhow::Result<()> {
        for (name, frames) in classes() {
            let file = dir.path().join("class.pcap");
            let recs: Vec<Record> =
                frames.into_iter().enumerate().map(|(i, f)| Record::new(1_000 * i as u64, f)).collect();
            std::fs::write(&file, write_pcap(Vec::new(), PcapOptions::default(), &recs)?)?;
            print!("| {name} |");
            // This build's agent, with and without timeline records (what a record costs on
            // this path, where the log's lines are the agent's too and the rest of the receive
            // path runs between frames), then the other one's (its own program) on the same
            // frames.
            let runs = [(this.as_path(), false), (this.as_path(), true)];
            for (bin, no_timeline) in runs.into_iter().chain(compare_agent.map(|b| (b, false))) {
                let json = dir.path().join("stats.json");
                let mut args = vec!["--interval", "1s", "-q", "--json", json.to_str().unwrap()];
                if no_timeline {
                    args.push("--no-timeline");
                }
                let agent = Agent::start_bin(&ns, bin, &args);
                let pid = agent.pid();
                let (t0, n0) = prog_stats(pid)?;
                replay_seconds(&ns, &file, seconds)?;
                let (t1, n1) = prog_stats(pid)?;
                let (code, _, err) = agent.stop();
                if code != Some(0) {
                    bail!("agent {}: {}", bin.display(), err.join("\n"));
                }
                let n = n1 - n0;
                print!(" {n} | {:.0} |", (t1 - t0) as f64 / n.max(1) as f64);
            }
            println!();
        }
        Ok(())
    })();
    sysctl(&format!("kernel.bpf_stats_enabled={was}"))?;
    result
}

/// Replays `file` in loops for about `seconds`.
fn replay_seconds(ns: &Netns, file: &Path, seconds: u64) -> anyhow::Result<()> {
    let until = std::time::Instant::now() + Duration::from_secs(seconds);
    while std::time::Instant::now() < until {
        let out = ns.replay(file);
        if !out.status.success() {
            bail!("replay: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(())
}
