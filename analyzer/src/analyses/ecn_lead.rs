//! ECN before PFC: the CE marks on data of each priority, kept as runs in time, so that each
//! pause onset can be asked whether marks came in the `--ecn-lead` window before it (ECN should
//! slow senders before PFC pauses links: a switch's marking threshold below its XOFF threshold);
//! and the data frames per priority, against which the pause frames and paused time are a rate.
//!
//! A frame's priority is its outer PCP; an untagged frame's is its DSCP's under
//! `--dscp-priority`, else unknown ([`UNKNOWN`]): its marks count before a pause of any
//! priority. Marks closer than [`RUN_GAP_NS`] are one run (the first mark of a window is then
//! known to within that); each priority keeps its latest [`MAX_RUNS`] runs (older ones are
//! counted, `runs_dropped`).
//!
//! With a topology the marks are also kept per host pair ([`Pair`]), so that a pause onset is
//! asked only about the marks on flows through the link it paused: marks on another path say
//! nothing about the paused queue.

use std::collections::{BTreeMap, VecDeque};

use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

/// The priority of untagged frames whose DSCP has no `--dscp-priority`.
pub const UNKNOWN: usize = 8;
/// Marks at most this far apart are one run.
pub const RUN_GAP_NS: u64 = 1_000;
/// Runs kept per priority, at most.
pub const MAX_RUNS: usize = 1 << 16;
/// Runs kept per priority and host pair, at most.
pub const MAX_PAIR_RUNS: usize = 1 << 12;

/// A host pair's marks of one priority: (priority, IP version, source, destination).
pub type Pair = (u8, u8, [u8; 16], [u8; 16]);

#[derive(Debug, Default)]
pub struct Marks {
    /// Per priority (and [`UNKNOWN`]): runs of CE marks [first, last], in time order.
    runs: [VecDeque<(u64, u64)>; 9],
    /// Data frames per priority (and [`UNKNOWN`]).
    pub data_frames: [u64; 9],
    pub runs_dropped: u64,
    dscp_priority: BTreeMap<u8, u8>,
    /// With a topology: the runs per host pair too (None without).
    pairs: Option<FxHashMap<Pair, VecDeque<(u64, u64)>>>,
}

impl Marks {
    /// `by_pair`: keep the runs per host pair too (a topology places pairs on paths).
    pub fn new(dscp_priority: BTreeMap<u8, u8>, by_pair: bool) -> Marks {
        Marks { dscp_priority, pairs: by_pair.then(FxHashMap::default), ..Default::default() }
    }

    #[inline]
    fn priority(&self, r: &Record) -> usize {
        match r.pcp {
            p if p < 8 => p as usize,
            _ => self.dscp_priority.get(&(r.dscp & 63)).map_or(UNKNOWN, |p| *p as usize),
        }
    }

    /// A record: a data frame counts for its priority, a CE-marked one joins its runs.
    #[inline]
    pub fn observe(&mut self, r: &Record) {
        if !analyzer_common::opcode::is_data(r.opcode) {
            return;
        }
        let p = self.priority(r);
        self.data_frames[p] += 1;
        if !r.ce() {
            return;
        }
        self.runs_dropped += join(&mut self.runs[p], r.ts_ns, MAX_RUNS);
        if let Some(pairs) = &mut self.pairs {
            let q = pairs.entry((p as u8, r.ip_version, r.src_ip, r.dst_ip)).or_default();
            self.runs_dropped += join(q, r.ts_ns, MAX_PAIR_RUNS);
        }
    }

    /// The first CE mark on data of `priority` (any priority for an 802.3x PAUSE's
    /// [`super::pause::ALL_PRIORITIES`]; unknown priorities always count) in [t − lead, t).
    pub fn first_before(&self, priority: u8, t: u64, lead_ns: u64) -> Option<u64> {
        let from = t.saturating_sub(lead_ns);
        (0..9).filter(|p| counts(priority, *p)).filter_map(|p| first_in(&self.runs[p], from, t)).min()
    }

    /// `--edges`: per priority (and [`UNKNOWN`]) the first run of marks, and the runs that end
    /// at or after `from` (an onset after a cut asks the runs before it within its window), as
    /// `[priority, first, last]`; none when runs were dropped (the first is not known).
    pub fn edge(&self, from: u64) -> Option<crate::model::MarksEdge> {
        if self.runs_dropped > 0 {
            return None;
        }
        let (mut head, mut tail) = (Vec::new(), Vec::new());
        for (p, q) in self.runs.iter().enumerate() {
            head.extend(q.front().map(|r| [p as u64, r.0, r.1]));
            let at = q.partition_point(|r| r.1 < from);
            tail.extend(q.range(at..).map(|r| [p as u64, r.0, r.1]));
        }
        Some(crate::model::MarksEdge { head, tail })
    }

