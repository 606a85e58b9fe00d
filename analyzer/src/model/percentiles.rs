//! Percentiles of a sample set (RTT, hop latency, DCQCN gaps), the one summary every section uses.

use serde::{Deserialize, Serialize};
/// Summary of a sample set, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Percentiles {
    pub samples: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    /// False when the percentiles come from the 1% histogram (more than 2^20 samples).
    pub exact: bool,
}

impl Percentiles {
    /// min, p50, p90, p99, p99.9 and max, in that order (for tables).
    pub fn ladder(&self) -> [u64; 6] {
        [self.min, self.p50, self.p90, self.p99, self.p999, self.max]
    }
}
