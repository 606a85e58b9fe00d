//! The `dcqcn` section (per flow and per sender host) and its findings: `cnp_ignored`,
//! `slow_recovery`, `cnp_storm`.

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;

use crate::analyses::dcqcn::FlowSummary;
use crate::model::*;
use crate::pipeline::Pipeline;

/// A flow kept its rate after at least this many CNPs judged, none reacted to: `cnp_ignored`.
pub const IGNORED_MIN_CNPS: u64 = 3;
/// A flow with at least this many CNPs closer than half the pacing interval, and at least
/// half of its CNPs so: `cnp_storm`.
pub const STORM_MIN_CNPS: u64 = 10;

/// A flow's (or host's) stats as the report gives them.
pub fn stats(s: &FlowSummary) -> DcqcnStats {
    let cuts = s.cuts.percentiles();
    DcqcnStats {
        cnps: s.cnps,
        reacted: s.reacted,
        unreacted_cnps: s.unreacted,
        no_rate_before: s.no_rate_before,
        not_recovered: s.not_recovered,
        cut_ratio_p50: cuts.as_ref().map(|p| p.p50 as f64 / 1e6),
        worst_cut_ratio: cuts.as_ref().map(|p| p.min as f64 / 1e6),
        reaction_ns_p50: s.reactions.percentiles().map(|p| p.p50),
        recovery_ns_p50: s.recoveries.percentiles().map(|p| p.p50),
    }
}

/// Flows plotted in the HTML page, at most.
pub const MAX_PLOTS: usize = 8;

/// A flow and its CNPs' outcomes.
pub type Judged = (FlowKey, FlowSummary);

/// What the findings are judged with: a run's settings, or a merge's from its reports' edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judging {
    pub window_ns: u64,
    pub horizon_ns: u64,
    pub slow_recovery_ns: u64,
    pub cnp_interval_ns: Option<u64>,
}

impl Judging {
    fn of(run: &Pipeline) -> Judging {
        let (d, cfg) = (&run.analyses.dcqcn, &run.analyses.config);
        Judging {
            window_ns: d.window_ns(),
            horizon_ns: d.horizon_ns(),
            slow_recovery_ns: cfg.dcqcn_slow_recovery_ns,
            cnp_interval_ns: cfg.cnp_interval_ns,
        }
    }
}

/// The section, when any CNP was seen (with `--edges`, when any frame was: a part of a
/// capture cut in time without CNPs has windows and frames `merge` counts).
pub fn section(run: &Pipeline) -> Option<Dcqcn> {
    let d = &run.analyses.dcqcn;
    let flows = d.flows();
    let edge = d.edges().and_then(|e| edge(run, e));
    if flows.is_empty() && d.unattributed == 0 && edge.is_none() {
        return None;
    }
    let series = |k: &FlowKey| d.series(k).map(|s| (rate_json(s, d.window_ns()), s.cnps.clone()));
    let plots = plots(&flows, &findings_over(&flows, &Judging::of(run)), &series);
    Some(Dcqcn {
        rate_window_ns: d.window_ns(),
        horizon_ns: d.horizon_ns(),
        unattributed_cnps: d.unattributed,
        flows: flows_json(&flows),
        hosts: hosts(&flows),
        plots,
        edge,
    })
}

/// A flow's series and its CNPs' times (the first [`crate::analyses::marking::SERIES_POINTS`]).
pub type Plotted = (DcqcnSeries, Vec<u64>);

/// The plots: the flows the findings name, then those with the most CNPs, among those with a
/// series (`series`).
pub fn plots(flows: &[Judged], findings: &[Finding], series: &dyn Fn(&FlowKey) -> Option<Plotted>) -> Vec<DcqcnPlot> {
    let named: Vec<&FlowRef> = findings.iter().flat_map(|f| &f.flows).collect();
    let mut order: Vec<&Judged> = flows.iter().collect();
    order.sort_by_key(|(k, s)| (!named.contains(&&flow_ref(k)), std::cmp::Reverse(s.cnps), *k));
    order
        .iter()
        .filter_map(|(k, _)| series(k).map(|s| (k, s)))
        .take(MAX_PLOTS)
        .map(|(k, (s, cnps))| DcqcnPlot {
            src: addr_string(k.ip_version, &k.src),
            dst: addr_string(k.ip_version, &k.dst),
            udp_sport: k.udp_sport,
            dst_qp: k.dst_qp,
            start_ns: s.start_ns,
            point_ns: s.point_ns,
            bytes: s.bytes,
            frames: s.frames,
            ce: s.ce,
            cnps_ns: cnps,
        })
        .collect()
}

