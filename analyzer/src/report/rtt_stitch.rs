//! RTT across cuts in time: a request waiting for its ACK at the end of one capture is
//! answered in the next, where its ACK finds no request. Reports made with `--edges` carry
//! what pairs them again: each request flow its waiting requests and its ACK flow
//! (`flows[].edge.rtt`), each ACK flow its first ACKs and the ACKs it could not pair
//! (`flows[].edge.acks`). [`stitch`] replays those ACKs on the waiting requests in time order,
//! as the RTT analysis' `ack` does (a sample when the ACK came within the timeout, else a
//! timeout), and says what the whole counts beyond the parts' sum: the samples found, the
//! timeouts and pending requests moved, the ACKs paired.
//!
//! A part after a cut that found its ACKs ambiguous (two QPs between the same hosts, paired in
//! one run by the CM exchange or the ACKs before the cut) never paired the flow: where it lists
//! every request and ACK, they are replayed with the pairing before the cut (`retold`).
//!
//! A flow is stitched only where the reports tell the whole story; else its requests and ACKs
//! stay as each report counted them and the merge says so (`rtt_not_stitched`): an ACK flow some
//! report found ambiguous and then paired, or paired with another flow, waiting requests not all listed, an ACK
//! head that ends before a waiting request's timeout, requests repeated after a cut (a
//! retransmission keeps its first time, Karn), an ACK that pairs only by the PSN span of the
//! whole.

use std::collections::{BTreeMap, VecDeque};

use analyzer_common::psn::{PSN_HALF, psn_diff};

use super::psn_stitch::Part;
use super::rtt_karn::{Counted, Untold, Waiting};
use crate::model::FlowRef;
use crate::model::edge::{EdgeAcks, EdgeRtt};

pub use super::psn_stitch::{FlowId, acks_of};

/// What the whole counts for one request flow beyond the sum of its parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fix {
    /// Samples of requests answered across a cut.
    pub extra: Vec<u64>,
    /// Samples a report took that one run does not (a request sent again after a cut, timed
    /// from its first time in one run, Karn), as (report, sample).
    pub removed: Vec<(usize, u64)>,
    /// Timeouts and pending requests, relative to the parts' counts.
    pub timeouts: i64,
    pub pending: i64,
}

/// The stitched flows and what they resolve of the cuts.
#[derive(Debug, Default)]
pub struct Stitched {
    pub flows: BTreeMap<FlowId, Fix>,
    /// ACKs after a cut that their report could not pair and the whole pairs.
    pub unpaired: u64,
    /// ACKs after a cut that their report found several request flows for (two QPs between the
    /// same hosts, with the CM exchange or the pairing before the cut) and the whole pairs.
    pub ambiguous: u64,
    /// Requests pending at the end of a report that another follows, now decided.
    pub waiting: u64,
    /// ACKs after a cut that one run could not pair either (no requests the other way).
    pub unpaired_kept: u64,
}

/// One report: its span, its RTT timeout.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
    pub timeout_ns: u64,
}

/// The queue of requests waiting across cuts, and what replaying ACKs on it decided.
struct Queue {
    timeout_ns: u64,
    waiting: VecDeque<Waiting>,
    fix: Fix,
}

impl Fix {
    /// One run decided `now` what report `report` counted `counted`.
    pub fn settle(&mut self, report: usize, counted: Counted, now: Counted) {
        if counted == now {
            return;
        }
        match counted {
            Counted::Sample(v) => self.removed.push((report, v)),
            Counted::Timeout => self.timeouts -= 1,
            Counted::Pending => self.pending -= 1,
            Counted::Nothing => {}
        }
        match now {
            Counted::Sample(v) => self.extra.push(v),
            Counted::Timeout => self.timeouts += 1,
            Counted::Pending => self.pending += 1,
            Counted::Nothing => {}
        }
    }
}

impl Queue {
    /// A request decided: a sample of `rtt` (within the timeout) or a timeout. (A sample only
    /// settles a pending request or a timeout: what report counted it does not matter.)
    fn decide(&mut self, w: Waiting, rtt: Option<u64>) {
        let now = match rtt.filter(|r| *r <= self.timeout_ns) {
            Some(r) => Counted::Sample(r),
            None => Counted::Timeout,
        };
        self.fix.settle(w.report, w.counted, now);
    }

