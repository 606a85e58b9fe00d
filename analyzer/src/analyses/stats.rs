//! Latency samples and their percentiles (nearest rank).
//!
//! Samples are kept exactly up to [`EXACT_LIMIT`]; beyond that (long live runs) they fold into
//! a logarithmic histogram whose buckets are 1% wide, so a percentile is within 1% of the exact
//! one. The report says which.

use crate::model::Percentiles;

pub const EXACT_LIMIT: usize = 1 << 20;
/// Bucket growth factor: each bucket spans [g^i, g^(i+1)).
pub const GROWTH: f64 = 1.01;
/// A bucket's geometric middle is within this of every value in it (√1.01 − 1 < 0.5 %).
pub const RELATIVE_ERROR: f64 = 0.005;

/// Bounds of [`PromBuckets`]: 1 µs doubling, 21 of them (about 1 s), then +Inf.
pub const PROM_BOUNDS: usize = 21;

/// Latencies in Prometheus' classic histogram buckets (`le` 1 µs × 2^i), kept as samples
/// arrive so that /metrics never walks the samples; the sum in integer nanoseconds, so that
/// it does not depend on the order samples were added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromBuckets {
    /// Per bucket (not cumulative); the last is +Inf.
    pub counts: [u64; PROM_BOUNDS + 1],
    pub sum_ns: u128,
    pub count: u64,
}

impl PromBuckets {
    pub fn observe(&mut self, ns: u64) {
        let i = (0..PROM_BOUNDS).find(|i| ns <= 1000u64 << i).unwrap_or(PROM_BOUNDS);
        self.counts[i] += 1;
        self.sum_ns += ns as u128;
        self.count += 1;
    }
}

#[derive(Debug, Clone, Default)]
pub struct Samples {
    exact: Vec<u64>,
    /// Bucket index → count, once folded.
    hist: Option<std::collections::BTreeMap<u32, u64>>,
    n: u64,
    min: u64,
    max: u64,
}

fn bucket(v: u64) -> u32 {
    if v <= 1 { 0 } else { ((v as f64).ln() / GROWTH.ln()).floor() as u32 }
}

/// Geometric middle of a bucket: within 0.5% of any value in it.
fn bucket_value(b: u32) -> u64 {
    GROWTH.powf(b as f64 + 0.5).round() as u64
}

/// `a × b / d` (`d` > 0), in 64 bits when the product fits: a 128-bit division is a call, and
/// the rates and completion numbers take one per window or message.
pub fn mul_div(a: u64, b: u64, d: u64) -> u64 {
    match a.checked_mul(b) {
        Some(n) => n / d,
        None => (a as u128 * b as u128 / d as u128) as u64,
    }
}

/// [`mul_div`] rounded up.
pub fn mul_div_ceil(a: u64, b: u64, d: u64) -> u64 {
    match a.checked_mul(b) {
        Some(n) => n.div_ceil(d),
        None => (a as u128 * b as u128).div_ceil(d as u128) as u64,
    }
}

/// Mantissa bits of a [`fine_bucket`].
const SUB: u32 = 6;

/// The bucket of `v` among buckets 1/64 of a power of two wide, found with integer operations
/// (a bucket's middle is within 0.8 % of every value in it), in 16 bits: for series kept per
/// window (rates, a hop's latencies in time), where the 1 % histogram's logarithm per value
/// would cost too much.
pub fn fine_bucket(v: u64) -> u16 {
    if v < 1 << SUB {
        return v as u16;
    }
    let e = 63 - v.leading_zeros();
    (((e - SUB + 1) << SUB) | ((v >> (e - SUB)) as u32 & ((1 << SUB) - 1))) as u16
}

/// The middle of a [`fine_bucket`].
pub fn fine_bucket_middle(b: u16) -> u64 {
    let (e, m) = ((b >> SUB) as u32, (b & ((1 << SUB) - 1)) as u64);
    if e == 0 {
        return m;
    }
    let shift = e - 1;
    (((1u64 << SUB) | m) << shift) + ((1u64 << shift) >> 1)
}

