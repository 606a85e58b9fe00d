//! `merge` of the DCQCN sections of a capture cut in time, as one run over the whole judges
//! them. Every report made with `--edges` carries each data flow's CNPs with their outcome,
//! its windows with data within [`reach`] of the report's ends, its every frame as a series,
//! and when it began to watch it (`dcqcn.edge`).
//!
//! - A CNP whose windows (the [`BEFORE_WINDOWS`] before it, the horizon after) all lie within
//!   its report was judged as one run judges it: its outcome is kept. One near a cut is judged
//!   again on the windows of the reports around the cut, added where a window spans the cut.
//!   (A flow that carries no requests has no windows from before its watch in one run: it is
//!   judged on its windows from the whole's watch on, and its CNPs soon after a later report's
//!   watch are judged again too.)
//! - Counts, medians and close CNPs follow from the outcomes in time order, per flow and per
//!   host, and so do the findings (`cnp_ignored`, `slow_recovery`, `cnp_storm`).
//! - The plots: one run keeps a series for the first flows it watches, from its watch on; the
//!   report that first watched a flow has that series, the later ones every frame of it.
//!
//! - A CNP a later report left unattributed goes to the flow one run gives it (the one a report
//!   before paired with ACKs to its QP, else the one flow between its hosts watched before),
//!   judged on the windows around it.
//!
//! What one run would do otherwise is counted, not guessed (`Doubts`): a CNP near a cut whose
//! windows a report did not keep, CNPs a later report left unattributed where one run's pairing
//! is not known or gave the one watched flow between their hosts where one run may not, a flow
//! whose series the first report did not keep, and reports at their state's bounds.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer_common::flow::FlowKey;

use crate::analyses::dcqcn::{BEFORE_WINDOWS, DEFAULT_PACING_NS, FlowSummary, Outcome, judge_on, keep_cut, reach};
use crate::analyses::marking::{SERIES_POINTS, point};
use crate::model::*;
use crate::report::assemble::dcqcn::{Judged, Judging, Plotted, findings_over, flows_json, hosts, plots};

/// One report's DCQCN section, its span, and the ACK flows its RTT analysis paired.
#[derive(Debug, Clone)]
pub struct Part {
    pub start_ns: u64,
    pub end_ns: u64,
    pub dcqcn: Option<Dcqcn>,
    pub acked: Vec<Acked>,
}

/// A request flow paired with the flow that carried its ACKs: (sender, receiver, the ACKs' QP
/// (the sender's), the request flow). One run pairs a CNP to that QP with that flow.
pub type Acked = (String, String, u32, FlowKey);

impl Part {
    /// A report's part: its span, its DCQCN section, its flows' pairings
    /// (`flows[].edge.rtt.ack_flow`).
    pub fn of(r: &Report) -> Part {
        let acked = r
            .flows
            .iter()
            .filter_map(|f| {
                let ack = f.edge.as_ref()?.rtt.as_ref()?.ack_flow.as_ref()?;
                Some((f.src.clone(), f.dst.clone(), ack.dst_qp, flow_key(f)?))
            })
            .collect();
        Part { start_ns: r.capture.start_ns, end_ns: r.capture.end_ns, dcqcn: r.dcqcn.clone(), acked }
    }
}

/// What the stitch could not make one run's (each a count; all zero: one run's).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Doubts {
    /// CNPs judged on one report's windows (the other's were not kept), or not judged (a CNP
    /// left unattributed whose windows lie inside its report).
    pub cnps: u64,
    /// CNPs a later report left unattributed where one run's pairing is not known, or
    /// attributed by their hosts where one run may not have (several flows between them
    /// watched, or another paired).
    pub attribution: u64,
    /// Flows one run would plot whose series the report that first watched them did not keep.
    pub plots: u64,
    /// Reports at their flows' bound.
    pub bounded: u64,
}

impl Doubts {
    pub fn any(&self) -> bool {
        *self != Doubts::default()
    }
}

/// The section one run would have (none when it has none), its findings and the doubts.
#[derive(Debug)]
pub struct Stitched {
    pub dcqcn: Option<Dcqcn>,
    pub findings: Vec<Finding>,
    pub doubts: Doubts,
    /// Each flow's rate cuts, as one run keeps them for the messages' tail.
    pub cuts: Cuts,
}

/// Each flow's DCQCN rate cuts (from a CNP's reaction to the rate's recovery), the latest as
/// one run keeps them (`analyses::dcqcn::keep_cut`).
pub type Cuts = BTreeMap<FlowKey, VecDeque<(u64, u64)>>;

/// A report in time order, with its edge and its pairings.
struct Sight<'a> {
    d: &'a Dcqcn,
    e: &'a DcqcnEdge,
    acked: &'a [Acked],
}

/// A flow's CNP in one run's order: its report, its time, and (for one its report attributed)
/// its sight's index in the flow's [`Sights`] and the CNP as judged there.
type FlowCnp<'s> = (usize, u64, Option<(usize, &'s DcqcnEdgeCnp)>);

