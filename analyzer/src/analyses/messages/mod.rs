//! Messages and their completion times (MCT), from the wire: per request flow (QP) each SEND,
//! WRITE, READ and atomic, from its first packet here to the response that completes it (the
//! rules are in `kept`); UC and UD transfers apart (no completion). Per completed message its
//! goodput (bytes / MCT) and slowdown (MCT over the ideal: bytes at `--link-speed` plus the host
//! pair's smallest RTT sample so far), into distributions per size class, flow and host pair
//! ([`dist`]); per size class its slowest for the tail ([`tail`]); per flow, pair and overall
//! the goodput per rate window ([`steady`]); at report time the rings the pairs form
//! ([`rings`]).
//!
//! Memory: a request flow keeps its messages in flight (at most `kept::MAX_IN_FLIGHT`,
//! counted when the bound is hit); distributions are samples, folded into the 1 % histogram
//! past the RTT's bound; the tail keeps [`tail::KEEP`] messages per class.

pub mod dist;
pub(crate) mod kept;
pub mod reorder;
pub mod rings;
pub mod steady;
pub mod tail;
pub mod uc_head;

use analyzer_common::flow::FlowKey;
use analyzer_common::opcode::Transport;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use super::keys::Addr;
use super::stats::Samples;
use dist::{Dist, Done};
use kept::{Kind, Msg, MsgFlow, Transfer, mark};
use steady::Windows;
use tail::{Kept, Slowest};

/// A host pair's messages: its distribution, its smallest RTT sample, its goodput per window.
#[derive(Debug, Clone)]
pub struct Pair {
    pub src: Addr,
    pub dst: Addr,
    pub dist: Dist,
    pub min_rtt_ns: Option<u64>,
    pub windows: Windows,
}

/// The analysis' parameters (from the analyses' [`super::Config`]).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Upper bounds of the size classes, ascending (bytes).
    pub classes: Vec<u64>,
    pub link_bps: u64,
    pub window_ns: u64,
}

#[derive(Debug)]
pub struct Messages {
    pub settings: Settings,
    /// Per size class (one more than the bounds).
    pub classes: Vec<Dist>,
    pub slowest: Vec<Slowest>,
    /// Every completed message's MCT.
    pub all: Samples,
    pub by_kind: [u64; 4],
    /// Per request flow with a completed message.
    pub flows: FxHashMap<FlowKey, Dist>,
    pub pairs: Vec<Pair>,
    pair_index: FxHashMap<(Addr, Addr), u32>,
    /// Request payload per window over all flows.
    pub overall: Windows,
    pub partial: u64,
    pub abandoned: u64,
    pub in_flight_evicted: u64,
    /// Per request flow, skipped PSNs a later ACK covered with no NAK and no retransmission:
    /// delivered, missed by this capture.
    pub capture_missed: FxHashMap<FlowKey, u64>,
    /// Per request flow, requests that arrived late (reordered, not resent).
    pub reorder: reorder::Reordering,
    /// UC flows' open messages, and the transfers.
    uc_open: FxHashMap<FlowKey, Transfer>,
    pub uc: Dist,
    /// UC messages whose LAST came without their FIRST.
    pub uc_partial: u64,
    /// `--edges`: each UC flow's first frames, up to its first FIRST.
    pub uc_heads: FxHashMap<FlowKey, uc_head::UcHead>,
    pub ud_messages: u64,
    pub ud_bytes: u64,
    /// Request flows new past the flows' cap (not followed), from the pairs' cap.
    cap: usize,
    pub state_full: u64,
    /// The rate window of the latest request: its index and span (a division per request was
    /// a tenth of the analysis).
    window: (u64, u64, u64),
    /// `--edges`: every completion, partial ones too, in the order they came (`merge` of
    /// captures cut in time joins a message sent before a cut with its completion after it).
    pub log: Option<Vec<Logged>>,
}

/// A completion as `--edges` keeps it: the message, its flow, its completion time and the
/// smallest RTT its slowdown was measured against.
#[derive(Debug, Clone)]
pub struct Logged {
    pub key: FlowKey,
    pub msg: Msg,
    pub end_ns: u64,
    pub min_rtt_ns: Option<u64>,
}

