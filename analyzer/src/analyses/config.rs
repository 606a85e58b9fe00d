//! Parameters of the analyses (the command line's `--pmtu`, `--rtt-timeout`, …). Their
//! defaults are the constants of [`defaults`], which the command line shows and uses too.

use std::time::Duration;

use super::ecmp::Tier;
use super::topology::Topology;

#[derive(Debug, Clone)]
pub struct Config {
    /// PMTU of flows that have not shown their own (`--pmtu`); 0 learns each flow's.
    pub pmtu: u32,
    pub rtt_timeout_ns: u64,
    /// DSCP expected on RoCE data and on CNPs.
    pub roce_dscp: u8,
    pub cnp_dscp: u8,
    /// A CE mark with no CNP back within this is "unanswered".
    pub cnp_timeout_ns: u64,
    /// The notification point's CNP pacing interval (`--cnp-interval`); inferred when none.
    pub cnp_interval_ns: Option<u64>,
    pub link_speed_bps: u64,
    pub pfc_storm_ns: u64,
    pub deadlock_min_ns: u64,
    pub incast_window_ns: u64,
    pub incast_min_senders: u32,
    pub ecmp_tiers: Vec<Tier>,
    pub topology: Option<Topology>,
    /// Keys (flows, address pairs, destinations) each analysis keeps state for, at most
    /// (`--max-flows`; unbounded offline without it).
    pub max_keys: usize,
    /// Copies of a frame at several vantage points are matched within this (`--match-window`).
    pub match_window_ns: u64,
    /// `--trajectory-sample 1/N`: N, or 0 for none.
    pub trajectory_one_in: u64,
    /// DCQCN: the rate window, the horizon after a CNP, and the recovery time past which
    /// it is slow (`--rate-window`, `--dcqcn-horizon`, `--dcqcn-slow-recovery`).
    pub rate_window_ns: u64,
    pub dcqcn_horizon_ns: u64,
    pub dcqcn_slow_recovery_ns: u64,
    /// `--filter`: the frames analysed (the rest are counted).
    pub filter: Option<crate::frames::filter::FilterSpec>,
    /// Messages: the size classes' upper bounds (`--message-classes`), the tail threshold
    /// (`--tail-threshold`; none: each class's p99), the ring straggler ratio
    /// (`--straggler-ratio`), and the priority of untagged frames by DSCP (`--dscp-priority`).
    pub message_classes: Vec<u64>,
    pub tail_threshold_ns: Option<u64>,
    pub straggler_ratio: f64,
    pub dscp_priority: std::collections::BTreeMap<u8, u8>,
    /// ECN before PFC: marks count for a pause onset within this before it (`--ecn-lead`); a
    /// priority's pause frames per million data frames above `--pfc-rate-max` are too many.
    pub ecn_lead_ns: u64,
    pub pfc_rate_max: f64,
    /// A hop whose fitted Kmin lies below this many bytes marks too early
    /// (`ecn_threshold_low`); None: 150 KB at 400 Gbit/s, scaled to `link_speed_bps`.
    pub kmin_min_bytes: Option<u64>,
}

/// The analyses' defaults: one list for [`Config::default`] and the command line's flags.
pub mod defaults {
    use super::Duration;

    /// 0: each flow's PMTU is learned from its own frames.
    pub const PMTU: u32 = 0;
    pub const RTT_TIMEOUT: Duration = Duration::from_secs(1);
    /// The lossless class RoCE data is expected in (DSCP 26, AF31).
    pub const ROCE_DSCP: u8 = 26;
    /// CNPs are expected in DSCP 48 (CS6).
    pub const CNP_DSCP: u8 = 48;
    pub const CNP_TIMEOUT: Duration = Duration::from_millis(1);
    pub const LINK_SPEED_BPS: u64 = 100_000_000_000;
    pub const PFC_STORM: Duration = Duration::from_millis(100);
    pub const DEADLOCK_MIN: Duration = Duration::from_millis(10);
    pub const INCAST_WINDOW: Duration = Duration::from_micros(100);
    pub const INCAST_MIN_SENDERS: u32 = 4;
    pub const RATE_WINDOW: Duration = Duration::from_micros(10);
    pub const DCQCN_HORIZON: Duration = Duration::from_millis(1);
    pub const DCQCN_SLOW_RECOVERY: Duration = Duration::from_micros(500);
    pub const STRAGGLER_RATIO: f64 = 1.5;
    pub const ECN_LEAD: Duration = Duration::from_micros(100);
    /// Pause frames per million data frames of a priority (0.001 %).
    pub const PFC_RATE_MAX: f64 = 10.0;
    pub const MATCH_WINDOW: Duration = Duration::from_nanos(analyzer_common::vantage::DEFAULT_WINDOW_NS);
}

/// Whole nanoseconds of `d` (saturating).
pub fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pmtu: defaults::PMTU,
            rtt_timeout_ns: nanos(defaults::RTT_TIMEOUT),
            roce_dscp: defaults::ROCE_DSCP,
            cnp_dscp: defaults::CNP_DSCP,
            cnp_timeout_ns: nanos(defaults::CNP_TIMEOUT),
            cnp_interval_ns: None,
            link_speed_bps: defaults::LINK_SPEED_BPS,
            pfc_storm_ns: nanos(defaults::PFC_STORM),
            deadlock_min_ns: nanos(defaults::DEADLOCK_MIN),
            incast_window_ns: nanos(defaults::INCAST_WINDOW),
            incast_min_senders: defaults::INCAST_MIN_SENDERS,
            ecmp_tiers: Vec::new(),
            topology: None,
            max_keys: usize::MAX,
            match_window_ns: nanos(defaults::MATCH_WINDOW),
            trajectory_one_in: 0,
            filter: None,
            rate_window_ns: nanos(defaults::RATE_WINDOW),
            dcqcn_horizon_ns: nanos(defaults::DCQCN_HORIZON),
            dcqcn_slow_recovery_ns: nanos(defaults::DCQCN_SLOW_RECOVERY),
            message_classes: super::messages::dist::DEFAULT_CLASSES.to_vec(),
            tail_threshold_ns: None,
            straggler_ratio: defaults::STRAGGLER_RATIO,
            dscp_priority: Default::default(),
            ecn_lead_ns: nanos(defaults::ECN_LEAD),
            pfc_rate_max: defaults::PFC_RATE_MAX,
            kmin_min_bytes: None,
        }
    }
}

impl Config {
    /// `--kmin-min`, or 150 KB at 400 Gbit/s scaled to the link speed: the low end of the
    /// thresholds that cut false marks at 400 Gbit/s in published tuning (from the 5 KB default
    /// to 150–256 KB: false marks 8.3 % → 1.7 %, throughput +22 %).
    pub fn kmin_min_bytes(&self) -> u64 {
        self.kmin_min_bytes.unwrap_or((150_000u128 * self.link_speed_bps as u128 / 400_000_000_000) as u64)
    }
}
