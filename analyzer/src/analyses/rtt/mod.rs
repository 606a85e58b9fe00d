//! Round-trip times: from a request with AckReq to the first later ACK of the reverse
//! direction whose PSN covers it.
//!
//! **QP pairing.** An ACK travels on another flow than the requests it acknowledges (the
//! reverse addresses, the requester's QP as destination). The two directions are paired by PSN
//! continuity: an ACK from B to A with PSN p belongs to the request flow from A to B whose
//! PSNs sent so far span p (from its first PSN to its latest, plus [`READ_SLACK`] for READ
//! RESPONSEs, whose PSNs run ahead of the READ REQUEST's). When exactly one request flow
//! qualifies the pair is fixed for the rest of the run; when several do (two QPs between the
//! same hosts with overlapping PSN ranges) the ACK is counted `ambiguous_acks` and pairing waits
//! for a later ACK that tells them apart. Initial PSNs are random 24-bit numbers, so overlaps
//! are rare.
//!
//! A retransmitted request (a PSN already waiting) does not restart its clock (Karn). Requests
//! not acknowledged within the timeout count as `timeouts`; those still waiting at the end of
//! the capture, less than a timeout before it, as `pending` ([`Rtt::waiting`]).
//!
//! **Bounded.** A vantage point that sees one direction only (a mirror of the requests, never
//! their ACKs) makes every AckReq request wait until its timeout. Each request costs O(1) (the
//! waiting PSNs are a queue with a set beside it), and a flow keeps at most [`MAX_WAITING`]
//! requests: beyond that the oldest is dropped undecided and counted (`pending_evicted`).

pub mod edge;
pub(crate) mod kept;

use analyzer_common::flow::FlowKey;
use analyzer_common::opcode;
use analyzer_common::psn::{PSN_HALF, psn_diff};
use analyzer_common::record::Record;
use analyzer_common::wire::ext::{AckType, syndrome_type};
use rustc_hash::FxHashMap;

use super::flows::{Flows, Slot};
use super::stats::Samples;
pub use kept::MAX_WAITING;
use kept::RequestFlow;

/// PSNs an ACK may run ahead of the latest request PSN (a READ of up to 1024 PMTUs).
pub const READ_SLACK: u32 = 1024;

/// Whether an ACK for `psn` falls within the PSNs of a request flow that sent `first` to
/// `last` (and [`READ_SLACK`] past it): the pairing by PSN continuity (also `merge`'s, where
/// one run pairs an ACK flow no report paired).
pub fn within_span(first: u32, last: u32, psn: u32) -> bool {
    psn_diff(first, psn) <= psn_diff(first, last).saturating_add(READ_SLACK)
}

/// The request flows between two hosts by their slots in the analyses' [`Flows`] (most have
/// one or two: they live in the map's entry), under the hash of the two addresses
/// ([`hosts_hash`]): neither the addresses nor the flows' keys are copied (200 000 host pairs
/// of one flow each took 21 MB with a copy of each key). Two pairs of one hash share a list;
/// the flows' own keys tell them apart ([`Rtt::between`]).
type HostFlows = smallvec::SmallVec<[u32; 2]>;

fn hosts_hash(src: &[u8; 16], dst: &[u8; 16]) -> u64 {
    super::keys::fx_hash(&(src, dst))
}

/// RTT results of one request flow.
#[derive(Debug, Clone, Default)]
pub struct FlowRtt {
    pub samples: Samples,
    /// Requests not acknowledged within the timeout (decided so far; see [`Rtt::waiting`]).
    pub timeouts: u64,
    /// The flow carrying this flow's ACKs, once paired.
    pub ack_flow: Option<FlowKey>,
}

#[derive(Debug, Default)]
pub struct Rtt {
    timeout_ns: u64,
    /// (source, destination) of request flows, hashed → their slots, in order of appearance.
    by_hosts: FxHashMap<u64, HostFlows>,
    /// ACK flow → request flow.
    paired: FxHashMap<FlowKey, FlowKey>,
    pub flows: FxHashMap<FlowKey, FlowRtt>,
    pub ambiguous_acks: u64,
    /// CM REQs seen: (requester address, communication ID) → requester QPN.
    cm_reqs: FxHashMap<([u8; 16], u32), u32>,
    /// From CM: (ACK source, ACK destination, ACK destination QP) → the request flows'
    /// destination QP.
    cm_pairs: FxHashMap<([u8; 16], [u8; 16], u32), u32>,
    /// QP pairs learned from CM REQ/REP exchanges (each connection counts its two directions).
    pub cm_paired: u64,
    /// ACKs no request flow's PSNs could account for (their requests were not captured).
    pub unpaired_acks: u64,
    /// Requests dropped undecided because their flow had [`MAX_WAITING`] waiting.
    pub pending_evicted: u64,
    /// Every sample in Prometheus' buckets (for /metrics, kept as they come).
    pub prom: super::stats::PromBuckets,
    /// CM exchanges kept, at most (request flows are kept within the flows table's cap).
    cap: usize,
    /// Requests of flows beyond the flows table's cap, CM messages beyond `cap` (not followed).
    pub state_full: u64,
    /// Offline with `--edges`: each ACK flow's first ACKs ([`edge::AckHeads`]).
    pub edges: Option<edge::AckHeads>,
}

