//! Messages across cuts in time: a message sent before a cut is completed after it, where its
//! ACK finds no message; a message whose FIRST came before a cut ends after it, where its LAST
//! starts a partial one. Reports made with `--edges` carry what joins them again: every
//! completion (`messages.edge.completed`, partial ones too) and each flow's messages not completed
//! at the end (`messages.edge.flows[].held`); the ACK flows' first ACKs (`flows[].edge.acks`)
//! complete the messages held across a cut.
//!
//! [`stitch`] walks the reports in time order. A flow's messages held at a cut are completed by
//! the first ACK after it that covers their last PSN, or continued by the partial message its
//! next report began with at the PSN where they stopped; the rest stay held. Every message then
//! gets its numbers as one run gives them: the smallest RTT of its slowdown is its report's, the
//! reports' before (its host pair's and its flow's) and the samples found across cuts. What it
//! cannot tell (a request repeated after a cut, an open message the next report does not continue
//! with its next PSN, an ACK head that ends before the messages it should complete, a READ whose
//! span its report did not learn) it leaves as the reports counted it, and counts (`untold`).

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;
use analyzer_common::opcode::op;
use analyzer_common::psn::{PSN_HALF, PSN_MASK, psn_diff};

use super::rtt_stitch::{FlowId, Pairing, Span, Stitched as RttStitched};
use crate::analyses::keys::Addr;
use crate::analyses::messages::dist::{self, Dist, Done};
use crate::analyses::messages::kept::{Kind, mark};
use crate::analyses::stats::Samples;
use crate::model::addr::{flow_order, flow_ref_key};
use crate::model::{EdgeMessage, FlowRef, Messages, MessagesEdge};

/// A flow in the analysis' order.
type Order = crate::model::addr::FlowOrder;

/// The merged messages: one run's distributions and counts where nothing was `untold`.
#[derive(Debug, Default)]
pub struct Whole {
    /// The size classes' upper bounds (the reports'), and each class's completions.
    pub bounds: Vec<u64>,
    pub classes: Vec<Dist>,
    pub all: Samples,
    pub by_kind: [u64; 4],
    /// Flows with a completed message, in the analysis' order, with their pending messages.
    pub flows: Vec<(FlowKey, Dist, u64)>,
    /// Host pairs with a completed message, with their smallest RTT.
    pub pairs: Vec<(Addr, Addr, Dist, Option<u64>)>,
    pub pending: u64,
    pub partial: u64,
    /// Messages let go beyond the reports' own.
    pub abandoned: u64,
    /// Flows whose messages at a cut the reports do not tell.
    pub untold: u64,
    /// Flows whose first requests after a cut repeated PSNs sent before it (the report after
    /// the cut, the flow): their report counted that payload as new in its goodput per window
    /// (the steadiness), one run does not.
    pub resent: Vec<(usize, Order)>,
    /// Every completed message (its flow, completion time, the message), in the order one run
    /// completes them: what the tail is made of.
    pub done: Vec<(FlowKey, u64, EdgeMessage)>,
    /// Each flow's first completion in one run (it places the flow's host pair: steadiness).
    pub first_done: BTreeMap<Order, u64>,
}

/// A flow across the reports: its messages held, its smallest RTT in the reports before.
struct Flow {
    key: FlowKey,
    id: FlowId,
    held: Vec<(EdgeMessage, bool)>,
    rtt: Option<u64>,
    dist: Dist,
}

/// A completion: its time, whether a report listed it (else it was joined here), its flow, the
/// message and the smallest RTT its report measured it against.
struct Event {
    end_ns: u64,
    listed: bool,
    flow: Order,
    msg: EdgeMessage,
    min_rtt: Option<u64>,
}

/// What a report says of a held message's flow: its place in the report's edge, its first
/// request, its ACK flow's first ACKs and whether they are all, and the report's own messages
/// of the flow when the report could pair none of its ACKs (several flows could have carried
/// them here: one run knows which from before).
struct Here<'e> {
    index: Option<usize>,
    /// Its first request's PSN and opcode.
    first_request: Option<(u32, u8)>,
    /// Its first request's time (from its head's times).
    first_request_ns: Option<u64>,
    acks: Option<(&'e [[u64; 2]], bool)>,
    /// Its ACK flow's first frames and their times: which response is a READ RESPONSE FIRST.
    ack_frames: &'e [crate::model::edge::HeadFrame],
    ack_ns: &'e [u64],
    own: Vec<(EdgeMessage, bool)>,
    /// Its first request fills a gap the report before left open: a late arrival, new payload
    /// in one run too (not sent again).
    late_first: bool,
}

struct Untold;

/// When a message's last PSN is known in one run: before any response of the report (every
/// message but a READ), never (a READ no later request followed: its span runs to its first
/// PSN), or from a time (the request after a READ: before it, as never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Known,
    Never,
    At(u64),
}

impl End {
    /// A message held at a cut.
    fn held(m: &EdgeMessage) -> End {
        match m.kind == Kind::Read as u64 && !is(m, mark::END_KNOWN) {
            true => End::Never,
            false => End::Known,
        }
    }

    /// The report's own messages held at its end, in order (`open`: the one being sent after
    /// them): a READ's span became known with the next message's first request.
    fn own(own: &[EdgeMessage], open: Option<&EdgeMessage>) -> Vec<End> {
        let next = |i: usize| own.get(i + 1).or(open);
        let end = |(i, m): (usize, &EdgeMessage)| match (End::held(m), next(i)) {
            (End::Known, Some(n)) if m.kind == Kind::Read as u64 => End::At(n.start_ns),
            (e, _) => e,
        };
        own.iter().enumerate().map(end).collect()
    }

