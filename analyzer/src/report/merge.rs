//! `merge`: one fabric report from the reports of several hosts or mirror ports. Flows are
//! summed per key with their labels kept (a flow seen at two vantage points counts at both:
//! the labels say so), PFC senders summed per sender and priority with their pause intervals
//! joined on time (pause time, storms, congestion trees and deadlocks are recomputed from
//! them), ECMP shares recomputed per label, capture totals summed. Incast episodes and RTT
//! percentiles need per-packet times, which reports do not carry: they are kept per report,
//! and the report says so.
//! Visibility notes that depend on the whole are recomputed over the union; the others are
//! carried over with the report they came from. NIC counters are per host and not merged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use analyzer_common::flow::FlowKey;

use crate::analyses::pause::{ALL_PRIORITIES, Pause, Timer};
use crate::analyses::topology::{Topology, parse_mac};
use crate::analyses::tree;
use crate::engine::FlowStats;

use super::{
    Capture, CnpPacing, CongestionTrees, Deadlock, Ecmp, EcmpObserved, Ecn, Episode, Finding, Flow, Incast, LabelShare,
    Note, Pair, PauseCounts, PauseSender, PauseTime, Pfc, PfcSender, Report, RttSummary, SCHEMA, SourceJson, StormJson,
    Tool, Tree,
};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a roce-analyzer report: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{path}: report schema {found:?}, this roce-analyzer merges {SCHEMA:?} only")]
    Schema { path: PathBuf, found: String },
    #[error("nothing to merge")]
    Empty,
}

/// Reads a report, refusing other schema versions before anything else is parsed.
pub fn read(path: &Path) -> Result<Report, MergeError> {
    let bytes = std::fs::read(path).map_err(|source| MergeError::Read { path: path.into(), source })?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| MergeError::Parse { path: path.into(), source })?;
    let found = v.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
    if found != SCHEMA {
        return Err(MergeError::Schema { path: path.into(), found: found.into() });
    }
    serde_json::from_value(v).map_err(|source| MergeError::Parse { path: path.into(), source })
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn span(first: &mut u64, last: &mut u64, f: u64, l: u64) {
    *first = (*first).min(f);
    *last = (*last).max(l);
}

/// Merges `reports` (each with the file it came from) into one report.
/// What the fabric analyses of a merged report need beyond the reports.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    pub topology: Option<Topology>,
    pub pfc_storm_ns: u64,
    pub deadlock_min_ns: u64,
}

/// Recomputes pause time, storms, congestion trees and deadlocks from the joined intervals.
fn fabric_from_intervals(report: &mut Report, opts: &MergeOptions) {
    let mut pause = Pause::new(1, opts.pfc_storm_ns);
    let mut unite = |mac: &str, prio: u8, t: &mut PauseTime| {
        let u = tree::union(t.intervals.iter().map(|[a, b]| (*a, *b)).collect());
        *t = PauseTime::of(&u);
        if let Some(m) = parse_mac(mac) {
            pause.timers.insert((m, prio), Timer::from_intervals(u));
        }
    };
    for s in &mut report.pfc.senders {
        unite(&s.mac, s.priority, &mut s.pause);
    }
    for s in &mut report.pfc.pause_senders {
        unite(&s.mac, ALL_PRIORITIES, &mut s.pause);
    }
    let topo = opts.topology.as_ref();
    report.pfc.storms = pause
        .storms()
        .into_iter()
        .map(|st| StormJson {
            mac: super::mac_string(&st.mac),
            device: tree::owner_names(topo, &st.mac).0,
            priority: st.priority,
            start_ns: st.start_ns,
            duration_ns: st.duration_ns,
        })
        .collect();
    let flows: Vec<(FlowKey, FlowStats)> = report.flows.iter().filter_map(flow_back).collect();
    report.congestion_tree = tree::build(&pause, topo, flows.iter().map(|(k, s)| (k, s)), opts.deadlock_min_ns);
}

