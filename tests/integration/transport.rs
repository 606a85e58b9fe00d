//! Transport health on fixtures built for it: PSN/NAK counters, RTT percentiles, ECN/CNP
//! pairs and pacing, and the audit findings — each answer stated by hand from how the fixture
//! was built (tests/src/transport.rs).

use serde_json::{Value, json};
use tests::fixtures::data_dir;
use tests::tools::{report, run};
use tests::transport::{RTT_FAST, RTT_SLOW};

fn flow<'a>(r: &'a Value, src: &str, qp: u32) -> &'a Value {
    r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["src"] == format!("10.0.1.{src}") && f["dst_qp"] == qp)
        .unwrap_or_else(|| panic!("no flow from 10.0.1.{src} to QP {qp:#x}"))
}

/// `flows[].psn`: the observer's counters, then the responder model's (out_of_seq_request,
/// duplicate_request).
fn psn(requests: u64, oos: u64, skipped: u64, dup: u64, (r_oos, r_dup): (u64, u64)) -> Value {
    json!({"requests": requests, "out_of_sequence": oos, "psn_skipped": skipped, "duplicates": dup,
           "response_out_of_sequence": 0,
           "responder": {"out_of_seq_request": r_oos, "duplicate_request": r_dup}})
}

fn naks(acks: u64, seq: u64, rnr: u64) -> Value {
    json!({"acks": acks, "psn_sequence_error": seq, "rnr": rnr, "invalid_request": 0, "remote_access": 0,
           "remote_operational": 0, "invalid_rd_request": 0, "reserved": 0})
}

/// (severity, code, "src→dst qp") of every finding.
fn findings(r: &Value) -> Vec<(String, String, Vec<String>)> {
    r["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let flows = f["flows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    format!(
                        "{}→{} {:#x}",
                        x["src"].as_str().unwrap(),
                        x["dst"].as_str().unwrap(),
                        x["dst_qp"].as_u64().unwrap()
                    )
                })
                .collect();
            (f["severity"].as_str().unwrap().into(), f["code"].as_str().unwrap().into(), flows)
        })
        .collect()
}

fn one(severity: &str, code: &str, flow: &str) -> (String, String, Vec<String>) {
    (severity.into(), code.into(), vec![flow.into()])
}

#[test]
fn loss_nak_and_go_back_n() {
    let r = report("gobackn.pcap", &[]);
    // 100..103, 105..109 (105 skips 104), then 104..109 again behind the expected 110. The
    // responder took none of 105..109 the first time (one NAK episode): no duplicates there.
    assert_eq!(flow(&r, "1", 0x200)["psn"], psn(15, 1, 1, 6, (1, 0)));
    assert_eq!(flow(&r, "2", 0x100)["naks"], naks(1, 1, 0));
    assert_eq!(findings(&r), vec![one("warning", "go_back_n", "10.0.1.1→10.0.1.2 0x200")]);
}

#[test]
fn reordering_without_nak() {
    let r = report("reorder.pcap", &[]);
    // The responder drops 503, takes 502, then sees 504 out of sequence again: two episodes.
    assert_eq!(flow(&r, "3", 0x300)["psn"], psn(6, 1, 1, 1, (2, 0)));
    assert_eq!(flow(&r, "4", 0x103)["naks"], naks(1, 0, 0));
    assert_eq!(findings(&r), vec![one("warning", "reordering", "10.0.1.3→10.0.1.4 0x300")]);
}

