//! PFC pause time and storms. Each (sender MAC, priority) keeps one pause timer: a frame with
//! quanta q at time t (re)starts it to run until t + q × 512 bit times at the link speed (XON,
//! q = 0, stops it at t). The paused time is the union of those intervals; a storm is one
//! continuous paused interval of at least `--pfc-storm`. An 802.3x PAUSE frame is one timer for
//! all priorities of its sender (priority [`ALL_PRIORITIES`]).
//!
//! The closed intervals are kept (merged as they are made) for the congestion tree and the
//! deadlock search; a report is built without closing the running ones, so live reports can be
//! made at every interval.

use std::collections::BTreeMap;

/// The priority of 802.3x PAUSE timers.
pub const ALL_PRIORITIES: u8 = analyzer_common::maps::PAUSE_PRIORITY;

/// Nanoseconds of `quanta` pause quanta (512 bit times each) at `speed_bps`.
pub fn quanta_ns(quanta: u16, speed_bps: u64) -> u64 {
    (quanta as u128 * 512 * 1_000_000_000 / speed_bps.max(1) as u128) as u64
}

/// The pause timer of one sender and priority (its frame counts are in the engine's
/// [`crate::engine::PfcTable`], the kernel map's type).
#[derive(Debug, Clone, Default)]
pub struct Timer {
    /// Closed paused intervals [start, end), in time order, not overlapping.
    pub intervals: Vec<(u64, u64)>,
    /// The running interval: (start, end as the last frame set it).
    running: Option<(u64, u64)>,
    last_ts: u64,
    /// The first frame's time (XOFF or XON).
    pub first_ts: Option<u64>,
}

impl Timer {
    /// Every paused interval up to now, the running one included as its frame set it.
    pub fn all_intervals(&self) -> Vec<(u64, u64)> {
        let mut v = self.intervals.clone();
        v.extend(self.running);
        v
    }

    /// A closed timer of these intervals (a report's, for `merge`).
    pub fn from_intervals(intervals: Vec<(u64, u64)>) -> Timer {
        Timer { intervals, ..Default::default() }
    }

    pub fn paused_ns(&self) -> u64 {
        self.all_intervals().iter().map(|(s, e)| e - s).sum()
    }
}

/// A continuous paused interval of at least the storm threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Storm {
    pub mac: [u8; 6],
    pub priority: u8,
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Debug, Default)]
pub struct Pause {
    speed_bps: u64,
    storm_ns: u64,
    /// (sender MAC, priority or [`ALL_PRIORITIES`]) → timer.
    pub timers: BTreeMap<([u8; 6], u8), Timer>,
    /// Times of PFC and PAUSE frames (for the incast episodes), in arrival order.
    pub frame_times: Vec<u64>,
}

/// A PFC or 802.3x PAUSE frame: what the timers read of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// PFC: the sender, the class-enable vector and the quanta per priority.
    Pfc { mac: [u8; 6], enable: u16, quanta: [u16; 8] },
    /// 802.3x PAUSE: the sender and its quanta.
    Pause { mac: [u8; 6], quanta: u16 },
}

impl Frame {
    /// The pause frame `s` is, if it is one.
    pub fn of(s: &analyzer_common::PacketSummary) -> Option<Frame> {
        match s.class() {
            analyzer_common::FrameClass::Pfc => {
                Some(Frame::Pfc { mac: s.src_mac, enable: s.pfc_enable, quanta: s.pfc_quanta })
            }
            analyzer_common::FrameClass::Pause => Some(Frame::Pause { mac: s.src_mac, quanta: s.pfc_quanta[0] }),
            _ => None,
        }
    }
}

impl Pause {
    /// `f`, seen at `ts`.
    pub fn observe(&mut self, ts: u64, f: &Frame) {
        match f {
            Frame::Pfc { mac, enable, quanta } => self.pfc(ts, *mac, *enable, quanta),
            Frame::Pause { mac, quanta } => self.pause(ts, *mac, *quanta),
        }
    }

    pub fn new(speed_bps: u64, storm_ns: u64) -> Self {
        Pause { speed_bps, storm_ns, ..Default::default() }
    }

