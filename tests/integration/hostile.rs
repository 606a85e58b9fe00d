//! One-sided and hostile traffic (issue 11): what a vantage point that sees one direction only,
//! or an attacker, delivers must cost bounded time and memory, and never stall the agent.

use std::path::Path;
use std::time::{Duration, Instant};

use analyzer::analyses::rtt::MAX_WAITING;
use tests::netns::{Agent, Netns, privileged};
use tests::synth::Roce;
use tests::synth::pcap::{PcapOptions, Record, write_pcap};
use tests::tools::{read_report, require, run};

/// `n` RC SEND ONLY requests with AckReq on one flow, 1 µs apart, and never an ACK: what a
/// mirror of one direction delivers.
fn one_direction(path: &Path, n: u32) {
    let recs: Vec<Record> = (0..n)
        .map(|psn| {
            let mut r = Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, 0x04, 0x21, psn).payload(64);
            r.bth.ack_req = true;
            Record::new(1_700_000_000_000_000_000 + psn as u64 * 1_000, r.build())
        })
        .collect();
    std::fs::write(path, write_pcap(Vec::new(), PcapOptions::default(), &recs).unwrap()).unwrap();
}

#[test]
fn one_direction_requests_cost_linear_time_offline() {
    let dir = tempfile::tempdir().unwrap();
    let mut secs = Vec::new();
    for n in [50_000u32, 100_000, 200_000] {
        let p = dir.path().join(format!("one_direction_{n}.pcap"));
        one_direction(&p, n);
        let t = Instant::now();
        let out = run(&["-q", "-r", p.to_str().unwrap(), "--json", "-"]);
        secs.push(t.elapsed().as_secs_f64());
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // Stated by hand: none acknowledged, none older than the 1 s timeout at the end; a flow
        // keeps MAX_WAITING of them and counts the older ones it let go.
        let rtt = &v["rtt_ns"];
        assert_eq!(rtt["samples"], 0);
        assert_eq!(rtt["timeouts"], 0);
        assert_eq!(rtt["pending"].as_u64(), Some(MAX_WAITING.min(n as usize) as u64));
        assert_eq!(rtt["pending_evicted"].as_u64(), Some((n as u64).saturating_sub(MAX_WAITING as u64)));
        assert_eq!(v["flows"][0]["packets"].as_u64(), Some(n as u64));
    }
    // Linear: 4x the frames in about 4x the time (quadratic would be 16x). Loose, for a loaded
    // machine; BENCHMARKS.md has the measured numbers.
    let ratio = secs[2] / secs[0];
    assert!(ratio < 8.0, "200k vs 50k one-direction requests: {ratio:.1}x the time ({secs:?})");
}