#[test]
fn reads_of_several_pmtus_interleaved_with_writes() {
    let r = report("reads.pcap", &[]);
    // Requests 1000..1002 (WRITE), READ 1003 (4 PSNs), WRITE 1007, READ 1008 (1), READ 1009 (8),
    // WRITE 1017: in sequence once the PMTU (1024) is known from the WRITE FIRST/MIDDLE.
    assert_eq!(flow(&r, "5", 0x600)["psn"], psn(8, 0, 0, 0, (0, 0)));
    assert_eq!(flow(&r, "6", 0x105)["psn"], psn(0, 0, 0, 0, (0, 0)), "responses in sequence within each");
    assert_eq!(flow(&r, "6", 0x105)["naks"]["acks"], 6, "AETHs: FIRST and LAST of two responses, one ONLY, one ACK");
    // The read-only QP's first READ (2048 bytes) ends where the next (52) starts at MTU 1024:
    // learned, no gap. A fixed --pmtu 4096 makes it one PSN, and 52 a false gap.
    assert_eq!(flow(&r, "7", 0x610)["psn"], psn(2, 0, 0, 0, (0, 0)));
    assert_eq!(findings(&r), vec![]);
    let r = report("reads.pcap", &["--pmtu", "4096"]);
    assert_eq!(flow(&r, "7", 0x610)["psn"], psn(2, 1, 1, 0, (1, 0)));
    assert_eq!(findings(&r), vec![one("warning", "psn_gap", "10.0.1.7→10.0.1.6 0x610")]);
}

#[test]
fn each_qp_learns_its_own_pmtu() {
    let r = report("qp_mtus.pcap", &[]);
    // MTU 4096 shown by its WRITE: the 8192-byte READ at 203 spans 2, the WRITE at 205 follows.
    assert_eq!(flow(&r, "20", 0xB01)["psn"], psn(5, 0, 0, 0, (0, 0)));
    // READs before anything else, MTU 1024 next to the 4096 QP: 100 (4 PSNs), 104 (3), 107.
    assert_eq!(flow(&r, "20", 0xB00)["psn"], psn(3, 0, 0, 0, (0, 0)));
    // The READ RESPONSE showed 1024 before the SEND at 304: 302 and 303 missing.
    assert_eq!(flow(&r, "20", 0xB02)["psn"], psn(2, 1, 2, 0, (1, 0)));
    // 400 401 403 404 402 403 404 403 405 406 405 406: the observer sees 403 skip 402 and six
    // requests behind; the responder 2 episodes out of sequence and one duplicate (see the
    // fixture's comment).
    assert_eq!(flow(&r, "20", 0xB03)["psn"], psn(12, 1, 1, 6, (2, 1)));
    assert_eq!(flow(&r, "21", 0x1B03)["naks"], naks(1, 1, 1));
    assert_eq!(flow(&r, "21", 0x1B00)["psn"]["response_out_of_sequence"], 0);
    // A fixed PMTU of 4096 gets the 1024 QP's READs wrong: 100 spans 1 (104 skips 3), 104
    // spans 1 (107 skips 2).
    let r = report("qp_mtus.pcap", &["--pmtu", "4096"]);
    assert_eq!(flow(&r, "20", 0xB00)["psn"], psn(3, 2, 5, 0, (1, 0)));
}

#[test]
fn rnr_naks_and_retries() {
    let r = report("rnr.pcap", &[]);
    // Refused twice with an RNR NAK: the retries are not duplicates to the responder.
    assert_eq!(flow(&r, "8", 0x800)["psn"], psn(3, 0, 0, 2, (0, 0)));
    assert_eq!(flow(&r, "9", 0x108)["naks"], naks(1, 0, 2));
    assert_eq!(
        findings(&r),
        vec![
            one("warning", "rnr_nak", "10.0.1.9→10.0.1.8 0x108"),
            one("warning", "rnr_retry", "10.0.1.8→10.0.1.9 0x800"),
        ]
    );
}

#[test]
fn psn_wraps_at_two_to_the_24() {
    let r = report("psn_wrap.pcap", &[]);
    assert_eq!(flow(&r, "10", 0xA00)["psn"], psn(7, 0, 0, 0, (0, 0)));
    // 0xFFFFFE, then 1 (skipping 0xFFFFFF and 0), the straggler 0xFFFFFF, then 2.
    assert_eq!(flow(&r, "10", 0xA01)["psn"], psn(4, 1, 2, 1, (2, 0)));
}

/// Nearest rank, written independently of the analyzer's.
fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.max(1) - 1]
}

