//! `merge`: one fabric report from the reports of several hosts or mirror ports. Flows are
//! summed per key with their labels kept (a flow seen at two vantage points counts at both:
//! the labels say so; a flow of reports that follow each other in time has its PSN counters
//! stitched across each cut, `psn_stitch`), PFC senders summed per sender and priority with their pause intervals
//! joined on time (pause time, storms, congestion trees and deadlocks are recomputed from
//! them), the ECMP section recomputed with the analyses' own code (shares per label, the
//! prediction with the reports' tiers, source-port spread and findings), capture totals summed,
//! incast episodes joined per destination in time (`incast_merge`), DCQCN per flow and host
//! (`dcqcn_merge`). The RTT percentiles of a flow seen in several reports come from the samples
//! reports made with `--edges` carry (`rtt_merge`); without them the report says so.
//! Visibility notes that depend on the whole are recomputed over the union; the others are
//! carried over with the report they came from. NIC counters are per host and not merged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::collections::BTreeSet;

use analyzer_common::flow::FlowKey;
use analyzer_common::psn::{aeth, count};

use crate::analyses::ecmp::{self, Tier};
use crate::analyses::pause::{ALL_PRIORITIES, Pause, Timer};
use crate::analyses::topology::{Topology, parse_mac};
use crate::analyses::tree::{self, FlowSpan};
use crate::model::*;
use crate::report::assemble::{fabric, visibility};
use crate::report::validate;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{path}: cannot read")]
    Read { path: PathBuf, source: crate::capture::bounded::BoundedError },
    #[error("{path}: not a roce-analyzer report")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{path}: report schema {found:?}, this roce-analyzer merges {SCHEMA:?} only")]
    Schema { path: PathBuf, found: String },
    #[error("{path}: {invalid}")]
    Invalid { path: PathBuf, invalid: super::validate::Invalid },
    #[error("{path}: field {field}: the sum over the reports does not fit 64 bits")]
    Overflow { path: PathBuf, field: String },
    #[error(transparent)]
    Export(#[from] super::export::read::ExportReadError),
    #[error("nothing to merge")]
    Empty,
    #[error("{second}: the same export as {first} ({what}): a copy given twice would be counted twice")]
    Twice { first: PathBuf, second: PathBuf, what: String },
}

/// A sum that does not fit 64 bits: the field's name.
#[derive(Debug)]
struct Overflow(String);

/// `$into += $v`, or the absorb fails naming `$field`.
macro_rules! sum {
    ($into:expr, $v:expr, $field:expr) => {
        $into = $into.checked_add($v).ok_or_else(|| Overflow($field.to_string()))?
    };
}

/// Reads a report, refusing other schema versions before anything else is parsed, and any
/// report that breaks the schema's rules or repeats a key ([`validate`]).
pub fn read(path: &Path, max: u64) -> Result<Report, MergeError> {
    let bytes = crate::capture::bounded::read(path, max, "a report")
        .map_err(|source| MergeError::Read { path: path.into(), source })?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| MergeError::Parse { path: path.into(), source })?;
    let found = v.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
    if found != SCHEMA {
        return Err(MergeError::Schema { path: path.into(), found: found.into() });
    }
    let invalid = |invalid| MergeError::Invalid { path: path.into(), invalid };
    if let Some(i) = validate::duplicate_key(&bytes).or_else(|| validate::schema_violation(&v)) {
        return Err(invalid(i));
    }
    let report: Report = serde_json::from_value(v).map_err(|source| MergeError::Parse { path: path.into(), source })?;
    match validate::semantic_violation(&report) {
        Some(i) => Err(invalid(i)),
        None => Ok(report),
    }
}

/// Reads what `merge` was given at `path`: a report (or checkpoint), or export lines (a
/// directory of export files or one file), which give one report per host.
pub fn read_any(path: &Path, max: u64) -> Result<Vec<(PathBuf, Report)>, MergeError> {
    if super::export::read::is_export(path) {
        return Ok(super::export::read::read(path, max)?);
    }
    Ok(vec![(path.to_path_buf(), read(path, max)?)])
}

/// What the fabric analyses of a merged report need beyond the reports.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    pub topology: Option<Topology>,
    pub pfc_storm_ns: u64,
    pub deadlock_min_ns: u64,
}

/// Merges `reports` (each with the file it came from) into one report.
pub fn merge(reports: Vec<(PathBuf, Report)>, opts: &MergeOptions) -> Result<Report, MergeError> {
    let mut seen: BTreeMap<&str, &PathBuf> = BTreeMap::new();
    for (path, r) in &reports {
        if let Some(id) = &r.export_identity
            && let Some(first) = seen.insert(id, path)
        {
            return Err(MergeError::Twice { first: first.clone(), second: path.clone(), what: id.clone() });
        }
    }
    let mut m = Merger::new(&reports);
    for (path, r) in &reports {
        m.absorb(path, r)?;
    }
    let mut report = m.finish(opts)?;
    report.trajectory = trajectory(&reports);
    report.diagnosis = super::diagnose::diagnose(&report);
    Ok(report)
}

/// The hops between collectors from their exports' trajectory samples, joined on the frames
/// all of them sampled (at different rates: those the sparsest rate chose, a subset of the
/// others').
fn trajectory(reports: &[(PathBuf, Report)]) -> Option<Trajectory> {
    let carried: Vec<&TrajectorySamples> = reports.iter().filter_map(|(_, r)| r.samples.as_ref()).collect();
    let one_in = carried.iter().map(|s| s.one_in).max()?;
    let threshold = u64::MAX / one_in.max(1);
    let points: Vec<crate::analyses::trajectory::Point> = carried
        .iter()
        .map(|s| (s.name.clone(), s.samples.iter().filter(|x| x.id < threshold).copied().collect()))
        .collect();
    let summary = |(name, s): &crate::analyses::trajectory::Point| TrajectoryPoint {
        name: name.clone(),
        samples: s.len() as u64,
        first_ns: s.iter().map(|x| x.ts_ns).min().unwrap_or(0),
        last_ns: s.iter().map(|x| x.ts_ns).max().unwrap_or(0),
    };
    Some(Trajectory {
        one_in,
        points: points.iter().map(summary).collect(),
        hops: crate::analyses::trajectory::hops(&points),
    })
}

/// Labels two reports use over the same time (two hosts' eth0): they name different points
/// and are qualified with the file name. Reports of one label at disjoint times (a capture cut
/// in time, an agent's successive exports) are the same point, later.
fn shared_labels(reports: &[(PathBuf, Report)]) -> BTreeSet<String> {
    let mut spans: BTreeMap<&String, Vec<(u64, u64)>> = BTreeMap::new();
    for (_, r) in reports {
        let labels: BTreeSet<&String> = r.capture.sources.iter().map(|s| &s.label).collect();
        for l in labels {
            spans.entry(l).or_default().push((r.capture.start_ns, r.capture.end_ns));
        }
    }
    let overlap = |mut v: Vec<(u64, u64)>| {
        v.sort_unstable();
        v.windows(2).any(|w| w[1].0 < w[0].1)
    };
    spans.into_iter().filter(|(_, v)| overlap(v.clone())).map(|(l, _)| l.clone()).collect()
}

/// Sums `from` into `into` per key (`field` names the map).
fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>, field: &str) -> Result<(), Overflow> {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_default();
        sum!(*e, *v, format!("{field}.{k}"));
    }
    Ok(())
}

/// The same for a flow's counts by name.
fn add_count_map(into: &mut CountMap, from: &CountMap, field: &str) -> Result<(), Overflow> {
    for (k, v) in from.iter() {
        into.checked_add(k, *v).ok_or_else(|| Overflow(format!("{field}.{k}")))?;
    }
    Ok(())
}

fn span(first: &mut u64, last: &mut u64, f: u64, l: u64) {
    *first = (*first).min(f);
    *last = (*last).max(l);
}

use super::rtt_stitch::FlowId;

