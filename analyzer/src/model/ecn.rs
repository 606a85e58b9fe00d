//! ECN and its congestion control: CE marks and CNPs per pair, CNP pacing, the marking over time, DCQCN reactions.

use serde::{Deserialize, Serialize};
/// Data frames and CE marks over time per traffic class (DSCP), from the first CE mark: the
/// CE fraction of each point is `ce / frames`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marking {
    pub classes: Vec<MarkingClass>,
    /// The same per outer VLAN PCP (the PFC priority; `pcp` null: untagged frames).
    #[serde(default)]
    pub priorities: Vec<MarkingPriority>,
    /// `--edges`: what `merge` needs of a capture cut in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<MarkingEdge>,
}

/// `marking.edge`: the data frames before this report's first CE mark (every one when it has
/// none), which one run over the whole counts when an earlier capture had the first mark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkingEdge {
    /// The time of this report's first CE-marked data frame (null: none).
    pub first_mark_ns: Option<u64>,
    pub classes: Vec<MarkingClass>,
    pub priorities: Vec<MarkingPriority>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkingPriority {
    pub pcp: Option<u8>,
    #[serde(flatten)]
    pub series: MarkingSeries,
}

/// Frames and CE marks per point of `point_ns` from `start_ns` (a multiple of `point_ns`: the
/// points of every report of one run's rate window line up).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MarkingSeries {
    pub start_ns: u64,
    pub point_ns: u64,
    pub frames: Vec<u64>,
    pub ce: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkingClass {
    pub dscp: u8,
    #[serde(flatten)]
    pub series: MarkingSeries,
}

/// How senders reacted to the CNPs they were sent, per flow and per sender host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dcqcn {
    pub rate_window_ns: u64,
    pub horizon_ns: u64,
    /// CNPs no single watched data flow could take (several flows between the two hosts and
    /// no ACK pairing, or none watched).
    pub unattributed_cnps: u64,
    pub flows: Vec<DcqcnFlow>,
    pub hosts: Vec<DcqcnHost>,
    /// Rate series of a few flows for the HTML plot: those the DCQCN findings name first,
    /// then those with the most CNPs.
    #[serde(default)]
    pub plots: Vec<DcqcnPlot>,
    /// `--edges`: what `merge` of captures cut in time needs to judge CNPs near a cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<DcqcnEdge>,
}

/// A report's DCQCN edge: its span in rate windows, the settings its findings used, and every
/// data flow's windows near its ends, frames and CNPs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnEdge {
    pub first_window: u64,
    pub last_window: u64,
    /// `--dcqcn-slow-recovery` and `--cnp-interval` (null: not given).
    pub slow_recovery_ns: u64,
    pub cnp_interval_ns: Option<u64>,
    /// Flows the analysis could not keep at its bound, and data flows the edge could not.
    pub state_full: u64,
    pub flows_over: u64,
    pub flows: Vec<DcqcnEdgeFlow>,
    /// The CNPs no flow could take (the first 1024; `unattributed_over` more).
    #[serde(default)]
    pub unattributed: Vec<DcqcnStray>,
    #[serde(default)]
    pub unattributed_over: u64,
}

/// An unattributed CNP, as a JSON array: the data sender it went to, the receiver that sent it,
/// the sender's QP, its time, and whether several flows between them were watched (else none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcqcnStray(pub String, pub String, pub u32, pub u64, pub bool);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnEdgeFlow {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
    /// It carries requests (its first CNPs are judged on the windows before its watch).
    pub request: bool,
    /// When this report began to watch it (its first CE mark or CNP here); null: not watched.
    pub watched_ns: Option<u64>,
    /// Its CNPs here in time order, with their outcome here.
    pub cnps: Vec<DcqcnEdgeCnp>,
    /// Its windows with data frames, `[window, bytes]`, within reach of the report's ends.
    pub windows: Vec<[u64; 2]>,
    /// Its every data frame here; its series from its watch on (when it kept one).
    pub all: Option<DcqcnSeries>,
    pub series: Option<DcqcnSeries>,
}

/// A CNP in a report's edge, as a JSON array (a storm has thousands): its time, whether it
/// was attributed as the one watched flow between its hosts (no ACK pairing told it), and its
/// outcome there: cut ratio in millionths (null: no rate before it), reaction and recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnEdgeCnp(pub u64, pub bool, pub Option<u64>, pub Option<u64>, pub Option<u64>);

impl DcqcnEdgeCnp {
    pub fn ns(&self) -> u64 {
        self.0
    }
    pub fn by_hosts(&self) -> bool {
        self.1
    }
}