#[test]
fn rtt_percentiles_are_exact() {
    let r = report("rtt.pcap", &[]);
    let fast: Vec<u64> = (1..=RTT_FAST as u64).map(|i| i * 100).collect();
    let rtt = &flow(&r, "12", 0xC00)["rtt_ns"];
    assert_eq!(
        *rtt,
        json!({"samples": 1000, "min": 100, "p50": 50_000, "p90": 90_000, "p99": 99_000, "p999": 99_900,
               "max": 100_000, "exact": true, "timeouts": 1, "pending": 0})
    );
    let slow = &flow(&r, "12", 0xC01)["rtt_ns"];
    assert_eq!(
        (slow["samples"].as_u64(), slow["min"].as_u64(), slow["max"].as_u64()),
        (Some(100), Some(7000), Some(7000))
    );
    let mut all = fast.clone();
    all.extend(std::iter::repeat_n(7000, RTT_SLOW as usize));
    all.sort_unstable();
    let g = &r["rtt_ns"];
    for (key, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
        assert_eq!(g[key].as_u64(), Some(nearest_rank(&all, p)), "global {key}");
    }
    assert_eq!((g["samples"].as_u64(), g["min"].as_u64(), g["max"].as_u64()), (Some(1100), Some(100), Some(100_000)));
    assert_eq!((g["timeouts"].as_u64(), g["pending"].as_u64()), (Some(1), Some(0)));
    assert_eq!((g["ambiguous_acks"].as_u64(), g["unpaired_acks"].as_u64()), (Some(0), Some(0)));
    // The ACK-timed-out request's message is the slowest of its class (1100 WRITEs of 256 B):
    // the tail, overlapping nothing here.
    assert_eq!(
        findings(&r),
        vec![
            one("warning", "rtt_timeout", "10.0.1.12→10.0.1.13 0xc00"),
            one("info", "tail_dominated_by", "10.0.1.12→10.0.1.13 0xc00")
        ]
    );
    // With a longer timeout the last request is still waiting when the capture ends.
    let r = report("rtt.pcap", &["--rtt-timeout", "5s"]);
    assert_eq!((r["rtt_ns"]["timeouts"].as_u64(), r["rtt_ns"]["pending"].as_u64()), (Some(0), Some(1)));
    let codes: Vec<String> = findings(&r).into_iter().map(|(_, code, _)| code).collect();
    assert_eq!(codes, ["tail_dominated_by"]);
}

#[test]
fn every_audit_finding_and_its_absence() {
    let r = report("ecn_audit.pcap", &[]);
    assert_eq!(
        findings(&r),
        vec![
            one("error", "ce_without_cnp", "10.0.1.24→10.0.1.25 0x1800"),
            one("error", "not_ect", "10.0.1.20→10.0.1.21 0x1400"),
            one("warning", "cnp_dscp", "10.0.1.27→10.0.1.26 0x11a"),
            one("warning", "roce_dscp", "10.0.1.22→10.0.1.23 0x1600"),
            one("info", "cnp_without_ce", "10.0.1.27→10.0.1.26 0x11a"),
        ]
    );
    let pair =
        |a: &str| r["pairs"].as_array().unwrap().iter().find(|p| p["a"] == format!("10.0.1.{a}")).unwrap().clone();
    assert_eq!(
        pair("24"),
        json!({"a": "10.0.1.24", "b": "10.0.1.25", "data_packets": 4, "ce": 4, "cnp_back": 0, "ce_unanswered": 4,
               "ce_covered": 0, "ce_pending": 0})
    );
    assert_eq!(
        pair("26"),
        json!({"a": "10.0.1.26", "b": "10.0.1.27", "data_packets": 4, "ce": 0, "cnp_back": 4, "ce_unanswered": 0,
               "ce_covered": 0, "ce_pending": 0})
    );
    assert_eq!(
        pair("28"),
        json!({"a": "10.0.1.28", "b": "10.0.1.29", "data_packets": 4, "ce": 4, "cnp_back": 4, "ce_unanswered": 0, "ce_covered": 0, "ce_pending": 0})
    );
    let pacing = r["cnp_pacing"].as_array().unwrap().iter().find(|p| p["dst"] == "10.0.1.28").unwrap();
    assert_eq!(
        (pacing["cnps"].as_u64(), pacing["min_gap_ns"].as_u64(), pacing["median_gap_ns"].as_u64()),
        (Some(4), Some(110_000), Some(110_000))
    );
    // The expected classes set otherwise: every finding goes away.
    let r = report("ecn_audit.pcap", &["--roce-dscp", "24", "--cnp-dscp", "46"]);
    let codes: Vec<String> = findings(&r).into_iter().map(|f| f.1).collect();
    assert!(
        codes.contains(&"cnp_dscp".to_string()) && codes.contains(&"roce_dscp".to_string()),
        "{codes:?}: the other flows now differ"
    );
    // A capture with ECN-capable data, CE marks answered and the right classes: no finding but
    // the pause rate (3 PFC frames for 210 data frames of priority 3, above 10 per million).
    let r = report("example.pcap", &[]);
    assert_eq!(findings(&r), vec![("warning".to_string(), "pfc_rate_high".to_string(), vec![])]);
    for f in r["flows"].as_array().unwrap() {
        assert_eq!(f["psn"]["out_of_sequence"], 0, "{f}");
        assert_eq!(f["psn"]["duplicates"], 0, "{f}");
    }
}