/// What stitching the flows seen in several reports found.
#[derive(Debug, Default)]
struct Stitched {
    /// Flows seen by reports that overlap in time (several points).
    shared: u64,
    /// Flows in series whose PSN counters could not be stitched.
    unstitched: u64,
    /// Some flow's RTT percentiles could not be merged.
    rtt_lost: bool,
    /// Flows whose late arrivals at a cut the reports cannot tell (`lb_stitch`).
    irregular: u64,
    /// Flows whose late arrivals a cut may change, to replay (`lb_stitch`) …
    late_pending: Vec<FlowId>,
    /// … and what one run counts otherwise than their parts.
    late: BTreeMap<FlowId, super::lb_stitch::Late>,
    /// Flows with PSNs skipped before or at a cut that no ACK there showed delivered.
    loss_open: u64,
    /// Requests answered across cuts (`rtt_stitch`).
    rtt: super::rtt_stitch::Stitched,
    /// PSNs missed by the capture that one run counts otherwise than the parts (`loss_stitch`):
    /// skipped before a cut and shown delivered by ACKs after it, or a part's own skips that
    /// one run saw before the cut.
    loss_told: super::loss_stitch::Missed,
    /// Requests after a cut one run counts as new payload otherwise than their report.
    payload: super::steady_stitch::Fixes,
}

impl Stitched {
    /// PSNs of `flow` one run counts missed by the capture otherwise than its parts.
    fn tell_loss(&mut self, flow: &mut Flow, m: super::loss_stitch::Missed) {
        let n = &mut flow.psn.capture_missed;
        *n = n.saturating_add(m.add).saturating_sub(m.sub);
        self.loss_told.add = self.loss_told.add.saturating_add(m.add);
        self.loss_told.sub = self.loss_told.sub.saturating_add(m.sub);
    }
}

/// A merge in progress: [`Merger::absorb`] takes one report at a time, [`Merger::finish`]
/// recomputes what depends on the whole and returns the merged report.
#[derive(Debug, Default)]
pub struct Merger {
    /// Labels used by more than one report (two hosts' eth0): qualified with the file name.
    shared_labels: BTreeSet<String>,
    reports: usize,
    sources: Vec<SourceJson>,
    capture: Option<Capture>,
    flows: BTreeMap<FlowId, Flow>,
    senders: BTreeMap<(String, u8), PfcSender>,
    pause: BTreeMap<String, PauseSender>,
    pfc_frames: u64,
    pause_frames: u64,
    link_speed_bps: Option<u64>,
    carried: Vec<Note>,
    pairs: BTreeMap<(String, String), Pair>,
    cnp_interval: CnpInterval,
    pacing: BTreeMap<(String, u32), CnpPacing>,
    audit: Vec<Finding>,
    rtt_reports: Vec<RttSummary>,
    /// Requests and ACKs that cuts in time separated.
    rtt_cuts: super::rtt_merge::Cuts,
    /// Each flow's sight in each report, for the PSN state across cuts in time (`psn_stitch`).
    parts: BTreeMap<FlowId, Vec<super::psn_stitch::Part>>,
    /// Reports with a vantage section (frames matched within them), and every report's sight
    /// of the matching (`vantage_merge`), in the order absorbed.
    vantage_reports: u64,
    vantages: Vec<super::vantage_merge::Part>,
    storms: BTreeSet<StormJson>,
    trees: Vec<Tree>,
    deadlocks: Vec<Deadlock>,
    deadlocks_omitted: u64,
    unresolved: BTreeSet<String>,
    /// Each report's incast section.
    incasts: Vec<Incast>,
    /// Each report's span (start, end), in the order absorbed (that of `incasts`).
    spans: Vec<(u64, u64)>,
    /// Each report's PFC edge (`--edges`), in the order absorbed.
    pfc_edges: Vec<Option<PfcEdge>>,
    /// Each report's DCQCN section, with its span.
    dcqcn: Vec<super::dcqcn_stitch::Part>,
    /// Each report's messages section, and the report's index.
    messages: Vec<(u64, u64, Messages)>,
    messages_at: Vec<usize>,
    /// Each report's marking section, with its span.
    markings: Vec<super::marking_merge::Part>,
    /// Each report's CE/CNP pairs, pacing and interval, with its span.
    ecn: Vec<super::ecn_merge::Part>,
    /// `--cnp-timeout` of the reports, when their pairs' edges tell it (`ecn_merge::cnp_timeout`).
    cnp_timeout: Option<u64>,
    /// Per PFC sender and priority, each report's view of its onsets, with the report's start.
    leads: BTreeMap<(String, u8), Vec<super::ecn_merge::LeadPart>>,
    /// Each report's load-balancing section.
    load_balancing: Vec<LoadBalancing>,
    /// Per sender and priority (`ALL_PRIORITIES`: 802.3x), each report's last interval and
    /// first frame (`pause_merge`).
    pause_tails: BTreeMap<(String, u8), Vec<super::pause_merge::Tail>>,
    /// Per priority: data frames and pause frames (the reports' `pfc.rates`).
    rates: BTreeMap<u8, (u64, u64)>,
    by_label: BTreeMap<String, LabelShare>,
    /// The tiers of the first report with an ECMP prediction, and whether another differed.
    tiers: Option<Vec<Tier>>,
    tiers_differ: bool,
}

impl Merger {
    /// A merger for `reports` (it looks at their labels and spans only; absorb each
    /// afterwards).
    pub fn new(reports: &[(PathBuf, Report)]) -> Self {
        Merger {
            shared_labels: shared_labels(reports),
            rtt_cuts: super::rtt_merge::Cuts::of(reports),
            ..Default::default()
        }
    }

