//! Reports: the versioned JSON document (schema `roce-analyzer/report/v1`) and the human
//! summary, both built from the [`Engine`]'s state.
//!
//! v1 is a contract: later versions add sections, never rename fields. Numbers are integers,
//! timestamps Unix ns, flows sorted by key so that two runs give byte-identical JSON.

pub mod gates;
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
            pfc: pfc_json(engine),
            visibility: Vec::new(),
            nic: engine.nic.clone(),
        };
        report.visibility = visibility::notes(engine, &report);
        report
    }
}

/// Flows sort by (IP version, source, destination, UDP source port, destination QP).
fn flow_order(k: &FlowKey) -> (u8, [u8; 16], [u8; 16], u16, u32) {
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
    }
}

fn pfc_json(engine: &Engine) -> Pfc {
    let t = &engine.pfc;
    Pfc {
        frames: t.pfc_frames,
        pause_8023x_frames: t.pause_frames,
        senders: t
            .pfc
            .iter()
            .map(|((mac, prio), c)| PfcSender { mac: mac_string(mac), priority: *prio, counts: c.into() })
            .collect(),
        pause_senders: t.pause.iter().map(|(mac, c)| PauseSender { mac: mac_string(mac), counts: c.into() }).collect(),
    }
}
