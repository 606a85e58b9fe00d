//! ECN / CNP accounting at packet resolution: data packets and CE marks per direction of an
//! IP pair with the CNPs that come back, whether each CE mark was answered by a CNP within the
//! timeout, CNP pacing per notified QP, and the ECN/DSCP marking of data and CNPs per flow
//! (for the audit).

use std::collections::VecDeque;

use analyzer_common::flow::FlowKey;
use analyzer_common::opcode;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use super::bounded;

/// One direction of an IP pair: data from `a` to `b`, CNPs from `b` to `a`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairStats {
    pub data_packets: u64,
    pub ce: u64,
    pub cnp_back: u64,
    /// CE marks with a CNP back within the timeout.
    pub ce_answered: u64,
    /// CE marks with none.
    pub ce_unanswered: u64,
    /// CE times still within the timeout.
    waiting: VecDeque<u64>,
}

/// Marking of one flow's data packets and CNPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowMarking {
    pub data: u64,
    pub data_not_ect: u64,
    /// Data packets whose DSCP is not the expected RoCE DSCP.
    pub data_other_dscp: u64,
    pub cnps: u64,
    pub cnp_other_dscp: u64,
    /// A DSCP seen on data other than the expected one (the first such).
    pub seen_data_dscp: Option<u8>,
    pub seen_cnp_dscp: Option<u8>,
}

/// CNPs toward one QP: their count and gaps.
#[derive(Debug, Clone, Default)]
pub struct Pacing {
    pub cnps: u64,
    last: Option<u64>,
    pub gaps: Vec<u64>,
}

type Addr = ([u8; 16], u8);

#[derive(Debug, Default)]
pub struct Ecn {
    pub timeout_ns: u64,
    roce_dscp: u8,
    cnp_dscp: u8,
    /// (a, b) → data a→b and CNPs b→a.
    /// (Hash maps: one lookup per record; reports sort them.)
    pub pairs: FxHashMap<(Addr, Addr), PairStats>,
    /// (CNP destination address, destination QP) → pacing.
    pub pacing: FxHashMap<(Addr, u32), Pacing>,
    pub flows: FxHashMap<FlowKey, FlowMarking>,
    /// Keys each map keeps, at most.
    cap: usize,
    /// Frames whose flow, pair or QP found a map at its cap.
    pub state_full: u64,
}

impl Ecn {
    pub fn new(timeout_ns: u64, roce_dscp: u8, cnp_dscp: u8, cap: usize) -> Self {
        Ecn { timeout_ns, roce_dscp, cnp_dscp, cap, ..Default::default() }
    }

    pub fn observe(&mut self, r: &Record) {
        let src = (r.src_ip, r.ip_version);
        let dst = (r.dst_ip, r.ip_version);
        let (cap, full) = (self.cap, &mut self.state_full);
        if r.is_cnp() {
            let Some(m) = bounded(&mut self.flows, r.flow(), cap, full) else { return };
            m.cnps += 1;
            if r.dscp != self.cnp_dscp {
                m.cnp_other_dscp += 1;
                m.seen_cnp_dscp.get_or_insert(r.dscp);
            }
            if let Some(p) = bounded(&mut self.pacing, (dst, r.dst_qp), cap, full) {
                p.cnps += 1;
                if let Some(last) = p.last {
                    p.gaps.push(r.ts_ns.saturating_sub(last));
                }
                p.last = Some(r.ts_ns);
            }
            let Some(pair) = bounded(&mut self.pairs, (dst, src), cap, full) else { return };
            pair.cnp_back += 1;
            while let Some(&t) = pair.waiting.front() {
                if t > r.ts_ns {
                    break;
                }
                pair.waiting.pop_front();
                if r.ts_ns - t <= self.timeout_ns {
                    pair.ce_answered += 1;
                } else {
                    pair.ce_unanswered += 1;
                }
            }
        } else if opcode::is_data(r.opcode) {
            let Some(m) = bounded(&mut self.flows, r.flow(), cap, full) else { return };
            m.data += 1;
            if r.ecn & 3 == 0 {
                m.data_not_ect += 1;
            }
            if r.dscp != self.roce_dscp {
                m.data_other_dscp += 1;
                m.seen_data_dscp.get_or_insert(r.dscp);
            }
            let Some(pair) = bounded(&mut self.pairs, (src, dst), cap, full) else { return };
            pair.data_packets += 1;
            while let Some(&t) = pair.waiting.front() {
                if r.ts_ns.saturating_sub(t) <= self.timeout_ns {
                    break;
                }
                pair.waiting.pop_front();
                pair.ce_unanswered += 1;
            }
            if r.ce() {
                pair.ce += 1;
                pair.waiting.push_back(r.ts_ns);
            }
        }
    }
}

impl PairStats {
    /// CE marks unanswered at `end_ns`, counting those still waiting that are older than the
    /// timeout (younger ones are undecided and not counted). Read-only.
    pub fn unanswered_at(&self, end_ns: u64, timeout_ns: u64) -> u64 {
        self.ce_unanswered + self.waiting.iter().filter(|&&t| end_ns.saturating_sub(t) > timeout_ns).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(src: u8, dst: u8, opcode: u8, ts: u64, ecn: u8, dscp: u8) -> Record {
        let mut r = Record { ts_ns: ts, opcode, ecn, dscp, ip_version: 4, dst_qp: 0x11, ..Default::default() };
        r.src_ip[..4].copy_from_slice(&[10, 0, 0, src]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 0, dst]);
        r
    }

    #[test]
    fn ce_answered_unanswered_and_pacing() {
        let mut e = Ecn::new(1000, 26, 48, usize::MAX);
        e.observe(&rec(1, 2, 0x0A, 0, 3, 26)); // CE, answered at 400
        e.observe(&rec(1, 2, 0x0A, 100, 3, 26)); // CE, answered at 400
        e.observe(&rec(2, 1, 0x81, 400, 0, 48));
        e.observe(&rec(1, 2, 0x0A, 500, 3, 26)); // CE, no CNP until 2000: unanswered
        e.observe(&rec(2, 1, 0x81, 2000, 0, 46));
        e.observe(&rec(1, 2, 0x0A, 2100, 0, 24)); // Not-ECT, DSCP 24
        e.observe(&rec(1, 2, 0x0A, 2200, 3, 26)); // CE at the end, undecided
        e.observe(&rec(1, 2, 0x11, 2300, 3, 26)); // an ACK is not data
        let k = |a: u8| (([10, 0, 0, a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 4u8);
        let p = &e.pairs[&(k(1), k(2))];
        assert_eq!((p.data_packets, p.ce, p.cnp_back, p.ce_answered, p.unanswered_at(2500, 1000)), (5, 4, 2, 2, 1));
        assert_eq!(p.unanswered_at(3300, 1000), 2);
        let pace = &e.pacing[&(k(1), 0x11)];
        assert_eq!((pace.cnps, pace.gaps.clone()), (2, vec![1600]));
        let m = e.flows[&rec(1, 2, 0, 0, 0, 0).flow()];
        assert_eq!((m.data, m.data_not_ect, m.data_other_dscp, m.seen_data_dscp), (5, 1, 1, Some(24)));
        let c = e.flows[&rec(2, 1, 0, 0, 0, 0).flow()];
        assert_eq!((c.cnps, c.cnp_other_dscp, c.seen_cnp_dscp), (2, 1, Some(46)));
    }
}