/// CNPs a report left unattributed that one run gives a flow: per flow, (report, time).
type Strays = BTreeMap<FlowKey, Vec<(usize, u64)>>;

/// The first frame of the merged flows that carry ACKs, by (source, destination, destination
/// QP): whether ACKs could have gone to a QP before a time (one run pairs a CNP with the flow
/// whose ACKs go to its QP).
pub type FirstFrames = BTreeMap<(String, String, u32), u64>;

/// [`FirstFrames`] of the merged flows (those with an opcode that carries an AETH: a flow of
/// CNPs back to the sender's QP pairs nothing).
pub fn first_frames<'f>(flows: impl Iterator<Item = &'f Flow>) -> FirstFrames {
    let mut out = FirstFrames::new();
    for f in flows.filter(|f| carries_acks(&f.opcodes)) {
        let e = out.entry((f.src.clone(), f.dst.clone(), f.dst_qp)).or_insert(f.first_ns);
        *e = (*e).min(f.first_ns);
    }
    out
}

/// Whether a flow's opcodes include one with an AETH (an ACK, a READ response): only those pair.
fn carries_acks(opcodes: &CountMap) -> bool {
    use analyzer_common::opcode::{ext, headers};
    (0..=255u8)
        .any(|op| headers(op) & ext::AETH != 0 && opcodes.get(crate::model::names::opcode_name_static(op)).is_some())
}

/// Stitches reports that follow each other in time, each with a DCQCN edge and the same
/// windows and settings; none otherwise (the caller merges them report by report). `back`:
/// the merged flows' first frames.
pub fn stitch(parts: &[Part], back: &FirstFrames) -> Option<Stitched> {
    if parts.len() < 2 {
        return None;
    }
    let mut sorted: Vec<&Part> = parts.iter().collect();
    sorted.sort_by_key(|p| (p.start_ns, p.end_ns));
    if sorted.windows(2).any(|w| w[0].end_ns > w[1].start_ns) {
        return None;
    }
    let sights: Vec<Sight> = sorted
        .iter()
        .map(|p| p.dcqcn.as_ref().and_then(|d| Some(Sight { d, e: d.edge.as_ref()?, acked: &p.acked })))
        .collect::<Option<_>>()?;
    let (d0, e0) = (sights[0].d, sights[0].e);
    let same = |s: &Sight| {
        (s.d.rate_window_ns, s.d.horizon_ns, s.e.slow_recovery_ns, s.e.cnp_interval_ns)
            == (d0.rate_window_ns, d0.horizon_ns, e0.slow_recovery_ns, e0.cnp_interval_ns)
    };
    if d0.rate_window_ns == 0 || !sights.iter().all(same) {
        return None;
    }
    let judging = Judging {
        window_ns: d0.rate_window_ns,
        horizon_ns: d0.horizon_ns,
        slow_recovery_ns: e0.slow_recovery_ns,
        cnp_interval_ns: e0.cnp_interval_ns,
    };
    Some(Stitcher::new(&sights, judging).run(back))
}

/// One flow's sight in each report that had it (report index, its edge there).
type Sights<'a> = Vec<(usize, &'a DcqcnEdgeFlow)>;

struct Stitcher<'a> {
    sights: &'a [Sight<'a>],
    judging: Judging,
    horizon: u64,
    reach: u64,
    flows: BTreeMap<FlowKey, Sights<'a>>,
    /// The unattributed CNPs one run gives a flow ([`Stitcher::attribute`]).
    strays: Strays,
    doubts: Doubts,
}

