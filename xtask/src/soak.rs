//! `cargo xtask bench-kernel --only soak`: the agent under load with every output on (issue 44
//! §6). 10 000 flows replayed at full rate by two senders at once (one per CPU) for the given
//! seconds while the agent serves `--metrics`, writes `--export` lines, checkpoints `--json`
//! every 2 s and keeps `--evidence`; every second a burst of concurrent scrapes of `/metrics`
//! from inside the namespace, each timed from connect to the last byte. Prints frames/s, the
//! timeline records lost (`dropped.timeline_full`), the agent's CPU, and the scrapes' latency.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tests::netns::{Agent, Netns};

use crate::bench_kernel::{cpu_seconds, flows_capture, replay_loops};

/// The metrics port of the soak's agent.
const PORT: u16 = 9481;

/// One scrape from a thread in `ns` (entered with setns): connect, ask, read to the end.
fn scrape() -> Option<Duration> {
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", PORT)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n").ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    body.starts_with(b"HTTP/1.1 200").then(|| t.elapsed())
}

/// Moves the calling thread into the network namespace `name`.
fn enter(name: &str) -> anyhow::Result<()> {
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))?;
    // SAFETY: setns on a namespace file we opened; affects this thread only.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// `scrapers` threads, each scraping once a second, together (a barrier): the latencies
/// (None: failed) until `stop`.
fn scrapers(ns: &str, scrapers: usize, stop: Arc<Mutex<bool>>) -> std::thread::JoinHandle<Vec<Option<Duration>>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let barrier = Arc::new(Barrier::new(scrapers + 1));
        let out = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..scrapers)
            .map(|_| {
                let (ns, barrier, out, stop) = (ns.clone(), barrier.clone(), out.clone(), stop.clone());
                std::thread::spawn(move || {
                    enter(&ns).expect("enter the namespace");
                    loop {
                        barrier.wait();
                        if *stop.lock().unwrap() {
                            return;
                        }
                        let r = scrape();
                        out.lock().unwrap().push(r);
                    }
                })
            })
            .collect();
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let done = *stop.lock().unwrap();
            barrier.wait();
            if done {
                break;
            }
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        std::mem::take(&mut *out.lock().unwrap())
    })
}

pub fn run(seconds: u64, concurrent: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ns = Netns::new("soak");
    ns.loopback_up();
    let flows = dir.path().join("flows.pcap");
    flows_capture(&flows, 10_000, 10, false)?;
    let (json, export, evidence) = (dir.path().join("soak.json"), dir.path().join("export"), dir.path().join("ev"));
    let metrics = format!("127.0.0.1:{PORT}");
    let args = [
        "--interval",
        "1s",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--checkpoint",
        "2s",
        "--metrics",
        &metrics,
        "--export",
        export.to_str().unwrap(),
        "--evidence",
        evidence.to_str().unwrap(),
    ];
    let agent = Agent::start(&ns, &args);
    let pid = agent.pid();
    let stop = Arc::new(Mutex::new(false));
    let scraping = scrapers(&ns.name, concurrent, stop.clone());
    // Two senders, each calibrated alone to about `seconds`: 100 000 frames a loop. The
    // calibration's frames count in the report's total, not in the rate or the CPU share.
    let (one, took) = replay_loops(&ns, &flows, 20, "max")?;
    let loops = ((seconds as f64 / took.as_secs_f64()) * 20.0).ceil().max(1.0) as u64;
    let cpu0 = cpu_seconds(pid)?;
    let started = Instant::now();
    let senders: Vec<_> = (0..2)
        .map(|cpu| {
            let mut c = ns.cmd(tests::tools::require("taskset"));
            c.args(["-c", &cpu.to_string()]).arg(tests::tools::binary()).arg("replay").arg(&flows);
            c.args(["-i", "va", "--loop", &loops.to_string(), "--speed", "max"]);
            c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut sent = 0;
    for s in senders {
        let out = s.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stderr);
        sent +=
            text.split("sent ").nth(1).and_then(|s| s.split(' ').next()).context("replay output")?.parse::<u64>()?;
    }
    let secs = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(1500));
    let cpu = cpu_seconds(pid)? - cpu0;
    *stop.lock().unwrap() = true;
    let mut lat = scraping.join().map_err(|_| anyhow::anyhow!("scrapers"))?;
    let (code, _, err) = agent.stop();
    // 3: a partial report, here because findings past --evidence-max-files got no file (each
    // of the 10 000 flows is one): said below, not an error of the soak.
    if !matches!(code, Some(0 | 3)) {
        bail!("agent: {}", err.join("\n"));
    }
    let said: Vec<&String> = err.iter().filter(|l| l.contains("error")).collect();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let frames = v["capture"]["frames"].as_u64().unwrap_or(0);
    let dropped = &v["capture"]["dropped"];
    let failed = lat.iter().filter(|l| l.is_none()).count();
    let mut ok: Vec<Duration> = lat.drain(..).flatten().collect();
    ok.sort();
    let q =
        |f: f64| ok.get(((ok.len() as f64 * f) as usize).min(ok.len().saturating_sub(1))).copied().unwrap_or_default();
    println!(
        "\n### Soak: every output on, 10 000 flows, two senders at full rate, {concurrent} scrapes a second at once\n"
    );
    println!(
        "| frames sent by the two | seconds | frames/s | frames in the report (of all sent) | timeline records lost | other drops | agent CPU (share of one core) | scrapes (failed) | scrape p50 / p99 / max |"
    );
    println!("|---:|---:|---:|---:|---:|---|---:|---:|---|");
    let others: Vec<String> = dropped
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, n)| *k != "timeline_full" && n.as_u64() > Some(0))
                .map(|(k, n)| format!("{k} {n}"))
                .collect()
        })
        .unwrap_or_default();
    println!(
        "| {sent} | {secs:.1} | {:.0} | {frames} of {} | {} | {} | {:.1} % | {} ({failed}) | {:.1} / {:.1} / {:.1} ms |",
        sent as f64 / secs,
        sent + one,
        dropped["timeline_full"].as_u64().unwrap_or(0),
        if others.is_empty() { "none".to_string() } else { others.join(", ") },
        100.0 * cpu / (secs + 1.5),
        ok.len() + failed,
        q(0.5).as_secs_f64() * 1e3,
        q(0.99).as_secs_f64() * 1e3,
        ok.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    println!("\nagent exit code {code:?}{}", said.iter().map(|l| format!("; {l}")).collect::<String>());
    Ok(())
}