    /// An ACK at `ts` for `psn`: the requests it covers, from the oldest (as `Rtt::ack`).
    fn ack(&mut self, ts: u64, psn: u32) -> Result<(), Untold> {
        while let Some(w) = self.waiting.front().copied() {
            if psn_diff(w.psn, psn) >= PSN_HALF {
                // One run may have let an old front go at a request of its own (not listed),
                // and this ACK would then cover the requests behind it.
                let timed_out = ts.saturating_sub(w.ts) > self.timeout_ns;
                if timed_out && self.waiting.iter().any(|x| psn_diff(x.psn, psn) < PSN_HALF) {
                    return Err(Untold);
                }
                return Ok(());
            }
            self.waiting.pop_front();
            self.decide(w, Some(ts.saturating_sub(w.ts)));
        }
        Ok(())
    }

    /// Whether a report's requests (`p`) are all new to the requests waiting: one run keeps a
    /// waiting request's first time when it is sent again (Karn), where the report alone timed
    /// it from the repeat. Told by its first request's PSN being past every waiting one and no
    /// repeat after it.
    fn after_waiting(&self, p: &Part) -> bool {
        let mut psns = self.waiting.iter().map(|w| w.psn);
        let Some(first) = psns.next() else { return true };
        // The latest waiting PSN, in 24-bit serial order.
        let last = psns.fold(first, analyzer_common::psn::psn_later);
        p.repeats == 0 && p.first_request().is_none_or(|f| (1..PSN_HALF).contains(&psn_diff(last, f)))
    }

    /// Whether an ACK for `psn` falls within the waiting requests' PSNs (up to
    /// [`crate::analyses::rtt::READ_SLACK`] past the latest): the request flow's span covers it.
    fn spans(&self, psn: u32) -> bool {
        let Some(first) = self.waiting.front() else { return false };
        let reach =
            self.waiting.iter().map(|w| psn_diff(first.psn, w.psn)).filter(|d| *d < PSN_HALF).max().unwrap_or(0);
        psn_diff(first.psn, psn) <= reach + crate::analyses::rtt::READ_SLACK
    }

    /// A report's ACKs of the flow, when the flow is paired in the whole.
    fn acks(&mut self, a: &EdgeAcks) -> Result<(), Untold> {
        for [ts, psn] in &a.head {
            if self.waiting.is_empty() {
                return Ok(());
            }
            self.ack(*ts, *psn as u32)?;
        }
        if a.complete || self.waiting.is_empty() {
            return Ok(());
        }
        // Past the head: every request still waiting is decided a timeout if the head's last
        // ACK came after its timeout (whatever ACK or request then lets it go).
        let last = a.head.last().map_or(0, |[ts, _]| *ts);
        if self.waiting.iter().any(|w| last.saturating_sub(w.ts) <= self.timeout_ns) {
            return Err(Untold);
        }
        while let Some(w) = self.waiting.pop_front() {
            self.decide(w, None);
        }
        Ok(())
    }

    /// The requests still waiting at the end of the whole (`end_ns`): timeouts or pending.
    fn finish(mut self, end_ns: u64) -> Fix {
        while let Some(w) = self.waiting.pop_front() {
            self.fix.settle(w.report, w.counted, Counted::at_end(w.ts, end_ns, self.timeout_ns));
        }
        self.fix
    }
}

/// The flow a request flow's ACKs travel on, as `merge` keys it.
pub fn ack_id(ip_version: u8, a: &FlowRef) -> FlowId {
    (ip_version, a.src.clone(), a.dst.clone(), a.udp_sport, a.dst_qp)
}

/// The flow `id` names, as reports name it (the inverse of [`ack_id`]).
pub fn ref_of(id: &FlowId) -> FlowRef {
    FlowRef { src: id.1.clone(), dst: id.2.clone(), udp_sport: id.3, dst_qp: id.4 }
}

/// A flow as `merge` keys it.
pub fn id_of(f: &crate::model::Flow) -> FlowId {
    (f.ip_version, f.src.clone(), f.dst.clone(), f.udp_sport, f.dst_qp)
}

fn rtt_of(p: &Part) -> Option<&EdgeRtt> {
    p.edge.as_ref()?.rtt.as_ref()
}