impl<'a> Stitcher<'a> {
    fn new(sights: &'a [Sight<'a>], judging: Judging) -> Self {
        let horizon = judging.horizon_ns.div_ceil(judging.window_ns);
        let mut flows: BTreeMap<FlowKey, Sights> = BTreeMap::new();
        let mut doubts = Doubts::default();
        for (i, s) in sights.iter().enumerate() {
            doubts.bounded += u64::from(s.e.state_full + s.e.flows_over > 0);
            for f in &s.e.flows {
                let r = FlowRef { src: f.src.clone(), dst: f.dst.clone(), udp_sport: f.udp_sport, dst_qp: f.dst_qp };
                match flow_ref_key(&r) {
                    Some(k) => flows.entry(k).or_default().push((i, f)),
                    None => doubts.bounded += 1,
                }
            }
        }
        Stitcher { sights, judging, horizon, reach: reach(horizon), flows, strays: Strays::new(), doubts }
    }

    fn run(mut self, back: &FirstFrames) -> Stitched {
        self.attribute(back);
        let mut judged: Vec<Judged> = Vec::new();
        let mut series: BTreeMap<FlowKey, Plotted> = BTreeMap::new();
        // One run's series go to the first flows it watches.
        let mut watched: Vec<(usize, u64, FlowKey)> = Vec::new();
        for (k, list) in &self.flows {
            if let Some((i, t)) = list.iter().find_map(|(i, f)| Some((*i, f.watched_ns?))) {
                watched.push((i, t, *k));
            }
        }
        watched.sort_unstable();
        let plotted: BTreeSet<FlowKey> =
            watched.iter().take(crate::analyses::dcqcn::SERIES_FLOWS).map(|(_, _, k)| *k).collect();
        let (mut near, mut unplotted) = (0, 0);
        let mut cuts = Cuts::new();
        for (k, list) in &self.flows {
            let Some(j) = list.iter().position(|(_, f)| f.watched_ns.is_some()) else { continue };
            let (summary, unjudged, flow_cuts) = self.summary(k, list, j);
            near += unjudged;
            if !flow_cuts.is_empty() {
                cuts.insert(*k, flow_cuts);
            }
            if plotted.contains(k) {
                match self.series(k, list, j) {
                    Some(s) => drop(series.insert(*k, s)),
                    None => unplotted += 1,
                }
            }
            if summary.cnps > 0 {
                judged.push((*k, summary));
            }
        }
        (self.doubts.cnps, self.doubts.plots) = (near, unplotted);
        let findings = findings_over(&judged, &self.judging);
        let given = self.strays.values().map(|l| l.len() as u64).sum::<u64>();
        let unattributed = self.sights.iter().map(|s| s.d.unattributed_cnps).fold(0, u64::saturating_add) - given;
        let dcqcn = (!judged.is_empty() || unattributed > 0).then(|| Dcqcn {
            rate_window_ns: self.judging.window_ns,
            horizon_ns: self.judging.horizon_ns,
            unattributed_cnps: unattributed,
            flows: flows_json(&judged),
            hosts: hosts(&judged),
            plots: plots(&judged, &findings, &|k| series.get(k).cloned()),
            edge: None,
        });
        Stitched { dcqcn, findings, doubts: self.doubts, cuts }
    }

    /// CNPs a later report attributed otherwise than one run would. One it left unattributed
    /// (at time t, to sender S's QP q from receiver R) is one run's:
    /// - the request flow S → R a report before paired with the ACK flow to q (one run keeps a
    ///   pairing), when the reports before watched it (one alone; else doubted);
    /// - else, when no flow carrying ACKs to q began before t (its ACKs might have paired in one
    ///   run where the report could not: doubted), the one flow S → R the reports before watched,
    ///   where the report watched none (one run's candidates are those); unattributed where they
    ///   watched none or several, as in the report.
    ///
    /// And one it gave the one flow it watched between their hosts is doubted where the reports
    /// up to it watched several, or one before it paired another request flow S → R.
    fn attribute(&mut self, back: &FirstFrames) {
        let mut by_hosts: BTreeMap<(&str, &str), Vec<(usize, &FlowKey)>> = BTreeMap::new();
        for (k, list) in &self.flows {
            for (i, f) in list.iter().filter(|(_, f)| f.watched_ns.is_some()) {
                by_hosts.entry((&f.src, &f.dst)).or_default().push((*i, k));
            }
        }
        let watched_before = |i: usize, src: &str, dst: &str| -> BTreeSet<FlowKey> {
            let list = by_hosts.get(&(src, dst)).map(Vec::as_slice).unwrap_or_default();
            list.iter().filter(|(j, _)| *j < i).map(|(_, k)| **k).collect()
        };
        let paired_before = |i: usize, src: &str, dst: &str, qp: Option<u32>| -> BTreeSet<FlowKey> {
            let acked = self.sights[..i].iter().flat_map(|s| s.acked.iter());
            acked.filter(|(s, r, q, _)| s == src && r == dst && qp.is_none_or(|qp| qp == *q)).map(|a| a.3).collect()
        };
        let mut strays = Strays::new();
        for (i, s) in self.sights.iter().enumerate().skip(1) {
            if s.e.unattributed_over > 0 || (s.e.unattributed.len() as u64) < s.d.unattributed_cnps {
                self.doubts.attribution += s.d.unattributed_cnps;
                continue;
            }
            for DcqcnStray(sender, receiver, qp, ns, several) in &s.e.unattributed {
                let paired = paired_before(i, sender, receiver, Some(*qp));
                let watched = watched_before(i, sender, receiver);
                let one_run = match paired.iter().collect::<Vec<_>>().as_slice() {
                    [k] if watched.contains(k) => Some(Some(**k)),
                    [_, ..] => None,
                    [] if back.get(&(receiver.clone(), sender.clone(), *qp)).is_some_and(|first| first < ns) => None,
                    [] => Some(watched.first().filter(|_| !several && watched.len() == 1).copied()),
                };
                match one_run {
                    Some(Some(k)) => strays.entry(k).or_default().push((i, *ns)),
                    Some(None) => {}
                    None => self.doubts.attribution += 1,
                }
            }
        }
        for (k, list) in &self.flows {
            for (i, f) in list.iter().filter(|(i, _)| *i > 0) {
                let n = f.cnps.iter().filter(|c| c.by_hosts()).count() as u64;
                let watched = by_hosts.get(&(f.src.as_str(), f.dst.as_str())).map(Vec::as_slice).unwrap_or_default();
                let up_to: BTreeSet<&FlowKey> = watched.iter().filter(|(j, _)| j <= i).map(|(_, k)| *k).collect();
                let other_paired = paired_before(*i, &f.src, &f.dst, None).iter().any(|p| p != k);
                if n > 0 && (up_to.len() > 1 || other_paired) {
                    self.doubts.attribution += n;
                }
            }
        }
        self.strays = strays;
    }

    /// A flow's CNPs over all reports, in time order, as one run judges them (`j`: the sight
    /// of the report that first watched it); how many near a cut could not be judged again; its
    /// rate cuts.
    fn summary(&self, k: &FlowKey, list: &Sights, j: usize) -> (FlowSummary, u64, VecDeque<(u64, u64)>) {
        let request = list.iter().any(|(_, f)| f.request);
        let (wn, h) = (self.judging.window_ns, self.horizon);
        let whole_watch = list[j].1.watched_ns.unwrap_or(0) / wn;
        // A flow without requests has no windows from before its watch in one run.
        let since = if request { 0 } else { whole_watch };
        let mut union: BTreeMap<u64, u64> = BTreeMap::new();
        for (_, f) in list {
            for [w, b] in &f.windows {
                *union.entry(*w).or_default() += b;
            }
        }
        let windows: VecDeque<(u64, u64)> = union.into_iter().filter(|(w, _)| *w >= since).collect();
        let pacing = self.judging.cnp_interval_ns.unwrap_or(DEFAULT_PACING_NS);
        let (mut s, mut last, mut unjudged) = (FlowSummary::default(), None::<u64>, 0);
        let mut cuts = VecDeque::new();
        for (i, ns, told) in self.cnps_of(k, list) {
            let wc = ns / wn;
            let known = || self.known(wc.saturating_sub(BEFORE_WINDOWS), wc + h + 1);
            let outcome = match told {
                // A CNP its report left unattributed: judged here or not at all.
                None if known() => judge_on(&windows, since, ns, wn, h),
                None => {
                    unjudged += 1;
                    None
                }
                Some((n, c)) => {
                    let own_watch = list[n].1.watched_ns.map(|t| t / wn);
                    let late_watch = !request && n > j && own_watch.is_some_and(|w| wc < w + BEFORE_WINDOWS);
                    match self.near_cut(i, wc) || late_watch {
                        true if known() => judge_on(&windows, since, ns, wn, h),
                        near => {
                            unjudged += u64::from(near);
                            c.2.map(|p| Outcome { cut_ratio: p as f64 / 1e6, reaction_ns: c.3, recovery_ns: c.4 })
                        }
                    }
                }
            };
            if last.is_some_and(|l| ns.saturating_sub(l) < pacing / 2) {
                s.close_cnps += 1;
            }
            last = Some(ns);
            keep_cut(&mut cuts, ns, outcome, self.judging.horizon_ns);
            s.add(outcome);
        }
        (s, unjudged, cuts)
    }

    /// A flow's CNPs in one run's order, the strays one run gives it among its report's own.
    fn cnps_of<'s>(&self, k: &FlowKey, list: &'s Sights) -> Vec<FlowCnp<'s>> {
        let mut out: Vec<_> = list
            .iter()
            .enumerate()
            .flat_map(|(n, (i, f))| f.cnps.iter().map(move |c| (*i, c.ns(), Some((n, c)))))
            .collect();
        out.extend(self.strays.get(k).into_iter().flatten().map(|(i, ns)| (*i, *ns, None)));
        // Stable: each report's own CNPs keep their order, a stray after one at its time.
        out.sort_by_key(|(i, ns, _)| (*i, *ns));
        out
    }

    /// Whether a CNP in window `wc` of report `i` needs windows of another report.
    fn near_cut(&self, i: usize, wc: u64) -> bool {
        let e = self.sights[i].e;
        (i > 0 && wc <= e.first_window + BEFORE_WINDOWS)
            || (i + 1 < self.sights.len() && wc + self.horizon + 1 >= e.last_window)
    }

    /// Whether the reports kept every window from `from` to `to`: none lies inside a report,
    /// out of reach of its ends.
    fn known(&self, from: u64, to: u64) -> bool {
        self.sights.iter().all(|s| {
            let (a, b) = (s.e.first_window + self.reach, s.e.last_window.saturating_sub(self.reach));
            a >= b || to < a || from >= b
        })
    }

    /// One run's series of a flow: the first watching report's, then every frame of the later
    /// ones; its CNPs' times (the first [`SERIES_POINTS`]).
    fn series(&self, k: &FlowKey, list: &Sights, j: usize) -> Option<Plotted> {
        let first = list[j].1.series.as_ref()?;
        let later = list[j + 1..].iter().filter_map(|(_, f)| f.all.as_ref());
        let joined = join(first, &std::iter::once(first).chain(later).collect::<Vec<_>>(), self.judging.window_ns);
        let cnps = self.cnps_of(k, list).into_iter().map(|c| c.1).take(SERIES_POINTS).collect();
        Some((joined, cnps))
    }
}