/// Completions `--edges` keeps, at most (a report beyond says so: `merge` then keeps each
/// report's distributions).
pub const MAX_LOGGED: usize = 1 << 20;

impl Messages {
    pub fn new(settings: Settings, cap: usize) -> Messages {
        let n = settings.classes.len() + 1;
        Messages {
            classes: vec![Dist::default(); n],
            slowest: vec![Slowest::default(); n],
            all: Samples::default(),
            by_kind: [0; 4],
            flows: FxHashMap::default(),
            pairs: Vec::new(),
            pair_index: FxHashMap::default(),
            overall: Windows::new(),
            partial: 0,
            abandoned: 0,
            in_flight_evicted: 0,
            capture_missed: FxHashMap::default(),
            reorder: reorder::Reordering::default(),
            uc_open: FxHashMap::default(),
            uc: Dist::default(),
            uc_partial: 0,
            uc_heads: FxHashMap::default(),
            ud_messages: 0,
            ud_bytes: 0,
            cap,
            state_full: 0,
            window: (0, 1, 0),
            log: None,
            settings,
        }
    }

    /// Whether a record is a request of an unreliable transport ([`Messages::transfer`]).
    #[inline]
    pub fn is_transfer(r: &Record) -> bool {
        matches!(Transport::of(r.opcode), Some(Transport::Uc | Transport::Ud))
            && analyzer_common::opcode::is_request(r.opcode)
    }

    /// A request of a reliable transport, in its flow's state (created here on its first).
    #[inline]
    pub(crate) fn request(&mut self, r: &Record, state: &mut Option<Box<MsgFlow>>) {
        let f = state.get_or_insert_with(|| Box::new(MsgFlow::new()));
        let step = f.request(r);
        self.abandoned += step.abandoned as u64;
        self.in_flight_evicted += step.evicted as u64;
        if let Some(d) = step.late {
            self.reorder.late(r.flow(), d);
        }
        let window_ns = self.settings.window_ns.max(1);
        let w = self.window_of(r.ts_ns, window_ns);
        let frame = if analyzer_common::opcode::is_data(r.opcode) { r.frame_len as u64 } else { 0 };
        // Goodput is new payload: a PSN sent again adds none.
        let payload = if step.retransmission { 0 } else { r.payload_len as u64 };
        // A flow's host pair is placed from its second data frame (or its first completion):
        // a flow of one frame costs no pair.
        let noted = (frame > 0 || payload > 0).then(|| f.note(w, frame, payload, (window_ns, self.log.is_some())));
        if noted == Some(true) && f.pair == u32::MAX {
            f.pair = self.place(&r.flow());
        }
        if payload > 0 {
            self.overall.add(w, payload, window_ns);
            if let Some(p) = self.pairs.get_mut(f.pair as usize) {
                p.windows.add(w, payload, window_ns);
                if noted == Some(false) {
                    f.first_paired();
                }
            }
        }
    }

    /// The rate window of `ts` (its index), the latest one's without a division.
    #[inline]
    fn window_of(&mut self, ts: u64, window_ns: u64) -> u64 {
        let (w, start, end) = self.window;
        if ts >= start && ts < end {
            return w;
        }
        let w = ts / window_ns;
        let start = w * window_ns;
        self.window = (w, start, start.saturating_add(window_ns));
        w
    }

    /// The host pair of a request flow (u32::MAX - 1 past the cap: not followed).
    fn place(&mut self, key: &FlowKey) -> u32 {
        let k = ((key.src, key.ip_version), (key.dst, key.ip_version));
        if let Some(i) = self.pair_index.get(&k) {
            return *i;
        }
        if self.pairs.len() >= self.cap {
            self.state_full += 1;
            return u32::MAX - 1;
        }
        let i = self.pairs.len() as u32;
        let windows = if self.log.is_some() { Windows::with_early() } else { Windows::new() };
        self.pairs.push(Pair { src: k.0, dst: k.1, dist: Dist::default(), min_rtt_ns: None, windows });
        self.pair_index.insert(k, i);
        i
    }