    fn qualify(&self, path: &Path, label: &str) -> String {
        if self.shared_labels.contains(label) {
            format!(
                "{}:{label}",
                path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into())
            )
        } else {
            label.to_string()
        }
    }

    /// Adds one report, read from `path`; refuses it when a sum would overflow (the merger is
    /// then partly updated: drop it).
    pub fn absorb(&mut self, path: &Path, r: &Report) -> Result<(), MergeError> {
        self.absorb_sums(path, r).map_err(|Overflow(field)| MergeError::Overflow { path: path.into(), field })
    }

    fn absorb_sums(&mut self, path: &Path, r: &Report) -> Result<(), Overflow> {
        self.reports += 1;
        for s in &r.capture.sources {
            let label = self.qualify(path, &s.label);
            if !self.sources.iter().any(|x| x.kind == s.kind && x.name == s.name && x.label == label) {
                self.sources.push(SourceJson { kind: s.kind.clone(), name: s.name.clone(), label, xdp: s.xdp.clone() });
            }
        }
        self.absorb_capture(&r.capture)?;
        self.dcqcn.push(super::dcqcn_stitch::Part::of(r));
        self.messages.extend(r.messages.iter().map(|m| (r.capture.start_ns, r.capture.end_ns, m.clone())));
        self.messages_at.extend(r.messages.iter().map(|_| self.reports - 1));
        let (start_ns, end_ns, edges) = (r.capture.start_ns, r.capture.end_ns, has_edges(r));
        self.spans.push((start_ns, end_ns));
        self.markings.push(super::marking_merge::Part { start_ns, end_ns, edges, marking: r.marking.clone() });
        self.load_balancing.extend(r.load_balancing.iter().cloned());
        self.vantage_reports += r.vantage.is_some() as u64;
        let (span, frames) = ((start_ns, end_ns), r.capture.frames);
        self.vantages.push(super::vantage_merge::Part { span, frames, vantage: r.vantage.clone() });
        for f in &r.flows {
            let labels: Vec<String> = f.labels.iter().map(|l| self.qualify(path, l)).collect();
            self.absorb_flow(f, labels, (r.capture.start_ns, r.capture.end_ns))?;
        }
        self.absorb_pfc(&r.pfc, (r.capture.start_ns, r.capture.end_ns))?;
        self.pfc_edges.push(r.pfc.edge.clone());
        self.absorb_ecmp(path, r)?;
        self.trees.extend(r.congestion_tree.trees.iter().cloned());
        self.deadlocks.extend(r.congestion_tree.deadlocks.iter().cloned());
        self.deadlocks_omitted = self.deadlocks_omitted.saturating_add(r.congestion_tree.deadlocks_omitted);
        self.unresolved.extend(r.congestion_tree.unresolved.iter().cloned());
        self.incasts.push(r.incast.clone());
        self.absorb_ecn(r, edges)?;
        for f in &r.audit {
            self.audit.push(Finding { message: format!("{}: {}", path.display(), f.message), ..f.clone() });
        }
        self.rtt_reports.push(r.rtt_ns.clone());
        for n in r.visibility.iter().filter(|n| !visibility::told_by_merge(n.code)) {
            self.carried.push(Note::new(n.code, format!("{}: {}", path.display(), n.message)));
        }
        Ok(())
    }

    /// The CE/CNP pairs, pacing and interval: added (with overflow checked), and kept with the
    /// report's span for [`super::ecn_merge`] to replay.
    fn absorb_ecn(&mut self, r: &Report, edges: bool) -> Result<(), Overflow> {
        for p in &r.pairs {
            let m = self.pairs.entry((p.a.clone(), p.b.clone())).or_insert_with(|| Pair {
                data_packets: 0,
                ce: 0,
                cnp_back: 0,
                ce_unanswered: 0,
                ce_covered: 0,
                ce_pending: 0,
                edge: None,
                ..p.clone()
            });
            sum!(m.data_packets, p.data_packets, "pairs.data_packets");
            sum!(m.ce, p.ce, "pairs.ce");
            sum!(m.cnp_back, p.cnp_back, "pairs.cnp_back");
            sum!(m.ce_unanswered, p.ce_unanswered, "pairs.ce_unanswered");
            sum!(m.ce_covered, p.ce_covered, "pairs.ce_covered");
            sum!(m.ce_pending, p.ce_pending, "pairs.ce_pending");
        }
        // Each report split its marks with its own interval; the merged one names the largest.
        if r.cnp_interval.ns > self.cnp_interval.ns {
            self.cnp_interval = r.cnp_interval.clone();
        }
        for c in &r.cnp_pacing {
            let slot = self.pacing.entry((c.dst.clone(), c.dst_qp)).or_insert_with(|| c.clone());
            if c.cnps > slot.cnps {
                *slot = c.clone();
            }
            slot.edge = None;
        }
        self.ecn.push(super::ecn_merge::Part {
            start_ns: r.capture.start_ns,
            end_ns: r.capture.end_ns,
            edges,
            pairs: r.pairs.clone(),
            pacing: r.cnp_pacing.clone(),
            interval: r.cnp_interval.clone(),
        });
        Ok(())
    }

    /// The ECN sections: replayed in time when the reports allow it, else the sums (and
    /// whether the merge must say so).
    fn ecn_sections(&mut self) -> (Vec<Pair>, Vec<CnpPacing>, CnpInterval, bool) {
        let timed = self.pairs.values().any(|p| p.ce + p.cnp_back > 0) || !self.pacing.is_empty();
        self.cnp_timeout = super::ecn_merge::cnp_timeout(&self.ecn);
        match super::ecn_merge::merge(std::mem::take(&mut self.ecn)) {
            Some(m) => (pairs_in_order(m.pairs), m.pacing, m.interval, false),
            None => (
                pairs_in_order(std::mem::take(&mut self.pairs)),
                std::mem::take(&mut self.pacing).into_values().collect(),
                self.cnp_interval.clone(),
                timed && self.reports > 1,
            ),
        }
    }

    fn absorb_capture(&mut self, c: &Capture) -> Result<(), Overflow> {
        let m = self.capture.get_or_insert_with(|| Capture {
            filter: None,
            flows_folded: None,
            sources: Vec::new(),
            start_ns: u64::MAX,
            end_ns: 0,
            partial: false,
            frames: 0,
            classes: BTreeMap::new(),
            dropped: BTreeMap::new(),
            loss: None,
            noted: Noted::default(),
        });
        m.noted.add(&c.noted);
        if c.frames > 0 {
            span(&mut m.start_ns, &mut m.end_ns, c.start_ns, c.end_ns);
        }
        m.partial |= c.partial;
        // Reports filtered differently: the expressions joined with `;`, the frames summed.
        if let Some(f) = &c.filter {
            let into = m.filter.get_or_insert_with(|| CaptureFilter { expr: String::new(), frames_out: 0 });
            if !into.expr.split("; ").any(|e| e == f.expr) {
                if !into.expr.is_empty() {
                    into.expr.push_str("; ");
                }
                into.expr.push_str(&f.expr);
            }
            sum!(into.frames_out, f.frames_out, "capture.filter.frames_out");
        }
        if let Some(f) = &c.flows_folded {
            let into = m.flows_folded.get_or_insert_with(FoldedFlows::default);
            sum!(into.flows, f.flows, "capture.flows_folded.flows");
            sum!(into.packets, f.packets, "capture.flows_folded.packets");
            sum!(into.bytes, f.bytes, "capture.flows_folded.bytes");
        }
        sum!(m.frames, c.frames, "capture.frames");
        if let Some(l) = c.loss {
            let into = m.loss.get_or_insert(CaptureLoss { frames_missed: 0, ratio: 0.0 });
            sum!(into.frames_missed, l.frames_missed, "capture.loss.frames_missed");
        }
        add_counts(&mut m.classes, &c.classes, "capture.classes")?;
        add_counts(&mut m.dropped, &c.dropped, "capture.dropped")
    }

    /// Adds a report's flow; `capture` is the report's capture span.
    fn absorb_flow(&mut self, f: &Flow, labels: Vec<String>, capture: (u64, u64)) -> Result<(), Overflow> {
        let key = super::rtt_stitch::id_of(f);
        let part = super::psn_stitch::Part {
            start_ns: capture.0,
            end_ns: capture.1,
            edge: f.edge.clone(),
            rtt: f.rtt_ns,
            open_skips: f.psn.sequence[count::PSN_SKIPPED].saturating_sub(f.psn.capture_missed),
            report: self.reports - 1,
            repeats: f.psn.sequence[count::DUPLICATES],
            out_of_sequence: f.psn.sequence[count::OUT_OF_SEQUENCE],
            naks: f.naks.total().saturating_sub(f.naks[aeth::RNR]),
            skipped: f.psn.sequence[count::PSN_SKIPPED],
        };
        self.parts.entry(key.clone()).or_default().push(part);
        let Some(m) = self.flows.get_mut(&key) else {
            self.flows.insert(key, Flow { labels, ..f.clone() });
            return Ok(());
        };
        sum!(m.packets, f.packets, "flows.packets");
        sum!(m.bytes, f.bytes, "flows.bytes");
        span(&mut m.first_ns, &mut m.last_ns, f.first_ns, f.last_ns);
        add_count_map(&mut m.opcodes, &f.opcodes, "flows.opcodes")?;
        add_count_map(&mut m.dscp, &f.dscp, "flows.dscp")?;
        add_count_map(&mut m.pcp, &f.pcp, "flows.pcp")?;
        sum!(m.ecn.not_ect, f.ecn.not_ect, "flows.ecn.not_ect");
        sum!(m.ecn.ect0, f.ecn.ect0, "flows.ecn.ect0");
        sum!(m.ecn.ect1, f.ecn.ect1, "flows.ecn.ect1");
        sum!(m.ecn.ce, f.ecn.ce, "flows.ecn.ce");
        sum!(m.fecn, f.fecn, "flows.fecn");
        sum!(m.becn, f.becn, "flows.becn");
        sum!(m.ack_req, f.ack_req, "flows.ack_req");
        m.psn.checked_add(&f.psn).map_err(|name| Overflow(format!("flows.psn.{name}")))?;
        m.naks.checked_add(&f.naks).map_err(|name| Overflow(format!("flows.naks.{name}")))?;
        // Percentiles of several parts come from their samples, when the parts carry them
        // (`rtt_merge`, at the end).
        m.rtt_ns = None;
        for l in labels {
            if !m.labels.contains(&l) {
                m.labels.push(l);
            }
        }
        Ok(())
    }

    fn absorb_pfc(&mut self, p: &Pfc, (start_ns, end_ns): (u64, u64)) -> Result<(), Overflow> {
        let report = self.reports - 1;
        let tail = |mac: &str, prio: u8, t: &PauseTime| {
            let first_frame_ns = t.first_frame_ns;
            let tail = super::pause_merge::Tail {
                report,
                start_ns,
                end_ns,
                first_frame_ns,
                last: t.intervals.last().copied(),
            };
            ((mac.to_string(), prio), tail)
        };
        sum!(self.pfc_frames, p.frames, "pfc.frames");
        sum!(self.pause_frames, p.pause_8023x_frames, "pfc.pause_8023x_frames");
        self.link_speed_bps.get_or_insert(p.link_speed_bps);
        for s in &p.senders {
            let new = !self.senders.contains_key(&(s.mac.clone(), s.priority));
            let e = self.senders.entry((s.mac.clone(), s.priority)).or_insert_with(|| PfcSender {
                counts: PauseCounts::ZERO,
                pause: PauseTime::default(),
                ..s.clone()
            });
            e.counts.checked_add(&s.counts).map_err(|f| Overflow(format!("pfc.senders.{f}")))?;
            e.pause.join(&s.pause);
            let (k, t) = tail(&s.mac, s.priority, &s.pause);
            self.pause_tails.entry(k).or_default().push(t);
            // A sender several reports saw: its onsets and the marks before them are judged
            // over all at the end (an interval split between two captures is one onset).
            self.leads.entry((s.mac.clone(), s.priority)).or_default().push((start_ns, s.ecn_lead.clone()));
            if !new {
                e.ecn_lead = None;
            }
        }
        for r in &p.rates {
            let e = self.rates.entry(r.priority).or_insert((0, 0));
            (e.0, e.1) = (e.0 + r.data_frames, e.1 + r.pause_frames);
        }
        for s in &p.pause_senders {
            let e = self.pause.entry(s.mac.clone()).or_insert_with(|| PauseSender {
                counts: PauseCounts::ZERO,
                pause: PauseTime::default(),
                ..s.clone()
            });
            e.counts.checked_add(&s.counts).map_err(|f| Overflow(format!("pfc.pause_senders.{f}")))?;
            e.pause.join(&s.pause);
            let (k, t) = tail(&s.mac, ALL_PRIORITIES, &s.pause);
            self.pause_tails.entry(k).or_default().push(t);
        }
        self.storms.extend(p.storms.iter().cloned());
        Ok(())
    }

    /// Each report's bytes and flows per (qualified) label, and the tiers it predicted with.
    fn absorb_ecmp(&mut self, path: &Path, r: &Report) -> Result<(), Overflow> {
        match &r.ecmp.observed {
            Some(o) => {
                for (l, share) in &o.by_label {
                    let e = self.by_label.entry(self.qualify(path, l)).or_insert(LabelShare { bytes: 0, flows: 0 });
                    sum!(e.bytes, share.bytes, "ecmp.observed.by_label.bytes");
                    sum!(e.flows, share.flows, "ecmp.observed.by_label.flows");
                }
            }
            None => {
                let labels: BTreeSet<String> = r.capture.sources.iter().map(|s| self.qualify(path, &s.label)).collect();
                if labels.len() == 1 {
                    let e = self
                        .by_label
                        .entry(labels.into_iter().next().expect("one"))
                        .or_insert(LabelShare { bytes: 0, flows: 0 });
                    for f in &r.flows {
                        sum!(e.bytes, f.bytes, "flows.bytes");
                    }
                    sum!(e.flows, r.flows.len() as u64, "flows");
                }
            }
        }
        if let Some(p) = &r.ecmp.predicted {
            let tiers = ecmp::predicted::tiers_of(p);
            match &self.tiers {
                None => self.tiers = Some(tiers),
                Some(t) => self.tiers_differ |= *t != tiers,
            }
        }
        Ok(())
    }

    /// The RTT over all reports: one report's as it is; several combined from their histograms
    /// (percentiles within the histogram's relative error, not exact; as they are when one
    /// report alone has samples), the others adding their counts, and whether that could be done
    /// (every report with samples carries its histogram).
    fn merged_rtt(reports: &[RttSummary]) -> (RttSummary, bool) {
        match reports {
            [] => (RttSummary::default(), true),
            [one] => (one.clone(), true),
            all if all.iter().all(|r| r.histogram.is_some() || r.percentiles.samples == 0) => {
                // Reports without samples add their counts (requests pending, timeouts) only.
                let with: Vec<&RttSummary> = all.iter().filter(|r| r.percentiles.samples > 0).collect();
                let buckets: Vec<(u32, u64)> = with
                    .iter()
                    .flat_map(|r| r.histogram.iter().flat_map(|h| h.buckets.iter()))
                    .map(|[b, c]| (*b as u32, *c))
                    .collect();
                let min = with.iter().map(|r| r.percentiles.min).min().unwrap_or(0);
                let max = with.iter().map(|r| r.percentiles.max).max().unwrap_or(0);
                let samples = crate::analyses::stats::Samples::from_buckets(&buckets, min, max);
                let percentiles = match with.as_slice() {
                    [] => all[0].percentiles,
                    [one] => one.percentiles,
                    _ => samples.percentiles().unwrap_or_default(),
                };
                let histogram = match with.as_slice() {
                    [] => None,
                    [one] => one.histogram.clone(),
                    _ => Some(RttHistogram {
                        growth: crate::analyses::stats::GROWTH,
                        relative_error: crate::analyses::stats::RELATIVE_ERROR,
                        buckets: samples.buckets().into_iter().map(|(b, c)| [b as u64, c]).collect(),
                    }),
                };
                let sum = |f: &dyn Fn(&RttSummary) -> u64| all.iter().map(f).fold(0u64, u64::saturating_add);
                let merged = RttSummary {
                    percentiles,
                    timeouts: sum(&|r| r.timeouts),
                    pending: sum(&|r| r.pending),
                    ambiguous_acks: sum(&|r| r.ambiguous_acks),
                    unpaired_acks: sum(&|r| r.unpaired_acks),
                    cm_paired: sum(&|r| r.cm_paired),
                    pending_evicted: sum(&|r| r.pending_evicted),
                    timeout_ns: all.iter().map(|r| r.timeout_ns).max().unwrap_or(0),
                    histogram,
                };
                (merged, true)
            }
            _ => (RttSummary::default(), false),
        }
    }

    /// The merged report: pause intervals joined on time (a sender seen at several vantage
    /// points was paused over the union of what each saw; pause time, storms, trees and
    /// deadlocks follow from it), the ECMP section recomputed, the notes of the whole.
    /// The PFC section of the reports folded so far (its rates are added at the end).
    fn pfc_section(&mut self) -> Pfc {
        // Reports in series: a pause one projected past its end ends at a later one's frame.
        if super::rtt_stitch::in_series(&self.rtt_spans()).is_some() {
            let senders = self.senders.iter_mut().map(|(k, s)| (k.clone(), &mut s.pause));
            let pause = self.pause.iter_mut().map(|(m, s)| ((m.clone(), ALL_PRIORITIES), &mut s.pause));
            for (k, p) in senders.chain(pause) {
                super::pause_merge::clip(&mut p.intervals, self.pause_tails.get(&k).map_or(&[], Vec::as_slice));
            }
        }
        Pfc {
            frames: self.pfc_frames,
            pause_8023x_frames: self.pause_frames,
            senders: std::mem::take(&mut self.senders).into_values().collect(),
            pause_senders: std::mem::take(&mut self.pause).into_values().collect(),
            storms: std::mem::take(&mut self.storms).into_iter().collect(),
            link_speed_bps: self.link_speed_bps.unwrap_or(0),
            rates: Vec::new(),
            edge: None,
        }
    }

    /// Flows several reports saw: at once (vantage points: their packets summed, frames cannot
    /// be matched) or one after another (a capture cut in time: their PSN counters stitched
    /// across each cut, [`super::psn_stitch`]); their RTT from the parts' samples
    /// ([`super::rtt_merge`]). Returns how many flows were seen at once, how many in series
    /// could not be stitched, and whether the RTT percentiles of some flow could not be merged.
    fn stitch_flows(&mut self) -> Stitched {
        let spans = self.rtt_spans();
        // Each flow's parts in time order, whatever order the reports were given in: the walks
        // across cuts start from a flow's first part (`loss_stitch`, `lb_stitch`).
        for ps in self.parts.values_mut() {
            ps.sort_by_key(|p| (p.start_ns, p.end_ns));
        }
        let pairing = super::rtt_stitch::Pairing::of(&self.parts);
        let rtt = super::rtt_stitch::stitch(&pairing, &spans);
        let loss = super::loss_stitch::stitch(&pairing, &spans);
        let mut payload = payload_fixes(&loss, &self.spans);
        payload.first_data = first_data(&self.parts);
        let back = back_notes(&self.parts);
        let mut st = Stitched { rtt, payload, ..Default::default() };
        for (key, parts) in self.parts.iter_mut() {
            let fix = st.rtt.flows.get(key);
            let told = loss.get(key).map(|t| t.as_ref().map(|w| w.missed));
            let Some(flow) = self.flows.get_mut(key).filter(|_| parts.len() > 1 || fix.is_some() || told.is_some())
            else {
                continue;
            };
            match super::rtt_merge::flow_rtt(parts, fix) {
                Some(rtt) => flow.rtt_ns = rtt,
                None => st.rtt_lost = true,
            }
            if parts.len() == 1 {
                // A flow whose gaps at the end of its part the ACKs after it tell.
                match told {
                    Some(Some(m)) => st.tell_loss(flow, m),
                    Some(None) => st.loss_open += 1,
                    None => {}
                }
                continue;
            }
            if !super::psn_stitch::in_series(parts) {
                st.shared += 1;
                continue;
            }
            let back_at = |report: usize, psn: u32| -> super::psn_stitch::Back {
                back.get(&(report, key.0, key.1.clone(), key.2.clone(), psn)).cloned().unwrap_or_default()
            };
            let c = flow_key(flow).and_then(|k| super::psn_stitch::stitch(&k, parts, &back_at));
            // A request after a cut that may have arrived late into a gap one run had open there
            // (or a flow the reports cannot tell).
            match &c {
                Some(c) if c.late_told => {}
                Some(_) => st.late_pending.push(key.clone()),
                None => st.irregular += 1,
            }
            // PSNs skipped before a cut (or at it) that an ACK after it may show delivered, and
            // the ACKs after it could not tell apart (`loss_stitch`).
            let skipped_at_cut =
                c.as_ref().is_some_and(|c| c.add.count[count::PSN_SKIPPED] > c.sub.count[count::PSN_SKIPPED]);
            // A flow whose PSN state did not cross the cut: its later parts told their skips apart
            // from their own start, not from where the part before left it.
            let untold = told.is_some_and(|t| t.is_none())
                || (skipped_at_cut && told.is_none())
                || (c.is_none() && parts.iter().any(|p| p.skipped > 0))
                || parts[..parts.len() - 1].iter().any(|p| p.edge.is_none() && p.open_skips > 0);
            st.loss_open += u64::from(untold);
            if let Some(Some(m)) = told {
                st.tell_loss(flow, m);
            }
            st.unstitched += u64::from(!c.is_some_and(|c| apply(flow, &c)));
        }
        // (The pairing again: the loop above held the parts mutably.)
        self.replay_late(&mut st);
        st
    }

    /// Late arrivals a cut may change (`late_pending`), and those of flows whose first part did
    /// not pair the responses one run pairs from their ACK flow's first: replayed over the
    /// parts (`lb_stitch`).
    fn replay_late(&self, st: &mut Stitched) {
        let pairing = super::rtt_stitch::Pairing::of(&self.parts);
        let first =
            |id: &FlowId| self.parts.get(id).and_then(|ps| ps.first()).is_some_and(|p| !super::gap_replay::names(p));
        for id in pairing.first_acks().filter(|id| first(id)) {
            if !st.late_pending.contains(id) {
                st.late_pending.push(id.clone());
            }
        }
        for id in std::mem::take(&mut st.late_pending) {
            let (l, payload) = match super::lb_stitch::of(&pairing, &id) {
                Ok(r) => r,
                Err(_) => {
                    st.irregular += 1;
                    continue;
                }
            };
            // The payload one run counts otherwise in reports the capture-loss walk did not
            // tell (a first part replayed from nothing).
            if let Some(k) = flow_ref_key(&super::rtt_stitch::ref_of(&id)) {
                let o = crate::model::addr::flow_order(&k);
                for (r, x) in payload {
                    let Some((start, _)) = self.spans.get(r) else { continue };
                    if st.payload.told.insert((*start, o)) {
                        st.payload.payload.entry((*start, o)).or_default().push(x);
                    }
                }
            }
            if !l.add.is_empty() || !l.sub.is_empty() {
                st.late.insert(id, l);
            }
        }
    }

    /// `rtt_ns` over every report: its counts added, its percentiles from every sample when
    /// the reports carry them (`--edges`), else from their histograms; and whether some RTT
    /// (of the whole, or of a flow: `rtt_lost`) could not be merged.
    fn rtt_section(&self, st: &Stitched) -> (RttSummary, bool) {
        let (mut rtt, totals_merged) = Self::merged_rtt(&self.rtt_reports);
        if totals_merged
            && let Some(mut all) = super::rtt_merge::overall(
                self.parts.iter().flat_map(|(k, ps)| ps.iter().map(move |p| (p, st.rtt.flows.get(k)))),
            )
        {
            for fix in st.rtt.flows.values() {
                fix.extra.iter().for_each(|v| all.push(*v));
            }
            super::rtt_merge::set_percentiles(&mut rtt, &all);
        }
        super::rtt_merge::apply_totals(&mut rtt, &st.rtt);
        (rtt, !totals_merged || st.rtt_lost)
    }

    /// The messages of reports in series joined across their cuts ([`super::messages_stitch`]).
    fn messages_whole(&self, st: &Stitched) -> Option<super::messages_stitch::Whole> {
        let pairing = super::rtt_stitch::Pairing::of(&self.parts);
        let mut reports: Vec<_> =
            self.spans.iter().zip(&self.markings).map(|((s, e), m)| (*s, *e, None, m.edges)).collect();
        for ((_, _, m), at) in self.messages.iter().zip(&self.messages_at) {
            reports[*at].2 = Some(m);
        }
        super::messages_stitch::stitch(&reports, &pairing, &st.rtt)
    }

    /// The reports' congestion trees, deadlocks and unresolved senders, listed together (built
    /// again from the joined pause intervals when all reports list them).
    fn congestion_trees(&mut self) -> CongestionTrees {
        CongestionTrees {
            trees: std::mem::take(&mut self.trees),
            deadlocks: std::mem::take(&mut self.deadlocks),
            deadlocks_omitted: self.deadlocks_omitted,
            unresolved: std::mem::take(&mut self.unresolved).into_iter().collect(),
        }
    }

    /// The merged messages section and what stayed each report's, with the messages joined
    /// across cuts for the tail (none: not joined).
    #[allow(clippy::type_complexity)]
    fn messages_merged(
        &self,
        st: &Stitched,
    ) -> (Option<(Messages, Option<super::messages_merge::Partly>)>, Option<super::tail_merge::Joined>) {
        let mut whole = self.messages_whole(st);
        let joined = whole.as_mut().map(super::tail_merge::Joined::take);
        // Requests sent again after a cut: one run's payload where the replay told the flow.
        if let Some(w) = whole.as_mut() {
            w.resent.retain(|(j, o)| !st.payload.told.contains(&(self.spans[*j].0, *o)));
        }
        (super::messages_merge::merge(&self.messages, whole, &st.payload), joined)
    }

    fn rtt_spans(&self) -> Vec<super::rtt_stitch::Span> {
        rtt_spans(&self.spans, &self.rtt_reports)
    }

    pub fn finish(mut self, opts: &MergeOptions) -> Result<Report, MergeError> {
        let st = self.stitch_flows();
        let (single_rtt, rtt_not_merged) = self.rtt_section(&st);
        let pfc = self.pfc_section();
        let (pairs, cnp_pacing, cnp_interval, ecn_unstitched) = self.ecn_sections();
        let (merged, joined) = self.messages_merged(&st);
        let congestion_tree = self.congestion_trees();
        let Some(capture) = self.capture else { return Err(MergeError::Empty) };
        let capture = settle_capture(with_loss(capture, st.loss_told), self.sources);
        let incast = super::incast_merge::merged(&self.incasts, &self.spans, pfc.link_speed_bps);
        let (marking, marking_exact) = super::marking_merge::merge(&self.markings);
        let dcqcn = super::dcqcn_stitch::merge(&self.dcqcn, &super::dcqcn_stitch::first_frames(self.flows.values()));
        let mut unmerged = Unmerged {
            shared_flows: st.shared,
            psn_unstitched: st.unstitched,
            loss_open: st.loss_open,
            vantage_reports: self.vantage_reports,
            tiers_differ: self.tiers_differ,
            vantage: vantage_merged(&self.vantages, &self.spans, &self.rtt_reports),
            messages_partly: merged.as_ref().and_then(|(_, partly)| *partly),
            marking_partly: !marking_exact,
            ecn_unstitched,
            incast_joined: incast.joined,
            incast_cut: incast.cut,
            incast_why: incast.why,
            dcqcn: dcqcn.notes(self.reports),
            rtt_cuts: self.rtt_cuts.less(&st.rtt),
        };
        let mut report = Report {
            schema: SCHEMA.into(),
            tool: Tool { name: "roce-analyzer".into(), version: env!("CARGO_PKG_VERSION").into() },
            kind: "merged".into(),
            diagnosis: Vec::new(),
            capture,
            // Edges are valid only in their report: merged reports carry none (merge every part at once).
            flows: self.flows.into_values().map(|f| Flow { edge: None, ..f }).collect(),
            pfc,
            visibility: Vec::new(),
            nic: None,
            rtt_ns: single_rtt,
            pairs,
            cnp_interval,
            cnp_pacing,
            audit: self.audit,
            congestion_tree,
            incast: incast.incast,
            ecmp: Ecmp::default(),
            vantage: None,
            dcqcn: dcqcn.dcqcn,
            marking,
            messages: merged.map(|(m, _)| m),
            load_balancing: None,
            evidence: None,
            export: None,
            output_failures: Vec::new(),
            trajectory: None,
            samples: None,
            export_identity: None,
        };
        let trees_not_merged = fabric_from_intervals(&mut report, opts);
        let around = (opts, dcqcn.cuts.as_ref(), self.vantage_reports);
        merged_tail(&mut report, joined, &self.messages, &mut unmerged, around);
        report.pfc.rates = rates_of(&self.rates, &report.pfc.senders);
        // Each report's evidence links point into its own directory, which this one has not.
        crate::report::evidence::unlink(&mut report);
        report.flows.sort_by_key(flow_sort_key);
        report.ecmp = merged_ecmp(&report.flows, &self.by_label, self.tiers.as_deref());
        let given = (opts.topology.is_some(), self.vantages.iter().any(|p| p.vantage.is_some()));
        let vantage_findings = notes_of(&mut report, self.carried, unmerged, (trees_not_merged, rtt_not_merged), given);
        load_balancing_of(&self.load_balancing, &self.parts, (st.irregular, &st.late), &mut report);
        let series = super::rtt_stitch::in_series(&rtt_spans(&self.spans, &self.rtt_reports));
        judge_leads(&mut report, &self.leads, (&self.spans, series.as_deref()), &self.pfc_edges);
        if series.is_some() {
            super::audit_merge::recompute(&mut report, &self.parts, self.cnp_timeout, &self.pfc_edges);
        }
        super::dcqcn_stitch::set_findings(&mut report, dcqcn.stitched.map(|s| s.0));
        vantage_findings.inspect(|f| with_hop_findings(&mut report, f));
        Ok(report)
    }
}

