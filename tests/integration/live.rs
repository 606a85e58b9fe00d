//! End to end in network namespaces the tests create: `roce-analyzer --iface` on one veth end,
//! frames replayed into the other (by `roce-analyzer replay`, and once by tcpreplay). Root only.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::fixtures::{self, Fixture};
use tests::netns::{Agent, Netns, privileged};
use tests::synth::pcap::{PcapOptions, write_pcap};
use tests::tools::{assert_json_eq, metric, require, run};

fn offline(p: &Path) -> Value {
    offline_with(p, &[])
}

fn offline_with(p: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["-q", "-r", p.to_str().unwrap(), "--json", "-"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The parts of a report that must be equal live and offline (timestamps, sources and labels
/// differ by nature).
fn comparable(v: &Value) -> Value {
    let mut flows = v["flows"].clone();
    for f in flows.as_array_mut().unwrap() {
        let o = f.as_object_mut().unwrap();
        for k in ["first_ns", "last_ns", "labels"] {
            o.remove(k);
        }
        // RTT values depend on the replay's timing, and so does whether a request never
        // answered has timed out by the end; which requests were answered does not.
        if let Some(rtt) = o.get_mut("rtt_ns").and_then(|r| r.as_object_mut()) {
            let unanswered = rtt["timeouts"].as_u64().unwrap() + rtt["pending"].as_u64().unwrap();
            rtt.retain(|k, _| k == "samples");
            rtt.insert("unanswered".into(), unanswered.into());
        }
    }
    let mut pfc = v["pfc"].clone();
    for list in ["senders", "pause_senders"] {
        for s in pfc[list].as_array_mut().unwrap() {
            let o = s.as_object_mut().unwrap();
            // Pause time is the union of intervals in time: the replay's timing shapes it
            // (compared with a tolerance in `live_fabric_answers_equal_offline`).
            // Onsets merge or split with the replay's timing (a refreshed XOFF), and the marks
            // before them move with it.
            for k in ["first_ns", "last_ns", "paused_ns", "intervals", "ecn_lead"] {
                o.remove(k);
            }
        }
    }
    pfc.as_object_mut().unwrap().remove("storms");
    for r in pfc["rates"].as_array_mut().into_iter().flatten() {
        let o = r.as_object_mut().unwrap();
        o.remove("paused_ns");
        o.remove("paused_ns_per_million");
    }
    // Marking over time: its points follow the replay's timing, its totals per class and per
    // priority (from the first CE mark) do not. (Of mirrored copies, live analyses see the
    // first copy's ECN, offline the last one's: docs/usage.md, vantage points.)
    let mirrored = !v["vantage"].is_null();
    let totals = |list: &str, key: &str| -> Vec<Value> {
        if mirrored {
            return Vec::new();
        }
        let sum =
            |s: &Value, k: &str| s[k].as_array().map_or(0, |a| a.iter().map(|v| v.as_u64().unwrap()).sum::<u64>());
        v["marking"][list].as_array().map_or(Vec::new(), |a| {
            a.iter().map(|s| serde_json::json!([s[key], sum(s, "frames"), sum(s, "ce")])).collect()
        })
    };
    // Messages: which were completed, their kinds, sizes and flows do not depend on the
    // replay's timing; their completion times do.
    let m = &v["messages"];
    let per = |list: &str, keys: &[&str]| -> Vec<Value> {
        m[list].as_array().map_or(Vec::new(), |a| {
            a.iter().map(|x| Value::Array(keys.iter().map(|k| x[*k].clone()).collect())).collect()
        })
    };
    let t = &m["transfers"];
    let counts: Vec<Value> = ["completed", "by_kind", "pending", "partial", "abandoned", "in_flight_evicted"]
        .iter()
        .map(|k| m[*k].clone())
        .chain([t["uc_messages"].clone(), t["uc_bytes"].clone(), t["ud_messages"].clone(), t["ud_bytes"].clone()])
        .collect();
    let rings: Option<Vec<Value>> =
        m["rings"]["rings"].as_array().map(|a| a.iter().map(|r| r["hosts"].clone()).collect());
    let messages = serde_json::json!({
        "counts": counts,
        "classes": per("classes", &["name", "messages", "bytes"]),
        "flows": per("flows", &["src", "dst", "udp_sport", "dst_qp", "pending", "messages", "bytes"]),
        "rings": rings,
    });
    serde_json::json!({
        "messages": messages,
        "marking": [totals("classes", "dscp"), totals("priorities", "pcp")],
        "frames": v["capture"]["frames"],
        "capture_loss": v["capture"]["loss"],
        "load_balancing": v["load_balancing"],
        "classes": v["capture"]["classes"],
        "dropped": v["capture"]["dropped"],
        "filter": v["capture"]["filter"],
        "flows": flows,
        "pfc": pfc,
    })
}

/// Runs the agent on vb, sends `file` into va with `send`, stops the agent, returns its report.
fn live_report(ns: &Netns, args: &[&str], send: impl FnOnce()) -> Value {
    live_report_and_log(ns, args, send).0
}

/// The same, with the agent's stderr lines.
fn live_report_and_log(ns: &Netns, args: &[&str], send: impl FnOnce()) -> (Value, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("live.json");
    let mut a = vec!["--interval", "200ms", "-q", "--json", json.to_str().unwrap()];
    a.extend_from_slice(args);
    let agent = Agent::start(ns, &a);
    let mark = ns.mark();
    send();
    // veth hands frames to XDP in NAPI context, a moment after the send returns (much later on
    // a busy machine): wait for all that `ns.replay` sent (or for the count to settle after
    // another sender), then a little for the agent's last poll.
    ns.wait_delivered(mark);
    std::thread::sleep(Duration::from_millis(200));
    let (code, _, stderr) = agent.stop();
    assert_eq!(code, Some(0), "agent: {}", stderr.join("\n"));
    (tests::tools::read_report(&json), stderr)
}

fn replayable() -> Vec<Fixture> {
    // Cooked captures have no Ethernet header to put on a wire.
    fixtures::all().into_iter().filter(|f| !matches!(f.name, "sll.pcap" | "sll2.pcap")).collect()
}

#[test]
fn live_equals_offline_for_every_fixture() {
    if !privileged("live_equals_offline_for_every_fixture") {
        return;
    }
    let ns = Netns::new("eq");
    ns.mtu(9000); // qp_mtus.pcap carries 4 KB payloads
    let dir = tempfile::tempdir().unwrap();
    for f in replayable() {
        let sent = f.as_sent(dir.path());
        let live = live_report(&ns, &["--xdp-mode", "native"], || {
            let out = ns.replay(&sent);
            assert!(out.status.success(), "replay {}: {}", f.name, String::from_utf8_lossy(&out.stderr));
        });
        assert_eq!(live["kind"], "live");
        assert_eq!(live["capture"]["sources"][0]["kind"], "live");
        let off = offline(&sent);
        assert_json_eq(&comparable(&live), &comparable(&off), &format!("{}: live report vs offline", f.name));
        // (ECN before PFC is not compared: how far a pause onset lies after the marks before it
        // is the replay's timing, as pause time is.)
    }
}

#[test]
fn live_equals_offline_with_tcpreplay() {
    if !privileged("live_equals_offline_with_tcpreplay") {
        return;
    }
    let tcpreplay = require("tcpreplay");
    let ns = Netns::new("tcpr");
    let dir = tempfile::tempdir().unwrap();
    for name in ["example.pcap", "opcodes.pcap", "erspan.pcap", "pfc.pcap", "ipv6.pcap"] {
        let f = fixtures::all().into_iter().find(|f| f.name == name).unwrap();
        let sent = f.as_sent(dir.path());
        let live = live_report(&ns, &[], || {
            let out = ns.cmd(&tcpreplay).args(["-q", "-i", "va", "--topspeed"]).arg(&sent).output().unwrap();
            assert!(out.status.success(), "tcpreplay {name}: {}", String::from_utf8_lossy(&out.stderr));
        });
        assert_json_eq(&comparable(&live), &comparable(&offline(&sent)), &format!("{name} via tcpreplay"));
    }
}

#[test]
fn ordinary_traffic_crosses_while_attached() {
    if !privileged("ordinary_traffic_crosses_while_attached") {
        return;
    }
    let ns = Netns::new("ping");
    // A second namespace for the other end, so that the ping really crosses the veth.
    let peer = Netns::peer("ping-peer");
    assert!(ns.ip(&["link", "set", "va", "netns", &peer.name]).status.success());
    assert!(peer.ip(&["addr", "add", "192.0.2.1/24", "dev", "va"]).status.success());
    assert!(peer.ip(&["link", "set", "va", "up"]).status.success());
    assert!(ns.ip(&["addr", "add", "192.0.2.2/24", "dev", "vb"]).status.success());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let agent = Agent::start(&ns, &["--interval", "200ms", "-q", "--json", json.to_str().unwrap()]);
    assert!(ns.has_xdp("vb"), "program attached");
    let ping = peer
        .cmd(tests::tools::require("ping"))
        .args(["-c", "5", "-i", "0.2", "-W", "2", "192.0.2.2"])
        .output()
        .unwrap();
    assert!(ping.status.success(), "ping through the XDP interface: {}", String::from_utf8_lossy(&ping.stdout));
    let (code, _, _) = agent.stop();
    assert_eq!(code, Some(0));
    let v: Value = tests::tools::read_report(&json);
    assert!(v["capture"]["classes"]["non_roce"].as_u64().unwrap() >= 5, "echo requests seen: {v}");
    assert!(!ns.has_xdp("vb"), "detached after a clean stop");
}

#[test]
fn sigkill_leaves_no_program_attached() {
    if !privileged("sigkill_leaves_no_program_attached") {
        return;
    }
    let ns = Netns::new("kill");
    let mut agent = Agent::start(&ns, &["-q"]);
    assert!(ns.has_xdp("vb"), "program attached while running");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid() as i32, libc::SIGKILL) };
    agent.child.wait().unwrap();
    // The kernel releases the bpf_link with the last fd; give its deferred work a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while ns.has_xdp("vb") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!ns.has_xdp("vb"), "an XDP program is still attached after SIGKILL");
}

#[test]
fn tiny_flow_map_counts_its_overflow() {
    if !privileged("tiny_flow_map_counts_its_overflow") {
        return;
    }
    let f = fixtures::all().into_iter().find(|f| f.name == "opcodes.pcap").unwrap();
    let ns = Netns::new("full");
    let dir = tempfile::tempdir().unwrap();
    let sent = f.as_sent(dir.path());
    let (live, log) =
        live_report_and_log(&ns, &["--max-flows", "4", "--kernel-log"], || assert!(ns.replay(&sent).status.success()));
    // --kernel-log shows the program's own line for its rare path.
    assert!(log.iter().any(|l| l.contains("flow table full")), "kernel log lines: {log:?}");
    let off = offline(&sent);
    // The first four flows (in arrival order) fit; every other RoCE frame is counted lost.
    let flows = off["flows"].as_array().unwrap();
    let mut first: Vec<(u64, &Value)> = flows.iter().map(|f| (f["first_ns"].as_u64().unwrap(), f)).collect();
    first.sort_by_key(|(t, _)| *t);
    let kept: u64 = first.iter().take(4).map(|(_, f)| f["packets"].as_u64().unwrap()).sum();
    let roce = off["capture"]["classes"]["roce"].as_u64().unwrap() + off["capture"]["classes"]["cnp"].as_u64().unwrap();
    assert_eq!(live["flows"].as_array().unwrap().len(), 4);
    let dropped = live["capture"]["dropped"]["flow_map_full"].as_u64().unwrap();
    assert_eq!(dropped, roce - kept);
    // Rate-limited: a line at the 1st, 2nd, 4th, ... dropped frame of each CPU.
    let lines = log.iter().filter(|l| l.contains("flow table full")).count() as u64;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    assert!(lines <= cpus * (dropped.ilog2() as u64 + 1), "{lines} lines for {dropped} drops: {log:?}");
    assert_eq!(live["capture"]["classes"], off["capture"]["classes"], "classes are still all counted");
    // Without --kernel-log the program stays silent.
    let (_, quiet) = live_report_and_log(&ns, &["--max-flows", "4"], || assert!(ns.replay(&sent).status.success()));
    assert!(!quiet.iter().any(|l| l.contains("flow table full")), "{quiet:?}");
}

/// A capture of `frames` RDMA WRITE MIDDLE frames of one flow, PSNs 0, 1, …, 1 µs apart.
fn write_one_flow(path: &Path, frames: u32) {
    let recs: Vec<tests::synth::pcap::Record> = (0..frames)
        .map(|i| {
            let middle = analyzer_common::opcode::op::RDMA_WRITE_MIDDLE;
            let f = tests::synth::Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, middle, 0x123, i).payload(64);
            tests::synth::pcap::Record::new(1_000 * i as u64, f.build())
        })
        .collect();
    std::fs::write(path, write_pcap(Vec::new(), PcapOptions::default(), &recs).unwrap()).unwrap();
}

