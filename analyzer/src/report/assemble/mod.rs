//! Assembling the report from a run's state: the engine's counters and the analyses' results
//! become the v1 document of [`crate::model`], with the audit, the visibility notes and the
//! fabric sections, which need the whole picture, computed here.

pub(crate) mod audit;
pub(crate) mod dcqcn;
pub(crate) mod fabric;
pub(crate) mod incast;
pub(crate) mod judged;
pub(crate) mod load_balancing;
pub(crate) mod messages;
pub(crate) mod vantage;
pub(crate) mod visibility;

use analyzer_common::FrameClass;
use analyzer_common::flow::FlowKey;
use analyzer_common::psn::PsnState;

use crate::engine::{DropReason, FlowStats};
use crate::model::*;
use crate::pipeline::Pipeline;

/// Offline (capture files) or live (an interface).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Offline,
    Live,
}

impl RunKind {
    /// As the report's `kind` says it.
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Offline => "offline",
            RunKind::Live => "live",
        }
    }
}

/// Whether a report holds the lists that grow with the flows (`flows`, `pairs`,
/// `ecmp.host_pairs`), or leaves them to be streamed from the run as it is written
/// ([`crate::report::write::write_json_streamed`]): a report of 200 000 flows would hold them
/// at about 1.6 KB a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    Held,
    Streamed,
}

impl Report {
    /// Builds the report of everything the run has seen.
    pub fn assemble(run: &Pipeline, kind: RunKind) -> Report {
        Report::assemble_with(run, kind, Lists::Held)
    }

    /// The same, with the growing lists held or left out ([`Lists`]).
    pub fn assemble_with(run: &Pipeline, kind: RunKind, lists: Lists) -> Report {
        let held = lists == Lists::Held;
        let flows = if held { flow_items(run).collect() } else { Vec::new() };
        let ecmp = fabric::ecmp(run, held);
        let judged = judged::judge(run, &ecmp);
        let mut report = Report {
            schema: SCHEMA.into(),
            tool: Tool { name: "roce-analyzer".into(), version: env!("CARGO_PKG_VERSION").into() },
            kind: kind.name().into(),
            diagnosis: Vec::new(),
            capture: capture(run),
            flows,
            pfc: judged.pfc,
            visibility: Vec::new(),
            nic: run.engine.nic.clone(),
            rtt_ns: rtt_summary(run),
            pairs: if held { pair_items(run).collect() } else { Vec::new() },
            cnp_pacing: pacing_json(run),
            cnp_interval: cnp_interval(run),
            audit: judged.audit,
            congestion_tree: fabric::congestion_tree(run),
            incast: incast::incast(run),
            ecmp,
            vantage: judged.vantage,
            dcqcn: dcqcn::section(run),
            marking: dcqcn::marking(run),
            messages: judged.messages,
            load_balancing: judged.load_balancing,
            evidence: None,
            export: None,
            output_failures: Vec::new(),
            trajectory: None,
            samples: None,
            export_identity: None,
        };
        report.visibility = visibility::notes(run, &report);
        report.diagnosis = crate::report::diagnose::diagnose(&report);
        report
    }
}

/// The engine's counts of cut and copied frames, as the report carries them.
fn noted(v: &crate::engine::Visibility) -> Noted {
    Noted {
        bth_cut: v.bth_cut,
        bth_needs: u64::from(v.bth_needs),
        ext_cut: v.ext_cut,
        cut_copies: v.cut_copies,
        mirrored: v.encapsulated,
        matched_copies: v.matched_copies,
        sightings_evicted: v.sightings_evicted,
    }
}

/// The `capture` section: sources, span, frames by class, every drop.
pub(crate) fn capture(run: &Pipeline) -> Capture {
    let classes = FrameClass::ALL.iter().map(|c| (c.name().to_string(), run.engine.class_count(*c))).collect();
    let dropped = DropReason::ALL
        .iter()
        .map(|r| {
            let n = match r {
                DropReason::AnalysisStateFull => run.analyses.state_full(),
                r => run.engine.dropped.get(r).copied().unwrap_or(0),
            };
            (r.name().to_string(), n)
        })
        .collect();
    Capture {
        filter: run
            .analyses
            .config
            .filter
            .as_ref()
            .map(|f| CaptureFilter { expr: f.text.clone(), frames_out: run.engine.filtered }),
        flows_folded: (run.engine.folded.flows > 0).then(|| {
            let f = run.engine.folded;
            FoldedFlows { flows: f.flows, packets: f.packets, bytes: f.bytes }
        }),
        sources: run
            .engine
            .sources
            .iter()
            .map(|s| SourceJson {
                kind: s.kind.clone(),
                name: s.name.clone(),
                label: s.label.clone(),
                xdp: s.xdp.clone(),
            })
            .collect(),
        start_ns: run.engine.first_ns.unwrap_or(0),
        end_ns: run.engine.last_ns.unwrap_or(0),
        partial: run.engine.partial,
        frames: run.engine.frames,
        classes,
        dropped,
        loss: capture_loss(run),
        noted: noted(&run.engine.visibility),
    }
}

