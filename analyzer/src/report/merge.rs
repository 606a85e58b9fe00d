//! `merge`: one fabric report from the reports of several hosts or mirror ports. Flows are
//! summed per key with their labels kept (a flow seen at two vantage points counts at both:
//! the labels say so), PFC senders summed per sender and priority, capture totals summed.
//! Visibility notes that depend on the whole are recomputed over the union; the others are
//! carried over with the report they came from. NIC counters are per host and not merged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    Capture, CnpPacing, Ecn, Finding, Flow, Note, Pair, PauseCounts, PauseSender, Pfc, PfcSender, Report, RttSummary,
    SCHEMA, SourceJson, Tool,
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
pub fn merge(reports: Vec<(PathBuf, Report)>) -> Result<Report, MergeError> {
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
            senders
                .entry((s.mac.clone(), s.priority))
                .or_insert_with(|| PfcSender { counts: ZERO, ..s.clone() })
                .counts
                .add(&s.counts);
        }
        for s in &r.pfc.pause_senders {
            pause
                .entry(s.mac.clone())
                .or_insert_with(|| PauseSender { counts: ZERO, ..s.clone() })
                .counts
                .add(&s.counts);
        }
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
    };
    report.flows.sort_by_key(super::flow_sort_key);
    report.visibility = super::visibility::report_notes(&report);
    report.visibility.extend(carried);
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

const ZERO: PauseCounts = PauseCounts { frames: 0, xoff: 0, xon: 0, quanta: 0, first_ns: 0, last_ns: 0 };

/// Notes recomputed over the merged report rather than carried over.
const RECOMPUTED: &[&str] = &["no_roce", "no_pfc", "one_direction", "malformed", "partial"];