/// Series of several reports in one, from `first`'s start: the width is the smallest
/// power-of-two multiple of the widest that holds every point in [`SERIES_POINTS`] (as one
/// run's halving ends), each report's point landing in the one holding it.
fn join(first: &DcqcnSeries, list: &[&DcqcnSeries], window_ns: u64) -> DcqcnSeries {
    let start = first.start_ns / window_ns;
    let list: Vec<&&DcqcnSeries> = list.iter().filter(|s| !s.bytes.is_empty() && s.point_ns > 0).collect();
    let width_of = |s: &DcqcnSeries| (s.point_ns / window_ns).max(1);
    let last = list.iter().map(|s| s.start_ns / window_ns + (s.bytes.len() as u64 - 1) * width_of(s)).max();
    let Some(last) = last else { return first.clone() };
    let mut width = list.iter().map(|s| width_of(s)).chain([width_of(first)]).max().unwrap_or(1);
    while point(start, last, width) >= SERIES_POINTS as u64 {
        width *= 2;
    }
    let n = point(start, last, width) as usize + 1;
    let mut out = DcqcnSeries {
        start_ns: start / width * width * window_ns,
        point_ns: width * window_ns,
        bytes: vec![0; n],
        frames: vec![0; n],
        ce: vec![0; n],
    };
    for s in list {
        for i in 0..s.bytes.len() {
            let at = point(start, s.start_ns / window_ns + i as u64 * width_of(s), width) as usize;
            out.bytes[at] += s.bytes[i];
            out.frames[at] += s.frames.get(i).copied().unwrap_or(0);
            out.ce[at] += s.ce.get(i).copied().unwrap_or(0);
        }
    }
    out
}

