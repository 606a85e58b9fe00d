//! `audit[]` findings and `visibility[]` notes (their codes are in `codes`).

use serde::{Deserialize, Serialize};

use super::codes::{FindingCode, NoteCode, Severity};
use super::flow::FlowRef;
use super::skip::is_zero;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    /// Stable identifier.
    pub code: FindingCode,
    pub message: String,
    /// The flows concerned, in order (the first [`MAX_LISTED_FLOWS`]).
    pub flows: Vec<FlowRef>,
    /// Flows concerned past [`MAX_LISTED_FLOWS`], counted, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flows_omitted: u64,
    /// `--evidence`: the pcapng file of the frames behind it, relative to the evidence directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// Flows a finding or a tree lists, at most (the rest are counted in `flows_omitted`).
pub const MAX_LISTED_FLOWS: usize = 1000;

/// Keeps the first [`MAX_LISTED_FLOWS`] of `flows`; returns how many it left out.
pub fn cap_flows(flows: &mut Vec<FlowRef>) -> u64 {
    let omitted = flows.len().saturating_sub(MAX_LISTED_FLOWS) as u64;
    flows.truncate(MAX_LISTED_FLOWS);
    omitted
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// Stable identifier, e.g. `no_roce`, `no_pfc`, `one_direction`.
    pub code: NoteCode,
    pub message: String,
}

impl Finding {
    /// A finding over `flows` (sorted, without repeats).
    pub fn new(severity: Severity, code: FindingCode, message: String, mut flows: Vec<FlowRef>) -> Finding {
        flows.sort();
        flows.dedup();
        let flows_omitted = cap_flows(&mut flows);
        Finding { severity, code, message, flows, flows_omitted, evidence: None }
    }
}

impl Note {
    pub fn new(code: NoteCode, message: impl Into<String>) -> Note {
        Note { code, message: message.into() }
    }
}

/// One entry of the diagnosis the summary and the page open with: what is wrong, where, and
/// what to check or change (`report::diagnose` ranks them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub severity: Severity,
    /// The finding's or note's code, or `pfc_storm`, `pfc_deadlock`, `incast`.
    pub code: String,
    pub what: String,
    /// The flows (src → dst QP) or the devices and ports concerned.
    #[serde(rename = "where")]
    pub place: String,
    pub advice: String,
}