impl Samples {
    pub fn push(&mut self, v: u64) {
        if self.n == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.n += 1;
        match &mut self.hist {
            Some(h) => *h.entry(bucket(v)).or_default() += 1,
            None => {
                self.exact.push(v);
                if self.exact.len() > EXACT_LIMIT {
                    let mut h = std::collections::BTreeMap::new();
                    for x in self.exact.drain(..) {
                        *h.entry(bucket(x)).or_default() += 1;
                    }
                    self.hist = Some(h);
                }
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    /// Samples kept in the 1 % histogram from the first (for series of many values per key,
    /// such as a flow's goodput per rate window, whose exact list would grow with the run).
    pub fn bucketed() -> Samples {
        Samples { hist: Some(Default::default()), ..Default::default() }
    }

    /// The smallest sample, if any.
    pub fn min(&self) -> Option<u64> {
        (self.n > 0).then_some(self.min)
    }

    /// Samples at or above `v` (exact while the samples are; by buckets after, a bucket
    /// counted when its middle is at or above `v`).
    pub fn count_at_least(&self, v: u64) -> u64 {
        match &self.hist {
            None => self.exact.iter().filter(|x| **x >= v).count() as u64,
            Some(h) => h.iter().filter(|(b, _)| bucket_value(**b).clamp(self.min, self.max) >= v).map(|(_, c)| c).sum(),
        }
    }

    /// The nearest-rank quantile `q` (0 < q ≤ 1), if any sample.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        Some(match &self.hist {
            None => {
                let mut v = self.exact.clone();
                v.sort_unstable();
                v[rank as usize - 1]
            }
            Some(h) => {
                let mut seen = 0;
                let mut out = self.max;
                for (b, c) in h {
                    seen += c;
                    if seen >= rank {
                        out = bucket_value(*b).clamp(self.min, self.max);
                        break;
                    }
                }
                out
            }
        })
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Adds another set's samples.
    pub fn extend(&mut self, o: &Samples) {
        for v in &o.exact {
            self.push(*v);
        }
        if let Some(h) = &o.hist {
            for (b, c) in h {
                for _ in 0..*c {
                    self.push(bucket_value(*b));
                }
            }
            self.min = self.min.min(o.min);
            self.max = self.max.max(o.max);
        }
    }

    /// Nearest-rank percentiles: the value at rank ceil(p × n).
    pub fn percentiles(&self) -> Option<Percentiles> {
        if self.n == 0 {
            return None;
        }
        let rank = |p: f64| ((p * self.n as f64).ceil() as u64).clamp(1, self.n);
        let at: Box<dyn Fn(u64) -> u64> = match &self.hist {
            None => {
                let mut v = self.exact.clone();
                v.sort_unstable();
                Box::new(move |r| v[r as usize - 1])
            }
            Some(h) => {
                let h = h.clone();
                let (min, max) = (self.min, self.max);
                Box::new(move |r| {
                    let mut seen = 0;
                    for (b, c) in &h {
                        seen += c;
                        if seen >= r {
                            return bucket_value(*b).clamp(min, max);
                        }
                    }
                    max
                })
            }
        };
        Some(Percentiles {
            samples: self.n,
            min: self.min,
            p50: at(rank(0.50)),
            p90: at(rank(0.90)),
            p99: at(rank(0.99)),
            p999: at(rank(0.999)),
            max: self.max,
            exact: self.hist.is_none(),
        })
    }

    /// The samples as histogram buckets (index, count), the exact ones bucketed too: what a
    /// report carries so that the percentiles of several reports can be merged.
    pub fn buckets(&self) -> Vec<(u32, u64)> {
        let mut h = self.hist.clone().unwrap_or_default();
        for v in &self.exact {
            *h.entry(bucket(*v)).or_default() += 1;
        }
        h.into_iter().collect()
    }

    /// Samples from buckets (summed over several reports), with their smallest and largest
    /// values: percentiles within [`RELATIVE_ERROR`], marked not exact.
    pub fn from_buckets(buckets: &[(u32, u64)], min: u64, max: u64) -> Samples {
        let mut hist = std::collections::BTreeMap::new();
        for (b, c) in buckets {
            *hist.entry(*b).or_default() += c;
        }
        let n = hist.values().sum();
        Samples { exact: Vec::new(), hist: Some(hist), n, min, max }
    }

    /// Every sample of `parts` as one set, as if pushed one by one: exact while every part is
    /// and together they stay within [`EXACT_LIMIT`] (the same multiset gives the same nearest
    /// ranks in any order), else their buckets summed with the smallest and largest value (a
    /// sample's bucket does not depend on the order either). So the samples of captures cut in
    /// time come back as the whole capture's.
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Samples> + Clone) -> Samples {
        let mut all = Samples::default();
        if parts.clone().into_iter().all(|p| p.hist.is_none()) {
            for v in parts.into_iter().flat_map(|p| &p.exact) {
                all.push(*v);
            }
            return all;
        }
        let with: Vec<&Samples> = parts.into_iter().filter(|p| p.n > 0).collect();
        let buckets: Vec<(u32, u64)> = with.iter().flat_map(|p| p.buckets()).collect();
        let min = with.iter().map(|p| p.min).min().unwrap_or(0);
        let max = with.iter().map(|p| p.max).max().unwrap_or(0);
        Samples::from_buckets(&buckets, min, max)
    }

