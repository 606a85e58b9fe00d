//! `load_balancing`: per-flow hashing or packet spraying, and the reordering it brings.

use serde::{Deserialize, Serialize};

use super::flow::FlowRef;

/// How the fabric spread the request flows seen here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LbMode {
    /// Every flow kept one path (ECMP hashing per flow: the polarization analyses apply).
    PerFlow,
    /// Every flow was spread over several paths.
    Sprayed,
    /// Some were, some were not.
    Mixed,
}

impl LbMode {
    /// The mode of `sprayed` flows of `flows`.
    pub fn of(sprayed: u64, flows: u64) -> LbMode {
        match sprayed {
            0 => LbMode::PerFlow,
            n if n >= flows => LbMode::Sprayed,
            _ => LbMode::Mixed,
        }
    }
}

/// What a flow's spreading was judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LbBasis {
    /// Labelled inputs in parallel (uplinks): a flow on several of them was sprayed.
    Uplinks,
    /// No uplinks known: a flow whose requests arrived reordered (not resent) was spread.
    Reordering,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancing {
    pub mode: LbMode,
    pub basis: LbBasis,
    /// The labels taken as uplinks (inputs in parallel; those in series left out).
    pub uplinks: Vec<String>,
    /// Request flows of at least two requests (one request cannot be spread).
    pub flows: u64,
    pub sprayed_flows: u64,
    pub reorder: ReorderStats,
    /// The sprayed flows, most reordered first (the first [`SPRAYED_LISTED`]).
    pub sprayed: Vec<SprayedFlow>,
    #[serde(default, skip_serializing_if = "super::skip::is_zero")]
    pub sprayed_omitted: u64,
}

/// How many sprayed flows the section lists.
pub const SPRAYED_LISTED: usize = 20;

/// Reordering over the request flows: RFC 5236's reorder density in counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReorderStats {
    /// Requests of the flows counted.
    pub packets: u64,
    /// Of them, those that arrived late (not retransmissions).
    pub reordered: u64,
    /// reordered / packets.
    pub ratio: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub displacement_p50: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub displacement_max: Option<u32>,
    /// Late arrivals by displacement (later PSNs that came before them), ascending.
    pub density: Vec<DensityBin>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DensityBin {
    pub displacement: u32,
    pub packets: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SprayedFlow {
    #[serde(flatten)]
    pub flow: FlowRef,
    /// Uplinks it was seen on (basis `uplinks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplinks: Option<u32>,
    pub requests: u64,
    pub reordered: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub displacement_p50: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub displacement_max: Option<u32>,
    /// PSN-sequence NAKs its receiver sent (it did not place out of order).
    pub psn_sequence_naks: u64,
}
