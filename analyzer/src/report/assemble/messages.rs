//! The `messages` section and its findings (`tail_dominated_by`, `ring_straggler`): the
//! messages analysis' distributions, the tail laid over the pauses, DCQCN cuts and incast
//! episodes of the same run, steadiness and rings.

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;

use crate::analyses::keys::Addr;
use crate::analyses::messages::dist::{self, Dist, SLOWDOWN_SCALE};
use crate::analyses::messages::kept::Msg;
use crate::analyses::messages::steady::{self, Windows};
use crate::analyses::messages::tail::{self, CAUSES, Context, Kept, Paused, Slowest};
use crate::analyses::messages::{self, flow_pending, rings};
use crate::analyses::stats::Samples;
use crate::analyses::topology::{Node, Topology};
use crate::analyses::tree;
use crate::model::*;
use crate::pipeline::Pipeline;

pub(crate) fn pct(s: &Samples) -> Percentiles {
    s.percentiles().unwrap_or(Percentiles { exact: true, ..Default::default() })
}

fn slowdown(s: &Samples, q: f64) -> Option<f64> {
    s.quantile(q).map(|v| v as f64 / SLOWDOWN_SCALE)
}

pub(crate) fn stats(d: &Dist) -> MessageStats {
    MessageStats {
        messages: d.mct.len(),
        bytes: d.bytes,
        mct_ns: pct(&d.mct),
        goodput_bps_p50: d.goodput.quantile(0.5),
        slowdown_p50: slowdown(&d.slowdown, 0.5),
        slowdown_p99: slowdown(&d.slowdown, 0.99),
    }
}

pub(crate) fn addr(a: &Addr) -> String {
    addr_string(a.1, &a.0)
}

fn steady_json(w: &Windows) -> Option<Steady> {
    steady::steadiness(&w.rates).map(|s| Steady {
        windows: s.windows,
        p5_bps: s.p5,
        p50_bps: s.p50,
        p95_bps: s.p95,
        fluctuation: s.fluctuation,
    })
}

/// Messages pending (over all flows) and partial ones, when any message was seen (the section
/// exists). Summed, not kept per flow: a capture of 200 000 one-message flows has as many
/// flows with one pending, and a map of them was the report's largest allocation.
fn seen(run: &Pipeline) -> Option<(u64, u64)> {
    let m = &run.analyses.messages;
    let (mut pending, mut partial) = (0, m.partial);
    for (_, state) in run.analyses.flows.messages() {
        let (n, held) = flow_pending(state);
        partial += held;
        pending += n;
    }
    // UC messages only partly seen (a LAST without its FIRST, one being sent at the end) are
    // counted here too: a capture of nothing else still says so.
    let transfers = m.uc.mct.len() + m.ud_messages + m.uc_partial + m.uc_open();
    // With --edges, UC frames that counted nothing (a MIDDLE) may continue a message the
    // capture before was sending: the edge carries them.
    let edge = m.log.is_some() && !m.uc_heads.is_empty();
    let any = m.completed() > 0 || pending > 0 || partial > 0 || transfers > 0 || edge;
    any.then_some((pending, partial))
}

/// What the metrics show of the section, when it exists: the size classes and the tail (the
/// live agent's each interval, without the section's per-flow lists, steadiness and rings).
pub fn metrics_parts(run: &Pipeline) -> Option<(Vec<MessageClass>, Tail)> {
    seen(run)?;
    Some((classes(run), tail_of(run)))
}

/// The section, when any message was seen.
pub fn section(run: &Pipeline) -> Option<Messages> {
    let m = &run.analyses.messages;
    let (pending, partial) = seen(run)?;
    Some(Messages {
        vantage: vantage(run),
        link_speed_bps: m.settings.link_bps,
        completed: m.completed(),
        by_kind: m.kinds().map(|(k, n)| (k.name().to_string(), n)).collect(),
        pending,
        partial,
        abandoned: m.abandoned,
        in_flight_evicted: m.in_flight_evicted,
        mct_ns: pct(&m.all),
        classes: classes(run),
        flows: flows(run),
        pairs: pairs(run),
        transfers: Transfers {
            uc_messages: m.uc.mct.len(),
            uc_bytes: m.uc.bytes,
            uc_transfer_ns: pct(&m.uc.mct),
            ud_messages: m.ud_messages,
            ud_bytes: m.ud_bytes,
            uc_partial: m.uc_partial,
            uc_open: m.uc_open(),
        },
        tail: tail_of(run),
        steadiness: steadiness(run),
        rings: rings_of(run),
        edge: run.engine.heads.as_ref().map(|_| edge(run)),
    })
}