/// The merged report's notes in a run's order: those its totals and sections decide, told
/// again over the merged sections (the vantage points' too), each report's others (`carried`),
/// then what the merge could not combine (`not_merged`: congestion trees, RTT). `topology`: the
/// merge was given one; `points`: some report matched frames between vantage points. Returns
/// the findings of the vantage hops merged in time ([`Unmerged::note`]).
fn notes_of(
    report: &mut Report,
    carried: Vec<Note>,
    unmerged: Unmerged,
    (trees_not_merged, rtt_not_merged): (bool, bool),
    (topology, points): (bool, bool),
) -> Option<Vec<Finding>> {
    report.visibility = carried;
    let vantage_findings = unmerged.note(report, trees_not_merged, rtt_not_merged);
    let given = visibility::Given {
        topology,
        ce_marked: visibility::ce_marked(report),
        several_points: points || report.vantage.is_some(),
        one_way: visibility::report_one_way(report),
    };
    let told = visibility::told_by_report(report, given);
    report.visibility.splice(0..0, told);
    vantage_findings
}

/// Each report's span and RTT timeout, by report.
fn rtt_spans(spans: &[(u64, u64)], rtt: &[RttSummary]) -> Vec<super::rtt_stitch::Span> {
    let spans = spans.iter().zip(rtt);
    spans.map(|((s, e), r)| super::rtt_stitch::Span { start_ns: *s, end_ns: *e, timeout_ns: r.timeout_ns }).collect()
}

