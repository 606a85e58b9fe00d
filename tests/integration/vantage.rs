//! Vantage points: the same frames seen at two points count once, and the hops between the
//! points say what happened on the way — answers stated by hand from how the fixtures were
//! built (tests/src/vantage.rs).

use serde_json::{Value, json};
use tests::fixtures::data_dir;
use tests::tools::{metric, run};

fn report(args: &[&str]) -> Value {
    let mut a = vec!["-q", "--json", "-"];
    a.extend_from_slice(args);
    let out = run(&a);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn data(name: &str) -> String {
    data_dir().join(name).to_str().unwrap().to_string()
}

fn leaf_and_spine(extra: &[&str]) -> Value {
    let (l, s) = (format!("leaf={}", data("vantage_leaf.pcap")), format!("spine={}", data("vantage_spine.pcap")));
    let mut a = vec!["-r", &l, "-r", &s];
    a.extend_from_slice(extra);
    report(&a)
}

/// The points, their spans from the capture's start.
fn spans(r: &Value) -> Value {
    let start = r["capture"]["start_ns"].as_u64().unwrap();
    let mut points = r["vantage"]["points"].clone();
    for p in points.as_array_mut().unwrap() {
        for k in ["first_ns", "last_ns"] {
            p[k] = json!(p[k].as_u64().unwrap() - start);
        }
    }
    points
}

fn flow<'a>(r: &'a Value, src: &str) -> &'a Value {
    r["flows"].as_array().unwrap().iter().find(|f| f["src"] == src).unwrap_or_else(|| panic!("no flow from {src}"))
}

/// (from, to, flows, matched, missing, ce_marked, latency min, p50, p99, max) per hop.
fn hops(r: &Value) -> Vec<Value> {
    r["vantage"]["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let l = &h["latency_ns"];
            json!([
                h["from"],
                h["to"],
                h["flows"],
                h["frames_matched"],
                h["frames_missing"],
                h["ce_marked"],
                l["min"],
                l["p50"],
                l["p99"],
                l["max"]
            ])
        })
        .collect()
}

/// The fixture's hops: X (leaf → spine) 99 frames matched (PSN 0..99 but 40 and 41, and the
/// resent 99), latency 3000 + (PSN mod 5) × 100 ns (20 at 3000 with the resend, 19 at 3100, 20
/// each at 3200, 3300, 3400: the 50th of 99 is 3200), 2 missing, 60..69 CE-marked on the way;
/// Y (spine → leaf) 10 ACKs 2 µs apart.
fn fixture_hops(leaf: &str, spine: &str) -> Vec<Value> {
    vec![
        json!([leaf, spine, 1, 99, 2, 10, 3000, 3200, 3400, 3400]),
        json!([spine, leaf, 1, 10, 0, 0, 2000, 2000, 2000, 2000]),
    ]
}

