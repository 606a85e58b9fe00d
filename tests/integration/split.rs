//! `merge` of the reports of a capture cut in time, against the report of the whole capture:
//! every fixture cut into two and three parts by frames, each part analysed alone under the
//! same label, the parts' reports merged. What adds up over time must come back exactly:
//! capture totals, every flow's counts, PFC senders and their pause time, storms, congestion
//! trees, ECMP, RTT timeouts and CM pairs, incast episodes (dst, senders; what falls between
//! the cut and the moment the next part's count reaches the minimum again is lost, so their
//! bytes and marks may only be less, their start and end within one window). Analyses that carry state across the cut (PSN sequence,
//! RTT pairing, messages, marks judged against CNPs, DCQCN rates) do not come back whole yet:
//! docs/usage.md, merge.

use serde_json::{Value, json};
use tests::fixtures::{self, Fixture};
use tests::tools::{assert_json_eq, run};

fn report(args: &[&str]) -> Value {
    let out = run(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn analyse(dir: &std::path::Path, f: &Fixture, name: &str) -> Value {
    let path = dir.join(name);
    std::fs::write(&path, f.bytes()).unwrap();
    report(&["-q", "-r", &format!("cap={}", path.display()), "--json", "-"])
}

/// What adds up over time, as the whole report and the merge must both give it.
fn additive(r: &Value) -> Value {
    let c = &r["capture"];
    let flows: Vec<Value> = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let keys = ["src", "dst", "udp_sport", "dst_qp", "packets", "bytes", "opcodes", "dscp", "pcp", "ecn"];
            Value::Object(keys.iter().map(|k| (k.to_string(), f[*k].clone())).collect())
        })
        .collect();
    let mut senders = r["pfc"]["senders"].clone();
    for s in senders.as_array_mut().unwrap() {
        // Onsets and the marks before them are judged on frames around each onset.
        s.as_object_mut().unwrap().remove("ecn_lead");
    }
    let rtt = &r["rtt_ns"];
    let incast: Vec<Value> = r["incast"]["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut s: Vec<&str> = e["senders"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
            s.sort_unstable();
            json!([e["dst"], s])
        })
        .collect();
    json!({
        "capture": [c["frames"], c["classes"], c["dropped"], c["start_ns"], c["end_ns"]],
        "flows": flows,
        "pfc": [r["pfc"]["frames"], r["pfc"]["pause_8023x_frames"], senders, r["pfc"]["pause_senders"], r["pfc"]["storms"]],
        "congestion_tree": r["congestion_tree"],
        "ecmp": r["ecmp"],
        "rtt": [rtt["timeouts"], rtt["cm_paired"]],
        "incast": incast,
    })
}

/// Fixtures whose frames a report matches among themselves, which a cut separates.
fn matched_within(f: &Fixture) -> bool {
    // Mirrored copies of one frame from two points: counted once when both are in one part.
    f.name.starts_with("vantage_")
}

#[test]
fn a_capture_cut_in_time_merges_back_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for f in fixtures::all().into_iter().filter(|f| f.frames.len() >= 3 && !matched_within(f)) {
        let whole = analyse(dir.path(), &f, &format!("{}.whole", f.name));
        for parts in [2, 3] {
            let per = f.frames.len().div_ceil(parts);
            let reports: Vec<String> = f
                .frames
                .chunks(per)
                .enumerate()
                .map(|(i, chunk)| {
                    let part = Fixture { frames: chunk.to_vec(), ..f.clone() };
                    let r = analyse(dir.path(), &part, &format!("{}.{parts}.{i}", f.name));
                    let p = dir.path().join(format!("{}.{parts}.{i}.json", f.name));
                    std::fs::write(&p, r.to_string()).unwrap();
                    p.display().to_string()
                })
                .collect();
            let mut args = vec!["merge"];
            args.extend(reports.iter().map(String::as_str));
            args.extend(["--json", "-"]);
            let merged = report(&args);
            let what = format!("{} cut in {parts}", f.name);
            assert_json_eq(&additive(&merged), &additive(&whole), &what);
            // What needs the cut's neighbourhood is never more than the whole's.
            for (m, w) in merged["incast"]["episodes"]
                .as_array()
                .unwrap()
                .iter()
                .zip(whole["incast"]["episodes"].as_array().unwrap())
            {
                for k in ["bytes", "ce_packets", "cnp_packets", "pfc_frames"] {
                    assert!(m[k].as_u64() <= w[k].as_u64(), "{what}: incast {k} {} > {}", m[k], w[k]);
                }
                let window = whole["incast"]["window_ns"].as_u64().unwrap();
                assert!(
                    m["end_ns"].as_u64().unwrap().abs_diff(w["end_ns"].as_u64().unwrap()) <= window,
                    "{what}: incast end"
                );
            }
            let codes: Vec<&str> =
                merged["visibility"].as_array().unwrap().iter().filter_map(|n| n["code"].as_str()).collect();
            for gone in ["incast_not_merged", "dcqcn_not_merged"] {
                assert!(!codes.contains(&gone), "{what}: {gone}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 80, "fixtures cut and merged: {checked}");
}