/// A rate series as the report gives it.
fn rate_json(s: &crate::analyses::marking::Series, window_ns: u64) -> DcqcnSeries {
    DcqcnSeries {
        start_ns: s.first_window() * window_ns,
        point_ns: s.windows * window_ns,
        bytes: s.bytes.clone(),
        frames: s.frames.clone(),
        ce: s.ce.clone(),
    }
}

/// `--edges`: every data flow's windows near the report's ends, frames and CNPs, and every
/// watched flow's series.
fn edge(run: &Pipeline, e: &crate::analyses::dcqcn::edge::Edges) -> Option<DcqcnEdge> {
    let (d, first) = (&run.analyses.dcqcn, e.first?);
    let mut keys: Vec<&FlowKey> = e.keys().chain(d.watched().filter(|k| e.get(k).is_none())).collect();
    keys.sort_unstable();
    let wn = d.window_ns();
    let flows = keys
        .into_iter()
        .map(|k| {
            let f = e.get(k);
            let log = d.log(k);
            let cnps = log.iter().flat_map(|(_, l)| l).map(|c| {
                let o = c.outcome;
                let cut = o.map(|o| (o.cut_ratio * 1e6).round() as u64);
                DcqcnEdgeCnp(c.ts_ns, c.by_hosts, cut, o.and_then(|o| o.reaction_ns), o.and_then(|o| o.recovery_ns))
            });
            DcqcnEdgeFlow {
                src: addr_string(k.ip_version, &k.src),
                dst: addr_string(k.ip_version, &k.dst),
                udp_sport: k.udp_sport,
                dst_qp: k.dst_qp,
                request: f.is_some_and(|f| f.request),
                watched_ns: log.as_ref().map(|l| l.0),
                cnps: cnps.collect(),
                windows: f
                    .map(|f| f.windows(first, e.last, d.reach()))
                    .unwrap_or_default()
                    .iter()
                    .map(|(w, b)| [*w, *b])
                    .collect(),
                all: f.map(|f| rate_json(&f.all, wn)),
                series: d.series(k).map(|s| rate_json(s, wn)),
            }
        })
        .collect();
    let cfg = &run.analyses.config;
    Some(DcqcnEdge {
        first_window: first,
        last_window: e.last,
        slow_recovery_ns: cfg.dcqcn_slow_recovery_ns,
        cnp_interval_ns: cfg.cnp_interval_ns,
        state_full: d.state_full,
        flows_over: e.over,
        flows,
        unattributed: e
            .strays
            .iter()
            .map(|s| {
                let (sender, receiver) = (addr_string(s.ip_version, &s.sender), addr_string(s.ip_version, &s.receiver));
                DcqcnStray(sender, receiver, s.qp, s.ts_ns, s.several)
            })
            .collect(),
        unattributed_over: e.strays_over,
    })
}

/// The flows as the section lists them.
pub fn flows_json(flows: &[Judged]) -> Vec<DcqcnFlow> {
    let flow = |(k, s): &Judged| DcqcnFlow {
        src: addr_string(k.ip_version, &k.src),
        dst: addr_string(k.ip_version, &k.dst),
        udp_sport: k.udp_sport,
        dst_qp: k.dst_qp,
        stats: stats(s),
    };
    flows.iter().map(flow).collect()
}

/// Per sender host, the summaries of its flows (the section's `hosts`; the metrics').
pub fn hosts(flows: &[Judged]) -> Vec<DcqcnHost> {
    let mut hosts: BTreeMap<(u8, [u8; 16]), (u64, FlowSummary)> = BTreeMap::new();
    for (k, s) in flows {
        let h = hosts.entry((k.ip_version, k.src)).or_default();
        h.0 += 1;
        h.1.absorb(s);
    }
    hosts.iter().map(|((v, a), (n, s))| DcqcnHost { src: addr_string(*v, a), flows: *n, stats: stats(s) }).collect()
}

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1000.0)
}

/// The findings about senders' reaction to CNPs.
pub fn findings(run: &Pipeline) -> Vec<Finding> {
    findings_over(&run.analyses.dcqcn.flows(), &Judging::of(run))
}

/// Whether a finding is one of [`findings`]' (a merge recomputes them).
pub fn is_dcqcn(code: FindingCode) -> bool {
    matches!(code, FindingCode::CnpIgnored | FindingCode::SlowRecovery | FindingCode::CnpStorm)
}