#[test]
fn a_frame_seen_at_two_points_counts_once() {
    let r = leaf_and_spine(&[]);
    // Flow X: 100 PSNs and one resend, once each; ECN from the last copy: 60..69 CE.
    let x = flow(&r, "10.0.2.1");
    assert_eq!(x["packets"], 101);
    assert_eq!(x["ecn"], json!({"not_ect": 0, "ect0": 91, "ect1": 0, "ce": 10}));
    assert_eq!(x["psn"]["duplicates"], 1, "the resend of 99 only");
    assert_eq!(x["labels"], json!(["leaf", "spine"]));
    assert_eq!(flow(&r, "10.0.2.2")["packets"], 10);
    assert_eq!(flow(&r, "10.0.2.3")["packets"], 5);
    // Every frame read is a frame of the capture: 116 at the leaf, 109 at the spine.
    assert_eq!(r["capture"]["frames"], 225);
    let v = &r["vantage"];
    assert_eq!(
        spans(&r),
        json!([
            {"name": "leaf", "label": "leaf", "frames": 116, "first_ns": 0, "last_ns": 1_000_000},
            {"name": "spine", "label": "spine", "frames": 109, "first_ns": 3_000, "last_ns": 1_003_000}
        ])
    );
    assert_eq!(v["copies"], 109);
    assert_eq!(hops(&r), fixture_hops("leaf", "spine"));
    let outside: Vec<&Value> = v["hops"].as_array().unwrap().iter().map(|h| &h["frames_outside_span"]).collect();
    assert_eq!(outside, [0, 0], "both captured the whole time");
    let loss: Vec<&Value> = r["audit"].as_array().unwrap().iter().filter(|f| f["code"] == "loss_between").collect();
    assert_eq!(loss.len(), 1);
    assert_eq!(loss[0]["flows"][0]["dst_qp"], 0x700);
    let msg = loss[0]["message"].as_str().unwrap();
    assert!(msg.starts_with("2 frames of 1 flows seen at leaf never reached spine"), "{msg}");
    // The leaf and the spine saw the same frames: in series, not two uplinks.
    let o = &r["ecmp"]["observed"];
    assert_eq!(o["by_label"]["spine"]["flows"].as_u64(), Some(2));
    assert_eq!(o["in_series"], json!([{"label": "leaf", "with": "spine", "copies": 109}]));
}

