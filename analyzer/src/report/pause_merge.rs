//! Pause intervals across cuts in time. A report's last paused interval may run past its end:
//! the timer the last frame set, projected. In one run over the whole, the sender's next frame
//! after the cut replaces that timer (an XON ends the pause at once, an XOFF restarts it from
//! then), so `merge` of reports that follow each other in time ends such an interval at the
//! first frame of a later report for the same sender (`first_frame_ns`, with `--edges`); the
//! later report's own intervals continue from there, and their union is one run's.

/// One report's view of a sender (and priority): its span, its first frame, its last interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    pub report: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub first_frame_ns: Option<u64>,
    pub last: Option<[u64; 2]>,
}

/// Ends, in a sender's intervals gathered from reports in series (`tails`: each report's view),
/// every last interval that ran past its report's end where a later report's first frame came
/// before that end.
pub fn clip(intervals: &mut [[u64; 2]], tails: &[Tail]) {
    for t in tails {
        let Some([start, end]) = t.last.filter(|[_, e]| *e > t.end_ns) else { continue };
        let later = tails.iter().filter(|u| u.report != t.report && u.start_ns >= t.end_ns);
        let Some(next) = later.filter_map(|u| u.first_frame_ns).min().filter(|f| *f < end && *f > start) else {
            continue;
        };
        if let Some(i) = intervals.iter_mut().find(|i| **i == [start, end]) {
            i[1] = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture cut at 100: the part before ends paused from 90 until 150 (its last frame's
    /// timer). The part after sees the sender's XON at 120 (no interval of its own): one run was
    /// paused 90..120. Had the part after started with an XOFF at 120 until 200, its interval
    /// 120..200 continues the pause: 90..120 and 120..200 join into one run's 90..200.
    #[test]
    fn a_frame_after_the_cut_ends_the_projected_pause() {
        let tail =
            |report, start_ns, end_ns, first_frame_ns, last| Tail { report, start_ns, end_ns, first_frame_ns, last };
        let before = tail(0, 0, 100, Some(10), Some([90, 150]));
        let mut iv = vec![[10, 20], [90, 150]];
        clip(&mut iv, &[before, tail(1, 110, 300, Some(120), None)]);
        assert_eq!(iv, vec![[10, 20], [90, 120]]);
        let mut iv = vec![[10, 20], [90, 150], [120, 200]];
        clip(&mut iv, &[before, tail(1, 110, 300, Some(120), Some([120, 200]))]);
        assert_eq!(iv, vec![[10, 20], [90, 120], [120, 200]]);
        // No frame of the sender after the cut: the timer ran out as projected.
        let mut iv = vec![[90, 150]];
        clip(&mut iv, &[before, tail(1, 110, 300, None, None)]);
        assert_eq!(iv, vec![[90, 150]]);
        // A frame only after the projected end: the pause had expired by then.
        clip(&mut iv, &[before, tail(1, 110, 300, Some(160), Some([160, 170]))]);
        assert_eq!(iv, vec![[90, 150]]);
    }
}