/// One flow's frames sent from two CPUs at once (two replays pinned with taskset: veth runs
/// XDP on the sending CPU) are noted as handled on several CPUs (`several_cpus`: the kernel's
/// one entry per flow is then updated by both without a lock); the same frames sent from one
/// CPU are not.
#[test]
fn a_flow_handled_on_two_cpus_at_once_is_noted() {
    if !privileged("a_flow_handled_on_two_cpus_at_once_is_noted") {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!(
            "*** a_flow_handled_on_two_cpus_at_once_is_noted NOT RUN: it needs two CPUs, this machine has {cpus} ***"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one_flow.pcap");
    write_one_flow(&file, 20_000);
    let ns = Netns::new("cpus");
    let several = |v: &Value| v["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "several_cpus").cloned();
    let both = live_report(&ns, &["--xdp-mode", "native"], || {
        let (mut a, mut b) = (ns.replay_on_cpu(&file, 0), ns.replay_on_cpu(&file, 1));
        assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    });
    assert_eq!(both["capture"]["frames"], 40_000, "every frame of both replays counted");
    let note = several(&both).unwrap_or_else(|| panic!("no several_cpus note: {}", both["visibility"]));
    assert!(note["message"].as_str().unwrap().starts_with("1 flows were handled on more than one CPU"), "{note}");
    let one = live_report(&ns, &["--xdp-mode", "native"], || {
        assert!(ns.replay_on_cpu(&file, 1).wait().unwrap().success());
    });
    assert_eq!(one["capture"]["frames"], 20_000);
    assert_eq!(several(&one), None, "one CPU: {}", one["visibility"]);
}

/// An agent stopped (SIGSTOP) while a log's worth and 50 000 more frames arrive on one CPU, then let go: the CPU's
/// timeline log kept its newest records, and the report counts every other one, exactly,
/// while every frame stays counted in its class and its flow.
#[test]
fn a_stalled_agent_counts_every_record_its_log_lost() {
    if !privileged("a_stalled_agent_counts_every_record_its_log_lost") {
        return;
    }
    // Each CPU's log as the agent's loader sizes it.
    let slots = analyzer_common::maps::timeline_slots(analyzer::capture::kernel::load::log_cpus());
    let frames = slots + 50_000;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("burst.pcap");
    write_one_flow(&file, frames);
    let ns = Netns::new("stall");
    let json = dir.path().join("live.json");
    let agent =
        Agent::start(&ns, &["--xdp-mode", "native", "--interval", "200ms", "-q", "--json", json.to_str().unwrap()]);
    let pid = agent.pid() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    assert!(ns.replay_on_cpu(&file, 1).wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    std::thread::sleep(Duration::from_millis(400));
    let (code, _, stderr) = agent.stop();
    assert_eq!(code, Some(0), "agent: {}", stderr.join("\n"));
    let r = tests::tools::read_report(&json);
    assert_eq!(r["capture"]["frames"], frames, "every frame counted");
    assert_eq!(r["flows"][0]["packets"], frames, "in its flow too");
    // The log's newest records but its oldest (where the CPU's next record would go) were read.
    let lost = frames as u64 - (slots as u64 - 1);
    assert_eq!(r["capture"]["dropped"]["timeline_full"], lost, "{}", r["capture"]["dropped"]);
    assert_eq!(r["capture"]["dropped"]["undrained"], 0);
}

#[test]
fn attach_errors_are_clear() {
    if !privileged("attach_errors_are_clear") {
        return;
    }
    let ns = Netns::new("err");
    let out = ns.cmd(tests::tools::binary()).args(["-i", "nosuch0", "--duration", "1s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown interface \"nosuch0\""), "{out:?}");
    // A second agent on the same interface finds it taken.
    let first = Agent::start(&ns, &["-q"]);
    let out = ns.cmd(tests::tools::binary()).args(["-i", "vb", "--duration", "1s", "-q"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("already has an XDP program attached"), "{err}");
    drop(first);
    // Without privileges: the message names the capabilities.
    if let Some(setpriv) = tests::tools::which("setpriv") {
        let out = ns
            .cmd(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
            .arg(tests::tools::binary())
            .args(["-i", "vb", "--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("CAP_BPF") && err.contains("CAP_NET_ADMIN"), "{err}");
    } else {
        panic!("setpriv (util-linux) is missing: it is part of every Debian install");
    }
}

#[test]
fn replay_keeps_the_capture_pacing_scaled_by_speed() {
    if !privileged("replay_keeps_the_capture_pacing_scaled_by_speed") {
        return;
    }
    use tests::synth::pcap::Record;
    let ns = Netns::new("pace");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("paced.pcap");
    // Three frames 200 ms apart: 400 ms of capture time.
    let frame = tests::synth::udp_ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 32);
    let recs: Vec<Record> = (0..3).map(|i| Record::new(fixtures::T0 + i * 200_000_000, frame.clone())).collect();
    std::fs::write(&p, write_pcap(Vec::new(), PcapOptions::default(), &recs).unwrap()).unwrap();
    let timed = |speed: &str| {
        let started = Instant::now();
        let out =
            ns.cmd(tests::tools::binary()).arg("replay").arg(&p).args(["-i", "va", "--speed", speed]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("sent 3 frames"), "{out:?}");
        started.elapsed()
    };
    let original = timed("1.0");
    let faster = timed("4");
    assert!(original >= Duration::from_millis(400), "--speed 1.0 keeps the 400 ms: {original:?}");
    assert!(faster >= Duration::from_millis(100), "--speed 4 takes a quarter: {faster:?}");
    assert!(faster < original, "--speed 4 ({faster:?}) is faster than 1.0 ({original:?})");
}

#[test]
fn metrics_scraped_over_loopback_equal_the_report() {
    if !privileged("metrics_scraped_over_loopback_equal_the_report") {
        return;
    }
    let ns = Netns::new("metrics");
    ns.loopback_up();
    let f = fixtures::example();
    let dir = tempfile::tempdir().unwrap();
    let sent = f.as_sent(dir.path());
    let json = dir.path().join("live.json");
    let port = 19000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let agent = Agent::start(&ns, &["--interval", "200ms", "-q", "--json", json.to_str().unwrap(), "--metrics", &addr]);
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(900));
    let text = ns.scrape(port).unwrap_or_else(|e| panic!("scrape: {e}"));
    assert_eq!(ns.get(port, "/healthz").as_deref(), Ok("ok\n"), "liveness endpoint");
    assert!(ns.get(port, "/nope").is_err(), "other paths are 404");
    let (code, _, err) = agent.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let v = tests::tools::read_report(&json);
    for (class, n) in v["capture"]["classes"].as_object().unwrap() {
        let series = format!(r#"roce_analyzer_frames_total{{class="{class}"}}"#);
        assert_eq!(metric(&text, &series), n.as_u64(), "{series}\n{text}");
    }
    for flow in v["flows"].as_array().unwrap() {
        let series = format!(
            r#"roce_analyzer_flow_bytes_total{{src="{}",dst="{}",udp_sport="{}",dst_qp="{}"}}"#,
            flow["src"].as_str().unwrap(),
            flow["dst"].as_str().unwrap(),
            flow["udp_sport"],
            flow["dst_qp"]
        );
        assert_eq!(metric(&text, &series), flow["bytes"].as_u64(), "{series}");
    }
    for s in v["pfc"]["senders"].as_array().unwrap() {
        let series = format!(
            r#"roce_analyzer_pfc_frames_total{{mac="{}",priority="{}"}}"#,
            s["mac"].as_str().unwrap(),
            s["priority"]
        );
        assert_eq!(metric(&text, &series), s["frames"].as_u64(), "{series}");
        let series = series.replace("pfc_frames_total", "pfc_paused_seconds_total");
        let secs: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series}"));
        let want = s["paused_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!((secs - want).abs() <= want * 1e-12, "{series}: {secs} s, the report says {want} s");
    }
    let sum = |f: &dyn Fn(&Value) -> u64| -> u64 { v["flows"].as_array().unwrap().iter().map(f).sum() };
    let dup = sum(&|f| f["psn"]["duplicates"].as_u64().unwrap());
    assert_eq!(metric(&text, r#"roce_analyzer_psn_anomalies_total{kind="duplicates"}"#), Some(dup));
    let acks = sum(&|f| f["naks"]["acks"].as_u64().unwrap());
    assert_eq!(metric(&text, r#"roce_analyzer_aeth_total{kind="acks"}"#), Some(acks));
    assert!(v["rtt_ns"]["samples"].as_u64().unwrap() > 0, "the example has acknowledged requests");
    assert_eq!(metric(&text, "roce_analyzer_rtt_seconds_count"), v["rtt_ns"]["samples"].as_u64());
    let ce: u64 = v["flows"].as_array().unwrap().iter().map(|f| f["ecn"]["ce"].as_u64().unwrap()).sum();
    assert_eq!(metric(&text, "roce_analyzer_ce_packets_total"), Some(ce));
    assert_eq!(metric(&text, "roce_analyzer_cnp_total"), v["capture"]["classes"]["cnp"].as_u64());
    assert_eq!(metric(&text, r#"roce_analyzer_dropped_total{reason="flow_map_full"}"#), Some(0));
}

#[test]
fn nic_counters_come_from_the_driver() {
    if !privileged("nic_counters_come_from_the_driver") {
        return;
    }
    let ns = Netns::new("nic");
    let f = fixtures::all().into_iter().find(|f| f.name == "opcodes.pcap").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sent = f.as_sent(dir.path());
    let (v, _) = live_report_and_log(&ns, &["--xdp-mode", "native", "--nic-counters"], || {
        assert!(ns.replay(&sent).status.success())
    });
    let nic = &v["nic"];
    assert_eq!(nic["rdma"].as_array().unwrap().len(), 0, "a veth has no RDMA device");
    assert_eq!(nic["netdev"]["name"], "vb");
    assert!(nic["netdev"].get("error").is_none(), "{nic}");
    let counters = nic["netdev"]["counters"].as_object().unwrap();
    // veth counts the frames its native XDP program saw: exactly those replayed.
    assert_eq!(counters["rx_queue_0_xdp_packets"].as_u64(), Some(f.frames.len() as u64), "{counters:?}");
    // The same statistics as ethtool -S (an independent reader); the veth was new, so the
    // increments over the run are the absolute values.
    let out = ns.cmd(require("ethtool")).args(["-S", "vb"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let oracle: std::collections::BTreeMap<String, u64> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().split_once(": ").and_then(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?))))
        .collect();
    assert!(!oracle.is_empty(), "{text}");
    for (k, want) in &oracle {
        if k == "peer_ifindex" {
            continue; // an index, not a count: its "increment" over the run is 0
        }
        assert_eq!(counters.get(k).and_then(|c| c.as_u64()), Some(*want), "{k}");
    }
    assert_eq!(counters.len(), oracle.len(), "the same set of statistics");
}

#[test]
fn jumbo_frames_are_counted_whole_in_native_mode() {
    if !privileged("jumbo_frames_are_counted_whole_in_native_mode") {
        return;
    }
    use tests::synth::scenario::{ScenarioOptions, cluster};
    let ns = Netns::new("jumbo");
    // 4096-byte RoCE payloads need a jumbo MTU; native XDP takes it only with a multi-buffer
    // (xdp.frags) program.
    ns.mtu(9000);
    let recs = cluster(&ScenarioOptions { snaplen: None, messages: 2, ..Default::default() });
    assert!(recs.iter().any(|r| r.data.len() > 4096), "full-size frames");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("jumbo.pcap");
    std::fs::write(&p, write_pcap(Vec::new(), PcapOptions { nanosecond: true, ..Default::default() }, &recs).unwrap())
        .unwrap();
    let live = live_report(&ns, &["--xdp-mode", "native"], || {
        let out = ns.replay(&p);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    });
    let off = offline(&p);
    let avg = |f: &Value| f["bytes"].as_u64().unwrap() / f["packets"].as_u64().unwrap();
    assert!(off["flows"].as_array().unwrap().iter().any(|f| avg(f) > 4096), "flows of 4 KB frames");
    assert_json_eq(&comparable(&live), &comparable(&off), "jumbo frames: live report vs offline");
    assert_eq!(live["capture"]["sources"][0]["xdp"], serde_json::json!({"mode": "native", "frags": true}));
    // The single-buffer program cannot take a jumbo MTU in native mode: a clear refusal.
    let dir = tempfile::tempdir().unwrap();
    let out = ns
        .cmd(tests::tools::binary())
        .args(["-i", "vb", "--xdp-mode", "native", "--xdp-frags", "off", "--duration", "1s", "-q", "--json"])
        .arg(dir.path().join("r.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("native") && err.contains("vb") && err.contains("MTU"), "{err}");
}

/// Drivers that refuse multi-buffer programs get the single-buffer one (`--xdp-frags off`
/// here; `auto` falls back to it when the multi-buffer one is refused): the same answers, and
/// the report says which program ran.
#[test]
fn the_single_buffer_program_gives_the_same_answers_and_says_so() {
    if !privileged("the_single_buffer_program_gives_the_same_answers_and_says_so") {
        return;
    }
    let ns = Netns::new("single");
    let file = fixtures::data_dir().join("example.pcap");
    let live = live_report(&ns, &["--xdp-mode", "native", "--xdp-frags", "off"], || {
        let out = ns.replay(&file);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(live["capture"]["sources"][0]["xdp"], serde_json::json!({"mode": "native", "frags": false}));
    assert_json_eq(&comparable(&live), &comparable(&offline(&file)), "live vs offline");
}

/// Replays `file` at the capture's own pacing (`--speed 1`) into the agent started with `args`.
/// The replay runs at real-time priority (`chrt -f`): the other tests run beside it on two
/// cores, and a replay starved for a millisecond would put gaps on the wire that the capture
/// does not have.
fn paced_live(ns: &Netns, file: &Path, args: &[&str]) -> Value {
    let chrt = require("chrt");
    live_report(ns, args, || {
        let out = ns
            .cmd(chrt)
            .args(["-f", "50"])
            .arg(tests::tools::binary())
            .args(["replay", "--speed", "1", "-i", "va"])
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    })
}

/// [`paced_live`], with tcpdump recording what reached `vb` (nanosecond timestamps): the
/// offline side of the comparison then sees the same inter-frame gaps as XDP did, whatever
/// the replay's scheduling made of the capture's pacing.
fn paced_live_and_wire(ns: &Netns, file: &Path, frames: usize, args: &[&str], wire: &Path) -> Value {
    let tcpdump = require("tcpdump");
    let mut dump = ns
        .cmd(tcpdump)
        .args(["-i", "vb", "-U", "--time-stamp-precision", "nano", "-c", &frames.to_string(), "-w"])
        .arg(wire)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let live = paced_live(ns, file, args);
    let deadline = Instant::now() + Duration::from_secs(10);
    while dump.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "tcpdump did not see all {frames} frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    live
}

fn within(live: u64, offline: u64, rel: f64, what: &str) {
    within_or(live, offline, rel, 0, what)
}

/// Within `rel` of each other, or `abs_ns` when that is more.
fn within_or(live: u64, offline: u64, rel: f64, abs_ns: u64, what: &str) {
    let d = (live as f64 - offline as f64).abs();
    let allowed = (rel * offline as f64).max(abs_ns as f64);
    assert!(d <= allowed, "{what}: live {live}, offline {offline} (more than {allowed} ns apart)");
}

/// veth runs XDP over a whole NAPI batch before the packet socket timestamps the batch's
/// frames: on a loaded machine (the suite's other tests on two cores) one frame's two
/// timestamps were seen 48 µs apart, which moves a 2 ms pause by 2.5 %. Pauses are compared
/// within 2 % or this much, whichever is more.
const NAPI_SLACK_NS: u64 = 100_000;

/// Replays of a timing fixture at most (the storm's 150 ms pause, the DCQCN reactions), for one
/// the wire kept as sent: with the other tests busy on both CPUs, three in a row were lost.
const REPLAYS: u32 = 5;

/// Replays `sent` (of `frames` frames) into the agent run with `args`, at its pacing, until the
/// wire keeps the fixture's verdicts (`kept` of the offline report of the wire), at most
/// [`REPLAYS`] times; each time `equal` checks the live report against the wire's offline one.
/// A replay whose wire lost the verdicts is said (after its live-equals-wire checks) and run
/// again; `what` names the test.
fn replay_until_kept(
    ns: &Netns,
    sent: &Path,
    frames: usize,
    args: &[&str],
    what: &str,
    equal: impl Fn(&Value, &Value),
    kept: impl Fn(&Value) -> bool,
) {
    let dir = tempfile::tempdir().unwrap();
    for attempt in 1..=REPLAYS {
        let wire = dir.path().join(format!("wire{attempt}.pcap"));
        let live = paced_live_and_wire(ns, sent, frames, args, &wire);
        let offline = offline_with(&wire, args);
        equal(&live, &offline);
        if kept(&offline) {
            return;
        }
        eprintln!(
            "{what}: replay {attempt} of {REPLAYS} lost the fixture's verdicts on the wire (live equalled the wire)"
        );
    }
    panic!("{what}: {REPLAYS} replays in a row lost the fixture's verdicts on the wire (see above)");
}

/// PFC and incast answers, live through XDP and offline on the same frames as they reached the
/// interface (tcpdump on it, so both sides see the same gaps). Counts, trees, storms, deadlocks
/// and episodes are equal; durations are within 1–2% (the two timestamps of a frame are taken
/// microseconds apart: XDP's and the packet socket's).
#[test]
fn live_fabric_answers_equal_offline() {
    if !privileged("live_fabric_answers_equal_offline") {
        return;
    }
    let ns = Netns::new("fab");
    let dir = tempfile::tempdir().unwrap();
    let data = tests::fixtures::data_dir();

    // Incast, slowed 100× so the replay's pacing (sleeps of tens of µs) cannot blur a 1 ms
    // window; both sides use the same window.
    let episodes = |v: &Value| -> Vec<Value> {
        v["incast"]["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                serde_json::json!([
                    e["dst"],
                    e["peak_senders"],
                    e["senders"],
                    e["bytes"],
                    e["ce_packets"],
                    e["cnp_packets"],
                    e["pfc_frames"]
                ])
            })
            .collect()
    };
    let slow = tests::fabric::incast_scaled(100, "incast_slow.pcap");
    let file = slow.as_sent(dir.path());
    let args = ["--incast-window", "10ms"];
    let wire = dir.path().join("incast_wire.pcap");
    let live = paced_live_and_wire(&ns, &file, slow.frames.len(), &args, &wire);
    let off = offline_with(&wire, &args);
    assert_eq!(episodes(&offline_with(&file, &args)), episodes(&off), "the wire kept the capture's episodes");
    assert_eq!(episodes(&off).len(), 3);
    assert_eq!(episodes(&live), episodes(&off), "incast episodes");
    for (l, o) in
        live["incast"]["episodes"].as_array().unwrap().iter().zip(off["incast"]["episodes"].as_array().unwrap())
    {
        let dur = |e: &Value| e["end_ns"].as_u64().unwrap() - e["start_ns"].as_u64().unwrap();
        within(dur(l), dur(o), 0.02, "episode duration");
    }

    // PFC: the cascade (tree with a victim), the deadlock ring, the storm. Both sides count
    // quanta at 25G, where one XOFF lasts 1.3 ms: the fixtures' 200–300 µs refreshes then keep
    // a pause continuous through the replay's timer jitter (at 100G the slack is 35–135 µs).
    let topo = |t: &str| data.join(t).to_str().unwrap().to_string();
    let speed = || vec!["--link-speed".to_string(), "25G".to_string()];
    let cases: [(&str, Vec<String>); 3] = [
        ("pfc_cascade.pcap", [speed(), vec!["--topology".into(), topo("cascade.toml")]].concat()),
        ("pfc_deadlock.pcap", [speed(), vec!["--topology".into(), topo("ring.toml")]].concat()),
        ("pfc_storm.pcap", speed()),
    ];
    for (name, args) in cases {
        let f = tests::fixtures::all().into_iter().find(|f| f.name == name).unwrap();
        let file = f.as_sent(dir.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for attempt in 1..=REPLAYS {
            let wire = dir.path().join(format!("{name}.wire{attempt}.pcap"));
            let live = paced_live_and_wire(&ns, &file, f.frames.len(), &args, &wire);
            let off = offline_with(&wire, &args);
            assert_json_eq(&comparable(&live)["pfc"], &comparable(&off)["pfc"], &format!("{name}: PFC counters"));
            for (l, o) in
                live["pfc"]["senders"].as_array().unwrap().iter().zip(off["pfc"]["senders"].as_array().unwrap())
            {
                within_or(
                    l["paused_ns"].as_u64().unwrap(),
                    o["paused_ns"].as_u64().unwrap(),
                    0.02,
                    NAPI_SLACK_NS,
                    &format!("{name} paused_ns"),
                );
            }
            let storms = |v: &Value| -> Vec<Value> {
                v["pfc"]["storms"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| serde_json::json!([s["mac"], s["priority"]]))
                    .collect()
            };
            assert_eq!(storms(&live), storms(&off), "{name}: storms");
            let trees = |v: &Value| -> Vec<Value> {
                v["congestion_tree"]["trees"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| {
                        let edges: Vec<Value> = t["edges"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|e| serde_json::json!([e["from"], e["to"]]))
                            .collect();
                        serde_json::json!([t["priority"], t["roots"], edges, t["contributors"], t["victims"]])
                    })
                    .collect()
            };
            assert_eq!(trees(&live), trees(&off), "{name}: congestion trees");
            let cycles = |v: &Value| -> Vec<Value> {
                v["congestion_tree"]["deadlocks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| serde_json::json!([d["priority"], d["cycle"]]))
                    .collect()
            };
            assert_eq!(cycles(&live), cycles(&off), "{name}: deadlocks");
            if name != "pfc_storm.pcap" {
                break;
            }
            // The storm's 150 ms of refreshes must stay one pause on the wire for it to be there
            // at all: a stall of the replay longer than one XOFF (1.3 ms) splits it (seen once in
            // a full CI run, where live equalled the wire: no storm on either). Such a run is
            // said and replayed, at most REPLAYS times (three in a row were lost once in a full
            // run, with the other integration tests busy on both CPUs).
            if storms(&off).len() == 1 {
                within(
                    live["pfc"]["storms"][0]["duration_ns"].as_u64().unwrap(),
                    off["pfc"]["storms"][0]["duration_ns"].as_u64().unwrap(),
                    0.01,
                    "storm duration",
                );
                break;
            }
            assert!(
                attempt < REPLAYS,
                "{REPLAYS} replays in a row lost the storm on the wire (its PFC senders: {})",
                off["pfc"]["senders"]
            );
            eprintln!(
                "live_fabric_answers_equal_offline: replay {attempt} of {REPLAYS} lost the storm on the wire (live equalled the wire; its PFC senders: {}); replaying again",
                off["pfc"]["senders"]
            );
        }
    }
}

/// `--no-timeline`: the program writes no timeline record; the kernel's PSN/NAK counters are
/// still complete, the packet-resolution analyses are empty, and the report says why.
#[test]
fn no_timeline_keeps_counters_and_says_what_is_missing() {
    if !privileged("no_timeline_keeps_counters_and_says_what_is_missing") {
        return;
    }
    let ns = Netns::new("notl");
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::all().into_iter().find(|f| f.name == "gobackn.pcap").unwrap();
    let sent = f.as_sent(dir.path());
    let live = live_report(&ns, &["--no-timeline"], || {
        assert!(ns.replay(&sent).status.success());
    });
    let off = offline(&sent);
    let psn = |v: &Value| -> Vec<Value> {
        v["flows"].as_array().unwrap().iter().map(|f| serde_json::json!([f["psn"], f["naks"]])).collect()
    };
    assert_eq!(psn(&live), psn(&off), "PSN and NAK counters come from the kernel map");
    assert!(off["rtt_ns"]["samples"].as_u64().unwrap() > 0);
    assert_eq!(live["rtt_ns"]["samples"], 0, "no records, no RTT");
    assert_eq!(live["pairs"], serde_json::json!([]));
    assert_eq!(live["capture"]["dropped"]["timeline_full"], 0, "records were off, not lost");
    assert!(live["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "timeline_off"));
}

#[test]
fn cut_mirror_copies_live_equal_whole_frames_offline() {
    if !privileged("cut_mirror_copies_live_equal_whole_frames_offline") {
        return;
    }
    // A truncating mirror session: every copy cut to 128 bytes (RoCE headers kept, payload
    // gone) and sent so, with no original length anywhere.
    let ns = Netns::new("cut");
    ns.mtu(9000); // the whole frames carry 4 KB payloads
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::example();
    // The example keeps 128 bytes of each frame; the rest of a synthesised frame is zeros
    // (payload, ICRC), so padding restores the frames as they were sent.
    let whole = dir.path().join("example.whole.pcap");
    let padded: Vec<_> = f
        .frames
        .iter()
        .map(|fr| {
            let mut r = fr.record.clone();
            r.data.resize(r.orig_len as usize, 0);
            r
        })
        .collect();
    std::fs::write(
        &whole,
        write_pcap(Vec::new(), PcapOptions { nanosecond: true, ..Default::default() }, &padded).unwrap(),
    )
    .unwrap();
    let recs: Vec<_> = f
        .frames
        .iter()
        .map(|fr| {
            let mut r = fr.record.clone();
            r.data.truncate(128);
            r.orig_len = r.data.len() as u32;
            r
        })
        .collect();
    let cut = dir.path().join("example.cut128.pcap");
    std::fs::write(
        &cut,
        write_pcap(Vec::new(), PcapOptions { nanosecond: true, ..Default::default() }, &recs).unwrap(),
    )
    .unwrap();
    let reference = offline(&tests::tools::root().join("tests/data/example.pcap"));
    let counted = |v: &Value| -> Value {
        let flows: Vec<Value> = v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                serde_json::json!([
                    f["src"],
                    f["dst"],
                    f["udp_sport"],
                    f["dst_qp"],
                    f["packets"],
                    f["bytes"],
                    f["opcodes"]
                ])
            })
            .collect();
        serde_json::json!({"classes": v["capture"]["classes"], "flows": flows})
    };
    for (sent, is_cut) in [(&whole, false), (&cut, true)] {
        let live = live_report(&ns, &["--xdp-mode", "native"], || assert!(ns.replay(sent).status.success()));
        // Classes, flows, packets and bytes as the whole frames give them offline.
        assert_eq!(counted(&live), counted(&reference), "live, {}", sent.display());
        assert_eq!(counted(&offline(sent)), counted(&reference), "offline, {}", sent.display());
        // The frames longer than 128 bytes arrive cut, and the report says how many.
        let longer = f.frames.iter().filter(|fr| fr.record.orig_len > 128).count();
        let said = live["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "cut_copies").cloned();
        match is_cut {
            true => assert!(
                said.as_ref().is_some_and(|n| n["message"].as_str().unwrap().starts_with(&format!("{longer} "))),
                "{said:?}"
            ),
            false => assert!(said.is_none(), "whole frames are no cut copies: {said:?}"),
        }
    }
}

/// ERSPAN copies of the same frames from two switches at one collector port: live, the agent
/// names the same two vantage points (by outer source and session) and finds the same hops —
/// frames matched and missing, CE marks added between — as an analysis of the capture. Only
/// the latencies differ (the replay's timing, not the capture's).
#[test]
fn live_vantage_points_of_mirror_origins_equal_offline() {
    if !privileged("live_vantage_points_of_mirror_origins_equal_offline") {
        return;
    }
    let ns = Netns::new("vant");
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::all().into_iter().find(|f| f.name == "vantage_erspan.pcap").unwrap();
    let sent = f.as_sent(dir.path());
    let live = live_report(&ns, &[], || {
        let out = ns.replay(&sent);
        assert!(out.status.success(), "replay: {}", String::from_utf8_lossy(&out.stderr));
    });
    let offline = offline(&sent);
    let hops = |r: &Value| -> Vec<Value> {
        let name = |v: &Value| v.as_str().unwrap().split_once('@').unwrap().1.to_string();
        r["vantage"]["hops"]
            .as_array()
            .unwrap_or_else(|| panic!("no vantage section: {}", r["visibility"]))
            .iter()
            .map(|h| {
                json!([
                    name(&h["from"]),
                    name(&h["to"]),
                    h["flows"],
                    h["frames_matched"],
                    h["frames_missing"],
                    h["ce_marked"]
                ])
            })
            .collect()
    };
    assert_eq!(
        hops(&live),
        vec![
            json!(["192.0.2.1/session 5", "192.0.2.2/session 6", 1, 99, 2, 10]),
            json!(["192.0.2.2/session 6", "192.0.2.1/session 5", 1, 10, 0, 0]),
        ]
    );
    assert_eq!(hops(&live), hops(&offline));
    let origins = |r: &Value| -> Vec<Value> {
        r["vantage"]["points"].as_array().unwrap().iter().map(|p| json!([p["origin"], p["frames"]])).collect()
    };
    assert_eq!(origins(&live), origins(&offline));
    assert_eq!(live["vantage"]["points"][0]["name"], "vb@192.0.2.1/session 5", "the interface is the label");
    assert_json_eq(&comparable(&live), &comparable(&offline), "flows counted once, CE from the last copy");
}

/// Once attached, the agent runs as `--user nobody` with CAP_BPF and CAP_NET_ADMIN only (also
/// in its bounding set), no new privileges — as /proc says of the running process — and still
/// counts every frame and writes its report.
#[test]
fn the_running_agent_keeps_only_what_it_needs() {
    if !privileged("the_running_agent_keeps_only_what_it_needs") {
        return;
    }
    let ns = Netns::new("priv");
    ns.loopback_up();
    let dir = tempfile::tempdir().unwrap();
    // The report is written by nobody: a directory it may write to.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let f = fixtures::example();
    let sent = f.as_sent(dir.path());
    let json = dir.path().join("live.json");
    let port = 21000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let agent = Agent::start(
        &ns,
        &["--interval", "200ms", "-q", "--json", json.to_str().unwrap(), "--user", "nobody", "--metrics", &addr],
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).unwrap().trim().to_string();
    // CAP_NET_ADMIN is bit 12, CAP_BPF bit 39.
    let kept = format!("{:016x}", (1u64 << 12) | (1u64 << 39));
    assert_eq!(field("CapEff:"), kept, "{status}");
    assert_eq!(field("CapPrm:"), kept);
    assert_eq!(field("CapBnd:"), kept);
    assert_eq!(field("CapInh:"), "0000000000000000");
    assert_eq!(field("NoNewPrivs:"), "1");
    assert!(field("Uid:").split_whitespace().all(|u| u == "65534"), "{}", field("Uid:"));
    assert_eq!(ns.get(port, "/healthz").as_deref(), Ok("ok\n"), "the metrics server runs as nobody");
    let mark = ns.mark();
    assert!(ns.replay(&sent).status.success());
    ns.wait_delivered(mark);
    std::thread::sleep(Duration::from_millis(200));
    let (code, _, err) = agent.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let v = tests::tools::read_report(&json);
    assert_eq!(v["capture"]["frames"], f.frames.len(), "every frame counted after the drop");
    // Started as root without --user: root, but with the same two capabilities.
    let agent = Agent::start(&ns, &["-q", "--interval", "200ms"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).unwrap().trim().to_string();
    assert_eq!((field("CapEff:"), field("CapBnd:")), (kept.clone(), kept.clone()), "{status}");
    assert!(field("Uid:").split_whitespace().all(|u| u == "0"));
    let (code, _, err) = agent.stop();
    assert_eq!(code, Some(0), "{err:?}");
    // As the systemd unit starts it: an unprivileged user with three ambient capabilities and
    // no CAP_SETPCAP (setpriv, util-linux). It attaches, and keeps two.
    let setpriv = tests::tools::require("setpriv");
    let three = "+bpf,+net_admin,+perfmon";
    let mut child = ns
        .cmd(&setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps", three, "--ambient-caps", three])
        .args(["--bounding-set", "-all,+bpf,+net_admin,+perfmon", "--"])
        .arg(tests::tools::binary())
        .args(["-i", "vb", "-q", "--duration", "1s", "--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its status once it says it is attached (the drop happens before that line).
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let mut out: Vec<String> = Vec::new();
    for l in lines.by_ref().map_while(Result::ok) {
        let attached = l.contains("attached to vb");
        out.push(l);
        if attached {
            break;
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    out.extend(lines.map_while(Result::ok));
    let _ = child.wait();
    let out = out.join("\n");
    assert!(status.contains(&format!("CapEff:\t{kept}")), "{status}\n{out}");
    assert!(tests::tools::read_report(&json)["kind"] == "live", "{out}");
    // --user needs root; a user that does not exist is refused before anything runs.
    let out = ns.cmd(tests::tools::binary()).args(["-i", "vb", "--user", "no-such-user-here", "-q"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--user no-such-user-here: no such user"));
}

/// With `--checkpoint`, the --json file holds the report so far while the agent runs: after a
/// SIGKILL (no final report), the last checkpoint is a valid report that counts every frame
/// sent before it and says it is a checkpoint; a clean stop replaces it with the final report.
#[test]
fn a_killed_agent_leaves_its_last_checkpoint() {
    if !privileged("a_killed_agent_leaves_its_last_checkpoint") {
        return;
    }
    let ns = Netns::new("ckpt");
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::example();
    let sent = f.as_sent(dir.path());
    let json = dir.path().join("live.json");
    let args = ["--interval", "200ms", "--checkpoint", "400ms", "-q", "--json", json.to_str().unwrap()];
    let mut agent = Agent::start(&ns, &args);
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(1500));
    agent.child.kill().unwrap();
    let _ = agent.child.wait();
    let v = tests::tools::read_report(&json);
    assert_eq!(v["capture"]["frames"], f.frames.len(), "the checkpoint counts what came before it");
    let codes: Vec<&str> = v["visibility"].as_array().unwrap().iter().map(|n| n["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"checkpoint"), "{codes:?}");
    // merge takes the checkpoint of a killed agent as the report it is.
    let out = tests::tools::run(&["merge", "-q", "--json", "-", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["capture"]["frames"], f.frames.len(), "the checkpoint merges");
    // A clean stop writes the final report over it, without the note.
    let agent = Agent::start(&ns, &args);
    let (code, _, err) = agent.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let v = tests::tools::read_report(&json);
    assert!(v["visibility"].as_array().unwrap().iter().all(|n| n["code"] != "checkpoint"));
}

/// Hundreds of idle connections to the metrics port while frames flow: the agent opens no
/// thread for them (its thread count stays what it was), counts every frame, and once they
/// have timed out serves /healthz and /metrics again.
#[test]
fn idle_metrics_clients_neither_stall_nor_grow_the_agent() {
    if !privileged("idle_metrics_clients_neither_stall_nor_grow_the_agent") {
        return;
    }
    let ns = Netns::new("idle");
    ns.loopback_up();
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::example();
    let sent = f.as_sent(dir.path());
    let json = dir.path().join("live.json");
    let port = 22000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let agent = Agent::start(&ns, &["--interval", "200ms", "-q", "--json", json.to_str().unwrap(), "--metrics", &addr]);
    let threads = |pid: u32| -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines().find_map(|l| l.strip_prefix("Threads:")).unwrap().trim().parse().unwrap()
    };
    let before = threads(agent.child.id());
    // 400 connections that never send a byte, held for 3 s (more than the 256 served at once).
    let hold = format!(
        "import socket,time\nss=[]\nfor i in range(400):\n    s=socket.socket(); s.connect(('127.0.0.1',{port})); ss.append(s)\nprint('open',flush=True)\ntime.sleep(3)\n"
    );
    let mut idle = ns
        .cmd(tests::tools::require("python3"))
        .args(["-c", &hold])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(idle.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "open");
    assert!(ns.replay(&sent).status.success(), "frames flow while the connections are open");
    let during = threads(agent.child.id());
    assert_eq!(during, before, "no thread per connection ({before} before, {during} with 400 open)");
    let _ = idle.wait();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(ns.get(port, "/healthz").as_deref(), Ok("ok\n"));
    let text = ns.scrape(port).unwrap();
    assert_eq!(metric(&text, r#"roce_analyzer_frames_total{class="roce"}"#), Some(f.class_counts()[0]), "{text}");
    let (code, _, err) = agent.stop();
    assert_eq!(code, Some(0), "{err:?}");
    assert_eq!(tests::tools::read_report(&json)["capture"]["frames"], f.frames.len());
}

/// `--filter` in the XDP program selects live what the same filter selects offline: the
/// frames, flows and PFC senders analysed and the count of what was left out, over captures
/// with plain, tagged and mirrored (ERSPAN, for `origin`) frames.
#[test]
fn live_filter_equals_offline_filter() {
    if !privileged("live_filter_equals_offline_filter") {
        return;
    }
    let ns = Netns::new("filter");
    let dir = tempfile::tempdir().unwrap();
    for (fixture, expr) in [
        ("example.pcap", "src=10.0.0.1,dscp=26"),
        ("example.pcap", "qp=0x110|0x111 pcp=3"),
        ("ecn_audit.pcap", "host=10.0.1.26/31|10.0.1.20"),
        ("vantage_erspan.pcap", "origin=192.0.2.1"),
    ] {
        let f = fixtures::all().into_iter().find(|f| f.name == fixture).unwrap();
        let sent = f.as_sent(dir.path());
        let live = live_report(&ns, &["--xdp-mode", "native", "--filter", expr], || {
            assert!(ns.replay(&sent).status.success());
        });
        let offline = offline_with(&sent, &["--filter", expr]);
        assert_eq!(live["capture"]["filter"]["expr"], expr);
        let out = live["capture"]["filter"]["frames_out"].as_u64().unwrap();
        assert!(out > 0 && live["capture"]["frames"].as_u64().unwrap() > 0, "{fixture} {expr}: a filter that selects");
        assert_json_eq(
            &comparable(&live),
            &comparable(&offline),
            &format!("{fixture} --filter {expr}: live vs offline"),
        );
    }
}

/// DCQCN reaction live: the DCQCN fixture scaled a thousandfold (10 ms windows, a 1 s
/// horizon), replayed at its own pacing onto a veth while tcpdump records what reached it,
/// gives the offline answers of those frames: the same CNPs judged, reacted and ignored, the
/// same findings, cut ratios within 10 % and reaction and recovery times within one window
/// (the live clock's window grid has another phase). The wire, not the fixture, is what live
/// must equal: a replay stall (seen once in a full CI run, 7 of a window's 33 frames sent)
/// makes a sender that does not react look reacted, to XDP and on the wire alike. The test
/// needs the fixture's verdicts on the wire to show them live, so a run whose wire lost them
/// is said (after its live-equals-wire checks) and replayed, at most three times.
#[test]
fn live_dcqcn_reaction_equals_offline() {
    if !privileged("live_dcqcn_reaction_equals_offline") {
        return;
    }
    let ns = Netns::new("dcqcn");
    let dir = tempfile::tempdir().unwrap();
    let f = tests::transport::dcqcn_scaled(1000, "dcqcn_slow.pcap");
    let sent = f.as_sent(dir.path());
    let args =
        ["--rate-window", "10ms", "--dcqcn-horizon", "1s", "--dcqcn-slow-recovery", "500ms", "--cnp-interval", "50ms"];
    let rows = |r: &Value| -> Vec<(String, u64, u64, u64)> {
        r["dcqcn"]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let n = |k: &str| f[k].as_u64().unwrap();
                (f["src"].as_str().unwrap().to_string(), n("cnps"), n("reacted"), n("unreacted_cnps"))
            })
            .collect()
    };
    let codes = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> =
            r["audit"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap().to_string()).collect();
        v.sort();
        v
    };
    let fixture = offline_with(&sent, &args);
    assert_eq!(rows(&fixture).len(), 4, "{}", fixture["dcqcn"]);
    assert!(
        ["cnp_ignored", "slow_recovery", "cnp_storm"].iter().all(|c| codes(&fixture).contains(&c.to_string())),
        "the fixture's findings: {:?}",
        codes(&fixture)
    );
    let equal = |live: &Value, offline: &Value| {
        assert_eq!(rows(live), rows(offline), "live {} wire {}", live["dcqcn"], offline["dcqcn"]);
        for (l, o) in
            live["dcqcn"]["flows"].as_array().unwrap().iter().zip(offline["dcqcn"]["flows"].as_array().unwrap())
        {
            if let (Some(lc), Some(oc)) = (l["cut_ratio_p50"].as_f64(), o["cut_ratio_p50"].as_f64()) {
                assert!((lc - oc).abs() <= 0.1 * oc, "{}: cut {lc} live, {oc} on the wire", o["src"]);
            }
            for k in ["reaction_ns_p50", "recovery_ns_p50"] {
                match (l[k].as_u64(), o[k].as_u64()) {
                    (Some(a), Some(b)) => {
                        assert!(a.abs_diff(b) <= 10_000_000, "{}: {k} {a} live, {b} on the wire", o["src"])
                    }
                    (a, b) => assert_eq!(a, b, "{}: {k}", o["src"]),
                }
            }
        }
        assert_eq!(codes(live), codes(offline), "findings live and on the wire");
    };
    let kept = |offline: &Value| rows(offline) == rows(&fixture) && codes(offline) == codes(&fixture);
    replay_until_kept(&ns, &sent, f.frames.len(), &args, "live_dcqcn_reaction_equals_offline", equal, kept);
}

/// ECN before PFC (issue 42 §1), live through XDP and offline on the frames as they reached the
/// interface: `ecn_lead.pcap` (tests/src/tuning.rs) a thousand times slower (a frame a ms, a
/// replay keeps that pace; a frame a µs it does not, and the marks drift away from the onsets),
/// `--ecn-lead 100ms`, replayed at its own pacing, tcpdump on the veth. Per sender and priority
/// the onsets and those preceded by marks are equal, the lead within 2 % or the NAPI slack,
/// and `pfc_before_ecn` names the same sender. As for DCQCN, a run whose wire lost
/// the fixture's verdicts (2 of 3 onsets preceded, 0 of 2) is said and replayed.
#[test]
fn live_ecn_before_pfc_equals_offline() {
    if !privileged("live_ecn_before_pfc_equals_offline") {
        return;
    }
    let ns = Netns::new("ecnlead");
    let dir = tempfile::tempdir().unwrap();
    let f = tests::tuning::ecn_lead_scaled(1000, "ecn_lead_slow.pcap");
    let sent = f.as_sent(dir.path());
    let args = ["--ecn-lead", "100ms"];
    let rows = |r: &Value| -> Vec<(String, u64, u64)> {
        r["pfc"]["senders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let l = &s["ecn_lead"];
                (s["mac"].as_str().unwrap().to_string(), l["onsets"].as_u64().unwrap(), l["preceded"].as_u64().unwrap())
            })
            .collect()
    };
    let named = |r: &Value| -> Vec<String> {
        r["audit"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "pfc_before_ecn")
            .map(|f| f["message"].as_str().unwrap().split(' ').next().unwrap().to_string())
            .collect()
    };
    let fixture = offline_with(&sent, &args);
    let want = vec![("02:00:00:00:aa:01".to_string(), 3, 2), ("02:00:00:00:bb:01".to_string(), 2, 0)];
    assert_eq!(rows(&fixture), want);
    let equal = |live: &Value, offline: &Value| {
        assert_eq!(rows(live), rows(offline), "live {} wire {}", live["pfc"]["senders"], offline["pfc"]["senders"]);
        assert_eq!(named(live), named(offline));
        for (l, o) in
            live["pfc"]["senders"].as_array().unwrap().iter().zip(offline["pfc"]["senders"].as_array().unwrap())
        {
            match (l["ecn_lead"]["lead_ns_p50"].as_u64(), o["ecn_lead"]["lead_ns_p50"].as_u64()) {
                (Some(a), Some(b)) => within_or(a, b, 0.02, NAPI_SLACK_NS, "ecn_lead.lead_ns_p50"),
                (a, b) => assert_eq!(a, b, "{}: lead", o["mac"]),
            }
        }
    };
    let kept = |offline: &Value| rows(offline) == want && named(offline) == ["02:00:00:00:bb:01"];
    replay_until_kept(&ns, &sent, f.frames.len(), &args, "live_ecn_before_pfc_equals_offline", equal, kept);
}

/// The first CNP judged (issue 42 §4), live through XDP and offline on the frames as they
/// reached the interface: `first_cnp.pcap` (tests/src/tuning.rs) a thousand times slower, the
/// DCQCN windows scaled alike, replayed at its pacing, tcpdump on the veth. Per flow the CNPs,
/// those reacted to, ignored and unjudged are equal live and on the wire, and so is
/// `cnp_ignored`; the fixture's verdicts stated by hand (10.0.3.47: its one CNP reacted to;
/// 10.0.3.49: three ignored; none unjudged, though no CE mark came before any of them). A run
/// whose wire lost them is said and replayed, as for DCQCN.
#[test]
fn live_first_cnp_is_judged_as_offline() {
    if !privileged("live_first_cnp_is_judged_as_offline") {
        return;
    }
    let ns = Netns::new("firstcnp");
    let dir = tempfile::tempdir().unwrap();
    let f = tests::tuning::first_cnp_scaled(1000, "first_cnp_slow.pcap");
    let sent = f.as_sent(dir.path());
    let args =
        ["--rate-window", "10ms", "--dcqcn-horizon", "1s", "--dcqcn-slow-recovery", "500ms", "--cnp-interval", "50ms"];
    let rows = |r: &Value| -> Vec<(String, u64, u64, u64, u64)> {
        r["dcqcn"]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let n = |k: &str| f[k].as_u64().unwrap();
                let src = f["src"].as_str().unwrap().to_string();
                (src, n("cnps"), n("reacted"), n("unreacted_cnps"), n("no_rate_before"))
            })
            .collect()
    };
    let ignored = |r: &Value| -> Vec<Value> {
        r["audit"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "cnp_ignored")
            .map(|f| f["flows"].clone())
            .collect()
    };
    let want = vec![("10.0.3.47".to_string(), 1, 1, 0, 0), ("10.0.3.49".to_string(), 3, 0, 3, 0)];
    let sorted = |r: &Value| {
        let mut v = rows(r);
        v.sort();
        v
    };
    let fixture = offline_with(&sent, &args);
    assert_eq!(sorted(&fixture), want, "{}", fixture["dcqcn"]);
    assert_eq!(ignored(&fixture).len(), 1);
    let equal = |live: &Value, offline: &Value| {
        assert_eq!(sorted(live), sorted(offline), "live {} wire {}", live["dcqcn"], offline["dcqcn"]);
        assert_eq!(ignored(live), ignored(offline), "cnp_ignored live and on the wire");
    };
    let kept = |offline: &Value| sorted(offline) == want && ignored(offline) == ignored(&fixture);
    replay_until_kept(&ns, &sent, f.frames.len(), &args, "live_first_cnp_is_judged_as_offline", equal, kept);
}