/// A second point that stopped after the first 10 %: the leaf's frames after the spine's last
/// one (X's PSN 10–99 and the resend of 99, Y's ACKs 1–9: 100) lay outside the span both
/// captured, so no frame is missing and no `loss_between` is reported; what was matched is
/// X's PSN 0–9 and Y's first ACK.
#[test]
fn a_point_that_stopped_early_loses_no_frames_after_it_stopped() {
    let (l, s) = (format!("leaf={}", data("vantage_leaf.pcap")), format!("spine={}", data("vantage_spine_early.pcap")));
    let r = report(&["-r", &l, "-r", &s]);
    let v = &r["vantage"];
    assert_eq!(
        spans(&r)[1],
        json!({"name": "spine", "label": "spine", "frames": 11, "first_ns": 3_000, "last_ns": 93_400})
    );
    let hop = |from: &str| v["hops"].as_array().unwrap().iter().find(|h| h["from"] == from).unwrap().clone();
    let (down, up) = (hop("leaf"), hop("spine"));
    assert_eq!(
        [&down["frames_matched"], &down["frames_missing"], &down["frames_outside_span"]],
        [10, 0, 100],
        "{down}"
    );
    assert_eq!([&up["frames_matched"], &up["frames_missing"], &up["frames_outside_span"]], [1, 0, 0], "{up}");
    assert!(!r["audit"].as_array().unwrap().iter().any(|f| f["code"] == "loss_between"), "{}", r["audit"]);
    // The human report says what lay outside.
    let out = run(&["-r", &l, "-r", &s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 missing (100 while spine was not capturing)"), "{text}");
}

#[test]
fn the_same_capture_at_two_labels_is_the_same_frames() {
    let ex = data("example.pcap");
    let one = report(&["-r", &ex]);
    let (a, b) = (format!("a={ex}"), format!("b={ex}"));
    let two = report(&["-r", &a, "-r", &b]);
    let strip = |r: &Value| {
        let mut f = r["flows"].clone();
        for x in f.as_array_mut().unwrap() {
            x.as_object_mut().unwrap().remove("labels");
        }
        f
    };
    assert_eq!(strip(&two), strip(&one), "flows, PSN and NAK counters as from one capture");
    // (PFC frames are not matched across points: each label counts its own, so the pause rate
    // per data frame doubles.)
    let audit = |r: &Value| -> Vec<Value> {
        r["audit"].as_array().unwrap().iter().filter(|f| f["code"] != "pfc_rate_high").cloned().collect()
    };
    assert_eq!(audit(&two), audit(&one), "no retransmission or duplicate findings");
    let roce = one["capture"]["classes"]["roce"].as_u64().unwrap() + one["capture"]["classes"]["cnp"].as_u64().unwrap();
    assert_eq!(hops(&two), vec![json!(["a", "b", one["flows"].as_array().unwrap().len(), roce, 0, 0, 0, 0, 0, 0])]);
}

#[test]
fn erspan_copies_from_two_switches_are_two_points() {
    let r = report(&["-r", &data("vantage_erspan.pcap")]);
    let (leaf, spine) = ("vantage_erspan.pcap@192.0.2.1/session 5", "vantage_erspan.pcap@192.0.2.2/session 6");
    let names: Vec<&Value> = r["vantage"]["points"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
    assert_eq!(names, vec![leaf, spine]);
    assert_eq!(r["vantage"]["points"][0]["origin"], "192.0.2.1/session 5");
    assert_eq!(hops(&r), fixture_hops(leaf, spine));
    assert_eq!(flow(&r, "10.0.2.1")["packets"], 101);
}

#[test]
fn clock_offset_corrects_a_capture_clock() {
    let (l, s) = (format!("leaf={}", data("vantage_leaf.pcap")), format!("spine={}", data("vantage_spine_clock.pcap")));
    let r = report(&["-r", &l, "-r", &s, "--clock-offset", "spine=-1ms"]);
    assert_eq!(hops(&r), fixture_hops("leaf", "spine"));
    // Uncorrected, the spine's clock 1 ms ahead shows in every latency of X (1003.0 … 1003.4
    // µs), and the ACKs seem to reach the leaf first: one hop leaf → spine of 109 frames, the
    // ACKs at 998 µs. The spine's capture then seems to start 1 ms late, so PSN 40 and 41 (at
    // 400 µs) lie before it: outside the span both captured, not missing.
    let r = report(&["-r", &l, "-r", &s]);
    assert_eq!(hops(&r), vec![json!(["leaf", "spine", 2, 109, 0, 10, 998_000, 1_003_200, 1_003_400, 1_003_400])]);
    assert_eq!(r["vantage"]["hops"][0]["frames_outside_span"], 2);
    for bad in [vec!["--clock-offset", "spine=1ms"], vec!["--clock-offset", "=+1ms"]] {
        let mut a = vec!["-r", &l, "-r", &s];
        a.extend(bad.iter());
        assert_eq!(run(&a).status.code(), Some(2), "{bad:?} is a usage error");
    }
    let out = run(&["-r", &l, "-r", &s, "--clock-offset", "nope=+1ms"]);
    assert_eq!(out.status.code(), Some(2), "a label no input has is a usage error, said before any work");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no --pcap input is labelled \"nope\""));
}

#[test]
fn the_match_window_bounds_what_is_held() {
    // 20 µs covers every copy here (at most 3.4 µs apart): the same answers, few frames held.
    let narrow = leaf_and_spine(&["--match-window", "20us"]);
    assert_eq!(hops(&narrow), fixture_hops("leaf", "spine"));
    let held = narrow["vantage"]["peak_held"].as_u64().unwrap();
    // Frames are 10 µs apart at each point, plus ACKs: at most 2 per point per 10 µs.
    assert!(held <= 8, "{held} frames held within 20 µs");
    assert_eq!(leaf_and_spine(&[])["vantage"]["peak_held"], 225 - 109, "100 ms holds the whole capture");
    // 1 µs is shorter than any hop: nothing matches, and each copy counts.
    let tight = leaf_and_spine(&["--match-window", "1us"]);
    assert_eq!(tight["vantage"]["hops"], json!([]));
    assert_eq!(flow(&tight, "10.0.2.1")["packets"], 200);
}

#[test]
fn merge_cannot_match_frames_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("leaf.json"), dir.path().join("spine.json"));
    for (out, input) in [(&a, "vantage_leaf.pcap"), (&b, "vantage_spine.pcap")] {
        let o = run(&["-q", "-r", &data(input), "--json", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0));
    }
    let out = run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--json", "-"]);
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(flow(&m, "10.0.2.1")["packets"], 200, "summed: frames cannot be matched");
    assert!(m.get("vantage").is_none());
    let note = m["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "vantage_not_merged");
    let note = note.expect("the vantage_not_merged note");
    assert!(note["message"].as_str().unwrap().contains("2 flows appear in more than one report"), "{note}");
}

