//! `evidence`: the pcapng files written for findings, episodes, storms and deadlocks.

use serde::{Deserialize, Serialize};

use super::skip::is_zero;

/// The evidence files of a run (`--evidence DIR`) and what they could not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub dir: String,
    /// Bytes of each frame kept (`--evidence-snaplen`).
    pub snaplen: u32,
    /// Frames per file, at most (`--evidence-max`).
    pub max_frames: u64,
    /// Frames before and after a finding's span that its file takes too.
    pub margin_ns: u64,
    pub files: Vec<EvidenceFile>,
    /// Live: frames the kernel could not copy (its evidence ring was full).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ring_full: u64,
    /// Files that could not be written, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceFile {
    /// Relative to `dir`.
    pub file: String,
    /// What it shows: the finding's code, an episode, a storm, a deadlock.
    pub about: String,
    /// Its span: frames of the named flows (or PFC senders) from `start_ns` to `end_ns`.
    pub start_ns: u64,
    pub end_ns: u64,
    pub frames: u64,
    /// Frames that matched past `max_frames` (not written).
    pub left_out: u64,
}
