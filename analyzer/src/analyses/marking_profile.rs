//! A hop's ECN marking profile (issue 42 §2): between two vantage points every matched frame
//! has a latency and was or was not CE-marked between them. The latency above the hop's
//! smallest is the queueing delay the frame met; a RED/WRED queue marks with probability 0
//! below Kmin, rising linearly to pmax at Kmax, and every frame above Kmax. Fitting that shape
//! to (delay, marked) gives the switch's thresholds, which decide whether ECN acts before PFC
//! and whether the marking suits the link speed.
//!
//! Frames are counted in fixed bins of delay ([`BIN_NS`]) relative to the smallest latency
//! seen, not of the latency itself: two capture clocks may be offset by milliseconds, and the
//! delay is what the resolution must serve.

/// The width of a delay bin: 64 ns is 800 bytes at 100 Gbit/s, 3.2 KB at 400 Gbit/s.
pub const BIN_NS: i64 = 64;
/// At most this many bins (4.2 ms of queueing delay): deeper delays share the last bin.
pub const MAX_BINS: usize = 1 << 16;
/// Fewer marked frames than this give no fit.
pub const MIN_MARKED: u64 = 20;
/// A fully marked top needs at least this many frames to place Kmax.
const MIN_FULL: u64 = 5;

/// Matched frames and those marked between the points, per bin of latency.
#[derive(Debug, Clone, Default)]
pub struct LatencyMarks {
    /// The latency at the lower edge of bin 0 (a multiple of [`BIN_NS`]).
    base: i64,
    /// The smallest latency seen.
    min: i64,
    /// (frames, marked) per bin from `base` on.
    bins: Vec<(u32, u32)>,
}

impl LatencyMarks {
    /// Counts a matched frame of this latency (`to`'s time minus `from`'s: negative when the
    /// clocks are offset).
    pub fn add(&mut self, latency_ns: i64, marked: bool) {
        if self.bins.is_empty() {
            self.base = latency_ns.div_euclid(BIN_NS) * BIN_NS;
            self.min = latency_ns;
        } else if latency_ns < self.base {
            let new_base = latency_ns.div_euclid(BIN_NS) * BIN_NS;
            let shift = ((self.base - new_base) / BIN_NS) as usize;
            self.prepend(shift);
            self.base = new_base;
        }
        self.min = self.min.min(latency_ns);
        let i = (((latency_ns - self.base) / BIN_NS) as usize).min(MAX_BINS - 1);
        if i >= self.bins.len() {
            self.bins.resize(i + 1, (0, 0));
        }
        let b = &mut self.bins[i];
        b.0 = b.0.saturating_add(1);
        b.1 = b.1.saturating_add(marked as u32);
    }

    /// Moves the bins up by `shift`, folding what passes the last bin into it.
    fn prepend(&mut self, shift: usize) {
        let mut bins = vec![(0u32, 0u32); (self.bins.len() + shift).min(MAX_BINS)];
        for (i, b) in self.bins.iter().enumerate() {
            let j = (i + shift).min(MAX_BINS - 1);
            bins[j].0 = bins[j].0.saturating_add(b.0);
            bins[j].1 = bins[j].1.saturating_add(b.1);
        }
        self.bins = bins;
    }

    /// What an edge carries: the base, the smallest latency, and `[bin, frames, marked]` per
    /// bin with frames.
    pub fn raw(&self) -> (i64, i64, Vec<[i64; 3]>) {
        let bins = self.bins.iter().enumerate().filter(|(_, b)| b.0 > 0);
        (self.base, self.min, bins.map(|(i, b)| [i as i64, b.0 as i64, b.1 as i64]).collect())
    }

    /// The bins of several runs' frames (each [`LatencyMarks::raw`]), as one run of them all
    /// counts them: a frame's bin is its latency above the lowest base, the last for deeper
    /// ones, whatever the order the frames and bases came in.
    pub fn merged(parts: &[(i64, i64, Vec<[i64; 3]>)]) -> LatencyMarks {
        let Some(base) = parts.iter().filter(|p| !p.2.is_empty()).map(|p| p.0).min() else {
            return LatencyMarks::default();
        };
        let min = parts.iter().filter(|p| !p.2.is_empty()).map(|p| p.1).min().unwrap_or(base);
        let mut m = LatencyMarks { base, min, bins: Vec::new() };
        for (b, _, bins) in parts {
            for &[i, frames, marked] in bins {
                let j = ((i + (b - base) / BIN_NS).max(0) as usize).min(MAX_BINS - 1);
                if j >= m.bins.len() {
                    m.bins.resize(j + 1, (0, 0));
                }
                let t = &mut m.bins[j];
                t.0 = t.0.saturating_add(frames.clamp(0, u32::MAX as i64) as u32);
                t.1 = t.1.saturating_add(marked.clamp(0, u32::MAX as i64) as u32);
            }
        }
        m
    }

