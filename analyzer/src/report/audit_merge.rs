//! The audit of a merged report. Reports of one capture cut in time: the transport findings
//! (PSN, NAK and RTT patterns per flow) are computed again over the merged flows, whose counters
//! were stitched across the cuts, and the CE/CNP findings over the merged pairs (when the parts
//! carry `--cnp-timeout` in their pairs' edges) and the marking findings over the flows' marking
//! counts (when every part carries its edges), with the functions a run uses, so they are one
//! run's findings (one per flow or pair, not one per part); the DCQCN findings stay each
//! report's, named by its file. Reports of several points keep every finding per report: their
//! flows' counts are sums of several views.

use std::collections::BTreeMap;

use analyzer_common::psn::aeth;

use super::assemble::audit::{
    Carrier, FlowFacts, PairFacts, feedback_findings, in_run_order, is_feedback, is_marking, is_transport,
    marking_findings, transport_findings,
};
use super::psn_stitch::Part;
use super::rtt_stitch::{FlowId, ack_id, id_of};
use crate::analyses::ecn::Interval;
use crate::model::{CnpInterval, FindingCode, Flow, PfcEdge, Report, names};

/// Request flows and the flows of their ACKs, both ways, as the parts paired them.
fn peers(parts: &BTreeMap<FlowId, Vec<Part>>) -> BTreeMap<FlowId, FlowId> {
    let mut m = BTreeMap::new();
    for (id, ps) in parts {
        let acks = ps.iter().filter_map(|p| p.edge.as_ref()?.rtt.as_ref()?.ack_flow.as_ref());
        if let Some(a) = acks.into_iter().next() {
            let ack = ack_id(id.0, a);
            m.entry(ack.clone()).or_insert_with(|| id.clone());
            m.entry(id.clone()).or_insert(ack);
        }
    }
    m
}

/// AETHs of one kind each merged flow's receiver sent back: on its paired ACK flow when the
/// reports paired them, else on every flow from its destination to its source (as a run reads
/// them, `assemble::audit::reverse_aeth`).
pub struct Back {
    peers: BTreeMap<FlowId, FlowId>,
    aeths: BTreeMap<FlowId, [u64; aeth::COUNT]>,
    /// AETHs per (IP version, source, destination), over the flows that carried any.
    hosts: BTreeMap<(u8, String, String), [u64; aeth::COUNT]>,
}

impl Back {
    pub fn of(flows: &[Flow], parts: &BTreeMap<FlowId, Vec<Part>>) -> Back {
        let mut hosts: BTreeMap<(u8, String, String), [u64; aeth::COUNT]> = BTreeMap::new();
        for f in flows.iter().filter(|f| f.naks.values.iter().any(|n| *n > 0)) {
            let e = hosts.entry((f.ip_version, f.src.clone(), f.dst.clone())).or_default();
            e.iter_mut().zip(f.naks.values).for_each(|(t, v)| *t += v);
        }
        Back { peers: peers(parts), aeths: flows.iter().map(|f| (id_of(f), f.naks.values)).collect(), hosts }
    }

    /// The AETHs of `kind` back to `f`'s sender.
    pub fn get(&self, f: &Flow, kind: usize) -> u64 {
        match self.peers.get(&id_of(f)) {
            Some(peer) => self.aeths.get(peer).map_or(0, |a| a[kind]),
            None => self.hosts.get(&(f.ip_version, f.dst.clone(), f.src.clone())).map_or(0, |a| a[kind]),
        }
    }
}

/// The interval a report's `cnp_interval` names.
fn interval_of(i: &CnpInterval) -> Interval {
    match i.source.as_str() {
        "given" => Interval::Given(i.ns),
        "inferred" => Interval::Inferred(i.ns),
        _ => Interval::Unknown,
    }
}