/// `--edges`: the goodput windows at the report's ends, overall, per flow and per pair.
fn edge(run: &Pipeline) -> MessagesEdge {
    let m = &run.analyses.messages;
    let ends = |e: Option<steady::Ends>| {
        e.map(|e| SteadyEnds {
            first: [e.first.0, e.first.1],
            counts: e.counts.iter().map(|(b, n)| [*b as u64, *n]).collect(),
            open: e.open.map(|(w, b)| [w, b]),
            early: e.early.iter().map(|(w, b)| [*w, *b]).collect(),
        })
    };
    let mut flows: Vec<(&FlowKey, &crate::analyses::messages::kept::MsgFlow)> = run.analyses.flows.messages().collect();
    flows.sort_unstable_by_key(|(k, _)| flow_order(k));
    let index: rustc_hash::FxHashMap<&FlowKey, u64> =
        flows.iter().enumerate().map(|(i, (k, _))| (*k, i as u64)).collect();
    let log = m.log.as_deref().unwrap_or_default();
    let kept = &log[..log.len().min(messages::MAX_LOGGED)];
    MessagesEdge {
        overall: ends(m.overall.ends()),
        flows: flows
            .into_iter()
            .map(|(k, s)| {
                let (first, first_paired, placed) = s.first_frame();
                MessagesEdgeFlow {
                    flow: flow_ref(k),
                    ends: ends(s.ends()),
                    first_frame: first.map(|(w, p)| [w, p]),
                    first_paired,
                    placed,
                    held: s.held().map(|(msg, open)| held(msg, open)).collect(),
                }
            })
            .collect(),
        completed: kept
            .iter()
            .filter_map(|l| Some(edge_message(&l.msg).completed(*index.get(&l.key)?, l.end_ns, l.min_rtt_ns)))
            .collect(),
        completed_cut: log.len() > messages::MAX_LOGGED,
        tail: Some(TailEdge {
            dscp_priority: run.analyses.config.dscp_priority.iter().map(|(d, p)| [*d, *p]).collect(),
            threshold_ns: run.analyses.config.tail_threshold_ns,
            topology: run.analyses.config.topology.is_some(),
            straggler_ratio: run.analyses.config.straggler_ratio,
        }),
        pairs: m
            .pairs
            .iter()
            .map(|p| MessagesEdgePair { src: addr(&p.src), dst: addr(&p.dst), ends: ends(p.windows.ends()) })
            .collect(),
        uc: uc_edges(m),
        uc_times: (!m.uc.mct.is_empty()).then(|| m.uc.mct.to_edge()),
    }
}

/// Each UC flow's message being sent at the end and its first frames, in the flows' order.
fn uc_edges(m: &crate::analyses::messages::Messages) -> Vec<UcEdge> {
    let sending: rustc_hash::FxHashMap<&FlowKey, &Msg> = m.uc_sending().collect();
    let mut keys: Vec<&FlowKey> = m.uc_heads.keys().chain(sending.keys().copied()).collect();
    keys.sort_unstable_by_key(|k| flow_order(k));
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let head = m.uc_heads.get(k);
            UcEdge {
                flow: flow_ref(k),
                sending: sending.get(k).map(|s| [s.kind as u64, s.start_ns, s.last_ns(), s.bytes()]),
                head: head.map(|h| h.frames.clone()).unwrap_or_default(),
                head_cut: head.is_some_and(|h| h.cut),
            }
        })
        .collect()
}

fn edge_message(m: &Msg) -> EdgeMessage {
    EdgeMessage {
        kind: m.kind as u64,
        marks: m.marks as u64,
        psn_first: m.psn_first,
        psn_last: m.psn_last,
        bytes: m.bytes(),
        start_ns: m.start_ns,
        pcp: m.pcp,
        dscp: m.dscp,
        retx_ns: m.retx_ns(),
        rnr_ns: m.rnr_ns(),
    }
}

fn held(m: &Msg, open: bool) -> [u64; 11] {
    edge_message(m).held(open)
}

/// The size classes' completion times.
fn classes(run: &Pipeline) -> Vec<MessageClass> {
    let m = &run.analyses.messages;
    classes_of(&m.settings.classes, &m.classes)
}

