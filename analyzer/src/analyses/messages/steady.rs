//! How steady the goodput is: a flow's (a host pair's, the whole capture's) request payload
//! per `--rate-window`, over the windows it was active in, as p5, p50, p95 and the fluctuation
//! 1 − p5/p50. A synchronous job waits for its slowest member, so the low percentile is what
//! it feels. Its first and last windows are partial (it started and stopped within them) and
//! are left out; windows without its data are not "active" and are left out too.

use super::super::stats::{fine_bucket as rate_bucket, fine_bucket_middle as bucket_middle};

/// Window rates in buckets 1/64 of a power of two wide (a bucket's middle is within 0.8 % of
/// every value in it), found with integer operations: a window closes at nearly every data
/// frame of a busy capture, for its flow, its host pair and the whole, and the RTT histogram's
/// logarithm at each was a tenth of the offline run.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// (bucket, windows), sorted by bucket: a flow's rates fall in a few dozen buckets, where
    /// a binary search of a vector beats a tree's nodes.
    counts: Vec<(u16, u64)>,
    n: u64,
    /// The latest windows' bucket and how many in a row fell in it, not yet in `counts`: a
    /// steady flow's windows fall in one bucket, and a sparse flow closes a window at each of
    /// its records, so most pushes touch no memory beyond this struct (the vector's was a cache
    /// miss a record across thousands of flows).
    run_bucket: u16,
    run: u32,
}

impl PartialEq for Rates {
    fn eq(&self, o: &Rates) -> bool {
        self.n == o.n && self.flushed() == o.flushed()
    }
}

impl Eq for Rates {}

impl Rates {
    #[inline]
    pub fn push(&mut self, v: u64) {
        let b = rate_bucket(v);
        self.n += 1;
        if self.run > 0 && self.run_bucket == b && self.run < u32::MAX {
            self.run += 1;
            return;
        }
        Self::add(&mut self.counts, self.run_bucket, self.run as u64);
        (self.run_bucket, self.run) = (b, 1);
    }

    /// `windows` more in bucket `b` of `counts`.
    fn add(counts: &mut Vec<(u16, u64)>, b: u16, windows: u64) {
        if windows == 0 {
            return;
        }
        match counts.binary_search_by_key(&b, |(k, _)| *k) {
            Ok(i) => counts[i].1 += windows,
            Err(i) => counts.insert(i, (b, windows)),
        }
    }

    /// Every window's bucket, the run included.
    fn flushed(&self) -> Vec<(u16, u64)> {
        let mut counts = self.counts.clone();
        Self::add(&mut counts, self.run_bucket, self.run as u64);
        counts
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Windows already bucketed (bucket, windows): a merge's.
    pub fn from_counts(counts: impl IntoIterator<Item = (u16, u64)>) -> Rates {
        let mut r = Rates::default();
        for (b, n) in counts {
            Self::add(&mut r.counts, b, n);
            r.n += n;
        }
        r
    }

    /// Every window's bucket (bucket, windows), by bucket.
    pub fn counts(&self) -> Vec<(u16, u64)> {
        self.flushed()
    }

    /// One more window of `bytes` in a window of `window_ns`.
    pub fn push_window(&mut self, bytes: u64, window_ns: u64) {
        self.push(rate(bytes, window_ns));
    }

    /// The nearest-rank quantile `q` (a bucket's middle).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (b, c) in &self.flushed() {
            seen += c;
            if seen >= rank {
                return Some(bucket_middle(*b));
            }
        }
        None
    }
}

/// The goodput of one key per rate window.
#[derive(Debug, Clone, Default)]
pub struct Windows {
    /// The window being filled and its bytes; whether a window was filled before it (the first
    /// is partial and not counted).
    window: u64,
    bytes: u64,
    seen: u8,
    /// The first window and its bytes, once it closed (`merge` across a cut may count it).
    first: (u64, u64),
    /// Goodput of each full active window (bit/s).
    pub rates: Rates,
    /// `--edges`: the first [`EARLY`] full windows and their bytes, in order (`early` in
    /// [`Ends`]); off without (`keep`).
    keep: bool,
    early: Vec<(u64, u64)>,
}

/// Full windows a key's edge lists with their bytes: where `merge` of captures cut in time
/// finds payload one run counts otherwise just after a cut (PSNs sent again, a flow's first
/// frame its pair gets), whose windows' rate buckets it moves.
pub const EARLY: usize = 16;

/// A key's windows as `merge` of captures cut in time needs them: the first (left out here,
/// partial; in one run over a longer capture it may be whole, or continue the window before
/// the cut), the rates of the full ones, and the one still filling at the end when it is not
/// the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ends {
    pub first: (u64, u64),
    pub counts: Vec<(u16, u64)>,
    pub open: Option<(u64, u64)>,
    /// The first full windows with their bytes, [`EARLY`] at most (all of them when fewer).
    pub early: Vec<(u64, u64)>,
}

impl Windows {
    pub fn new() -> Windows {
        Windows::default()
    }