    /// A PFC frame (class-enable vector and quanta per priority).
    pub fn pfc(&mut self, ts: u64, mac: [u8; 6], enable: u16, quanta: &[u16; 8]) {
        self.frame_times.push(ts);
        for p in 0..8u8 {
            if enable & (1 << p) != 0 {
                self.one(ts, mac, p, quanta[p as usize]);
            }
        }
    }

    /// An 802.3x PAUSE frame.
    pub fn pause(&mut self, ts: u64, mac: [u8; 6], quanta: u16) {
        self.frame_times.push(ts);
        self.one(ts, mac, ALL_PRIORITIES, quanta);
    }

    fn one(&mut self, ts: u64, mac: [u8; 6], priority: u8, quanta: u16) {
        let t = self.timers.entry((mac, priority)).or_default();
        // Live events of two CPUs may arrive slightly out of order: never go back in time.
        let ts = ts.max(t.last_ts);
        t.last_ts = ts;
        t.first_ts.get_or_insert(ts);
        let until = ts + quanta_ns(quanta, self.speed_bps);
        t.running = match t.running {
            // Still paused: the new frame replaces the timer (XON ends it now).
            Some((start, end)) if end > ts => {
                if quanta == 0 {
                    Self::close(t, start, ts);
                    None
                } else {
                    Some((start, until))
                }
            }
            // Expired (or never paused): close the old interval, start a new one.
            old => {
                if let Some((start, end)) = old {
                    Self::close(t, start, end);
                }
                (quanta > 0).then_some((ts, until))
            }
        };
    }

    fn close(t: &mut Timer, start: u64, end: u64) {
        if end > start {
            t.intervals.push((start, end));
        }
    }

    /// Storms so far (the running interval included when already long enough), by start.
    pub fn storms(&self) -> Vec<Storm> {
        let mut v: Vec<Storm> = self
            .timers
            .iter()
            .flat_map(|((mac, priority), t)| {
                t.all_intervals().into_iter().filter(|(s, e)| e - s >= self.storm_ns).map(move |(s, e)| Storm {
                    mac: *mac,
                    priority: *priority,
                    start_ns: s,
                    duration_ns: e - s,
                })
            })
            .collect();
        v.sort_by_key(|s| (s.start_ns, s.mac, s.priority));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: [u8; 6] = [2, 0, 0, 0, 0, 1];

    #[test]
    fn quanta_at_link_speeds() {
        assert_eq!(quanta_ns(1, 100_000_000_000), 5);
        assert_eq!(quanta_ns(65535, 100_000_000_000), 335_539);
        assert_eq!(quanta_ns(65535, 25_000_000_000), 1_342_156);
        assert_eq!(quanta_ns(1000, 400_000_000_000), 1_280);
    }

    #[test]
    fn union_refresh_xon_and_storms() {
        // 1 Gbit/s: one quanta = 512 ns.
        let mut p = Pause::new(1_000_000_000, 10_000);
        let q = |n: u16| {
            let mut a = [0u16; 8];
            a[3] = n;
            a
        };
        p.pfc(0, M, 1 << 3, &q(10)); // [0, 5120)
        p.pfc(1_000, M, 1 << 3, &q(10)); // refresh: [0, 6120)
        p.pfc(20_000, M, 1 << 3, &q(100)); // new: [20000, 71200)
        p.pfc(30_000, M, 1 << 3, &q(0)); // XON ends it: [20000, 30000)
        p.pfc(40_000, M, 1 << 3, &q(0)); // XON while not paused
        p.pfc(50_000, M, 1 << 3 | 1 << 5, &q(4)); // [50000, 52048) on 3; priority 5 has quanta 0
        let t = &p.timers[&(M, 3)];
        assert_eq!(t.all_intervals(), vec![(0, 6_120), (20_000, 30_000), (50_000, 52_048)]);
        assert_eq!(t.paused_ns(), 6_120 + 10_000 + 2_048);
        assert_eq!(p.timers[&(M, 5)].paused_ns(), 0);
        assert_eq!(p.storms(), vec![Storm { mac: M, priority: 3, start_ns: 20_000, duration_ns: 10_000 }]);
        p.pause(60_000, M, 20);
        assert_eq!(p.timers[&(M, ALL_PRIORITIES)].paused_ns(), 10_240);
        assert_eq!(p.frame_times.len(), 7);
    }
}