/// The size classes (`bounds`: their upper bounds) of distributions `dists`.
pub(crate) fn classes_of(bounds: &[u64], dists: &[Dist]) -> Vec<MessageClass> {
    dists
        .iter()
        .enumerate()
        .map(|(i, d)| MessageClass {
            name: dist::class_label(bounds, i),
            max_bytes: bounds.get(i).copied(),
            stats: stats(d),
            histogram: d.mct.buckets().into_iter().map(|(b, c)| [b as u64, c]).collect(),
        })
        .collect()
}

fn vantage(run: &Pipeline) -> MessageVantage {
    let (position, meaning) = if run.engine.sources.iter().any(|s| s.kind == "live") {
        ("host", "measured on this host's interface: close to the sender's verb completion for its own requests")
    } else if run.engine.visibility.encapsulated > 0 || run.vantage.points.len() > 1 {
        (
            "mirror",
            "measured at a switch's mirror: the time from a message's first packet there to its ACK there; \
          the NICs' and hosts' time on either side is not in it",
        )
    } else {
        (
            "capture",
            "measured where this capture was taken: at the sender's host it approximates the verb's \
          completion; in the middle of the fabric it leaves out the NICs and the paths on either side",
        )
    };
    MessageVantage { position: position.into(), meaning: meaning.into() }
}

/// The flows with completed messages (a flow whose messages are all pending is counted in
/// `pending` only: a capture of 200 000 one-frame flows would list them all).
fn flows(run: &Pipeline) -> Vec<MessageFlow> {
    let m = &run.analyses.messages;
    let mut keys: Vec<FlowKey> = m.flows.keys().copied().collect();
    keys.sort_unstable_by_key(flow_order);
    let empty = Dist::default();
    keys.iter()
        .map(|k| MessageFlow {
            flow: flow_ref(k),
            pending: run.analyses.flows.get(k).and_then(|f| f.messages.as_deref()).map_or(0, |s| flow_pending(s).0),
            stats: stats(m.flows.get(k).unwrap_or(&empty)),
        })
        .collect()
}

fn pairs(run: &Pipeline) -> Vec<MessagePair> {
    let mut v: Vec<_> = run.analyses.messages.pairs.iter().filter(|p| !p.dist.mct.is_empty()).collect();
    v.sort_unstable_by_key(|p| (p.src, p.dst));
    v.iter()
        .map(|p| MessagePair { src: addr(&p.src), dst: addr(&p.dst), min_rtt_ns: p.min_rtt_ns, stats: stats(&p.dist) })
        .collect()
}

fn steadiness(run: &Pipeline) -> Steadiness {
    let m = &run.analyses.messages;
    let mut flows: Vec<(FlowKey, Steady)> =
        run.analyses.flows.messages().filter_map(|(k, s)| Some((*k, steady_json(s.windows()?)?))).collect();
    flows.sort_unstable_by_key(|(k, _)| flow_order(k));
    let mut pairs: Vec<_> = m.pairs.iter().filter_map(|p| Some((p.src, p.dst, steady_json(&p.windows)?))).collect();
    pairs.sort_unstable_by_key(|(s, d, _)| (*s, *d));
    Steadiness {
        window_ns: m.settings.window_ns,
        overall: steady_json(&m.overall),
        flows: flows.into_iter().map(|(k, steady)| SteadyFlow { flow: flow_ref(&k), steady }).collect(),
        pairs: pairs.into_iter().map(|(s, d, steady)| SteadyPair { src: addr(&s), dst: addr(&d), steady }).collect(),
    }
}

fn rings_of(run: &Pipeline) -> Rings {
    let pairs = run.analyses.messages.pairs.iter().map(|p| (&p.src, &p.dst, &p.dist));
    rings_over(pairs)
}

/// The rings of host pairs (source, destination, distribution).
pub(crate) fn rings_over<'a>(pairs: impl Iterator<Item = (&'a Addr, &'a Addr, &'a Dist)>) -> Rings {
    let edges: Vec<rings::Edge> = pairs
        .filter(|(_, _, d)| !d.mct.is_empty())
        .map(|(s, d, dist)| rings::Edge {
            src: *s,
            dst: *d,
            messages: dist.mct.len(),
            goodput_p50: dist.goodput.quantile(0.5),
            mct_p99: dist.mct.quantile(0.99),
        })
        .collect();
    rings::find(&edges, &addr)
}

/// The pause timers as the tail reads them: named, and placed on a link with a topology.
fn paused(run: &Pipeline) -> Vec<Paused> {
    let topo = run.analyses.config.topology.as_ref();
    let timers = run.analyses.pause.timers.iter();
    timers.map(|((mac, priority), t)| paused_of(topo, mac, *priority, t.all_intervals())).collect()
}