    /// Whether the response at `ts` for `psn` completes `m` in one run (`analyses::messages`: a
    /// response at or past its last PSN; a READ's own READ RESPONSE FIRST does not), a READ's
    /// last PSN its first until its span is known. Not told at the time its span became known
    /// (which came first), or for a READ's response at that PSN whose opcode the ACK flow's head
    /// does not list.
    fn completes(self, m: &EdgeMessage, ts: u64, psn: u32, here: &Here) -> Result<bool, Untold> {
        let known = match self {
            End::Known => true,
            End::Never => false,
            End::At(t) if t == ts => return Err(Untold),
            End::At(t) => ts > t,
        };
        let last = if known { m.psn_last } else { m.psn_first };
        let d = psn_diff(last, psn);
        if d >= PSN_HALF {
            return Ok(false);
        }
        if d == 0 && !known {
            let first = |i: usize| here.ack_ns[i] == ts && here.ack_frames[i].0[1] & PSN_MASK == psn;
            let i = (0..here.ack_ns.len()).find(|i| first(*i)).ok_or(Untold)?;
            return Ok(here.ack_frames[i].0[0] as u8 & 0x1F != op::RDMA_READ_RESPONSE_FIRST);
        }
        Ok(true)
    }
}

fn min(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn is(m: &EdgeMessage, bit: u8) -> bool {
    m.marks & bit as u64 != 0
}

/// The flow key and `merge`'s id of an edge's flow.
fn keys(f: &FlowRef) -> Option<(FlowKey, FlowId)> {
    let k = flow_ref_key(f)?;
    Some((k, (k.ip_version, f.src.clone(), f.dst.clone(), f.udp_sport, f.dst_qp)))
}

/// The messages of reports in series as one run gives them (`reports`: each report's span, its
/// messages section and whether it was made with `--edges`; a report without a section has no
/// messages of its own but its ACKs may complete others'); none when the reports do not allow it
/// (not in series, an edge missing or cut, other size classes or link speeds).
pub fn stitch(reports: &[(u64, u64, Option<&Messages>, bool)], pairing: &Pairing, rtt: &RttStitched) -> Option<Whole> {
    let spans: Vec<Span> =
        reports.iter().map(|(s, e, _, _)| Span { start_ns: *s, end_ns: *e, timeout_ns: 0 }).collect();
    let order = super::rtt_stitch::in_series(&spans)?;
    let first = reports.iter().find_map(|r| r.2)?;
    let bounds: Vec<u64> = first.classes.iter().filter_map(|c| c.max_bytes).collect();
    let same = |m: &Messages| {
        m.link_speed_bps == first.link_speed_bps
            && m.classes.iter().filter_map(|c| c.max_bytes).eq(bounds.iter().copied())
            && m.edge.as_ref().is_some_and(|e| !e.completed_cut)
    };
    if !reports.iter().all(|(_, _, m, edges)| *edges && m.is_none_or(same)) {
        return None;
    }
    let mut w = Walk {
        whole: Whole { classes: vec![Dist::default(); bounds.len() + 1], bounds, ..Default::default() },
        link_bps: first.link_speed_bps,
        flows: BTreeMap::new(),
        pairs: BTreeMap::new(),
        pairing,
        rtt,
        untold: Default::default(),
    };
    let none = MessagesEdge {
        overall: None,
        flows: Vec::new(),
        pairs: Vec::new(),
        completed: Vec::new(),
        completed_cut: false,
        tail: None,
        uc: Vec::new(),
        uc_times: None,
    };
    for k in order {
        w.report(reports[k].2.map_or(Some(&none), |m| m.edge.as_ref())?, k);
    }
    Some(w.finish())
}

struct Walk<'a> {
    whole: Whole,
    link_bps: u64,
    flows: BTreeMap<Order, Flow>,
    pairs: BTreeMap<(Addr, Addr), (Dist, Option<u64>)>,
    pairing: &'a Pairing<'a>,
    rtt: &'a RttStitched,
    /// Flows whose messages at a cut the reports do not tell.
    untold: std::collections::BTreeSet<Order>,
}

impl<'a> Walk<'a> {
    /// One report's edge (`report`: its index in the merge).
    fn report(&mut self, e: &MessagesEdge, report: usize) {
        let mut index: Vec<Option<Order>> = Vec::with_capacity(e.flows.len());
        let mut at: BTreeMap<Order, usize> = BTreeMap::new();
        for (i, f) in e.flows.iter().enumerate() {
            let Some((key, id)) = keys(&f.flow) else {
                index.push(None);
                continue;
            };
            let o = flow_order(&key);
            self.flows.entry(o).or_insert_with(|| Flow { key, id, held: Vec::new(), rtt: None, dist: Dist::default() });
            index.push(Some(o));
            at.insert(o, i);
        }
        let Across { mut events, joined, continued, carried, replayed } = self.across(e, &at, report);
        for (j, c) in e.completed.iter().enumerate() {
            let Some(o) = index.get(c[0] as usize).copied().flatten() else { continue };
            let msg = EdgeMessage::of_completed(c);
            if joined.contains(&j) {
                continue;
            }
            if is(&msg, mark::PARTIAL) {
                self.whole.partial += 1;
                continue;
            }
            events.push(Event {
                end_ns: c[7],
                listed: true,
                flow: o,
                msg,
                min_rtt: (c[8] != u64::MAX).then_some(c[8]),
            });
        }
        // A message joined here and completed by an ACK that completed one of the report's own
        // too was measured against the same smallest RTT (the run's at that ACK).
        let at_ack: BTreeMap<(Order, u64), u64> =
            events.iter().filter(|e| e.listed).filter_map(|e| Some(((e.flow, e.end_ns), e.min_rtt?))).collect();
        for ev in events.iter_mut().filter(|e| e.min_rtt.is_none()) {
            ev.min_rtt = at_ack.get(&(ev.flow, ev.end_ns)).copied();
        }
        events.sort_by_key(|e| (e.end_ns, e.listed));
        for ev in events {
            self.complete(ev);
        }
        self.settle(e, &index, carried, &continued, &replayed, report);
    }

