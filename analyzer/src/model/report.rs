//! The document: its schema name, the tool, the capture and its sources, and the sections.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ecn::{CnpInterval, CnpPacing, Dcqcn, Marking, Pair};
use super::evidence::Evidence;
use super::fabric::{Ecmp, Incast};
use super::findings::{Finding, Note};
use super::flow::{Flow, RttSummary};
use super::nic::Nic;
use super::pfc::{CongestionTrees, Pfc};
use super::skip::is_zero;
use super::vantage::Vantage;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    /// "offline", "live", or "merged" (several reports combined by `roce-analyzer merge`).
    pub kind: String,
    /// What matters most, ranked, with where and what to do (`report::diagnose`).
    #[serde(default)]
    pub diagnosis: Vec<super::findings::Diagnosis>,
    pub capture: Capture,
    pub flows: Vec<Flow>,
    pub pfc: Pfc,
    /// What this vantage point could not see, and why.
    pub visibility: Vec<Note>,
    /// Live with `--nic-counters`: the NIC's own counters over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<Nic>,
    /// RTT over all flows.
    #[serde(default)]
    pub rtt_ns: RttSummary,
    /// Per direction of an IP pair: data and CE marks one way, CNPs the other.
    #[serde(default)]
    pub pairs: Vec<Pair>,
    /// CNPs per notified QP and their spacing.
    #[serde(default)]
    pub cnp_pacing: Vec<CnpPacing>,
    /// The CNP pacing interval behind `pairs[].ce_covered`.
    #[serde(default)]
    pub cnp_interval: CnpInterval,
    /// Findings of the transport audit (ECN, DSCP, CNP, PSN/NAK patterns).
    #[serde(default)]
    pub audit: Vec<Finding>,
    #[serde(default)]
    pub congestion_tree: CongestionTrees,
    #[serde(default)]
    pub incast: Incast,
    #[serde(default)]
    pub ecmp: Ecmp,
    /// Several vantage points: each point's frames, and per hop (ordered pair of points) the
    /// frames matched, missing, CE-marked between, and their latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vantage: Option<Vantage>,
    /// Senders' reaction to CNPs (DCQCN), when any CNP was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcqcn: Option<Dcqcn>,
    /// CE marking over time per traffic class, when any data frame was CE-marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marking: Option<Marking>,
    /// Messages and their completion times, the tail explained, steadiness and rings, when any
    /// message was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<super::messages::Messages>,
    /// Per-flow hashing or spraying, and the reordering it brought (request flows of two
    /// requests or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancing: Option<super::load_balancing::LoadBalancing>,
    /// `--evidence`: the pcapng files written, one per finding, episode, storm and deadlock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// `--export`: the lines written, and those given up (a full disk, a removed directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<ExportStats>,
    /// Outputs that could not be written while the others were (exit code 3): each said once
    /// on standard error with the OS error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_failures: Vec<OutputFailure>,
    /// `merge` over exports with trajectory samples: the hops between the collectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<super::vantage::Trajectory>,
    /// A report rebuilt from an export: the collector's trajectory samples, for `merge` to
    /// join (never written).
    #[serde(skip)]
    pub samples: Option<super::vantage::TrajectorySamples>,
    /// A report rebuilt from an export: which agent and intervals it holds (in memory only:
    /// `merge` refuses the same export given twice, a copy included).
    #[serde(skip)]
    pub export_identity: Option<String>,
}

/// What `--export` wrote and gave up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportStats {
    /// Lines written whole.
    pub lines: u64,
    /// Lines given up: none is ever cut; a line the file system refused is removed whole.
    pub dropped: u64,
    /// Files closed because they were full (`--export-max-bytes`), and deleted to keep
    /// `--export-keep`.
    pub rotations: u64,
    pub deleted: u64,
    /// File names skipped because something already had them: a link planted there is
    /// neither followed nor overwritten.
    pub skipped: u64,
    /// `--export-clickhouse`: rows inserted and given up (its dropped rows are in `dropped`
    /// too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clickhouse: Option<ClickhouseStats>,
}

