//! ECN / CNP accounting at packet resolution: data packets and CE marks per direction of an
//! IP pair with the CNPs that come back, whether each CE mark was answered by a CNP within the
//! timeout, CNP pacing per notified QP, and the ECN/DSCP marking of data and CNPs per flow
//! (for the audit).
//!
//! The notification point paces CNPs: at most one per flow per interval (50 µs in the DCQCN
//! paper, a NIC setting in practice), so a CE mark that arrives within that interval after a
//! CNP gets none of its own: it is *covered*, not unanswered. The interval is inferred from the
//! CNP gaps seen (the smallest gap of any QP with at least [`PACED_MIN_CNPS`] CNPs), or given
//! (`--cnp-interval`); a mark's distance to the CNP before it is kept until then.

pub(crate) mod kept;

use std::collections::VecDeque;

use analyzer_common::opcode;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use super::flows::Slot;
use super::keys::{Addr, Interned, bounded};
pub use kept::FlowMarking;

/// One direction of an IP pair: data from `a` to `b`, CNPs from `b` to `a`. What only pairs
/// with CE marks or CNPs need is boxed apart ([`Marks`]): most pairs of a large fabric have
/// none, and a pair is then 24 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairStats {
    pub data_packets: u64,
    pub ce: u64,
    pub cnp_back: u64,
    marks: Option<Box<Marks>>,
}

/// The CE/CNP timing of a pair that has any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Marks {
    /// CE marks with a CNP back within the timeout.
    ce_answered: u64,
    /// CE marks with none (covered ones included: see [`PairStats::split`]).
    ce_unanswered: u64,
    /// Of those, the time since the CNP seen before each (when within [`MAX_INTERVAL_NS`]).
    unanswered_after_cnp: Vec<u64>,
    /// CE times still within the timeout, with the time since the CNP before each.
    waiting: VecDeque<(u64, Option<u64>)>,
    /// The latest CNP b → a.
    last_cnp: Option<u64>,
    /// The first CNP b → a.
    first_cnp: Option<u64>,
    /// `--edges`: the times of unanswered marks with no CNP before them here (one before this
    /// capture, in the one before, gives them their distance in a merge).
    unanswered_first: Option<Vec<u64>>,
}

/// A QP's CNP gaps count toward the pacing interval from this many CNPs on.
pub const PACED_MIN_CNPS: u64 = 3;
/// Pacing intervals above this are not pacing (a mark further from a CNP is never covered).
pub const MAX_INTERVAL_NS: u64 = 10_000_000;

/// The CNP pacing interval used, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// `--cnp-interval`.
    Given(u64),
    /// The smallest CNP gap of a QP with at least [`PACED_MIN_CNPS`] CNPs.
    Inferred(u64),
    /// Too few CNPs to tell: no mark is covered.
    Unknown,
}

impl Interval {
    pub fn ns(self) -> Option<u64> {
        match self {
            Interval::Given(n) | Interval::Inferred(n) => Some(n),
            Interval::Unknown => None,
        }
    }
}

/// CNPs toward one QP: their count and gaps.
#[derive(Debug, Clone, Default)]
pub struct Pacing {
    pub cnps: u64,
    pub first: Option<u64>,
    pub last: Option<u64>,
    pub gaps: Vec<u64>,
}

#[derive(Debug, Default)]
pub struct Ecn {
    pub timeout_ns: u64,
    roce_dscp: u8,
    cnp_dscp: u8,
    /// (a, b) → data a→b and CNPs b→a, in the order first seen ([`Ecn::pairs`]); a flow keeps
    /// its pair's index. (Reports sort them.)
    pairs: Interned<(Addr, Addr), PairStats>,
    /// (CNP destination address, destination QP) → pacing.
    pub pacing: FxHashMap<(Addr, u32), Pacing>,
    /// Keys each map keeps, at most.
    cap: usize,
    /// Frames whose flow, pair or QP found a map at its cap.
    pub state_full: u64,
    /// `--cnp-interval`, when given.
    pub given_interval_ns: Option<u64>,
    /// `--edges`: keep what [`PairStats::edge`] needs.
    pub edges: bool,
}