    /// The messages flows held before report `report` (`at`: their places in its edge), through
    /// it; and those of its own the ACKs are replayed on (it paired none of their ACKs).
    fn across(&mut self, e: &MessagesEdge, at: &BTreeMap<Order, usize>, report: usize) -> Across {
        let mut events = Vec::new();
        // Completions of this report replaced by a message joined across the cut, and held
        // messages of it continued from before.
        let mut joined: Vec<usize> = Vec::new();
        let mut continued: BTreeMap<(usize, usize), Option<EdgeMessage>> = BTreeMap::new();
        let mut carried: BTreeMap<Order, Vec<(EdgeMessage, bool)>> = BTreeMap::new();
        let listed: std::collections::BTreeSet<u64> = e.completed.iter().map(|c| c[0]).collect();
        let mut replayed = std::collections::BTreeSet::new();
        let mut held: Vec<(Order, Here)> = Vec::new();
        for (o, f) in &self.flows {
            let mut here = self.here(*o, at.get(o).copied(), report);
            if let Some(i) = here.index.filter(|i| !listed.contains(&(*i as u64)) && self.unpaired_here(&f.id, report))
            {
                here.own = e.flows[i].held.iter().map(|h| (EdgeMessage::of_held(h), h[6] != 0)).collect();
                replayed.insert(i);
            }
            if !f.held.is_empty() || !here.own.is_empty() {
                held.push((*o, here));
            }
        }
        for (o, here) in held {
            let f = self.flows.get_mut(&o).expect("listed");
            let msgs = std::mem::take(&mut f.held);
            match carry(msgs.clone(), &here, e) {
                Ok(c) => {
                    events.extend(c.done.into_iter().map(|(end_ns, msg, min_rtt)| Event {
                        end_ns,
                        listed: false,
                        flow: o,
                        msg,
                        min_rtt,
                    }));
                    joined.extend(c.joined);
                    self.whole.abandoned += c.abandoned;
                    if c.resent {
                        self.whole.resent.push((report, o));
                    }
                    if let (Some(i), Some((j, m))) = (here.index, c.continued) {
                        continued.insert((i, j), Some(m));
                    }
                    for (i, j) in c.repeated.iter().filter_map(|j| Some((here.index?, *j))) {
                        continued.insert((i, j), None);
                    }
                    carried.insert(o, c.left);
                }
                Err(Untold) => {
                    self.untold.insert(o);
                    carried.insert(o, msgs.into_iter().chain(here.own).collect());
                }
            }
        }
        Across { events, joined, continued, carried, replayed }
    }

    /// Whether report `report` paired none of flow `id`'s ACKs: several flows could have carried
    /// them there.
    fn unpaired_here(&self, id: &FlowId, report: usize) -> bool {
        let Some((id, parts)) = self.pairing.parts.get_key_value(id) else { return false };
        let Some(ack) = self.pairing.ack_of(id, parts, true) else { return false };
        let part = ack.parts.iter().find(|p| p.report == report);
        part.and_then(super::rtt_stitch::acks_of).is_some_and(|a| a.ambiguous > 0)
    }

