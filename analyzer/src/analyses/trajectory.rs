//! Trajectory sampling (Duffield and Grossglauser): every agent keeps the same sample of
//! frames, those whose identity hash falls below `u64::MAX / N` (`--trajectory-sample 1/N`).
//! The hash is of what a frame keeps from point to point (addresses, destination QP, PSN, UDP
//! source port, opcode), mixed the same way everywhere, so the frames chosen at one collector
//! are the frames chosen at every other: joined (in ClickHouse, or by `merge` over exports)
//! they give the hops between collectors that never exchanged a frame. Each sample keeps its
//! time, its ECN bits and its direction (whether the source address sorts below the
//! destination), which separates the collectors' clock offset from the path's latency.

use std::collections::VecDeque;

use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use crate::model::{Estimate, TrajectoryHop};

/// Samples kept for the export at most; older ones are dropped and counted.
pub const MAX_SAMPLES: usize = 1 << 20;

pub use crate::model::TrajectorySample as Sample;

/// The frame identity hash the sample is chosen by: the same on every machine.
pub fn identity(r: &Record) -> u64 {
    let words = [
        u64::from_le_bytes(r.src_ip[..8].try_into().unwrap_or_default()),
        u64::from_le_bytes(r.src_ip[8..].try_into().unwrap_or_default()),
        u64::from_le_bytes(r.dst_ip[..8].try_into().unwrap_or_default()),
        u64::from_le_bytes(r.dst_ip[8..].try_into().unwrap_or_default()),
        u64::from(r.dst_qp) | u64::from(r.psn) << 32,
        u64::from(r.udp_sport) | u64::from(r.opcode) << 16,
    ];
    let h = words.iter().fold(0u64, |h, w| (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29));
    // splitmix64's finalizer: every bit of the identity moves the low and the high bits alike,
    // so "below a threshold" picks 1 in N uniformly.
    let mut z = h;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The samples of a run.
#[derive(Debug, Default)]
pub struct Trajectory {
    /// 1 in this many frames sampled; 0: off.
    pub one_in: u64,
    threshold: u64,
    samples: VecDeque<Sample>,
    /// Samples taken since the start (the index of the next one).
    pub taken: u64,
    /// Samples dropped unexported (more than [`MAX_SAMPLES`] waiting).
    pub dropped: u64,
}

impl Trajectory {
    pub fn new(one_in: u64) -> Self {
        let threshold = u64::MAX.checked_div(one_in).unwrap_or(0);
        Trajectory { one_in, threshold, ..Default::default() }
    }

    #[inline]
    pub fn observe(&mut self, r: &Record) {
        if self.one_in == 0 {
            return;
        }
        let id = identity(r);
        if id >= self.threshold {
            return;
        }
        if self.samples.len() == MAX_SAMPLES {
            self.samples.pop_front();
            self.dropped += 1;
        }
        let dir = u8::from(r.src_ip > r.dst_ip);
        self.samples.push_back(Sample { id, ts_ns: r.ts_ns, ecn: r.ecn & 3, dir });
        self.taken += 1;
    }

    /// The samples taken from index `from` on (those still kept).
    pub fn since(&self, from: u64) -> impl Iterator<Item = &Sample> {
        let first = self.taken - self.samples.len() as u64;
        self.samples.iter().skip(from.saturating_sub(first) as usize)
    }
}

/// A collector's samples, by name (`host/label`).
pub type Point = (String, Vec<Sample>);

/// The 95 % Wilson interval of `k` in `n`.
pub fn wilson(k: u64, n: u64) -> Estimate {
    if n == 0 {
        return Estimate::default();
    }
    let (z, nf) = (1.96f64, n as f64);
    let p = k as f64 / nf;
    let den = 1.0 + z * z / nf;
    let mid = (p + z * z / (2.0 * nf)) / den;
    let half = z * (p * (1.0 - p) / nf + z * z / (4.0 * nf * nf)).sqrt() / den;
    let r = |x: f64| (x * 1e6).round() / 1e6;
    Estimate { of: n, value: r(p), ci95: [r((mid - half).max(0.0)), r((mid + half).min(1.0))] }
}

/// Each identity's first sighting at a point: time, ECN, direction.
fn first_seen(samples: &[Sample]) -> FxHashMap<u64, Sample> {
    let mut m = FxHashMap::default();
    for s in samples {
        m.entry(s.id)
            .and_modify(|o: &mut Sample| {
                if s.ts_ns < o.ts_ns {
                    *o = *s
                }
            })
            .or_insert(*s);
    }
    m
}

/// A point's samples by identity, and the span of their times.
struct Seen {
    first: FxHashMap<u64, Sample>,
    span: (i64, i64),
}

/// The hops between every two points whose samples share frames.
pub fn hops(points: &[Point]) -> Vec<TrajectoryHop> {
    let seen: Vec<Seen> = points
        .iter()
        .map(|(_, s)| {
            let times = || s.iter().map(|x| x.ts_ns as i64);
            Seen { first: first_seen(s), span: (times().min().unwrap_or(0), times().max().unwrap_or(0)) }
        })
        .collect();
    let mut out = Vec::new();
    for a in 0..points.len() {
        for b in a + 1..points.len() {
            out.extend(pair(points, &seen, a, b));
        }
    }
    out
}

/// The hops between points `a` and `b`: one per direction frames went.
fn pair(points: &[Point], seen: &[Seen], a: usize, b: usize) -> Vec<TrajectoryHop> {
    // t_b - t_a of the frames both saw, by direction.
    let mut d: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
    for (id, sa) in &seen[a].first {
        if let Some(sb) = seen[b].first.get(id) {
            d[sa.dir as usize & 1].push(sb.ts_ns as i64 - sa.ts_ns as i64);
        }
    }
    let both = !d[0].is_empty() && !d[1].is_empty();
    if d[0].is_empty() && d[1].is_empty() {
        return Vec::new();
    }
    // Sorted: the median, the fastest frame each way at the ends. A direction whose median
    // t_b - t_a is the larger goes a → b.
    d.iter_mut().for_each(|v| v.sort_unstable());
    let meds: Vec<Option<i64>> = d.iter().map(|v| v.get(v.len() / 2).copied()).collect();
    let offset = both.then(|| {
        let (ab, ba) = if meds[0] >= meds[1] { (0, 1) } else { (1, 0) };
        (d[ab][0] + d[ba][d[ba].len() - 1]) / 2
    });
    let mut hops = Vec::new();
    for dir in 0..2u8 {
        let Some(m) = meds[dir as usize] else { continue };
        let forward = m - offset.unwrap_or(0) >= 0;
        let (from, to) = if forward { (a, b) } else { (b, a) };
        // `to`'s clock minus `from`'s.
        let off = offset.map(|o| if forward { o } else { -o });
        hops.push(hop(points, seen, from, to, dir, off));
    }
    hops
}

/// Samples at `from` of direction `dir` within `to`'s span, followed to `to`.
fn hop(points: &[Point], seen: &[Seen], from: usize, to: usize, dir: u8, off: Option<i64>) -> TrajectoryHop {
    let o = off.unwrap_or(0);
    let (first, last) = seen[to].span;
    let (mut matched, mut missing, mut unmarked, mut ce) = (0u64, 0u64, 0u64, 0u64);
    let mut lat = Vec::new();
    for (id, s) in seen[from].first.iter().filter(|(_, s)| s.dir == dir) {
        let at_to = s.ts_ns as i64 + o;
        match seen[to].first.get(id) {
            Some(t) => {
                matched += 1;
                lat.push(t.ts_ns as i64 - s.ts_ns as i64 - o);
                if s.ecn != 3 {
                    unmarked += 1;
                    ce += u64::from(t.ecn == 3);
                }
            }
            None if at_to >= first && at_to <= last => missing += 1,
            None => {}
        }
    }
    lat.sort_unstable();
    let q = |f: f64| lat.get(((lat.len() as f64 - 1.0) * f).round() as usize).copied().unwrap_or(0);
    let clocks = match off {
        Some(x) if x.unsigned_abs() < 1_000 => "synchronised",
        Some(_) => "offset",
        None => "not_separable",
    };
    TrajectoryHop {
        from: points[from].0.clone(),
        to: points[to].0.clone(),
        matched,
        missing,
        loss: wilson(missing, matched + missing),
        ce_between: ce,
        marking: wilson(ce, unmarked),
        latency_ns: [q(0.0), q(0.5), q(0.99), q(1.0)],
        clock_offset_ns: off,
        clocks: clocks.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(psn: u32) -> Record {
        Record { src_ip: [1; 16], dst_ip: [2; 16], dst_qp: 7, psn, udp_sport: 0xC000, opcode: 10, ..Default::default() }
    }

    #[test]
    fn one_in_n_frames_and_the_same_ones_everywhere() {
        let mut a = Trajectory::new(16);
        let mut b = Trajectory::new(16);
        for psn in 0..160_000 {
            let mut r = rec(psn);
            a.observe(&r);
            r.ts_ns = 5_000 + psn as u64;
            r.ecn = 3;
            b.observe(&r);
        }
        let n = a.taken as f64;
        assert!((n - 10_000.0).abs() < 400.0, "{n} of 160000 at 1/16");
        let ids = |t: &Trajectory| t.since(0).map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(&a), ids(&b), "time and ECN do not choose");
        assert_eq!(a.since(a.taken - 3).count(), 3);
        assert!(Trajectory::new(0).since(0).next().is_none());
    }

    #[test]
    fn wilson_intervals_as_tabulated() {
        // 10 in 100: 0.0552..0.1744 (Wilson, z = 1.96).
        let e = wilson(10, 100);
        assert_eq!((e.of, e.value), (100, 0.1));
        assert!((e.ci95[0] - 0.0552).abs() < 1e-4 && (e.ci95[1] - 0.1744).abs() < 1e-4, "{e:?}");
        // None in 50: from 0, not below it.
        let e = wilson(0, 50);
        assert_eq!(e.ci95[0], 0.0);
        assert!((e.ci95[1] - 0.0714).abs() < 1e-4, "{e:?}");
        assert_eq!(wilson(0, 0), Estimate::default());
    }
}