#[test]
fn audit_errors_gate_ci() {
    let p = data_dir().join("ecn_audit.pcap");
    let out = run(&["-q", "-r", p.to_str().unwrap(), "--fail-on", "audit.error>0"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("audit.error>0 (value 2)"));
    let p = data_dir().join("example.pcap");
    let out = run(&["-q", "-r", p.to_str().unwrap(), "--fail-on", "audit.error>0", "--fail-on", "rtt_ns.p999>50000"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn cm_exchange_pairs_qps_that_psns_cannot_tell_apart() {
    let r = report("rtt_cm.pcap", &[]);
    let rtt = |r: &Value, qp: u32| {
        let f = &flow(r, "40", qp)["rtt_ns"];
        (f["samples"].as_u64(), f["min"].as_u64(), f["max"].as_u64())
    };
    assert_eq!(rtt(&r, 0xB41), (Some(20), Some(2_000), Some(2_000)), "paired by the CM REQ/REP");
    assert_eq!(rtt(&r, 0xB42), (Some(20), Some(3_000), Some(3_000)), "the only request flow left");
    assert_eq!((r["rtt_ns"]["cm_paired"].as_u64(), r["rtt_ns"]["ambiguous_acks"].as_u64()), (Some(2), Some(0)));

    // The same traffic without its CM exchange: every ACK could belong to either QP.
    let f = tests::transport::rtt_cm();
    let no_cm = tests::fixtures::Fixture { frames: f.frames[tests::transport::CM_FRAMES..].to_vec(), ..f };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("no_cm.pcap");
    std::fs::write(&p, no_cm.bytes()).unwrap();
    let out = run(&["-q", "-r", p.to_str().unwrap(), "--json", "-"]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["rtt_ns"]["ambiguous_acks"].as_u64(), r["rtt_ns"]["samples"].as_u64()), (Some(40), Some(0)));
    assert_eq!(r["rtt_ns"]["cm_paired"].as_u64(), Some(0));
}

/// A notification point pacing CNPs at one per 50 µs (tests/src/transport.rs `cnp_paced`): the
/// marks after each pacer's last CNP are covered, not an error; an NP that stops sending, or
/// never sends, still is.
#[test]
fn paced_cnps_cover_the_marks_after_them() {
    let pairs = |r: &Value| -> Vec<(String, u64, u64, u64, u64)> {
        r["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let n = |k: &str| p[k].as_u64().unwrap();
                (p["a"].as_str().unwrap().to_string(), n("ce"), n("cnp_back"), n("ce_unanswered"), n("ce_covered"))
            })
            .collect()
    };
    let errors = |r: &Value| -> Vec<String> {
        findings(r).into_iter().filter(|f| f.1 == "ce_without_cnp").map(|f| f.2[0].clone()).collect()
    };
    let r = report("cnp_paced.pcap", &[]);
    assert_eq!(r["cnp_interval"], json!({"ns": 50_000, "source": "inferred"}), "the CNP gaps are 50 µs");
    // 150 marks each. Pacers: CNPs for the marks at 100, 150 … 350 µs; the 24 marks from 352
    // to 398 µs follow the last CNP (seen at 352) within 50 µs. The NP that stops after two:
    // 26 marks answered (100 … 150), 26 covered (152 … 202), 98 not (204 … 398).
    assert_eq!(
        pairs(&r),
        vec![
            ("10.0.1.30".into(), 150, 6, 0, 24),
            ("10.0.1.31".into(), 150, 6, 0, 24),
            ("10.0.1.32".into(), 150, 2, 98, 26),
            ("10.0.1.33".into(), 150, 0, 150, 0),
        ]
    );
    assert_eq!(errors(&r), vec!["10.0.1.32→10.0.1.40 0xd02", "10.0.1.33→10.0.1.40 0xd03"]);
    // A 10 µs interval given: only the marks up to 362 µs are covered.
    let r = report("cnp_paced.pcap", &["--cnp-interval", "10us"]);
    assert_eq!(r["cnp_interval"], json!({"ns": 10_000, "source": "given"}));
    assert_eq!(pairs(&r)[0], ("10.0.1.30".into(), 150, 6, 18, 6));
    assert_eq!(errors(&r).len(), 4);
}

fn flows_packets(r: &Value, src: &str) -> u64 {
    r["flows"].as_array().unwrap().iter().filter(|f| f["src"] == src).map(|f| f["packets"].as_u64().unwrap()).sum()
}

/// DCQCN reaction per flow, stated by hand in `tests::transport::dcqcn_scaled`: a sender that
/// halves 10 µs after its CNP and recovers in stages by 410 µs, one that ignores three CNPs,
/// one whose marks never get a CNP back, one that recovers only after 610 µs, and one sent a
/// CNP every 10 µs.
#[test]
fn dcqcn_reaction_per_flow_and_host() {
    let r = report("dcqcn.pcap", &[]);
    let d = &r["dcqcn"];
    assert_eq!((d["rate_window_ns"].as_u64(), d["horizon_ns"].as_u64()), (Some(10_000), Some(1_000_000)));
    assert_eq!(d["unattributed_cnps"], 0);
    let row = |f: &Value| {
        let n = |k: &str| f[k].as_u64().unwrap();
        (
            f["src"].as_str().unwrap().to_string(),
            n("cnps"),
            n("reacted"),
            n("unreacted_cnps"),
            f["cut_ratio_p50"].as_f64(),
            f["reaction_ns_p50"].as_u64(),
            f["recovery_ns_p50"].as_u64(),
        )
    };
    let flows: Vec<_> = d["flows"].as_array().unwrap().iter().map(row).collect();
    assert_eq!(
        flows,
        vec![
            ("10.0.1.61".into(), 1, 1, 0, Some(0.5), Some(10_000), Some(410_000)),
            ("10.0.1.62".into(), 3, 0, 3, Some(1.0), None, None),
            ("10.0.1.64".into(), 1, 1, 0, Some(0.5), Some(10_000), Some(610_000)),
            ("10.0.1.65".into(), 21, 0, 21, Some(1.0), None, None),
        ],
        "10.0.1.63 got no CNP: not listed"
    );
    // One sender host each: the host summaries are the flows'.
    let hosts: Vec<_> = d["hosts"].as_array().unwrap().iter().map(row).collect();
    assert_eq!(hosts, flows);
    let codes: Vec<(String, String, Vec<String>)> = findings(&r)
        .into_iter()
        .filter(|f| ["cnp_ignored", "slow_recovery", "cnp_storm", "ce_without_cnp"].contains(&f.1.as_str()))
        .collect();
    assert_eq!(
        codes,
        vec![
            one("error", "ce_without_cnp", "10.0.1.63→10.0.1.73 0xe3f"),
            (
                "warning".into(),
                "cnp_ignored".into(),
                vec!["10.0.1.62→10.0.1.72 0xe3e".into(), "10.0.1.65→10.0.1.75 0xe41".into()]
            ),
            one("warning", "cnp_storm", "10.0.1.65→10.0.1.75 0xe41"),
            one("warning", "slow_recovery", "10.0.1.64→10.0.1.74 0xe40"),
        ]
    );
    // Plots: the flows the findings name first (65 by two, then 62 and 64), then 61; each from
    // its first CE mark, 120 points of 10 µs (1200 µs), with its CNPs and its one CE mark.
    let plots: Vec<(String, u64, usize, usize, u64)> = d["plots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let ce: u64 = p["ce"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
            (
                p["src"].as_str().unwrap().to_string(),
                p["point_ns"].as_u64().unwrap(),
                p["bytes"].as_array().unwrap().len(),
                p["cnps_ns"].as_array().unwrap().len(),
                ce,
            )
        })
        .collect();
    let plot = |s: &str, cnps: usize| (format!("10.0.1.{s}"), 10_000, 120, cnps, 1);
    assert_eq!(plots, vec![plot("65", 21), plot("62", 3), plot("64", 1), plot("61", 1)]);
    // 61's: 20 frames a window, 10 from window 11, 15 from window 31.
    let b = |i: usize| d["plots"][3]["bytes"][i].as_u64().unwrap();
    let frame = b(0) / 20;
    assert_eq!((b(0), b(11), b(31)), (20 * frame, 10 * frame, 15 * frame));
    // The HTML page draws them: a plot per flow, a line per CNP, a dot per point with CE marks.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("d.html");
    let out = run(&["-q", "-r", data_dir().join("dcqcn.pcap").to_str().unwrap(), "--html", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("class=\"dcqcn-plot\"").count(), 4);
    assert_eq!(html.matches("class=\"cnp\"").count(), 26);
    assert_eq!(html.matches("class=\"ce\"").count(), 4);
    // Marking over time, one class (every frame is DSCP 26): every data frame from the first
    // CE mark (the first frames, at 0.25 µs) counted, and the 2205 CE marks (each sender's
    // first frame, and 63's 2200 from 100 µs).
    let classes = r["marking"]["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 1);
    assert_eq!(classes[0]["dscp"], 26);
    let sum = |k: &str| classes[0][k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("frames"), sum("ce")), (r["capture"]["classes"]["roce"].as_u64().unwrap(), 2205));
    // Per flow: 63 is not plotted (no CNP); 61's frames per point are its frames.
    let frames: u64 = d["plots"][3]["frames"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(frames, flows_packets(&r, "10.0.1.61"));
    assert_eq!(html.matches("class=\"marking\"").count(), 1);
    // A threshold above 610 µs: no slow recovery; a 2 ms horizon changes nothing here.
    let r = report("dcqcn.pcap", &["--dcqcn-slow-recovery", "700us", "--dcqcn-horizon", "2ms"]);
    assert!(findings(&r).iter().all(|f| f.1 != "slow_recovery"));
    assert_eq!(r["dcqcn"]["flows"][0]["recovery_ns_p50"], 410_000);
}

/// Marking per priority (the outer VLAN tag's PCP, the PFC priority): the example's data
/// frames are all PCP 3 and DSCP 26, so its one priority has the class's series; its CE marks
/// are the CE-marked RoCE frames tshark finds on priority 3. An untagged capture's priority is
/// `pcp: null`.
#[test]
fn marking_per_priority() {
    let r = report("example.pcap", &[]);
    let m = &r["marking"];
    let prios = m["priorities"].as_array().unwrap();
    assert_eq!(prios.len(), 1, "{m}");
    assert_eq!(prios[0]["pcp"], 3);
    let class = &m["classes"][0];
    for k in ["start_ns", "point_ns", "frames", "ce"] {
        assert_eq!(prios[0][k], class[k], "{k}");
    }
    let out = std::process::Command::new(tests::tools::require("tshark"))
        .args(["-n", "-r"])
        .arg(data_dir().join("example.pcap"))
        .args(["-Y", "vlan.priority == 3 && ip.dsfield.ecn == 3 && infiniband", "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    let ce = String::from_utf8(out.stdout).unwrap().lines().count() as u64;
    let sum = |k: &str| prios[0][k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum::<u64>();
    assert!(ce > 0);
    assert_eq!(sum("ce"), ce);
    let r = report("dcqcn.pcap", &[]);
    assert_eq!(r["marking"]["priorities"][0]["pcp"], Value::Null);
}
