//! Data frames and CE marks over time per traffic class (DSCP) and per PFC priority (outer
//! PCP), from the run's first CE-marked data frame on: the `marking` section and its plot. A
//! run without marks keeps nothing (unless `--edges`, below).
//!
//! The points of a [`Series`] are aligned to multiples of their width in absolute rate windows
//! (not to the series' first window), so that the series of two captures cut in time nest
//! into the series of the whole: `merge` adds their points into the whole's width and gets
//! one run's series. With `--edges` the frames before the report's first mark are kept as
//! series too (`marking.edge`): a capture that follows one with the first mark counts them.

use std::collections::BTreeMap;

use analyzer_common::opcode;
use analyzer_common::record::Record;

/// Points of a series for a plot (adjacent points merge when it is full).
pub const SERIES_POINTS: usize = 256;

/// A rate over time, for a plot: bytes, data frames and CE marks per point of `windows` rate
/// windows (doubled whenever the series would pass [`SERIES_POINTS`]); a flow's series keeps
/// its CNPs' times too (the first [`SERIES_POINTS`]). Point `i` holds the windows from
/// `(first_block + i) × windows` on, `first_block` being `start_window / windows`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Series {
    /// The window of the first frame added.
    pub start_window: u64,
    pub windows: u64,
    pub bytes: Vec<u64>,
    /// Data frames and those CE-marked, per point (the CE fraction over time).
    pub frames: Vec<u64>,
    pub ce: Vec<u64>,
    pub cnps: Vec<u64>,
}

impl Series {
    pub fn new(start_window: u64) -> Self {
        Series { start_window, windows: 1, ..Default::default() }
    }

    /// The first window of point 0 (a multiple of the points' width).
    pub fn first_window(&self) -> u64 {
        self.start_window / self.windows * self.windows
    }

    /// [`point`] of `w` (the width a power of two: shifts, not divisions, for every frame).
    #[inline]
    fn index(&self, w: u64) -> usize {
        debug_assert!(self.windows.is_power_of_two(), "widths double from 1");
        let shift = self.windows.trailing_zeros();
        ((w >> shift).saturating_sub(self.start_window >> shift)) as usize
    }

    pub fn add(&mut self, w: u64, bytes: u64, ce: bool) {
        let mut i = self.index(w);
        while i >= SERIES_POINTS {
            self.halve();
            i = self.index(w);
        }
        if self.bytes.len() <= i {
            self.bytes.resize(i + 1, 0);
            self.frames.resize(i + 1, 0);
            self.ce.resize(i + 1, 0);
        }
        self.bytes[i] += bytes;
        self.frames[i] += 1;
        self.ce[i] += ce as u64;
    }

    /// Points twice as wide: point `i` (block `first + i`) goes into block `(first + i) / 2`.
    fn halve(&mut self) {
        let first = self.start_window / self.windows;
        let halve = |v: &mut Vec<u64>| {
            let mut out = vec![0u64; (first + v.len() as u64 - 1) as usize / 2 - (first / 2) as usize + 1];
            for (i, x) in v.iter().enumerate() {
                out[((first + i as u64) / 2 - first / 2) as usize] += x;
            }
            *v = out;
        };
        if !self.bytes.is_empty() {
            halve(&mut self.bytes);
            halve(&mut self.frames);
            halve(&mut self.ce);
        }
        self.windows *= 2;
    }
}

/// The point holding `at` in a series of points `width` wide (aligned to multiples of their
/// width) whose first point holds `first`; 0 for `at` before it. The series' growth and
/// `merge`'s joining of series both place points by it.
pub fn point(first: u64, at: u64, width: u64) -> u64 {
    (at / width).saturating_sub(first / width)
}

/// Series per class and per priority.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sets {
    /// Per DSCP (the traffic class; 64 at most).
    pub classes: BTreeMap<u8, Series>,
    /// Per outer PCP (8: untagged).
    pub priorities: BTreeMap<u8, Series>,
}

impl Sets {
    fn add(&mut self, r: &Record, w: u64) {
        let len = r.frame_len as u64;
        self.classes.entry(r.dscp & 63).or_insert_with(|| Series::new(w)).add(w, len, r.ce());
        self.priorities.entry(r.pcp.min(8)).or_insert_with(|| Series::new(w)).add(w, len, r.ce());
    }
}

#[derive(Debug, Default)]
pub struct Marking {
    window_ns: u64,
    /// From the first mark on.
    pub marked: Sets,
    /// The time of the first CE-marked data frame.
    pub first_mark_ns: Option<u64>,
    /// `--edges`: the frames before the first mark (every one when there is none).
    pub before: Option<Box<Sets>>,
}

impl Marking {
    pub fn new(window_ns: u64) -> Self {
        Marking { window_ns: window_ns.max(1), ..Default::default() }
    }

    /// `--edges`: keep the frames before the first mark too.
    pub fn keep_before(&mut self) {
        self.before.get_or_insert_with(Default::default);
    }

    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    #[inline]
    pub fn observe(&mut self, r: &Record) {
        if r.is_cnp() || !opcode::is_data(r.opcode) {
            return;
        }
        if self.first_mark_ns.is_none() && r.ce() {
            self.first_mark_ns = Some(r.ts_ns);
        }
        let w = r.ts_ns / self.window_ns;
        match (self.first_mark_ns, self.before.as_mut()) {
            (Some(_), _) => self.marked.add(r, w),
            (None, Some(b)) => b.add(r, w),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_halves_its_resolution() {
        let mut s = Series::new(0);
        for w in 0..1000 {
            s.add(w, 10, w % 100 == 0);
        }
        assert_eq!((s.windows, s.bytes.len()), (4, 250));
        assert!(s.bytes.iter().all(|b| *b == 40));
        assert_eq!(s.ce.iter().sum::<u64>(), 10);
    }

    #[test]
    fn points_are_aligned_to_their_width_in_absolute_windows() {
        // From window 3: at width 1 points 3..=258 would be 256; window 259 needs width 2,
        // whose blocks are [2, 4), [4, 6), …: window 3 shares its point with nothing before.
        let mut s = Series::new(3);
        for w in 3..=259 {
            s.add(w, 1, false);
        }
        assert_eq!((s.windows, s.first_window()), (2, 2));
        assert_eq!(s.frames[0], 1, "block [2, 4) holds window 3 only");
        assert!(s.frames[1..].iter().all(|n| *n == 2), "{:?}", s.frames);
        assert_eq!(s.frames.iter().sum::<u64>(), 257);
    }
}