    /// The samples as a flow's edge carries them (`flows[].edge.rtt`).
    pub fn to_edge(&self) -> crate::model::edge::EdgeRtt {
        let buckets = match self.hist {
            None => Vec::new(),
            Some(_) => self.buckets().into_iter().map(|(b, c)| [b as u64, c]).collect(),
        };
        crate::model::edge::EdgeRtt {
            samples: self.exact.clone(),
            buckets,
            min: self.min,
            max: self.max,
            ..Default::default()
        }
    }

    /// The samples an edge carried ([`Samples::to_edge`]).
    pub fn from_edge(e: &crate::model::edge::EdgeRtt) -> Samples {
        if e.buckets.is_empty() {
            let mut s = Samples::default();
            e.samples.iter().for_each(|v| s.push(*v));
            return s;
        }
        let buckets: Vec<(u32, u64)> = e.buckets.iter().map(|[b, c]| (*b as u32, *c)).collect();
        Samples::from_buckets(&buckets, e.min, e.max)
    }

    /// Every sample in the histogram's buckets, as (upper bound, count) for metrics.
    pub fn values(&self) -> Vec<u64> {
        match &self.hist {
            None => self.exact.clone(),
            Some(h) => h.iter().flat_map(|(b, c)| std::iter::repeat_n(bucket_value(*b), *c as usize)).collect(),
        }
    }
}

/// The median of a list (nearest rank), or 0 when empty.
pub fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len().div_ceil(2) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_exact() {
        let mut s = Samples::default();
        for v in 1..=1000u64 {
            s.push(v * 10);
        }
        let p = s.percentiles().unwrap();
        assert_eq!((p.samples, p.min, p.p50, p.p90, p.p99, p.p999, p.max), (1000, 10, 5000, 9000, 9900, 9990, 10000));
        assert!(p.exact);
        let mut one = Samples::default();
        one.push(7);
        assert_eq!(one.percentiles().unwrap().p999, 7);
        assert_eq!(median(&mut [5, 1, 3, 2]), 2);
    }

    #[test]
    fn merged_parts_are_the_whole() {
        let values: Vec<u64> = (0..500u64).map(|i| (i * 7919) % 1000 + 1).collect();
        let mut whole = Samples::default();
        values.iter().for_each(|v| whole.push(*v));
        let parts: Vec<Samples> = values
            .chunks(170)
            .map(|c| {
                let mut s = Samples::default();
                c.iter().for_each(|v| s.push(*v));
                s
            })
            .collect();
        let merged = Samples::merged(&parts);
        assert_eq!(merged.percentiles(), whole.percentiles());
        assert_eq!((merged.len(), merged.percentiles().map(|p| p.exact)), (500, Some(true)));
        // A folded part folds the merge, with the buckets the whole would have.
        let folded = Samples::from_buckets(&parts[0].buckets(), parts[0].min, parts[0].max);
        let rest = [folded, parts[1].clone(), parts[2].clone()];
        let m = Samples::merged(&rest);
        assert_eq!((m.percentiles().map(|p| p.exact), m.buckets(), m.len()), (Some(false), whole.buckets(), 500));
        assert_eq!((m.min(), m.percentiles().map(|p| p.max)), (Some(1), Some(1000)));
    }

    #[test]
    fn histogram_within_one_percent() {
        let mut s = Samples::default();
        let mut exact = Vec::new();
        let mut x: u64 = 12345;
        for _ in 0..EXACT_LIMIT + 5000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = 1000 + (x >> 40) % 1_000_000;
            s.push(v);
            exact.push(v);
        }
        exact.sort_unstable();
        let p = s.percentiles().unwrap();
        assert!(!p.exact);
        let n = exact.len() as f64;
        for (q, got) in [(0.5, p.p50), (0.9, p.p90), (0.99, p.p99), (0.999, p.p999)] {
            let want = exact[(q * n).ceil() as usize - 1] as f64;
            assert!((got as f64 - want).abs() / want < 0.01, "p{q}: {got} vs {want}");
        }
    }
}