/// `load_balancing` over the merged flows (`report.flows`), with its note when it may not be
/// one run's (`irregular` flows met a gap or repeat of PSNs at a cut that `lb_stitch` could not replay; `late`: what it replayed).
fn load_balancing_of(
    sections: &[LoadBalancing],
    parts: &BTreeMap<FlowId, Vec<super::psn_stitch::Part>>,
    (irregular, late): (u64, &BTreeMap<FlowId, super::lb_stitch::Late>),
    report: &mut Report,
) {
    let seen = |f: &Flow| parts.get(&super::rtt_stitch::id_of(f)).map_or(1, Vec::len);
    let sections: Vec<&LoadBalancing> = sections.iter().collect();
    let fixed = super::load_balancing_merge::Fixed::of(late, parts, &report.flows);
    let merged = super::load_balancing_merge::merge(&sections, &report.flows, &report.ecmp, &seen, &fixed);
    let whole = merged.as_ref().is_none_or(|(_, w)| *w);
    report.load_balancing = merged.map(|(s, _)| s);
    report.visibility.extend(super::load_balancing_merge::note(whole, irregular, report));
}

/// Whether a report carries the edges `--edges` gives (every flow, the marking, every pair
/// with CE marks or CNPs and every QP's pacing); a report with none of those has nothing to lose.
fn has_edges(r: &Report) -> bool {
    r.flows.iter().all(|f| f.edge.is_some())
        && r.marking.as_ref().is_none_or(|m| m.edge.is_some())
        && r.pairs.iter().all(|p| p.ce + p.cnp_back == 0 || p.edge.is_some())
        && r.cnp_pacing.iter().all(|c| c.edge.is_some())
}