/// The capture's own loss, when the ACKs showed any.
fn capture_loss(run: &Pipeline) -> Option<CaptureLoss> {
    let missed = run.analyses.messages.frames_missed();
    let roce = run.engine.class_count(FrameClass::Roce);
    (missed > 0).then(|| CaptureLoss { frames_missed: missed, ratio: missed as f64 / (roce + missed) as f64 })
}

fn psn_json(p: &PsnState, capture_missed: u64) -> (FlowPsn, Naks) {
    let psn = FlowPsn { sequence: PsnJson::new(p.count), responder: Responder::new(p.responder), capture_missed };
    (psn, Naks::new(p.aeth))
}

fn end_ns(run: &Pipeline) -> u64 {
    run.engine.last_ns.unwrap_or(0)
}

fn flow_rtt(run: &Pipeline, k: &FlowKey) -> Option<FlowRtt> {
    let rtt = &run.analyses.rtt;
    let (timeouts, pending) = rtt.outcome(&run.analyses.flows, k, end_ns(run));
    FlowRtt::of(rtt.flows.get(k).and_then(|r| r.samples.percentiles()), timeouts, pending)
}

/// Requests with AckReq timed out and still pending at the end of the run, over all flows.
pub(crate) fn rtt_waiting(run: &Pipeline) -> (u64, u64) {
    let rtt = &run.analyses.rtt;
    let (mut timeouts, mut pending) = (0, 0);
    let flows = &run.analyses.flows;
    for k in rtt.request_flows(flows) {
        let (t, p) = rtt.outcome(flows, k, end_ns(run));
        timeouts += t;
        pending += p;
    }
    (timeouts, pending)
}

fn rtt_summary(run: &Pipeline) -> RttSummary {
    let rtt = &run.analyses.rtt;
    let (timeouts, pending) = rtt_waiting(run);
    let mut summary = RttSummary {
        histogram: None,
        percentiles: Percentiles::default(),
        timeouts,
        pending,
        ambiguous_acks: rtt.ambiguous_acks,
        unpaired_acks: rtt.unpaired_acks,
        cm_paired: rtt.cm_paired,
        pending_evicted: rtt.pending_evicted,
        timeout_ns: run.analyses.config.rtt_timeout_ns,
    };
    crate::report::rtt_merge::set_percentiles(&mut summary, &rtt.overall());
    summary
}

/// The report's flows, in key order, one at a time.
pub fn flow_items(run: &Pipeline) -> impl Iterator<Item = Flow> + '_ {
    let flows = &run.engine.flows;
    let mut order: Vec<u32> = (0..flows.len() as u32).collect();
    order.sort_unstable_by_key(|i| flow_order(flows.at(*i as usize).0));
    let rnr = run.engine.heads.as_ref().map(|_| run.engine.rnr_notes()).unwrap_or_default();
    order.into_iter().map(move |i| {
        let (k, s) = flows.at(i as usize);
        Flow { edge: flow_edge(run, i as usize, k, s, &rnr), ..flow_json(run, k, s) }
    })
}

/// A flow's edge (`--edges`): its head as the engine kept it, its state at the end, the notes
/// the engine still holds for it (`rnr`: [`crate::engine::Engine::rnr_notes`]).
fn flow_edge(
    run: &Pipeline,
    i: usize,
    k: &FlowKey,
    s: &FlowStats,
    rnr: &rustc_hash::FxHashMap<([u8; 16], [u8; 16]), Vec<u32>>,
) -> Option<FlowEdge> {
    let head = run.engine.heads.as_ref()?.get(i);
    Some(FlowEdge {
        read_note: run.engine.read_note(k, &s.psn.seq).unwrap_or(0),
        rnr_psns: rnr.get(&(k.src, k.dst)).cloned().unwrap_or_default(),
        default_pmtu: run.analyses.config.pmtu,
        rtt: rtt_edge(run, k),
        acks: run.analyses.rtt.edges.as_ref().and_then(|e| e.get(k)).cloned(),
        gaps: run.analyses.flows.get(k).and_then(|f| f.messages.as_ref()).map(|m| m.open_gaps()).unwrap_or_default(),
        marking: run.analyses.flows.get(k).and_then(|f| f.marking.as_ref()).map(|m| edge_marking(run, m)),
        late: run
            .analyses
            .messages
            .reorder
            .flows
            .get(k)
            .map(|r| r.sorted().into_iter().map(|(d, n)| [d as u64, n]).collect())
            .unwrap_or_default(),
        ..crate::engine::edges::edge(head, s.psn.seq)
    })
}

/// A flow's marking as its edge carries it, with the run's expected DSCPs.
fn edge_marking(run: &Pipeline, m: &crate::analyses::ecn::FlowMarking) -> crate::model::edge::EdgeMarking {
    let cfg = &run.analyses.config;
    crate::model::edge::EdgeMarking {
        data: m.data,
        data_not_ect: m.data_not_ect,
        data_other_dscp: m.data_other_dscp,
        cnps: m.cnps,
        cnp_other_dscp: m.cnp_other_dscp,
        seen_data_dscp: m.seen_data_dscp,
        seen_cnp_dscp: m.seen_cnp_dscp,
        roce_dscp: cfg.roce_dscp,
        cnp_dscp: cfg.cnp_dscp,
    }
}

