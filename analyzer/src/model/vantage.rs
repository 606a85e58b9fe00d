//! `vantage`: several vantage points, and per hop the frames matched, missing and their latency.

use serde::{Deserialize, Serialize};

use super::ecn::MarkingSeries;
use super::percentiles::Percentiles;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Vantage {
    /// Copies of one frame are matched within this.
    pub match_window_ns: u64,
    pub points: Vec<VantagePoint>,
    pub hops: Vec<VantageHop>,
    /// Copies folded into their frame's first sighting (counted once in flows).
    pub copies: u64,
    /// Most frames held at once for matching: the memory the window took.
    pub peak_held: u64,
    /// `--edges`: what `merge` of captures cut in time needs to match frames across a cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<VantageEdge>,
}

/// `vantage.edge` (offline with `--edges`). Point masks have a bit per point of this section's
/// `points`, in their order (the last bit shared beyond 64).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VantageEdge {
    /// Frames still held for matching when the run ended, oldest first, as `[time, identity
    /// (a 64-bit key of the frame's identity; 0: none, a frame that is not RoCE), points that
    /// saw it (mask), first point (index) + 65536 when it was a mirrored copy]`.
    pub ended: Vec<[u64; 4]>,
    /// Frames offered from the first until one past the match window, as `[time, identity,
    /// point + 65536 when mirrored, 1 when held (a first sighting), 0 when folded (a copy)]`.
    pub head: Vec<[u64; 4]>,
    /// Whether a frame came past the first's match window (else `head` is every frame).
    pub head_closed: bool,
    /// Per flow that had frames counted, `[points that saw them, points not yet capturing,
    /// points that had stopped, frames]` (the masks `frames_missing` is counted from).
    pub flows: Vec<FlowSightings>,
    /// Per hop, in the order of `hops`, what adds across a cut.
    pub hops: Vec<HopEdge>,
    /// The settings the hops' findings used: `--link-speed` and the Kmin floor in bytes.
    pub link_speed_bps: u64,
    pub kmin_min_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSightings {
    pub flow: super::FlowRef,
    pub sets: Vec<[u64; 4]>,
}

/// A hop's edge: its latency samples, the flows matched, the matched frames before its first
/// mark (`before`, as a series) and its frames and marks by latency (`marks`: the base and the
/// smallest latency in ns, then `[bin, frames, marked]` per 64 ns bin above the base).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HopEdge {
    pub latency: super::edge::EdgeRtt,
    pub flows: Vec<super::FlowRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<MarkingSeries>,
    pub marks_base: i64,
    pub marks_min: i64,
    pub marks: Vec<[i64; 3]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VantagePoint {
    /// The label, with `@origin` for mirrored copies.
    pub name: String,
    pub label: String,
    /// Outer source address of mirrored copies (with `/session N` for ERSPAN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    pub frames: u64,
    /// Its first and last frame's time: the span it was capturing.
    #[serde(default)]
    pub first_ns: u64,
    #[serde(default)]
    pub last_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VantageHop {
    /// The point that sees the hop's frames first.
    pub from: String,
    pub to: String,
    /// Flows with frames matched at both points.
    pub flows: u64,
    pub frames_matched: u64,
    /// Frames of flows seen at both points that `from` saw and `to` never did while `to` was
    /// capturing.
    pub frames_missing: u64,
    /// Frames of those flows `from` saw while `to` was not capturing (before its first frame or
    /// after its last): outside the span both points captured, not counted missing.
    #[serde(default)]
    pub frames_outside_span: u64,
    /// Matched frames not CE-marked at `from` and CE-marked at `to`.
    pub ce_marked: u64,
    /// When frames were first CE-marked between the points, and from then on the frames
    /// matched (`frames`) and marked between (`ce`) over time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marking: Option<MarkingSeries>,
    /// `to`'s time minus `from`'s, over the matched frames (needs synchronised capture clocks).
    pub latency_ns: Percentiles,
    /// The switch's ECN marking between the points, fitted to the frames' queueing delay
    /// (latency above the hop's smallest) and whether they were marked; none without marks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marking_profile: Option<MarkingProfile>,
}

/// A RED/WRED fit: no marks below Kmin, a probability rising to `pmax` at Kmax, every frame
/// above Kmax marked. Delays in ns of queueing, bytes at `--link-speed`; the thresholds are
/// absent when the marked frames are too few to fit (`confidence` `insufficient`), Kmax when
/// no delay seen was marked throughout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkingProfile {
    pub frames: u64,
    pub marked: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmin_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmax_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmin_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmax_bytes: Option<u64>,
    /// The marking probability at Kmax (or at the largest delay seen, without Kmax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmax: Option<f64>,
    /// insufficient, low, medium or high: by the marked frames on the ramp and its width.
    pub confidence: String,
}

/// `merge` over exports with `--trajectory-sample`: the hops between collectors that saw the
/// same sampled frames (trajectory sampling), each estimated from the samples alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// 1 in this many frames sampled (every agent the same).
    pub one_in: u64,
    pub points: Vec<TrajectoryPoint>,
    pub hops: Vec<TrajectoryHop>,
}

/// A collector's samples.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrajectoryPoint {
    /// The agent's host and its inputs' labels (`host/label`).
    pub name: String,
    pub samples: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// A ratio estimated from samples, with its 95 % (Wilson) interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub of: u64,
    pub value: f64,
    pub ci95: [f64; 2],
}

/// Frames going from one collector to the other, as the samples show them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryHop {
    pub from: String,
    pub to: String,
    /// Samples at `from` (this direction, within `to`'s span) seen at `to` too, and not.
    pub matched: u64,
    pub missing: u64,
    /// missing / (matched + missing): the hop's loss.
    pub loss: Estimate,
    /// Matched samples not CE-marked at `from` and marked at `to`, of those not marked at
    /// `from`: the marking between.
    pub ce_between: u64,
    pub marking: Estimate,
    /// `to`'s time minus `from`'s, less the clocks' offset: min, p50, p99, max.
    pub latency_ns: [i64; 4],
    /// `to`'s clock minus `from`'s, estimated from frames seen both ways (half the difference of
    /// the two directions' fastest frames); none when frames went one way only (then the
    /// latency includes the offset, and the clocks are taken as synchronised).
    pub clock_offset_ns: Option<i64>,
    /// `synchronised` (offset under 1 µs), `offset` (larger: the collectors' clocks differ),
    /// or `not_separable`.
    pub clocks: String,
}

/// One frame a collector sampled (`--trajectory-sample`): its identity hash, time, ECN bits
/// and direction (0 when the source address sorts below the destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrajectorySample {
    pub id: u64,
    pub ts_ns: u64,
    pub ecn: u8,
    pub dir: u8,
}

/// A collector's samples as an export carried them (in memory only: `merge` joins them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrajectorySamples {
    /// `host/label`.
    pub name: String,
    pub one_in: u64,
    pub samples: Vec<TrajectorySample>,
}
