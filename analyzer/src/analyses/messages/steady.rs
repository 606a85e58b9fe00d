//! How steady the goodput is: a flow's (a host pair's, the whole capture's) request payload
//! per `--rate-window`, over the windows it was active in, as p5, p50, p95 and the fluctuation
//! 1 − p5/p50. A synchronous job waits for its slowest member, so the low percentile is what
//! it feels. Its first and last windows are partial (it started and stopped within them) and
//! are left out; windows without its data are not "active" and are left out too.

use super::super::stats::Samples;

/// The goodput of one key per rate window.
#[derive(Debug, Clone, Default)]
pub struct Windows {
    /// The window being filled and its bytes; whether a window was filled before it (the first
    /// is partial and not counted).
    window: u64,
    bytes: u64,
    seen: u8,
    /// Goodput of each full active window (bit/s), in the 1 % histogram.
    pub rates: Samples,
}

impl Windows {
    pub fn new() -> Windows {
        Windows { rates: Samples::bucketed(), ..Default::default() }
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

    /// The window being filled is over: its goodput counts unless it was the first.
    fn close(&mut self, window_ns: u64) {
        if self.seen == 2 {
            self.rates.push(rate(self.bytes, window_ns));
        }
        self.seen = 2;
        self.bytes = 0;
    }
}

/// Bits per second of `bytes` in a window of `window_ns`.
pub fn rate(bytes: u64, window_ns: u64) -> u64 {
    (bytes as u128 * 8 * 1_000_000_000 / window_ns.max(1) as u128) as u64
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

pub fn steadiness(rates: &Samples) -> Option<Steadiness> {
    let (p5, p50, p95) = (rates.quantile(0.05)?, rates.quantile(0.5)?, rates.quantile(0.95)?);
    let fluctuation = if p50 == 0 { 0.0 } else { 1.0 - p5 as f64 / p50 as f64 };
    Some(Steadiness { windows: rates.len(), p5, p50, p95, fluctuation })
}

#[cfg(test)]
mod tests {
    use super::*;

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
