//! Reports: the versioned JSON document (schema `roce-analyzer/report/v1`) and the human
//! summary, both built from the [`Engine`]'s state.
//!
//! v1 is a contract: later versions add sections, never rename fields. Numbers are integers
//! (but for ratios and rates: `imbalance`, `peak_gbps`, `peak_link_ratio`, `sport_entropy_bits`),
//! timestamps Unix ns, flows sorted by key so that two runs give byte-identical JSON.

pub mod fabric;
pub mod gates;
pub mod html;
pub mod human;
pub mod live_view;
pub mod merge;
pub mod metrics;
pub mod model;
pub mod names;
pub mod visibility;
pub mod write;

pub use model::*;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use analyzer_common::FrameClass;
use analyzer_common::flow::FlowKey;
use analyzer_common::psn::PsnState;

use crate::engine::{DropReason, Engine, FlowStats};

pub const SCHEMA: &str = "roce-analyzer/report/v1";

/// Offline (capture files) or live (an interface).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Offline,
    Live,
}

impl Report {
    /// Builds the report of everything the engine has seen.
    pub fn from_engine(engine: &Engine, kind: RunKind) -> Report {
        let classes = FrameClass::ALL.iter().map(|c| (c.name().to_string(), engine.class_count(*c))).collect();
        let dropped = DropReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), engine.dropped.get(r).copied().unwrap_or(0)))
            .collect();
        let mut flows: Vec<(&FlowKey, &FlowStats)> = engine.flows.iter().collect();
        flows.sort_unstable_by_key(|(k, _)| flow_order(k));
        let flows = flows.into_iter().map(|(k, s)| flow_json(engine, k, s)).collect();
        let mut report = Report {
            schema: SCHEMA.into(),
            tool: Tool { name: "roce-analyzer".into(), version: env!("CARGO_PKG_VERSION").into() },
            kind: match kind {
                RunKind::Offline => "offline".into(),
                RunKind::Live => "live".into(),
            },
            capture: Capture {
                sources: engine
                    .sources
                    .iter()
                    .map(|s| SourceJson { kind: s.kind.clone(), name: s.name.clone(), label: s.label.clone() })
                    .collect(),
                start_ns: engine.first_ns.unwrap_or(0),
                end_ns: engine.last_ns.unwrap_or(0),
                partial: engine.partial,
                frames: engine.frames,
                classes,
                dropped,
            },
            flows,
            pfc: fabric::pfc(engine),
            visibility: Vec::new(),
            nic: engine.nic.clone(),
            rtt_ns: rtt_summary(engine),
            pairs: pairs_json(engine),
            cnp_pacing: pacing_json(engine),
            audit: crate::analyses::audit::findings(engine),
            congestion_tree: fabric::congestion_tree(engine),
            incast: fabric::incast(engine),
            ecmp: fabric::ecmp(engine),
        };
        report.visibility = visibility::notes(engine, &report);
        report
    }
}

/// Flows sort by (IP version, source, destination, UDP source port, destination QP).
pub(crate) fn flow_order(k: &FlowKey) -> (u8, [u8; 16], [u8; 16], u16, u32) {
    (k.ip_version, k.src, k.dst, k.udp_sport, k.dst_qp)
}

/// The same order for a report's flow (addresses parsed back into key bytes).
pub fn flow_sort_key(f: &Flow) -> (u8, [u8; 16], [u8; 16], u16, u32) {
    let bytes = |s: &str| -> [u8; 16] {
        let mut b = [0u8; 16];
        match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => b[..4].copy_from_slice(&a.octets()),
            Ok(IpAddr::V6(a)) => b = a.octets(),
            Err(_) => {}
        }
        b
    };
    (f.ip_version, bytes(&f.src), bytes(&f.dst), f.udp_sport, f.dst_qp)
}

pub fn addr_string(version: u8, bytes: &[u8; 16]) -> String {
    if version == 4 {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])).to_string()
    } else {
        IpAddr::V6(Ipv6Addr::from(*bytes)).to_string()
    }
}