/// The leaf and spine captures cut at one time, each part analysed with both inputs and
/// `--edges`, merged. Cut mid-stream, frames the leaf saw before the cut reach the spine after
/// it: one run matches them, the parts count them twice, and the merge says so instead of giving
/// hops. Cut before the spine's first frame, no copy crosses the cut: the hops are one run's.
#[test]
fn a_hop_cut_in_time_merges_back_or_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let all = tests::fixtures::all();
    let pick = |n: &str| all.iter().find(|f| f.name == n).unwrap().clone();
    let (leaf, spine) = (pick("vantage_leaf.pcap"), pick("vantage_spine.pcap"));
    let whole = leaf_and_spine(&[]);
    let merged_at = |cut: u64, tag: &str| {
        let mut reports = Vec::new();
        for (i, keep) in [|t: u64, c: u64| t < c, |t: u64, c: u64| t >= c].into_iter().enumerate() {
            let mut args: Vec<String> = Vec::new();
            for f in [&leaf, &spine] {
                let frames = f.frames.iter().filter(|fr| keep(fr.record.ts_ns, cut)).cloned().collect();
                let part = tests::fixtures::Fixture { frames, ..f.clone() };
                let path = dir.path().join(format!("{tag}.{i}.{}", f.name));
                std::fs::write(&path, part.bytes()).unwrap();
                let label = if f.name.contains("leaf") { "leaf" } else { "spine" };
                args.extend(["-r".into(), format!("{label}={}", path.display())]);
            }
            let out = dir.path().join(format!("{tag}.{i}.json"));
            args.extend(["--edges".into(), "--json".into(), out.display().to_string()]);
            let o = run(&["-q"].into_iter().chain(args.iter().map(String::as_str)).collect::<Vec<_>>());
            assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
            reports.push(out.display().to_string());
        }
        let o = run(&["merge", &reports[0], &reports[1], "--json", "-"]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let ts = |f: &tests::fixtures::Fixture, i: usize| f.frames[i].record.ts_ns;
    let mid = ts(&leaf, leaf.frames.len() / 2);
    // Between two frames (10 µs apart; the spine sees each 3 µs after the leaf): one run's hops.
    let between = merged_at(mid, "between");
    assert_eq!(between["vantage"], whole["vantage"]);
    let lost = |r: &Value| {
        let audit = r["audit"].as_array().unwrap().iter();
        audit.filter(|f| f["code"] == "loss_between").cloned().collect::<Vec<_>>()
    };
    assert_eq!(lost(&between), lost(&whole));
    assert_eq!(lost(&whole).len(), 1, "the two frames lost between leaf and spine");
    // The notes too, word for word: the copies matched in each part summed to one run's, and no
    // "one vantage point" for the CE marks.
    assert_eq!(between["visibility"], whole["visibility"]);
    let said = |r: &Value, code: &str| r["visibility"].as_array().unwrap().iter().any(|n| n["code"] == code);
    assert!(said(&whole, "matched_copies") && !said(&whole, "thresholds_need_two_points"));
    assert!(!said(&merged_at(mid + 1_000, "through_notes"), "thresholds_need_two_points"));
    // 1 µs after a frame, before its copy: said.
    let through = merged_at(mid + 1_000, "through");
    assert!(through["vantage"].is_null(), "{}", through["vantage"]);
    let note = through["visibility"].as_array().unwrap().iter().find(|n| n["code"] == "vantage_not_merged").unwrap();
    assert!(note["message"].as_str().unwrap().starts_with("the reports follow each other in time"), "{note}");
    assert!(note["message"].as_str().unwrap().contains("1 frames opening a report are copies"), "{note}");
}

#[test]
fn human_html_and_metrics_show_the_hops() {
    let (l, s) = (format!("leaf={}", data("vantage_leaf.pcap")), format!("spine={}", data("vantage_spine.pcap")));
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = run(&["-r", &l, "-r", &s, "--html", html.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("leaf → spine: 99 frames matched (1 flows), 2 missing, 10 CE-marked between · latency min/p50/p99/max 3.0/3.2/3.4/3.4 µs"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<table id=\"vantage\">") && page.contains("<td>leaf</td><td>spine</td><td>1</td><td>99</td>")
    );
    // The metrics renderer over the same report (the agent serves these live).
    let mut run = analyzer::pipeline::Pipeline::default();
    let inputs: Vec<_> = [l, s].iter().map(|a| analyzer::capture::input::InputSpec::parse(a).unwrap()).collect();
    analyzer::offline::analyze_files(&mut run, &inputs, |_, _| {}).unwrap();
    let r = analyzer::model::Report::assemble(&run, analyzer::report::assemble::RunKind::Offline);
    let m = analyzer::report::render::metrics::render(&r, 10, &[]);
    let hop = "{from=\"leaf\",to=\"spine\"}";
    assert_eq!(metric(&m, &format!("roce_analyzer_vantage_hop_frames_matched_total{hop}")), Some(99));
    assert_eq!(metric(&m, &format!("roce_analyzer_vantage_hop_frames_missing_total{hop}")), Some(2));
    assert_eq!(metric(&m, &format!("roce_analyzer_vantage_hop_ce_marked_total{hop}")), Some(10));
    assert!(
        m.contains("roce_analyzer_vantage_hop_latency_seconds{from=\"leaf\",to=\"spine\",stat=\"p50\"} 0.0000032"),
        "{m}"
    );
}

/// Where marking starts: the hop leaf → spine marks PSN 60..69 (the spine sees them CE), so its
/// series starts at PSN 60's arrival at the spine (600 µs + 3 µs, in the 10 µs point from 600
/// µs) and then counts one matched frame per point (PSN 60..99 every 10 µs, and the resend of
/// 99 at 1003 µs), the first ten marked between; the spine → leaf hop marks nothing.
#[test]
fn the_hop_that_marks_has_its_marking_over_time() {
    let r = leaf_and_spine(&[]);
    let hops = r["vantage"]["hops"].as_array().unwrap();
    let (x, y) = (&hops[0], &hops[1]);
    assert_eq!((x["from"].as_str(), y["from"].as_str()), (Some("leaf"), Some("spine")));
    assert!(y.get("marking").is_none(), "{y}");
    let m = &x["marking"];
    let start = r["capture"]["start_ns"].as_u64().unwrap();
    assert_eq!(m["start_ns"].as_u64().unwrap() - start, 600_000, "{m}");
    assert_eq!(m["point_ns"], 10_000);
    let frames = vec![1u64; 41];
    let mut ce = vec![0u64; 41];
    ce[..10].fill(1);
    assert_eq!(m["frames"], json!(frames));
    assert_eq!(m["ce"], json!(ce));
    // The same totals the hop states.
    assert_eq!(
        m["ce"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        x["ce_marked"].as_u64().unwrap()
    );
}

fn red_switch(extra: &[&str]) -> Value {
    let (l, s) = (format!("leaf={}", data("marking_leaf.pcap")), format!("spine={}", data("marking_spine.pcap")));
    let mut a = vec!["-r", &l, "-r", &s];
    a.extend_from_slice(extra);
    report(&a)
}

fn codes(r: &Value, list: &str) -> Vec<String> {
    r[list].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap().to_string()).collect()
}

/// The RED switch of tests/src/vantage.rs (Kmin 2 µs = 25 KB, Kmax 16 µs = 200 KB at
/// 100 Gbit/s, pmax 0.2). Marked by hand: per rise and fall of the delay, 141 + 140 frames at
/// or above 16 µs, and on the ramp (2.0 … 15.9 µs, p = 0.2 k / 140 for k = 0 … 139) a sum of
/// 13.9 each way: (281 + 27.8) × 10 cycles = 3088. The fit finds Kmin within 400 ns (5 KB; the
/// first marks come late where the probability is small), Kmax within a 64 ns bin, pmax within
/// 0.02; 25 KB is below the 37.5 KB a 100 Gbit/s link needs: `ecn_threshold_low`.
#[test]
fn a_red_switch_between_two_points_gives_its_marking_profile() {
    let r = red_switch(&[]);
    let hops = r["vantage"]["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 1, "{hops:?}");
    let p = &hops[0]["marking_profile"];
    assert_eq!([&p["frames"], &p["marked"], &p["confidence"]], [&json!(6000), &json!(3088), &json!("medium")], "{p}");
    let near = |k: &str, want: u64, tol: u64| {
        let got = p[k].as_u64().unwrap_or_else(|| panic!("{k}: {p}"));
        assert!(got.abs_diff(want) <= tol, "{k} {got}, want {want} ± {tol}: {p}");
    };
    near("kmin_ns", 2_000, 400);
    near("kmin_bytes", 25_000, 5_000);
    near("kmax_ns", 16_000, 64);
    near("kmax_bytes", 200_000, 800);
    assert!((p["pmax"].as_f64().unwrap() - 0.2).abs() < 0.02, "{p}");
    let low: Vec<&Value> = r["audit"].as_array().unwrap().iter().filter(|f| f["code"] == "ecn_threshold_low").collect();
    assert_eq!(low.len(), 1, "{:?}", codes(&r, "audit"));
    let m = low[0]["message"].as_str().unwrap();
    assert!(m.contains("between leaf and spine") && m.contains("below 37.5 KB for 100 Gbit/s"), "{m}");
    assert_eq!(low[0]["flows"][0]["src"], "10.0.2.5");
    assert!(!codes(&r, "visibility").contains(&"thresholds_need_two_points".to_string()));
    // A floor below the switch's Kmin: no finding; the profile is the same.
    let r = red_switch(&["--kmin-min", "20K"]);
    assert!(!codes(&r, "audit").contains(&"ecn_threshold_low".to_string()));
    assert_eq!(&r["vantage"]["hops"][0]["marking_profile"], p);
    // The human report gives the profile under its hop.
    let (l, s) = (format!("leaf={}", data("marking_leaf.pcap")), format!("spine={}", data("marking_spine.pcap")));
    let out = run(&["-r", &l, "-r", &s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ECN marking: Kmin ") && text.contains("3088 of 6000 frames marked · confidence medium"),
        "{text}"
    );
}

/// Ten marks between the leaf and spine of the first fixture (99 frames matched: 100 PSNs but
/// the 2 lost, and the resent one): too few to fit, and said so;
/// one point alone with CE marks says that thresholds need two points; without marks, nothing.
#[test]
fn marking_thresholds_need_marks_and_two_points() {
    let p = &leaf_and_spine(&[])["vantage"]["hops"][0]["marking_profile"];
    assert_eq!(*p, json!({"frames": 99, "marked": 10, "confidence": "insufficient"}));
    let spine = report(&["-r", &data("marking_spine.pcap")]);
    assert!(codes(&spine, "visibility").contains(&"thresholds_need_two_points".to_string()));
    assert!(spine["vantage"].is_null());
    let leaf = report(&["-r", &data("marking_leaf.pcap")]);
    assert!(!codes(&leaf, "visibility").contains(&"thresholds_need_two_points".to_string()));
}

/// Trajectory sampling (issue 43 §2): one flow's frames seen by two collectors that run as two
/// agents and never exchange a frame, 10 % lost and 1 in 9 of the rest CE-marked between, the
/// spine's clock 250 µs ahead. Each agent exports 1 in 16 frames chosen by identity; `merge`
/// over the two exports finds the same frames in both and estimates the hop: loss and marking
/// within their 95 % intervals of the truth, the clock offset within the latencies' asymmetry
/// (1 µs: the estimate takes the fastest frame each way as symmetric), the latency within it.
#[test]
fn trajectory_samples_give_the_hop_between_two_agents() {
    let dir = tempfile::tempdir().unwrap();
    let mut exports = Vec::new();
    for (input, x) in tests::vantage::trajectory_inputs(dir.path(), 40_000, 250_000) {
        let out = run(&["-q", "-r", &input, "--trajectory-sample", "1/16", "--export", x.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        exports.push(x);
    }
    let out = run(&["merge", "--json", "-", exports[0].to_str().unwrap(), exports[1].to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &r["trajectory"];
    assert_eq!(t["one_in"], 16);
    let samples: Vec<u64> = t["points"].as_array().unwrap().iter().map(|p| p["samples"].as_u64().unwrap()).collect();
    // 44 000 frames at the leaf, 40 000 at the spine: 1 in 16 each, within 5 %.
    assert!((samples[0] as f64 - 2750.0).abs() < 140.0 && (samples[1] as f64 - 2500.0).abs() < 130.0, "{samples:?}");
    let hops = t["hops"].as_array().unwrap();
    let hop = |from: &str| hops.iter().find(|h| h["from"].as_str().unwrap().ends_with(from)).unwrap();
    let (down, up) = (hop("/leaf"), hop("/spine"));
    assert!(down["to"].as_str().unwrap().ends_with("/spine") && up["to"].as_str().unwrap().ends_with("/leaf"));
    // The 95 % interval covers the truth for 95 % of samples; this one sample (the frames the
    // hash chose) is held to the 99.9 % bound, 3.29 standard errors, and the interval must be
    // narrow enough to say something.
    let within = |e: &Value, truth: f64, what: &str| {
        let (lo, hi) = (e["ci95"][0].as_f64().unwrap(), e["ci95"][1].as_f64().unwrap());
        let (value, n) = (e["value"].as_f64().unwrap(), e["of"].as_f64().unwrap());
        let bound = 3.29 * (truth * (1.0 - truth) / n).sqrt();
        assert!((value - truth).abs() <= bound, "{what}: {value} is more than {bound} from {truth} ({e})");
        assert!(lo <= value && value <= hi && hi - lo < 0.05, "{what}: interval {lo}..{hi}");
    };
    within(&down["loss"], 0.10, "loss leaf → spine");
    within(&down["marking"], 1.0 / 9.0, "marking leaf → spine");
    assert_eq!(up["missing"], 0, "no ACK lost");
    assert_eq!(up["ce_between"], 0);
    // The spine's clock minus the leaf's: 250 µs; the fastest frames take 3 µs down, 2 µs up.
    let offset = down["clock_offset_ns"].as_i64().unwrap();
    assert!((offset - 250_000).abs() <= 1_000, "offset {offset}");
    assert_eq!(up["clock_offset_ns"].as_i64().unwrap(), -offset);
    assert_eq!(down["clocks"], "offset");
    let p50 = down["latency_ns"][1].as_i64().unwrap();
    assert!((p50 - 3_200).abs() <= 1_000, "latency p50 {p50} ns, truth 3.2 µs");
    // The summary says it.
    let out = run(&["merge", exports[0].to_str().unwrap(), exports[1].to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Trajectory samples (1/16)") && text.contains("clock offset"), "{text}");
}