impl Ecn {
    pub fn new(timeout_ns: u64, roce_dscp: u8, cnp_dscp: u8, cap: usize) -> Self {
        Ecn { timeout_ns, roce_dscp, cnp_dscp, cap, ..Default::default() }
    }

    /// With `--cnp-interval` (none: inferred).
    pub fn with_interval(self, given_interval_ns: Option<u64>) -> Self {
        Ecn { given_interval_ns, ..self }
    }

    /// The CNP pacing interval: given, or inferred from the gaps seen.
    pub fn interval(&self) -> Interval {
        if let Some(n) = self.given_interval_ns {
            return Interval::Given(n);
        }
        infer_interval(self.pacing.values().map(|p| (p.cnps, p.gaps.iter().min().copied())))
            .map_or(Interval::Unknown, Interval::Inferred)
    }

    /// Every pair: (a, b) → data a→b and CNPs b→a.
    pub fn pairs(&self) -> impl Iterator<Item = (&(Addr, Addr), &PairStats)> {
        self.pairs.iter()
    }

    /// One pair's state.
    pub fn pair(&self, key: &(Addr, Addr)) -> Option<&PairStats> {
        self.pairs.get(key)
    }

    /// Whether a record is one this analysis keeps its flow's marking for.
    pub fn wants(r: &Record) -> bool {
        r.is_cnp() || opcode::is_data(r.opcode)
    }

    /// A record of the flow in `flow` (one it [`Ecn::wants`]); None: the flows table had no
    /// room for it.
    pub fn observe(&mut self, r: &Record, flow: Option<&mut Slot<'_>>) {
        let src = (r.src_ip, r.ip_version);
        let dst = (r.dst_ip, r.ip_version);
        let (cap, full) = (self.cap, &mut self.state_full);
        if !Self::wants(r) {
            return;
        }
        let Some(m) = flow.and_then(|f| f.marking()) else {
            *full += 1;
            return;
        };
        if r.is_cnp() {
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
                p.first.get_or_insert(r.ts_ns);
                p.last = Some(r.ts_ns);
            }
            let Some(pair) = self.pairs.place_mut((dst, src), &mut m.cnp_pair, cap, full) else { return };
            pair.cnp_back += 1;
            let m = pair.marks.get_or_insert_with(|| Box::new(Marks::new(self.edges)));
            while let Some(&(t, since_cnp)) = m.waiting.front() {
                if t > r.ts_ns {
                    break;
                }
                m.waiting.pop_front();
                if r.ts_ns - t <= self.timeout_ns {
                    m.ce_answered += 1;
                } else {
                    m.unanswered(t, since_cnp);
                }
            }
            m.first_cnp.get_or_insert(r.ts_ns);
            m.last_cnp = Some(r.ts_ns);
        } else if opcode::is_data(r.opcode) {
            m.data += 1;
            if r.ecn & 3 == 0 {
                m.data_not_ect += 1;
            }
            if r.dscp != self.roce_dscp {
                m.data_other_dscp += 1;
                m.seen_data_dscp.get_or_insert(r.dscp);
            }
            let Some(pair) = self.pairs.place_mut((src, dst), &mut m.data_pair, cap, full) else { return };
            pair.data_packets += 1;
            if r.ce() {
                pair.ce += 1;
                pair.marks.get_or_insert_with(|| Box::new(Marks::new(self.edges)));
            }
            let Some(m) = pair.marks.as_deref_mut() else { return };
            while let Some(&(t, since_cnp)) = m.waiting.front() {
                if r.ts_ns.saturating_sub(t) <= self.timeout_ns {
                    break;
                }
                m.waiting.pop_front();
                m.unanswered(t, since_cnp);
            }
            if r.ce() {
                let since_cnp = m.last_cnp.map(|c| r.ts_ns.saturating_sub(c));
                m.waiting.push_back((r.ts_ns, since_cnp));
            }
        }
    }
}