/// A rate series: bytes, data frames and CE-marked ones per point of `point_ns` from `start_ns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnSeries {
    pub start_ns: u64,
    pub point_ns: u64,
    pub bytes: Vec<u64>,
    pub frames: Vec<u64>,
    pub ce: Vec<u64>,
}

/// A flow's rate over its watched time: bytes and CE marks per point of `point_ns`, from
/// `start_ns`, and its CNPs' times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnPlot {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
    pub start_ns: u64,
    pub point_ns: u64,
    pub bytes: Vec<u64>,
    /// Data frames per point, and those CE-marked (the flow's CE fraction over time).
    pub frames: Vec<u64>,
    pub ce: Vec<u64>,
    pub cnps_ns: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnFlow {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
    #[serde(flatten)]
    pub stats: DcqcnStats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnHost {
    pub src: String,
    pub flows: u64,
    #[serde(flatten)]
    pub stats: DcqcnStats,
}

/// CNPs and the reaction to them: counts, and medians and worst over the CNPs judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnStats {
    pub cnps: u64,
    /// Followed by a window below 90 % of the rate before, within the horizon.
    pub reacted: u64,
    pub unreacted_cnps: u64,
    /// CNPs with no steady rate before them (not judged: not watched yet, or a window without
    /// data among the 5 before).
    pub no_rate_before: u64,
    /// Reacted, and not back at 90 % of the rate before within the horizon.
    pub not_recovered: u64,
    /// Lowest rate after / rate before (0.5 is a halving); null when none was judged.
    pub cut_ratio_p50: Option<f64>,
    pub worst_cut_ratio: Option<f64>,
    pub reaction_ns_p50: Option<u64>,
    pub recovery_ns_p50: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// Sender of the data, receiver of the CNPs.
    pub a: String,
    pub b: String,
    pub data_packets: u64,
    /// CE-marked data packets a → b.
    pub ce: u64,
    /// CNPs b → a.
    pub cnp_back: u64,
    /// CE marks with no CNP back within `--cnp-timeout`, and not covered by a CNP's pacing.
    pub ce_unanswered: u64,
    /// CE marks with no CNP of their own that came within the CNP pacing interval after one
    /// (the notification point sends at most one per interval).
    #[serde(default)]
    pub ce_covered: u64,
    /// CE marks within `--cnp-timeout` of the capture's end with no CNP back yet: undecided,
    /// neither answered nor unanswered (ce = answered + unanswered + covered + pending).
    #[serde(default)]
    pub ce_pending: u64,
    /// `--edges` (a pair with CE marks or CNPs): what `merge` of captures cut in time needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<PairEdge>,
}

/// `pairs[].edge`: the pair's marks and CNPs in time, so that `merge` answers a mark waiting at
/// the end of one capture with the next one's first CNP, gives the first marks of the next the
/// distance to this one's last CNP, and judges every distance by the whole's pacing interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairEdge {
    /// `--cnp-timeout` of the run.
    pub timeout_ns: u64,
    /// Marks that got no CNP within the timeout (before the end).
    pub unanswered: u64,
    /// Of those, the time since the CNP before each (those within 10 ms).
    pub after_cnp_ns: Vec<u64>,
    /// Of those, the times of the marks with no CNP before them in this capture.
    pub first_ns: Vec<u64>,
    /// Marks still waiting for a CNP at the end: [time, time since the CNP before or null].
    pub waiting: Vec<(u64, Option<u64>)>,
    pub first_cnp_ns: Option<u64>,
    pub last_cnp_ns: Option<u64>,
}

/// The CNP pacing interval the audit used: `source` is `inferred` (the smallest CNP gap of a
/// QP with at least 3 CNPs), `given` (`--cnp-interval`) or `none` (`ns` 0: too few CNPs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CnpInterval {
    pub ns: u64,
    pub source: String,
}

impl Default for CnpInterval {
    fn default() -> Self {
        CnpInterval { ns: 0, source: "none".into() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CnpPacing {
    /// The notified (data-sending) address and QP.
    pub dst: String,
    pub dst_qp: u32,
    pub cnps: u64,
    pub min_gap_ns: u64,
    pub median_gap_ns: u64,
    /// `--edges`: the QP's CNPs in time, so that `merge` counts the gap across a cut and takes
    /// the median of every gap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<PacingEdge>,
}

/// `cnp_pacing[].edge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacingEdge {
    pub first_ns: u64,
    pub last_ns: u64,
    /// Every gap between consecutive CNPs, in order.
    pub gaps_ns: Vec<u64>,
}