    /// What report `report` says of flow `o` (its place `index` in the report's edge).
    fn here(&self, o: Order, index: Option<usize>, report: usize) -> Here<'a> {
        let f = &self.flows[&o];
        let parts = self.pairing.parts.get(&f.id).map(Vec::as_slice).unwrap_or_default();
        let head = parts.iter().find(|p| p.report == report).and_then(|p| p.edge.as_ref()).map(|e| &e.head);
        let first_request = head
            .and_then(|h| h.iter().map(|f| f.0).find(|f| analyzer_common::opcode::is_request(f[0] as u8)))
            .map(|f| (f[1], f[0] as u8));
        let first_request_ns =
            parts.iter().find(|p| p.report == report).and_then(|p| p.first_request_at()).map(|r| r.1);
        let pairing = self.pairing;
        let id = pairing.parts.get_key_value(&f.id).map(|(k, _)| k);
        let ack_flow = id.and_then(|id| pairing.ack_of(id, parts, true));
        let ack_part = ack_flow.as_ref().and_then(|a| super::psn_stitch::Part::of(a.parts, report));
        let ack_edge = ack_part.and_then(|p| p.edge.as_ref()).filter(|e| e.head_ns.len() == e.head.len());
        let (ack_frames, ack_ns) = ack_edge.map_or((&[][..], &[][..]), |e| (e.head.as_slice(), e.head_ns.as_slice()));
        let acks = ack_flow.map(|_| {
            match ack_part {
                // An edge without ACKs: the flow carried none here (NAKs only, or nothing).
                Some(p) if p.edge.is_some() => {
                    super::rtt_stitch::acks_of(p).map_or((&[][..], true), |h| (h.head.as_slice(), h.complete))
                }
                // A report without edges: not told.
                Some(_) => (&[][..], false),
                None => (&[][..], true),
            }
        });
        let at = parts.iter().position(|p| p.report == report);
        let before = at.and_then(|i| i.checked_sub(1)).and_then(|i| parts[i].edge.as_ref());
        let fills =
            |psn: u32, e: &crate::model::edge::FlowEdge| e.gaps.iter().any(|g| g[2] == 0 && psn_diff(g[0], psn) < g[1]);
        let late_first = first_request.zip(before).is_some_and(|((psn, _), e)| fills(psn, e));
        Here { index, first_request, first_request_ns, acks, ack_frames, ack_ns, own: Vec::new(), late_first }
    }

    /// Whether one run may have had an RTT sample of the host pair of flow `id` that the merge
    /// does not place in time: a flow of the pair took samples in some report (in time order
    /// or not: a flow of the pair without completions adds none to the pair's smallest RTT
    /// here), or the stitch found some across a cut.
    fn pair_sampled(&self, id: &FlowId) -> bool {
        let pair = self.pairing.parts.iter().filter(|(k, _)| k.0 == id.0 && k.1 == id.1 && k.2 == id.2);
        pair.into_iter().any(|(k, ps)| {
            let rtt = ps.iter().filter_map(|p| p.edge.as_ref()?.rtt.as_ref());
            rtt.into_iter().any(|r| !r.samples.is_empty() || !r.buckets.is_empty())
                || self.rtt.flows.get(k).is_some_and(|f| !f.extra.is_empty())
        })
    }

    /// A completed message with its numbers as one run gives them.
    fn complete(&mut self, ev: Event) {
        let sampled = !ev.listed && self.flows.get(&ev.flow).is_some_and(|f| self.pair_sampled(&f.id));
        let f = self.flows.get_mut(&ev.flow).expect("listed");
        let pair_key = ((f.key.src, f.key.ip_version), (f.key.dst, f.key.ip_version));
        let pair = self.pairs.entry(pair_key).or_default();
        let fix = self.rtt.flows.get(&f.id);
        let found = fix.and_then(|fix| fix.extra.iter().min().copied());
        // Its report measured it against a sample one run does not take (the repeat of a
        // request waiting at the cut, timed from its first time in one run: Karn).
        let karn = ev.listed && ev.min_rtt.is_some_and(|m| fix.is_some_and(|x| x.removed.iter().any(|(_, v)| *v == m)));
        let told = min(min(ev.min_rtt, pair.1), min(f.rtt, found));
        let min_rtt = told.filter(|_| !karn);
        if karn || (!ev.listed && min_rtt.is_none() && sampled) {
            // Completed after a cut by an ACK whose RTT sample only one run takes (Karn: a
            // request sent again keeps its first time), or where its host pair took samples the
            // merge does not place in time: its slowdown is not told.
            self.untold.insert(ev.flow);
        }
        let d = Done::new(ev.end_ns.saturating_sub(ev.msg.start_ns), ev.msg.bytes, self.link_bps, min_rtt);
        if !karn {
            pair.1 = min_rtt;
        }
        pair.0.add(&d);
        f.dist.add(&d);
        self.whole.classes[dist::class_of(&self.whole.bounds, ev.msg.bytes)].add(&d);
        self.whole.all.push(d.mct_ns);
        self.whole.by_kind[(ev.msg.kind as usize).min(3)] += 1;
        self.whole.done.push((f.key, ev.end_ns, ev.msg));
        self.whole.first_done.entry(ev.flow).or_insert(ev.end_ns);
    }

    /// After report `report`: each flow's held messages (those carried, then the report's own,
    /// continued ones joined) and its smallest RTT so far.
    fn settle(
        &mut self,
        e: &MessagesEdge,
        index: &[Option<Order>],
        mut carried: BTreeMap<Order, Vec<(EdgeMessage, bool)>>,
        continued: &BTreeMap<(usize, usize), Option<EdgeMessage>>,
        replayed: &std::collections::BTreeSet<usize>,
        report: usize,
    ) {
        for (o, msgs) in std::mem::take(&mut carried) {
            self.flows.get_mut(&o).expect("listed").held = msgs;
        }
        for (i, ef) in e.flows.iter().enumerate() {
            let Some(o) = index[i] else { continue };
            let f = self.flows.get_mut(&o).expect("listed");
            // Held messages the ACKs here were replayed on are among the carried ones.
            let own = if replayed.contains(&i) { &[][..] } else { ef.held.as_slice() };
            for (j, h) in own.iter().enumerate() {
                let m = match continued.get(&(i, j)) {
                    // Repeated requests: no message of their own in one run.
                    Some(None) => continue,
                    Some(Some(m)) => *m,
                    None => EdgeMessage::of_held(h),
                };
                f.held.push((m, h[6] != 0));
            }
            let parts = self.pairing.parts.get(&f.id).map(Vec::as_slice).unwrap_or_default();
            let edge_rtt = parts.iter().find(|p| p.report == report).and_then(|p| p.edge.as_ref()?.rtt.as_ref());
            f.rtt = min(f.rtt, edge_rtt.filter(|r| !r.samples.is_empty() || !r.buckets.is_empty()).map(|r| r.min));
        }
    }

    fn finish(mut self) -> Whole {
        let mut w = self.whole;
        w.untold = self.untold.len() as u64;
        for f in self.flows.into_values() {
            let partial = f.held.iter().filter(|(m, _)| is(m, mark::PARTIAL)).count() as u64;
            let pending = f.held.len() as u64 - partial;
            w.partial += partial;
            w.pending += pending;
            if !f.dist.mct.is_empty() {
                w.flows.push((f.key, f.dist, pending));
            }
        }
        w.pairs = std::mem::take(&mut self.pairs)
            .into_iter()
            .filter(|(_, (d, _))| !d.mct.is_empty())
            .map(|((s, d), (dist, rtt))| (s, d, dist, rtt))
            .collect();
        w
    }
}

/// What a report did to the messages flows held at its start: completions of them (not listed
/// by the report), the report's completions they replace (partial messages that continued them),
/// its held messages that continued them, what each flow still holds before the report's own,
/// and the flows whose own held messages are among those.
struct Across {
    events: Vec<Event>,
    joined: Vec<usize>,
    /// Held messages of the report continuing one (`None`: made of repeated requests).
    continued: BTreeMap<(usize, usize), Option<EdgeMessage>>,
    carried: BTreeMap<Order, Vec<(EdgeMessage, bool)>>,
    replayed: std::collections::BTreeSet<usize>,
}