/// The engine's view of a report's flow: what the congestion tree reads of it.
fn flow_back(f: &Flow) -> Option<(FlowKey, FlowStats)> {
    let addr = |s: &str| -> Option<[u8; 16]> {
        let mut b = [0u8; 16];
        match s.parse::<std::net::IpAddr>().ok()? {
            std::net::IpAddr::V4(a) => b[..4].copy_from_slice(&a.octets()),
            std::net::IpAddr::V6(a) => b = a.octets(),
        }
        Some(b)
    };
    let key = FlowKey {
        src: addr(&f.src)?,
        dst: addr(&f.dst)?,
        dst_qp: f.dst_qp,
        udp_sport: f.udp_sport,
        ip_version: f.ip_version,
        _pad: 0,
    };
    let mut stats = FlowStats {
        packets: f.packets,
        bytes: f.bytes,
        first_ns: f.first_ns,
        last_ns: f.last_ns,
        ..Default::default()
    };
    for (pcp, n) in &f.pcp {
        match pcp.parse::<u8>() {
            Ok(p) => stats.pcp.add(p, *n),
            Err(_) => stats.untagged += n,
        }
    }
    Some((key, stats))
}

pub fn merge(reports: Vec<(PathBuf, Report)>, opts: &MergeOptions) -> Result<Report, MergeError> {
    if reports.is_empty() {
        return Err(MergeError::Empty);
    }
    // A label used by more than one report (two hosts' eth0) is qualified with its file name.
    let mut label_reports: BTreeMap<String, usize> = BTreeMap::new();
    for (_, r) in &reports {
        let labels: std::collections::BTreeSet<&String> = r.capture.sources.iter().map(|s| &s.label).collect();
        for l in labels {
            *label_reports.entry(l.clone()).or_default() += 1;
        }
    }
    let qualify = |path: &Path, label: &str| -> String {
        if label_reports.get(label).copied().unwrap_or(0) > 1 {
            format!(
                "{}:{label}",
                path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into())
            )
        } else {
            label.to_string()
        }
    };

    let mut sources: Vec<SourceJson> = Vec::new();
    let mut capture = Capture {
        sources: Vec::new(),
        start_ns: u64::MAX,
        end_ns: 0,
        partial: false,
        frames: 0,
        classes: BTreeMap::new(),
        dropped: BTreeMap::new(),
    };
    let mut flows: BTreeMap<(u8, String, String, u16, u32), Flow> = BTreeMap::new();
    let mut senders: BTreeMap<(String, u8), PfcSender> = BTreeMap::new();
    let mut pause: BTreeMap<String, PauseSender> = BTreeMap::new();
    let (mut pfc_frames, mut pause_frames) = (0, 0);
    let mut carried: Vec<Note> = Vec::new();
    let mut pairs: BTreeMap<(String, String), Pair> = BTreeMap::new();
    let mut pacing: BTreeMap<(String, u32), CnpPacing> = BTreeMap::new();
    let mut audit: Vec<Finding> = Vec::new();
    let mut rtt_reports: Vec<RttSummary> = Vec::new();
    let mut rtt_lost = false;
    let mut storms: std::collections::BTreeSet<StormJson> = std::collections::BTreeSet::new();
    let mut trees: Vec<(PathBuf, Tree)> = Vec::new();
    let mut deadlocks: Vec<Deadlock> = Vec::new();
    let mut unresolved: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut episodes: Vec<Episode> = Vec::new();
    let mut by_label: BTreeMap<String, LabelShare> = BTreeMap::new();
    for (path, r) in &reports {
        for s in &r.capture.sources {
            let label = qualify(path, &s.label);
            if !sources.iter().any(|x| x.kind == s.kind && x.name == s.name && x.label == label) {
                sources.push(SourceJson { kind: s.kind.clone(), name: s.name.clone(), label });
            }
        }
        let c = &r.capture;
        if c.frames > 0 {
            span(&mut capture.start_ns, &mut capture.end_ns, c.start_ns, c.end_ns);
        }
        capture.partial |= c.partial;
        capture.frames += c.frames;
        add_counts(&mut capture.classes, &c.classes);
        add_counts(&mut capture.dropped, &c.dropped);
        for f in &r.flows {
            let key = (f.ip_version, f.src.clone(), f.dst.clone(), f.udp_sport, f.dst_qp);
            let labels: Vec<String> = f.labels.iter().map(|l| qualify(path, l)).collect();
            match flows.get_mut(&key) {
                None => {
                    flows.insert(key, Flow { labels, ..f.clone() });
                }
                Some(m) => {
                    m.packets += f.packets;
                    m.bytes += f.bytes;
                    span(&mut m.first_ns, &mut m.last_ns, f.first_ns, f.last_ns);
                    add_counts(&mut m.opcodes, &f.opcodes);
                    add_counts(&mut m.dscp, &f.dscp);
                    add_counts(&mut m.pcp, &f.pcp);
                    m.ecn = Ecn {
                        not_ect: m.ecn.not_ect + f.ecn.not_ect,
                        ect0: m.ecn.ect0 + f.ecn.ect0,
                        ect1: m.ecn.ect1 + f.ecn.ect1,
                        ce: m.ecn.ce + f.ecn.ce,
                    };
                    m.fecn += f.fecn;
                    m.becn += f.becn;
                    m.ack_req += f.ack_req;
                    add_psn(m, f);
                    // Percentiles of two vantage points cannot be combined without samples.
                    m.rtt_ns = None;
                    rtt_lost = true;
                    for l in labels {
                        if !m.labels.contains(&l) {
                            m.labels.push(l);
                        }
                    }
                }
            }
        }
        pfc_frames += r.pfc.frames;
        pause_frames += r.pfc.pause_8023x_frames;
        for s in &r.pfc.senders {
            let e = senders.entry((s.mac.clone(), s.priority)).or_insert_with(|| PfcSender {
                counts: ZERO,
                pause: PauseTime::default(),
                ..s.clone()
            });
            e.counts.add(&s.counts);
            e.pause.join(&s.pause);
        }
        for s in &r.pfc.pause_senders {
            let e = pause.entry(s.mac.clone()).or_insert_with(|| PauseSender {
                counts: ZERO,
                pause: PauseTime::default(),
                ..s.clone()
            });
            e.counts.add(&s.counts);
            e.pause.join(&s.pause);
        }
        // ECMP observed: each report's bytes and flows per (qualified) label.
        match &r.ecmp.observed {
            Some(o) => {
                for (l, share) in &o.by_label {
                    let e = by_label.entry(qualify(path, l)).or_insert(LabelShare { bytes: 0, flows: 0 });
                    e.bytes += share.bytes;
                    e.flows += share.flows;
                }
            }
            None => {
                let labels: std::collections::BTreeSet<String> =
                    r.capture.sources.iter().map(|s| qualify(path, &s.label)).collect();
                if labels.len() == 1 {
                    let e = by_label
                        .entry(labels.into_iter().next().expect("one"))
                        .or_insert(LabelShare { bytes: 0, flows: 0 });
                    e.bytes += r.flows.iter().map(|f| f.bytes).sum::<u64>();
                    e.flows += r.flows.len() as u64;
                }
            }
        }
        for st in &r.pfc.storms {
            storms.insert(st.clone());
        }
        for t in &r.congestion_tree.trees {
            trees.push((path.clone(), t.clone()));
        }
        deadlocks.extend(r.congestion_tree.deadlocks.iter().cloned());
        unresolved.extend(r.congestion_tree.unresolved.iter().cloned());
        episodes.extend(r.incast.episodes.iter().cloned());
        for p in &r.pairs {
            let m = pairs.entry((p.a.clone(), p.b.clone())).or_insert_with(|| Pair {
                data_packets: 0,
                ce: 0,
                cnp_back: 0,
                ce_unanswered: 0,
                ..p.clone()
            });
            m.data_packets += p.data_packets;
            m.ce += p.ce;
            m.cnp_back += p.cnp_back;
            m.ce_unanswered += p.ce_unanswered;
        }
        for c in &r.cnp_pacing {
            let slot = pacing.entry((c.dst.clone(), c.dst_qp)).or_insert_with(|| c.clone());
            if c.cnps > slot.cnps {
                *slot = c.clone();
            }
        }
        for f in &r.audit {
            audit.push(Finding { message: format!("{}: {}", path.display(), f.message), ..f.clone() });
        }
        if r.rtt_ns.percentiles.samples > 0 {
            rtt_reports.push(r.rtt_ns);
        }
        for n in r.visibility.iter().filter(|n| !RECOMPUTED.contains(&n.code.as_str())) {
            carried.push(Note { code: n.code.clone(), message: format!("{}: {}", path.display(), n.message) });
        }
    }
    if capture.start_ns == u64::MAX {
        capture.start_ns = 0;
    }
    capture.sources = sources;
    let mut report = Report {
        schema: SCHEMA.into(),
        tool: Tool { name: "roce-analyzer".into(), version: env!("CARGO_PKG_VERSION").into() },
        kind: "merged".into(),
        capture,
        flows: flows.into_values().collect(),
        pfc: Pfc {
            frames: pfc_frames,
            pause_8023x_frames: pause_frames,
            senders: senders.into_values().collect(),
            pause_senders: pause.into_values().collect(),
            storms: storms.into_iter().collect(),
            link_speed_bps: reports.first().map_or(0, |(_, r)| r.pfc.link_speed_bps),
        },
        visibility: Vec::new(),
        nic: None,
        rtt_ns: match rtt_reports.as_slice() {
            [one] => *one,
            _ => RttSummary::default(),
        },
        pairs: pairs.into_values().collect(),
        cnp_pacing: pacing.into_values().collect(),
        audit,
        congestion_tree: CongestionTrees {
            trees: trees.into_iter().map(|(_, t)| t).collect(),
            deadlocks,
            unresolved: unresolved.into_iter().collect(),
        },
        incast: Incast {
            window_ns: reports.first().map_or(0, |(_, r)| r.incast.window_ns),
            min_senders: reports.first().map_or(0, |(_, r)| r.incast.min_senders),
            episodes,
        },
        ecmp: Ecmp::default(),
    };
    // Pause intervals joined on time: a sender seen at several vantage points was paused over
    // the union of what each saw; pause time, storms, trees and deadlocks follow from it.
    let complete = report.pfc.senders.iter().all(|s| s.pause.intervals_complete)
        && report.pfc.pause_senders.iter().all(|s| s.pause.intervals_complete);
    let pfc_seen = report.pfc.frames + report.pfc.pause_8023x_frames > 0;
    if complete && pfc_seen {
        fabric_from_intervals(&mut report, opts);
    }
    let flows_multi = report.flows.iter().filter(|f| f.labels.len() > 1).count() as u64;
    report.ecmp.observed = observed(&by_label, flows_multi);
    report.flows.sort_by_key(super::flow_sort_key);
    report.visibility = super::visibility::report_notes(&report);
    report.visibility.extend(carried);
    if pfc_seen && !complete {
        report.visibility.push(Note {
            code: "congestion_tree_not_merged".into(),
            message: "some reports do not list all their pause intervals (older reports, or more than 10000 per \
                      sender): congestion trees, deadlocks and storms are those of each report, and the pause time \
                      of a sender seen at several vantage points is the largest of them"
                .into(),
        });
    }
    if reports.len() > 1 && !report.incast.episodes.is_empty() {
        report.visibility.push(Note {
            code: "incast_not_merged".into(),
            message: "incast episodes are those of each report, not recomputed over the union: the reports do not \
                      carry per-packet times"
                .into(),
        });
    }
    if rtt_reports.len() > 1 || rtt_lost {
        report.visibility.push(Note {
            code: "rtt_not_merged".into(),
            message: "RTT percentiles of several reports cannot be combined without their samples: the merged \
                      report has RTT only for flows and totals seen in a single report"
                .into(),
        });
    }
    Ok(report)
}

