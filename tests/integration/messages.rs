//! Messages, completion times and the tail explained, on the messages fixture
//! (tests/src/messages.rs): every number stated by hand from how the fixture was built; the
//! completion times of several captures recomputed independently from tshark's fields; gates,
//! metrics, export and merge over the section.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tests::fixtures::data_dir;
use tests::tools::{metric, report, run, tshark_fields};

fn flow(m: &Value, src: u8) -> &Value {
    m["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["src"] == format!("10.0.3.{src}"))
        .unwrap_or_else(|| panic!("no messages of 10.0.3.{src}"))
}

/// (messages, min, p50, max) of a flow's completion times.
fn mct(m: &Value, src: u8) -> (u64, u64, u64, u64) {
    let f = flow(m, src);
    let p = &f["mct_ns"];
    (
        f["messages"].as_u64().unwrap(),
        p["min"].as_u64().unwrap(),
        p["p50"].as_u64().unwrap(),
        p["max"].as_u64().unwrap(),
    )
}

const US: u64 = 1000;

#[test]
fn every_kind_of_message_is_timed_as_built() {
    let r = report("messages.pcap", &["--tail-threshold", "20us"]);
    let m = &r["messages"];
    assert_eq!(m["completed"], 56);
    assert_eq!(m["by_kind"], json!({"send": 2, "write": 52, "read": 1, "atomic": 1}));
    assert_eq!((m["pending"].as_u64(), m["partial"].as_u64(), m["abandoned"].as_u64()), (Some(0), Some(0), Some(0)));
    // Coalesced: SEND 2560 B completed at 10 µs, WRITE 4096 B at 7 µs (one ACK), WRITE 8192 B at 5 µs.
    assert_eq!(mct(m, 1), (3, 5 * US, 7 * US, 10 * US));
    assert_eq!(flow(m, 1)["bytes"], 2560 + 4096 + 8192);
    // Slowdown over serialisation at 100 Gbit/s plus the smallest RTT sample so far: 10 µs /
    // (205 ns + 7 µs), 7 µs / (328 ns + 7 µs), 5 µs / (656 ns + 4 µs): 1.387, 0.955, 1.073.
    assert_eq!(flow(m, 1)["slowdown_p50"], 1.073);
    // READ of 8192 B: 8 µs to its last response; FETCH&ADD: 3 µs.
    assert_eq!(mct(m, 3), (2, 3 * US, 3 * US, 8 * US));
    assert_eq!(flow(m, 3)["bytes"], 8192 + 8);
    // Go-back-N: 12 µs from the first transmission; the timeout retransmission 33 µs.
    assert_eq!(mct(m, 5), (1, 12 * US, 12 * US, 12 * US));
    assert_eq!(mct(m, 13), (1, 33 * US, 33 * US, 33 * US));
    // The rate-cut WRITE: 206 packets of 1000 B in 305 µs.
    assert_eq!(mct(m, 11), (1, 305 * US, 305 * US, 305 * US));
    assert_eq!(flow(m, 11)["bytes"], 206_000);
    // UC: one SEND of 1500 B over 4 µs; UD: one of 100 B.
    let t = &m["transfers"];
    assert_eq!(
        (t["uc_messages"].as_u64(), t["uc_bytes"].as_u64(), t["uc_transfer_ns"]["max"].as_u64()),
        (Some(1), Some(1500), Some(4 * US))
    );
    assert_eq!((t["ud_messages"].as_u64(), t["ud_bytes"].as_u64()), (Some(1), Some(100)));
    // Size classes: ≤ 4 KiB: SEND 2560, WRITE 4096, atomic, go-back-N, pause, timeout, nothing,
    // RNR, gap, and the ring's 40: 49; ≤ 64 KiB: WRITE 8192, READ 8192, the incast's four 21000.
    let classes: Vec<(String, u64)> = m["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().into(), c["messages"].as_u64().unwrap()))
        .collect();
    assert_eq!(classes, [("le_4KiB".into(), 49), ("le_64KiB".into(), 6), ("le_1MiB".into(), 1), ("gt_1MiB".into(), 0)]);
}

#[test]
fn the_tail_is_explained_cause_by_cause() {
    let r = report("messages.pcap", &["--tail-threshold", "20us"]);
    let tail = &r["messages"]["tail"];
    // Slower than 20 µs: pause 50, rate cut 305, timeout 33, the incast's 40/39/38/37,
    // nothing 90, RNR 23, gap 60.
    assert_eq!((tail["messages"].as_u64(), tail["examined"].as_u64()), (Some(10), Some(10)));
    let causes: BTreeMap<String, (u64, u64)> = tail["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["cause"].as_str().unwrap().into(), (c["messages"].as_u64().unwrap(), c["overlap_ns"].as_u64().unwrap()))
        })
        .collect();
    let want: BTreeMap<String, (u64, u64)> = [
        // Four messages, each in the episode from 3 µs to its ACK at 40 µs.
        ("incast", (4, 4 * 37 * US)),
        // The timeout's last 3 µs, and the RNR'd SEND's 3 µs after it was sent again.
        ("retransmission", (2, 6 * US)),
        ("capture_gap", (1, 60 * US)),
        // 2500 quanta at 100 Gbit/s.
        ("pause", (1, 12_800)),
        // From the cut at 110 µs to the ACK at 305 µs.
        ("rate_cut", (1, 195 * US)),
        // From the RNR NAK at 2 µs to the ACK at 23 µs.
        ("rnr", (1, 21 * US)),
        ("unexplained", (1, 0)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(causes, want);
    let pause = tail["causes"].as_array().unwrap().iter().find(|c| c["cause"] == "pause").unwrap();
    assert_eq!(pause["source"], "priority 3 from 02:00:00:00:99:01");
    assert_eq!(tail["worst"][0]["mct_ns"], 305 * US);
    assert_eq!(tail["worst"][0]["causes"], json!([{"cause": "rate_cut", "overlap_ns": 195 * US}]));
    let lead = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "tail_dominated_by").unwrap();
    assert_eq!(
        lead["message"],
        "p99.9 305.0 µs: 40 % of 10 tail messages went to a destination in an incast episode (incast)"
    );
    // The summary leads with it.
    let p = data_dir().join("messages.pcap");
    let out = run(&["-r", p.to_str().unwrap(), "--tail-threshold", "20us"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let first: Vec<&str> = text.lines().take(6).collect();
    assert!(first[2].starts_with("  1. info    [tail_dominated_by] p99.9 305.0 µs: 40 %"), "{first:#?}");
    // Without the flag each class's p99 is its threshold: of ≤ 4 KiB (49 messages, p99 the
    // 49th: 90 µs) nothing is slower; the other classes have fewer than 100 messages.
    let r = report("messages.pcap", &[]);
    assert_eq!(r["messages"]["tail"]["messages"], 0);
}

/// tests/src/messages.rs `queueing`: two vantage points and a queue between them.
#[test]
fn queueing_between_two_points_explains_the_tail() {
    let d = data_dir();
    let (leaf, spine) = (d.join("queueing_leaf.pcap"), d.join("queueing_spine.pcap"));
    let (leaf, spine) = (format!("leaf={}", leaf.display()), format!("spine={}", spine.display()));
    let args = ["-q", "-r", &leaf, "-r", &spine, "--tail-threshold", "10us", "--json", "-"];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &r["messages"];
    assert_eq!(m["completed"], 100);
    assert_eq!((m["mct_ns"]["min"].as_u64(), m["mct_ns"]["max"].as_u64()), (Some(5 * US), Some(12 * US)));
    let tail = &m["tail"];
    assert_eq!((tail["messages"].as_u64(), tail["examined"].as_u64()), (Some(10), Some(10)));
    assert_eq!(
        tail["causes"],
        json!([{"cause": "queueing", "messages": 10, "share": 1.0, "overlap_ns": 118 * US, "source": "leaf→spine"}])
    );
    // The first of the ten (400 to 412 µs) met the queue all its time, the last (490 to 502 µs)
    // its first 10 µs.
    let first = tail["worst"].as_array().unwrap().iter().min_by_key(|w| w["start_ns"].as_u64()).unwrap();
    assert_eq!(first["causes"], json!([{"cause": "queueing", "overlap_ns": 12 * US}]));
    let last = tail["worst"].as_array().unwrap().iter().max_by_key(|w| w["start_ns"].as_u64()).unwrap();
    assert_eq!(last["causes"], json!([{"cause": "queueing", "overlap_ns": 10 * US}]));
    let lead = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "tail_dominated_by").unwrap();
    assert_eq!(
        lead["message"],
        "p99.9 12.0 µs: 100 % of 10 tail messages crossed a hop while most of its frames took longer than its p90 (leaf→spine) (queueing)"
    );
    // One point alone sees no hop: the same tail is unexplained there.
    let r = report("queueing_leaf.pcap", &["--tail-threshold", "10us"]);
    let causes = &r["messages"]["tail"]["causes"];
    assert_eq!(causes[0]["cause"], "unexplained", "{causes}");
}

#[test]
fn steadiness_and_the_ring_straggler() {
    let r = report("messages.pcap", &[]);
    let m = &r["messages"];
    let steady = m["steadiness"]["flows"].as_array().unwrap().iter().find(|f| f["src"] == "10.0.3.11").unwrap();
    // Windows 1-10 at 10 × 1000 B / 10 µs (8 Gbit/s), 11-29 at 5 (4 Gbit/s); the first and
    // last (partial) left out: 29 windows, p5 and p50 4 Gbit/s, p95 8 Gbit/s (1 % buckets).
    assert_eq!(steady["windows"], 29);
    let near = |v: &Value, want: f64| (v.as_f64().unwrap() / want - 1.0).abs() < 0.01;
    assert!(near(&steady["p5_bps"], 4e9) && near(&steady["p50_bps"], 4e9) && near(&steady["p95_bps"], 8e9), "{steady}");
    let ring = &m["rings"]["rings"][0];
    assert_eq!(ring["hosts"], json!(["10.0.3.31", "10.0.3.32", "10.0.3.33", "10.0.3.34"]));
    assert_eq!(ring["straggler"], "10.0.3.33 → 10.0.3.34");
    assert_eq!(ring["straggler_ratio"], 2.0);
    assert_eq!(m["rings"]["rings"].as_array().unwrap().len(), 1, "no other ring");
    let f = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "ring_straggler").unwrap();
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["flows"][0]["src"], "10.0.3.33");
    // Above the ratio it is not held back.
    let r = report("messages.pcap", &["--straggler-ratio", "2.5"]);
    assert!(!r["audit"].as_array().unwrap().iter().any(|f| f["code"] == "ring_straggler"));
}

#[test]
fn gates_metrics_export_and_merge_carry_the_section() {
    let p = data_dir().join("messages.pcap");
    let p = p.to_str().unwrap();
    let out = run(&["-q", "-r", p, "--fail-on", "messages.mct_ns.p999>300us", "--fail-on", "messages.tail.messages>0"]);
    assert_eq!(out.status.code(), Some(2), "a duration is not a number: {}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["-q", "-r", p, "--fail-on", "messages.mct_ns.p999>300000"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["-q", "-r", p, "--fail-on", "messages.classes.0.messages!=49"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // Metrics: a histogram per size class, tail messages per cause.
    let r: analyzer::model::Report =
        serde_json::from_value(report("messages.pcap", &["--tail-threshold", "20us"])).unwrap();
    let text = analyzer::report::render::metrics::render(&r, 10, &[]);
    assert_eq!(metric(&text, "roce_analyzer_message_completion_seconds_count{size_class=\"le_4KiB\"}"), Some(49));
    assert_eq!(metric(&text, "roce_analyzer_message_completion_seconds_count{size_class=\"le_1MiB\"}"), Some(1));
    // The 305 µs message is in every bucket from the 512 µs bound on, none below.
    let buckets: Vec<(f64, u64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("roce_analyzer_message_completion_seconds_bucket{le=\""))
        .filter_map(|l| l.split_once("\",size_class=\"le_1MiB\"} "))
        .map(|(le, n)| (le.parse().unwrap(), n.parse().unwrap()))
        .collect();
    assert_eq!(buckets.len(), 22, "{text}");
    assert!(buckets.iter().all(|(le, n)| *n == (*le >= 305e-6) as u64), "{buckets:?}");
    assert_eq!(metric(&text, "roce_analyzer_tail_messages_total{cause=\"incast\"}"), Some(4));
    // Merge of the report with itself: counts doubled, histograms added.
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    for f in [&a, &b] {
        assert!(run(&["-q", "-r", p, "--json", f.to_str().unwrap()]).status.success());
    }
    let out = run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &merged["messages"];
    assert_eq!(m["completed"], 112);
    assert_eq!(m["classes"][0]["messages"], 98);
    assert_eq!(m["mct_ns"]["samples"], 112);
    assert!(merged["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "messages_not_merged"));
    // Export: a messages line per interval, rebuilt by merge from the export.
    let ex = dir.path().join("export");
    assert!(run(&["-q", "-r", p, "--export", ex.to_str().unwrap()]).status.success());
    let out = run(&["merge", ex.to_str().unwrap(), "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let from_export: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_export["messages"]["completed"], 56);
    assert_eq!(from_export["messages"]["flows"], json!([]), "per-flow lists are the report's");
}

/// One message as an independent reading of tshark's fields computes it: per request flow
/// (src, dst, dst QP), in time order; a response of the reverse host pair with an ACK-type
/// AETH completes, oldest first, every message whose last PSN it reaches (a READ RESPONSE
/// FIRST not its own READ); repeated PSNs are retransmissions.
#[derive(Debug)]
struct Open {
    first: u32,
    last: u32,
    start: u128,
    read: bool,
}

fn tshark_mcts(file: &str) -> BTreeMap<(String, String, u64), Vec<u64>> {
    let fields = [
        "frame.time_epoch",
        "ip.src",
        "ip.dst",
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.aeth.syndrome",
    ];
    let rows = tshark_fields(&data_dir().join(file), &fields, Some("infiniband"));
    let num = |s: &str| {
        if let Some(h) = s.strip_prefix("0x") { u64::from_str_radix(h, 16).unwrap() } else { s.parse().unwrap() }
    };
    // Per request flow: messages sent, its next PSN, the message being sent.
    type Queue = (Vec<Open>, Option<u32>, Option<Open>);
    let mut queues: BTreeMap<(String, String, u64), Queue> = BTreeMap::new();
    let mut done: BTreeMap<(String, String, u64), Vec<u64>> = BTreeMap::new();
    for c in &rows {
        let (secs, frac) = c[0].split_once('.').unwrap();
        let t = secs.parse::<u128>().unwrap() * 1_000_000_000 + format!("{frac:0<9}")[..9].parse::<u128>().unwrap();
        let (src, dst, opcode, qp, psn) = (c[1].clone(), c[2].clone(), num(&c[3]) as u8, num(&c[4]), num(&c[5]) as u32);
        if opcode >> 5 != 0 {
            continue; // RC only
        }
        let o = opcode & 0x1f;
        if (0x0D..=0x12).contains(&o) {
            // A response: which request flow of the reverse pair?
            let syn = c.get(6).filter(|s| !s.is_empty()).map(|s| num(s));
            let Some(syn) = syn else { continue };
            if syn >> 5 != 0 {
                continue; // NAK
            }
            // The request flow of the reverse pair whose PSNs sent so far reach this one (two
            // QPs between the same hosts have far-apart PSNs).
            let keys: Vec<_> = queues
                .iter()
                .filter(|(k, (_, next, _))| {
                    let near =
                        |n: u32| n.wrapping_sub(psn) & 0xFF_FFFF <= 1024 || psn.wrapping_sub(n) & 0xFF_FFFF <= 1024;
                    k.0 == dst && k.1 == src && next.is_some_and(near)
                })
                .map(|(k, _)| k.clone())
                .collect();
            assert_eq!(keys.len(), 1, "{file}: the request flow of a response to {src}");
            let (q, _, _) = queues.get_mut(&keys[0]).unwrap();
            while let Some(m) = q.first() {
                let reached = psn.wrapping_sub(m.last) & 0xFF_FFFF < 1 << 23;
                if !reached || (m.read && psn == m.last && o == 0x0D) {
                    break;
                }
                let m = q.remove(0);
                done.entry(keys[0].clone()).or_default().push((t - m.start) as u64);
            }
            continue;
        }
        let key = (src, dst, qp);
        let (q, next, open) = queues.entry(key).or_default();
        if let Some(n) = *next
            && n.wrapping_sub(psn) & 0xFF_FFFF != 0
            && n.wrapping_sub(psn) & 0xFF_FFFF < 1 << 23
        {
            continue; // retransmission
        }
        if let Some(last) = q.last_mut().filter(|m| m.read && m.first == m.last && next.is_some()) {
            last.last = psn.wrapping_sub(1) & 0xFF_FFFF; // the READ's span
        }
        *next = Some(psn.wrapping_add(1) & 0xFF_FFFF);
        match o {
            0x00 | 0x06 => *open = Some(Open { first: psn, last: psn, start: t, read: false }),
            0x02 | 0x03 | 0x08 | 0x09 | 0x16 => {
                if let Some(mut m) = open.take() {
                    m.last = psn;
                    q.push(m);
                }
            }
            0x04 | 0x05 | 0x0A | 0x0B | 0x13 | 0x14 | 0x17 => {
                q.push(Open { first: psn, last: psn, start: t, read: false })
            }
            0x0C => q.push(Open { first: psn, last: psn, start: t, read: true }),
            _ => {}
        }
    }
    done
}

#[test]
fn completion_times_equal_an_independent_computation_from_tshark() {
    for file in ["messages.pcap", "example.pcap", "rtt.pcap", "reads.pcap", "gobackn.pcap"] {
        let want = tshark_mcts(file);
        let r = report(file, &[]);
        let mut checked = 0;
        for (k, mut v) in want {
            let f = r["messages"]["flows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["src"] == k.0 && f["dst"] == k.1 && f["dst_qp"] == k.2)
                .unwrap_or_else(|| panic!("{file}: no flow {k:?}"));
            v.sort_unstable();
            let p50 = v[v.len().div_ceil(2) - 1];
            let got = &f["mct_ns"];
            assert_eq!(
                (
                    f["messages"].as_u64().unwrap(),
                    got["min"].as_u64().unwrap(),
                    got["p50"].as_u64().unwrap(),
                    got["max"].as_u64().unwrap()
                ),
                (v.len() as u64, v[0], p50, *v.last().unwrap()),
                "{file}: {k:?}"
            );
            checked += v.len();
        }
        assert!(checked > 0, "{file}: tshark found messages");
        assert_eq!(checked as u64, r["messages"]["completed"].as_u64().unwrap(), "{file}: every completed message");
    }
}