fn roce_frames(text: &str) -> u64 {
    tests::tools::metric(text, r#"roce_analyzer_frames_total{class="roce"}"#).unwrap_or(0)
}

#[test]
fn a_one_direction_flood_neither_stalls_metrics_nor_outlasts_duration() {
    if !privileged("a_one_direction_flood_neither_stalls_metrics_nor_outlasts_duration") {
        return;
    }
    let ns = Netns::new("flood");
    ns.loopback_up();
    let dir = tempfile::tempdir().unwrap();
    let flood = dir.path().join("flood.pcap");
    one_direction(&flood, 200_000);
    let json = dir.path().join("live.json");
    let port = 20000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let duration = Duration::from_secs(8);
    let agent = Agent::start(
        &ns,
        &["--duration", "8s", "--interval", "500ms", "-q", "--json", json.to_str().unwrap(), "--metrics", &addr],
    );
    let started = Instant::now();
    // The flood: the capture again and again at full speed, for longer than the agent runs.
    let mut replay = ns
        .cmd(tests::tools::binary())
        .args(["replay", flood.to_str().unwrap(), "-i", "va", "--loop", "50"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let first = ns.scrape(port).expect("metrics answer during the flood");
    std::thread::sleep(Duration::from_secs(2));
    let second = ns.scrape(port).expect("metrics answer during the flood");
    let (a, b) = (roce_frames(&first), roce_frames(&second));
    assert!(a > 0 && b > a, "RoCE frames in /metrics advance during the flood: {a} then {b}");
    // --duration holds: the agent ends by itself, with its report, while the flood goes on.
    let mut agent = agent;
    let status = loop {
        if let Some(s) = agent.child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < duration + Duration::from_secs(10), "the agent outlasted --duration 8s by 10 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = replay.kill();
    let _ = replay.wait();
    assert!(status.success(), "{status}");
    let v = read_report(&json);
    let roce = v["capture"]["classes"]["roce"].as_u64().unwrap();
    assert!(roce >= b, "the report has every frame the metrics showed ({roce} < {b})");
    // The requests' RTT state stayed bounded: at most MAX_WAITING wait, the rest timed out or
    // were let go, and records the agent could not take are counted, not lost silently.
    let rtt = &v["rtt_ns"];
    assert!(rtt["pending"].as_u64().unwrap() <= MAX_WAITING as u64, "{rtt}");
    assert!(rtt["timeouts"].as_u64().unwrap() + rtt["pending_evicted"].as_u64().unwrap() > 0, "{rtt}");
    for reason in ["timeline_full", "undrained"] {
        assert!(v["capture"]["dropped"][reason].is_u64(), "{reason} is reported");
    }
}

/// A name that would retitle and clear a terminal, with a newline, a quote and a backslash.
const HOSTILE: &str = "x\u{1b}]0;owned\u{7}\u{1b}[2J\"\\\n";

/// Bidirectional controls: they reorder what a terminal or page shows around them.
fn bidi(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn no_raw_controls(text: &str, what: &str) {
    let bad: Vec<char> = text.chars().filter(|c| (c.is_control() && *c != '\n') || bidi(*c)).collect();
    assert!(bad.is_empty(), "{what} carries raw control characters {bad:?}:\n{text}");
}

#[test]
fn names_cannot_inject_into_the_summary_or_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{HOSTILE}.pcap"));
    std::fs::copy(tests::tools::root().join("tests/data/example.pcap"), &file).unwrap();
    let out = run(&["-r", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    no_raw_controls(&text, "the summary");
    assert!(text.contains("x\\x1b]0;owned\\x07\\x1b[2J\"\\\\\\x0a.pcap"), "{text}");
    // Its source line is one line: the newline in the name is written out.
    assert_eq!(text.lines().filter(|l| l.starts_with("  source ")).count(), 1, "{text}");
    let missing = dir.path().join(format!("{HOSTILE}missing.pcap"));
    let out = run(&["-r", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    no_raw_controls(&err, "the error");
    assert!(err.contains("\\x1b]0;owned"), "{err}");
}

#[test]
fn topology_names_cannot_break_the_graphviz_output() {
    let dir = tempfile::tempdir().unwrap();
    let topo = std::fs::read_to_string(tests::tools::root().join("tests/data/cascade.toml")).unwrap();
    // TOML basic-string escapes for a name with a quote, a newline, an escape sequence and a
    // trailing backslash (which ended the quoted DOT string early before names were escaped).
    let toml_name = r#"spine\"1\n\u001B[2J\\"#;
    let topo = topo.replace("spine1", toml_name).replace("leaf1", r"le\u202Eaf1\u2066");
    assert_ne!(topo, std::fs::read_to_string(tests::tools::root().join("tests/data/cascade.toml")).unwrap());
    let t = dir.path().join("hostile.toml");
    std::fs::write(&t, topo).unwrap();
    let dotfile = dir.path().join("trees.dot");
    let pcap = tests::tools::root().join("tests/data/pfc_cascade.pcap");
    let out =
        run(&["-r", pcap.to_str().unwrap(), "--topology", t.to_str().unwrap(), "--dot", dotfile.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    no_raw_controls(&String::from_utf8(out.stdout).unwrap(), "the summary with a hostile topology");
    let dot_text = std::fs::read_to_string(&dotfile).unwrap();
    no_raw_controls(&dot_text, "the DOT output");
    assert!(dot_text.contains("spine"), "the device is in the tree:\n{dot_text}");
    assert!(dot_text.contains(r"le\u{202e}af1\u{2066}"), "the bidirectional controls written out:\n{dot_text}");
    // Graphviz itself reads it.
    let svg = std::process::Command::new(require("dot")).args(["-Tsvg"]).arg(&dotfile).output().unwrap();
    assert!(svg.status.success(), "dot rejects the output: {}\n{dot_text}", String::from_utf8_lossy(&svg.stderr));
    assert!(String::from_utf8_lossy(&svg.stdout).contains("<svg"));
}

/// The example's report (JSON), for mutating.
fn example_report(dir: &Path) -> serde_json::Value {
    let p = dir.join("example.json");
    let ex = tests::tools::root().join("tests/data/example.pcap");
    let out = run(&["-q", "-r", ex.to_str().unwrap(), "--json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    read_report(&p)
}

/// `merge` of `a` and `b` (written to DIR/a.json and DIR/b.json): exit code and stderr.
fn merge_texts(dir: &Path, a: &str, b: &str) -> (Option<i32>, String) {
    let (pa, pb) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    let out = run(&["merge", pa.to_str().unwrap(), pb.to_str().unwrap(), "-q", "--json", "-"]);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn merge_refuses_what_no_analysis_could_have_written() {
    let dir = tempfile::tempdir().unwrap();
    let good = example_report(dir.path());
    let text = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
    let (code, err) = merge_texts(dir.path(), &text(&good), &text(&good));
    assert_eq!(code, Some(0), "{err}");

    // A sum past 64 bits: refused, naming the file and the field (it wrapped to 47 before).
    let mut huge = good.clone();
    huge["flows"][0]["packets"] = serde_json::json!(u64::MAX);
    let (code, err) = merge_texts(dir.path(), &text(&huge), &text(&good));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("b.json") && err.contains("flows.packets") && err.contains("64 bits"), "{err}");

    // An interval that ends before it starts (a storm of 2^64 ns before).
    let mut backwards = good.clone();
    let iv = &mut backwards["pfc"]["senders"][0]["intervals"][0];
    *iv = serde_json::json!([iv[1].as_u64().unwrap(), iv[0].as_u64().unwrap()]);
    let (code, err) = merge_texts(dir.path(), &text(&good), &text(&backwards));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("b.json") && err.contains("/pfc/senders/0/intervals/0"), "{err}");

    // Impossible values and unknown fields: the schema's rules, with the field.
    let mut prio = good.clone();
    prio["pfc"]["senders"][0]["priority"] = serde_json::json!(200);
    let (code, err) = merge_texts(dir.path(), &text(&prio), &text(&good));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a.json") && err.contains("/pfc/senders/0/priority"), "{err}");
    let mut unknown = good.clone();
    unknown["flows"][0]["bogus"] = serde_json::json!(1);
    let (code, err) = merge_texts(dir.path(), &text(&unknown), &text(&good));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/flows/0") && err.contains("bogus"), "{err}");

    // A key twice in one object (JSON parsers keep either one).
    let dup = text(&good).replacen("\"frames\":", "\"frames\": 1, \"frames\":", 1);
    let (code, err) = merge_texts(dir.path(), &dup, &text(&good));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a.json") && err.contains("/capture/frames") && err.contains("twice"), "{err}");
}

#[test]
fn unwritable_outputs_and_stale_temporary_files_are_handled_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ex = tests::tools::root().join("tests/data/example.pcap");
    // An output that cannot be written fails the run before any work, naming it.
    let bad = dir.path().join("no/such/dir/r.json");
    let out = run(&["-q", "-r", ex.to_str().unwrap(), "--json", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("JSON report cannot be written") && err.contains("no/such/dir/r.json"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "the OS error once: {err}");
    // The same before a live run: it stops before it loads anything (no privilege needed).
    let out = run(&["-q", "-i", "lo", "--duration", "1s", "--json", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be written"));
    // A temporary file a killed run left beside the report is removed; one of a live process
    // (ours) is not.
    let dead = (100_000..4_000_000).find(|p| !Path::new(&format!("/proc/{p}")).exists()).unwrap();
    let stale = dir.path().join(format!(".r.json.{dead}.tmp"));
    let alive = dir.path().join(format!(".r.json.{}.tmp", std::process::id()));
    std::fs::write(&stale, b"partial").unwrap();
    std::fs::write(&alive, b"someone else's").unwrap();
    let report = dir.path().join("r.json");
    let out = run(&["-q", "-r", ex.to_str().unwrap(), "--json", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!stale.exists() && alive.exists() && report.exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed 1 temporary file"));
}

#[test]
fn a_damaged_pcapng_section_header_is_named_and_a_huge_fanout_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(tests::tools::root().join("tests/data/two_interfaces.pcapng")).unwrap();
    bytes[8] ^= 0xff;
    let p = dir.path().join("damaged.pcapng");
    std::fs::write(&p, bytes).unwrap();
    let out = run(&["-q", "-r", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("damaged.pcapng: byte offset 8: damaged pcapng section header: byte-order magic"), "{err}");
    let ex = tests::tools::root().join("tests/data/example.pcap");
    let out = run(&["-q", "-r", ex.to_str().unwrap(), "--ecmp-tier", "crc32:4000000000"]);
    assert_eq!(out.status.code(), Some(2), "a usage error, not a 64 GB allocation");
}

#[test]
fn a_deleted_interface_stops_the_agent_with_its_report_and_an_error() {
    if !privileged("a_deleted_interface_stops_the_agent_with_its_report_and_an_error") {
        return;
    }
    let ns = Netns::new("gone");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("live.json");
    let mut agent = Agent::start(&ns, &["--interval", "200ms", "-q", "--json", json.to_str().unwrap()]);
    assert!(ns.ip(&["link", "del", "va"]).status.success(), "deleting the pair deletes vb too");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = agent.child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the agent goes on without its interface");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(1), "a run that lost its interface fails");
    let (_, _, err) = agent.stop();
    assert!(err.iter().any(|l| l.contains("interface vb disappeared")), "{err:?}");
    let v = read_report(&json);
    assert_eq!(v["kind"], "live", "the report is written all the same");
}

#[test]
fn max_flows_bounds_an_offline_run_and_counts_the_rest() {
    let ex = tests::tools::root().join("tests/data/example.pcap");
    let full = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["-q", "-r", ex.to_str().unwrap(), "--json", "-"];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        tests::tools::check_report(&v);
        v
    };
    let all = full(&[]);
    let kept = full(&["--max-flows", "4"]);
    let flows = |v: &serde_json::Value| v["flows"].as_array().unwrap().clone();
    assert!(flows(&all).len() > 4);
    assert_eq!(flows(&kept).len(), 4);
    // The kept flows are whole; the frames of the others are counted, as the kernel counts them.
    let mut left_out = 0;
    for f in flows(&all) {
        match flows(&kept)
            .iter()
            .find(|k| k["src"] == f["src"] && k["dst_qp"] == f["dst_qp"] && k["udp_sport"] == f["udp_sport"])
        {
            Some(k) => assert_eq!(k["packets"], f["packets"]),
            None => left_out += f["packets"].as_u64().unwrap(),
        }
    }
    assert_eq!(kept["capture"]["dropped"]["flow_map_full"].as_u64(), Some(left_out));
    assert_eq!(kept["capture"]["classes"], all["capture"]["classes"], "every frame is still classified");
    assert!(kept["capture"]["dropped"]["analysis_state_full"].as_u64().unwrap() > 0, "the analyses are bounded too");
    assert_eq!(all["capture"]["dropped"]["analysis_state_full"], 0);
}

#[test]
fn a_finding_over_many_flows_lists_a_thousand_and_counts_the_rest() {
    // 1200 flows of Not-ECT RoCE data: one not_ect finding over all of them.
    let recs: Vec<Record> = (0..1200u32)
        .map(|i| {
            let mut r = Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, 0x0A, 0x100 + i, 7).payload(64);
            r.ecn = 0;
            Record::new(1_700_000_000_000_000_000 + i as u64 * 1000, r.build())
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("not_ect.pcap");
    std::fs::write(&p, write_pcap(Vec::new(), PcapOptions::default(), &recs).unwrap()).unwrap();
    let out = run(&["-q", "-r", p.to_str().unwrap(), "--json", "-"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    tests::tools::check_report(&v);
    let f = v["audit"].as_array().unwrap().iter().find(|f| f["code"] == "not_ect").expect("a not_ect finding");
    assert_eq!((f["flows"].as_array().unwrap().len(), f["flows_omitted"].as_u64()), (1000, Some(200)));
    assert!(v["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "lists_capped"));
}

/// Inputs that are not regular files are refused, not waited on or read for ever: a FIFO as a
/// topology or a merge input, `/dev/zero` given to merge or linked as an export file; an export
/// line longer than any the agent writes is refused without being parsed or quoted
/// (issue 44 §4).
#[test]
fn inputs_of_any_kind_and_size_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let zero = dir.path().join("zero.ndjson");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let ex = tests::tools::root().join("tests/data/example.pcap");
    let f = fifo.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 4] = [
        (vec!["-q", "-r", ex.to_str().unwrap(), "--topology", f], "is a FIFO, not a regular file"),
        (vec!["merge", f, "-q"], "is a FIFO, not a regular file"),
        (vec!["merge", "/dev/zero", "-q"], "is a character device, not a regular file"),
        (vec!["merge", zero.to_str().unwrap(), "-q"], "is a character device, not a regular file"),
    ];
    for (args, why) in cases {
        // `run` waits: a hang fails the test by its harness' timeout rather than passing.
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{args:?}: {err}");
    }
    // A 100 MB line in an export file: refused with its length, not echoed.
    let long = dir.path().join("long.ndjson");
    let mut text = format!("{{\"schema\": \"roce-analyzer/export/v1\", \"x\": \"{}\"}}\n", "y".repeat(100 << 20));
    text.push('\n');
    std::fs::write(&long, text).unwrap();
    let out = run(&["merge", long.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.len() < 500 && err.contains("longer than any line the agent writes"),
        "{} bytes: {}",
        err.len(),
        &err[..err.len().min(500)]
    );
    // --input-max-bytes bounds every input read whole: a report, an export file, a topology.
    let report = dir.path().join("r.json");
    let out = run(&["-q", "-r", ex.to_str().unwrap(), "--json", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::metadata(&report).unwrap().len() > 1024);
    // A topology of 3 KiB (the ring's, with a comment).
    let ring = std::fs::read_to_string(tests::tools::root().join("tests/data/ring.toml")).unwrap();
    let topology = dir.path().join("ring.toml");
    std::fs::write(&topology, format!("# {}\n{ring}", "x".repeat(3000))).unwrap();
    let small = "1K".to_string();
    for (args, what) in [
        (vec!["merge", "-q", "--input-max-bytes", &small, report.to_str().unwrap()], "a report"),
        (
            vec!["-q", "-r", ex.to_str().unwrap(), "--input-max-bytes", "1K", "--topology", topology.to_str().unwrap()],
            "a topology",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&format!("the bound for {what}; --input-max-bytes")), "{args:?}: {err}");
    }
    assert_eq!(run(&["merge", "-q", "--input-max-bytes", "1G", report.to_str().unwrap()]).status.code(), Some(0));
}

/// The same export given twice under two paths — a copy of the directory, not a link — is the
/// same agent's same intervals: `merge` refuses it, naming both, instead of counting every
/// frame twice (issue 44 §4).
#[test]
fn merge_refuses_a_copy_of_an_export_given_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let ex = tests::tools::root().join("tests/data/gobackn.pcap");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let out = run(&["-q", "-r", ex.to_str().unwrap(), "--export", a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    std::fs::create_dir(&b).unwrap();
    for e in std::fs::read_dir(&a).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), b.join(e.file_name())).unwrap();
    }
    let out = run(&["merge", "-q", "--json", "-", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the same export as") && err.contains("/a") && err.contains("/b"), "{err}");
    // Each alone merges.
    assert_eq!(run(&["merge", "-q", "--json", "-", a.to_str().unwrap()]).status.code(), Some(0));
}