    /// The same over the host pairs `on_path` accepts (kept with a topology only: None
    /// without).
    pub fn first_before_on(
        &self,
        priority: u8,
        t: u64,
        lead_ns: u64,
        on_path: impl Fn(&Pair) -> bool,
    ) -> Option<Option<u64>> {
        let from = t.saturating_sub(lead_ns);
        let pairs = self.pairs.as_ref()?;
        Some(
            pairs
                .iter()
                .filter(|(k, _)| counts(priority, k.0 as usize) && on_path(k))
                .filter_map(|(_, q)| first_in(q, from, t))
                .min(),
        )
    }
}

/// Whether marks of priority `p` count before a pause of `priority`.
pub fn counts(priority: u8, p: usize) -> bool {
    priority as usize >= 8 || p == priority as usize || p == UNKNOWN
}

/// The first mark of `q`'s runs in [from, t).
fn first_in(q: &VecDeque<(u64, u64)>, from: u64, t: u64) -> Option<u64> {
    // The first run that ends at or after `from`.
    let i = q.partition_point(|run| run.1 < from);
    q.get(i).filter(|run| run.0 < t).map(|run| run.0.max(from))
}

/// A mark at `ts` joins the last run or starts one (the oldest dropped beyond `max`: returns
/// the runs dropped).
fn join(q: &mut VecDeque<(u64, u64)>, ts: u64, max: usize) -> u64 {
    match q.back_mut() {
        Some(run) if ts >= run.0 && ts.saturating_sub(run.1) <= RUN_GAP_NS => {
            run.1 = run.1.max(ts);
            0
        }
        _ => {
            let dropped = (q.len() == max) as u64;
            if dropped > 0 {
                q.pop_front();
            }
            q.push_back((ts, ts));
            dropped
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(ts: u64, pcp: u8, ce: bool) -> Record {
        Record { ts_ns: ts, opcode: 0x07, pcp, ecn: if ce { 3 } else { 2 }, ip_version: 4, ..Default::default() }
    }

    /// The edge: each priority's first run, and the runs ending at or after `from`.
    #[test]
    fn the_marks_near_the_ends() {
        let mut m = Marks::new(BTreeMap::new(), false);
        for (t, pcp) in [(100, 3), (600, 3), (5_000, 3), (7_000, 3), (6_500, 5)] {
            m.observe(&data(t, pcp, true));
        }
        let e = m.edge(5_500).unwrap();
        assert_eq!(e.head, vec![[3, 100, 600], [5, 6_500, 6_500]]);
        assert_eq!(e.tail, vec![[3, 7_000, 7_000], [5, 6_500, 6_500]]);
        m.runs_dropped = 1;
        assert_eq!(m.edge(0), None, "the first run is not known");
    }

    #[test]
    fn marks_before_an_onset_by_hand() {
        let mut m = Marks::new(BTreeMap::new(), false);
        for (t, pcp, ce) in [(100, 3, true), (600, 3, true), (5_000, 3, true), (5_000, 5, true), (9_000, 8, false)] {
            m.observe(&data(t, pcp, ce));
        }
        // 100 and 600 are one run; 5 000 another.
        assert_eq!(m.first_before(3, 1_000, 10_000), Some(100));
        assert_eq!(
            m.first_before(3, 1_000, 500),
            Some(500),
            "the run began before the window: its start is the window's"
        );
        assert_eq!(m.first_before(3, 4_000, 1_000), None);
        assert_eq!(m.first_before(5, 6_000, 2_000), Some(5_000));
        assert_eq!(m.first_before(4, 6_000, 2_000), None, "another priority's marks do not count");
        assert_eq!(m.first_before(8, 6_000, 2_000), Some(5_000), "an 802.3x PAUSE: any priority");
        assert_eq!(m.data_frames[3], 3);
        assert_eq!(m.data_frames[UNKNOWN], 1);
    }

    /// With pairs kept, only the pairs the path test accepts count; without, there is no
    /// answer (None), not "no marks".
    #[test]
    fn marks_of_the_pairs_on_the_path_only() {
        let mut m = Marks::new(BTreeMap::new(), true);
        let mut a = data(100, 3, true);
        a.src_ip[0] = 1;
        let mut b = data(200, 3, true);
        b.src_ip[0] = 2;
        m.observe(&a);
        m.observe(&b);
        assert_eq!(m.first_before_on(3, 1_000, 10_000, |p| p.2[0] == 2), Some(Some(200)));
        assert_eq!(m.first_before_on(3, 1_000, 10_000, |p| p.2[0] == 1), Some(Some(100)));
        assert_eq!(m.first_before_on(3, 1_000, 10_000, |p| p.2[0] == 3), Some(None));
        assert_eq!(m.first_before(3, 1_000, 10_000), Some(100));
        assert_eq!(Marks::new(BTreeMap::new(), false).first_before_on(3, 1_000, 10_000, |_| true), None);
    }
}
