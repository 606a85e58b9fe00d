//! The `messages` section: messages reconstructed from the wire, their completion times per
//! size class, flow and host pair, the tail explained, how steady the goodput is, and the
//! rings the host pairs form.

use serde::{Deserialize, Serialize};

use super::flow::FlowRef;
use super::percentiles::Percentiles;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Messages {
    /// Where the completion times were measured, and what that means for them.
    pub vantage: MessageVantage,
    /// `--link-speed` (the slowdown's ideal: serialisation at it plus the pair's smallest RTT).
    pub link_speed_bps: u64,
    /// Messages completed (an ACK, READ response or atomic ACK covering their last PSN).
    pub completed: u64,
    /// Completed, by verb: send, write, read, atomic.
    pub by_kind: std::collections::BTreeMap<String, u64>,
    /// Sent and not completed at the end of the run (their completion not seen yet).
    pub pending: u64,
    /// Messages whose start this capture did not hold (it began mid-message, or missed their
    /// first packets): not timed.
    pub partial: u64,
    /// Messages whose LAST this capture did not hold, given up when the next one began.
    pub abandoned: u64,
    /// In-flight messages let go at the per-flow bound (their completion was not seen).
    pub in_flight_evicted: u64,
    /// Completion times of every completed message (ns): `messages.mct_ns.p999` for gates.
    pub mct_ns: Percentiles,
    pub classes: Vec<MessageClass>,
    /// The flows with completed messages (with their pending ones).
    pub flows: Vec<MessageFlow>,
    pub pairs: Vec<MessagePair>,
    /// UC and UD: no completion; their transfer time (first to last packet).
    pub transfers: Transfers,
    pub tail: Tail,
    pub steadiness: Steadiness,
    pub rings: Rings,
    /// `--edges`: what `merge` of captures cut in time needs to give one run's steadiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<MessagesEdge>,
}

/// A report's messages edge: the goodput windows at its ends, overall, per request flow and per
/// host pair, and what each flow's first frame did to its pair's windows; every completion, and
/// each flow's messages not completed at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesEdge {
    pub overall: Option<SteadyEnds>,
    pub flows: Vec<MessagesEdgeFlow>,
    pub pairs: Vec<MessagesEdgePair>,
    /// Every completion, partial ones too, in the order they came, as `[flow (its index in
    /// flows), kind, marks, psn_first, psn_last, bytes, start_ns, end_ns, min_rtt_ns, pcp,
    /// dscp, retx, rnr]` ([`EdgeMessage`]; `min_rtt_ns` u64::MAX: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed: Vec<[u64; 13]>,
    /// More completions came than the edge keeps (`completed` is not all of them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub completed_cut: bool,
    /// What the tail and the findings were made with besides the other sections:
    /// `--dscp-priority` as `[dscp, priority]`, `--tail-threshold`, whether a topology placed
    /// the pauses, `--straggler-ratio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailEdge>,
    /// UC flows: the message being sent at the end and the first frames (`merge` completes a
    /// message sent across a cut as one run does); the UC transfer times' samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uc: Vec<UcEdge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uc_times: Option<super::edge::EdgeRtt>,
}

/// A UC flow's edge: its message being sent at the end as `[kind, start_ns, last_ns, bytes]`, and
/// its first frames up to its first FIRST as `[opcode, time, payload]` (64 at most: `head_cut`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UcEdge {
    #[serde(flatten)]
    pub flow: FlowRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sending: Option<[u64; 4]>,
    pub head: Vec<[u64; 3]>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub head_cut: bool,
}

/// The settings a report's tail was explained with, for `merge` to explain the merged tail
/// the same way (reports that differ keep their own tails).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TailEdge {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dscp_priority: Vec<[u8; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub topology: bool,
    pub straggler_ratio: f64,
}

/// A message of an edge: `completed` without its flow, or `held` without its open flag. Its
/// PCP and DSCP (its first frame's) and the first retransmission or NAK naming it and first RNR
/// NAK are what the tail lays it over; in the arrays they are `retx`/`rnr`: nanoseconds after
/// its start plus one, saturated at 2^32 − 1 as the analysis keeps them (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeMessage {
    pub kind: u64,
    pub marks: u64,
    pub psn_first: u32,
    pub psn_last: u32,
    pub bytes: u64,
    pub start_ns: u64,
    pub pcp: u8,
    pub dscp: u8,
    pub retx_ns: Option<u64>,
    pub rnr_ns: Option<u64>,
}