    /// Windows that keep their first full windows' bytes (`--edges`).
    pub fn with_early() -> Windows {
        Windows { keep: true, ..Windows::default() }
    }

    /// `bytes` of data in window `w` (records a little out of order add to the current one).
    #[inline]
    pub fn add(&mut self, w: u64, bytes: u64, window_ns: u64) {
        if self.seen == 0 {
            (self.window, self.seen) = (w, 1);
        } else if w > self.window {
            self.close(window_ns);
            self.window = w;
        }
        self.bytes += bytes;
    }

    /// Its windows as `merge` across a cut needs them (none before any data).
    pub fn ends(&self) -> Option<Ends> {
        match self.seen {
            0 => None,
            1 => Some(Ends { first: (self.window, self.bytes), counts: Vec::new(), open: None, early: Vec::new() }),
            _ => Some(Ends {
                first: self.first,
                counts: self.rates.counts(),
                open: Some((self.window, self.bytes)),
                early: self.early.clone(),
            }),
        }
    }

    /// The window being filled is over: its goodput counts unless it was the first.
    fn close(&mut self, window_ns: u64) {
        if self.seen == 2 {
            self.rates.push(rate(self.bytes, window_ns));
            if self.keep && self.early.len() < EARLY {
                self.early.push((self.window, self.bytes));
            }
        } else {
            self.first = (self.window, self.bytes);
        }
        self.seen = 2;
        self.bytes = 0;
    }
}

/// Bits per second of `bytes` in a window of `window_ns`.
pub fn rate(bytes: u64, window_ns: u64) -> u64 {
    super::super::stats::mul_div(bytes, 8_000_000_000, window_ns.max(1))
}

/// p5, p50, p95 (bit/s) and the fluctuation of a series of window rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steadiness {
    pub windows: u64,
    pub p5: u64,
    pub p50: u64,
    pub p95: u64,
    pub fluctuation: f64,
}

pub fn steadiness(rates: &Rates) -> Option<Steadiness> {
    let (p5, p50, p95) = (rates.quantile(0.05)?, rates.quantile(0.5)?, rates.quantile(0.95)?);
    let fluctuation = if p50 == 0 { 0.0 } else { 1.0 - p5 as f64 / p50 as f64 };
    Some(Steadiness { windows: rates.len(), p5, p50, p95, fluctuation })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_buckets_are_within_a_percent() {
        for v in [0u64, 1, 63, 64, 65, 1000, 4_000_000_000, 8_000_000_000, 123_456_789_012, u64::MAX / 3] {
            let m = bucket_middle(rate_bucket(v));
            assert!((m as f64 - v as f64).abs() <= v as f64 * 0.008 + 1.0, "{v} → {m}");
        }
        let mut r = Rates::default();
        for v in 1..=100u64 {
            r.push(v * 1_000_000);
        }
        let p50 = r.quantile(0.5).unwrap() as f64;
        assert!((p50 / 50e6 - 1.0).abs() < 0.01, "{p50}");
    }

    /// Runs of one bucket held aside and changes of bucket count every window alike: the same
    /// quantiles as every rate's bucket counted on its own, and equal values compare equal.
    #[test]
    fn runs_of_a_bucket_count_like_single_windows() {
        let values: Vec<u64> = (0..500u64)
            .map(|i| [1_000_000, 1_000_000, 5_000_000, 9_000_000][(i * i % 7 % 4) as usize] + (i % 3))
            .collect();
        let mut r = Rates::default();
        values.iter().for_each(|v| r.push(*v));
        let mut buckets: Vec<u16> = values.iter().map(|v| rate_bucket(*v)).collect();
        buckets.sort_unstable();
        for q in [0.01, 0.05, 0.5, 0.9, 0.95, 1.0] {
            let rank = ((q * buckets.len() as f64).ceil() as usize).clamp(1, buckets.len());
            assert_eq!(r.quantile(q), Some(bucket_middle(buckets[rank - 1])), "q {q}");
        }
        let mut again = Rates::default();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        sorted.iter().for_each(|v| again.push(*v));
        assert_eq!(r, again, "the same windows in another order");
        again.push(1);
        assert_ne!(r, again);
    }

    #[test]
    fn first_and_last_windows_left_out_and_gaps_not_active() {
        let mut w = Windows::new();
        // 10 µs windows: 500 B in the first (partial), then 1000 B a window for 20 windows,
        // two idle windows, 1000 B for 78 more, then 100 B in the last (partial).
        w.add(0, 500, 10_000);
        for i in 1..=20 {
            w.add(i, 1000, 10_000);
        }
        for i in 23..101 {
            w.add(i, 1000, 10_000);
        }
        w.add(101, 100, 10_000);
        let s = steadiness(&w.rates).unwrap();
        // 98 full active windows at 1000 B / 10 µs = 800 Mbit/s each (within the 1 % buckets).
        assert_eq!(s.windows, 98);
        assert!((s.p50 as f64 / 8e8 - 1.0).abs() < 0.01, "{}", s.p50);
        assert!(s.fluctuation.abs() < 1e-9);
    }
}