/// The reports in time order (indices into `spans`), when they follow each other without
/// overlapping (a capture cut in time) and there are several.
pub fn in_series(spans: &[Span]) -> Option<Vec<usize>> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|i| (spans[*i].start_ns, spans[*i].end_ns));
    let in_series = order.windows(2).all(|w| spans[w[0]].end_ns <= spans[w[1]].start_ns);
    (in_series && spans.len() > 1).then_some(order)
}

/// How one run pairs request flows with the flows that carry their ACKs, as far as the
/// reports tell.
pub struct Pairing<'a> {
    /// Each flow's parts.
    pub parts: &'a BTreeMap<FlowId, Vec<Part>>,
    /// Each ACK flow's request flows, as the reports paired them.
    claimed: BTreeMap<FlowId, Vec<&'a FlowId>>,
    /// Request flows no report paired, with the ACK flow one run pairs them with at its first
    /// ACK ([`super::first_acks`]).
    first_acks: BTreeMap<FlowId, FlowId>,
    hosts: Hosts<'a>,
}

/// A request flow's ACK flow in one run: its parts (none: no ACK could answer its requests),
/// and whether no report paired them (inferred).
pub struct AckFlow<'a> {
    pub parts: &'a [Part],
    pub inferred: bool,
}

impl<'a> Pairing<'a> {
    pub fn of(parts: &'a BTreeMap<FlowId, Vec<Part>>) -> Self {
        let mut claimed: BTreeMap<FlowId, Vec<&FlowId>> = BTreeMap::new();
        for (id, ps) in parts {
            for a in ps.iter().filter_map(rtt_of).filter_map(|r| r.ack_flow.as_ref()) {
                let v = claimed.entry(ack_id(id.0, a)).or_default();
                if !v.contains(&id) {
                    v.push(id);
                }
            }
        }
        let first_acks = super::first_acks::first_acks(parts, &claimed);
        Pairing { parts, claimed, first_acks, hosts: Hosts::of(parts) }
    }

    /// The ACK flow of request flow `id` (its parts `ps`), or `None` when the reports cannot
    /// tell; `carried`: the flow has something waiting across a cut, which an ACK flow no
    /// report paired may answer.
    pub fn ack_of(&self, id: &'a FlowId, ps: &[Part], carried: bool) -> Option<AckFlow<'a>> {
        let acks: Vec<&FlowRef> = ps.iter().filter_map(rtt_of).filter_map(|r| r.ack_flow.as_ref()).collect();
        let (ack, inferred) = match acks.first() {
            Some(a) => (Some(ack_id(id.0, a)), false),
            None if self.first_acks.contains_key(id) => (self.first_acks.get(id).cloned(), true),
            None if carried => match self.hosts.lone_ack_flow(&self.claimed, id) {
                Some(a) => (Some(a), true),
                // No ACK could answer its requests in one run either.
                None if !self.hosts.acks_back(id) => (None, false),
                None => return None,
            },
            None => return None,
        };
        let Some(ack) = ack else { return Some(AckFlow { parts: &[], inferred }) };
        if acks.iter().any(|a| ack_id(id.0, a) != ack) || self.claimed.get(&ack).is_some_and(|c| c.len() > 1) {
            return None;
        }
        Some(AckFlow { parts: self.parts.get(&ack)?, inferred })
    }

    /// Whether one run pairs request flow `id` with its ACK flow from that flow's first
    /// response on, where no report named them ([`super::first_acks`]).
    pub fn at_first_ack(&self, id: &FlowId) -> bool {
        self.first_acks.contains_key(id)
    }

    /// The request flows [`Pairing::at_first_ack`] pairs.
    pub fn first_acks(&self) -> impl Iterator<Item = &FlowId> {
        self.first_acks.keys()
    }

    /// Whether one run pairs flow `id`'s ACK flow by PSN, at its first response within the
    /// flow's PSNs: no report paired them (`ack`), or no other flow sent requests from its
    /// source to its destination (no other candidate, whichever report paired them).
    pub fn by_psn(&self, id: &'a FlowId, ack: &AckFlow) -> bool {
        ack.inferred || !self.hosts.along(id, false).iter().any(|(f, ps)| *f != id && sends_requests(ps))
    }
}

/// The request flows across cuts and their RTT as one run over the reports (`spans`, by
/// report index; `pairing`: over each flow's parts, with the report they are from).
pub fn stitch(pairing: &Pairing, spans: &[Span]) -> Stitched {
    let mut out = Stitched::default();
    let timeout_ns = spans.first().map_or(0, |s| s.timeout_ns);
    let Some(order) = in_series(spans).filter(|_| spans.iter().all(|s| s.timeout_ns == timeout_ns)) else {
        return out;
    };
    let end_ns = spans.iter().map(|s| s.end_ns).max().unwrap_or(0);
    for (id, ps) in pairing.parts {
        let waiting = ps.iter().filter_map(rtt_of).any(|r| !r.waiting.is_empty());
        let Some(ack) = pairing.ack_of(id, ps, waiting) else { continue };
        // A flow without requests with AckReq that one run pairs with its ACK flow from that
        // flow's first response (no report named them): every response is paired, no sample
        // comes of them.
        if pairing.at_first_ack(id) && ps.iter().all(|p| p.edge.is_some() && rtt_of(p).is_none()) {
            for a in ack.parts.iter().filter_map(acks_of) {
                out.unpaired += a.unpaired;
                out.ambiguous += a.ambiguous;
            }
            continue;
        }
        let flow = Flow { parts: ps, acks: ack.parts, inferred: ack.inferred };
        if let Ok((fix, r)) = flow.replay(&order, spans, timeout_ns, end_ns)
            && (fix != Fix::default() || r != Resolved::default())
        {
            out.unpaired += r.unpaired;
            out.ambiguous += r.ambiguous;
            out.waiting += r.waiting;
            out.flows.insert(id.clone(), fix);
        }
    }
    out.unpaired_kept = pairing.hosts.unpaired_kept(&order);
    out
}

/// Whether a flow sent requests in some report.
fn sends_requests(ps: &[Part]) -> bool {
    ps.iter().any(|p| rtt_of(p).is_some() || p.first_request().is_some())
}

/// The flows by (IP version, source, destination): what one run's pairing looks at.
struct Hosts<'a>(BTreeMap<(u8, &'a str, &'a str), Vec<Sight<'a>>>);