pub fn mac_string(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

pub fn flow_ref(k: &FlowKey) -> FlowRef {
    FlowRef {
        src: addr_string(k.ip_version, &k.src),
        dst: addr_string(k.ip_version, &k.dst),
        udp_sport: k.udp_sport,
        dst_qp: k.dst_qp,
    }
}

fn psn_json(p: &PsnState) -> (PsnJson, Naks) {
    use analyzer_common::psn::aeth;
    (
        PsnJson {
            requests: p.requests,
            out_of_sequence: p.out_of_sequence,
            psn_skipped: p.psn_skipped,
            duplicates: p.duplicates,
            response_out_of_sequence: p.response_out_of_sequence,
        },
        Naks {
            acks: p.aeth[aeth::ACK],
            psn_sequence_error: p.aeth[aeth::PSN_SEQUENCE_ERROR],
            rnr: p.aeth[aeth::RNR],
            invalid_request: p.aeth[aeth::INVALID_REQUEST],
            remote_access: p.aeth[aeth::REMOTE_ACCESS],
            remote_operational: p.aeth[aeth::REMOTE_OPERATIONAL],
            invalid_rd_request: p.aeth[aeth::INVALID_RD_REQUEST],
            reserved: p.aeth[aeth::RESERVED],
        },
    )
}

fn end_ns(engine: &Engine) -> u64 {
    engine.last_ns.unwrap_or(0)
}

fn flow_rtt(engine: &Engine, k: &FlowKey) -> Option<FlowRtt> {
    let r = engine.analyses.rtt.flows.get(k)?;
    let (late, pending) = engine.analyses.rtt.waiting(k, end_ns(engine));
    let timeouts = r.timeouts + late;
    if r.samples.is_empty() && timeouts == 0 && pending == 0 {
        return None;
    }
    Some(FlowRtt { percentiles: r.samples.percentiles().unwrap_or_default(), timeouts, pending })
}

fn rtt_summary(engine: &Engine) -> RttSummary {
    let rtt = &engine.analyses.rtt;
    let (mut timeouts, mut pending) = (0, 0);
    for (k, f) in &rtt.flows {
        let (late, p) = rtt.waiting(k, end_ns(engine));
        timeouts += f.timeouts + late;
        pending += p;
    }
    RttSummary {
        percentiles: rtt
            .overall()
            .percentiles()
            .unwrap_or(crate::analyses::stats::Percentiles { exact: true, ..Default::default() }),
        timeouts,
        pending,
        ambiguous_acks: rtt.ambiguous_acks,
        unpaired_acks: rtt.unpaired_acks,
        cm_paired: rtt.cm_paired,
        timeout_ns: engine.analyses.config.rtt_timeout_ns,
    }
}

fn pairs_json(engine: &Engine) -> Vec<Pair> {
    let e = &engine.analyses.ecn;
    let mut pairs: Vec<_> = e.pairs.iter().collect();
    pairs.sort_unstable_by_key(|(k, _)| **k);
    pairs
        .into_iter()
        .map(|(((a, v), (b, _)), p)| Pair {
            a: addr_string(*v, a),
            b: addr_string(*v, b),
            data_packets: p.data_packets,
            ce: p.ce,
            cnp_back: p.cnp_back,
            ce_unanswered: p.unanswered_at(end_ns(engine), e.timeout_ns),
        })
        .collect()
}

fn pacing_json(engine: &Engine) -> Vec<CnpPacing> {
    let mut pacing: Vec<_> = engine.analyses.ecn.pacing.iter().collect();
    pacing.sort_unstable_by_key(|(k, _)| **k);
    pacing
        .into_iter()
        .map(|(((addr, v), qp), p)| {
            let mut gaps = p.gaps.clone();
            CnpPacing {
                dst: addr_string(*v, addr),
                dst_qp: *qp,
                cnps: p.cnps,
                min_gap_ns: gaps.iter().copied().min().unwrap_or(0),
                median_gap_ns: crate::analyses::stats::median(&mut gaps),
            }
        })
        .collect()
}

fn flow_json(engine: &Engine, k: &FlowKey, s: &FlowStats) -> Flow {
    let mut pcp: BTreeMap<String, u64> = s.pcp.sorted().into_iter().map(|(p, n)| (p.to_string(), n)).collect();
    if s.untagged > 0 {
        pcp.insert("untagged".into(), s.untagged);
    }
    let mut labels: Vec<String> = (0..64)
        .filter(|i| s.sources & (1u64 << i) != 0)
        .filter_map(|i| engine.sources.get(i).map(|src| src.label.clone()))
        .collect();
    labels.dedup();
    let (psn, naks) = psn_json(&s.psn);
    Flow {
        src: addr_string(k.ip_version, &k.src),
        dst: addr_string(k.ip_version, &k.dst),
        ip_version: k.ip_version,
        udp_sport: k.udp_sport,
        dst_qp: k.dst_qp,
        packets: s.packets,
        bytes: s.bytes,
        first_ns: s.first_ns,
        last_ns: s.last_ns,
        opcodes: s.opcodes.sorted().into_iter().map(|(o, n)| (names::opcode_name(o), n)).collect(),
        ecn: Ecn { not_ect: s.ecn[0], ect1: s.ecn[1], ect0: s.ecn[2], ce: s.ecn[3] },
        dscp: s.dscp.sorted().into_iter().map(|(d, n)| (d.to_string(), n)).collect(),
        pcp,
        fecn: s.fecn,
        becn: s.becn,
        ack_req: s.ack_req,
        labels,
        psn,
        naks,
        rtt_ns: flow_rtt(engine, k),
    }
}