    /// A response with an ACK-type AETH on the flow paired with request flow `req` (its
    /// state); `rtt_min` is that flow's smallest RTT sample.
    pub(crate) fn acked(&mut self, r: &Record, req: &FlowKey, state: &mut MsgFlow, rtt_min: Option<u64>) {
        if state.pair == u32::MAX {
            state.pair = self.place(req);
        }
        let pair = state.pair;
        let told = state.acked(r, &mut |m| self.complete(req, pair, m, r.ts_ns, rtt_min));
        if told.capture_missed > 0 {
            *self.capture_missed.entry(*req).or_default() += told.capture_missed as u64;
        }
    }

    /// A NAK or RNR NAK on the flow paired with a request flow.
    pub(crate) fn nak(&mut self, r: &Record, state: &mut MsgFlow, rnr: bool) {
        state.nak(r.psn, r.ts_ns, rnr);
    }

    fn complete(&mut self, key: &FlowKey, pair: u32, m: Msg, end_ns: u64, rtt_min: Option<u64>) {
        let pair = self.pairs.get_mut(pair as usize);
        let min_rtt = match (pair.as_ref().and_then(|p| p.min_rtt_ns), rtt_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(log) = self.log.as_mut().filter(|l| l.len() <= MAX_LOGGED) {
            log.push(Logged { key: *key, msg: m.clone(), end_ns, min_rtt_ns: min_rtt });
        }
        if m.marks & mark::PARTIAL != 0 {
            self.partial += 1;
            return;
        }
        let d = Done::new(end_ns.saturating_sub(m.start_ns), m.bytes(), self.settings.link_bps, min_rtt);
        if let Some(p) = pair {
            p.min_rtt_ns = min_rtt;
            p.dist.add(&d);
        }
        let class = dist::class_of(&self.settings.classes, m.bytes());
        self.classes[class].add(&d);
        self.all.push(d.mct_ns);
        self.by_kind[m.kind as usize] += 1;
        self.flows.entry(*key).or_default().add(&d);
        self.slowest[class].offer(Kept { key: *key, msg: m, end_ns });
    }

    /// A UC or UD request ([`Messages::is_transfer`]).
    pub fn transfer(&mut self, r: &Record) {
        if Transport::of(r.opcode) == Some(Transport::Ud) {
            self.ud_messages += 1;
            self.ud_bytes += r.payload_len as u64;
            return;
        }
        let key = r.flow();
        if self.log.is_some() {
            self.uc_heads.entry(key).or_default().add(r);
        }
        let Some(t) = super::keys::bounded(&mut self.uc_open, key, self.cap, &mut self.state_full) else { return };
        if let Some(m) = t.request(r, &mut self.uc_partial) {
            let d = Done::new(m.last_ns() - m.start_ns, m.bytes(), self.settings.link_bps, None);
            self.uc.add(&d);
        }
    }

    /// Each UC flow's message being sent at the end, if any (`--edges`).
    pub fn uc_sending(&self) -> impl Iterator<Item = (&FlowKey, &Msg)> {
        self.uc_open.iter().filter_map(|(k, t)| Some((k, t.sending()?)))
    }

    /// UC messages still being sent (their FIRST seen, their LAST not yet).
    pub fn uc_open(&self) -> u64 {
        self.uc_open.values().filter(|t| t.is_open()).count() as u64
    }

    /// Flows folded away live: their own distributions go (the classes and pairs keep their
    /// messages).
    pub fn forget(&mut self, gone: &rustc_hash::FxHashSet<FlowKey>) {
        self.flows.retain(|k, _| !gone.contains(k));
        self.uc_open.retain(|k, _| !gone.contains(k));
        self.uc_heads.retain(|k, _| !gone.contains(k));
        self.capture_missed.retain(|k, _| !gone.contains(k));
        self.reorder.forget(gone);
    }

    /// Completed messages of each kind.
    pub fn kinds(&self) -> impl Iterator<Item = (Kind, u64)> + '_ {
        Kind::ALL.iter().map(|k| (*k, self.by_kind[*k as usize]))
    }

    pub fn completed(&self) -> u64 {
        self.all.len()
    }

