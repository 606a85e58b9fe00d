//! Completion-time distributions: per size class, per flow, per host pair. Each keeps the
//! completion times (exact up to the RTT's bound, then its mergeable 1 % histogram), the
//! goodput and the slowdown of its messages.

use super::super::stats::{Samples, mul_div, mul_div_ceil};

/// The default bounds of the size classes (bytes): ≤ 4 KiB, ≤ 64 KiB, ≤ 1 MiB, larger.
pub const DEFAULT_CLASSES: [u64; 3] = [4 << 10, 64 << 10, 1 << 20];

/// Slowdowns are kept in thousandths.
pub const SLOWDOWN_SCALE: f64 = 1000.0;

/// One completed message's numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Done {
    pub mct_ns: u64,
    pub bytes: u64,
    /// Bits per second (none when it took no time at this resolution).
    pub goodput_bps: Option<u64>,
    /// MCT over the ideal, in thousandths (none without a link speed and an RTT).
    pub slowdown_milli: Option<u64>,
}

impl Done {
    /// The numbers of a message of `bytes` completed in `mct_ns`, on a link of `link_bps`, with
    /// the host pair's smallest RTT `min_rtt_ns`: ideal = serialisation + that RTT.
    pub fn new(mct_ns: u64, bytes: u64, link_bps: u64, min_rtt_ns: Option<u64>) -> Done {
        let goodput_bps = (mct_ns > 0).then(|| super::steady::rate(bytes, mct_ns));
        let serial_ns = mul_div_ceil(bytes, 8_000_000_000, link_bps.max(1));
        let slowdown_milli =
            min_rtt_ns.map(|rtt| serial_ns + rtt).filter(|ideal| *ideal > 0).map(|ideal| mul_div(mct_ns, 1000, ideal));
        Done { mct_ns, bytes, goodput_bps, slowdown_milli }
    }
}

/// The messages of a class, a flow or a host pair.
#[derive(Debug, Clone, Default)]
pub struct Dist {
    pub mct: Samples,
    pub goodput: Samples,
    pub slowdown: Samples,
    pub bytes: u64,
}

impl Dist {
    pub fn add(&mut self, d: &Done) {
        self.mct.push(d.mct_ns);
        self.bytes += d.bytes;
        if let Some(g) = d.goodput_bps {
            self.goodput.push(g);
        }
        if let Some(s) = d.slowdown_milli {
            self.slowdown.push(s);
        }
    }

    pub fn absorb(&mut self, o: &Dist) {
        self.mct.extend(&o.mct);
        self.goodput.extend(&o.goodput);
        self.slowdown.extend(&o.slowdown);
        self.bytes += o.bytes;
    }
}

/// The size class of `bytes` given the classes' upper bounds (ascending): its index, the last
/// being "larger than every bound".
pub fn class_of(bounds: &[u64], bytes: u64) -> usize {
    bounds.iter().position(|b| bytes <= *b).unwrap_or(bounds.len())
}

/// A byte count as a class label's unit: `4KiB`, `1MiB`, `1500B`.
pub fn size_label(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// The label of class `i` (ASCII, for JSON and Prometheus): `le_4KiB` … `gt_1MiB`.
pub fn class_label(bounds: &[u64], i: usize) -> String {
    match bounds.get(i) {
        Some(b) => format!("le_{}", size_label(*b)),
        None => format!("gt_{}", size_label(bounds.last().copied().unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_numbers_by_hand() {
        let b = DEFAULT_CLASSES;
        assert_eq!(
            [
                class_of(&b, 1),
                class_of(&b, 4096),
                class_of(&b, 4097),
                class_of(&b, 1 << 20),
                class_of(&b, (1 << 20) + 1)
            ],
            [0, 0, 1, 2, 3]
        );
        assert_eq!((class_label(&b, 0), class_label(&b, 3)), ("le_4KiB".to_string(), "gt_1MiB".to_string()));
        // 1 MB at 100 Gbit/s: 80 µs on the wire; with a 10 µs RTT the ideal is 90 µs. Done in
        // 180 µs: slowdown 2.0, goodput 1e6 × 8 / 180 µs = 44.4 Gbit/s.
        let d = Done::new(180_000, 1_000_000, 100_000_000_000, Some(10_000));
        assert_eq!((d.slowdown_milli, d.goodput_bps), (Some(2000), Some(44_444_444_444)));
        assert_eq!(Done::new(0, 10, 1, None).goodput_bps, None);
    }
}