fn add_psn(m: &mut Flow, f: &Flow) {
    let (a, b) = (&mut m.psn, &f.psn);
    a.requests += b.requests;
    a.out_of_sequence += b.out_of_sequence;
    a.psn_skipped += b.psn_skipped;
    a.duplicates += b.duplicates;
    a.response_out_of_sequence += b.response_out_of_sequence;
    let (a, b) = (&mut m.naks, &f.naks);
    a.acks += b.acks;
    a.psn_sequence_error += b.psn_sequence_error;
    a.rnr += b.rnr;
    a.invalid_request += b.invalid_request;
    a.remote_access += b.remote_access;
    a.remote_operational += b.remote_operational;
    a.invalid_rd_request += b.invalid_rd_request;
    a.reserved += b.reserved;
}

fn observed(by_label: &BTreeMap<String, LabelShare>, multi: u64) -> Option<EcmpObserved> {
    if by_label.len() < 2 {
        return None;
    }
    let bytes: Vec<u64> = by_label.values().map(|s| s.bytes).collect();
    Some(EcmpObserved {
        by_label: by_label.clone(),
        imbalance: crate::analyses::ecmp::imbalance(&bytes),
        idle: by_label.iter().filter(|(_, s)| s.bytes == 0).map(|(l, _)| l.clone()).collect(),
        multi_label_flows: multi,
    })
}

const ZERO: PauseCounts = PauseCounts { frames: 0, xoff: 0, xon: 0, quanta: 0, first_ns: 0, last_ns: 0 };

/// Notes recomputed over the merged report rather than carried over.
const RECOMPUTED: &[&str] = &["no_roce", "no_pfc", "one_direction", "malformed", "partial"];