    /// Skipped PSNs of all flows this capture missed (delivered: covered by ACKs).
    pub fn frames_missed(&self) -> u64 {
        self.capture_missed.values().sum()
    }
}

/// Per request flow: messages pending at the end, partial ones held, its goodput windows.
pub(crate) fn flow_pending(state: &MsgFlow) -> (u64, u64) {
    (state.pending().count() as u64, state.partial() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer_common::opcode::op;

    /// UC messages: a LAST without its FIRST is a partial message, a FIRST without its LAST yet
    /// one being sent at the end; neither is counted among the transfers.
    #[test]
    fn uc_messages_partial_and_open_are_counted_apart() {
        let settings = Settings { classes: vec![4096], link_bps: 100_000_000_000, window_ns: 1000 };
        let mut m = Messages::new(settings, 100);
        let uc = |o: u8, qp: u32, ts: u64| Record {
            ts_ns: ts,
            opcode: 0x20 | o,
            payload_len: 100,
            reth_len: 300,
            ip_version: 4,
            dst_qp: qp,
            ..Default::default()
        };
        // QP 1: MIDDLE and LAST of a message begun before (partial), then FIRST MIDDLE LAST.
        // QP 2: a WRITE ONLY, then a FIRST whose LAST the capture did not hold (open).
        for (o, qp, ts) in [
            (op::SEND_MIDDLE, 1, 0),
            (op::SEND_LAST, 1, 10),
            (op::SEND_FIRST, 1, 20),
            (op::SEND_MIDDLE, 1, 30),
            (op::SEND_LAST, 1, 70),
            (op::RDMA_WRITE_ONLY, 2, 80),
            (op::RDMA_WRITE_FIRST, 2, 90),
        ] {
            m.transfer(&uc(o, qp, ts));
        }
        assert_eq!((m.uc.mct.len(), m.uc_partial, m.uc_open()), (2, 1, 1));
        assert_eq!(m.uc.bytes, 300 + 300, "the SEND's three payloads, the WRITE's RETH length");
    }

    /// Goodput is new payload: a PSN sent again (held by a message in flight, or stray) adds
    /// nothing to its flow's, its pair's or the overall windows.
    #[test]
    fn a_retransmission_adds_no_goodput() {
        let settings = Settings { classes: vec![4096], link_bps: 100_000_000_000, window_ns: 1000 };
        let mut m = Messages::new(settings, 100);
        let mut state = None;
        let rec = |psn: u32, ts: u64| {
            let mut r = Record {
                ts_ns: ts,
                opcode: op::RDMA_WRITE_ONLY,
                psn,
                payload_len: 1000,
                reth_len: 1000,
                frame_len: 1078,
                ip_version: 4,
                dst_qp: 7,
                ..Default::default()
            };
            r.src_ip[..4].copy_from_slice(&[10, 0, 0, 1]);
            r.dst_ip[..4].copy_from_slice(&[10, 0, 0, 2]);
            r
        };
        // 1000 B of new payload in each 1 µs window 0..=10; window 10 also carries PSN 5 again
        // (held in flight: no ACK was seen) and PSN 0 at 10.9 µs; PSN 11 closes window 10.
        for p in 0..10 {
            m.request(&rec(p, p as u64 * 1000), &mut state);
        }
        m.request(&rec(5, 10_000), &mut state);
        m.request(&rec(10, 10_500), &mut state);
        m.request(&rec(0, 10_900), &mut state);
        m.request(&rec(11, 11_000), &mut state);
        // Windows 1..=10 are full (0 is the first, 11 still open): 1000 B a µs = 8 Gbit/s each.
        let flow = state.as_ref().unwrap().windows().expect("rates from the second frame");
        let pair = &m.pairs[0].windows;
        // The pair is placed at the flow's second frame: its first window is 1.
        for (what, w, n) in [("flow", &flow.rates, 10), ("pair", &pair.rates, 9), ("overall", &m.overall.rates, 10)] {
            let s = steady::steadiness(w).unwrap();
            assert_eq!(s.windows, n, "{what}");
            assert!((s.p95 as f64 / 8e9 - 1.0).abs() < 0.01, "{what}: p95 {} (a resent PSN counted?)", s.p95);
        }
    }
}