impl Rtt {
    /// (Request flows are kept in the analyses' [`Flows`].)
    pub fn new(timeout_ns: u64, cap: usize) -> Self {
        Rtt { timeout_ns, cap, ..Default::default() }
    }

    /// Drops every trace of the flows in `gone` (folded away live), before `table` lets
    /// their slots go.
    pub fn forget(&mut self, gone: &rustc_hash::FxHashSet<FlowKey>, table: &Flows) {
        self.flows.retain(|k, _| !gone.contains(k));
        if let Some(e) = &mut self.edges {
            e.forget(gone);
        }
        self.paired.retain(|ack, req| !gone.contains(ack) && !gone.contains(req));
        self.by_hosts.retain(|_, slots| {
            slots.retain(|s| table.at(*s).is_some_and(|(k, _)| !gone.contains(k)));
            !slots.is_empty()
        });
    }

    /// The request flows from `src` to `dst`, in order of appearance.
    fn between<'t>(&self, table: &'t Flows, src: &[u8; 16], dst: &[u8; 16]) -> impl Iterator<Item = &'t FlowKey> {
        let slots = self.by_hosts.get(&hosts_hash(src, dst)).map(|s| s.as_slice()).unwrap_or_default();
        slots.iter().filter_map(|s| table.at(*s)).map(|(k, _)| k).filter(move |k| k.src == *src && k.dst == *dst)
    }

    /// Whether a record is a request this analysis follows: only reliable transports are
    /// acknowledged (UC and UD requests never are).
    pub fn wants(r: &Record) -> bool {
        opcode::is_reliable_request(r.opcode)
    }

    /// Whether a record is an ACK (a response with an AETH of the ACK type).
    pub fn is_ack(r: &Record) -> bool {
        r.aeth().is_some_and(|syn| syndrome_type(syn) == AckType::Ack)
    }

    /// A request this analysis [`Rtt::wants`], in its flow's entry of the flows table (None:
    /// the table had no room for it).
    pub fn request(&mut self, r: &Record, flow: Option<&mut Slot<'_>>) {
        let key = r.flow();
        let by_hosts = &mut self.by_hosts;
        let new = |slot| {
            by_hosts.entry(hosts_hash(&key.src, &key.dst)).or_default().push(slot);
            RequestFlow { first_psn: r.psn, last_psn: r.psn, ..Default::default() }
        };
        let Some(f) = flow.and_then(|f| f.request(new)) else {
            self.state_full += 1;
            return;
        };
        if psn_diff(f.last_psn, r.psn) < PSN_HALF {
            f.last_psn = r.psn;
        }
        // (The flow's results are touched only when it has requests waiting: most requests
        // of a message carry no AckReq.)
        if f.front().is_some_and(|(_, t)| r.ts_ns.saturating_sub(t) > self.timeout_ns) {
            let stats = self.flows.entry(key).or_default();
            while let Some((_, t)) = f.front() {
                if r.ts_ns.saturating_sub(t) <= self.timeout_ns {
                    break;
                }
                f.pop();
                stats.timeouts += 1;
            }
        }
        if r.ack_req() {
            if let Some(e) = &mut self.edges {
                e.request(key, r.ts_ns, r.psn);
            }
            if f.wait(r.psn, r.ts_ns) {
                self.pending_evicted += 1;
            }
        }
    }

    /// A CM REQ or REP from `src` to `dst`. A REP answering a REQ seen earlier pairs the
    /// connection both ways: requests from the requester go to the responder's QP and are
    /// acknowledged to the requester's, and the other way round.
    pub fn cm(&mut self, src: &[u8; 16], dst: &[u8; 16], m: &analyzer_common::wire::cm::Repr) {
        use analyzer_common::wire::cm::Kind;
        match m.kind {
            Kind::Req => {
                if self.cm_reqs.len() < self.cap {
                    self.cm_reqs.insert((*src, m.local_comm_id), m.local_qpn);
                } else {
                    self.state_full += 1;
                }
            }
            Kind::Rep => {
                if let Some(&requester_qp) = self.cm_reqs.get(&(*dst, m.remote_comm_id))
                    && self.cm_pairs.len() < self.cap
                {
                    // ACKs from the responder (src) to the requester's QP answer requests to ours.
                    self.cm_pairs.insert((*src, *dst, requester_qp), m.local_qpn);
                    self.cm_pairs.insert((*dst, *src, m.local_qpn), requester_qp);
                    self.cm_paired += 2;
                }
            }
        }
    }

    fn covers(f: &RequestFlow, psn: u32) -> bool {
        within_span(f.first_psn, f.last_psn, psn)
    }

    /// The request flow a response (an ACK, or a NAK: `count` false leaves the ACK counters
    /// alone) belongs to: paired already, or paired now by the CM exchange or PSN continuity.
    pub fn pair(&mut self, r: &Record, flows: &Flows, count: bool) -> Option<FlowKey> {
        let ack_key = r.flow();
        Some(match self.paired.get(&ack_key) {
            Some(k) => *k,
            None => {
                // The request flows from the ACK's destination to its source that could be
                // its partner: the QP the CM exchange names, else those whose PSNs span the
                // ACK's, leaving out flows already paired with another ACK flow.
                let cm_qp = self.cm_pairs.get(&(ack_key.src, ack_key.dst, ack_key.dst_qp)).copied();
                let candidates: Vec<FlowKey> = self
                    .between(flows, &ack_key.dst, &ack_key.src)
                    .filter(|k| match cm_qp {
                        Some(qp) => k.dst_qp == qp,
                        None => {
                            flows.get(k).and_then(|f| f.request.as_ref()).is_some_and(|f| Self::covers(f, r.psn))
                                && self.flows.get(*k).is_none_or(|f| f.ack_flow.is_none())
                        }
                    })
                    .copied()
                    .collect();
                match candidates.as_slice() {
                    [one] => {
                        self.paired.insert(ack_key, *one);
                        self.flows.entry(*one).or_default().ack_flow = Some(ack_key);
                        *one
                    }
                    [] => {
                        self.unpaired_acks += count as u64;
                        return None;
                    }
                    _ => {
                        self.ambiguous_acks += count as u64;
                        return None;
                    }
                }
            }
        })
    }

    /// An ACK ([`Rtt::is_ack`]): the requests of its paired flow in `flows` that it covers.
    /// Returns that flow, when paired.
    pub fn ack(&mut self, r: &Record, flows: &mut Flows) -> Option<FlowKey> {
        let ambiguous = self.ambiguous_acks;
        let paired = self.pair(r, flows, true);
        if let Some(e) = &mut self.edges {
            let how = match paired {
                Some(_) => edge::Paired::Yes,
                None if self.ambiguous_acks > ambiguous => edge::Paired::Ambiguous,
                None => edge::Paired::Unpaired,
            };
            e.observe(r.flow(), r.ts_ns, r.psn, how);
        }
        let req_key = paired?;
        let f = flows.request_mut(&req_key).expect("paired flows are request flows");
        let stats = self.flows.entry(req_key).or_default();
        while let Some((psn, t)) = f.front() {
            if psn_diff(psn, r.psn) >= PSN_HALF {
                break;
            }
            f.pop();
            let rtt = r.ts_ns.saturating_sub(t);
            if rtt <= self.timeout_ns {
                stats.samples.push(rtt);
                self.prom.observe(rtt);
            } else {
                stats.timeouts += 1;
            }
        }
        Some(req_key)
    }

    /// A request flow's smallest RTT sample.
    pub fn min_sample(&self, key: &FlowKey) -> Option<u64> {
        self.flows.get(key)?.samples.min()
    }

    /// Every RTT sample of every flow (ns).
    pub fn all_samples(&self) -> Vec<u64> {
        self.flows.values().flat_map(|f| f.samples.values()).collect()
    }

    /// The samples of all flows together (for overall percentiles).
    pub fn overall(&self) -> Samples {
        let mut all = Samples::default();
        for f in self.flows.values() {
            all.extend(&f.samples);
        }
        all
    }

    /// A request flow's waiting requests as its edge lists them (`[psn, time]`, oldest first),
    /// and whether that is not all (more than [`crate::model::edge::EDGE_WAITING`], or the
    /// queue was full and may have let some go).
    pub fn waiting_list(&self, flows: &Flows, key: &FlowKey) -> (Vec<[u64; 2]>, bool) {
        let Some(f) = flows.get(key).and_then(|f| f.request.as_ref()) else { return (Vec::new(), false) };
        let n = f.queue().count();
        let cut = n > crate::model::edge::EDGE_WAITING || n == MAX_WAITING;
        (f.queue().take(crate::model::edge::EDGE_WAITING).map(|(p, t)| [*p as u64, *t]).collect(), cut)
    }

    /// Requests still waiting at `end_ns`: (older than the timeout, younger). Read-only, so
    /// live reports can be built at every interval.
    pub fn waiting(&self, flows: &Flows, key: &FlowKey, end_ns: u64) -> (u64, u64) {
        let Some(f) = flows.get(key).and_then(|f| f.request.as_ref()) else { return (0, 0) };
        let (mut old, mut all) = (0, 0);
        for (_, t) in f.queue() {
            all += 1;
            old += (end_ns.saturating_sub(*t) > self.timeout_ns) as u64;
        }
        (old, all - old)
    }

    /// A request flow's timeouts as of `end_ns` (decided so far, and waiting requests older than
    /// the timeout) and its requests still pending. Read-only.
    pub fn outcome(&self, flows: &Flows, key: &FlowKey, end_ns: u64) -> (u64, u64) {
        let (late, pending) = self.waiting(flows, key, end_ns);
        (self.flows.get(key).map_or(0, |f| f.timeouts) + late, pending)
    }

    /// Every flow that sent requests of a reliable transport (acknowledged or not).
    pub fn request_flows<'a>(&self, flows: &'a Flows) -> impl Iterator<Item = &'a FlowKey> {
        flows.requests().map(|(k, _)| k)
    }

    /// The request flow an ACK flow was paired with, and back.
    pub fn peer(&self, key: &FlowKey) -> Option<FlowKey> {
        self.paired.get(key).copied().or_else(|| self.flows.get(key).and_then(|f| f.ack_flow))
    }

    /// The request flow from `sender` to `receiver` whose ACKs go to the sender's QP `qp` (a
    /// CNP to that QP is about it), when the pairing is known.
    pub fn request_acked_at(&self, table: &Flows, sender: &[u8; 16], receiver: &[u8; 16], qp: u32) -> Option<FlowKey> {
        self.between(table, sender, receiver)
            .find(|k| self.flows.get(*k).and_then(|f| f.ack_flow).is_some_and(|a| a.dst_qp == qp))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::super::flows::{Hint, Wants};
    use super::*;
    use analyzer_common::record::flag;

    /// The analysis with its flows table, fed as [`super::super::Analyses`] feeds it.
    struct Run {
        rtt: Rtt,
        table: Flows,
    }

    impl Run {
        fn new(timeout_ns: u64) -> Self {
            Run { rtt: Rtt::new(timeout_ns, usize::MAX), table: Flows::new(usize::MAX) }
        }

        fn observe(&mut self, r: &Record) {
            if Rtt::wants(r) {
                let wants = Wants { marking: false, request: true };
                self.rtt.request(r, self.table.slot(&r.flow(), wants, Hint::None).as_mut());
            }
            if Rtt::is_ack(r) {
                self.rtt.ack(r, &mut self.table);
            }
        }

        fn waiting(&self, key: &FlowKey, end_ns: u64) -> (u64, u64) {
            self.rtt.waiting(&self.table, key, end_ns)
        }
    }

    impl std::ops::Deref for Run {
        type Target = Rtt;
        fn deref(&self) -> &Rtt {
            &self.rtt
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rec(src: u8, dst: u8, qp: u32, opcode: u8, psn: u32, ts: u64, flags: u8, syn: u8) -> Record {
        let mut r = Record {
            ts_ns: ts,
            psn,
            opcode,
            flags,
            aeth_syndrome: syn,
            ip_version: 4,
            dst_qp: qp,
            ..Default::default()
        };
        r.src_ip[..4].copy_from_slice(&[10, 0, 0, src]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 0, dst]);
        r
    }

    #[test]
    fn pairs_by_psn_and_measures() {
        let mut rtt = Run::new(1_000_000);
        // Two QPs from .1 to .2 with far-apart PSNs; ACKs come back on QPs 0x11 and 0x12.
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 100, 1000, flag::ACK_REQ, 0));
        rtt.observe(&rec(1, 2, 0x22, 0x0A, 900_000, 1100, flag::ACK_REQ, 0));
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 101, 1200, flag::ACK_REQ, 0));
        rtt.observe(&rec(2, 1, 0x12, 0x11, 900_000, 3100, flag::AETH, 0));
        rtt.observe(&rec(2, 1, 0x11, 0x11, 101, 5200, flag::AETH, 0)); // coalesced: covers 100 and 101
        rtt.observe(&rec(2, 1, 0x11, 0x11, 101, 6000, flag::AETH, 0)); // nothing left
        rtt.observe(&rec(2, 1, 0x11, 0x11, 101, 6000, flag::AETH, 0x60)); // a NAK is no ACK
        let a = &rtt.flows[&rec(1, 2, 0x21, 0, 0, 0, 0, 0).flow()];
        assert_eq!(a.samples.values(), vec![4200, 4000]);
        assert_eq!(a.ack_flow, Some(rec(2, 1, 0x11, 0, 0, 0, 0, 0).flow()));
        let b = &rtt.flows[&rec(1, 2, 0x22, 0, 0, 0, 0, 0).flow()];
        assert_eq!(b.samples.values(), vec![2000]);
        assert_eq!((rtt.unpaired_acks, rtt.ambiguous_acks), (0, 0));
    }

    #[test]
    fn timeouts_pending_and_retransmissions() {
        let mut rtt = Run::new(1000);
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 5, 0, flag::ACK_REQ, 0));
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 5, 500, flag::ACK_REQ, 0)); // retransmission keeps t=0
        rtt.observe(&rec(2, 1, 0x11, 0x11, 5, 900, flag::AETH, 0));
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 6, 1000, flag::ACK_REQ, 0));
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 7, 3000, flag::ACK_REQ, 0)); // 6 timed out
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 8, 3500, flag::ACK_REQ, 0));
        rtt.observe(&rec(3, 1, 0x11, 0x11, 5, 900, flag::AETH, 0)); // from a host we saw no requests to
        let key = rec(1, 2, 0x21, 0, 0, 0, 0, 0).flow();
        let f = &rtt.flows[&key];
        assert_eq!(f.samples.values(), vec![900]);
        assert_eq!((f.timeouts, rtt.waiting(&key, 4200), rtt.unpaired_acks), (1, (1, 1), 1));
    }

    #[test]
    fn one_direction_floods_stay_bounded_and_count_what_falls_out() {
        let mut rtt = Run::new(u64::MAX);
        let n = MAX_WAITING as u32 + 10;
        for psn in 0..n {
            rtt.observe(&rec(1, 2, 0x21, 0x0A, psn, psn as u64, flag::ACK_REQ, 0));
        }
        // A retransmission of a waiting PSN neither waits twice nor evicts.
        rtt.observe(&rec(1, 2, 0x21, 0x0A, n - 1, n as u64, flag::ACK_REQ, 0));
        let key = rec(1, 2, 0x21, 0, 0, 0, 0, 0).flow();
        assert_eq!(rtt.pending_evicted, 10);
        assert_eq!(rtt.waiting(&key, n as u64), (0, MAX_WAITING as u64));
        // The ACK of the newest covers everything still waiting.
        rtt.observe(&rec(2, 1, 0x11, 0x11, n - 1, n as u64 + 5, flag::AETH, 0));
        assert_eq!(rtt.flows[&key].samples.len(), MAX_WAITING as u64);
        assert_eq!(rtt.waiting(&key, n as u64), (0, 0));
    }

    #[test]
    fn ambiguous_until_told_apart() {
        let mut rtt = Run::new(1_000_000);
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 10, 0, flag::ACK_REQ, 0));
        rtt.observe(&rec(1, 2, 0x22, 0x0A, 12, 0, flag::ACK_REQ, 0));
        rtt.observe(&rec(2, 1, 0x11, 0x11, 12, 100, flag::AETH, 0)); // both span 12 (with slack)
        assert_eq!(rtt.ambiguous_acks, 1);
        rtt.observe(&rec(1, 2, 0x22, 0x0A, 5000, 200, flag::ACK_REQ, 0));
        rtt.observe(&rec(1, 2, 0x21, 0x0A, 11, 200, flag::ACK_REQ, 0));
        rtt.observe(&rec(2, 1, 0x12, 0x11, 5000, 300, flag::AETH, 0)); // only 0x22 reaches 5000
        assert_eq!(rtt.peer(&rec(2, 1, 0x12, 0, 0, 0, 0, 0).flow()), Some(rec(1, 2, 0x22, 0, 0, 0, 0, 0).flow()));
    }
}