    /// (queueing delay at the bin's centre, frames, marked) per bin with frames.
    fn points(&self) -> impl Iterator<Item = (f64, u64, u64)> + '_ {
        let offset = (self.base - self.min) as f64;
        self.bins
            .iter()
            .enumerate()
            .filter(|(_, b)| b.0 > 0)
            .map(move |(i, b)| ((offset + (i as f64 + 0.5) * BIN_NS as f64).max(0.0), b.0 as u64, b.1 as u64))
    }

    /// Fits the RED shape ([`Fit`]); None without frames.
    pub fn fit(&self) -> Option<Fit> {
        let pts: Vec<(f64, u64, u64)> = self.points().collect();
        let frames: u64 = pts.iter().map(|p| p.1).sum();
        let marked: u64 = pts.iter().map(|p| p.2).sum();
        if frames == 0 {
            return None;
        }
        let mut fit =
            Fit { frames, marked, kmin_ns: None, kmax_ns: None, pmax: None, confidence: Confidence::Insufficient };
        if marked < MIN_MARKED {
            return Some(fit);
        }
        // Kmax: the lowest bin from which every frame was marked.
        let mut top = pts.len();
        let mut full = 0;
        while top > 0 && pts[top - 1].1 == pts[top - 1].2 {
            top -= 1;
            full += pts[top].1;
        }
        let kmax = (full >= MIN_FULL && top > 0).then(|| (pts[top].0 - BIN_NS as f64 / 2.0).max(0.0));
        let ramp = if kmax.is_some() { &pts[..top] } else { &pts[..] };
        let Some((kmin, slope)) = hinge(ramp) else { return Some(fit) };
        let reach = kmax.unwrap_or_else(|| ramp.last().map_or(kmin, |p| p.0));
        fit.kmin_ns = Some(kmin.round() as u64);
        fit.kmax_ns = kmax.map(|k| k.round() as u64);
        fit.pmax = Some((slope * (reach - kmin)).clamp(0.0, 1.0));
        let ramp_marked: u64 = ramp.iter().filter(|p| p.0 >= kmin).map(|p| p.2).sum();
        let ramp_bins = ramp.iter().filter(|p| p.0 >= kmin).count();
        fit.confidence = match (ramp_marked, ramp_bins) {
            (m, b) if m >= 1000 && b >= 8 => Confidence::High,
            (m, b) if m >= 100 && b >= 4 => Confidence::Medium,
            _ => Confidence::Low,
        };
        Some(fit)
    }
}

/// The hinge p(q) = slope × (q − kmin) for q ≥ kmin, 0 below, by least squares of each bin's
/// marked fraction weighted by its frames: with kmin at a bin edge the slope is closed-form,
/// and the edge that explains most is taken. None when nothing on the ramp was marked.
fn hinge(pts: &[(f64, u64, u64)]) -> Option<(f64, f64)> {
    // Suffix sums over the bins from i on: Σn, Σnq, Σnq², Σm, Σmq.
    let mut suffix = vec![[0f64; 5]; pts.len() + 1];
    for i in (0..pts.len()).rev() {
        let (q, n, m) = (pts[i].0, pts[i].1 as f64, pts[i].2 as f64);
        let s = suffix[i + 1];
        suffix[i] = [s[0] + n, s[1] + n * q, s[2] + n * q * q, s[3] + m, s[4] + m * q];
    }
    let mut best: Option<(f64, f64, f64)> = None;
    for i in 0..pts.len() {
        let c = (pts[i].0 - BIN_NS as f64 / 2.0).max(0.0);
        let [n, nq, nq2, m, mq] = suffix[i];
        let xx = nq2 - 2.0 * c * nq + c * c * n;
        let xy = mq - c * m;
        if xx <= 0.0 || xy <= 0.0 {
            continue;
        }
        let explained = xy * xy / xx;
        if best.is_none_or(|b| explained > b.0) {
            best = Some((explained, c, xy / xx));
        }
    }
    best.map(|(_, c, s)| (c, s))
}

