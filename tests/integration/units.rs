//! Units of the analyzer driven by frames that `synth` builds: the link-layer decoders and the
//! metrics rendering (here, not beside the code, because `synth` is a dev-only crate).

use analyzer::capture::LinkType;
use analyzer::frames::FrameMeta;
use analyzer::frames::{SLL_LEN, SLL2_LEN, decode};
use analyzer::model::{Report, Severity};
use analyzer::pipeline::Pipeline;
use analyzer::report::RunKind;
use analyzer::report::render::metrics::render;
use analyzer_common::{FrameClass, PacketSummary, classify};
use tests::synth::{Roce, pfc};

#[test]
fn sll_and_sll2_equal_ethernet() {
    let eth = Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, 0x0A, 0x12, 7).payload(64).build();
    let mut want = PacketSummary::zeroed();
    decode(LinkType::Ethernet, &eth, eth.len() as u32, &mut want);

    let mut sll = vec![0u8; SLL_LEN];
    sll[4..6].copy_from_slice(&6u16.to_be_bytes());
    sll[6..12].copy_from_slice(&eth[6..12]);
    sll[14..16].copy_from_slice(&eth[12..14]);
    sll.extend_from_slice(&eth[14..]);
    let mut got = PacketSummary::zeroed();
    assert_eq!(decode(LinkType::LinuxSll, &sll, sll.len() as u32, &mut got), FrameClass::Roce);
    want.dst_mac = [0; 6];
    assert_eq!(got, want);

    let mut sll2 = vec![0u8; SLL2_LEN];
    sll2[0..2].copy_from_slice(&eth[12..14]);
    sll2[11] = 6;
    sll2[12..18].copy_from_slice(&eth[6..12]);
    sll2.extend_from_slice(&eth[14..]);
    let mut got2 = PacketSummary::zeroed();
    assert_eq!(decode(LinkType::LinuxSll2, &sll2, sll2.len() as u32, &mut got2), FrameClass::Roce);
    assert_eq!(got2, want);
}

#[test]
fn short_cooked_header_is_truncated() {
    let mut s = PacketSummary::zeroed();
    assert_eq!(decode(LinkType::LinuxSll2, &[0u8; 10], 10, &mut s), FrameClass::TruncatedHeader);
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn series_match_the_report_and_cardinality_is_bounded() {
    let mut e = Pipeline::default();
    e.engine.add_source("live", "eth0", "eth0");
    let mut s = PacketSummary::zeroed();
    for i in 0..5u32 {
        let f =
            Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, 0x0A, 0x100 + i, 0).payload(100 * (i as usize + 1)).build();
        for _ in 0..=i {
            classify(&f[..], f.len() as u32, &mut s);
            e.observe(FrameMeta { ts_ns: 1, source: 0 }, &s);
        }
    }
    let p = pfc([2, 0, 0, 0, 7, 1], 1 << 3, [0, 0, 0, 7, 0, 0, 0, 0]);
    classify(&p[..], p.len() as u32, &mut s);
    e.observe(FrameMeta { ts_ns: 1, source: 0 }, &s);
    let r = Report::assemble(&e, RunKind::Live);
    let text = render(&r, 2, &[1_500, 3_000_000]);
    assert_eq!(value(&text, r#"roce_analyzer_frames_total{class="roce"}"#), Some(15.0));
    assert_eq!(value(&text, r#"roce_analyzer_frames_total{class="pfc"}"#), Some(1.0));
    assert_eq!(value(&text, r#"roce_analyzer_pfc_frames_total{mac="02:00:00:00:07:01",priority="3"}"#), Some(1.0));
    assert_eq!(value(&text, r#"roce_analyzer_pfc_quanta_total{mac="02:00:00:00:07:01",priority="3"}"#), Some(7.0));
    // Two flow series (the biggest), the other three in the bucket.
    assert_eq!(text.lines().filter(|l| l.starts_with("roce_analyzer_flow_bytes_total{")).count(), 2);
    let big = r.flows.iter().find(|f| f.dst_qp == 0x104).unwrap();
    let series = r#"roce_analyzer_flow_bytes_total{src="10.0.0.1",dst="10.0.0.2",udp_sport="49152",dst_qp="260"}"#;
    assert_eq!(value(&text, series), Some(big.bytes as f64));
    let small: u64 = r.flows.iter().filter(|f| f.dst_qp < 0x103).map(|f| f.bytes).sum();
    assert_eq!(value(&text, "roce_analyzer_other_flows_bytes"), Some(small as f64));
    assert_eq!(value(&text, "roce_analyzer_flows"), Some(5.0));
    assert_eq!(value(&text, "roce_analyzer_rtt_seconds_count"), Some(2.0));
    assert_eq!(value(&text, r#"roce_analyzer_rtt_seconds_bucket{le="0.000002"}"#), Some(1.0));
    assert_eq!(
        value(&text, r#"roce_analyzer_psn_anomalies_total{kind="duplicates"}"#),
        Some(10.0),
        "the same PSN 15 times: 5 flows, 10 repeats"
    );
    assert_eq!(
        value(&text, r#"roce_analyzer_audit_findings_total{severity="warning"}"#),
        Some(r.audit.iter().filter(|f| f.severity == Severity::Warning).count() as f64)
    );
    // The Prometheus text format: a counter's HELP and TYPE name its samples, no OpenMetrics EOF.
    assert!(text.contains("# TYPE roce_analyzer_frames_total counter\n"));
    assert!(!text.contains("# EOF"));
    assert_eq!(value(&text, &format!(r#"roce_analyzer_build_info{{version="{}"}}"#, r.tool.version)), Some(1.0));
}