impl Marks {
    fn new(edges: bool) -> Self {
        Marks { unanswered_first: edges.then(Vec::new), ..Default::default() }
    }

    /// A mark at `t` got no CNP within the timeout.
    fn unanswered(&mut self, t: u64, since_cnp: Option<u64>) {
        self.ce_unanswered += 1;
        self.unanswered_after_cnp.extend(kept_distance(since_cnp));
        if let (None, Some(first)) = (since_cnp, self.unanswered_first.as_mut()) {
            first.push(t);
        }
    }
}

impl PairStats {
    /// CE marks without a CNP back at `end_ns` (those still waiting count when older than the
    /// timeout; younger ones are undecided), as (unanswered, covered): covered marks came
    /// within the pacing `interval` after a CNP. Read-only.
    pub fn split(&self, end_ns: u64, timeout_ns: u64, interval: Interval) -> (u64, u64) {
        let Some(m) = self.marks.as_deref() else { return (0, 0) };
        m.split(end_ns, timeout_ns, interval)
    }

    /// CE marks still waiting for a CNP at `end_ns`, younger than the timeout: undecided.
    pub fn pending(&self, end_ns: u64, timeout_ns: u64) -> u64 {
        let Some(m) = self.marks.as_deref() else { return 0 };
        pending(m.waiting.iter(), end_ns, timeout_ns)
    }

    /// `--edges`: the pair's timing for a merge of captures cut in time (none when it had no
    /// CE mark or CNP).
    pub fn edge(&self, timeout_ns: u64) -> Option<crate::model::PairEdge> {
        let m = self.marks.as_deref()?;
        Some(crate::model::PairEdge {
            timeout_ns,
            unanswered: m.ce_unanswered,
            after_cnp_ns: m.unanswered_after_cnp.clone(),
            first_ns: m.unanswered_first.clone().unwrap_or_default(),
            waiting: m.waiting.iter().copied().collect(),
            first_cnp_ns: m.first_cnp,
            last_cnp_ns: m.last_cnp,
        })
    }

    /// CE marks with a CNP back within the timeout.
    pub fn ce_answered(&self) -> u64 {
        self.marks.as_ref().map_or(0, |m| m.ce_answered)
    }
}

impl Marks {
    fn split(&self, end_ns: u64, timeout_ns: u64, interval: Interval) -> (u64, u64) {
        let waiting = self.waiting.iter();
        split(self.ce_unanswered, &self.unanswered_after_cnp, waiting, end_ns, timeout_ns, interval.ns())
    }
}

/// The distance of an unanswered mark to the CNP before it, as kept for covering (none past
/// [`MAX_INTERVAL_NS`]).
pub fn kept_distance(since_cnp: Option<u64>) -> Option<u64> {
    since_cnp.filter(|d| *d <= MAX_INTERVAL_NS)
}

/// Marks without a CNP back at `end_ns`, as (unanswered, covered): `unanswered` already
/// judged so, with the distances of those `after_cnp` ([`kept_distance`]), and the `waiting`
/// marks (time, distance) older than the timeout; covered ones came within the pacing
/// `interval` after a CNP. The run's rule, which `merge` applies to captures cut in time.
pub fn split<'a>(
    unanswered: u64,
    after_cnp: &[u64],
    waiting: impl Iterator<Item = &'a (u64, Option<u64>)> + Clone,
    end_ns: u64,
    timeout_ns: u64,
    interval: Option<u64>,
) -> (u64, u64) {
    let expired = waiting.filter(|(t, _)| end_ns.saturating_sub(*t) > timeout_ns);
    let all = unanswered + expired.clone().count() as u64;
    let covered = match interval {
        None => 0,
        Some(i) => {
            let within = |d: &u64| *d <= i;
            (after_cnp.iter().filter(|d| within(d)).count()
                + expired.filter(|(_, d)| d.as_ref().is_some_and(within)).count()) as u64
        }
    };
    (all - covered, covered)
}

