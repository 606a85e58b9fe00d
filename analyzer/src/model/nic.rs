//! `nic`: the NIC's own counters (live, `--nic-counters`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
/// NIC counters, as increments over the run (end − start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nic {
    /// RDMA ports of the interface: hw_counters and counters from sysfs.
    pub rdma: Vec<NicPort>,
    /// The interface's driver statistics (ethtool), e.g. per-priority pause frames.
    pub netdev: NicNetdev,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicPort {
    pub device: String,
    pub port: String,
    pub counters: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicNetdev {
    pub name: String,
    pub counters: BTreeMap<String, u64>,
    /// Why the statistics could not be read, if they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
