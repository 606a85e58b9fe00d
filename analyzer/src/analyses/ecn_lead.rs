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

use std::collections::{BTreeMap, VecDeque};

use analyzer_common::record::Record;

/// The priority of untagged frames whose DSCP has no `--dscp-priority`.
pub const UNKNOWN: usize = 8;
/// Marks at most this far apart are one run.
pub const RUN_GAP_NS: u64 = 1_000;
/// Runs kept per priority, at most.
pub const MAX_RUNS: usize = 1 << 16;

#[derive(Debug, Default)]
pub struct Marks {
    /// Per priority (and [`UNKNOWN`]): runs of CE marks [first, last], in time order.
    runs: [VecDeque<(u64, u64)>; 9],
    /// Data frames per priority (and [`UNKNOWN`]).
    pub data_frames: [u64; 9],
    pub runs_dropped: u64,
    dscp_priority: BTreeMap<u8, u8>,
}

impl Marks {
    pub fn new(dscp_priority: BTreeMap<u8, u8>) -> Marks {
        Marks { dscp_priority, ..Default::default() }
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
        let q = &mut self.runs[p];
        match q.back_mut() {
            Some(run) if r.ts_ns >= run.0 && r.ts_ns.saturating_sub(run.1) <= RUN_GAP_NS => run.1 = run.1.max(r.ts_ns),
            _ => {
                if q.len() == MAX_RUNS {
                    q.pop_front();
                    self.runs_dropped += 1;
                }
                q.push_back((r.ts_ns, r.ts_ns));
            }
        }
    }

    /// The first CE mark on data of `priority` (any priority for an 802.3x PAUSE's
    /// [`super::pause::ALL_PRIORITIES`]; unknown priorities always count) in [t − lead, t).
    pub fn first_before(&self, priority: u8, t: u64, lead_ns: u64) -> Option<u64> {
        let from = t.saturating_sub(lead_ns);
        let all = priority as usize >= 8;
        (0..9)
            .filter(|p| all || *p == priority as usize || *p == UNKNOWN)
            .filter_map(|p| {
                let q = &self.runs[p];
                // The first run that ends at or after `from`.
                let i = q.partition_point(|run| run.1 < from);
                q.get(i).filter(|run| run.0 < t).map(|run| run.0.max(from))
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(ts: u64, pcp: u8, ce: bool) -> Record {
        Record { ts_ns: ts, opcode: 0x07, pcp, ecn: if ce { 3 } else { 2 }, ip_version: 4, ..Default::default() }
    }

    #[test]
    fn marks_before_an_onset_by_hand() {
        let mut m = Marks::new(BTreeMap::new());
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
}