/// The same over flows judged already.
pub fn findings_over(flows: &[Judged], j: &Judging) -> Vec<Finding> {
    let mut out = Vec::new();
    let ignored: Vec<&Judged> =
        flows.iter().filter(|(_, s)| s.unreacted >= IGNORED_MIN_CNPS && s.reacted == 0).collect();
    if !ignored.is_empty() {
        let cnps: u64 = ignored.iter().map(|(_, s)| s.unreacted).sum();
        out.push(Finding::new(
            Severity::Warning,
            FindingCode::CnpIgnored,
            format!(
                "{} flows kept their rate after {cnps} CNPs (no {}-window fell below 90 % of the rate before within {}): \
                 DCQCN is off on their priority, or the CNPs do not reach the sender's NIC",
                ignored.len(),
                us(j.window_ns),
                us(j.horizon_ns)
            ),
            ignored.iter().map(|(k, _)| flow_ref(k)).collect(),
        ));
    }
    let slow: Vec<(&FlowKey, u64)> = flows
        .iter()
        .filter_map(|(k, s)| s.recoveries.percentiles().map(|p| (k, p.p50)))
        .filter(|(_, p50)| *p50 > j.slow_recovery_ns)
        .collect();
    if !slow.is_empty() {
        let worst = slow.iter().map(|(_, t)| *t).max().unwrap_or(0);
        out.push(Finding::new(
            Severity::Warning,
            FindingCode::SlowRecovery,
            format!(
                "{} flows took longer than {} (median over their CNPs; slowest {}) to come back to 90 % of their rate \
                 after a CNP: DCQCN's recovery timers or rate increase steps are slow for this fabric",
                slow.len(),
                us(j.slow_recovery_ns),
                us(worst)
            ),
            slow.iter().map(|(k, _)| flow_ref(k)).collect(),
        ));
    }
    let storm: Vec<&Judged> =
        flows.iter().filter(|(_, s)| s.close_cnps >= STORM_MIN_CNPS && s.close_cnps * 2 >= s.cnps).collect();
    if !storm.is_empty() {
        let (close, all): (u64, u64) = storm.iter().fold((0, 0), |(c, a), (_, s)| (c + s.close_cnps, a + s.cnps));
        let pacing = j.cnp_interval_ns.unwrap_or(crate::analyses::dcqcn::DEFAULT_PACING_NS);
        out.push(Finding::new(
            Severity::Warning,
            FindingCode::CnpStorm,
            format!(
                "{} flows got {close} of their {all} CNPs less than half a pacing interval ({}{}) after the previous one: \
                 more than a notification point pacing CNPs per flow sends",
                storm.len(),
                us(pacing),
                if j.cnp_interval_ns.is_some() { ", given" } else { ", the DCQCN default: give --cnp-interval" }
            ),
            storm.iter().map(|(k, _)| flow_ref(k)).collect(),
        ));
    }
    out
}

/// The `marking` section, when any data frame was CE-marked (with `--edges`, when any data
/// frame was seen: a part of a capture cut in time without marks has frames `merge` counts).
pub fn marking(run: &Pipeline) -> Option<Marking> {
    let m = &run.analyses.marking;
    let (classes, priorities) = marking_sets(&m.marked, m.window_ns());
    let edge = m.before.as_deref().map(|b| {
        let (classes, priorities) = marking_sets(b, m.window_ns());
        MarkingEdge { first_mark_ns: m.first_mark_ns, classes, priorities }
    });
    let seen = !classes.is_empty() || edge.as_ref().is_some_and(|e| !e.classes.is_empty());
    seen.then_some(Marking { classes, priorities, edge })
}

fn marking_sets(s: &crate::analyses::marking::Sets, window_ns: u64) -> (Vec<MarkingClass>, Vec<MarkingPriority>) {
    let classes = s.classes.iter().map(|(dscp, s)| MarkingClass { dscp: *dscp, series: series_json(s, window_ns) });
    let priorities = s
        .priorities
        .iter()
        .map(|(pcp, s)| MarkingPriority { pcp: (*pcp < 8).then_some(*pcp), series: series_json(s, window_ns) });
    (classes.collect(), priorities.collect())
}

/// A marking series as the report gives it, its points `window_ns` × their width.
pub fn series_json(s: &crate::analyses::marking::Series, window_ns: u64) -> MarkingSeries {
    MarkingSeries {
        start_ns: s.first_window() * window_ns,
        point_ns: s.windows * window_ns,
        frames: s.frames.clone(),
        ce: s.ce.clone(),
    }
}