/// What a report did to the messages a flow held at its start.
struct Carried {
    /// Completed: (time, message, the smallest RTT its report measured its completion
    /// against, when it listed it).
    done: Vec<(u64, EdgeMessage, Option<u64>)>,
    /// The report's completions they replace (a partial message that continued one).
    joined: Vec<usize>,
    /// The report's held message (its index in the flow's `held`) that continued one.
    continued: Option<(usize, EdgeMessage)>,
    /// Still held, before the report's own.
    left: Vec<(EdgeMessage, bool)>,
    /// Open messages let go (a FIRST came after a gap).
    abandoned: u64,
    /// The report's held messages of the flow made of repeated requests (their indices).
    repeated: Vec<usize>,
    /// The flow's first requests in the report repeated PSNs sent before the cut.
    resent: bool,
    /// When the span of a READ held at the cut with its span not known became known: the
    /// report's first request of the flow (a response before it completed the READ by its
    /// first PSN).
    read_known_at: Option<u64>,
}

/// The messages `msgs` a flow held at a cut, through the next report `e` (`here`: what it says
/// of the flow).
fn carry(mut msgs: Vec<(EdgeMessage, bool)>, here: &Here, e: &MessagesEdge) -> Result<Carried, Untold> {
    let mut out = Carried {
        done: Vec::new(),
        joined: Vec::new(),
        continued: None,
        left: Vec::new(),
        abandoned: 0,
        repeated: Vec::new(),
        resent: false,
        read_known_at: None,
    };
    let open = msgs.last().filter(|(_, open)| *open).map(|(m, _)| *m);
    if open.is_some() {
        msgs.pop();
    }
    let mut in_flight: Vec<EdgeMessage> = msgs.into_iter().map(|(m, _)| m).collect();
    let mut open = open;
    if let Some(i) = here.index {
        open = requests_here(open, &mut in_flight, i, here, e, &mut out)?;
    }
    let mut own: Vec<(EdgeMessage, bool)> =
        here.own.iter().enumerate().filter(|(j, _)| !out.repeated.contains(j)).map(|(_, m)| *m).collect();
    if !own.is_empty()
        && let Some((j, m)) = out.continued.take()
    {
        own[j].0 = m;
    }
    let own_open = own.last().filter(|(_, open)| *open).map(|(m, _)| *m);
    if own_open.is_some() {
        own.pop();
    }
    if open.is_some() && own_open.is_some() {
        return Err(Untold);
    }
    let mut ends: Vec<End> = in_flight.iter().map(End::held).collect();
    if let (Some(t), Some(last)) = (out.read_known_at, ends.last_mut()) {
        *last = End::At(t);
    }
    let own: Vec<EdgeMessage> = own.into_iter().map(|(m, _)| m).collect();
    ends.extend(End::own(&own, own_open.as_ref()));
    in_flight.extend(own);
    let open = open.or(own_open);
    let mut acks = here.acks.map(|(h, complete)| (h.iter().map(|a| (a[0], a[1] as u32)).collect::<Vec<_>>(), complete));
    for (m, end) in in_flight.into_iter().zip(ends) {
        // The reports do not tell which flow carried its ACKs.
        let Some((list, complete)) = acks.as_mut() else { return Err(Untold) };
        let mut at = None;
        for (i, (ts, psn)) in list.iter().enumerate() {
            if end.completes(&m, *ts, *psn, here)? {
                at = Some(i);
                break;
            }
        }
        match at {
            Some(at) => {
                let (t, _) = list[at];
                list.drain(..at);
                out.done.push((t, m, None));
            }
            None if *complete => out.left.push((m, false)),
            None => return Err(Untold),
        }
    }
    if let Some(o) = open {
        out.left.push((o, true));
    }
    Ok(out)
}

/// The flow sent requests in the report after the cut (its place `i` in the report's edge):
/// they continue where it stopped (the open message continued, or let go by a FIRST after a
/// gap), or it is not told. Returns the open message still open.
fn requests_here(
    mut open: Option<EdgeMessage>,
    in_flight: &mut [EdgeMessage],
    i: usize,
    here: &Here,
    e: &MessagesEdge,
    out: &mut Carried,
) -> Result<Option<EdgeMessage>, Untold> {
    // The flow sent requests here: they continue where it stopped, or it is not told.
    let (first, opcode) = here.first_request.ok_or(Untold)?;
    let last = open.as_ref().or(in_flight.last()).map(|m| m.psn_last);
    if let Some(next) = last.map(|l| l.wrapping_add(1) & PSN_MASK).filter(|n| psn_diff(*n, first) >= PSN_HALF) {
        // Requests repeated after the cut (go-back-N): one run counts them as retransmissions
        // of the messages held, not as messages of their own.
        let unknown_read = in_flight.last().is_some_and(|m| m.kind == Kind::Read as u64 && !is(m, mark::END_KNOWN));
        if open.is_some() || unknown_read {
            return Err(Untold);
        }
        repeated(next, i, e, out)?;
        out.resent = !here.late_first;
        return Ok(None);
    }
    if open.is_none()
        && let Some(m) = in_flight.last_mut().filter(|m| m.kind == Kind::Read as u64 && !is(m, mark::END_KNOWN))
    {
        // A READ's responses took the PSNs up to this request; a response here may have come
        // before it, which completed the READ by its first PSN (told by the request's time).
        let acks = here.acks.map(|(h, _)| h).unwrap_or_default();
        if acks.iter().any(|a| psn_diff(m.psn_first, a[1] as u32) < PSN_HALF) {
            out.read_known_at = Some(here.first_request_ns.ok_or(Untold)?);
        }
        m.psn_last = first.wrapping_sub(1) & PSN_MASK;
        m.marks |= mark::END_KNOWN as u64;
    }
    let last = open.as_ref().or(in_flight.last()).map(|m| m.psn_last);
    let next = last.map(|l| l.wrapping_add(1) & PSN_MASK);
    if open.is_some() && next != Some(first) {
        // A new message begun after PSNs this capture missed: its FIRST lets the open one go.
        let o = opcode & 0x1F;
        if o != op::SEND_FIRST && o != op::RDMA_WRITE_FIRST {
            return Err(Untold);
        }
        open = None;
        out.abandoned += 1;
    }
    if let Some(o) = open.take() {
        let (done, continued) = continue_open(o, first, i, e)?;
        match done {
            // A message whose start no report saw stays the report's partial one.
            Some((j, end, m, rtt)) if !is(&m, mark::PARTIAL) => {
                out.joined.push(j);
                out.done.push((end, m, rtt));
            }
            Some(_) => {}
            None => out.continued = continued,
        }
    }
    Ok(open)
}