/// A request flow's RTT edge: its samples, its requests waiting at the end, its ACK flow, its
/// first AckReq requests (none for a flow with none of them).
fn rtt_edge(run: &Pipeline, k: &FlowKey) -> Option<crate::model::edge::EdgeRtt> {
    let rtt = &run.analyses.rtt;
    let f = rtt.flows.get(k);
    let (waiting, waiting_cut) = rtt.waiting_list(&run.analyses.flows, k);
    let ack_flow = f.and_then(|f| f.ack_flow).map(|a| crate::model::flow_ref(&a));
    let samples = f.map(|f| &f.samples).filter(|s| !s.is_empty());
    let (requests, requests_cut) = rtt.edges.as_ref().and_then(|e| e.requests(k)).cloned().unwrap_or_default();
    if samples.is_none() && waiting.is_empty() && ack_flow.is_none() && requests.is_empty() {
        return None;
    }
    let e = samples.map(|s| s.to_edge()).unwrap_or_default();
    Some(crate::model::edge::EdgeRtt { waiting, waiting_cut, ack_flow, requests, requests_cut, ..e })
}

/// The report's CE/CNP pairs, in key order, one at a time.
pub fn pair_items(run: &Pipeline) -> impl Iterator<Item = Pair> + '_ {
    let e = &run.analyses.ecn;
    // One interval for the whole report (inferring it looks at every notified QP).
    let interval = e.interval();
    let mut pairs: Vec<_> = e.pairs().collect();
    pairs.sort_unstable_by_key(|(k, _)| **k);
    pairs.into_iter().map(move |(((a, v), (b, _)), p)| {
        let (ce_unanswered, ce_covered) = p.split(end_ns(run), e.timeout_ns, interval);
        Pair {
            a: addr_string(*v, a),
            b: addr_string(*v, b),
            data_packets: p.data_packets,
            ce: p.ce,
            cnp_back: p.cnp_back,
            ce_unanswered,
            ce_covered,
            ce_pending: p.pending(end_ns(run), e.timeout_ns),
            edge: e.edges.then(|| p.edge(e.timeout_ns)).flatten(),
        }
    })
}

fn cnp_interval(run: &Pipeline) -> CnpInterval {
    use crate::analyses::ecn::Interval;
    match run.analyses.ecn.interval() {
        Interval::Given(ns) => CnpInterval { ns, source: "given".into() },
        Interval::Inferred(ns) => CnpInterval { ns, source: "inferred".into() },
        Interval::Unknown => CnpInterval::default(),
    }
}

fn pacing_json(run: &Pipeline) -> Vec<CnpPacing> {
    let mut pacing: Vec<_> = run.analyses.ecn.pacing.iter().collect();
    pacing.sort_unstable_by_key(|(k, _)| **k);
    pacing
        .into_iter()
        .map(|(((addr, v), qp), p)| {
            let (min_gap_ns, median_gap_ns) = crate::analyses::ecn::gap_stats(&mut p.gaps.clone());
            CnpPacing {
                dst: addr_string(*v, addr),
                dst_qp: *qp,
                cnps: p.cnps,
                min_gap_ns,
                median_gap_ns,
                edge: run.analyses.ecn.edges.then(|| PacingEdge {
                    first_ns: p.first.unwrap_or(0),
                    last_ns: p.last.unwrap_or(0),
                    gaps_ns: p.gaps.clone(),
                }),
            }
        })
        .collect()
}

pub(crate) fn flow_json(run: &Pipeline, k: &FlowKey, s: &FlowStats) -> Flow {
    let mut pcp: CountMap = s.pcp.sorted().into_iter().map(|(p, n)| (count_map::number_name(p), n)).collect();
    if s.untagged > 0 {
        pcp.add("untagged", s.untagged);
    }
    let mut labels: Vec<String> = (0..64)
        .filter(|i| s.sources & (1u64 << i) != 0)
        .filter_map(|i| run.engine.sources.get(i).map(|src| src.label.clone()))
        .collect();
    labels.dedup();
    let (psn, naks) = psn_json(&s.psn, run.analyses.messages.capture_missed.get(k).copied().unwrap_or(0));
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
        opcodes: s.opcodes.sorted().into_iter().map(|(o, n)| (names::opcode_name_static(o), n)).collect(),
        ecn: Ecn { not_ect: s.ecn[0], ect1: s.ecn[1], ect0: s.ecn[2], ce: s.ecn[3] },
        dscp: s.dscp.sorted().into_iter().map(|(d, n)| (count_map::number_name(d), n)).collect(),
        pcp,
        fecn: s.fecn,
        becn: s.becn,
        ack_req: s.ack_req,
        labels,
        psn,
        naks,
        rtt_ns: flow_rtt(run, k),
        edge: None,
    }
}