/// The DCQCN section of a merge: stitched across cuts, or else report by report.
#[derive(Debug)]
pub struct Merged {
    pub dcqcn: Option<Dcqcn>,
    pub unjoined: super::dcqcn_merge::Unjoined,
    /// Stitched: one run's findings, and what it could not make one run's.
    pub stitched: Option<(Vec<Finding>, Doubts)>,
    /// Each flow's rate cuts as one run keeps them: stitched without doubts, or no report
    /// judged a CNP (none: not known).
    pub cuts: Option<Cuts>,
}

impl Merged {
    /// Its notes: a stitch's doubts; or, merged report by report, the medians it could not
    /// keep and (of several reports) that each judged its CNPs on its own frames.
    pub fn notes(&self, reports: usize) -> Vec<Note> {
        let mut out = Vec::new();
        if self.unjoined.flows + self.unjoined.hosts > 0 {
            out.push(super::dcqcn_merge::note(self.unjoined));
        }
        if let Some(d) = self.stitched.as_ref().map(|s| s.1).filter(Doubts::any) {
            out.push(note(d));
        }
        if reports > 1 && self.unjoined.reports > 0 {
            out.push(super::dcqcn_merge::stitch_note(self.unjoined.reports));
        }
        out
    }
}

/// Stitches the reports' sections ([`stitch`]) or merges them report by report
/// ([`super::dcqcn_merge::merge`]); edges stay in their reports.
pub fn merge(parts: &[Part], back: &FirstFrames) -> Merged {
    if let Some(s) = stitch(parts, back) {
        let cuts = (!s.doubts.any()).then_some(s.cuts);
        return Merged { dcqcn: s.dcqcn, unjoined: Default::default(), stitched: Some((s.findings, s.doubts)), cuts };
    }
    let sections: Vec<&Dcqcn> = parts.iter().filter_map(|p| p.dcqcn.as_ref()).collect();
    let (dcqcn, unjoined) =
        super::dcqcn_merge::merge(&sections).map_or((None, Default::default()), |(d, u)| (Some(d), u));
    // A report with `--edges` has the section for its frames alone: one run without CNPs has none.
    let dcqcn = dcqcn
        .map(|d| Dcqcn { edge: None, ..d })
        .filter(|d| !d.flows.is_empty() || d.unattributed_cnps > 0 || !d.plots.is_empty());
    // No CNP judged anywhere: no flow's rate was cut.
    let cuts = sections.iter().all(|d| d.flows.is_empty()).then(Cuts::new);
    Merged { dcqcn, unjoined, stitched: None, cuts }
}

/// One run's DCQCN findings in the merged audit, in place of the reports' (when stitched).
pub fn set_findings(report: &mut Report, findings: Option<Vec<Finding>>) {
    let Some(findings) = findings else { return };
    report.audit.retain(|f| !crate::report::assemble::dcqcn::is_dcqcn(f.code));
    report.audit.extend(findings);
    crate::report::assemble::audit::in_run_order(&mut report.audit);
}

