//! Parameters of the analyses (the command line's `--pmtu`, `--rtt-timeout`, …).

use super::ecmp::Tier;
use super::topology::Topology;

#[derive(Debug, Clone)]
pub struct Config {
    /// PMTU assumed for READ REQUESTs before a path shows its own.
    pub pmtu: u32,
    pub rtt_timeout_ns: u64,
    /// DSCP expected on RoCE data and on CNPs.
    pub roce_dscp: u8,
    pub cnp_dscp: u8,
    /// A CE mark with no CNP back within this is "unanswered".
    pub cnp_timeout_ns: u64,
    pub link_speed_bps: u64,
    pub pfc_storm_ns: u64,
    pub deadlock_min_ns: u64,
    pub incast_window_ns: u64,
    pub incast_min_senders: u32,
    pub ecmp_tiers: Vec<Tier>,
    pub topology: Option<Topology>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pmtu: analyzer_common::psn::DEFAULT_PMTU,
            rtt_timeout_ns: 1_000_000_000,
            roce_dscp: 26,
            cnp_dscp: 48,
            cnp_timeout_ns: 1_000_000,
            link_speed_bps: 100_000_000_000,
            pfc_storm_ns: 100_000_000,
            deadlock_min_ns: 10_000_000,
            incast_window_ns: 100_000,
            incast_min_senders: 4,
            ecmp_tiers: Vec::new(),
            topology: None,
        }
    }
}
