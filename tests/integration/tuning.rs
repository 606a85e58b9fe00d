//! The tuning rules as checks, on fixtures built for them (tests/src/tuning.rs): capture loss
//! told apart from network loss, the first CNP judged. Every number stated by hand.

use serde_json::Value;
use tests::fixtures::data_dir;
use tests::tools::{report, run};

fn flow(r: &Value, src: u8) -> &Value {
    r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["src"] == format!("10.0.3.{src}") && f["dst_qp"].as_u64().unwrap() < 0x200)
        .unwrap()
}

fn codes(r: &Value, code: &str) -> Vec<String> {
    r["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| f["flows"][0]["src"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn gaps_the_acks_cover_are_the_captures_loss_not_the_networks() {
    let r = report("capture_loss.pcap", &[]);
    // 17 + 9 + 5 retransmitted + 9 data frames and 4 + 2 + 1 ACKs/NAKs held; 3 missed.
    let roce = r["capture"]["classes"]["roce"].as_u64().unwrap();
    assert_eq!(roce, 17 + 9 + 5 + 9 + 4 + 2 + 1);
    assert_eq!(r["capture"]["loss"]["frames_missed"], 3);
    assert_eq!(r["capture"]["loss"]["ratio"].as_f64().unwrap(), 3.0 / (roce + 3) as f64);
    assert_eq!(flow(&r, 41)["psn"]["capture_missed"], 3);
    assert!(flow(&r, 43)["psn"].get("capture_missed").is_none(), "retransmitted: loss, not the capture");
    assert!(flow(&r, 45)["psn"].get("capture_missed").is_none(), "no ACK covers it");
    assert_eq!(codes(&r, "psn_gap"), ["10.0.3.45"], "only the gap no ACK covers");
    assert_eq!(codes(&r, "go_back_n"), ["10.0.3.43"]);
    let note =
        r["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "capture_loss").expect("a capture_loss note");
    assert!(note["message"].as_str().unwrap().starts_with("this capture missed 3 frames"), "{note}");
}

#[test]
fn ecn_acts_before_pfc_or_the_report_says_it_did_not() {
    let r = report("ecn_lead.pcap", &[]);
    let senders = r["pfc"]["senders"].as_array().unwrap();
    let lead = |mac: &str| senders.iter().find(|s| s["mac"] == mac).unwrap()["ecn_lead"].clone();
    // Onsets at 200.5, 400.5, 600.5 µs; marks at 150 and 370 µs: leads 50.5 and 30.5 µs.
    assert_eq!(
        lead("02:00:00:00:aa:01"),
        serde_json::json!({"onsets": 3, "preceded": 2, "window_ns": 100_000, "lead_ns_p50": 30_500})
    );
    assert_eq!(lead("02:00:00:00:bb:01"), serde_json::json!({"onsets": 2, "preceded": 0, "window_ns": 100_000}));
    let f: Vec<&Value> = r["audit"].as_array().unwrap().iter().filter(|f| f["code"] == "pfc_before_ecn").collect();
    assert_eq!(f.len(), 1);
    assert!(
        f[0]["message"].as_str().unwrap().starts_with("02:00:00:00:bb:01 paused priority 5 2 times, 2 of them"),
        "{}",
        f[0]
    );
    // 3 pause frames per 1000 data frames of priority 3, 2 per 200 of priority 5; 5.12 µs each.
    let rates = &r["pfc"]["rates"];
    assert_eq!(
        rates[0],
        serde_json::json!({"priority": 3, "data_frames": 1000, "pause_frames": 3, "paused_ns": 15_360,
        "frames_per_million": 3000.0, "paused_ns_per_million": 15_360_000.0})
    );
    assert_eq!((rates[1]["priority"].as_u64(), rates[1]["frames_per_million"].as_f64()), (Some(5), Some(10_000.0)));
    let high = |r: &Value| -> Vec<String> {
        r["audit"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "pfc_rate_high")
            .map(|f| f["message"].as_str().unwrap()[..10].to_string())
            .collect()
    };
    assert_eq!(high(&r), ["priority 3", "priority 5"], "both above 10 per million");
    assert_eq!(high(&report("ecn_lead.pcap", &["--pfc-rate-max", "5000"])), ["priority 5"]);
    // A wider window finds the mark 150 µs before the third onset's 600.5 µs? No: the last mark
    // is at 370 µs, 230.5 µs before; with --ecn-lead 250us all three are preceded.
    let wide = report("ecn_lead.pcap", &["--ecn-lead", "250us"]);
    let s = wide["pfc"]["senders"].as_array().unwrap().iter().find(|s| s["mac"] == "02:00:00:00:aa:01").unwrap();
    assert_eq!(s["ecn_lead"]["preceded"], 3);
}

#[test]
fn the_first_cnp_of_a_flow_is_judged() {
    let r = report("first_cnp.pcap", &[]);
    let d = &r["dcqcn"];
    let f = |src: &str| d["flows"].as_array().unwrap().iter().find(|f| f["src"] == src).unwrap();
    let halved = f("10.0.3.47");
    // Its only CNP, 300 µs into steady traffic without a CE mark here: judged, a halving.
    assert_eq!(
        (halved["cnps"].as_u64(), halved["reacted"].as_u64(), halved["no_rate_before"].as_u64()),
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(halved["cut_ratio_p50"], 0.5);
    let ignored = f("10.0.3.49");
    assert_eq!(
        (ignored["cnps"].as_u64(), ignored["unreacted_cnps"].as_u64(), ignored["no_rate_before"].as_u64()),
        (Some(3), Some(3), Some(0))
    );
    assert_eq!(codes(&r, "cnp_ignored"), ["10.0.3.49"]);
}

#[test]
fn inputs_in_series_are_not_uplinks() {
    let leaf = format!("leaf={}", data_dir().join("vantage_leaf.pcap").display());
    let spine = format!("spine={}", data_dir().join("vantage_spine.pcap").display());
    let out = run(&["-q", "-r", &leaf, "-r", &spine, "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The spine saw 109 frames, 99 + 10 of them also seen at the leaf (116 frames): in series.
    let o = &r["ecmp"]["observed"];
    assert_eq!(o["by_label"].as_object().unwrap().keys().collect::<Vec<_>>(), ["spine"]);
    assert_eq!(o["in_series"], serde_json::json!([{"label": "leaf", "with": "spine", "copies": 109}]));
    assert!(!r["ecmp"]["findings"].as_array().unwrap().iter().any(|f| f["code"] == "uplink_imbalance"));
    // Three uplinks that share no frame stay three uplinks.
    let ups: Vec<String> =
        (1..=3).map(|i| format!("u{i}={}", data_dir().join(format!("uplink{i}.pcap")).display())).collect();
    let out = run(&["-q", "-r", &ups[0], "-r", &ups[1], "-r", &ups[2], "--json", "-"]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ecmp"]["observed"]["by_label"].as_object().unwrap().len(), 3);
    assert!(r["ecmp"]["observed"].get("in_series").is_none());
}

fn uplinks() -> Vec<String> {
    (0..4).map(|u| format!("u{u}={}", data_dir().join(format!("spray_u{u}.pcap")).display())).collect()
}

fn uplink_args(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = uplinks().into_iter().flat_map(|u| ["-r".to_string(), u]).collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Findings of a code: (severity, first flow's source).
fn severities(r: &Value, code: &str) -> Vec<(String, String)> {
    r["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| (f["severity"].as_str().unwrap().into(), f["flows"][0]["src"].as_str().unwrap().into()))
        .collect()
}

/// The sprayed flows as (source, uplinks, requests, reordered, p50, max, NAKs).
fn sprayed(r: &Value) -> Vec<Value> {
    r["load_balancing"]["sprayed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            serde_json::json!([
                f["src"],
                f["uplinks"],
                f["requests"],
                f["reordered"],
                f["displacement_p50"],
                f["displacement_max"],
                f["psn_sequence_naks"]
            ])
        })
        .collect()
}

/// Spraying over four labelled uplinks (tests/src/tuning.rs, by hand): 3 request flows of 63
/// requests; 61 → 62 and 63 → 64 on all four uplinks (sprayed), 65 → 66 on one (mode mixed);
/// 10 reordered, density {1: 9, 2: 1}; the receiver of 63 → 64 NAKed the reordering:
/// `spraying_without_ooo` names it, and its go-back-N says the NAK may answer reordering; the
/// reordering of 61 → 62 (no NAK) is information, not a warning.
#[test]
fn spraying_over_uplinks_is_told_from_loss() {
    let args = uplink_args(&[]);
    let out = run(&uplink_args(&["-q", "--json", "-"]).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lb = &r["load_balancing"];
    assert_eq!(lb["mode"], "mixed");
    assert_eq!(lb["basis"], "uplinks");
    assert_eq!(lb["uplinks"], serde_json::json!(["u0", "u1", "u2", "u3"]));
    assert_eq!((&lb["flows"], &lb["sprayed_flows"]), (&3.into(), &2.into()));
    let ro = &lb["reorder"];
    assert_eq!(
        ro,
        &serde_json::json!({"packets": 63, "reordered": 10, "ratio": 10.0 / 63.0, "displacement_p50": 1,
            "displacement_max": 2, "density": [{"displacement": 1, "packets": 9}, {"displacement": 2, "packets": 1}]})
    );
    assert_eq!(
        sprayed(&r),
        [serde_json::json!(["10.0.3.61", 4, 40, 9, 1, 1, 0]), serde_json::json!(["10.0.3.63", 4, 13, 1, 2, 2, 1])]
    );
    assert_eq!(severities(&r, "spraying_without_ooo"), [("warning".into(), "10.0.3.63".into())]);
    assert_eq!(severities(&r, "reordering"), [("info".into(), "10.0.3.61".into())]);
    assert_eq!(severities(&r, "go_back_n"), [("warning".into(), "10.0.3.63".into())]);
    let gbn = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "go_back_n").unwrap();
    assert!(gbn["message"].as_str().unwrap().contains("sprayed"), "{gbn}");
    assert!(
        !r["audit"].as_array().unwrap().iter().any(|f| f["code"] == "loss_between" || f["code"] == "psn_gap"),
        "reordering is not loss: {}",
        r["audit"]
    );
    // The summary and the page say it.
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Load balancing: mixed (2 of 3 request flows sprayed, judged on uplinks u0, u1, u2, u3) · 10 of 63 requests reordered (15.9 %), displacement p50 1 max 2"),
        "{text}"
    );
    assert!(
        text.contains(
            "10.0.3.63 → 10.0.3.64 QP 0x13f (sport 49215): 4 uplinks, 13 requests, 1 reordered, 1 PSN-sequence NAKs"
        ),
        "{text}"
    );
}

/// One capture of the same traffic: no uplinks, so a flow is spread when its requests arrived
/// reordered: the same two flows, the same reordering, `spraying_without_ooo` for the same one;
/// the reordering stays a warning (at one point, a path that reorders may be at fault).
/// Merged with reorder.pcap (502 after 503: 1 late, displacement 1, 6 requests): 4 flows,
/// density {1: 10, 2: 1}; two labels are two uplinks, on which no flow was spread (each on
/// one): what one run over both captures says.
#[test]
fn one_capture_judges_spreading_by_reordering_and_merges() {
    let r = report("spray.pcap", &[]);
    let lb = &r["load_balancing"];
    assert_eq!((&lb["mode"], &lb["basis"], &lb["sprayed_flows"]), (&"mixed".into(), &"reordering".into(), &2.into()));
    assert_eq!(lb["uplinks"], serde_json::json!([]));
    assert_eq!((&lb["reorder"]["packets"], &lb["reorder"]["reordered"]), (&63.into(), &10.into()));
    assert_eq!(
        sprayed(&r),
        [
            serde_json::json!(["10.0.3.61", null, 40, 9, 1, 1, 0]),
            serde_json::json!(["10.0.3.63", null, 13, 1, 2, 2, 1])
        ]
    );
    assert_eq!(severities(&r, "spraying_without_ooo"), [("warning".into(), "10.0.3.63".into())]);
    assert_eq!(severities(&r, "reordering"), [("warning".into(), "10.0.3.61".into())]);
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for name in ["spray.pcap", "reorder.pcap"] {
        let p = dir.path().join(format!("{name}.json"));
        let out = run(&["-q", "-r", data_dir().join(name).to_str().unwrap(), "--json", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0));
        paths.push(p.to_str().unwrap().to_string());
    }
    let out = run(&["merge", &paths[0], &paths[1], "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lb = &m["load_balancing"];
    assert_eq!((&lb["flows"], &lb["sprayed_flows"], &lb["mode"]), (&4.into(), &0.into(), &"per_flow".into()));
    assert_eq!((&lb["basis"], &lb["uplinks"]), (&"uplinks".into(), &serde_json::json!(["reorder.pcap", "spray.pcap"])));
    assert_eq!(lb["reorder"]["packets"], 69);
    assert_eq!(
        lb["reorder"]["density"],
        serde_json::json!([{"displacement": 1, "packets": 10}, {"displacement": 2, "packets": 1}])
    );
    let (spray, reorder) = (data_dir().join("spray.pcap"), data_dir().join("reorder.pcap"));
    let both = run(&["-q", "-r", spray.to_str().unwrap(), "-r", reorder.to_str().unwrap(), "--json", "-"]);
    let both: Value = serde_json::from_slice(&both.stdout).unwrap();
    assert_eq!(lb, &both["load_balancing"], "the merge of the two is one run over both");
}

/// With a topology, a pause onset is asked only about the marks on flows through the link it
/// paused (tests/src/tuning.rs, `ecn_lead_topology`): placed on the marked flow's sender the
/// answers are those without a topology (2 of 3), placed on another host's link none of the
/// marks counts (0 of 3) and `pfc_before_ecn` names that sender too.
#[test]
fn ecn_before_pfc_counts_only_marks_through_the_paused_link() {
    let topo = |t: &str| tests::fixtures::data_dir().join(t).to_str().unwrap().to_string();
    let lead = |r: &Value, mac: &str| -> Value {
        r["pfc"]["senders"].as_array().unwrap().iter().find(|s| s["mac"] == mac).unwrap()["ecn_lead"].clone()
    };
    let before = |r: &Value| -> Vec<String> {
        r["audit"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "pfc_before_ecn")
            .map(|f| f["message"].as_str().unwrap().split(' ').next().unwrap().to_string())
            .collect()
    };
    let on = report("ecn_lead.pcap", &["--topology", &topo("ecn_lead_on_path.toml")]);
    assert_eq!(
        lead(&on, "02:00:00:00:aa:01"),
        serde_json::json!({"onsets": 3, "preceded": 2, "window_ns": 100_000, "lead_ns_p50": 30_500, "link": "h51 → sw"})
    );
    assert_eq!(before(&on), ["sw:bb"]);
    let off = report("ecn_lead.pcap", &["--topology", &topo("ecn_lead_off_path.toml")]);
    assert_eq!(
        lead(&off, "02:00:00:00:aa:01"),
        serde_json::json!({"onsets": 3, "preceded": 0, "window_ns": 100_000, "link": "h53 → sw"})
    );
    assert_eq!(lead(&off, "02:00:00:00:bb:01")["preceded"], 0);
    assert_eq!(before(&off), ["sw:aa", "sw:bb"]);
    let m = off["audit"].as_array().unwrap().iter().find(|f| f["code"] == "pfc_before_ecn").unwrap()["message"].clone();
    assert!(m.as_str().unwrap().contains("through h53 → sw"), "{m}");
}