/// What the ClickHouse sender did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClickhouseStats {
    /// Rows (export lines) inserted.
    pub inserted: u64,
    /// Rows given up: the buffer was full, or the run ended while the server was away.
    pub dropped: u64,
    /// Inserts tried again after a failure.
    pub retries: u64,
    /// The most bytes of rows that waited at once (within `--export-buffer`).
    pub buffered_max_bytes: u64,
}

/// An output that failed: which (`--json`, `--export`, `--evidence`, …) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputFailure {
    pub output: String,
    pub error: String,
}

/// The schema every report names; v1 is a contract: later versions add sections, never rename fields.
pub const SCHEMA: &str = "roce-analyzer/report/v1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    pub sources: Vec<SourceJson>,
    /// `--filter`, when given: the frames analysed; `frames` and `classes` count those only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<CaptureFilter>,
    /// Live: idle flows folded into one aggregate to bound memory (they are not in `flows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows_folded: Option<FoldedFlows>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// True when an input ended early (truncated file): the report covers what came before.
    pub partial: bool,
    pub frames: u64,
    /// Frames by class: roce, cnp, pfc, pause, non_roce and the malformed kinds.
    pub classes: BTreeMap<String, u64>,
    /// Frames or records lost before analysis, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Frames this capture did not hold though the network delivered them (RC PSNs skipped here
    /// that a later ACK covered, with no NAK and no retransmission), when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<CaptureLoss>,
    /// How the frames were cut and copied on their way to the capture: the counts behind the
    /// notes `bth_cut`, `snap_cut`, `cut_copies`, `mirrored`, `matched_copies` and
    /// `sightings_evicted`, kept here so that a merge tells those notes over all its reports.
    #[serde(default, skip_serializing_if = "Noted::is_empty")]
    pub noted: Noted,
}

/// Frames counted in the capture's visibility notes (absent when all are 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Noted {
    /// RoCE frames cut before the end of their BTH (offline; live, the kernel counts them as
    /// `truncated_header` only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bth_cut: u64,
    /// The most bytes one of those frames needed kept (0: not known, the headers up to the BTH).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bth_needs: u64,
    /// RoCE frames cut by the snap length before their extended headers.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ext_cut: u64,
    /// Copies cut short, counted at the length their IP header states.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_copies: u64,
    /// Mirrored copies (GRE/ERSPAN) analysed as their inner frame.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mirrored: u64,
    /// Copies of a frame seen at another vantage point, counted once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub matched_copies: u64,
    /// Live: sightings the kernel gave up within the match window.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sightings_evicted: u64,
}

impl Noted {
    pub fn is_empty(&self) -> bool {
        *self == Noted::default()
    }

    /// Two reports' counts as one run over both would have them: summed, the largest need.
    pub fn add(&mut self, o: &Noted) {
        self.bth_cut = self.bth_cut.saturating_add(o.bth_cut);
        self.bth_needs = self.bth_needs.max(o.bth_needs);
        self.ext_cut = self.ext_cut.saturating_add(o.ext_cut);
        self.cut_copies = self.cut_copies.saturating_add(o.cut_copies);
        self.mirrored = self.mirrored.saturating_add(o.mirrored);
        self.matched_copies = self.matched_copies.saturating_add(o.matched_copies);
        self.sightings_evicted = self.sightings_evicted.saturating_add(o.sightings_evicted);
    }
}

/// The capture's own loss: frames delivered but not held.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CaptureLoss {
    pub frames_missed: u64,
    /// Of the RoCE frames there were (held and missed).
    pub ratio: f64,
}

/// Flows folded into one aggregate: how many, and their packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldedFlows {
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
}

/// The `--filter` of a run and the frames it left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureFilter {
    pub expr: String,
    /// Frames left out (counted here, in no other count).
    pub frames_out: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceJson {
    pub kind: String,
    pub name: String,
    pub label: String,
    /// Live: how the XDP program is attached to the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpJson>,
}

/// How the XDP program runs on a live interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpJson {
    /// "native" (in the driver) or "skb" (generic XDP).
    pub mode: String,
    /// The multi-buffer (`xdp.frags`) program, or (false) the single-buffer one.
    pub frags: bool,
    /// Why an `auto` choice fell back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}