/// The merged pairs' CE/CNP findings, when `--cnp-timeout` is known (`timeout_ns`, from the
/// parts' pair edges).
fn feedback(report: &Report, timeout_ns: u64) -> Vec<crate::model::Finding> {
    let pairs: Vec<PairFacts> = report
        .pairs
        .iter()
        .map(|p| PairFacts {
            a: p.a.clone(),
            b: p.b.clone(),
            ce: p.ce,
            cnp_back: p.cnp_back,
            unanswered: p.ce_unanswered,
            covered: p.ce_covered,
        })
        .collect();
    // A flow carried data when it has a data opcode, CNPs when it has CNPs (as the run counts).
    let data: std::collections::BTreeSet<&str> = (0..=255u8)
        .filter(|o| analyzer_common::opcode::is_data(*o) && *o != analyzer_common::opcode::CNP)
        .map(names::opcode_name_static)
        .collect();
    let carriers = |wanted: &[(&str, &str)]| {
        let named = report.flows.iter().filter(|f| wanted.contains(&(f.src.as_str(), f.dst.as_str())));
        let flows = named.map(|f| {
            let carried = |name: &str| f.opcodes.iter().any(|(n, c)| *c > 0 && n == name);
            let has_data = f.opcodes.iter().any(|(n, c)| *c > 0 && data.contains(n));
            (f.flow_ref(), has_data, carried("CNP"))
        });
        flows.filter(|(_, d, c)| *d || *c).collect::<Vec<Carrier>>()
    };
    feedback_findings(&pairs, interval_of(&report.cnp_interval), timeout_ns, carriers)
}

/// The merged flows' marking findings, when every part carries its edge and the parts expected
/// the same DSCPs: each flow's counts added, the first other DSCP its earliest part saw.
fn marking(parts: &BTreeMap<FlowId, Vec<Part>>) -> Option<Vec<crate::model::Finding>> {
    let mut expected = None;
    let mut flows = Vec::new();
    for (id, ps) in parts {
        let mut ps: Vec<&Part> = ps.iter().collect();
        ps.sort_by_key(|p| p.start_ns);
        let mut m = crate::analyses::ecn::FlowMarking::default();
        let mut any = false;
        for e in ps.iter().map(|p| p.edge.as_ref().map(|e| e.marking)) {
            let Some(e) = e? else { continue };
            if *expected.get_or_insert((e.roce_dscp, e.cnp_dscp)) != (e.roce_dscp, e.cnp_dscp) {
                return None;
            }
            (m.data, m.data_not_ect, m.data_other_dscp) =
                (m.data + e.data, m.data_not_ect + e.data_not_ect, m.data_other_dscp + e.data_other_dscp);
            (m.cnps, m.cnp_other_dscp) = (m.cnps + e.cnps, m.cnp_other_dscp + e.cnp_other_dscp);
            m.seen_data_dscp = m.seen_data_dscp.or(e.seen_data_dscp);
            m.seen_cnp_dscp = m.seen_cnp_dscp.or(e.seen_cnp_dscp);
            any = true;
        }
        let flow = super::rtt_stitch::ref_of(id);
        if let (true, Some(key)) = (any, crate::model::flow_ref_key(&flow)) {
            flows.push((key, m));
        }
    }
    let (roce, cnp) = expected.unwrap_or_default();
    Some(marking_findings(&|| flows.iter().map(|(k, m)| (k, m)), roce, cnp))
}

