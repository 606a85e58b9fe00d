//! Continuous export (`--export`): NDJSON lines per interval, checked against the shipped
//! schema, whose deltas add up to the report's totals, whose events come once, and which
//! `merge` turns back into the report's flows and PFC senders.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use analyzer::capture::input::InputSpec;
use analyzer::model::Report;
use analyzer::pipeline::Pipeline;
use analyzer::report::RunKind;
use analyzer::report::export::{self, Exporter, Rotation, Sink};
use serde_json::Value;
use tests::fixtures::{self, Fixture};
use tests::netns::{Agent, Netns, privileged};
use tests::tools::run;

/// Every line of the export files in `dir`, each checked against the schema.
fn lines(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for (_, path) in export::sink::files(dir).unwrap() {
        for (i, l) in std::fs::read_to_string(&path).unwrap().lines().enumerate() {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
            assert_eq!(export::read::line_violation(&v), None, "{}:{}: {l}", path.display(), i + 1);
            out.push(v);
        }
    }
    out
}

fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == t).collect()
}

fn flow_id(f: &Value) -> String {
    format!("{} {} {} {}", f["src"], f["dst"], f["udp_sport"], f["dst_qp"])
}

/// `f`'s frames in two halves, as two files read one after the other into one run, with an
/// export after each half and the final one: three intervals.
fn export_in_halves(f: &Fixture, dir: &Path) -> (Vec<Value>, Value) {
    let half = f.frames.len() / 2;
    let mut run = Pipeline::default();
    let sink = Sink::open(&dir.join("export"), Rotation { max_bytes: 64 << 20, keep: 8 }).unwrap();
    let mut x = Exporter::new(sink, "host-a".into(), RunKind::Offline, None);
    for (i, part) in [&f.frames[..half], &f.frames[half..]].into_iter().enumerate() {
        let p = dir.join(format!("{}.{i}", f.name));
        std::fs::write(&p, Fixture { frames: part.to_vec(), ..f.clone() }.bytes()).unwrap();
        let input = InputSpec::parse(&format!("cap={}", p.display())).unwrap();
        analyzer::offline::analyze_files(&mut run, &[input], |_, _| {}).unwrap();
        x.export(&run, run.engine.last_ns.unwrap_or(0), false).unwrap();
    }
    run.finish();
    x.export(&run, run.engine.last_ns.unwrap_or(0), true).unwrap();
    let report = serde_json::to_value(Report::assemble(&run, RunKind::Offline)).unwrap();
    (lines(&dir.join("export")), report)
}

