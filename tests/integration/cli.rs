//! The binary as a user runs it: summary, JSON, labels, exit codes, errors on bad input.

use serde_json::{Value, json};
use tests::fixtures::{self, data_dir};
use tests::tools::run;

fn path(name: &str) -> String {
    data_dir().join(name).display().to_string()
}

fn json_of(args: &[&str]) -> (Value, std::process::Output) {
    let mut a = args.to_vec();
    a.extend(["--json", "-"]);
    let out = run(&a);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (v, out)
}

#[test]
fn example_summary_and_report() {
    let out = run(&["--pcap", &path("example.pcap")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let f = fixtures::example();
    assert!(text.contains(&format!("{} frames", f.frames.len())), "{text}");
    assert!(text.contains("flows: 8"), "{text}");
    assert!(text.contains("02:00:00:00:07:d1"), "PFC sender listed: {text}");

    let (v, _) = json_of(&["--pcap", &path("example.pcap")]);
    assert_eq!(v["schema"], "roce-analyzer/report/v1");
    assert_eq!(v["tool"]["name"], "roce-analyzer");
    assert_eq!(v["kind"], "offline");
    let counts = f.class_counts();
    for c in analyzer_common::FrameClass::ALL {
        assert_eq!(v["capture"]["classes"][c.name()], counts[c as usize], "class {}", c.name());
    }
    assert_eq!(v["capture"]["frames"], f.frames.len());
    assert_eq!(v["capture"]["partial"], false);
    assert_eq!(v["capture"]["start_ns"], f.frames.iter().map(|x| x.record.ts_ns).min().unwrap());
    assert_eq!(v["capture"]["end_ns"], f.frames.iter().map(|x| x.record.ts_ns).max().unwrap());
    for reason in ["truncated_record", "flow_map_full", "ringbuf_full"] {
        assert_eq!(v["capture"]["dropped"][reason], 0, "{reason} is reported even when zero");
    }
    // Numbers are integers, except the ratios and rates the fabric analyses name as such.
    fn no_floats(v: &Value) {
        match v {
            Value::Number(n) => assert!(n.is_u64() || n.is_i64(), "non-integer {n}"),
            Value::Array(a) => a.iter().for_each(no_floats),
            Value::Object(o) => o
                .iter()
                .filter(|(k, _)| {
                    ![
                        "imbalance",
                        "peak_gbps",
                        "peak_link_ratio",
                        "sport_entropy_bits",
                        "growth",
                        "relative_error",
                        "share",
                        "slowdown_p50",
                        "slowdown_p99",
                        "fluctuation",
                        "straggler_ratio",
                        "frames_per_million",
                        "paused_ns_per_million",
                        "ratio",
                    ]
                    .contains(&k.as_str())
                })
                .for_each(|(_, v)| no_floats(v)),
            _ => {}
        }
    }
    no_floats(&v);
}

#[test]
fn json_is_byte_identical_across_runs_and_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    for p in [&a, &b] {
        let out = run(&["-q", "-r", &path("example.pcap"), "-r", &path("erspan.pcap"), "--json", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0));
        assert!(out.stdout.is_empty(), "--quiet prints nothing");
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    tests::tools::read_report(&a);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary files left behind");
}

#[test]
fn flows_are_sorted_by_key() {
    let (v, _) = json_of(&["-r", &path("example.pcap")]);
    let keys: Vec<(String, String, u64, u64)> = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["src"].as_str().unwrap().into(),
                f["dst"].as_str().unwrap().into(),
                f["udp_sport"].as_u64().unwrap(),
                f["dst_qp"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_by_key(|(s, d, p, q)| {
        (s.parse::<std::net::Ipv4Addr>().unwrap(), d.parse::<std::net::Ipv4Addr>().unwrap(), *p, *q)
    });
    assert_eq!(keys, sorted);
}

fn flow_keys(v: &Value) -> std::collections::BTreeSet<String> {
    v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{}>{}:{}/{}", f["src"], f["dst"], f["udp_sport"], f["dst_qp"]))
        .collect()
}

#[test]
fn labels_follow_each_input() {
    let (alone1, _) = json_of(&["--pcap", &path("example.pcap")]);
    let (alone2, _) = json_of(&["--pcap", &path("erspan.pcap")]);
    let (in1, in2) = (flow_keys(&alone1), flow_keys(&alone2));
    let up1 = format!("up1={}", path("example.pcap"));
    let up2 = format!("up2={}", path("erspan.pcap"));
    let (v, _) = json_of(&["--pcap", &up1, "--pcap", &up2]);
    let sources = v["capture"]["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2);
    assert_eq!((sources[0]["label"].as_str(), sources[1]["label"].as_str()), (Some("up1"), Some("up2")));
    assert_eq!(sources[0]["kind"], "pcap");
    assert_eq!(flow_keys(&v), in1.union(&in2).cloned().collect());
    for f in v["flows"].as_array().unwrap() {
        let key = format!("{}>{}:{}/{}", f["src"], f["dst"], f["udp_sport"], f["dst_qp"]);
        let labels: Vec<&str> = f["labels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        let mut expect = Vec::new();
        if in1.contains(&key) {
            expect.push("up1");
        }
        if in2.contains(&key) {
            expect.push("up2");
        }
        assert_eq!(labels, expect, "{key}");
    }
    let frames = alone1["capture"]["frames"].as_u64().unwrap() + alone2["capture"]["frames"].as_u64().unwrap();
    assert_eq!(v["capture"]["frames"], frames);
}

#[test]
fn bad_inputs_name_file_offset_and_cause() {
    for b in fixtures::bad_inputs() {
        let p = data_dir().join("bad").join(b.name);
        let out = run(&["-r", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", b.name);
        assert!(err.contains(p.to_str().unwrap()), "{}: names the file: {err}", b.name);
        for e in b.expect {
            assert!(err.contains(e), "{}: {e:?} in {err}", b.name);
        }
        assert!(out.stdout.is_empty(), "{}: no report on error", b.name);
    }
    let out = run(&["-r", "/nonexistent/capture.pcap"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/capture.pcap: cannot open"));
}

#[test]
fn truncated_tail_gives_a_partial_report_and_its_own_exit_code() {
    let p = data_dir().join("bad").join("truncated_tail.pcap");
    let (v, out) = json_of(&["-r", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(analyzer::exit::PARTIAL as i32));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated last record") && err.contains("byte offset"), "{err}");
    let (_, f) = fixtures::truncated_tail();
    assert_eq!(v["capture"]["partial"], true);
    assert_eq!(v["capture"]["frames"], f.frames.len() - 1, "everything before the cut record");
    assert_eq!(v["capture"]["dropped"]["truncated_record"], 1);
    assert!(v["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "partial"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&[]).status.code(), Some(2));
    assert_eq!(run(&["--no-such-flag"]).status.code(), Some(2));
    assert_eq!(run(&["--pcap", "bad label=x"]).status.code(), Some(2));
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit codes"));
}

#[test]
fn vantage_point_blind_spots_are_stated() {
    let (v, _) = json_of(&["-r", &path("pfc.pcap")]);
    let codes: Vec<&str> = v["visibility"].as_array().unwrap().iter().map(|n| n["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"no_roce"), "{codes:?}");
    assert!(!codes.contains(&"no_pfc"), "{codes:?}");
    let (v, _) = json_of(&["-r", &path("opcodes.pcap")]);
    let codes: Vec<&str> = v["visibility"].as_array().unwrap().iter().map(|n| n["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"no_pfc") && codes.contains(&"one_direction") && !codes.contains(&"no_roce"), "{codes:?}");
    let (v, _) = json_of(&["-r", &path("snaplen.pcap")]);
    assert!(v["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "snap_cut"));
    let out = run(&["-r", &path("pfc.pcap")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hardware RNICs")
            || String::from_utf8_lossy(&out.stdout).contains("Hardware RNICs")
    );
}

#[test]
fn fail_on_gates_trip_with_their_values_and_exit_4() {
    let example = path("example.pcap");
    let cnp = fixtures::example().frames.iter().filter(|f| f.class == analyzer_common::FrameClass::Cnp).count();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run(&[
        "-q",
        "-r",
        &example,
        "--json",
        json.to_str().unwrap(),
        "--fail-on",
        "capture.classes.cnp>0",
        "--fail-on",
        "flows>=100",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(analyzer::exit::GATE as i32), "{err}");
    assert!(err.contains(&format!("gate tripped: capture.classes.cnp>0 (value {cnp})")), "{err}");
    assert!(!err.contains("flows>=100"), "a gate that holds not is not printed: {err}");
    assert!(json.is_file(), "the report is written even when a gate trips");

    let out = run(&["-q", "-r", &example, "--fail-on", "capture.classes.cnp>1000", "--fail-on", "flows<1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["-q", "-r", &example, "--fail-on", "flows>=8"]);
    assert_eq!(out.status.code(), Some(4), "8 flows: a list compares by its length");

    let out = run(&["-q", "-r", &example, "--fail-on", "capture.classes.nosuch>0"]);
    assert_eq!(out.status.code(), Some(2), "unknown path is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no `nosuch`"));
    // A path no report has is found before any work: before a live run tries its interface.
    let out = run(&["-q", "-i", "no-such-if0", "--fail-on", "capture.clases.cnp>0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no `clases` in any report (at capture)"));
    let out = run(&["-q", "-r", &example, "--fail-on", "capture.frames is big"]);
    assert_eq!(out.status.code(), Some(2), "bad expression is a usage error");

    let truncated = data_dir().join("bad").join("truncated_tail.pcap");
    let t = truncated.to_str().unwrap();
    assert_eq!(run(&["-q", "-r", t, "--fail-on", "capture.frames>0"]).status.code(), Some(4), "gate over partial");
    assert_eq!(run(&["-q", "-r", t, "--fail-on", "capture.frames<0"]).status.code(), Some(3), "partial, no gate");
}

#[test]
fn the_shipped_schema_accepts_reports_and_rejects_renames() {
    let (v, _) = json_of(&["-r", &path("example.pcap")]);
    assert!(tests::tools::schema_errors(&v).is_empty());
    let mut renamed = v.clone();
    let frames = renamed["capture"].as_object_mut().unwrap().remove("frames").unwrap();
    renamed["capture"]["frame_count"] = frames;
    let errors = tests::tools::schema_errors(&renamed);
    assert!(errors.iter().any(|e| e.contains("frames")), "a missing field is caught: {errors:?}");
    assert!(errors.iter().any(|e| e.contains("frame_count")), "an unknown field is caught: {errors:?}");
    let mut float = v.clone();
    float["flows"][0]["bytes"] = serde_json::json!(1.5);
    assert!(!tests::tools::schema_errors(&float).is_empty(), "numbers are integers");
    let mut kind = v;
    kind["kind"] = serde_json::json!("batch");
    assert!(!tests::tools::schema_errors(&kind).is_empty());
}

#[test]
fn merge_of_reports_equals_one_analysis_of_all_captures() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (out, file) in [(&a, "example.pcap"), (&b, "erspan.pcap")] {
        assert_eq!(run(&["-q", "-r", &path(file), "--json", out.to_str().unwrap()]).status.code(), Some(0));
    }
    let out = run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (together, _) = json_of(&["-r", &path("example.pcap"), "-r", &path("erspan.pcap")]);
    assert_eq!(merged["kind"], "merged");
    for part in ["sources", "start_ns", "end_ns", "partial", "frames", "classes", "dropped"] {
        assert_eq!(merged["capture"][part], together["capture"][part], "capture.{part}");
    }
    // One analysis reads the two captures side by side in time order, and they overlap in
    // time between the same hosts: its RTT pairing sees both captures' requests and ACKs
    // interleaved, which merging two reports cannot redo (each keeps its own RTT).
    let without_rtt = |v: &Value| {
        let mut f = v["flows"].clone();
        for x in f.as_array_mut().unwrap() {
            x.as_object_mut().unwrap().remove("rtt_ns");
        }
        f
    };
    assert_eq!(without_rtt(&merged), without_rtt(&together), "flows summed per key, labels kept, same order");
    assert_eq!(merged["pfc"], together["pfc"]);
    let codes = |v: &Value| -> Vec<String> {
        v["visibility"].as_array().unwrap().iter().map(|n| n["code"].as_str().unwrap().to_string()).collect()
    };
    for c in codes(&together) {
        assert!(codes(&merged).contains(&c), "visibility note {c} kept or recomputed");
    }
    // The erspan capture's two ERSPAN sessions saw one frame each (a vantage section in its
    // report): merge cannot match frames across reports and says so.
    assert!(codes(&merged).contains(&"vantage_not_merged".to_string()), "{:?}", codes(&merged));
}

#[test]
fn merge_qualifies_colliding_labels_and_refuses_other_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("hostA.json"), dir.path().join("hostB.json"));
    for out in [&a, &b] {
        assert_eq!(
            run(&["-q", "-r", &path("pfc.pcap"), "-r", &path("vlan.pcap"), "--json", out.to_str().unwrap()])
                .status
                .code(),
            Some(0)
        );
    }
    let out = run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--json", "-"]);
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let labels: Vec<&str> =
        merged["capture"]["sources"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["hostA:pfc.pcap", "hostA:vlan.pcap", "hostB:pfc.pcap", "hostB:vlan.pcap"]);
    let (single, _) = json_of(&["-r", &path("pfc.pcap"), "-r", &path("vlan.pcap")]);
    assert_eq!(merged["capture"]["frames"], 2 * single["capture"]["frames"].as_u64().unwrap());
    for f in merged["flows"].as_array().unwrap() {
        let labels: Vec<&str> = f["labels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        assert_eq!(labels, ["hostA:vlan.pcap", "hostB:vlan.pcap"], "{f}");
    }

    let mut old: Value = tests::tools::read_report(&a);
    old["schema"] = serde_json::json!("roce-analyzer/report/v0");
    let c = dir.path().join("old.json");
    std::fs::write(&c, serde_json::to_vec(&old).unwrap()).unwrap();
    let out = run(&["merge", a.to_str().unwrap(), c.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("old.json") && err.contains("roce-analyzer/report/v0"), "{err}");
    let out = run(&["merge", dir.path().join("missing.json").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(run(&["merge"]).status.code(), Some(2), "no report is a usage error");
}

#[test]
fn the_schema_lists_every_psn_and_aeth_counter() {
    // A new counter is one more index and name in analyzer_common::psn: the schema must follow.
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../schema/report-v1.schema.json")).expect("the schema is JSON");
    let flow = &schema["properties"]["flows"]["items"]["properties"];
    for (section, names) in
        [("psn", &analyzer_common::psn::count::NAMES[..]), ("naks", &analyzer_common::psn::aeth::NAMES[..])]
    {
        let props: Vec<&String> = flow[section]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{section} in the schema"))
            .keys()
            .collect();
        let mut want: Vec<&str> = names.to_vec();
        if section == "psn" {
            want.extend(["responder", "capture_missed"]);
        }
        want.sort_unstable();
        let mut got: Vec<&str> = props.iter().map(|s| s.as_str()).collect();
        got.sort_unstable();
        assert_eq!(got, want, "schema properties of flows[].{section}");
    }
    let mut responder: Vec<&str> =
        flow["psn"]["properties"]["responder"]["properties"].as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let mut want = analyzer_common::psn::responder::NAMES.to_vec();
    responder.sort_unstable();
    want.sort_unstable();
    assert_eq!(responder, want, "flows[].psn.responder");
}

#[test]
fn cli_edges_are_usage_errors_or_quiet() {
    let ex = tests::tools::root().join("tests/data/example.pcap");
    let ex = ex.to_str().unwrap();
    // A live-only flag with --pcap would do nothing: a usage error that names it.
    for flag in
        [&["--interval", "2s"][..], &["--metrics", "127.0.0.1:9464"], &["--no-timeline"], &["--xdp-mode", "skb"]]
    {
        let mut args = vec!["-q", "-r", ex];
        args.extend_from_slice(flag);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{} applies to a live interface", flag[0])));
    }
    // Every name in the list is a flag of the command line (the list cannot rot).
    use clap::CommandFactory;
    let cmd = analyzer::cli::Cli::command();
    for id in analyzer::cli::LIVE_ONLY {
        assert!(cmd.get_arguments().any(|a| a.get_id() == *id), "{id}");
    }
    // A reader that goes away early: no panic, no message.
    for args in [&["-r", ex, "--top", "1000"][..], &["-r", ex, "--json", "-"]] {
        let mut child = std::process::Command::new(tests::tools::binary())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A directory, a file too short for its header.
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["-q", "-r", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a directory, not a capture file"));
    let short = dir.path().join("short.pcap");
    std::fs::write(&short, [0xd4, 0xc3, 0xb2, 0xa1, 2, 0]).unwrap();
    let out = run(&["-q", "-r", short.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("byte offset 6: the file ends inside the pcap file header (6 of its 24 bytes)")
    );
    // One UDP source port has no entropy: 0, never -0.
    let psn_wrap = tests::tools::root().join("tests/data/psn_wrap.pcap");
    let out = run(&["-q", "-r", psn_wrap.to_str().unwrap(), "--json", "-"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\"sport_entropy_bits\": 0.0") && !text.contains("-0.0"), "{text}");
}

/// (classes, flows with their packets and bytes) of a report: what must not depend on how the
/// capture reached the analyzer.
fn counted(v: &Value) -> Value {
    let flows: Vec<Value> = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| serde_json::json!([f["src"], f["dst"], f["udp_sport"], f["dst_qp"], f["packets"], f["bytes"]]))
        .collect();
    serde_json::json!({"classes": v["capture"]["classes"], "flows": flows})
}

/// The report of a run that must succeed, checked against the schema.
fn report_of(args: &[&str]) -> Value {
    let (v, out) = json_of(&[&["-q"], args].concat());
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    tests::tools::check_report(&v);
    v
}

#[test]
fn captures_as_sites_produce_them() {
    use std::io::Write;
    use tests::synth::pcap::{DataLink, NgInterface, PcapOptions, write_pcap, write_pcapng};
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::example();
    let ex = data_dir().join("example.pcap");
    let reference = counted(&report_of(&["-r", ex.to_str().unwrap()]));
    // Raw IP link types (101, and 228 for IPv4): the records start at the IP header. Bytes
    // count the Ethernet header the wire had, as for Ethernet captures: the same frames with
    // their Ethernet header are the reference.
    let untagged: Vec<_> = fixtures::all()
        .into_iter()
        .flat_map(|f| f.frames)
        .map(|fr| fr.record)
        .filter(|r| r.data.len() > 34 && r.data[12..14] == [0x08, 0x00])
        .collect();
    assert!(untagged.len() > 100, "the fixtures have untagged IPv4 frames");
    let eth = dir.path().join("untagged.pcap");
    std::fs::write(&eth, write_pcap(Vec::new(), PcapOptions::default(), &untagged).unwrap()).unwrap();
    let eth_counted = counted(&report_of(&["-r", eth.to_str().unwrap()]));
    for linktype in [DataLink::RAW, DataLink::IPV4] {
        let recs: Vec<_> = untagged
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.data.drain(..14);
                r.orig_len -= 14;
                r
            })
            .collect();
        let p = dir.path().join(format!("raw{}.pcap", u32::from(linktype)));
        std::fs::write(&p, write_pcap(Vec::new(), PcapOptions { linktype, ..Default::default() }, &recs).unwrap())
            .unwrap();
        assert_eq!(counted(&report_of(&["-r", p.to_str().unwrap()])), eth_counted, "link type {linktype:?}");
    }
    // Standard input, and gzip or zstd compressed captures, read as they are.
    let bytes = std::fs::read(&ex).unwrap();
    let mut child = std::process::Command::new(tests::tools::binary())
        .args(["-q", "-r", "-", "--json", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counted(&v), reference, "stdin");
    assert_eq!(v["capture"]["sources"][0]["label"], "stdin");
    let gz = dir.path().join("example.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&bytes).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    assert_eq!(counted(&report_of(&["-r", gz.to_str().unwrap()])), reference, "gzip");
    let zst = dir.path().join("example.pcap.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    assert_eq!(counted(&report_of(&["-r", zst.to_str().unwrap()])), reference, "zstd");
    // A pcapng with a loopback (NULL) interface beside the Ethernet one: the loopback's packets
    // are skipped and counted, the rest analysed.
    let mut recs: Vec<_> = f.frames.iter().map(|fr| fr.record.clone()).collect();
    let lo = tests::synth::pcap::Record {
        ts_ns: recs[0].ts_ns,
        data: vec![2, 0, 0, 0, 0x45, 0, 0, 20],
        orig_len: 8,
        interface: 1,
    };
    recs.insert(1, lo.clone());
    recs.push(lo);
    let ifaces = [
        NgInterface { linktype: DataLink::ETHERNET, tsresol_pow10: 9 },
        NgInterface { linktype: DataLink::NULL, tsresol_pow10: 9 },
    ];
    let ng = dir.path().join("with_loopback.pcapng");
    std::fs::write(&ng, write_pcapng(Vec::new(), &ifaces, &recs).unwrap()).unwrap();
    let v = report_of(&["-r", ng.to_str().unwrap()]);
    assert_eq!(counted(&v), reference, "the Ethernet interface's frames, all of them");
    assert_eq!(v["capture"]["dropped"]["unread_link_type"], 2);
    assert!(
        v["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "skipped_interfaces"),
        "{}",
        v["visibility"]
    );
}

#[test]
fn a_snap_length_that_cuts_the_bth_says_roce_was_seen_and_what_it_needs() {
    use tests::synth::pcap::{PcapOptions, write_pcap};
    let f = fixtures::example();
    let recs: Vec<_> = f.frames.iter().map(|fr| fr.record.clone().snap(50)).collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("snap50.pcap");
    std::fs::write(&p, write_pcap(Vec::new(), PcapOptions { snaplen: 50, ..Default::default() }, &recs).unwrap())
        .unwrap();
    let v = report_of(&["-r", p.to_str().unwrap()]);
    let notes = v["visibility"].as_array().unwrap();
    assert!(!notes.iter().any(|n| n["code"] == "no_roce"), "RoCE was seen: {notes:?}");
    let cut = notes.iter().find(|n| n["code"] == "bth_cut").expect("a bth_cut note");
    // By hand: the example's 240 RoCE frames and 6 CNPs, VLAN-tagged IPv4: 14 + 4 + 20 + 8 bytes
    // of headers and the 12-byte BTH need 58 bytes kept.
    let text = cut["message"].as_str().unwrap();
    assert!(text.contains("but 246 RoCE frames") && text.contains("at least 58 bytes"), "{text}");
}

#[test]
fn timestamps_that_cannot_be_right_warn_and_leave_the_span_alone() {
    use tests::synth::pcap::{PcapOptions, write_pcap};
    let f = fixtures::example();
    let mut recs: Vec<_> = f.frames.iter().map(|fr| fr.record.clone()).collect();
    let (first, last) = (recs.first().unwrap().ts_ns, recs.last().unwrap().ts_ns);
    recs[3].ts_ns = 0; // 1970
    recs[7].ts_ns = 100 * 365 * 86_400 * 1_000_000_000; // 2069
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad_clock.pcap");
    std::fs::write(&p, write_pcap(Vec::new(), PcapOptions { nanosecond: true, ..Default::default() }, &recs).unwrap())
        .unwrap();
    let (v, out) = json_of(&["-r", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!((v["capture"]["start_ns"].as_u64(), v["capture"]["end_ns"].as_u64()), (Some(first), Some(last)));
    assert!(
        v["visibility"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["code"] == "implausible_timestamps" && n["message"].as_str().unwrap().starts_with("2 frames"))
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: 2 frames carry timestamps more than a year"));
}

/// The metrics the agent serves follow the Prometheus conventions as promtool checks them
/// (base units in the names, `_total` counters), over reports with every section filled: the
/// example, a fabric capture with storms and trees, vantage points.
#[test]
fn metrics_pass_promtool_check() {
    let promtool = tests::tools::require("promtool");
    let reports: Vec<Vec<String>> = vec![
        vec!["-r".into(), path("example.pcap")],
        vec!["-r".into(), path("pfc_storm.pcap")],
        vec!["-r".into(), path("incast.pcap")],
        vec!["-r".into(), path("ecn_audit.pcap")],
        vec!["-r".into(), path("gobackn.pcap")],
        vec!["-r".into(), path("dcqcn.pcap")],
        vec![
            "-r".into(),
            format!("leaf={}", path("vantage_leaf.pcap")),
            "-r".into(),
            format!("spine={}", path("vantage_spine.pcap")),
        ],
    ];
    for args in reports {
        let mut run = analyzer::pipeline::Pipeline::default();
        let inputs: Vec<_> = args
            .iter()
            .filter(|a| *a != "-r")
            .map(|a| analyzer::capture::input::InputSpec::parse(a).unwrap())
            .collect();
        analyzer::offline::analyze_files(&mut run, &inputs, |_, _| {}).unwrap();
        let r = analyzer::model::Report::assemble(&run, analyzer::report::assemble::RunKind::Live);
        use analyzer::report::render::metrics;
        let text = metrics::render(&r, 10, &run.analyses.rtt.all_samples());
        // What the live agent serves each interval, from the run's state without a report, is
        // what the report gives (all flows listed, and only the top 3 of them).
        // (Series come in the order of a hash map: compared as sorted lines.)
        let lines = |t: String| {
            let mut v: Vec<String> = t.lines().map(String::from).collect();
            v.sort();
            v
        };
        for top in [10, 3] {
            let from_run = metrics::render_run(&run, top, metrics::finding_counts(&run));
            let from_report = metrics::render(&r, top, &run.analyses.rtt.all_samples());
            assert_eq!(lines(from_run), lines(from_report), "{args:?} top {top}");
        }
        let mut child = std::process::Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.trim().is_empty(), "{args:?}: promtool check metrics:\n{said}");
    }
}

/// Every flag of every command can come from the environment as ROCE_ANALYZER_<FLAG>, `--help`
/// says so, and the command line wins over it.
#[test]
fn every_flag_has_an_environment_variable() {
    let cmd = analyzer::cli::command();
    let mut flags = 0;
    let mut check = |c: &clap::Command| {
        for a in c
            .get_arguments()
            .filter(|a| a.get_long().is_some() && !matches!(a.get_id().as_str(), "help" | "version" | "generate"))
        {
            let want = analyzer::cli::env_name(a.get_long().unwrap());
            assert_eq!(
                a.get_env().and_then(|e| e.to_str()),
                Some(want.as_str()),
                "{} --{}",
                c.get_name(),
                a.get_long().unwrap()
            );
            flags += 1;
        }
    };
    check(&cmd);
    for sub in cmd.get_subcommands() {
        check(sub);
    }
    assert!(flags > 40, "{flags} flags");
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    assert!(help.contains("[env: ROCE_ANALYZER_MAX_FLOWS=]"), "{help}");
    // From the environment, and the command line over it.
    let top = |env: Option<&str>, args: &[&str]| {
        let mut c = std::process::Command::new(tests::tools::binary());
        c.args(["-r", &path("example.pcap")]).args(args);
        if let Some(v) = env {
            c.env("ROCE_ANALYZER_TOP", v);
        }
        let out = String::from_utf8(c.output().unwrap().stdout).unwrap();
        out.lines().find(|l| l.starts_with("flows: ")).unwrap().to_string()
    };
    assert_eq!(top(None, &[]), "flows: 8 (top 8 by bytes)");
    assert_eq!(top(Some("2"), &[]), "flows: 8 (top 2 by bytes)");
    assert_eq!(top(Some("2"), &["--top", "1"]), "flows: 8 (top 1 by bytes)");
    let bad = std::process::Command::new(tests::tools::binary())
        .args(["-r", &path("example.pcap")])
        .env("ROCE_ANALYZER_TOP", "many")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a bad value from the environment is a usage error");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("ROCE_ANALYZER_TOP is set in the environment"), "the variable is named: {err}");
}

/// The binary with `env` set, on `args`: exit code, stdout, stderr.
fn with_env(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(tests::tools::binary()).args(args).envs(env.iter().copied()).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// A switch from the environment takes 1/0 (and true/false, yes/no, on/off); anything else is a
/// usage error naming the variable. An interface exported for the agent makes `-r` a conflict
/// that names it: the person did not type `--iface`.
#[test]
fn the_environment_takes_switches_as_1_and_0_and_its_errors_name_it() {
    let ex = path("example.pcap");
    for (v, quiet) in [("1", true), ("true", true), ("yes", true), ("0", false), ("false", false), ("off", false)] {
        let (code, out, err) = with_env(&[("ROCE_ANALYZER_QUIET", v)], &["-r", &ex]);
        assert_eq!(code, Some(0), "ROCE_ANALYZER_QUIET={v}: {err}");
        assert_eq!(out.is_empty(), quiet, "ROCE_ANALYZER_QUIET={v}");
    }
    let (code, _, err) = with_env(&[("ROCE_ANALYZER_QUIET", "maybe")], &["-r", &ex]);
    assert_eq!(code, Some(2));
    assert!(err.contains("note: ROCE_ANALYZER_QUIET is set in the environment"), "{err}");
    let (code, _, err) = with_env(&[("ROCE_ANALYZER_IFACE", "eth9")], &["-r", &ex, "-q"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("note: ROCE_ANALYZER_IFACE is set in the environment"), "{err}");
    let (_, _, err) = with_env(&[], &["-r", &ex, "--top", "x"]);
    assert!(!err.contains("note: "), "typed on the command line, no variable named: {err}");
}

/// `roce-analyzer capture.pcap`: a capture given without --pcap is analysed as with it, and
/// beside -r inputs too.
#[test]
fn a_capture_given_without_pcap_is_analysed() {
    let (with, _) = json_of(&["-q", "-r", &path("gobackn.pcap")]);
    let (without, out) = json_of(&[&path("gobackn.pcap"), "-q"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(with, without);
    let (both, _) = json_of(&["-q", "-r", &path("gobackn.pcap"), &path("rnr.pcap")]);
    assert_eq!(both["capture"]["sources"].as_array().unwrap().len(), 2);
    let (code, _, err) = with_env(&[], &[&path("gobackn.pcap"), "--iface", "eth9"]);
    assert_eq!(code, Some(2), "a capture and an interface conflict: {err}");
}

/// The parser's own errors quote the value given: an escape sequence or a bell in it reaches
/// the terminal written out, never raw (as the summary's names).
#[test]
fn parser_errors_reach_the_terminal_escaped() {
    for args in [
        vec!["-r", "x.pcap", "--filter", "\u{1b}]0;owned\u{7}"],
        vec!["-r", "x.pcap", "--clock-offset", "a=\u{1b}[2J"],
        vec!["-r", "x.pcap", "--top", "\r\u{1b}[31m9"],
    ] {
        let (code, _, err) = with_env(&[], &args);
        assert_eq!(code, Some(2), "{args:?}");
        let raw: Vec<char> = err.chars().filter(|c| c.is_control() && *c != '\n').collect();
        assert!(raw.is_empty(), "{args:?}: raw {raw:?} in {err}");
        assert!(err.starts_with("error: invalid value"), "{err}");
    }
}

/// Reports carry their RTT samples in log buckets, so merging them gives fleet-wide RTT
/// percentiles: equal to one analysis of both captures within the buckets' stated error.
#[test]
fn merge_combines_rtt_percentiles_from_the_histograms() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (out, file) in [(&a, "example.pcap"), (&b, "rtt.pcap")] {
        assert_eq!(run(&["-q", "-r", &path(file), "--json", out.to_str().unwrap()]).status.code(), Some(0));
    }
    let out = run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--json", "-"]);
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (together, _) = json_of(&["-r", &path("example.pcap"), "-r", &path("rtt.pcap")]);
    let (m, t) = (&merged["rtt_ns"], &together["rtt_ns"]);
    let error = m["histogram"]["relative_error"].as_f64().unwrap();
    assert_eq!(error, 0.005);
    assert_eq!(m["samples"], t["samples"]);
    assert!(t["samples"].as_u64().unwrap() > 100, "both captures have RTT samples");
    assert_eq!(
        (m["min"].clone(), m["max"].clone(), m["exact"].clone()),
        (t["min"].clone(), t["max"].clone(), json!(false))
    );
    for p in ["p50", "p90", "p99", "p999"] {
        let (mv, tv) = (m[p].as_f64().unwrap(), t[p].as_f64().unwrap());
        assert!((mv - tv).abs() <= tv * error + 1.0, "{p}: merged {mv}, one analysis {tv}");
    }
    assert_eq!(m["timeouts"], t["timeouts"]);
    let codes: Vec<&str> =
        merged["visibility"].as_array().unwrap().iter().map(|n| n["code"].as_str().unwrap()).collect();
    assert!(!codes.contains(&"rtt_not_merged"), "{codes:?}");
}

/// A report written without a summary, page or gate streams its flow lists (flows, pairs,
/// ecmp.host_pairs) from the run instead of holding them: the file is byte for byte the one
/// the held report gives, for every fixture, with a topology, and for several inputs.
#[test]
fn streamed_reports_equal_held_ones_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let data = tests::fixtures::data_dir();
    let mut cases: Vec<Vec<String>> = tests::fixtures::all()
        .iter()
        .map(|f| vec!["-r".to_string(), data.join(f.name).display().to_string()])
        .collect();
    cases.push(vec![
        "-r".into(),
        data.join("pfc_cascade.pcap").display().to_string(),
        "--topology".into(),
        data.join("cascade.toml").display().to_string(),
    ]);
    cases.push(vec![
        "-r".into(),
        format!("leaf={}", data.join("vantage_leaf.pcap").display()),
        "-r".into(),
        format!("spine={}", data.join("vantage_spine.pcap").display()),
    ]);
    for (i, case) in cases.iter().enumerate() {
        let (streamed, held, page) =
            (dir.path().join(format!("{i}s.json")), dir.path().join(format!("{i}h.json")), dir.path().join("p.html"));
        let mut a: Vec<&str> = case.iter().map(String::as_str).collect();
        a.extend(["-q", "--json", streamed.to_str().unwrap()]);
        let out = run(&a);
        assert!(matches!(out.status.code(), Some(0 | 3)), "{case:?}: {}", String::from_utf8_lossy(&out.stderr));
        let mut b: Vec<&str> = case.iter().map(String::as_str).collect();
        b.extend(["-q", "--json", held.to_str().unwrap(), "--html", page.to_str().unwrap()]);
        let out = run(&b);
        assert!(matches!(out.status.code(), Some(0 | 3)), "{case:?}: {}", String::from_utf8_lossy(&out.stderr));
        let (s, h) = (std::fs::read(&streamed).unwrap(), std::fs::read(&held).unwrap());
        assert!(s == h, "{case:?}: the streamed report differs from the held one");
        tests::tools::check_report(&serde_json::from_slice(&s).unwrap());
    }
}

/// Offline, one input is read and classified on a reader thread that hands its frames over in
/// batches, or with `--one-thread` on the analysing thread: the reports, errors and exit codes
/// are the same, on every fixture, on the bad inputs and on a capture of many batches. And a
/// capture split frame by frame into two inputs of one label (merged in time order across
/// both readers' batches) counts what the whole capture counts.
#[test]
fn one_thread_and_the_reader_thread_give_the_same_reports() {
    use tests::synth::pcap::{PcapOptions, write_pcap};
    use tests::synth::scenario::{ScenarioOptions, cluster};
    let dir = tempfile::tempdir().unwrap();
    let recs = cluster(&ScenarioOptions { hosts: 8, messages: 400, ..Default::default() });
    assert!(recs.len() > 10 * 2048, "{} frames: several batches of the reader", recs.len());
    let write = |name: &str, recs: &[tests::synth::pcap::Record]| {
        let p = dir.path().join(name);
        write_pcap(std::fs::File::create(&p).unwrap(), PcapOptions { nanosecond: true, ..Default::default() }, recs)
            .unwrap();
        p.display().to_string()
    };
    let whole = write("whole.pcap", &recs);
    let (even, odd): (Vec<_>, Vec<_>) =
        (recs.iter().step_by(2).cloned().collect(), recs.iter().skip(1).step_by(2).cloned().collect());
    let (a, b) = (write("a.pcap", &even), write("b.pcap", &odd));

    let mut files: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .chain(std::fs::read_dir(data_dir().join("bad")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    assert!(files.len() > 40, "the fixtures are found: {files:?}");
    files.push(whole.clone());
    for f in &files {
        let threaded = run(&["-q", "-r", f, "--json", "-"]);
        let one = run(&["-q", "-r", f, "--json", "-", "--one-thread"]);
        assert_eq!(threaded.status.code(), one.status.code(), "{f}");
        assert_eq!(String::from_utf8_lossy(&threaded.stderr), String::from_utf8_lossy(&one.stderr), "{f}");
        assert!(threaded.stdout == one.stdout, "{f}: the reports differ");
    }
    let mut whole_report = report_of(&["-r", &whole]);
    assert_eq!(whole_report["capture"]["frames"], recs.len(), "every frame read");
    // The label the whole capture has by default: the two halves are one vantage point.
    let label = "whole.pcap";
    let mut split = report_of(&["-r", &format!("{label}={a}"), "-r", &format!("{label}={b}")]);
    assert_eq!(split["capture"]["sources"].as_array().unwrap().len(), 2);
    // Apart from the inputs it names, the same report: its RTT, incast and DCQCN answers
    // would differ if the frames were not analysed in time order.
    split["capture"]["sources"] = Value::Null;
    whole_report["capture"]["sources"] = Value::Null;
    let top: Vec<&String> =
        whole_report.as_object().unwrap().keys().filter(|k| split[*k] != whole_report[*k]).collect();
    assert!(top.is_empty(), "the split capture's report differs in {top:?}");
}

/// An output that is one of the inputs is refused with exit 2 before any work, and the input is
/// left as it was: `--json`, `--html`, `--dot` or `--export` naming the capture (or a link to
/// it), the topology, or for `merge` one of the reports.
#[test]
fn an_output_that_is_an_input_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("same.pcap");
    std::fs::copy(data_dir().join("gobackn.pcap"), &cap).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&cap, &link).unwrap();
    let topo = dir.path().join("ring.toml");
    std::fs::copy(data_dir().join("ring.toml"), &topo).unwrap();
    let before = std::fs::read(&cap).unwrap();
    let c = cap.display().to_string();
    let cases: Vec<Vec<String>> = vec![
        vec!["--json".into(), c.clone()],
        vec!["--html".into(), c.clone()],
        vec!["--dot".into(), c.clone()],
        vec!["--export".into(), c.clone()],
        vec!["--json".into(), link.display().to_string()],
        vec!["--topology".into(), topo.display().to_string(), "--html".into(), topo.display().to_string()],
    ];
    for extra in cases {
        let mut args = vec!["-r".to_string(), c.clone(), "-q".into()];
        args.extend(extra.iter().cloned());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(&format!("{} ", extra[extra.len() - 2])) && err.contains("is the input"),
            "{extra:?}: {err}"
        );
        assert_eq!(std::fs::read(&cap).unwrap(), before, "{extra:?}: the capture is untouched");
    }
    // merge: a report given as input and as output.
    let report = dir.path().join("r.json");
    assert_eq!(run(&["-r", &c, "-q", "--json", report.to_str().unwrap()]).status.code(), Some(0));
    let kept = std::fs::read(&report).unwrap();
    let out = run(&["merge", report.to_str().unwrap(), "--json", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&report).unwrap(), kept);
    // A new file, or a different one, is no input.
    let fresh = dir.path().join("fresh.json");
    assert_eq!(run(&["-r", &c, "-q", "--json", fresh.to_str().unwrap()]).status.code(), Some(0));
}

/// Errors a person meets say their cause once and say what was wrong: an evidence directory
/// that cannot be made names the OS error once; a file given as that directory is called a
/// file; an Ethernet MTU given as --pmtu is refused with the MTUs RoCE has.
#[test]
fn errors_say_their_cause_once_and_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let cap = path("gobackn.pcap");
    let out = run(&["-r", &cap, "-q", "--evidence", "/proc/roce-analyzer-no-such-dir"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    let file = dir.path().join("afile");
    std::fs::write(&file, b"keep").unwrap();
    let out = run(&["-r", &cap, "-q", "--evidence", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a file, not a directory"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
    for bad in ["1500", "9000", "300"] {
        let out = run(&["-r", &cap, "-q", "--pmtu", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--pmtu {bad}: {err}");
        assert!(err.contains("256, 512, 1024, 2048 or 4096"), "{err}");
    }
    assert_eq!(run(&["-r", &cap, "-q", "--pmtu", "1024"]).status.code(), Some(0));
}

/// A finding names its flows where a person reads it, not only in the JSON: the summary's line
/// under each finding and the page's findings table, the first three and how many more.
#[test]
fn findings_name_their_flows_in_the_summary_and_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = run(&["-r", &path("gobackn.pcap"), "--html", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // The fixture's one flow: 10.0.1.1 → 10.0.1.2, QP 0x200, UDP source port 49153.
    let flow = "10.0.1.1 → 10.0.1.2 QP 0x200 (sport 49153)";
    let line = text.lines().skip_while(|l| *l != "audit:").skip_while(|l| !l.contains("[go_back_n]")).nth(1);
    assert_eq!(line.unwrap_or_default().trim(), format!("flows: {flow}"), "{text}");
    // The diagnosis names it too.
    let line = text.lines().skip_while(|l| !l.contains("1. warning [go_back_n]")).nth(1).unwrap_or_default();
    assert_eq!(line.trim(), format!("where: {flow}"), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("<br><small>flows: {flow}</small>")), "the page names it");
}

/// `--generate`: the man page and the shells' completions come from the same definitions as
/// `--help`. groff renders the page without a warning and it documents every flag; bash,
/// given the completions, completes a flag and a subcommand.
#[test]
fn man_page_and_completions_come_from_the_definitions() {
    use tests::tools::require;
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["--generate", "man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = dir.path().join("roce-analyzer.1");
    std::fs::write(&page, &out.stdout).unwrap();
    let roff = String::from_utf8(out.stdout).unwrap();
    for a in analyzer::cli::command().get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if !a.is_hide_set() {
            assert!(roff.contains(&format!("\\-\\-{}", long.replace('-', "\\-"))), "--{long} in the man page");
        }
    }
    let groff = std::process::Command::new(require("groff"))
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(groff.status.success() && groff.stderr.is_empty(), "groff: {}", String::from_utf8_lossy(&groff.stderr));
    let man = std::process::Command::new(require("man")).arg("-l").arg(&page).env("MANWIDTH", "100").output().unwrap();
    assert!(man.status.success(), "man -l: {}", String::from_utf8_lossy(&man.stderr));
    assert!(String::from_utf8_lossy(&man.stdout).contains("roce-analyzer"));

    let out = run(&["--generate", "complete-bash"]);
    assert_eq!(out.status.code(), Some(0));
    let script = dir.path().join("roce-analyzer.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let complete = |words: &str| -> String {
        let prog = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); \
             _roce__analyzer roce-analyzer \"${{COMP_WORDS[COMP_CWORD]}}\" roce-analyzer; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let o = std::process::Command::new(require("bash")).args(["-c", &prog]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(complete("roce-analyzer --pc"), "--pcap");
    assert_eq!(complete("roce-analyzer me"), "merge");
    for shell in ["complete-zsh", "complete-fish", "complete-powershell", "complete-elvish"] {
        let out = run(&["--generate", shell]);
        assert!(out.status.success() && out.stdout.len() > 1000, "{shell}");
    }
    assert_eq!(run(&["--generate", "man", "-r", "x.pcap"]).status.code(), Some(2), "--generate stands alone");
}

/// `-h` lists the flags by purpose under headings, each with its first clause; `--help` has
/// the whole text under the same headings.
#[test]
fn help_is_grouped_by_purpose_short_and_long() {
    let text = |flag: &str| String::from_utf8(run(&[flag]).stdout).unwrap();
    let (short, long) = (text("-h"), text("--help"));
    let headings = ["Input:", "Live (--iface):", "Analyses and thresholds:", "Outputs:", "Fleet:"];
    for help in [&short, &long] {
        let at: Vec<usize> = headings.iter().map(|h| help.find(&format!("\n{h}\n")).unwrap_or(usize::MAX)).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1] && w[1] != usize::MAX), "headings in order: {at:?}");
    }
    for a in analyzer::cli::command().get_arguments().filter(|a| !a.is_hide_set()) {
        if let Some(long_flag) = a.get_long() {
            assert!(short.contains(&format!("--{long_flag}")), "--{long_flag} in -h");
        }
    }
    let whole = "the flows named with their ACKs, NAKs and CNPs";
    assert!(long.contains(whole) && !short.contains(whole), "-h gives the first clause, --help all");
    assert!(short.len() * 4 < long.len() * 3, "-h ({} bytes) well under --help ({})", short.len(), long.len());
}

/// `merge` of an input given twice (the same report, export file or directory by another path
/// or a link) would count everything twice: refused before any work, naming both (issue 44
/// §4). (A capture given twice to the analysis is two vantage points whose copies count once:
/// tests/integration/vantage.rs.)
#[test]
fn merge_refuses_an_input_given_twice() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    assert_eq!(run(&["-q", "-r", &path("gobackn.pcap"), "--json", json.to_str().unwrap()]).status.code(), Some(0));
    let link = dir.path().join("again.json");
    std::os::unix::fs::symlink(&json, &link).unwrap();
    let out = run(&["merge", json.to_str().unwrap(), link.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("again.json is ") && err.contains("given twice"), "{err}");
    let d = dir.path().to_str().unwrap();
    let out = run(&["merge", d, &format!("{d}/."), "-q"]);
    assert_eq!(out.status.code(), Some(2), "a directory twice: {}", String::from_utf8_lossy(&out.stderr));
    // Two files with the same content are two inputs.
    let copy = dir.path().join("copy.json");
    std::fs::copy(&json, &copy).unwrap();
    let out = run(&["merge", json.to_str().unwrap(), copy.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--top` caps every per-flow list of the summary, and each cut list says how many it left
/// out: on the incast capture 16 host pairs have CE marks or CNPs and 16 flows CNPs (issue 45
/// counted them), `--top 2` shows two of each and "14 more". The DCQCN table shows the CNPs
/// it could not judge, so that its columns add up.
#[test]
fn top_caps_every_per_flow_list_and_says_what_it_left_out() {
    let out = run(&["-r", &path("incast.pcap"), "--top", "2"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("ECN: ")).count(), 2, "{text}");
    assert!(text.contains("  … 14 more host pairs with CE marks or CNPs (--top 2; all in the JSON)"), "{text}");
    let dcqcn: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with("DCQCN: ")).skip(2).take_while(|l| !l.is_empty()).collect();
    assert_eq!(dcqcn.len(), 3, "two rows and the count: {dcqcn:#?}");
    assert_eq!(dcqcn[2], "  … 14 more flows with CNPs (--top 2; all in the JSON)");
    let (r, _) = json_of(&["-q", "-r", &path("dcqcn.pcap")]);
    let out = run(&["-r", &path("dcqcn.pcap")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" unjudged "), "{text}");
    for f in r["dcqcn"]["flows"].as_array().unwrap() {
        let n = |k: &str| f[k].as_u64().unwrap();
        assert_eq!(n("reacted") + n("unreacted_cnps") + n("no_rate_before"), n("cnps"), "the columns add up: {f}");
    }
}

/// A topology's TOML error is one line naming the file, line and column, without the toml
/// crate's drawing of the line: a 50 MB unterminated string gives a short message, not one
/// that quotes it (issues 45 §10, 44 §4).
#[test]
fn topology_errors_are_one_short_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("bad.toml");
    std::fs::write(&t, "[[device]]\nname = \"leaf1\"\nports = [\n").unwrap();
    let out = run(&["-q", "-r", &path("gobackn.pcap"), "--topology", t.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.toml: line 3, column ") && !err.contains(" | "), "{err}");
    let huge = format!("[[device]]\nname = \"{}", "x".repeat(50 << 20));
    std::fs::write(&t, huge).unwrap();
    let out = run(&["-q", "-r", &path("gobackn.pcap"), "--topology", t.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.len() < 400,
        "{} bytes: {}",
        out.stderr.len(),
        String::from_utf8_lossy(&out.stderr[..400.min(out.stderr.len())])
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 2, column "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CE marks within `--cnp-timeout` of the capture's end are `pending`, not dropped from every
/// count (issue 45 §5). `cnp_paced.pcap` (tests/src/transport.rs) ends at 2 ms; each sender
/// marks every 2 µs from 100 to 398 µs (150 marks). With a 5 ms timeout nothing has timed out:
/// .30/.31 have their marks up to 350 µs answered by 6 CNPs (the last seen at 352 µs), the 24
/// after it pending; .32's NP stopped after the CNP seen at 152 µs (answering the 26 marks
/// before it): 124 pending; .33 got no CNP: 150 pending. With the default 1 ms every mark is
/// older than the timeout at the end: none pending, .33's 150 unanswered.
#[test]
fn ce_marks_at_the_end_are_pending() {
    let rows = |r: &Value| -> Vec<(String, u64, u64, u64)> {
        r["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let n = |k: &str| p[k].as_u64().unwrap();
                (p["a"].as_str().unwrap().to_string(), n("cnp_back"), n("ce_unanswered"), n("ce_pending"))
            })
            .collect()
    };
    let (r, _) = json_of(&["-q", "-r", &path("cnp_paced.pcap"), "--cnp-timeout", "5ms"]);
    let want = [("10.0.1.30", 6, 0, 24), ("10.0.1.31", 6, 0, 24), ("10.0.1.32", 2, 0, 124), ("10.0.1.33", 0, 0, 150)];
    assert_eq!(rows(&r), want.map(|(a, b, c, d)| (a.to_string(), b, c, d)));
    let (r, _) = json_of(&["-q", "-r", &path("cnp_paced.pcap")]);
    let last = rows(&r).pop().unwrap();
    assert_eq!(last, ("10.0.1.33".to_string(), 0, 150, 0));
    assert!(rows(&r).iter().all(|x| x.3 == 0));
    let text = String::from_utf8(run(&["-r", &path("cnp_paced.pcap"), "--cnp-timeout", "5ms"]).stdout).unwrap();
    assert!(text.contains("· 150 CE pending (within --cnp-timeout of the end)"), "{text}");
}
