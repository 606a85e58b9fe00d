//! A hop's latency in time, for the tail's `queueing` cause: with several vantage points, each
//! matched frame's latency between two points is kept with its rate window (16 bits each, a
//! [`fine_bucket`]), because the hop's p90 that tells a slow window is known only at the end.
//! A window where more than half of the frames crossed slower than the hop's p90 is one where
//! the hop queued (its median above the p90: a queue building, not one slow frame among
//! many); a tail message whose flow crossed the hop during such windows overlapped queueing.

use super::stats::fine_bucket;

/// Latencies a hop keeps in time, at most (8 MB); past it they are counted, not kept.
pub const MAX_KEPT: usize = 1 << 22;

#[derive(Debug, Default)]
pub struct HopWindows {
    /// (window, index of its first latency in `buckets`), in the order windows came.
    starts: Vec<(u64, u32)>,
    buckets: Vec<u16>,
    /// Latencies past [`MAX_KEPT`]: not laid over the tail.
    pub unkept: u64,
}

impl HopWindows {
    /// A frame that crossed the hop in window `w`, taking `latency_ns`.
    #[inline]
    pub fn add(&mut self, w: u64, latency_ns: u64) {
        if self.buckets.len() >= MAX_KEPT {
            self.unkept += 1;
            return;
        }
        if self.starts.last().is_none_or(|&(last, _)| last != w) {
            self.starts.push((w, self.buckets.len() as u32));
        }
        self.buckets.push(fine_bucket(latency_ns));
    }

    /// The windows (as `[start, end)` nanoseconds, adjacent ones joined) in which more than
    /// half of the frames crossed slower than `threshold_ns`.
    pub fn slow(&self, threshold_ns: u64, window_ns: u64) -> Vec<(u64, u64)> {
        let limit = fine_bucket(threshold_ns);
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (i, &(w, from)) in self.starts.iter().enumerate() {
            let to = self.starts.get(i + 1).map_or(self.buckets.len(), |s| s.1 as usize);
            let frames = &self.buckets[from as usize..to];
            let above = frames.iter().filter(|b| **b > limit).count();
            if above * 2 <= frames.len() {
                continue;
            }
            let (start, end) = (w * window_ns, (w + 1) * window_ns);
            match out.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => out.push((start, end)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_where_most_frames_were_slow() {
        let mut h = HopWindows::default();
        // Window 0: 2 µs each; 1 and 2: 3 of 4 at 50 µs; 3: 1 of 4 at 50 µs; 5: all slow.
        for _ in 0..4 {
            h.add(0, 2_000);
        }
        for w in [1, 2] {
            for l in [50_000, 50_000, 50_000, 2_000] {
                h.add(w, l);
            }
        }
        for l in [50_000, 2_000, 2_000, 2_000] {
            h.add(3, l);
        }
        h.add(5, 60_000);
        assert_eq!(h.slow(10_000, 100), vec![(100, 300), (500, 600)]);
        assert_eq!(h.slow(55_000, 100), vec![(500, 600)], "the threshold's own bucket is not above it");
    }
}