/// The note of a stitch with doubts.
pub fn note(d: Doubts) -> Note {
    Note::new(
        NoteCode::DcqcnNotStitched,
        format!(
            "DCQCN: judged across the cuts as one run would, except {} CNPs whose windows a report did not keep \
             (near a cut, or left unattributed inside a report), {} CNPs a later report left unattributed where \
             one run's pairing is not known (ACKs back to their QP that no report paired began before them, or \
             the flow paired was not watched before) or gave the one flow it watched between their hosts where \
             one run may not have (several watched, or another flow paired), {} flows whose series the first \
             report did not keep, and {} reports at their flows' bound (--max-flows)",
            d.cnps, d.attribution, d.plots, d.bounded
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const WN: u64 = 10_000;

    /// The whole's bytes per 10 µs window: 10 000 up to window 39, halved from 40 to 45, back
    /// at 10 000 from 46 to 100. Window 40 spans the cut: 2 000 before it, 3 000 after.
    fn bytes(w: u64) -> u64 {
        match w {
            0..=39 | 46.. => 10_000,
            _ => 5_000,
        }
    }

    fn series(from: u64, to: u64, at: &dyn Fn(u64) -> u64) -> DcqcnSeries {
        let bytes: Vec<u64> = (from..=to).map(at).collect();
        let frames = bytes.iter().map(|b| b / 500).collect();
        DcqcnSeries { start_ns: from * WN, point_ns: WN, ce: vec![0; bytes.len()], bytes, frames }
    }

    fn cnp(ns: u64, outcome: Option<(u64, Option<u64>, Option<u64>)>) -> DcqcnEdgeCnp {
        DcqcnEdgeCnp(ns, false, outcome.map(|o| o.0), outcome.and_then(|o| o.1), outcome.and_then(|o| o.2))
    }

    /// A report of windows `first..=last` with the one flow watched from `watched`, its CNPs as
    /// that report judged them; its windows within reach (17: horizon 10, 5 before, 2) of its ends.
    fn part(first: u64, last: u64, at: &dyn Fn(u64) -> u64, watched: Option<u64>, cnps: Vec<DcqcnEdgeCnp>) -> Part {
        let reach = reach(10);
        let windows = (first..=last).filter(|w| *w < first + reach || *w + reach >= last).map(|w| [w, at(w)]).collect();
        let flow = DcqcnEdgeFlow {
            src: "10.0.0.1".into(),
            dst: "10.0.0.2".into(),
            udp_sport: 1,
            dst_qp: 7,
            request: true,
            watched_ns: watched,
            cnps,
            windows,
            all: Some(series(first, last, at)),
            series: watched.map(|t| series(t / WN, last, at)),
        };
        let edge = DcqcnEdge {
            first_window: first,
            last_window: last,
            slow_recovery_ns: 1_000_000,
            cnp_interval_ns: None,
            state_full: 0,
            flows_over: 0,
            flows: vec![flow],
            unattributed: Vec::new(),
            unattributed_over: 0,
        };
        let d = Dcqcn {
            rate_window_ns: WN,
            horizon_ns: 100_000,
            unattributed_cnps: 0,
            flows: Vec::new(),
            hosts: Vec::new(),
            plots: Vec::new(),
            edge: Some(edge),
        };
        // The cut falls within window 40: the first part's frames in its first half.
        let (start_ns, end_ns) = (first * WN + u64::from(first > 0) * WN / 2, last * WN + WN / 2 - 1);
        Part { start_ns, end_ns, dcqcn: Some(d), acked: Vec::new() }
    }

    fn before_cut(w: u64) -> u64 {
        if w == 40 { 2_000 } else { bytes(w) }
    }

    fn after_cut(w: u64) -> u64 {
        if w == 40 { 3_000 } else { bytes(w) }
    }

    /// A CNP at 385 µs (window 38) was judged before the cut on windows up to 39 (no cut: the
    /// part ends at 40); one at 425 µs just after it had no rate before; one at 705 µs is
    /// inside the second part. One run: the first halved (10 000 before, 5 000 at 41: 0.5),
    /// reacted at window 40 (15 µs) and back at 46 (75 µs); the second cut from 8 000 (the mean
    /// of 37..41) to 5 000 (0.625), reacted at 43 (5 µs), back at 46 (35 µs); the third kept.
    #[test]
    fn cnps_near_a_cut_are_judged_on_the_windows_around_it() {
        let a = part(0, 40, &before_cut, Some(5_000), vec![cnp(385_000, Some((1_000_000, None, None)))]);
        let b_cnps = vec![cnp(425_000, None), cnp(705_000, Some((500_000, Some(5_000), Some(20_000))))];
        let b = part(40, 100, &after_cut, Some(425_000), b_cnps);
        let s = stitch(&[b, a], &FirstFrames::new()).expect("in series, with edges");
        assert_eq!(s.doubts, Doubts::default());
        let d = s.dcqcn.unwrap();
        let f = &d.flows[0].stats;
        assert_eq!((f.cnps, f.reacted, f.unreacted_cnps, f.no_rate_before, f.not_recovered), (3, 3, 0, 0, 0));
        assert_eq!((f.cut_ratio_p50, f.worst_cut_ratio), (Some(0.5), Some(0.5)));
        assert_eq!((f.reaction_ns_p50, f.recovery_ns_p50), (Some(5_000), Some(35_000)));
        // The plot: the first part's series from its watch, every frame of the second; the
        // window at the cut holds both parts' bytes.
        let p = &d.plots[0];
        assert_eq!((p.start_ns, p.point_ns, p.bytes.len()), (0, WN, 101));
        assert_eq!((p.bytes[39], p.bytes[40], p.bytes[41]), (10_000, 5_000, 5_000));
        assert_eq!(p.cnps_ns, [385_000, 425_000, 705_000]);
        assert!(s.findings.is_empty(), "{:?}", s.findings);
    }

    /// What a stitch cannot know is counted, the part's outcome kept: a flow that carries no
    /// requests (READ responses) has no windows from before its watch, so its CNP soon after a
    /// later part's own watch (at window 72, watched at 70) was judged there without the rate
    /// before that one run had; the windows before it are inside that part, not kept. And a
    /// later part's unattributed CNPs.
    #[test]
    fn what_the_parts_did_not_keep_is_counted() {
        let mut a = part(0, 40, &before_cut, Some(5_000), vec![cnp(385_000, Some((1_000_000, None, None)))]);
        let mut b = part(40, 100, &after_cut, Some(700_000), vec![cnp(725_000, None)]);
        for p in [&mut a, &mut b] {
            p.dcqcn.as_mut().unwrap().edge.as_mut().unwrap().flows[0].request = false;
        }
        b.dcqcn.as_mut().unwrap().unattributed_cnps = 2;
        let s = stitch(&[a, b], &FirstFrames::new()).unwrap();
        assert_eq!(s.doubts, Doubts { cnps: 1, attribution: 2, plots: 0, bounded: 0 });
        let f = &s.dcqcn.unwrap().flows[0].stats;
        assert_eq!((f.cnps, f.reacted, f.no_rate_before), (2, 1, 1), "the first judged again, the second kept");
    }

    /// The one flow's key in [`part`].
    fn key(qp: u32) -> FlowKey {
        flow_ref_key(&FlowRef { src: "10.0.0.1".into(), dst: "10.0.0.2".into(), udp_sport: 1, dst_qp: qp }).unwrap()
    }

    /// `p`'s CNPs it left unattributed: to 10.0.0.1's QP, from 10.0.0.2 unless told.
    fn strays(p: &mut Part, list: Vec<DcqcnStray>) {
        let d = p.dcqcn.as_mut().unwrap();
        d.unattributed_cnps = list.len() as u64;
        d.edge.as_mut().unwrap().unattributed = list;
    }

    fn stray(sender: &str, receiver: &str, qp: u32, ns: u64, several: bool) -> DcqcnStray {
        DcqcnStray(sender.into(), receiver.into(), qp, ns, several)
    }

    /// A CNP at 425 µs, just after the cut, that the second part left unattributed: it watched
    /// no flow from 10.0.0.1 to 10.0.0.2 yet, and no ACKs went to QP 3. One run watched the
    /// flow since the first part, and gives it the CNP by its hosts; it judges it as in
    /// [`cnps_near_a_cut_are_judged_on_the_windows_around_it`]: cut from 8 000 to 5 000
    /// (0.625), reacted in 5 µs, back in 35 µs.
    #[test]
    fn a_cnp_a_later_part_left_unattributed_is_one_run_s_flow_s() {
        let a = part(0, 40, &before_cut, Some(5_000), vec![cnp(385_000, Some((1_000_000, None, None)))]);
        let mut b = part(40, 100, &after_cut, None, Vec::new());
        strays(&mut b, vec![stray("10.0.0.1", "10.0.0.2", 3, 425_000, false)]);
        let s = stitch(&[a, b], &FirstFrames::new()).unwrap();
        assert_eq!(s.doubts, Doubts::default());
        let d = s.dcqcn.unwrap();
        assert_eq!(d.unattributed_cnps, 0);
        let f = &d.flows[0].stats;
        assert_eq!((f.cnps, f.reacted, f.no_rate_before, f.worst_cut_ratio), (2, 2, 0, Some(0.5)));
        assert_eq!(d.plots[0].cnps_ns, [385_000, 425_000]);
        assert_eq!(s.cuts[&key(7)], [(400_000, 460_000), (430_000, 460_000)]);
    }

    /// Which flow one run gives a later part's unattributed CNP. The first part watched two
    /// flows from 10.0.0.1 to 10.0.0.2 (QPs 7 and 8): by hosts, none (unattributed, as the part
    /// said); paired by the first part's RTT analysis (ACKs to QP 3 answered flow 7), flow 7.
    /// Doubted: a flow carrying ACKs to the QP that began before the CNP (its ACKs may have
    /// paired in one run where the part could not pair them).
    #[test]
    fn one_run_s_pairing_and_candidates_decide_a_later_part_s_unattributed_cnps() {
        let mut a = part(0, 40, &before_cut, Some(5_000), Vec::new());
        let e = a.dcqcn.as_mut().unwrap().edge.as_mut().unwrap();
        let other = DcqcnEdgeFlow { dst_qp: 8, ..e.flows[0].clone() };
        e.flows.push(other);
        let mut b = part(40, 100, &after_cut, None, Vec::new());
        strays(&mut b, vec![stray("10.0.0.1", "10.0.0.2", 3, 425_000, false)]);
        let s = stitch(&[a.clone(), b.clone()], &FirstFrames::new()).unwrap();
        assert_eq!((s.doubts, s.dcqcn.map(|d| d.unattributed_cnps)), (Doubts::default(), Some(1)));
        a.acked = vec![("10.0.0.1".into(), "10.0.0.2".into(), 3, key(7))];
        let s = stitch(&[a.clone(), b.clone()], &FirstFrames::new()).unwrap();
        assert_eq!(s.doubts, Doubts::default());
        let d = s.dcqcn.unwrap();
        assert_eq!((d.unattributed_cnps, d.flows.len(), d.flows[0].dst_qp, d.flows[0].stats.cnps), (0, 1, 7, 1));
        // ACKs to QP 3 before the CNP that no report paired; a stray to a QP whose ACK flow
        // began after it, between hosts no report watched: unattributed in one run too.
        a.acked.clear();
        strays(
            &mut b,
            vec![stray("10.0.0.1", "10.0.0.2", 3, 425_000, false), stray("10.0.0.5", "10.0.0.6", 4, 425_000, false)],
        );
        let back: FirstFrames =
            [(("10.0.0.2".into(), "10.0.0.1".into(), 3), 100), (("10.0.0.6".into(), "10.0.0.5".into(), 4), 700_000)]
                .into_iter()
                .collect();
        let s = stitch(&[a, b], &back).unwrap();
        assert_eq!((s.doubts.attribution, s.dcqcn.map(|d| d.unattributed_cnps)), (1, Some(2)));
    }

    /// A later part gave a CNP the one flow it watched between the hosts (by hosts): one run
    /// may have paired it with another flow the first part paired with its ACKs.
    #[test]
    fn a_cnp_given_by_hosts_after_another_flow_s_pairing_is_doubted() {
        let mut a = part(0, 40, &before_cut, Some(5_000), Vec::new());
        let mut b = part(40, 100, &after_cut, Some(425_000), vec![DcqcnEdgeCnp(425_000, true, None, None, None)]);
        let s = stitch(&[a.clone(), b.clone()], &FirstFrames::new()).unwrap();
        assert_eq!(s.doubts, Doubts::default());
        a.acked = vec![("10.0.0.1".into(), "10.0.0.2".into(), 3, key(8))];
        assert_eq!(stitch(&[a.clone(), b.clone()], &FirstFrames::new()).unwrap().doubts.attribution, 1);
        // Its own pairing: the same flow either way.
        a.acked[0].3 = key(7);
        b.acked = a.acked.clone();
        assert_eq!(stitch(&[a, b], &FirstFrames::new()).unwrap().doubts, Doubts::default());
    }

    /// Only flows that carry an AETH pair a CNP's QP: a flow of CNPs back to it does not.
    #[test]
    fn flows_back_that_pair_are_those_with_acks() {
        let of = |names: &[&'static str]| carries_acks(&names.iter().map(|n| (*n, 1)).collect());
        assert!(!of(&["CNP"]) && !of(&["RC_RDMA_WRITE_ONLY", "RC_SEND_ONLY"]));
        assert!(of(&["CNP", "RC_ACKNOWLEDGE"]) && of(&["RC_RDMA_READ_RESPONSE_ONLY"]));
        assert!(of(&["RC_ATOMIC_ACKNOWLEDGE"]) && of(&["XRC_ACKNOWLEDGE"]));
    }

    #[test]
    fn reports_that_overlap_or_lack_edges_are_not_stitched() {
        let a = part(0, 40, &before_cut, Some(5_000), Vec::new());
        let b = part(40, 100, &after_cut, None, Vec::new());
        let mut overlapping = b.clone();
        overlapping.start_ns = 300_000;
        assert!(stitch(&[a.clone(), b.clone()], &FirstFrames::new()).is_some());
        assert!(stitch(&[a.clone(), overlapping], &FirstFrames::new()).is_none());
        let mut bare = b.clone();
        bare.dcqcn.as_mut().unwrap().edge = None;
        assert!(stitch(&[a.clone(), bare], &FirstFrames::new()).is_none());
        // Without CNPs, one run has no section.
        assert!(stitch(&[a, b], &FirstFrames::new()).unwrap().dcqcn.is_none());
    }
}