/// A flow and its parts.
type Sight<'a> = (&'a FlowId, &'a [Part]);

impl<'a> Hosts<'a> {
    fn of(parts: &'a BTreeMap<FlowId, Vec<Part>>) -> Self {
        let mut m: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for (id, ps) in parts {
            m.entry((id.0, id.1.as_str(), id.2.as_str())).or_default().push((id, ps.as_slice()));
        }
        Hosts(m)
    }

    /// The flows from `id`'s source to its destination (`back`: the other way).
    fn along(&self, id: &'a FlowId, back: bool) -> &[Sight<'a>] {
        let (src, dst) = if back { (&id.2, &id.1) } else { (&id.1, &id.2) };
        self.0.get(&(id.0, src.as_str(), dst.as_str())).map(Vec::as_slice).unwrap_or_default()
    }

    /// Whether some flow the other way carried ACKs in some report.
    fn acks_back(&self, id: &'a FlowId) -> bool {
        self.along(id, true).iter().any(|(_, ps)| ps.iter().any(|p| acks_of(p).is_some()))
    }

    /// ACKs after a cut (in reports but the first, `order`) that one run could not pair
    /// either: no flow sent requests the other way in any report.
    fn unpaired_kept(&self, order: &[usize]) -> u64 {
        let first = order.first().copied();
        let mut n = 0;
        for (id, ps) in self.0.values().flatten() {
            if self.along(id, true).iter().any(|(_, rs)| sends_requests(rs)) {
                continue;
            }
            let later = ps.iter().filter(|p| Some(p.report) != first).filter_map(acks_of);
            n += later.map(|a| a.unpaired + a.ambiguous).sum::<u64>();
        }
        n
    }

    /// The ACK flow of a request flow no report paired (`id`), as one run pairs them by PSN:
    /// when `id` is the only request flow from its source to its destination, and one flow back,
    /// which no report paired with another, had ACKs its report could not pair.
    fn lone_ack_flow(&self, claimed: &BTreeMap<FlowId, Vec<&FlowId>>, id: &'a FlowId) -> Option<FlowId> {
        if self.along(id, false).iter().any(|(f, ps)| *f != id && sends_requests(ps)) {
            return None;
        }
        let unpaired = |ps: &[Part]| ps.iter().filter_map(acks_of).any(|a| a.unpaired > 0);
        let mut back = self.along(id, true).iter().filter(|(f, ps)| !claimed.contains_key(*f) && unpaired(ps));
        match (back.next(), back.next()) {
            (Some((f, _)), None) => Some((*f).clone()),
            _ => None,
        }
    }
}