/// ECMP over the merged flows (bytes per flow and label), with the first report's tiers.
fn merged_ecmp(flows: &[Flow], by_label: &BTreeMap<String, LabelShare>, tiers: Option<&[Tier]>) -> Ecmp {
    let keyed: Vec<(FlowKey, u64)> = flows.iter().filter_map(|f| Some((flow_key(f)?, f.bytes))).collect();
    let multi = flows.iter().filter(|f| f.labels.len() > 1).count() as u64;
    let refs: Vec<(&FlowKey, u64)> = keyed.iter().map(|(k, b)| (k, *b)).collect();
    ecmp::section((by_label, Vec::new()), multi, tiers.unwrap_or_default(), &refs, true)
}

/// The merged CE/CNP pairs in the order a report lists them: by address bytes and IP version
/// ([`crate::analyses::keys::Addr`]), not by their text.
fn pairs_in_order(pairs: BTreeMap<(String, String), Pair>) -> Vec<Pair> {
    let addr = |s: &str| (addr_bytes(s).unwrap_or_default(), if s.contains(':') { 6u8 } else { 4 });
    let mut v: Vec<Pair> = pairs.into_values().collect();
    v.sort_by_key(|p| (addr(&p.a), addr(&p.b)));
    v
}

/// Applies a stitch's correction to a flow's summed counters; false (and the flow unchanged)
/// when a counter would go below zero (reports that do not fit each other).
fn apply(flow: &mut Flow, c: &super::psn_stitch::Correction) -> bool {
    fn fix<const N: usize>(v: &[u64; N], add: &[u64; N], sub: &[u64; N]) -> Option<[u64; N]> {
        let mut out = *v;
        for i in 0..N {
            out[i] = out[i].checked_add(add[i])?.checked_sub(sub[i])?;
        }
        Some(out)
    }
    let seq = fix(&flow.psn.sequence.values, &c.add.count, &c.sub.count);
    let responder = fix(&flow.psn.responder.values, &c.add.responder, &c.sub.responder);
    let naks = fix(&flow.naks.values, &c.add.aeth, &c.sub.aeth);
    let (Some(seq), Some(responder), Some(naks)) = (seq, responder, naks) else { return false };
    (flow.psn.sequence.values, flow.psn.responder.values, flow.naks.values) = (seq, responder, naks);
    true
}

/// The merged capture header with its sources, span and loss ratio settled.
fn settle_capture(mut capture: Capture, sources: Vec<SourceJson>) -> Capture {
    // No input had a frame: the span starts at 0, not at the fold's identity.
    capture.start_ns = Some(capture.start_ns).filter(|t| *t != u64::MAX).unwrap_or(0);
    capture.sources = sources;
    loss_ratio(&mut capture);
    capture
}

