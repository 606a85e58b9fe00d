//! The export's lines (schema `roce-analyzer/export/v1`): what each kind of line holds. The
//! exporter ([`super::Exporter`]) writes them, [`super::read`] reads them back, and
//! [`super::clickhouse`] turns them into table rows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::*;

/// The schema name and version of every export line.
pub const EXPORT_SCHEMA: &str = "roce-analyzer/export/v1";
/// The JSON Schema of export lines, shipped beside the report's.
pub const EXPORT_SCHEMA_JSON: &str = include_str!("../../../../schema/export-v1.schema.json");

/// One export line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Line {
    pub schema: String,
    /// The host that wrote it (its hostname).
    pub host: String,
    /// The interval it belongs to, from 0 at the agent's start.
    pub seq: u64,
    #[serde(flatten)]
    pub body: Body,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Body {
    Interval(IntervalLine),
    Flow(Box<FlowLine>),
    Pfc(PfcLine),
    /// A PFC storm that ended.
    Storm {
        storm: StormJson,
    },
    /// An incast episode that ended.
    IncastEpisode {
        episode: Episode,
    },
    /// A pause cycle that ended.
    Deadlock {
        deadlock: Deadlock,
    },
    LossBetween(LossLine),
    /// The messages section as it stands at the interval's end (cumulative), without its
    /// per-flow and per-pair lists (those grow with the flows; the report has them).
    Messages {
        messages: Box<Messages>,
    },
    /// A host pair's messages at the interval's end (cumulative: the report's entry of
    /// `messages.pairs`), written when its completed messages changed since the last one: the
    /// fleet's completion times per host pair, without a line per pair and interval.
    MessagePair {
        pair: MessagePair,
    },
    /// Trajectory samples taken in the interval (`--trajectory-sample`), as columns.
    Samples(SamplesLine),
    /// A finding: `state` is `raised` when first seen, `final` at the end of the run when it
    /// changed since, `cleared` when a later interval no longer finds it (a PSN gap that
    /// turned out to be go-back-N).
    Finding {
        /// The finding's identity across lines: its code, flows, and its rank among findings
        /// with both the same (two hops losing the same flow's frames).
        id: String,
        state: String,
        finding: Finding,
    },
}

/// Closes an interval: the capture's totals at its end and what changed in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalLine {
    /// `live` or `offline`.
    pub kind: String,
    pub tool: Tool,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The run's last interval (written when it stopped).
    #[serde(rename = "final")]
    pub last: bool,
    pub delta: CaptureDelta,
    /// The report's `capture` section at the end of the interval.
    pub capture: Capture,
    pub link_speed_bps: u64,
    pub incast_window_ns: u64,
    pub incast_min_senders: u32,
    /// The other lines of this interval.
    pub lines: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CaptureDelta {
    pub frames: u64,
    pub classes: BTreeMap<String, u64>,
    pub dropped: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowLine {
    pub delta: FlowDelta,
    /// The flow as the report's `flows` lists it, at the end of the interval.
    pub total: Flow,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowDelta {
    pub packets: u64,
    pub bytes: u64,
    pub ce: u64,
    pub ack_req: u64,
    pub fecn: u64,
    pub becn: u64,
    /// RTT samples taken (on this flow's requests).
    pub rtt_samples: u64,
}

impl FlowDelta {
    pub(super) fn of(f: &Flow) -> FlowDelta {
        FlowDelta {
            packets: f.packets,
            bytes: f.bytes,
            ce: f.ecn.ce,
            ack_req: f.ack_req,
            fecn: f.fecn,
            becn: f.becn,
            rtt_samples: f.rtt_ns.as_ref().map_or(0, |r| r.percentiles.samples),
        }
    }

    pub(super) fn since(self, before: FlowDelta) -> FlowDelta {
        FlowDelta {
            packets: self.packets.saturating_sub(before.packets),
            bytes: self.bytes.saturating_sub(before.bytes),
            ce: self.ce.saturating_sub(before.ce),
            ack_req: self.ack_req.saturating_sub(before.ack_req),
            fecn: self.fecn.saturating_sub(before.fecn),
            becn: self.becn.saturating_sub(before.becn),
            rtt_samples: self.rtt_samples.saturating_sub(before.rtt_samples),
        }
    }
}

/// A PFC sender and priority (8: an 802.3x PAUSE sender, all priorities).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PfcLine {
    pub mac: String,
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub port: Option<String>,
    pub priority: u8,
    pub delta: PfcDelta,
    #[serde(flatten)]
    pub counts: PauseCounts,
    pub paused_ns: u64,
    /// Paused intervals [start_ns, end_ns) that ended since the sender's previous line (a
    /// reader joins them on time).
    pub intervals: Vec<[u64; 2]>,
    /// ECN before PFC so far (the report's `pfc.senders[].ecn_lead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_lead: Option<EcnLead>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PfcDelta {
    pub frames: u64,
    pub paused_ns: u64,
}

/// Frames seen at `from` that did not reach `to` in the interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LossLine {
    pub from: String,
    pub to: String,
    pub frames_missing: u64,
    pub frames_missing_total: u64,
    pub frames_matched_total: u64,
}

/// The frames sampled in an interval (`--trajectory-sample 1/one_in`): the i-th sample is
/// (`id[i]`, `ts_ns[i]`, `ecn[i]`, `dir[i]`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SamplesLine {
    pub one_in: u64,
    pub id: Vec<u64>,
    pub ts_ns: Vec<u64>,
    pub ecn: Vec<u8>,
    pub dir: Vec<u8>,
    /// Samples the agent dropped before this line (more waited than it keeps).
    pub dropped: u64,
}
