//! `merge` of the reports of a capture cut in time, against the report of the whole capture:
//! every fixture cut into two and three parts by frames, each part analysed alone under the
//! same label, the parts' reports merged. What adds up over time must come back exactly:
//! capture totals, every flow's counts, CE and CNPs per host pair, PFC rates per priority, PFC senders and their pause time, storms, congestion
//! trees, ECMP, RTT timeouts and CM pairs, incast episodes (each destination's first packets
//! after a cut replayed from the window and open episode the part before left: every episode
//! one run's, also one that crosses a cut or that neither part saw alone). The parts are
//! analysed with `--edges`, so every flow's PSN and AETH counters come back too, stitched across
//! each cut, but for the cuts stated by hand where the reports cannot tell (the merge says so),
//! and their RTT samples: the RTT of every flow and of the whole is one run's, requests waiting
//! at a cut paired with the ACKs after it from the edges (else the merge says
//! `rtt_not_stitched`: an ambiguous pairing; a request sent again after the cut keeps its
//! first time, Karn, replayed from the part's first AckReq requests), the capture's own loss
//! (PSNs skipped before a cut that an ACK after it covers, from the edges' open gaps, with the
//! NAKs, retransmissions and late arrivals after it replayed; else `capture_loss_not_stitched`,
//! stated by hand), the findings of each flow's PSNs, NAKs and RTT (computed again
//! over the merged flows: one per flow, as one run gives them), of CE marks and CNPs (over the
//! merged pairs) and of ECN capability and DSCPs (over the flows' marking counts), and the
//! marking over
//! time (a later part's frames before its own first mark, which one run counts, in its edge),
//! load balancing (over the merged flows, each flow's late arrivals from its parts' edges; a
//! request after a cut that fills a gap left open before it replayed from the part's first
//! requests and ACKs with their times), and
//! how each CE mark was answered and each QP's CNP pacing (the pairs' edges replay the marks
//! waiting at a cut against the next part's CNPs), and each PFC sender's onsets against the
//! marks before them (`ecn_lead`: an onset whose window reaches into the part before asks the
//! runs of marks that part carried near its end).
//! The PFC findings come back as one run's (over the merged PFC section). The DCQCN section
//! and findings come back as one run's too: each CNP near a cut judged again
//! on the windows of the parts around it (the edges carry every data flow's windows near the
//! part's ends, its frames and its CNPs; a CNP a later part left unattributed goes to the flow
//! one run gives it: the one a part before paired with ACKs to its QP, or the one flow between
//! its hosts the parts before watched). The messages come back as one run's: each message held
//! at a cut joined with its completion after it (the edges list every completion and each flow's
//! messages held at the end), unless the note names flows whose messages at a cut the parts do
//! not tell; and their tail, the joined messages laid over the merged pauses, DCQCN rate cuts
//! and incast episodes, unless the note says why not (docs/usage.md, merge).

use serde_json::{Value, json};
use tests::fixtures::{self, Fixture};
use tests::tools::{assert_json_eq, run, schema_errors};