/// A sender's pause intervals at `priority` as the tail reads them (a run's timer, or a merge's
/// intervals joined across cuts).
pub(crate) fn paused_of(topo: Option<&Topology>, mac: &[u8; 6], priority: u8, intervals: Vec<(u64, u64)>) -> Paused {
    let name = match tree::owner_names(topo, mac) {
        (Some(d), Some(p)) => format!("{d}:{p}"),
        (Some(d), None) => d,
        _ => mac_string(mac),
    };
    let link = topo.and_then(|t| t.paused_link(mac));
    Paused { name, priority, intervals: tree::union(intervals), link }
}

/// The hops between vantage points that queued: per hop, the windows in which most of its
/// frames crossed slower than its p90.
fn queued(run: &Pipeline) -> Vec<tail::Queued<'_>> {
    let v = &run.vantage;
    let name = |i: u16| v.points.get(i as usize).map_or("?", |p| p.name.as_str());
    v.hops
        .iter()
        .filter_map(|(&(from, to), h)| {
            let p90 = h.latency.quantile(0.9)?;
            let intervals = h.windows.slow(p90, v.point_ns.max(1));
            (!intervals.is_empty()).then(|| tail::Queued {
                name: format!("{}→{}", name(from), name(to)),
                intervals,
                flows: &h.flows,
            })
        })
        .collect()
}

/// What the other analyses saw, for the tail ([`Context`]).
fn context<'a>(
    run: &'a Pipeline,
    path: &'a dyn Fn(&FlowKey) -> Option<Vec<Node>>,
    cuts: &'a dyn Fn(&FlowKey) -> Vec<(u64, u64)>,
) -> Context<'a> {
    let a = &run.analyses;
    let incast = tail::incast_of(a.incast.episodes().into_iter().map(|(dst, e)| (dst, e.start_ns, e.end_ns)));
    Context { pauses: paused(run), path, cuts, incast, dscp_priority: &a.config.dscp_priority, queued: queued(run) }
}

/// The tail explained.
fn tail_of(run: &Pipeline) -> Tail {
    let a = &run.analyses;
    let m = &a.messages;
    let topo = a.config.topology.as_ref();
    let path = |k: &FlowKey| -> Option<Vec<Node>> { topo?.path_of(k.ip_version, &k.src, &k.dst) };
    let cuts = |k: &FlowKey| a.dcqcn.cuts(k);
    let cx = context(run, &path, &cuts);
    let classes: Vec<(String, &Dist, &Slowest)> = (m.classes.iter().zip(&m.slowest).enumerate())
        .map(|(i, (d, s))| (dist::class_label(&m.settings.classes, i), d, s))
        .collect();
    let unkept = run.vantage.hops.values().map(|h| h.windows.unkept).sum();
    tail_over(&classes, a.config.tail_threshold_ns, &cx, unkept)
}

/// The tail over the size classes (each its label, its completions and its slowest messages),
/// laid over `cx` (`flag`: `--tail-threshold`): a run's, or a merge's of messages joined across
/// cuts.
pub(crate) fn tail_over(classes: &[(String, &Dist, &Slowest)], flag: Option<u64>, cx: &Context, unkept: u64) -> Tail {
    let mut out = Tail { hop_latencies_unkept: unkept, ..Tail::default() };
    let mut examined: Vec<&Kept> = Vec::new();
    for (label, class, slowest) in classes.iter().filter(|(_, c, _)| !c.mct.is_empty()) {
        let (threshold, from) = match (flag, class.mct.quantile(0.99)) {
            (Some(t), _) => (t, "flag"),
            (None, Some(p99)) => (p99, "p99"),
            (None, None) => continue,
        };
        out.thresholds.push(TailThreshold { class: label.clone(), threshold_ns: threshold, from: from.into() });
        // Slower than the threshold (a class of fewer than 100 messages has none above its p99).
        out.messages += class.mct.count_at_least(threshold + 1);
        examined.extend(slowest.at_least(threshold + 1));
    }
    out.examined = examined.len() as u64;
    examined.sort_by_key(|k| std::cmp::Reverse(k.mct_ns()));
    let mut tally = [(0u64, 0u64); CAUSES.len()];
    // Per cause with a place (pause, queueing), how many messages each place overlapped most.
    let mut sources: [BTreeMap<String, u64>; 2] = Default::default();
    for (n, k) in examined.iter().enumerate() {
        let tail::Explained { causes, paused_by, queued_at } = tail::explain(k, cx);
        for (c, o) in &causes {
            tally[*c].0 += 1;
            tally[*c].1 += o;
        }
        for (i, s) in [paused_by, queued_at].into_iter().enumerate() {
            if let Some(s) = s {
                *sources[i].entry(s).or_default() += 1;
            }
        }
        if n < MAX_WORST {
            out.worst.push(worst(k, &causes));
        }
    }
    let [top_pause, top_hop] =
        sources.map(|m| m.into_iter().max_by_key(|(s, n)| (*n, std::cmp::Reverse(s.clone()))).map(|(s, _)| s));
    out.causes = CAUSES
        .iter()
        .zip(tally)
        .filter(|(_, (n, _))| *n > 0)
        .map(|(c, (n, o))| TailCause {
            cause: (*c).into(),
            messages: n,
            share: n as f64 / out.examined.max(1) as f64,
            overlap_ns: o,
            source: match *c {
                "pause" => top_pause.clone(),
                "queueing" => top_hop.clone(),
                _ => None,
            },
        })
        .collect();
    out.causes.sort_by(|a, b| b.messages.cmp(&a.messages).then(a.cause.cmp(&b.cause)));
    out
}