/// Of the `waiting` marks, those younger than the timeout at `end_ns`: undecided.
pub fn pending<'a>(waiting: impl Iterator<Item = &'a (u64, Option<u64>)>, end_ns: u64, timeout_ns: u64) -> u64 {
    waiting.filter(|(t, _)| end_ns.saturating_sub(*t) <= timeout_ns).count() as u64
}

/// The pacing interval inferred from the QPs' (CNPs, smallest gap): the smallest gap of a QP
/// with at least [`PACED_MIN_CNPS`] CNPs, within [`MAX_INTERVAL_NS`].
pub fn infer_interval(qps: impl Iterator<Item = (u64, Option<u64>)>) -> Option<u64> {
    qps.filter(|(cnps, _)| *cnps >= PACED_MIN_CNPS).filter_map(|(_, g)| g).filter(|g| *g <= MAX_INTERVAL_NS).min()
}

/// A QP's smallest and median CNP gap (0 without gaps), as the report gives them.
pub fn gap_stats(gaps: &mut [u64]) -> (u64, u64) {
    (gaps.iter().copied().min().unwrap_or(0), super::stats::median(gaps))
}

#[cfg(test)]
mod tests {
    use super::super::flows::{Flows, Hint, Wants};
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
        let mut flows = Flows::new(usize::MAX);
        let records = [
            rec(1, 2, 0x0A, 0, 3, 26),    // CE, answered at 400
            rec(1, 2, 0x0A, 100, 3, 26),  // CE, answered at 400
            rec(2, 1, 0x81, 400, 0, 48),  // CNP
            rec(1, 2, 0x0A, 500, 3, 26),  // CE, no CNP until 2000: unanswered
            rec(2, 1, 0x81, 2000, 0, 46), // CNP
            rec(1, 2, 0x0A, 2100, 0, 24), // Not-ECT, DSCP 24
            rec(1, 2, 0x0A, 2200, 3, 26), // CE at the end, undecided
            rec(1, 2, 0x11, 2300, 3, 26), // an ACK is not data
        ];
        for r in &records {
            let wants = Wants { marking: Ecn::wants(r), request: false };
            e.observe(r, flows.slot(&r.flow(), wants, Hint::None).as_mut());
        }
        let k = |a: u8| (([10, 0, 0, a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 4u8);
        let p = e.pair(&(k(1), k(2))).unwrap();
        let unknown = Interval::Unknown;
        assert_eq!(
            (p.data_packets, p.ce, p.cnp_back, p.ce_answered(), p.split(2500, 1000, unknown)),
            (5, 4, 2, 2, (1, 0))
        );
        assert_eq!(p.split(3300, 1000, unknown), (2, 0));
        // The mark at 500 came 100 after the CNP at 400; the one at 2200, 200 after 2000.
        assert_eq!(p.split(3300, 1000, Interval::Given(100)), (1, 1));
        assert_eq!(p.split(3300, 1000, Interval::Given(200)), (0, 2));
        assert_eq!(e.interval(), Interval::Unknown, "two CNPs on the QP: too few to infer pacing");
        let pace = &e.pacing[&(k(1), 0x11)];
        assert_eq!((pace.cnps, pace.gaps.clone()), (2, vec![1600]));
        let marking = |k| flows.get(&k).and_then(|f| f.marking).unwrap();
        let m = marking(rec(1, 2, 0, 0, 0, 0).flow());
        assert_eq!((m.data, m.data_not_ect, m.data_other_dscp, m.seen_data_dscp), (5, 1, 1, Some(24)));
        let c = marking(rec(2, 1, 0, 0, 0, 0).flow());
        assert_eq!((c.cnps, c.cnp_other_dscp, c.seen_cnp_dscp), (2, 1, Some(46)));
    }
}