/// Load balancing's findings over the merged section, as one run makes them (its
/// `spraying_without_ooo`, and its words on the recomputed `go_back_n` and `reordering` of
/// sprayed flows in `audit`), when the section is one run's and lists every sprayed flow.
/// Whether it did.
fn load_balancing(report: &Report, audit: &mut Vec<crate::model::Finding>) -> bool {
    let said = report.visibility.iter().any(|n| n.code == crate::model::NoteCode::LoadBalancingNotMerged);
    let Some(lb) = report.load_balancing.as_ref().filter(|lb| !said && lb.sprayed_omitted == 0) else { return false };
    let first: BTreeMap<FlowId, u64> = report.flows.iter().map(|f| (id_of(f), f.first_ns)).collect();
    let mut sprayed: Vec<(u64, _)> = Vec::new();
    for s in &lb.sprayed {
        let Some(key) = crate::model::flow_ref_key(&s.flow) else { return false };
        let at = first.get(&ack_id(key.ip_version, &s.flow)).copied().unwrap_or(u64::MAX);
        sprayed.push((at, (key, s.clone())));
    }
    sprayed.sort_by_key(|(at, (k, _))| (*at, *k));
    let sprayed: Vec<_> = sprayed.into_iter().map(|(_, s)| s).collect();
    crate::report::assemble::load_balancing::findings(&sprayed, audit);
    true
}

/// Replaces the reports' PFC findings (`pfc_before_ecn`, `pfc_rate_high`) with those of the
/// merged PFC section, as one run judges them, when every report carries its PFC edge with the
/// same `--pfc-rate-max` (`edges`: each report's).
pub fn pfc(report: &mut Report, edges: &[Option<PfcEdge>]) {
    let Some(Some(first)) = edges.first() else { return };
    if edges.iter().any(|e| e.as_ref().is_none_or(|e| e.rate_max != first.rate_max)) {
        return;
    }
    let unknown: u64 = edges.iter().flatten().map(|e| e.unknown_priority_data_frames).sum();
    let rates = &report.pfc.rates;
    let data_seen = |p: u8| unknown > 0 || rates.iter().any(|r| r.priority == p && r.data_frames > 0);
    let found = crate::report::assemble::fabric::pfc_findings(&report.pfc, first.rate_max, data_seen);
    report.audit.retain(|f| !matches!(f.code, FindingCode::PfcBeforeEcn | FindingCode::PfcRateHigh));
    report.audit.extend(found);
    in_run_order(&mut report.audit);
}

/// Replaces the reports' transport findings with those of the merged flows (`parts`: each
/// flow's sight in each report, for the pairing of requests and ACKs), and their CE/CNP findings
/// with those of the merged pairs when `cnp_timeout_ns` is known, and their PFC findings
/// ([`pfc`]; `pfc_edges`: each report's PFC edge).
pub fn recompute(
    report: &mut Report,
    parts: &BTreeMap<FlowId, Vec<Part>>,
    cnp_timeout_ns: Option<u64>,
    pfc_edges: &[Option<PfcEdge>],
) {
    let b = Back::of(&report.flows, parts);
    let back = |f: &Flow, kind: usize| b.get(f, kind);
    let facts = report.flows.iter().map(|f| FlowFacts {
        flow: f.flow_ref(),
        count: f.psn.sequence.values,
        aeth: f.naks.values,
        naks_back: back(f, aeth::PSN_SEQUENCE_ERROR),
        rnrs_back: back(f, aeth::RNR),
        missed: f.psn.capture_missed,
        rtt_timeouts: f.rtt_ns.map_or(0, |r| r.timeouts),
    });
    let mut audit = transport_findings(facts, report.rtt_ns.timeout_ns);
    if let Some(t) = cnp_timeout_ns {
        audit.extend(feedback(report, t));
    }
    let marks = marking(parts);
    let marked = marks.is_some();
    audit.extend(marks.into_iter().flatten());
    let balanced = load_balancing(report, &mut audit);
    let recomputed = |f: &crate::model::Finding| {
        is_transport(f.code)
            || (cnp_timeout_ns.is_some() && is_feedback(f.code))
            || (marked && is_marking(f.code))
            || (balanced && f.code == FindingCode::SprayingWithoutOoo)
    };
    audit.extend(report.audit.drain(..).filter(|f| !recomputed(f)));
    in_run_order(&mut audit);
    report.audit = audit;
    pfc(report, pfc_edges);
}