/// One of the slowest tail messages, with its causes.
fn worst(k: &Kept, causes: &[(usize, u64)]) -> TailMessage {
    TailMessage {
        flow: flow_ref(&k.key),
        kind: k.msg.kind.name().into(),
        psn_first: k.msg.psn_first,
        psn_last: k.msg.psn_last,
        bytes: k.msg.bytes(),
        start_ns: k.msg.start_ns,
        mct_ns: k.mct_ns(),
        causes: causes.iter().map(|(c, o)| TailOverlap { cause: CAUSES[*c].into(), overlap_ns: *o }).collect(),
        evidence: None,
    }
}

fn us(ns: u64) -> String {
    if ns >= 10_000_000 { format!("{:.1} ms", ns as f64 / 1e6) } else { format!("{:.1} µs", ns as f64 / 1e3) }
}

/// What a cause means, in a finding's words.
fn cause_words(c: &TailCause) -> String {
    match c.cause.as_str() {
        "pause" => format!("overlapped PFC pause{}", c.source.as_ref().map(|s| format!(" on {s}")).unwrap_or_default()),
        "rate_cut" => "overlapped a DCQCN rate cut of their flow".into(),
        "retransmission" => "were retransmitted (NAK, go-back-N or timeout)".into(),
        "rnr" => "met an RNR NAK (the receiver had no receive posted)".into(),
        "incast" => "went to a destination in an incast episode".into(),
        "queueing" => format!(
            "crossed a hop while most of its frames took longer than its p90{}",
            c.source.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
        ),
        "capture_gap" => "lack frames this capture did not hold".into(),
        _ => "overlapped nothing seen here (look at the hosts: CPU, PCIe, the application)".into(),
    }
}

/// The findings of the section.
pub fn findings(m: &Messages, straggler_ratio: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(lead) = m.tail.causes.first() {
        let flows: Vec<FlowRef> = m.tail.worst.iter().map(|w| w.flow.clone()).collect();
        out.push(Finding::new(
            Severity::Info,
            FindingCode::TailDominatedBy,
            format!(
                "p99.9 {}: {:.0} % of {} tail messages {} ({})",
                us(m.mct_ns.p999),
                lead.share * 100.0,
                m.tail.examined,
                cause_words(lead),
                lead.cause
            ),
            flows,
        ));
    }
    for r in &m.rings.rings {
        let slowest = r.edges.iter().filter(|e| e.goodput_bps_p50.is_some()).min_by_key(|e| e.goodput_bps_p50);
        let flows: Vec<FlowRef> = slowest
            .map(|e| {
                m.flows.iter().filter(|f| f.flow.src == e.src && f.flow.dst == e.dst).map(|f| f.flow.clone()).collect()
            })
            .unwrap_or_default();
        if r.straggler_ratio > straggler_ratio {
            out.push(Finding::new(
                Severity::Warning,
                FindingCode::RingStraggler,
                format!(
                    "ring {}: edge {} runs {:.1}× below the ring's median edge goodput: the whole ring waits for it",
                    r.hosts.join(" → "),
                    r.straggler,
                    r.straggler_ratio
                ),
                flows,
            ));
        }
    }
    out
}