/// Over fixtures with flows, pauses, storms, incast and findings: flow deltas add up to the
/// totals, the last total of each flow is the report's flow, PFC deltas add up to the
/// report's senders, each storm and episode of the report is exported exactly once, each
/// finding's last line is the report's, and an interval line closes each interval.
#[test]
fn export_lines_add_up_to_the_report() {
    let mut all = fixtures::all();
    all.extend([tests::fabric::storm(), tests::fabric::incast(), tests::fabric::cascade()]);
    let mut with_pairs = 0;
    for f in all.into_iter().filter(|f| f.frames.len() >= 2) {
        let dir = tempfile::tempdir().unwrap();
        let (lines, report) = export_in_halves(&f, dir.path());
        let name = f.name;
        // Three intervals, each closed by its interval line, which counts the lines before it.
        let intervals = of_type(&lines, "interval");
        assert_eq!(intervals.len(), 3, "{name}");
        assert_eq!(lines.last().unwrap()["type"], "interval", "{name}");
        assert_eq!(intervals.iter().map(|i| i["final"].as_bool().unwrap()).collect::<Vec<_>>(), [false, false, true]);
        let mut from = 0;
        for (seq, i) in intervals.iter().enumerate() {
            let at = lines.iter().position(|l| std::ptr::eq(l, *i)).unwrap();
            assert_eq!(i["lines"].as_u64().unwrap() as usize, at - from, "{name}: interval {seq}");
            assert!(lines[from..=at].iter().all(|l| l["seq"] == seq as u64 && l["host"] == "host-a"), "{name}");
            from = at + 1;
        }
        assert_eq!(intervals[2]["capture"], report["capture"], "{name}: the last totals are the report's");
        let frames: u64 = intervals.iter().map(|i| i["delta"]["frames"].as_u64().unwrap()).sum();
        assert_eq!(frames, report["capture"]["frames"].as_u64().unwrap(), "{name}");
        // Flows: deltas add up, the last total is the report's flow.
        let mut sums: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut last: BTreeMap<String, &Value> = BTreeMap::new();
        for l in of_type(&lines, "flow") {
            let s = sums.entry(flow_id(&l["total"])).or_default();
            s.0 += l["delta"]["packets"].as_u64().unwrap();
            s.1 += l["delta"]["bytes"].as_u64().unwrap();
            s.2 += l["delta"]["ce"].as_u64().unwrap();
            last.insert(flow_id(&l["total"]), &l["total"]);
        }
        let flows = report["flows"].as_array().unwrap();
        assert_eq!(last.len(), flows.len(), "{name}: every flow exported");
        for fl in flows {
            let id = flow_id(fl);
            assert_eq!(last[&id], fl, "{name}: {id}");
            let want =
                (fl["packets"].as_u64().unwrap(), fl["bytes"].as_u64().unwrap(), fl["ecn"]["ce"].as_u64().unwrap());
            assert_eq!(sums[&id], want, "{name}: {id} deltas");
        }
        // The second interval exports the flows of the second half, and flows whose requests
        // were answered in it (an RTT sample, no frame of their own).
        let half = f.frames.len() / 2;
        let later = Fixture { frames: f.frames[half..].to_vec(), ..f.clone() };
        let dir2 = tempfile::tempdir().unwrap();
        let p = dir2.path().join("later.pcap");
        std::fs::write(&p, later.bytes()).unwrap();
        let later_flows: Vec<String> = offline_report(&p)["flows"].as_array().unwrap().iter().map(flow_id).collect();
        for l in of_type(&lines, "flow").iter().filter(|l| l["seq"] == 1) {
            let id = flow_id(&l["total"]);
            let moved = l["delta"]["packets"].as_u64().unwrap() > 0;
            assert_eq!(moved, later_flows.contains(&id), "{name}: {id}");
            assert!(moved || l["delta"]["rtt_samples"].as_u64().unwrap() > 0, "{name}: {id} did not change: {l}");
        }
        let exported: Vec<String> =
            of_type(&lines, "flow").iter().filter(|l| l["seq"] == 1).map(|l| flow_id(&l["total"])).collect();
        assert!(later_flows.iter().all(|id| exported.contains(id)), "{name}: {later_flows:?} vs {exported:?}");
        // Message pairs: a line when a pair's completed messages changed, the last one the
        // report's entry.
        let mut pairs: BTreeMap<String, &Value> = BTreeMap::new();
        for l in of_type(&lines, "message_pair") {
            let id = format!("{}>{}", l["pair"]["src"], l["pair"]["dst"]);
            if let Some(before) = pairs.insert(id.clone(), &l["pair"]) {
                assert_ne!(before["messages"], l["pair"]["messages"], "{name}: {id} unchanged, written again");
            }
        }
        let want: BTreeMap<String, &Value> = report["messages"]["pairs"]
            .as_array()
            .map(|v| v.iter().map(|p| (format!("{}>{}", p["src"], p["dst"]), p)).collect())
            .unwrap_or_default();
        assert_eq!(pairs, want, "{name}: the pairs' last lines are the report's pairs");
        with_pairs += usize::from(!want.is_empty());
        // PFC: frames and pause time deltas add up to the report's senders.
        let mut pfc: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        for l in of_type(&lines, "pfc") {
            let s = pfc.entry(format!("{} {}", l["mac"], l["priority"])).or_default();
            s.0 += l["delta"]["frames"].as_u64().unwrap();
            s.1 += l["delta"]["paused_ns"].as_u64().unwrap();
            s.2 += l["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i[1].as_u64().unwrap() - i[0].as_u64().unwrap())
                .sum::<u64>();
        }
        let senders = report["pfc"]["senders"].as_array().unwrap().iter().map(|s| (s, s["priority"].clone()));
        let pause = report["pfc"]["pause_senders"].as_array().unwrap().iter().map(|s| (s, Value::from(8)));
        for (s, prio) in senders.chain(pause) {
            let got = pfc[&format!("{} {}", s["mac"], prio)];
            let paused = s["paused_ns"].as_u64().unwrap();
            assert_eq!(got, (s["frames"].as_u64().unwrap(), paused, paused), "{name}: sender {} {prio}", s["mac"]);
        }
        // Events once each; findings end as the report has them.
        let storms: Vec<&Value> = of_type(&lines, "storm").iter().map(|l| &l["storm"]).collect();
        assert_eq!(storms, report["pfc"]["storms"].as_array().unwrap().iter().collect::<Vec<_>>(), "{name}");
        let episodes: Vec<&Value> = of_type(&lines, "incast_episode").iter().map(|l| &l["episode"]).collect();
        let mut want: Vec<&Value> = report["incast"]["episodes"].as_array().unwrap().iter().collect();
        want.sort_by_key(|e| (e["start_ns"].as_u64(), e["dst"].to_string()));
        let mut got = episodes.clone();
        got.sort_by_key(|e| (e["start_ns"].as_u64(), e["dst"].to_string()));
        assert_eq!(got, want, "{name}");
        let mut findings: BTreeMap<String, &Value> = BTreeMap::new();
        for l in of_type(&lines, "finding") {
            let id = l["id"].as_str().unwrap().to_string();
            assert!(id.starts_with(l["finding"]["code"].as_str().unwrap()), "{l}");
            match l["state"].as_str().unwrap() {
                "cleared" => assert!(findings.remove(&id).is_some(), "{name}: cleared before raised: {l}"),
                _ => assert!(findings.insert(id, &l["finding"]).is_none() || l["state"] == "final", "{name}: {l}"),
            }
        }
        let mut report_findings: Vec<&Value> = report["audit"].as_array().unwrap().iter().collect();
        report_findings.extend(report["ecmp"]["findings"].as_array().unwrap());
        let key = |f: &Value| format!("{} {} {}", f["code"], f["flows"], f["message"]);
        let mut got: Vec<String> = findings.values().map(|f| key(f)).collect();
        let mut want: Vec<String> = report_findings.iter().map(|f| key(f)).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{name}: the findings' last lines are the report's findings");
    }
    assert!(with_pairs >= 2, "fixtures whose messages completed: {with_pairs}");
}

fn offline_report(p: &Path) -> Value {
    let out = run(&["-q", "-r", p.to_str().unwrap(), "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A second, independent validator of the shipped schemas: Python's jsonschema (Draft
/// 2020-12, with the report schema in its registry for the `../report/v1` references).
const PY_VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
report = json.load(open(sys.argv[1] + "/report-v1.schema.json"))
export = json.load(open(sys.argv[1] + "/export-v1.schema.json"))
Draft202012Validator.check_schema(export)
registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in (report, export)])
validator = Draft202012Validator(export, registry=registry)
n = 0
for path in sys.argv[2:]:
    for i, line in enumerate(open(path), 1):
        for e in validator.iter_errors(json.loads(line)):
            sys.exit(f"{path}:{i}: {e.message}")
        n += 1
print(n)
"#;

fn python_validates(files: &[std::path::PathBuf]) {
    let schema_dir = tests::tools::root().join("schema");
    let out = std::process::Command::new(tests::tools::require("python3"))
        .arg("-c")
        .arg(PY_VALIDATE)
        .arg(&schema_dir)
        .args(files)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python jsonschema (installed by scripts/setup): {err}");
    let n: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let total: usize = files.iter().map(|f| std::fs::read_to_string(f).unwrap().lines().count()).sum();
    assert_eq!(n, total, "every line validated");
    // And it refuses what breaks the schema.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.ndjson");
    std::fs::write(
        &bad,
        "{\"schema\":\"roce-analyzer/export/v1\",\"host\":\"h\",\"seq\":0,\"type\":\"flow\",\"delta\":{}}\n",
    )
    .unwrap();
    let out =
        std::process::Command::new("python3").arg("-c").arg(PY_VALIDATE).arg(&schema_dir).arg(&bad).output().unwrap();
    assert!(!out.status.success(), "a flow line without its totals is invalid");
}

fn merged(inputs: &[&Path]) -> Value {
    let mut args = vec!["merge", "-q", "--json", "-"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `--export -` writes only NDJSON to standard output; `merge` of export directories of two
/// captures gives the flows and PFC senders that merging their reports gives, and says the
/// reports were rebuilt from exports.
#[test]
fn merge_reads_exports_as_it_reads_reports() {
    let data = fixtures::data_dir();
    let dir = tempfile::tempdir().unwrap();
    let mut exports = Vec::new();
    let mut reports = Vec::new();
    for name in ["example.pcap", "pfc_storm.pcap", "incast.pcap"] {
        let pcap = data.join(name);
        let out = run(&["-r", pcap.to_str().unwrap(), "--export", "-"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: not NDJSON ({e}): {l}"));
            assert_eq!(export::read::line_violation(&v), None, "{l}");
        }
        let file = dir.path().join(format!("{name}.ndjson"));
        std::fs::write(&file, text).unwrap();
        exports.push(file);
        let json = dir.path().join(format!("{name}.json"));
        std::fs::write(&json, serde_json::to_vec(&offline_report(&pcap)).unwrap()).unwrap();
        reports.push(json);
    }
    python_validates(&exports);
    let from_exports = merged(&exports.iter().map(|p| p.as_path()).collect::<Vec<_>>());
    let from_reports = merged(&reports.iter().map(|p| p.as_path()).collect::<Vec<_>>());
    tests::tools::check_report(&from_exports);
    let strip_labels = |v: &Value| {
        let mut f = v["flows"].clone();
        for x in f.as_array_mut().unwrap() {
            x.as_object_mut().unwrap().remove("labels");
        }
        f
    };
    assert_eq!(strip_labels(&from_exports), strip_labels(&from_reports));
    assert_eq!(from_exports["pfc"]["senders"], from_reports["pfc"]["senders"]);
    assert_eq!(from_exports["pfc"]["storms"], from_reports["pfc"]["storms"]);
    assert_eq!(from_exports["capture"]["frames"], from_reports["capture"]["frames"]);
    let notes = from_exports["visibility"].as_array().unwrap();
    assert_eq!(notes.iter().filter(|n| n["code"] == "from_export").count(), 3, "{notes:?}");
}

/// Rotation by size and count; an unusable export path fails before the analysis; a damaged
/// line is named with its file and line; an unterminated last line (a killed writer) is left
/// out and said.
#[test]
fn export_files_rotate_and_bad_lines_are_named() {
    let data = fixtures::data_dir();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("x");
    let pcap = data.join("incast.pcap");
    let out = run(&[
        "-q",
        "-r",
        pcap.to_str().unwrap(),
        "--export",
        out_dir.to_str().unwrap(),
        "--export-max-bytes",
        "4K",
        "--export-keep",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let files = export::sink::files(&out_dir).unwrap();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[0].0 > 0, "older files were deleted: {files:?}");
    for (_, f) in &files {
        let len = std::fs::metadata(f).unwrap().len();
        let text = std::fs::read_to_string(f).unwrap();
        assert!(len <= 4096 || text.lines().count() == 1, "{}: {len} bytes", f.display());
        assert!(text.ends_with('\n'), "whole lines only");
    }
    // A plain file where the directory should be: refused at the start.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, b"").unwrap();
    let out = run(&["-q", "-r", pcap.to_str().unwrap(), "--export", plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("plain"), "{}", String::from_utf8_lossy(&out.stderr));
    // --export - and --json - cannot share standard output.
    let out = run(&["-r", pcap.to_str().unwrap(), "--export", "-", "--json", "-"]);
    assert_eq!(out.status.code(), Some(2));
    // A complete export, then damaged: an unterminated last line is left out, a bad line named.
    let good = dir.path().join("good");
    let out = run(&["-q", "-r", data.join("example.pcap").to_str().unwrap(), "--export", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let file = &export::sink::files(&good).unwrap()[0].1;
    let mut text = std::fs::read_to_string(file).unwrap();
    text.push_str("{\"schema\":\"roce-analyzer/export/v1\",\"host\":\"x\",\"se");
    std::fs::write(file, &text).unwrap();
    let m = merged(&[&good]);
    let note = m["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "from_export").unwrap();
    assert!(note["message"].as_str().unwrap().contains("1 unterminated last line(s) left out"), "{note}");
    let lines: Vec<&str> = text.lines().collect();
    let mut bad = lines[..2].join("\n");
    bad.push_str("\n{\"schema\":\"roce-analyzer/export/v1\",\"host\":\"x\",\"seq\":0,\"type\":\"flow\"}\n");
    bad.push_str(&lines[2..].join("\n"));
    std::fs::write(file, bad).unwrap();
    let out = run(&["merge", "-q", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("roce-analyzer-000000.ndjson: line 3"), "{err}");
}

/// Live: lines every interval while frames flow, the last totals equal to the final report,
/// and after a SIGKILL the export up to then still merges (saying the final interval is
/// missing).
#[test]
fn live_export_follows_the_run_and_survives_a_kill() {
    if !privileged("live_export_follows_the_run_and_survives_a_kill") {
        return;
    }
    let ns = Netns::new("export");
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures::example();
    let sent = f.as_sent(dir.path());
    let out_dir = dir.path().join("export");
    let json = dir.path().join("live.json");
    let args = ["--interval", "200ms", "-q", "--json", json.to_str().unwrap(), "--export", out_dir.to_str().unwrap()];
    let agent = Agent::start(&ns, &args);
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(600));
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(600));
    let (code, _, err) = agent.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let report = tests::tools::read_report(&json);
    let lines = lines(&out_dir);
    let intervals = of_type(&lines, "interval");
    assert!(intervals.len() >= 4, "an interval line every 200 ms: {}", intervals.len());
    assert!(intervals.windows(2).all(|w| w[0]["end_ns"].as_u64() <= w[1]["end_ns"].as_u64()));
    assert_eq!(intervals.last().unwrap()["final"], true);
    assert_eq!(intervals.last().unwrap()["kind"], "live");
    // Flow lines came in (at least) two intervals: the two replays.
    let seqs: std::collections::BTreeSet<u64> =
        of_type(&lines, "flow").iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert!(seqs.len() >= 2, "{seqs:?}");
    let mut last: BTreeMap<String, &Value> = BTreeMap::new();
    for l in of_type(&lines, "flow") {
        last.insert(flow_id(&l["total"]), &l["total"]);
    }
    for fl in report["flows"].as_array().unwrap() {
        assert_eq!(last[&flow_id(fl)]["packets"], fl["packets"]);
        assert_eq!(last[&flow_id(fl)]["bytes"], fl["bytes"]);
    }
    assert_eq!(intervals.last().unwrap()["capture"]["frames"], report["capture"]["frames"]);

    // Killed: no final interval, but what was exported merges.
    let killed = dir.path().join("killed");
    let args = ["--interval", "200ms", "-q", "--export", killed.to_str().unwrap()];
    let mut agent = Agent::start(&ns, &args);
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(1000));
    agent.child.kill().unwrap();
    let _ = agent.child.wait();
    let m = merged(&[&killed]);
    assert_eq!(m["capture"]["frames"], f.frames.len() as u64, "every frame sent before the kill");
    let note = m["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "from_export").unwrap();
    assert!(note["message"].as_str().unwrap().contains("did not write its final interval"), "{note}");
}