/// The report's messages of flow `i` made of requests repeated after a cut (PSNs before `next`,
/// where the flow stopped before it): left out (their completions `joined`, their held ones
/// `repeated`); one that runs past `next` is not told.
fn repeated(next: u32, i: usize, e: &MessagesEdge, out: &mut Carried) -> Result<(), Untold> {
    let behind = |psn: u32| psn_diff(next, psn) >= PSN_HALF;
    let held = e.flows.get(i).map(|f| f.held.as_slice()).unwrap_or_default();
    let done = e.completed.iter().enumerate().filter(|(_, c)| c[0] as usize == i);
    let done = done.map(|(j, c)| (j, EdgeMessage::of_completed(c), true));
    for (j, m, listed) in done.chain(held.iter().enumerate().map(|(j, h)| (j, EdgeMessage::of_held(h), false))) {
        if !behind(m.psn_first) {
            continue;
        }
        if !behind(m.psn_last) {
            return Err(Untold);
        }
        if listed { out.joined.push(j) } else { out.repeated.push(j) }
    }
    Ok(())
}

/// The open message `o` continued by flow `i`'s first request here (PSN `first`): by a partial
/// message the report completed (its index, time, the message joined and the smallest RTT of its
/// completion) or still held (its index in the flow's `held`, joined).
#[allow(clippy::type_complexity)]
fn continue_open(
    o: EdgeMessage,
    first: u32,
    i: usize,
    e: &MessagesEdge,
) -> Result<(Option<(usize, u64, EdgeMessage, Option<u64>)>, Option<(usize, EdgeMessage)>), Untold> {
    let join = |c: &EdgeMessage| -> Result<EdgeMessage, Untold> {
        if c.psn_first != first || c.kind != o.kind || !is(c, mark::PARTIAL) {
            return Err(Untold);
        }
        let bytes = if o.kind == Kind::Send as u64 { o.bytes + c.bytes } else { o.bytes };
        // Its first retransmission and RNR NAK: before the cut, else the partial message's.
        let (retx, rnr) = c.times_from(o.start_ns);
        let (retx_ns, rnr_ns) = (o.retx_ns.or(retx), o.rnr_ns.or(rnr));
        let marks = o.marks | (c.marks & !(mark::PARTIAL as u64));
        Ok(EdgeMessage { psn_last: c.psn_last, bytes, marks, retx_ns, rnr_ns, ..o })
    };
    let done = e.completed.iter().enumerate().find(|(_, c)| c[0] as usize == i && c[3] as u32 == first);
    if let Some((j, c)) = done {
        let rtt = (c[8] != u64::MAX).then_some(c[8]);
        return Ok((Some((j, c[7], join(&EdgeMessage::of_completed(c))?, rtt)), None));
    }
    let held = e.flows.get(i).and_then(|f| f.held.iter().position(|h| h[2] as u32 == first));
    let Some(j) = held else { return Err(Untold) };
    let m = join(&EdgeMessage::of_held(&e.flows[i].held[j]))?;
    Ok((None, Some((j, m))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edge::{EdgeAcks, EdgeRtt, HeadFrame};
    use crate::model::{MessageVantage, MessagesEdgeFlow, Percentiles, Rings, Steadiness, Tail, Transfers};
    use crate::report::psn_stitch::Part;

    const LINK: u64 = 100_000_000_000;
    const WRITE: u64 = Kind::Write as u64;
    const SEND: u64 = Kind::Send as u64;

    fn flow_ref() -> FlowRef {
        FlowRef { src: "10.0.0.1".into(), dst: "10.0.0.2".into(), udp_sport: 1, dst_qp: 7 }
    }

    fn ack_ref() -> FlowRef {
        FlowRef { src: "10.0.0.2".into(), dst: "10.0.0.1".into(), udp_sport: 2, dst_qp: 9 }
    }

    fn id(f: &FlowRef) -> FlowId {
        keys(f).expect("parses").1
    }

    /// A report's messages section: its edge's one flow holding `held` at the end, its
    /// completions `completed` (without the flow index).
    fn section(held: &[[u64; 7]], completed: &[[u64; 8]]) -> Messages {
        let flow = MessagesEdgeFlow {
            flow: flow_ref(),
            ends: None,
            first_frame: None,
            first_paired: false,
            placed: true,
            held: held.iter().map(|h| [h[0], h[1], h[2], h[3], h[4], h[5], h[6], 8, 0, 0, 0]).collect(),
        };
        Messages {
            vantage: MessageVantage { position: "capture".into(), meaning: String::new() },
            link_speed_bps: LINK,
            completed: 0,
            by_kind: Default::default(),
            pending: 0,
            partial: 0,
            abandoned: 0,
            in_flight_evicted: 0,
            mct_ns: Percentiles::default(),
            classes: ["le_4KiB", "gt_4KiB"]
                .iter()
                .zip([Some(4096), None])
                .map(|(n, max_bytes)| crate::model::MessageClass {
                    name: n.to_string(),
                    max_bytes,
                    stats: crate::report::assemble::messages::stats(&Dist::default()),
                    histogram: Vec::new(),
                })
                .collect(),
            flows: Vec::new(),
            pairs: Vec::new(),
            transfers: Transfers::default(),
            tail: Tail::default(),
            steadiness: Steadiness::default(),
            rings: Rings::default(),
            edge: Some(MessagesEdge {
                overall: None,
                flows: vec![flow],
                pairs: Vec::new(),
                completed: completed
                    .iter()
                    .map(|c| [0, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], 8, 0, 0, 0])
                    .collect(),
                completed_cut: false,
                tail: None,
                uc: Vec::new(),
                uc_times: None,
            }),
        }
    }

    /// A report's view of the flow: its first requests `[opcode, psn]`, its smallest RTT sample,
    /// its ACK flow's first ACKs `[time, psn]`.
    type Sight = (Vec<[u32; 2]>, Option<u64>, Vec<[u64; 2]>);

    /// The request flow's part in `report`: its first requests `[opcode, psn]`, its RTT's
    /// smallest sample; the ACK flow's part: its first ACKs `[time, psn]`.
    fn parts(reports: &[Sight]) -> BTreeMap<FlowId, Vec<Part>> {
        let mut m: BTreeMap<FlowId, Vec<Part>> = BTreeMap::new();
        for (report, (head, rtt, acks)) in reports.iter().enumerate() {
            let mut e = crate::engine::edges::edge(None, Default::default());
            e.head = head.iter().map(|[o, psn]| HeadFrame([*o, *psn, 0, 0, 0, 0])).collect();
            e.rtt = Some(EdgeRtt {
                samples: rtt.iter().copied().collect(),
                min: rtt.unwrap_or(0),
                ack_flow: Some(ack_ref()),
                ..Default::default()
            });
            m.entry(id(&flow_ref())).or_default().push(Part { edge: Some(e), report, ..Part::default() });
            let mut a = crate::engine::edges::edge(None, Default::default());
            a.acks = Some(EdgeAcks { head: acks.clone(), complete: true, unpaired: 0, ambiguous: 0 });
            m.entry(id(&ack_ref())).or_default().push(Part { edge: Some(a), report, ..Part::default() });
        }
        m
    }

    fn run(sections: &[(u64, u64, Messages)], parts: &BTreeMap<FlowId, Vec<Part>>) -> Whole {
        let pairing = Pairing::of(parts);
        let s: Vec<_> = sections.iter().map(|(a, b, m)| (*a, *b, Some(m), true)).collect();
        stitch(&s, &pairing, &RttStitched::default()).expect("in series, with edges")
    }

    /// The go-back-N cut of the tests below: before it WRITEs 5 and 6 wait for their ACK;
    /// after it both are sent again (10 100, 10 200) and a new one, 7, at 10 300; one ACK at
    /// 10 800 covers them all (the report after the cut measured each against 500 ns).
    fn go_back_n() -> (Messages, Messages, BTreeMap<FlowId, Vec<Part>>) {
        let a = section(&[[WRITE, 0, 5, 5, 1000, 9000, 0], [WRITE, 0, 6, 6, 1000, 9500, 0]], &[]);
        let own = [
            [WRITE, 0, 5, 5, 1000, 10_100, 10_800, 500],
            [WRITE, 0, 6, 6, 1000, 10_200, 10_800, 500],
            [WRITE, 0, 7, 7, 1000, 10_300, 10_800, 500],
        ];
        let w_op = op::RDMA_WRITE_ONLY as u32;
        let p = parts(&[
            (vec![[w_op, 5], [w_op, 6]], None, vec![]),
            (vec![[w_op, 5], [w_op, 6], [w_op, 7]], None, vec![[10_800, 7]]),
        ]);
        (a, section(&[], &own), p)
    }

    /// The go-back-N cut below, where the report after the cut measured its completions against
    /// a sample of 500 ns that one run does not take (the repeat of a request waiting at the cut,
    /// Karn, taken out by the RTT stitch): the completion of 7 it listed keeps its time, and its
    /// slowdown is not told (the flow is untold).
    #[test]
    fn a_completion_measured_against_a_sample_one_run_does_not_take() {
        let (a, b, p) = go_back_n();
        let pairing = Pairing::of(&p);
        let mut rtt = RttStitched::default();
        let id = p.keys().find(|k| p[*k].iter().any(|x| x.edge.as_ref().is_some_and(|e| !e.head.is_empty()))).unwrap();
        let fix = super::super::rtt_stitch::Fix { removed: vec![(1, 500)], ..Default::default() };
        rtt.flows.insert(id.clone(), fix);
        let sections = [(0, 10_000, a), (10_050, 20_000, b)];
        let s: Vec<_> = sections.iter().map(|(a, b, m)| (*a, *b, Some(m), true)).collect();
        let w = stitch(&s, &pairing, &rtt).expect("in series, with edges");
        assert_eq!((w.untold, w.all.values()), (1, vec![1800, 1300, 500]));
    }

    /// qp_mtus.pcap, by hand: a READ of 2 048 bytes at PSN 104 (9 000) ends the report before
    /// the cut, its span not known there. After it: its READ RESPONSE FIRST (104, 10 100) and
    /// LAST (105, 10 200), a WRITE at 108 and its ACK (10 400). One run completes the READ by
    /// its first PSN until the next request gives its span: sent at 10 250, the LAST completes
    /// it (1 200 ns); sent at 10 150, the READ then spans up to 107 (PSNs the capture missed),
    /// so only the WRITE's ACK completes it (1 400 ns). Sent at 10 200, with the LAST: not told.
    #[test]
    fn a_read_held_at_a_cut_completes_as_its_span_was_known_then() {
        const READ: u64 = Kind::Read as u64;
        let a = section(&[[READ, 0, 104, 104, 2048, 9_000, 0]], &[]);
        let run_at = |t_write: u64| {
            let b = section(&[], &[[WRITE, 0, 108, 108, 1000, t_write, 10_400, 100]]);
            let acks = vec![[10_100, 104], [10_200, 105], [10_400, 108]];
            let mut p = parts(&[
                (vec![[op::RDMA_READ_REQUEST as u32, 104]], None, vec![]),
                (vec![[op::RDMA_WRITE_ONLY as u32, 108]], None, acks),
            ]);
            p.get_mut(&id(&flow_ref())).unwrap()[1].edge.as_mut().unwrap().head_ns = vec![t_write];
            let e = p.get_mut(&id(&ack_ref())).unwrap()[1].edge.as_mut().unwrap();
            let firsts =
                [(op::RDMA_READ_RESPONSE_FIRST, 104), (op::RDMA_READ_RESPONSE_LAST, 105), (op::ACKNOWLEDGE, 108)];
            e.head = firsts.iter().map(|(o, psn)| HeadFrame([*o as u32, *psn, 0, 0, 0x1F, 0])).collect();
            e.head_ns = vec![10_100, 10_200, 10_400];
            let pairing = Pairing::of(&p);
            let sections = [(0, 10_000, a.clone()), (10_050, 20_000, b)];
            let s: Vec<_> = sections.iter().map(|(x, y, m)| (*x, *y, Some(m), true)).collect();
            stitch(&s, &pairing, &RttStitched::default()).map(|w| (w.untold, w.all.values()))
        };
        assert_eq!(run_at(10_250), Some((0, vec![1200, 150])));
        assert_eq!(run_at(10_150), Some((0, vec![1400, 250])));
        assert_eq!(run_at(10_200).map(|(untold, _)| untold), Some(1));
    }

    /// A capture cut at 10 000 ns. Before it: a 1 000-byte WRITE ONLY (PSN 5) at 9 000 waits
    /// for its ACK; a SEND (PSN 6 FIRST at 9 500, 1 000 bytes) is being sent; the flow's smallest
    /// RTT is 800 ns. After it: the SEND's LAST (PSN 7, 500 bytes) begins a partial message there,
    /// completed at 10 600 by the ACK of PSN 7; the first ACK (10 200, PSN 5) completed nothing
    /// there. One run: the WRITE takes 1 200 ns, the SEND 1 100 ns and 1 500 bytes; nothing
    /// partial, nothing pending. The slowdown of the WRITE: 1 200 / (80 ns on the wire + 800).
    #[test]
    fn messages_held_at_a_cut_complete_after_it() {
        let a = section(&[[WRITE, 0, 5, 5, 1000, 9000, 0], [SEND, 0, 6, 6, 1000, 9500, 1]], &[]);
        let partial = mark::PARTIAL as u64;
        let b = section(&[], &[[SEND, partial, 7, 7, 500, 10_100, 10_600, 800]]);
        let p = parts(&[
            (vec![[op::RDMA_WRITE_ONLY as u32, 5], [op::SEND_FIRST as u32, 6]], Some(800), vec![]),
            (vec![[op::SEND_LAST as u32, 7]], None, vec![[10_200, 5], [10_600, 7]]),
        ]);
        let w = run(&[(0, 10_000, a), (10_050, 20_000, b)], &p);
        assert_eq!((w.untold, w.partial, w.pending, w.all.len()), (0, 0, 0, 2));
        assert_eq!(w.by_kind[Kind::Write as usize] + w.by_kind[Kind::Send as usize], 2);
        assert_eq!(w.all.values(), vec![1200, 1100]);
        assert_eq!(w.classes[0].bytes, 2500);
        assert_eq!(w.pairs.len(), 1);
        assert_eq!(w.pairs[0].3, Some(800));
        assert_eq!(w.pairs[0].2.slowdown.values(), vec![1200 * 1000 / 880, 1100 * 1000 / (120 + 800)]);
        assert_eq!(w.flows[0].2, 0);
    }

    /// The first requests after the cut repeat PSNs held before it (go-back-N: WRITEs 5 and 6
    /// sent again at 10 100 and 10 200, then a new one, 7, at 10 300; one ACK at 10 800 covers
    /// them all). The report after the cut made messages of the repeats; one run counts them as
    /// retransmissions: 5 and 6 keep their first start (1 800 and 1 300 ns), 7 takes 500 ns.
    /// A repeat that runs past where the flow stopped (a SEND 6..7 sent again as 5..7) is not
    /// told: each report's counts stay.
    #[test]
    fn requests_repeated_after_a_cut_are_retransmissions() {
        let (a, b, p) = go_back_n();
        let w_op = op::RDMA_WRITE_ONLY as u32;
        let w = run(&[(0, 10_000, a.clone()), (10_050, 20_000, b)], &p);
        assert_eq!((w.untold, w.pending, w.partial), (0, 0, 0));
        assert_eq!(w.all.values(), vec![1800, 1300, 500]);
        let past = section(&[], &[[SEND, 0, 5, 7, 3000, 10_100, 10_800, 500]]);
        let p = parts(&[
            (vec![[w_op, 5], [w_op, 6]], None, vec![]),
            (vec![[op::SEND_FIRST as u32, 5]], None, vec![[10_800, 7]]),
        ]);
        let w = run(&[(0, 10_000, a), (10_050, 20_000, past)], &p);
        assert_eq!((w.untold, w.pending, w.all.values()), (1, 2, vec![700]));
    }

    /// A SEND being sent at the cut (FIRST PSN 6) whose LAST this capture missed: after the
    /// cut the flow begins a new SEND (FIRST PSN 9), which lets the open one go in one run.
    #[test]
    fn a_first_after_a_gap_lets_the_open_message_go() {
        let a = section(&[[SEND, 0, 6, 6, 1000, 9500, 1]], &[]);
        let b = section(&[[SEND, 0, 9, 9, 700, 10_100, 1]], &[]);
        let p = parts(&[
            (vec![[op::SEND_FIRST as u32, 6]], None, vec![]),
            (vec![[op::SEND_FIRST as u32, 9]], None, vec![]),
        ]);
        let w = run(&[(0, 10_000, a), (10_050, 20_000, b)], &p);
        assert_eq!((w.untold, w.abandoned, w.pending, w.partial), (0, 1, 1, 0));
    }
}
