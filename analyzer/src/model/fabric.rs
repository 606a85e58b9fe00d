//! Fabric-wide sections that are not PFC: incast episodes and ECMP balance.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::findings::Finding;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Incast {
    pub window_ns: u64,
    pub min_senders: u32,
    pub episodes: Vec<Episode>,
    /// `--edges`: what `merge` of captures cut in time needs to give the episodes at a cut as
    /// one run does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<IncastEdge>,
}

impl Incast {
    /// A section without an edge.
    pub fn new(window_ns: u64, min_senders: u32, episodes: Vec<Episode>) -> Self {
        Incast { window_ns, min_senders, episodes, edge: None }
    }
}

/// A report's incast edge: each destination's events before `until_ns` (two windows after
/// the first the analysis counted) and its state at `end_ns` (its window's packets, its open
/// episode), and the PFC/PAUSE frames up to `until_ns` (an episode counts those in its span).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncastEdge {
    pub until_ns: u64,
    pub end_ns: u64,
    /// False when the heads were cut at their bound (65 536 events).
    pub complete: bool,
    /// Destinations past the analysis' bound, episodes not kept or listing fewer senders than
    /// they had: episodes `merge` cannot rebuild.
    pub unkept: u64,
    pub pauses: Vec<u64>,
    /// The PFC/PAUSE frames at `end_ns` (an episode the next report begins at that time
    /// counts them).
    pub pauses_at_end: u64,
    pub dests: Vec<IncastEdgeDest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncastEdgeDest {
    pub dst: String,
    /// Its data packets and the CNPs it sent before `until_ns`, in time order.
    pub head: Vec<IncastHeadEvent>,
    /// The data packets in its window at `end_ns`.
    pub window: Vec<IncastWindowed>,
    pub open: Option<IncastOpen>,
}

/// A head event as a JSON array: time, the data packet's source (null: a CNP the destination
/// sent), frame length, CE-marked (1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncastHeadEvent(pub u64, pub Option<String>, pub u32, pub u8);

/// A data packet in a window as a JSON array: time, source, frame length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncastWindowed(pub u64, pub String, pub u32);

/// An episode open at the end of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncastOpen {
    pub start_ns: u64,
    pub peak_senders: u32,
    pub peak_window_bytes: u64,
    pub tally: IncastTally,
    /// Since when its count is below the minimum (it may still come back).
    pub below_since: Option<u64>,
    /// What arrived since then.
    pub pending: IncastTally,
    /// The PFC/PAUSE frames of this report from its start to `below_since` (to the end, when
    /// none), and the times of those after `below_since` (in its span if it comes back).
    pub pfc_frames: u64,
    pub pfc_after: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncastTally {
    pub bytes: u64,
    pub ce: u64,
    pub cnp: u64,
    pub senders: Vec<String>,
    pub capped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub dst: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub peak_senders: u32,
    pub senders: Vec<String>,
    /// Data bytes (frame lengths) to `dst` from the episode's start to its end.
    pub bytes: u64,
    /// Highest data rate into `dst` over one window during the episode.
    pub peak_gbps: f64,
    /// `peak_gbps` over `--link-speed`.
    pub peak_link_ratio: f64,
    pub ce_packets: u64,
    /// CNPs sent back by `dst` during the episode.
    pub cnp_packets: u64,
    pub pfc_frames: u64,
    /// `--evidence`: the pcapng file of the frames behind it, relative to the evidence directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ecmp {
    /// Several labelled captures (one per uplink): their shares.
    pub observed: Option<EcmpObserved>,
    /// `--ecmp-tier`: where the hash sends each flow.
    pub predicted: Option<EcmpPredicted>,
    pub distinct_sports: u64,
    pub sport_entropy_bits: f64,
    pub host_pairs: Vec<HostPair>,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EcmpObserved {
    pub by_label: BTreeMap<String, LabelShare>,
    /// max / mean of bytes over the labels.
    pub imbalance: f64,
    pub idle: Vec<String>,
    pub multi_label_flows: u64,
    /// Labelled inputs left out of the uplinks: their frames are copies of another input's
    /// (vantage points in series, a leaf and a spine), not a parallel path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_series: Vec<InSeries>,
}

/// An input in series with an uplink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InSeries {
    pub label: String,
    /// The uplink whose frames it also saw.
    pub with: String,
    /// Frames both saw.
    pub copies: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelShare {
    pub bytes: u64,
    pub flows: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EcmpPredicted {
    pub tiers: Vec<TierJson>,
    pub combinations_used: u64,
    pub combinations_total: u64,
    /// Combinations independent uniform hashing would use for as many flows, on average.
    #[serde(default)]
    pub combinations_expected: f64,
    /// Fewer combinations used than independent hashing would (by more than four standard
    /// deviations).
    pub polarized: bool,
    /// Per pair of tiers: how the flows of each earlier branch spread over the later tier.
    #[serde(default)]
    pub pairs: Vec<TierPairJson>,
}

/// One pair of tiers (0-based, in path order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierPairJson {
    pub earlier: u32,
    pub later: u32,
    /// Fewest later-tier members the flows of one earlier branch use.
    pub members_min: u32,
    /// Later-tier members used per earlier branch, on average.
    pub members_mean: f64,
    /// The later tier's capacity the branches leave idle (1 - mean / fan-out).
    pub idle_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierJson {
    pub hash: String,
    pub fanout: u32,
    pub seed: u32,
    pub shift: u32,
    pub per_path: Vec<LabelShare>,
    pub imbalance: f64,
    /// Paths no flow takes.
    pub idle: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPair {
    pub a: String,
    pub b: String,
    pub flows: u64,
    pub distinct_sports: u64,
}