/// A hop's fitted marking profile, in nanoseconds of queueing delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub frames: u64,
    pub marked: u64,
    /// Where marking starts.
    pub kmin_ns: Option<u64>,
    /// From where every frame was marked; None when no delay seen was fully marked.
    pub kmax_ns: Option<u64>,
    /// The marking probability reached at Kmax (or at the largest delay seen).
    pub pmax: Option<f64>,
    pub confidence: Confidence,
}

/// How far a fit can be trusted: by the marked frames on the ramp and the bins it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    /// Fewer than [`MIN_MARKED`] marked frames: no fit.
    Insufficient,
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Insufficient => "insufficient",
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Latencies cut into runs, the later ones lower (new bases) and some past the last bin:
    /// the runs' bins merged are one run's, in any order.
    #[test]
    fn runs_cut_in_time_merge_into_one_runs_bins() {
        let lat = |i: i64| match i % 7 {
            0 => -3_000 - i,
            3 => (MAX_BINS as i64 + 50) * BIN_NS + i,
            _ => (i * 7919) % 40_000 - 1_000,
        };
        let mut whole = LatencyMarks::default();
        let mut parts = vec![LatencyMarks::default(); 3];
        for i in 0..3_000i64 {
            whole.add(lat(i), i % 5 == 0);
            parts[(i / 1_000) as usize].add(lat(i), i % 5 == 0);
        }
        let mut raw: Vec<_> = parts.iter().map(LatencyMarks::raw).collect();
        assert_eq!(LatencyMarks::merged(&raw).raw(), whole.raw());
        raw.reverse();
        assert_eq!(LatencyMarks::merged(&raw).raw(), whole.raw());
        assert_ne!(parts[2].raw(), whole.raw(), "the last run alone has other bins");
    }

    /// Frames every 10 ns of delay from 0 to 30 µs over a base of 2 µs, RED with Kmin 4 µs,
    /// Kmax 16 µs, pmax 0.25, marks placed by error diffusion: the fit finds the thresholds
    /// within 400 ns (5 KB at 100 Gbit/s; the first marks come late where p is small) and pmax
    /// within 0.03.
    #[test]
    fn a_red_profile_is_found() {
        let mut h = LatencyMarks::default();
        let mut acc = 0.0;
        for _ in 0..16 {
            for d in (0..30_000).step_by(10) {
                let p: f64 = if d < 4_000 {
                    0.0
                } else if d < 16_000 {
                    0.25 * (d - 4_000) as f64 / 12_000.0
                } else {
                    1.0
                };
                acc += p;
                let marked = acc >= 1.0;
                if marked {
                    acc -= 1.0;
                }
                h.add(2_000 + d, marked);
            }
        }
        let f = h.fit().unwrap();
        let (kmin, kmax, pmax) = (f.kmin_ns.unwrap(), f.kmax_ns.unwrap(), f.pmax.unwrap());
        assert!(kmin.abs_diff(4_000) <= 400, "{f:?}");
        assert!(kmax.abs_diff(16_000) <= BIN_NS as u64, "{f:?}");
        assert!((pmax - 0.25).abs() < 0.03, "{f:?}");
        assert_eq!(f.confidence, Confidence::High);
    }

    /// Offset clocks (negative latencies) and a smaller latency after larger ones re-anchor
    /// the bins without losing frames.
    #[test]
    fn negative_and_falling_latencies_keep_every_frame() {
        let mut h = LatencyMarks::default();
        h.add(5_000, false);
        h.add(-3_000, false);
        h.add(-3_000 + 640, true);
        let pts: Vec<_> = h.points().collect();
        assert_eq!(pts.iter().map(|p| p.1).sum::<u64>(), 3);
        // Bins of 64 ns from −3008; the delay of a bin's centre above the smallest (−3000).
        assert_eq!(pts.iter().map(|p| (p.0, p.2)).collect::<Vec<_>>(), [(24.0, 0), (664.0, 1), (8_024.0, 0)]);
    }

    #[test]
    fn too_few_marks_give_no_thresholds() {
        let mut h = LatencyMarks::default();
        for d in 0..1_000 {
            h.add(d * 10, d % 100 == 99);
        }
        let f = h.fit().unwrap();
        assert_eq!((f.marked, f.kmin_ns, f.confidence), (10, None, Confidence::Insufficient));
    }
}