/// What the flows' heads list of the requests of the flows back, by (report, IP version,
/// requester, responder, PSN): the RNR NAKs' times (a note one run's PSN state takes with the
/// refused request's repeat) and the READ RESPONSEs FIRST (the MTU that gives a READ's span),
/// for `psn_stitch`.
type BackNotes = BTreeMap<(usize, u8, String, String, u32), super::psn_stitch::Back>;

/// [`BackNotes`] of the flows' parts (a response goes from the responder to the requester).
fn back_notes(parts: &BTreeMap<FlowId, Vec<super::psn_stitch::Part>>) -> BackNotes {
    use analyzer_common::opcode::{is_response, op::RDMA_READ_RESPONSE_FIRST};
    use analyzer_common::wire::ext::AckType;
    let mut out = BackNotes::new();
    for ((v, src, dst, _, _), ps) in parts {
        for (p, e) in ps.iter().filter_map(|p| Some((p, p.edge.as_ref()?))) {
            for (f, ts) in e.head.iter().zip(&e.head_ns) {
                let at = || (p.report, *v, dst.clone(), src.clone(), f.0[1]);
                if f.aeth() == Some(AckType::RnrNak) {
                    out.entry(at()).or_default().rnr.push(*ts);
                }
                // (By its low bits, as the state machine reads opcodes: RC and XRC alike.)
                if f.0[0] & 0x1F == u32::from(RDMA_READ_RESPONSE_FIRST) && is_response(f.0[0] as u8) {
                    out.entry(at()).or_default().reads.push((*ts, f.0[2]));
                }
            }
        }
    }
    out
}

/// Each flow's first data frame in each report, by report start and flow: its time, where the
/// flow's head lists it (the steadiness places a flow's host pair against it).
fn first_data(
    parts: &BTreeMap<FlowId, Vec<super::psn_stitch::Part>>,
) -> BTreeMap<(u64, super::steady_stitch::Order), u64> {
    let mut out = BTreeMap::new();
    for (id, ps) in parts {
        let Some(k) = flow_ref_key(&super::rtt_stitch::ref_of(id)) else { continue };
        for (p, e) in ps.iter().filter_map(|p| Some((p, p.edge.as_ref().filter(|e| e.head_ns.len() == e.head.len())?)))
        {
            let data = e.head.iter().position(|f| analyzer_common::opcode::is_data(f.0[0] as u8));
            if let Some(i) = data {
                out.insert((p.start_ns, crate::model::addr::flow_order(&k)), e.head_ns[i]);
            }
        }
    }
    out
}

/// The payload one run counts otherwise than the reports after a cut, from the flows' walks
/// (`loss_stitch`), by report start (`spans`: each report's) and flow.
fn payload_fixes(loss: &super::loss_stitch::Told, spans: &[(u64, u64)]) -> super::steady_stitch::Fixes {
    let mut out = super::steady_stitch::Fixes::default();
    for (id, walk) in loss {
        let (Some(w), Some(k)) = (walk, flow_ref_key(&super::rtt_stitch::ref_of(id))) else { continue };
        let o = crate::model::addr::flow_order(&k);
        out.told.extend(w.reports.iter().filter_map(|r| Some((spans.get(*r)?.0, o))));
        for (r, p) in &w.payload {
            if let Some((start, _)) = spans.get(*r) {
                out.payload.entry((*start, o)).or_default().push(*p);
            }
        }
    }
    out
}

/// The capture with the frames it missed as one run counts them (`told`: PSNs before a cut
/// that ACKs after it showed delivered, a part's skips that one run saw before the cut).
fn with_loss(mut capture: Capture, told: super::loss_stitch::Missed) -> Capture {
    let missed = capture.loss.as_ref().map_or(0, |l| l.frames_missed).saturating_add(told.add).saturating_sub(told.sub);
    match missed {
        // As one run: no loss section without a frame missed.
        0 => capture.loss = None,
        n => capture.loss.get_or_insert(CaptureLoss { frames_missed: 0, ratio: 0.0 }).frames_missed = n,
    }
    capture
}

/// The capture's loss ratio over the merged RoCE frames.
fn loss_ratio(capture: &mut Capture) {
    if let Some(l) = capture.loss.as_mut() {
        let roce = capture.classes.get("roce").copied().unwrap_or(0);
        l.ratio = l.frames_missed as f64 / (roce + l.frames_missed).max(1) as f64;
    }
}

/// Per priority the reports' data frames and pause frames added, as rates, for the priorities
/// PFC paused (as a report lists them; reports made with `--edges` list the others' data too).
/// (The paused time from the merged senders: intervals joined across reports.)
fn rates_of(rates: &BTreeMap<u8, (u64, u64)>, senders: &[PfcSender]) -> Vec<PfcRate> {
    let rate = |(p, (data, frames)): (&u8, &(u64, u64))| {
        let paused: u64 = senders.iter().filter(|s| s.priority == *p).map(|s| s.pause.paused_ns).sum();
        let per = |v: u64| (*data > 0).then(|| v as f64 * 1e6 / *data as f64);
        PfcRate {
            priority: *p,
            data_frames: *data,
            pause_frames: *frames,
            paused_ns: paused,
            frames_per_million: per(*frames),
            paused_ns_per_million: per(paused),
        }
    };
    rates.iter().filter(|(_, (_, frames))| *frames > 0).map(rate).collect()
}

/// The vantage section: a single report's (without its edge), or the reports' merged in time
/// with their hops' findings ([`super::vantage_merge`]); else why not (none: the reports
/// overlap in time).
fn vantage_merged(parts: &[super::vantage_merge::Part], spans: &[(u64, u64)], rtt: &[RttSummary]) -> VantageSight {
    if let [one] = parts {
        let v = one.vantage.clone().filter(|v| v.points.len() >= 2);
        return Ok((v.map(|v| Vantage { edge: None, ..v }), None));
    }
    let order = super::rtt_stitch::in_series(&rtt_spans(spans, rtt)).ok_or(None)?;
    let m = super::vantage_merge::merge(parts, &order).map_err(Some)?;
    Ok((m.vantage, Some(m.findings)))
}

/// The hops' findings (`loss_between`, `ecn_threshold_low`) of a vantage section merged in
/// time in place of the reports'.
fn with_hop_findings(report: &mut Report, findings: &[Finding]) {
    report.audit.retain(|f| !matches!(f.code, FindingCode::LossBetween | FindingCode::EcnThresholdLow));
    report.audit.extend_from_slice(findings);
    super::assemble::audit::in_run_order(&mut report.audit);
}

/// Sets the merged vantage section, or says why there is none (`shared`: flows in several
/// reports at once, and reports that matched frames); returns the findings of the hops merged
/// in time, which replace the reports' own.
fn vantage_section(sight: VantageSight, report: &mut Report, (shared, matched): (u64, u64)) -> Option<Vec<Finding>> {
    let why = match sight {
        Ok((vantage, findings)) => {
            report.vantage = vantage;
            return findings;
        }
        Err(Some(why)) => format!(
            "the reports follow each other in time, but their frames cannot be matched across the cuts as one run \
             matches them: {why}; no vantage section"
        ),
        Err(None) if shared > 0 || matched > 0 => format!(
            "merge cannot match frames across reports: {} flows appear in more than one report and their packets \
             are summed, so a frame seen at two vantage points counts twice; no vantage section. For hop-by-hop \
             loss and latency give the captures to one run (--pcap LABEL=FILE …)",
            shared
        ),
        Err(None) => return None,
    };
    report.visibility.push(Note::new(NoteCode::VantageNotMerged, why));
    None
}

/// The merged vantage section and the findings that replace the reports' (none: keep theirs),
/// or why there is none (`None`: the reports overlap in time).
type VantageSight = Result<(Option<Vantage>, Option<Vec<Finding>>), Option<String>>;