/// What a flow's replay resolves of the cuts: ACKs its reports counted unpaired or ambiguous
/// that one run pairs, requests pending at a cut that one run decides.
#[derive(Debug, Default, PartialEq, Eq)]
struct Resolved {
    unpaired: u64,
    ambiguous: u64,
    waiting: u64,
}

/// Whether a part after a cut left the request flow unpaired because its ACKs were ambiguous
/// there (another request flow between the hosts spanned their PSNs too; one run paired them
/// before, by the CM exchange or the ACKs before the cut) and lists every request and ACK of
/// it, so one run's pairing can be replayed: the part took no sample of the flow.
fn retold(req: Option<&Part>, ack: Option<&Part>) -> bool {
    let requests =
        req.and_then(rtt_of).is_some_and(|r| !r.requests_cut && r.samples.is_empty() && r.buckets.is_empty());
    requests && ack.and_then(acks_of).is_some_and(|a| a.ambiguous > 0 && a.complete)
}

/// A request flow's parts and its ACK flow's (`inferred`: no report paired them).
struct Flow<'a> {
    parts: &'a [Part],
    acks: &'a [Part],
    inferred: bool,
}

impl Flow<'_> {
    /// Replays the reports in time order: the fix, and what it resolved of the cuts.
    fn replay(&self, order: &[usize], spans: &[Span], timeout_ns: u64, end_ns: u64) -> Result<(Fix, Resolved), Untold> {
        let mut q = Queue { timeout_ns, waiting: VecDeque::new(), fix: Fix::default() };
        let (mut paired, mut seen, mut resolved) = (false, false, Resolved::default());
        for (n, &j) in order.iter().enumerate() {
            let (req, ack) = (Part::of(self.parts, j), Part::of(self.acks, j));
            if req.is_some_and(|p| p.edge.is_none()) || ack.is_some_and(|p| p.edge.is_none()) {
                return Err(Untold);
            }
            let names = req.and_then(rtt_of).and_then(|r| r.ack_flow.as_ref()).is_some();
            let retold = paired && !names && retold(req, ack);
            // Requests of this part that may repeat one waiting at the cut, or that the part
            // never paired with ACKs one run applies: replayed with its ACKs.
            let karn = req.filter(|p| retold || !q.after_waiting(p));
            let mut carried = false;
            if let Some(a) = ack.and_then(acks_of) {
                // An inferred pair is one at the first ACK that covers a waiting request within
                // the PSN span one run would give the request flow.
                paired |= self.inferred && a.head.first().is_some_and(|[_, psn]| q.spans(*psn as u32));
                carried = paired || (names && a.unpaired == 0);
                let ambiguous = a.ambiguous > 0 && seen && !retold;
                if ambiguous || (!carried && (!q.waiting.is_empty() || (seen && a.unpaired > 0))) {
                    return Err(Untold);
                }
                if paired {
                    resolved.unpaired += a.unpaired;
                    resolved.ambiguous += if retold { a.ambiguous } else { 0 };
                }
                if karn.is_none() {
                    q.acks(a)?;
                }
            }
            let left = match karn {
                Some(p) => self.karn(&mut q, p, ack, (names, carried), spans[j].end_ns)?,
                None => None,
            };
            paired |= names;
            seen |= req.is_some();
            if let Some(r) = req.and_then(rtt_of) {
                let last = n + 1 == order.len();
                if r.waiting_cut && !last {
                    return Err(Untold);
                }
                for [psn, ts] in &r.waiting {
                    let counted = Counted::at_end(*ts, spans[j].end_ns, timeout_ns);
                    resolved.waiting += u64::from(counted == Counted::Pending && !last);
                    if left.is_none() {
                        q.waiting.push_back(Waiting { psn: *psn as u32, ts: *ts, counted, report: j });
                    }
                }
            }
            if let Some(left) = left {
                q.waiting = left;
            }
        }
        Ok((q.finish(end_ns), resolved))
    }

    /// Part `p`'s requests replayed on the requests waiting at the cut before it, with its ACK
    /// flow's part (`names`: the part paired them; `carried`: one run applies its ACKs here);
    /// what one run still waits for after it, when that is not the part's own waiting list.
    fn karn(
        &self,
        q: &mut Queue,
        p: &Part,
        ack: Option<&Part>,
        (names, carried): (bool, bool),
        end_ns: u64,
    ) -> Result<super::rtt_karn::Left, Untold> {
        let r = rtt_of(p);
        let a = ack.and_then(acks_of);
        let heads = super::rtt_karn::PartHeads {
            report: p.report,
            requests: r.map(|r| r.requests.as_slice()).unwrap_or_default(),
            requests_cut: r.is_some_and(|r| r.requests_cut),
            acks: a.map(|a| a.head.as_slice()).unwrap_or_default(),
            acks_complete: a.is_none_or(|a| a.complete),
            unpaired_first: match (a, names) {
                (Some(a), true) => (a.unpaired + a.ambiguous) as usize,
                (Some(a), false) => a.head.len(),
                (None, _) => 0,
            },
            carried,
            end_ns,
            waiting: r.map(|r| r.waiting.as_slice()).unwrap_or_default(),
        };
        // The part's own samples must be listed to take one out.
        let exact = r.is_none_or(|r| r.buckets.is_empty());
        let fix = &mut q.fix;
        let mut removes = false;
        let left = super::rtt_karn::replay(&q.waiting, &heads, q.timeout_ns, &mut |report, counted, now| {
            removes |= matches!(counted, Counted::Sample(_)) && counted != now;
            fix.settle(report, counted, now);
        })?;
        if removes && !exact {
            return Err(Untold);
        }
        if left.is_none() {
            q.waiting.clear();
        }
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edge::FlowEdge;

    const T: u64 = 1000;

    fn edge(rtt: Option<EdgeRtt>, acks: Option<EdgeAcks>) -> FlowEdge {
        FlowEdge { rtt, acks, ..crate::engine::edges::edge(None, Default::default()) }
    }

    fn part(report: usize, e: FlowEdge) -> Part {
        Part { edge: Some(e), report, ..Part::default() }
    }

    fn id(qp: u32) -> FlowId {
        (4, "10.0.0.1".into(), "10.0.0.2".into(), 1, qp)
    }

    fn ack_ref() -> FlowRef {
        FlowRef { src: "10.0.0.2".into(), dst: "10.0.0.1".into(), udp_sport: 2, dst_qp: 9 }
    }

    fn ack_key() -> FlowId {
        (4, "10.0.0.2".into(), "10.0.0.1".into(), 2, 9)
    }

    fn waiting(list: &[[u64; 2]], paired: bool) -> EdgeRtt {
        EdgeRtt { waiting: list.to_vec(), ack_flow: paired.then(ack_ref), ..Default::default() }
    }

    fn acks(head: &[[u64; 2]], complete: bool, unpaired: u64) -> EdgeAcks {
        EdgeAcks { head: head.to_vec(), complete, unpaired, ambiguous: 0 }
    }

    fn spans(cuts: &[(u64, u64)]) -> Vec<Span> {
        cuts.iter().map(|(s, e)| Span { start_ns: *s, end_ns: *e, timeout_ns: T }).collect()
    }

    /// A capture cut at 10 000 ns: requests 3 (at 8 000: the first part counted it a timeout
    /// already), 5 and 6 (at 9 500, 9 900) wait at the end of the first part. After the cut the
    /// ACK flow's first ACK (10 100, PSN 5) covers 3 (2 100 ns: a timeout still) and 5 (600 ns);
    /// the next (10 400, PSN 7) covers 6 (500 ns). The second part could pair neither ACK (its
    /// own requests start at PSN 8): both counted unpaired there.
    #[test]
    fn requests_before_a_cut_get_the_acks_after_it() {
        let mut parts = BTreeMap::new();
        let first = part(0, edge(Some(waiting(&[[3, 8000], [5, 9500], [6, 9900]], true)), None));
        parts.insert(id(7), vec![first, part(1, edge(Some(waiting(&[], true)), None))]);
        let head = acks(&[[10_100, 5], [10_400, 7], [10_900, 8]], true, 2);
        parts.insert(ack_key(), vec![part(0, edge(None, None)), part(1, edge(None, Some(head)))]);
        let s = stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 20_000)]));
        let fix = &s.flows[&id(7)];
        // Samples 600 and 500; the two pending became samples; the timeout stays one.
        assert_eq!((fix.extra.clone(), fix.pending, fix.timeouts), (vec![600, 500], -2, 0));
        assert_eq!((s.unpaired, s.waiting), (2, 2));
    }

    /// Request 7 waits at the cut (9 600, pending); the part after sends it again at 10 100
    /// and its ACK comes at 10 400 (the part alone: a sample of 300). One run keeps the first
    /// time (Karn): a sample of 800 instead, and the pending request decided.
    #[test]
    fn a_request_sent_again_after_the_cut_keeps_its_first_time() {
        let mut parts = BTreeMap::new();
        let mut first = part(0, edge(Some(waiting(&[[7, 9600]], true)), None));
        first.rtt = Some(crate::model::FlowRtt { percentiles: Default::default(), timeouts: 0, pending: 1 });
        let again =
            EdgeRtt { samples: vec![300], min: 300, max: 300, requests: vec![[7, 10_100]], ..waiting(&[], true) };
        // Its head: the WRITE ONLY with PSN 7 again.
        let head = vec![crate::model::edge::HeadFrame([0x0A, 7, 0, 0, 0, 0])];
        parts.insert(id(7), vec![first, part(1, FlowEdge { head, ..edge(Some(again), None) })]);
        let head = acks(&[[10_400, 7]], true, 0);
        parts.insert(ack_key(), vec![part(0, edge(None, None)), part(1, edge(None, Some(head)))]);
        let s = stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 20_000)]));
        let fix = &s.flows[&id(7)];
        assert_eq!(
            (fix.extra.clone(), fix.removed.clone(), fix.pending, fix.timeouts),
            (vec![800], vec![(1, 300)], -1, 0)
        );
        let rtt = super::super::rtt_merge::flow_rtt(&parts[&id(7)], Some(fix)).unwrap().unwrap();
        let p = &rtt.percentiles;
        assert_eq!((p.samples, p.min, p.max, rtt.pending), (1, 800, 800, 0));
    }

    /// A request that no ACK after the cut answers: pending at the end of the whole when it is
    /// young there, else a timeout; a head that ends too soon to tell leaves the flow alone.
    #[test]
    fn unanswered_requests_and_heads_that_cannot_tell() {
        let mut parts = BTreeMap::new();
        parts.insert(id(7), vec![part(0, edge(Some(waiting(&[[5, 9500]], true)), None))]);
        parts.insert(ack_key(), vec![part(1, edge(None, Some(acks(&[[10_100, 4]], true, 0))))]);
        let s = stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 10_200)]));
        // Still pending at the end of the whole: nothing moves, and the request is decided.
        assert_eq!((&s.flows[&id(7)], s.waiting), (&Fix::default(), 1));
        let s = stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 20_000)]));
        assert_eq!((s.flows[&id(7)].pending, s.flows[&id(7)].timeouts, s.waiting), (-1, 1, 1));
        // The head holds one ACK, 600 ns after the request, and there were more: untold.
        parts.insert(ack_key(), vec![part(1, edge(None, Some(acks(&[[10_100, 4]], false, 0))))]);
        assert!(stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 20_000)])).flows.is_empty());
        // Another request flow paired with the same ACK flow: untold.
        parts.insert(ack_key(), vec![part(1, edge(None, Some(acks(&[[10_100, 5]], true, 0))))]);
        assert_eq!(
            stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 20_000)])).flows[&id(7)].extra,
            vec![600]
        );
        parts.insert(id(8), vec![part(1, edge(Some(waiting(&[], true)), None))]);
        assert!(stitch(&Pairing::of(&parts), &spans(&[(0, 10_000), (10_050, 20_000)])).flows.is_empty());
    }

    /// Two QPs between the same hosts (rtt_cm.pcap): the CM exchange before the cut paired
    /// flow 7 with the ACKs to QP 9, and request 5 waits at the cut (9 900, pending). The part
    /// after sees no CM exchange and both flows' PSNs span the ACKs: it pairs none (ACK 5,
    /// before either flow's PSNs there, unpaired; ACKs 6 and 7 ambiguous) and counts requests 6
    /// (10 200) and 7 (10 600) pending at its end (11 000). One run, by hand: ACK 5 at 10 100
    /// gives 200, ACK 6 at 10 300 gives 100, ACK 7 at 10 900 gives 300; nothing pending.
    #[test]
    fn acks_a_part_found_ambiguous_pair_as_before_the_cut() {
        let mut parts = BTreeMap::new();
        let first = part(0, edge(Some(waiting(&[[5, 9_900]], true)), None));
        let list = [[6, 10_200], [7, 10_600]];
        let after = EdgeRtt { requests: list.to_vec(), ..waiting(&list, false) };
        parts.insert(id(7), vec![first, part(1, edge(Some(after.clone()), None))]);
        let head = EdgeAcks { ambiguous: 2, ..acks(&[[10_100, 5], [10_300, 6], [10_900, 7]], true, 1) };
        parts.insert(ack_key(), vec![part(0, edge(None, None)), part(1, edge(None, Some(head.clone())))]);
        let cuts = spans(&[(0, 10_000), (10_050, 11_000)]);
        let s = stitch(&Pairing::of(&parts), &cuts);
        let fix = &s.flows[&id(7)];
        assert_eq!((fix.extra.clone(), fix.pending, fix.timeouts), (vec![200, 100, 300], -3, 0));
        assert_eq!((s.unpaired, s.ambiguous, s.waiting), (1, 2, 1));
        // Not told: the part listed only its first requests, or its ACK head is cut short.
        let cut = EdgeRtt { requests_cut: true, ..after.clone() };
        parts.get_mut(&id(7)).unwrap()[1] = part(1, edge(Some(cut), None));
        assert!(stitch(&Pairing::of(&parts), &cuts).flows.is_empty());
        parts.get_mut(&id(7)).unwrap()[1] = part(1, edge(Some(after), None));
        let short = EdgeAcks { complete: false, ..head };
        parts.get_mut(&ack_key()).unwrap()[1] = part(1, edge(None, Some(short)));
        assert!(stitch(&Pairing::of(&parts), &cuts).flows.is_empty());
    }

    /// A flow without requests with AckReq (a READ, SENDs: no edge RTT) whose first request came
    /// before the cut (PSN 300 at 9 000) and its ACK flow's first response after it (10 100),
    /// unpaired there: one run pairs them (flow 8 had its ACK flow, to QP 10, since 5 000), so
    /// the response is paired and no sample comes of it.
    #[test]
    fn responses_one_run_pairs_at_the_first_without_samples() {
        use crate::model::edge::HeadFrame;
        let at = |report: usize, frames: &[(u32, u32, u32, u64)], acks: Option<EdgeAcks>| {
            let mut e = edge(None, acks);
            e.head = frames.iter().map(|(o, psn, syn, _)| HeadFrame([*o, *psn, 0, 0, *syn, 0])).collect();
            e.head_ns = frames.iter().map(|f| f.3).collect();
            Part {
                edge: Some(e),
                report,
                start_ns: report as u64 * 10_000,
                end_ns: report as u64 * 10_000 + 9_999,
                ..Part::default()
            }
        };
        let mut parts = BTreeMap::new();
        parts.insert(id(7), vec![at(0, &[(0x04, 300, 0, 9_000)], None)]);
        let mut eight = at(0, &[(0x04, 100, 0, 4_000)], None);
        let ten = FlowRef { dst_qp: 10, ..ack_ref() };
        eight.edge.as_mut().unwrap().rtt = Some(EdgeRtt { ack_flow: Some(ten), ..Default::default() });
        parts.insert(id(8), vec![eight]);
        let ack_ten = (4, "10.0.0.2".into(), "10.0.0.1".into(), 2, 10);
        parts.insert(ack_ten, vec![at(0, &[(0x11, 100, 0x1F, 5_000)], Some(acks(&[[5_000, 100]], true, 0)))]);
        let head = acks(&[[10_100, 300]], true, 1);
        parts.insert(ack_key(), vec![at(1, &[(0x11, 300, 0x1F, 10_100)], Some(head))]);
        let s = stitch(&Pairing::of(&parts), &spans(&[(0, 9_999), (10_000, 19_999)]));
        assert_eq!((s.unpaired, s.ambiguous, s.flows.is_empty()), (1, 0, true));
        // Without flow 8's pairing, the response might have been its: not told.
        parts.get_mut(&id(8)).unwrap()[0].edge.as_mut().unwrap().rtt = None;
        assert_eq!(stitch(&Pairing::of(&parts), &spans(&[(0, 9_999), (10_000, 19_999)])).unpaired, 0);
    }
}