/// `t` after `start` plus one, in 32 bits (saturated; 0: none).
fn after(start: u64, t: Option<u64>) -> u64 {
    t.map_or(0, |t| (t.saturating_sub(start).min(u32::MAX as u64 - 1)) + 1)
}

impl EdgeMessage {
    /// From `[kind, marks, psn_first, psn_last, bytes, start_ns]` and `[pcp, dscp, retx, rnr]`.
    fn of(a: &[u64], x: &[u64]) -> EdgeMessage {
        let at = |v: u64| (v > 0).then(|| a[5] + v - 1);
        EdgeMessage {
            kind: a[0],
            marks: a[1],
            psn_first: a[2] as u32,
            psn_last: a[3] as u32,
            bytes: a[4],
            start_ns: a[5],
            pcp: x[0] as u8,
            dscp: x[1] as u8,
            retx_ns: at(x[2]),
            rnr_ns: at(x[3]),
        }
    }

    /// A `completed` entry's message.
    pub fn of_completed(c: &[u64; 13]) -> EdgeMessage {
        EdgeMessage::of(&c[1..7], &c[9..13])
    }

    /// A `held` entry's message.
    pub fn of_held(h: &[u64; 11]) -> EdgeMessage {
        EdgeMessage::of(&h[..6], &h[7..11])
    }

    fn base(&self) -> [u64; 6] {
        [self.kind, self.marks, self.psn_first as u64, self.psn_last as u64, self.bytes, self.start_ns]
    }

    fn extra(&self) -> [u64; 4] {
        let s = self.start_ns;
        [self.pcp as u64, self.dscp as u64, after(s, self.retx_ns), after(s, self.rnr_ns)]
    }

    /// Its `completed` entry: of flow `flow`, completed at `end_ns`, against `min_rtt`.
    pub fn completed(&self, flow: u64, end_ns: u64, min_rtt: Option<u64>) -> [u64; 13] {
        let ([k, m, f, l, b, s], [p, d, x, r]) = (self.base(), self.extra());
        [flow, k, m, f, l, b, s, end_ns, min_rtt.unwrap_or(u64::MAX), p, d, x, r]
    }

    /// Its `held` entry (`open`: the one still being sent).
    pub fn held(&self, open: bool) -> [u64; 11] {
        let ([k, m, f, l, b, s], [p, d, x, r]) = (self.base(), self.extra());
        [k, m, f, l, b, s, open as u64, p, d, x, r]
    }

    /// Its first retransmission and RNR NAK as another message's that began at `start_ns`
    /// would keep them (a message continued across a cut).
    pub fn times_from(&self, start_ns: u64) -> (Option<u64>, Option<u64>) {
        let keep = |t: Option<u64>| t.map(|t| start_ns + after(start_ns, Some(t)) - 1);
        (keep(self.retx_ns), keep(self.rnr_ns))
    }
}

/// A key's goodput windows as `merge` needs them: its first window `[window, bytes]` (left out
/// here), its full windows' rate buckets `[bucket, windows]`, the window still filling at the
/// end when it is not the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SteadyEnds {
    pub first: [u64; 2],
    pub counts: Vec<[u64; 2]>,
    pub open: Option<[u64; 2]>,
    /// The first full windows as `[window, bytes]` (16 at most; all of them when fewer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub early: Vec<[u64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessagesEdgeFlow {
    #[serde(flatten)]
    pub flow: FlowRef,
    pub ends: Option<SteadyEnds>,
    /// Its first frame here `[window, payload]`, whether that payload went to its host pair's
    /// windows here (its pair was placed before it), and whether its pair was placed by the end.
    pub first_frame: Option<[u64; 2]>,
    pub first_paired: bool,
    pub placed: bool,
    /// Its messages not completed at the end, in flight oldest first and then the one still
    /// being sent, as `[kind, marks, psn_first, psn_last, bytes, start_ns, open, pcp, dscp,
    /// retx, rnr]` (partial ones too: [`EdgeMessage`] and whether it is the one being sent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<[u64; 11]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessagesEdgePair {
    pub src: String,
    pub dst: String,
    pub ends: Option<SteadyEnds>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageVantage {
    /// `host` (live on a host), `mirror` (copies from a switch), `capture` (a file: where it was
    /// taken is not known).
    pub position: String,
    pub meaning: String,
}