/// What `merge` could not combine, taken from the merger before it builds the report.
struct Unmerged {
    shared_flows: u64,
    /// Flows of reports in series whose PSN counters were not stitched across the cut.
    psn_unstitched: u64,
    vantage_reports: u64,
    tiers_differ: bool,
    vantage: VantageSight,
    /// Messages sections only partly combined.
    messages_partly: Option<super::messages_merge::Partly>,
    marking_partly: bool,
    ecn_unstitched: bool,
    /// Flows whose capture loss (ACK-inferred) may cross a cut.
    loss_open: u64,
    /// Incast episodes at a cut in time (`incast_merge::at_cuts`).
    incast_cut: u64,
    /// Why the incast episodes at a cut were not stitched (`incast_merge::merged`).
    incast_why: Option<&'static str>,
    /// Incast episodes joined from several reports.
    incast_joined: u64,
    /// The DCQCN section's notes ([`super::dcqcn_stitch::Merged::notes`]).
    dcqcn: Vec<Note>,
    rtt_cuts: super::rtt_merge::Cuts,
}

impl Unmerged {
    /// The vantage section, and a note for each thing that was not merged: congestion trees
    /// (`trees_not_merged`), vantage, RTT (`rtt_not_merged`), the ECMP prediction. Returns the
    /// findings of the vantage hops merged in time, which replace the reports' own.
    fn note(self, report: &mut Report, trees_not_merged: bool, rtt_not_merged: bool) -> Option<Vec<Finding>> {
        if trees_not_merged {
            report.visibility.push(Note::new(
                NoteCode::CongestionTreeNotMerged,
                "some reports do not list all their pause intervals (older reports, or more than 10000 per \
                 sender): congestion trees, deadlocks and storms are those of each report, and the pause time \
                 of a sender seen at several vantage points is the largest of them",
            ));
        }
        let findings = vantage_section(self.vantage, report, (self.shared_flows, self.vantage_reports));
        if rtt_not_merged {
            report.visibility.push(Note::new(
                NoteCode::RttNotMerged,
                "RTT percentiles of a flow seen in several reports made without --edges (which carry no \
                 samples), or of reports without their RTT histogram (older ones), cannot be combined: the \
                 merged report has those only where a single report had them; the fleet-wide rtt_ns is \
                 combined from the reports' histograms when all carry one",
            ));
        }
        report.visibility.extend(self.rtt_cuts.note());
        if self.psn_unstitched > 0 {
            report.visibility.push(super::psn_stitch::note(self.psn_unstitched));
        }
        if self.marking_partly {
            report.visibility.push(super::marking_merge::note());
        }
        if self.loss_open > 0 {
            report.visibility.push(Note::new(
                NoteCode::CaptureLossNotStitched,
                format!(
                    "capture.loss, flows[].psn.capture_missed: {} flows had PSNs skipped before or at a cut in \
                     time that no ACK in their part showed delivered, and the ACKs after the cut could not be \
                     replayed on them (no --edges, requests, ACKs or NAKs after the cut beyond the heads the \
                     reports keep, events at one time whose order changes the count, an ACK flow not paired): \
                     an ACK after the cut may have covered them (one run would count them missed by the capture, \
                     not skipped)",
                    self.loss_open
                ),
            ));
        }
        if self.ecn_unstitched {
            report.visibility.push(super::ecn_merge::note());
        }
        if let Some(p) = self.messages_partly {
            report.visibility.push(super::messages_merge::note(p));
        }
        if self.incast_joined > 0 {
            report.visibility.push(super::incast_merge::note(self.incast_joined));
        }
        if self.incast_cut > 0 {
            report.visibility.push(super::incast_merge::cut_note(self.incast_cut, self.incast_why));
        }
        report.visibility.extend(self.dcqcn);
        if self.tiers_differ {
            report.visibility.push(Note::new(
                NoteCode::EcmpPredictedNotMerged,
                "the reports predicted ECMP paths with different --ecmp-tier settings: the merged prediction \
                 uses those of the first report that had any",
            ));
        }
        findings
    }
}

/// The merged messages' tail as one run explains it, when they were joined across cuts and the
/// merge knows what one run laid them over ([`super::tail_merge`]); else each report's, and the
/// note says why. With the whole section one run's, its findings are too.
fn merged_tail(
    report: &mut Report,
    joined: Option<super::tail_merge::Joined>,
    sections: &[(u64, u64, Messages)],
    unmerged: &mut Unmerged,
    (opts, cuts, vantage): (&MergeOptions, Option<&super::dcqcn_stitch::Cuts>, u64),
) {
    let (Some(j), Some(partly), Some(m)) = (joined, unmerged.messages_partly.as_mut(), report.messages.as_mut()) else {
        return;
    };
    let around = super::tail_merge::Around {
        settings: sections.iter().map(|(_, _, m)| m.edge.as_ref().and_then(|e| e.tail.as_ref())).collect(),
        topology: opts.topology.as_ref(),
        cuts,
        incast: unmerged.incast_cut + unmerged.incast_joined == 0,
        hops: vantage > 0,
        unkept: sections.iter().map(|(_, _, m)| m.tail.hop_latencies_unkept).sum(),
    };
    match super::tail_merge::tail(&j, (&report.pfc, &report.incast), &around) {
        Ok(t) => {
            m.tail = t;
            partly.tail = super::messages_merge::TailOf::Run;
        }
        Err(why) if partly.tail == super::messages_merge::TailOf::Reports => {
            partly.tail = super::messages_merge::TailOf::Because(why)
        }
        Err(_) => {}
    }
    if !partly.any() {
        unmerged.messages_partly = None;
        super::tail_merge::set_findings(report, around.settings.into_iter().flatten().next());
    }
}

/// PFC senders several reports saw: their onsets judged over all ([`super::ecn_merge::lead`],
/// with the marks the reports carried near their ends (`edges`) when they follow each other in
/// time: `series`, their order), null where they cannot be, and said.
fn judge_leads(
    report: &mut Report,
    leads: &BTreeMap<(String, u8), Vec<super::ecn_merge::LeadPart>>,
    (spans, series): (&[(u64, u64)], Option<&[usize]>),
    edges: &[Option<PfcEdge>],
) {
    let first = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let sights: Option<Vec<super::lead_stitch::Sight>> = series.map(|order| {
        order.iter().map(|i| (spans[*i].0, edges.get(*i).and_then(|e| e.as_ref()?.marks.as_ref()))).collect()
    });
    let marks = sights.as_deref();
    let mut unjudged = 0;
    for s in &mut report.pfc.senders {
        if let Some(l) = s.ecn_lead.as_mut() {
            l.edge = None;
        }
        let Some(parts) = leads.get(&(s.mac.clone(), s.priority)).filter(|p| p.len() > 1) else { continue };
        let complete = s.pause.intervals_complete;
        s.ecn_lead =
            complete.then(|| super::ecn_merge::lead(parts, &s.pause.intervals, first, marks, s.priority)).flatten();
        unjudged += u64::from(s.ecn_lead.is_none() && parts.iter().any(|(_, l)| l.is_some()));
    }
    if unjudged > 0 {
        report.visibility.push(super::ecn_merge::lead_note(unjudged));
    }
}

/// Recomputes pause time, storms, congestion trees and deadlocks from the intervals joined
/// across reports; true when some report did not list them all (trees not merged).
fn fabric_from_intervals(report: &mut Report, opts: &MergeOptions) -> bool {
    let complete = report.pfc.senders.iter().all(|s| s.pause.intervals_complete)
        && report.pfc.pause_senders.iter().all(|s| s.pause.intervals_complete);
    let pfc_seen = report.pfc.frames + report.pfc.pause_8023x_frames > 0;
    if !(complete && pfc_seen) {
        return pfc_seen && !complete;
    }
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
    report.pfc.storms = fabric::storms(&pause, topo);
    let flows: Vec<FlowSpan> = report.flows.iter().filter_map(flow_span).collect();
    report.congestion_tree = tree::build(&pause, topo, &flows, opts.deadlock_min_ns);
    false
}

/// What the congestion trees read of a report's flow.
fn flow_span(f: &Flow) -> Option<FlowSpan> {
    let mut pcps = 0u8;
    let mut untagged = false;
    for (pcp, _) in f.pcp.iter().filter(|(_, n)| **n > 0) {
        match pcp.parse::<u8>() {
            Ok(p) if p < 8 => pcps |= 1 << p,
            _ => untagged = true,
        }
    }
    Some(FlowSpan {
        key: flow_key(f)?,
        bytes: f.bytes,
        first_ns: f.first_ns,
        last_ns: f.last_ns,
        pcps,
        untagged,
        seen_at: f.labels.iter().map(|l| (l.clone(), None)).collect(),
    })
}