fn report(args: &[&str]) -> Value {
    let out = run(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes a part's report as `NAME.json` in `dir`; returns its path.
fn keep(dir: &std::path::Path, name: &str, r: &Value) -> String {
    let p = dir.join(format!("{name}.json"));
    std::fs::write(&p, r.to_string()).unwrap();
    p.display().to_string()
}

/// The merge of the reports at `paths`.
fn merge_of(paths: &[String]) -> Value {
    let mut args = vec!["merge"];
    args.extend(paths.iter().map(String::as_str));
    args.extend(["--json", "-"]);
    report(&args)
}

/// A report's visibility notes but those a merge adds on what it could not merge or stitch.
fn capture_notes(r: &Value) -> Vec<&Value> {
    let merge_own = |c: &str| c.ends_with("_not_merged") || c.ends_with("_not_stitched") || c.starts_with("incast_");
    r["visibility"].as_array().unwrap().iter().filter(|n| !merge_own(n["code"].as_str().unwrap())).collect()
}

/// The codes of a report's visibility notes.
fn codes(r: &Value) -> Vec<&str> {
    r["visibility"].as_array().unwrap().iter().filter_map(|n| n["code"].as_str()).collect()
}

fn analyse(dir: &std::path::Path, f: &Fixture, name: &str, extra: &[&str]) -> Value {
    let path = dir.join(name);
    std::fs::write(&path, f.bytes()).unwrap();
    let input = format!("cap={}", path.display());
    let mut args = vec!["-q", "-r", &input, "--json", "-"];
    args.extend(extra);
    report(&args)
}

/// Every section of a merge of a capture cut in time is one run's, unless the merge says why
/// not with one of these notes (`capture` is compared by its loss: its sources are the parts').
const SAID: [(&str, &[&str]); 15] = [
    ("capture", &["capture_loss_not_stitched"]),
    ("flows", &["psn_not_stitched", "rtt_not_stitched", "capture_loss_not_stitched"]),
    ("rtt_ns", &["rtt_not_stitched"]),
    ("pairs", &["ecn_not_stitched"]),
    ("cnp_pacing", &["ecn_not_stitched"]),
    ("cnp_interval", &["ecn_not_stitched"]),
    ("pfc", &[]),
    ("marking", &["marking_not_merged"]),
    ("load_balancing", &["load_balancing_not_merged"]),
    ("incast", &[]),
    ("dcqcn", &["dcqcn_not_stitched", "dcqcn_medians_not_merged"]),
    ("messages", &["messages_not_merged"]),
    ("congestion_tree", &["congestion_tree_not_merged"]),
    ("ecmp", &[]),
    ("vantage", &["vantage_not_merged"]),
];

/// The sections of `SAID` in which the merge differs from one run without saying why, and how
/// many were equal.
fn unsaid(merged: &Value, whole: &Value, codes: &[&str]) -> (Vec<&'static str>, u64) {
    let (mut silent, mut equal) = (Vec::new(), 0);
    for (section, why) in SAID {
        let pick = |r: &Value| if section == "capture" { r["capture"]["loss"].clone() } else { r[section].clone() };
        if pick(merged) == pick(whole) {
            equal += 1;
        } else if !why.iter().any(|w| codes.contains(w)) {
            silent.push(section);
        }
    }
    (silent, equal)
}

/// Each flow's PSN sequence, responder and AETH counters (`capture_missed` is the messages'
/// ACK-inferred loss, not the PSN state machine's).
fn psn(r: &Value) -> Value {
    let flows = r["flows"].as_array().unwrap().iter().map(|f| {
        let mut p = f["psn"].clone();
        p.as_object_mut().unwrap().remove("capture_missed");
        json!([f["src"], f["dst"], f["dst_qp"], p, f["naks"]])
    });
    Value::Array(flows.collect())
}

/// The transport findings (PSN, NAK and RTT patterns per flow): one per flow over the merged
/// flows, as one run gives them.
fn transport(r: &Value) -> Value {
    findings(r, &TRANSPORT)
}

/// The findings of `codes`, as [code, message, flows].
fn findings(r: &Value, codes: &[&str]) -> Value {
    let audit = r["audit"].as_array().unwrap().iter().filter(|f| codes.contains(&f["code"].as_str().unwrap()));
    Value::Array(audit.map(|f| json!([f["code"], f["message"], f["flows"]])).collect())
}

/// The transport findings' codes.
const TRANSPORT: [&str; 9] = [
    "go_back_n",
    "reordering",
    "psn_gap",
    "rnr_retry",
    "retransmission",
    "read_response_gap",
    "rnr_nak",
    "nak_error",
    "rtt_timeout",
];

/// Merges that say a PSN state, a capture loss or an RTT was not stitched: none. The last ones
/// were qp_mtus.pcap's READs at a cut whose READ RESPONSEs came after it (the MTU that gives a
/// READ's span, the flow their PSNs pair them with in one run), spray.pcap cut in 3 (a
/// go-back-N longer than 8 frames and a responder waiting for a NAKed request after the cut),
/// rnr.pcap cut in 2 (an RNR NAK and the refused request repeated just after the cut) and
/// rtt_cm.pcap (two QPs paired by a CM exchange before the cut).
const NONE_SAID: [(&str, usize); 0] = [];

/// The RTT of the whole and of each flow.
fn rtt(r: &Value) -> Value {
    let flows = r["flows"].as_array().unwrap().iter().map(|f| json!([f["src"], f["dst"], f["dst_qp"], f["rtt_ns"]]));
    json!([r["rtt_ns"], flows.collect::<Vec<_>>()])
}

/// What adds up over time, as the whole report and the merge must both give it; `leads`: the
/// PFC senders' onsets judged against the marks before them (unless the merge said it could
/// not, for an onset near a cut).
fn additive(r: &Value, leads: bool) -> Value {
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
    for s in senders.as_array_mut().unwrap().iter_mut().filter(|_| !leads) {
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
    // CE marks and CNPs per host pair, how each mark was answered (a mark waiting at a cut is
    // answered by the next part's CNP: the edges replay it), and the CNP pacing per QP.
    let pairs: Vec<Value> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let keys = ["a", "b", "data_packets", "ce", "cnp_back", "ce_unanswered", "ce_covered", "ce_pending"];
            Value::Object(keys.iter().map(|k| (k.to_string(), p[*k].clone())).collect())
        })
        .collect();
    let pacing: Vec<Value> = r["cnp_pacing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!([c["dst"], c["dst_qp"], c["cnps"], c["min_gap_ns"], c["median_gap_ns"]]))
        .collect();
    json!({
        "capture": [c["frames"], c["classes"], c["dropped"], c["start_ns"], c["end_ns"]],
        "pairs": pairs,
        "cnp_pacing": [pacing, r["cnp_interval"]],
        "flows": flows,
        "pfc": [r["pfc"]["frames"], r["pfc"]["pause_8023x_frames"], senders, r["pfc"]["pause_senders"], r["pfc"]["storms"], r["pfc"]["rates"]],
        "congestion_tree": r["congestion_tree"],
        "ecmp": r["ecmp"],
        "rtt": [rtt["timeouts"], rtt["cm_paired"]],
        "incast": incast,
        // Data frames and CE marks over time per class and priority, from the first mark.
        "marking": r["marking"],
    })
}

/// The same parts without their edges (older reports, or made without `--edges`): the merge
/// sums what it has, and says what it could not stitch (`said`). Returns the merge.
fn without_edges_says_so(dir: &std::path::Path, mut alone: Vec<Value>, what: &str, said: &[&str]) -> Value {
    let mut args = vec!["merge".to_string()];
    for (i, r) in alone.iter_mut().enumerate() {
        r["flows"].as_array_mut().unwrap().iter_mut().for_each(|f| _ = f.as_object_mut().unwrap().remove("edge"));
        for section in ["marking", "dcqcn"] {
            if let Some(m) = r[section].as_object_mut() {
                m.remove("edge");
            }
        }
        for list in ["pairs", "cnp_pacing"] {
            r[list].as_array_mut().unwrap().iter_mut().for_each(|x| _ = x.as_object_mut().unwrap().remove("edge"));
        }
        let p = dir.join(format!("no_edges.{}.{i}.json", said[0]));
        std::fs::write(&p, r.to_string()).unwrap();
        args.push(p.display().to_string());
    }
    args.extend(["--json".into(), "-".into()]);
    let merged = report(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let codes: Vec<&str> = merged["visibility"].as_array().unwrap().iter().filter_map(|n| n["code"].as_str()).collect();
    for said in said {
        assert!(codes.contains(said), "{what} without edges: {codes:?}");
    }
    merged
}

/// Data frames counted in a report's marking series, over its classes.
fn marked_frames(r: &Value) -> u64 {
    let classes = r["marking"]["classes"].as_array().map(Vec::as_slice).unwrap_or_default();
    classes.iter().flat_map(|c| c["frames"].as_array().unwrap()).map(|n| n.as_u64().unwrap()).sum()
}

/// A report's PSN anomalies over all flows (out of sequence, duplicates, responder counts).
fn anomalies(r: &Value) -> u64 {
    let count = |f: &Value, k: &str| f["psn"][k].as_u64().unwrap();
    let responder = |f: &Value, k: &str| f["psn"]["responder"][k].as_u64().unwrap();
    r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            count(f, "out_of_sequence")
                + count(f, "duplicates")
                + count(f, "psn_skipped")
                + responder(f, "out_of_seq_request")
                + responder(f, "duplicate_request")
        })
        .sum()
}

/// Whether a report has a PFC onset whose ECN-lead window (and a run of marks' gap) reaches
/// back past its start.
fn near_cut(r: &Value) -> bool {
    let start = r["capture"]["start_ns"].as_u64().unwrap();
    r["pfc"]["senders"].as_array().unwrap().iter().any(|s| {
        let lead = &s["ecn_lead"];
        let reach = lead["window_ns"].as_u64().unwrap_or(0) + 1_000;
        let onsets = lead["edge"].as_array().into_iter().flatten();
        onsets.filter_map(|o| o[0].as_u64()).any(|t| t - start < reach)
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
    let (mut checked, mut stitched_anomalies, mut rtt_whole, mut marking_carried) = (0, 0, 0, 0);
    let (mut lb_whole, mut lb_said, mut leads_judged, mut sections_equal, mut rtt_stitched) = (0, 0, 0, 0, 0);
    let (mut loss_told, mut findings_whole, mut feedback_whole) = (0, 0, 0);
    let (mut marking_whole, mut audit_whole, mut dcqcn_whole, mut dcqcn_stitched) = (0, 0, 0, 0);
    let (mut pfc_whole, mut lb_findings, mut steady_whole, mut messages_whole) = (0, 0, 0, 0);
    let (mut messages_joined, mut tail_whole, mut incast_stitched, mut rtt_said) = (0, 0, 0, Vec::new());
    let mut loss_said = Vec::new();
    let (mut leads_near_cut, mut vantage_whole, mut steady_said) = (0, 0, Vec::new());
    let mut not_stitched = Vec::new();
    for f in fixtures::all().into_iter().filter(|f| f.frames.len() >= 3 && !matched_within(f)) {
        let whole = analyse(dir.path(), &f, &format!("{}.whole", f.name), &[]);
        for parts in [2, 3] {
            let per = f.frames.len().div_ceil(parts);
            let reports: Vec<String> = f
                .frames
                .chunks(per)
                .enumerate()
                .map(|(i, chunk)| {
                    let part = Fixture { frames: chunk.to_vec(), ..f.clone() };
                    let r = analyse(dir.path(), &part, &format!("{}.{parts}.{i}", f.name), &["--edges"]);
                    assert_eq!(schema_errors(&r), Vec::<String>::new(), "{} part {i} of {parts} with --edges", f.name);
                    keep(dir.path(), &format!("{}.{parts}.{i}", f.name), &r)
                })
                .collect();
            let merged = merge_of(&reports);
            let what = format!("{} cut in {parts}", f.name);
            let codes = codes(&merged);
            // The reports given latest first: the same merge (each stitch walks a flow's parts
            // in time order, whatever the order of the reports).
            let back = merge_of(&reports.iter().rev().cloned().collect::<Vec<_>>());
            for (section, _) in SAID.iter().filter(|(s, _)| *s != "capture") {
                assert_json_eq(&back[section], &merged[section], &format!("{what}, latest first: {section}"));
            }
            assert_eq!(back["capture"]["loss"], merged["capture"]["loss"], "{what}, latest first: capture loss");
            let sorted = |mut v: Vec<String>| {
                v.sort();
                v
            };
            let said = |r: &Value| sorted(self::codes(r).into_iter().map(String::from).collect());
            assert_eq!(said(&back), said(&merged), "{what}, latest first: notes");
            let leads = !codes.contains(&"ecn_lead_not_merged");
            leads_judged += u64::from(leads && !whole["pfc"]["senders"].as_array().unwrap().is_empty());
            assert_json_eq(&additive(&merged, leads), &additive(&whole, leads), &what);
            // Incast episodes, each destination's head replayed across each cut: one run's.
            assert_json_eq(&merged["incast"], &whole["incast"], &format!("{what}: incast"));
            let alone: Vec<Value> =
                reports.iter().map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()).collect();
            // Onsets within the ECN-lead window (and a run's gap) of a later part's start: judged
            // on the runs of marks the part before carried.
            leads_near_cut += alone.iter().skip(1).any(near_cut) as u64;
            let episodes = |r: &Value| r["incast"]["episodes"].as_array().unwrap().clone();
            let parts_episodes: Vec<Value> = alone.iter().flat_map(episodes).collect();
            let start = |e: &Value| e["start_ns"].as_u64().unwrap();
            incast_stitched += u64::from(
                parts_episodes.len() != episodes(&whole).len()
                    || parts_episodes.iter().map(start).ne(episodes(&whole).iter().map(start)),
            );
            // Points and hops of mirrored copies, matched across each cut from the edges.
            vantage_whole += u64::from(!whole["vantage"].is_null() && merged["vantage"] == whole["vantage"]);
            let (silent, equal) = unsaid(&merged, &whole, &codes);
            assert_eq!(silent, Vec::<&str>::new(), "{what}: sections unlike one run's, with no note saying why");
            sections_equal += equal;
            // The notes of the capture (all but the merge's own on what it did not merge): one
            // run's, word for word and in its order, counts summed over the parts.
            assert_eq!(capture_notes(&merged), capture_notes(&whole), "{what}: visibility");
            for gone in [
                "incast_not_merged",
                "incast_cut",
                "incast_joined",
                "dcqcn_not_merged",
                "rtt_not_merged",
                "marking_not_merged",
                "ecn_not_stitched",
                "ecn_lead_not_merged",
                "dcqcn_not_stitched",
                "vantage_not_merged",
            ] {
                assert!(!codes.contains(&gone), "{what}: {gone}");
            }
            // A request waiting at a cut is answered after it: the merge pairs them from the
            // edges (one run's RTT), or says why it cannot.
            if codes.contains(&"rtt_not_stitched") {
                rtt_said.push((f.name, parts));
            } else {
                assert_json_eq(&rtt(&merged), &rtt(&whole), &format!("{what}: RTT"));
                rtt_whole += u64::from(whole["rtt_ns"]["samples"].as_u64().unwrap() > 0);
                let sum = |k: &str| alone.iter().map(|r| r["rtt_ns"][k].as_u64().unwrap()).sum::<u64>();
                rtt_stitched += u64::from(
                    ["samples", "pending", "unpaired_acks", "ambiguous_acks"]
                        .iter()
                        .any(|k| sum(k) != whole["rtt_ns"][k]),
                );
            }
            // The findings of a flow's PSNs, NAKs and RTT: one run's wherever its counters are.
            let counters = ["psn_not_stitched", "rtt_not_stitched", "capture_loss_not_stitched"];
            if !counters.iter().any(|c| codes.contains(c)) {
                assert_json_eq(&transport(&merged), &transport(&whole), &format!("{what}: transport findings"));
                findings_whole += u64::from(transport(&whole) != json!([]));
            }
            // The CE/CNP findings over the merged pairs: one run's wherever the pairs are.
            if !codes.contains(&"ecn_not_stitched") {
                let ecn = |r: &Value| findings(r, &["ce_without_cnp", "cnp_without_ce"]);
                assert_json_eq(&ecn(&merged), &ecn(&whole), &format!("{what}: CE/CNP findings"));
                feedback_whole += u64::from(ecn(&whole) != json!([]));
            }
            // The marking findings over the flows' marking counts (every part has its edges).
            let marking = |r: &Value| findings(r, &["not_ect", "roce_dscp", "cnp_dscp"]);
            assert_json_eq(&marking(&merged), &marking(&whole), &format!("{what}: marking findings"));
            marking_whole += u64::from(marking(&whole) != json!([]));
            audit_whole += u64::from(merged["audit"] == whole["audit"]);
            // The goodput's steadiness, stitched across the cuts from the parts' windows at
            // their ends (each part's first window and the one still filling at its end).
            if !whole["messages"].is_null() {
                steady_whole += u64::from(merged["messages"]["steadiness"] == whole["messages"]["steadiness"]);
                messages_whole += u64::from(merged["messages"] == whole["messages"]);
                // The messages joined across the cuts: all but the tail one run's, unless the
                // note names flows whose messages at a cut the parts do not tell.
                let note =
                    merged["visibility"].as_array().into_iter().flatten().find(|n| n["code"] == "messages_not_merged");
                let said = |w: &str| note.is_some_and(|n| n["message"].as_str().unwrap_or("").contains(w));
                if said("the steadiness of") {
                    steady_said.push((f.name, parts));
                }
                if !said("the reports do not tell") {
                    let untailed = |r: &Value| {
                        let mut m = r["messages"].clone();
                        m["tail"] = Value::Null;
                        if said("UC transfer times are each report's") {
                            m["transfers"]["uc_transfer_ns"] = Value::Null;
                        }
                        // Requests sent again just after a cut count as new payload in the
                        // report after it (its steadiness), which the note says.
                        if said("the steadiness of") {
                            m["steadiness"] = Value::Null;
                        }
                        m
                    };
                    assert_json_eq(&untailed(&merged), &untailed(&whole), &format!("{what}: messages"));
                    messages_joined += 1;
                }
                // The tail: the joined messages laid over the merged pauses, rate cuts and
                // incast episodes, one run's unless the note says why not (or names flows).
                if note.is_none() || said("the tail is one run's (") {
                    let tail = |r: &Value| r["messages"]["tail"].clone();
                    assert_json_eq(&tail(&merged), &tail(&whole), &format!("{what}: messages tail"));
                    tail_whole += 1;
                }
            }
            // The PFC findings over the merged PFC section (its rates and each sender's onsets
            // judged across the cuts), unless an onset's lead could not be.
            if !codes.contains(&"ecn_lead_not_merged") {
                let pfc = |r: &Value| findings(r, &["pfc_before_ecn", "pfc_rate_high"]);
                assert_json_eq(&pfc(&merged), &pfc(&whole), &format!("{what}: PFC findings"));
                pfc_whole += u64::from(pfc(&whole) != json!([]));
            }
            // DCQCN: CNPs near a cut judged on the windows around it, a CNP a part after a cut
            // left unattributed given the flow one run gives it, the plots joined, the findings
            // over the merged flows: one run's.
            assert_json_eq(&merged["dcqcn"], &whole["dcqcn"], &format!("{what}: DCQCN"));
            let dcqcn = |r: &Value| findings(r, &["cnp_ignored", "slow_recovery", "cnp_storm"]);
            assert_json_eq(&dcqcn(&merged), &dcqcn(&whole), &format!("{what}: DCQCN findings"));
            if !whole["dcqcn"].is_null() && merged["dcqcn"] == whole["dcqcn"] {
                dcqcn_whole += 1;
                // The parts alone judged fewer CNPs, or plotted other series.
                let unjudged = |r: &Value| {
                    let flows = r["dcqcn"]["flows"].as_array().map(Vec::as_slice).unwrap_or_default();
                    flows.iter().map(|f| f["no_rate_before"].as_u64().unwrap()).sum::<u64>()
                };
                let plots: Vec<&Value> =
                    alone.iter().flat_map(|r| r["dcqcn"]["plots"].as_array().into_iter().flatten()).collect();
                let whole_plots: Vec<&Value> = whole["dcqcn"]["plots"].as_array().unwrap().iter().collect();
                dcqcn_stitched +=
                    u64::from(alone.iter().map(unjudged).sum::<u64>() != unjudged(&whole) || plots != whole_plots);
            }
            // PSNs skipped before a cut that an ACK after it covered: missed by the capture.
            let missed = |r: &Value| r["capture"]["loss"]["frames_missed"].as_u64().unwrap_or(0);
            if codes.contains(&"capture_loss_not_stitched") {
                loss_said.push((f.name, parts));
            } else {
                assert_eq!(missed(&merged), missed(&whole), "{what}: capture loss");
                loss_told += u64::from(missed(&merged) > alone.iter().map(missed).sum());
            }
            // Request flows and reordering over the merged flows; a request after a cut that may
            // have arrived late into a gap one run had open there (or a listing a report cut
            // short) is said.
            if codes.contains(&"load_balancing_not_merged") {
                lb_said += 1;
            } else {
                assert_json_eq(&merged["load_balancing"], &whole["load_balancing"], &format!("{what}: load balancing"));
                lb_whole += u64::from(!whole["load_balancing"].is_null());
                // Its findings over the merged section (`spraying_without_ooo`).
                let lb = |r: &Value| findings(r, &["spraying_without_ooo"]);
                assert_json_eq(&lb(&merged), &lb(&whole), &format!("{what}: load balancing findings"));
                lb_findings += u64::from(lb(&whole) != json!([]));
            }
            // Frames before a later part's first mark count in one run: its edge carries them.
            if marked_frames(&whole) > alone.iter().map(marked_frames).sum() {
                marking_carried += 1;
                if marking_carried == 1 {
                    let said = ["marking_not_merged", "ecn_not_stitched"];
                    let m = without_edges_says_so(dir.path(), alone.clone(), &what, &said);
                    assert!(marked_frames(&m) < marked_frames(&whole), "{what}: marking without edges");
                }
            }
            if codes.contains(&"psn_not_stitched") {
                not_stitched.push((f.name, parts));
            } else {
                assert_json_eq(&psn(&merged), &psn(&whole), &format!("{what}: PSN counters"));
                // Cuts that meet a gap or a repeat: the parts alone count less than the whole.
                let sum: u64 = alone.iter().map(anomalies).sum();
                if sum != anomalies(&whole) {
                    stitched_anomalies += 1;
                    if stitched_anomalies == 1 {
                        // Nor can it combine the RTT of a flow in several parts without samples.
                        without_edges_says_so(dir.path(), alone, &what, &["psn_not_stitched", "rtt_not_merged"]);
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 80, "fixtures cut and merged: {checked}");
    // The parts alone listed other episodes than one run (an episode across a cut, cut in
    // two) in 4 merges when written: cnp_paced.pcap in 2 and 3, incast.pcap and messages.pcap in 3.
    assert!(incast_stitched >= 4, "merges whose incast episodes were stitched across a cut: {incast_stitched}");
    assert_eq!(not_stitched, NONE_SAID, "merges that said psn_not_stitched");
    assert!(stitched_anomalies >= 10, "merges whose cut met a PSN gap or repeat: {stitched_anomalies}");
    assert!(rtt_whole >= 8, "merges with RTT samples, one run's RTT: {rtt_whole}");
    // 18 when this was written: requests answered, and ACKs paired, across a cut, also where
    // the part after sent a waiting request again (8 before those were replayed, Karn), where
    // it found the ACKs ambiguous (rtt_cm.pcap in 2 and 3: one run paired them by the CM
    // exchange before the cut) and where one run pairs a flow at its ACK flow's first response
    // after the cut (qp_mtus.pcap in 2 and 3).
    assert!(rtt_stitched >= 17, "merges whose RTT was stitched across a cut: {rtt_stitched}");
    assert_eq!(rtt_said, NONE_SAID, "merges that said rtt_not_stitched");
    assert!(loss_told >= 1, "merges whose capture loss was told by ACKs after a cut: {loss_told}");
    // 8 before NAKs, retransmissions and late arrivals after a cut were replayed (gobackn.pcap
    // cut in 2 and 3, psn_wrap.pcap, reorder.pcap and spray_u0.pcap in 3).
    assert_eq!(loss_said, NONE_SAID, "merges that said capture_loss_not_stitched");
    assert!(findings_whole >= 30, "merges with one run's transport findings: {findings_whole}");
    assert!(feedback_whole >= 15, "merges with one run's CE/CNP findings: {feedback_whole}");
    assert!(marking_whole >= 10, "merges with one run's marking findings: {marking_whole}");
    // The whole audit, in one run's order (the findings of flows not stitched, of messages and
    // of load balancing stay each part's where a note says so): 92 when written (83 before the
    // READs at a cut and the pairs one run makes after it).
    assert!(audit_whole >= 90, "merges whose audit is one run's: {audit_whole}");
    // The steadiness one run's in 85 merges when written (82 before READs completed after a cut
    // and the host pairs one run places at such a completion; 78 before PSNs sent again just
    // after a cut were taken out by the replay), the whole section in 85 (81 before, 79 before
    // that, about 20 before the stitch, 43 before the tail was laid over the merged context, 76
    // before incast was stitched).
    assert!(steady_whole >= 84, "merges whose steadiness is one run's: {steady_whole}");
    assert!(messages_whole >= 84, "merges whose messages section is one run's: {messages_whole}");
    // 7 said "the steadiness of N flow(s) at a cut may not be one run's" before the edges listed
    // each key's first full windows (qp_mtus.pcap in 2: a payload fix in one) and a host pair
    // one run places from two parts' single frames (ipv4_options.pcap in 3, ipv6.pcap and
    // nanosecond_be.pcap in 2 and 3, spray_u1.pcap in 2).
    assert_eq!(steady_said, NONE_SAID, "merges whose steadiness at a cut is said");
    // The tail said to be one run's in 86 merges when written (75 before READs at a cut were
    // completed as one run completes them and slowdowns without any RTT of the pair told; 72
    // before incast episodes at a cut were stitched).
    assert!(tail_whole >= 84, "merges whose tail is one run's: {tail_whole}");
    // Messages held at a cut joined with their completion after it: every number but the
    // tail's one run's in 86 merges when written (75 before READs held at a cut were completed
    // by their first PSN until their span was known, as one run does; the rest: RTTs one run
    // takes by Karn's rule, UC transfer times).
    assert!(messages_joined >= 84, "merges whose messages but the tail are one run's: {messages_joined}");
    assert!(lb_findings >= 1, "merges with one run's load balancing findings: {lb_findings}");
    assert!(pfc_whole >= 12, "merges with one run's PFC findings (15 when written): {pfc_whole}");
    // Every one of the 26 merges with a DCQCN section when written (24 before a later part's
    // unattributed CNPs were given their flow), 11 of them unlike the parts alone.
    assert!(dcqcn_whole >= 26, "merges whose DCQCN section is one run's: {dcqcn_whole}");
    assert!(dcqcn_stitched >= 8, "merges whose DCQCN was stitched across a cut: {dcqcn_stitched}");
    // One run's in 70 merges and said in none when written; 1 before a READ's span after a cut, the pairing one run
    // makes at an ACK flow's first response and the responses a part could not pair were replayed (qp_mtus.pcap cut in
    // 2); 3 before a head went on through a retransmission or a NAK episode (spray.pcap cut in 3,
    // qp_mtus.pcap in 3); 4 before a flow a part did not list (not spread there) was counted
    // from its parts' edges (reorder.pcap cut in 2), 5 before an RNR NAK after a cut was placed by the heads' times
    // (rnr.pcap cut in 2), 6 before NAKs after a cut were replayed (gobackn.pcap cut in 3), 8 before late arrivals at a
    // cut were (psn_wrap.pcap and reorder.pcap cut in 3: a request after the cut fills a gap left open before it), 22
    // before a gap at a cut alone stopped counting.
    assert!(lb_whole >= 65 && lb_said == 0, "load balancing one run's in {lb_whole} merges, said in {lb_said}");
    // 15 sections in each merge: 1379 came back exactly when this was written (1378 before the
    // steadiness' early windows, 1376 before the vantage edges, 1301 before the RTT of ambiguous ACKs, the longer heads and the READs at a
    // cut; messages in half of them; the others wherever no note says why not).
    assert!(sections_equal >= 1379, "sections equal to one run's: {sections_equal}");
    // erspan.pcap cut in 2 and 3 (vantage_not_merged before the vantage edges).
    assert!(vantage_whole >= 2, "merges whose vantage section is one run's: {vantage_whole}");
    assert!(leads_judged >= 20, "merges whose PFC onsets were judged as one run: {leads_judged}");
    // ecn_lead.pcap cut in 2 and 3, example.pcap in 3 when written.
    assert!(leads_near_cut >= 3, "merges with an onset just after a cut, judged as one run: {leads_near_cut}");
    assert!(marking_carried >= 5, "merges that count frames before a part's first mark: {marking_carried}");
}

/// The synthetic cluster of the benchmarks (16 hosts in a ring, 64 KiB WRITEs with ACKs, CE
/// marks and CNPs, PFC, a READ, retransmissions), cut in two and three at several places: every section
/// of the merge is one run's, or a note says why. (A flow whose PSN state did not cross a cut
/// once counted the skips of the part after it from its own start, and `capture.loss` differed
/// from one run's with no note.)
#[test]
fn a_cluster_cut_in_time_merges_back_or_says_why() {
    use tests::synth::pcap::{PcapOptions, write_pcap};
    use tests::synth::scenario::{ScenarioOptions, cluster};
    let dir = tempfile::tempdir().unwrap();
    let o = ScenarioOptions { hosts: 16, message_bytes: 64 * 1024, messages: 24, ..Default::default() };
    let recs = cluster(&o);
    let write = |name: &str, recs: &[tests::synth::pcap::Record]| {
        let p = dir.path().join(name);
        let opts = PcapOptions { nanosecond: true, snaplen: 128, ..Default::default() };
        write_pcap(std::fs::File::create(&p).unwrap(), opts, recs).unwrap();
        p.display().to_string()
    };
    let whole = report(&["-q", "-r", &format!("cap={}", write("whole.pcap", &recs)), "--json", "-"]);
    let mut equal = 0;
    // Cut in two at 9 places, and in three at 4 pairs of places.
    let n = recs.len();
    let mut cuts: Vec<Vec<usize>> = (1..10).map(|k| vec![n * k / 10]).collect();
    cuts.extend((1..5).map(|k| vec![n * k / 10, n * (k + 4) / 10]));
    for at in &cuts {
        let bounds: Vec<usize> = std::iter::once(0).chain(at.iter().copied()).chain(std::iter::once(n)).collect();
        let name = at.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("-");
        let parts: Vec<String> = bounds
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let pcap = write(&format!("{name}.{i}.pcap"), &recs[w[0]..w[1]]);
                let r = report(&["-q", "-r", &format!("cap={pcap}"), "--edges", "--json", "-"]);
                keep(dir.path(), &format!("{name}.{i}"), &r)
            })
            .collect();
        let merged = merge_of(&parts);
        let (silent, k) = unsaid(&merged, &whole, &codes(&merged));
        assert_eq!(silent, Vec::<&str>::new(), "cut at frames {name} of {n}: sections unlike one run's, unsaid");
        equal += k;
    }
    assert!(equal >= 148, "sections equal to one run's over 13 merges (152 when written): {equal}");
}

/// Two UC flows, cut at every frame (and in three at every other pair of frames): SENDs of
/// FIRST, MIDDLEs and LAST (one replaced by the next FIRST before its LAST; an ONLY; a LAST
/// without its FIRST; one still being sent at the end), WRITEs of FIRST, MIDDLE and LAST. By
/// hand: 6 messages (SENDs of 3, 3 and 2 µs, the ONLY; WRITEs of 3 µs twice), 1 partial, 1 open.
/// A message being sent at a cut is completed after it as one run completes it: the merged
/// transfers are the whole's, where the parts alone count it in neither.
#[test]
fn uc_messages_sent_across_a_cut_merge_as_one_run() {
    use tests::fixtures::Timed;
    use tests::synth::Roce;
    const US: u64 = 1000;
    let mut t = Timed { frames: Vec::new() };
    let sends =
        [(0, 0x20), (1, 0x21), (2, 0x21), (3, 0x22), (10, 0x20), (11, 0x21), (13, 0x22), (20, 0x20), (21, 0x21)];
    let more = [(30, 0x20), (32, 0x22), (40, 0x24), (41, 0x22), (50, 0x20), (51, 0x21)];
    for (psn, (at, opcode)) in sends.iter().chain(&more).enumerate() {
        let mut r = Roce::v4([10, 0, 9, 1], [10, 0, 9, 2], 50_000, *opcode, 0x77, psn as u32);
        r.payload_len = 1024;
        t.roce(at * US, &r);
    }
    for (psn, (at, opcode)) in [(5, 0x26), (6, 0x27), (8, 0x28), (15, 0x26), (16, 0x27), (18, 0x28)].iter().enumerate()
    {
        let mut r = Roce::v4([10, 0, 9, 1], [10, 0, 9, 2], 50_001, *opcode, 0x78, psn as u32);
        r.payload_len = 1024;
        r.ext.reth.dma_len = 3072;
        t.roce(at * US + 500, &r);
    }
    let f = t.fixture("uc_cut.pcap");
    let dir = tempfile::tempdir().unwrap();
    let whole = analyse(dir.path(), &f, "uc.whole", &[]);
    let transfers = |r: &Value| r["messages"]["transfers"].clone();
    let w = transfers(&whole);
    assert_eq!((&w["uc_messages"], &w["uc_partial"], &w["uc_open"]), (&json!(6), &json!(1), &json!(1)), "{w}");
    assert_eq!((&w["uc_transfer_ns"]["min"], &w["uc_transfer_ns"]["max"]), (&json!(0), &json!(3 * US)), "{w}");
    let n = f.frames.len();
    let mut cuts: Vec<Vec<usize>> = (1..n).map(|a| vec![a]).collect();
    cuts.extend((1..n).step_by(2).flat_map(|a| (a + 1..n).step_by(3).map(move |b| vec![a, b])));
    let mut across = 0;
    for cut in cuts {
        let bounds: Vec<usize> = std::iter::once(0).chain(cut.iter().copied()).chain([n]).collect();
        let reports: Vec<String> = bounds
            .windows(2)
            .enumerate()
            .map(|(i, b)| {
                let part = Fixture { frames: f.frames[b[0]..b[1]].to_vec(), ..f.clone() };
                let r = analyse(dir.path(), &part, &format!("uc.{cut:?}.{i}"), &["--edges"]);
                assert_eq!(schema_errors(&r), Vec::<String>::new(), "cut at {cut:?}, part {i}");
                keep(dir.path(), &format!("uc.{cut:?}.{i}"), &r)
            })
            .collect();
        let alone: u64 = reports
            .iter()
            .map(|p| serde_json::from_slice::<Value>(&std::fs::read(p).unwrap()).unwrap())
            .map(|r| transfers(&r)["uc_messages"].as_u64().unwrap_or(0))
            .sum();
        across += u64::from(alone < 6);
        let merged = merge_of(&reports);
        assert_json_eq(&transfers(&merged), &w, &format!("UC transfers cut at {cut:?}"));
        assert!(!codes(&merged).contains(&"messages_not_merged"), "cut at {cut:?}: {:?}", codes(&merged));
    }
    assert!(across >= 20, "cuts through a message being sent: {across}");
}
