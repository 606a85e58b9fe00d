//! `--edges` for the vantage matching: the frames at a run's two ends, so that `merge` of
//! captures cut in time tells what one run's matching would have done across each cut.
//!
//! One run holds every frame for the match window. At a cut that window straddles two reports:
//! the frames the first one held at its end were still held, in one run, while the next report's
//! first frames came. Those may be their copies (one run folds them, the reports count two
//! frames), and they were held beside them (one run's `peak_held` is larger than either
//! report's). The log keeps both ends in order: the frames still held at the end (`ended`),
//! and every frame offered from the first until one past the match window (`head`), so that
//! the merge replays the window across the cut with the same rules.

/// A frame's point with this bit set: its copy was a mirrored one (the matching compares such
/// copies even from one input).
pub const MIRRORED: u64 = 1 << 16;

/// A point as the log names it: its index, with [`MIRRORED`] for a mirrored copy.
#[inline]
pub fn at(point: u16, mirrored: bool) -> u64 {
    point as u64 | if mirrored { MIRRORED } else { 0 }
}

/// What a run's ends held for the matching.
#[derive(Debug, Clone, Default)]
pub struct Log {
    /// Frames held when the run ended, oldest first: `[time, identity key (0: none), points
    /// that saw it (bit per point), its first point | MIRRORED]`.
    pub ended: Vec<[u64; 4]>,
    /// Frames offered from the run's first, as `[time, identity key (0: none), point | MIRRORED,
    /// 1 for a first sighting held or 0 for a copy folded]`, until the first one past the match
    /// window of the first: by then the frames one run held from before the cut have left.
    pub head: Vec<[u64; 4]>,
    /// Whether `head` is closed (a frame came past the window); else it is every frame.
    pub head_closed: bool,
}

impl Log {
    /// Logs a frame offered, while the head is open.
    #[inline]
    pub fn head(&mut self, window_ns: u64, frame: [u64; 4]) {
        if self.head_closed {
            return;
        }
        let first = self.head.first().map_or(frame[0], |f| f[0]);
        self.head.push(frame);
        self.head_closed = frame[0].saturating_sub(first) > window_ns;
    }
}