/// Completion times of one size class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageClass {
    /// `le_4KiB`, `le_64KiB`, `le_1MiB`, `gt_1MiB` (with `--message-classes`, its bounds).
    pub name: String,
    /// Upper bound (bytes), none for the last class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(flatten)]
    pub stats: MessageStats,
    /// The completion times as the RTT's 1 % histogram ([bucket, count]): `merge` adds them.
    pub histogram: Vec<[u64; 2]>,
}

/// A flow's or a host pair's completion times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageStats {
    pub messages: u64,
    pub bytes: u64,
    pub mct_ns: Percentiles,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_bps_p50: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown_p99: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageFlow {
    #[serde(flatten)]
    pub flow: FlowRef,
    pub pending: u64,
    #[serde(flatten)]
    pub stats: MessageStats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePair {
    pub src: String,
    pub dst: String,
    /// The smallest RTT sample between them (the slowdown's ideal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_ns: Option<u64>,
    #[serde(flatten)]
    pub stats: MessageStats,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Transfers {
    pub uc_messages: u64,
    pub uc_bytes: u64,
    pub uc_transfer_ns: Percentiles,
    pub ud_messages: u64,
    pub ud_bytes: u64,
    /// UC messages whose FIRST was not seen (their LAST came without it: began before the
    /// capture, or its FIRST was missed): not counted in `uc_messages`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uc_partial: u64,
    /// UC messages still being sent at the end (FIRST seen, LAST not yet): not counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uc_open: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The messages above their class's tail threshold, and what they overlapped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    pub thresholds: Vec<TailThreshold>,
    /// Messages at or above their class's threshold.
    pub messages: u64,
    /// Those explained here: all, unless more than the slowest kept per class (then the
    /// slowest of them).
    pub examined: u64,
    pub causes: Vec<TailCause>,
    /// The slowest, at most [`MAX_WORST`].
    pub worst: Vec<TailMessage>,
    /// Hop latencies between vantage points past the bound kept in time
    /// (`analyses::queueing::MAX_KEPT` per hop): not laid over the tail as `queueing`.
    #[serde(default, skip_serializing_if = "super::skip::is_zero")]
    pub hop_latencies_unkept: u64,
}

/// Slowest tail messages listed, at most.
pub const MAX_WORST: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailThreshold {
    pub class: String,
    pub threshold_ns: u64,
    /// `p99` (the class's), or `flag` (`--tail-threshold`).
    pub from: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TailCause {
    /// `pause`, `rate_cut`, `retransmission`, `rnr`, `incast`, `queueing`, `capture_gap`,
    /// `unexplained`.
    pub cause: String,
    pub messages: u64,
    /// Of the examined tail messages.
    pub share: f64,
    /// Their time overlapped by it, summed.
    pub overlap_ns: u64,
    /// Where it came from, when one place dominates (a pause's sender and priority; the hop
    /// that queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TailMessage {
    pub flow: FlowRef,
    pub kind: String,
    pub psn_first: u32,
    pub psn_last: u32,
    pub bytes: u64,
    pub start_ns: u64,
    pub mct_ns: u64,
    pub causes: Vec<TailOverlap>,
    /// `--evidence`: the pcapng of its frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailOverlap {
    pub cause: String,
    pub overlap_ns: u64,
}

/// Goodput per rate window over active windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Steadiness {
    pub window_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<Steady>,
    pub flows: Vec<SteadyFlow>,
    pub pairs: Vec<SteadyPair>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    pub windows: u64,
    pub p5_bps: u64,
    pub p50_bps: u64,
    pub p95_bps: u64,
    /// 1 − p5/p50.
    pub fluctuation: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyFlow {
    #[serde(flatten)]
    pub flow: FlowRef,
    #[serde(flatten)]
    pub steady: Steady,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyPair {
    pub src: String,
    pub dst: String,
    #[serde(flatten)]
    pub steady: Steady,
}

/// Rings found among the host pairs that carry data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rings {
    /// What is recognised, in words.
    pub recognised: String,
    pub rings: Vec<Ring>,
    /// Groups of hosts that send to each other in a pattern other than a ring (all-to-all,
    /// trees, several rings over the same hosts).
    pub other_groups: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ring {
    /// In ring order, each sending to the next (the last to the first).
    pub hosts: Vec<String>,
    pub edges: Vec<RingEdge>,
    /// The slowest edge (lowest goodput p50), as `src → dst`.
    pub straggler: String,
    /// The ring's median edge goodput over the straggler's.
    pub straggler_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingEdge {
    pub src: String,
    pub dst: String,
    pub messages: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_bps_p50: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mct_ns_p99: Option<u64>,
}
