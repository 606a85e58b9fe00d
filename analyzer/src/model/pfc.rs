//! `pfc` and `congestion_tree`: pause senders, paused time, storms, trees and deadlocks.

use serde::{Deserialize, Serialize};

use super::flow::FlowRef;
use super::skip::{is_zero, yes};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pfc {
    pub frames: u64,
    pub pause_8023x_frames: u64,
    /// Per (sender MAC, priority) of PFC frames.
    pub senders: Vec<PfcSender>,
    /// Per sender MAC of 802.3x PAUSE frames (all priorities).
    pub pause_senders: Vec<PauseSender>,
    #[serde(default)]
    pub storms: Vec<StormJson>,
    /// The link speed pause quanta were converted at (bit/s).
    #[serde(default)]
    pub link_speed_bps: u64,
    /// Per priority PFC paused: pause frames and paused time per million data frames.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<PfcRate>,
    /// `--edges`: what `merge` of captures cut in time needs to judge PFC as one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<PfcEdge>,
}

/// A report's PFC edge: the settings and counts its PFC findings used beyond the section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PfcEdge {
    /// `--pfc-rate-max`.
    pub rate_max: f64,
    /// Data frames whose priority the report could not tell (they count as data for every
    /// priority's onsets).
    pub unknown_priority_data_frames: u64,
    /// The CE marks near the report's ends, for the onsets of the report after a cut in time
    /// (none: the report dropped runs of marks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<MarksEdge>,
}

/// `pfc.edge.marks`: runs of CE marks on data (marks at most 1 µs apart are one run) as
/// `[priority, first, last]` (priority 8: unknown). An onset just after a cut asks the runs
/// before it within `--ecn-lead`, which the report before the cut held; a run at the end of one
/// report and one at the start of the next within 1 µs are one run in one run over both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarksEdge {
    /// Each priority's first run.
    pub head: Vec<[u64; 3]>,
    /// Each priority's runs that end within `--ecn-lead` and 1 µs of the report's end.
    pub tail: Vec<[u64; 3]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcSender {
    pub mac: String,
    /// The device and port that own the MAC (`--topology`), or for a host NIC the host.
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub port: Option<String>,
    pub priority: u8,
    #[serde(flatten)]
    pub counts: PauseCounts,
    #[serde(flatten)]
    pub pause: PauseTime,
    /// ECN before PFC: of its pause onsets, those with CE marks on its priority's data in the
    /// `--ecn-lead` window before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_lead: Option<EcnLead>,
}

/// A sender's pause onsets and the CE marks before them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcnLead {
    /// Pause onsets: XOFFs that start a paused interval.
    pub onsets: u64,
    /// Those with a CE mark on data of the priority within `window_ns` before.
    pub preceded: u64,
    pub window_ns: u64,
    /// Median time from the first such mark to the onset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_ns_p50: Option<u64>,
    /// With a topology that places the sender: the link its pauses stopped ("peer → sender");
    /// only marks on flows through it counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// `--edges`: every onset with the time from the first mark before it (null: none), so
    /// that `merge` judges the onsets of a capture cut in time as one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<Vec<(u64, Option<u64>)>>,
}

/// How often PFC triggers on a priority, against its data frames seen here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PfcRate {
    pub priority: u8,
    pub data_frames: u64,
    pub pause_frames: u64,
    pub paused_ns: u64,
    /// Pause frames per million data frames (none without data frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_per_million: Option<f64>,
    /// Paused nanoseconds per million data frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_ns_per_million: Option<f64>,
}

/// Paused intervals a report lists per sender and priority, at most.
pub const MAX_INTERVALS: usize = 10_000;

/// How long a sender (and priority) was paused, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseTime {
    /// Union of the pause intervals the frames asked for, at `--link-speed`.
    #[serde(default)]
    pub paused_ns: u64,
    /// The paused intervals [start_ns, end_ns), in time order (the last [`MAX_INTERVALS`]:
    /// `merge` joins them on time across reports).
    #[serde(default)]
    pub intervals: Vec<[u64; 2]>,
    /// False when older intervals were left out (more than [`MAX_INTERVALS`]).
    #[serde(default = "yes")]
    pub intervals_complete: bool,
    /// The time of the sender's first pause frame for it (XOFF or XON) in this capture: where
    /// one run over a capture cut in time let a frame after the cut replace a pause the part
    /// before projected past its end (`merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_frame_ns: Option<u64>,
}

impl Default for PauseTime {
    fn default() -> Self {
        PauseTime { paused_ns: 0, intervals: Vec::new(), intervals_complete: true, first_frame_ns: None }
    }
}

impl PauseTime {
    /// The report's view of a sender's paused intervals (all of them, in time order).
    pub fn of(all: &[(u64, u64)]) -> PauseTime {
        let from = all.len().saturating_sub(MAX_INTERVALS);
        PauseTime {
            paused_ns: all.iter().map(|(s, e)| e - s).sum(),
            intervals: all[from..].iter().map(|(s, e)| [*s, *e]).collect(),
            intervals_complete: from == 0,
            first_frame_ns: None,
        }
    }

    /// Adds another vantage point's view of the same sender (merge): intervals gathered for
    /// a union on time, the pause time the largest seen until then.
    pub fn join(&mut self, o: &PauseTime) {
        self.paused_ns = self.paused_ns.max(o.paused_ns);
        self.intervals.extend_from_slice(&o.intervals);
        self.first_frame_ns = match (self.first_frame_ns, o.first_frame_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // A report from before intervals were listed has pause time but no intervals.
        self.intervals_complete &= o.intervals_complete && !(o.intervals.is_empty() && o.paused_ns > 0);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseSender {
    pub mac: String,
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub port: Option<String>,
    #[serde(flatten)]
    pub counts: PauseCounts,
    #[serde(flatten)]
    pub pause: PauseTime,
}

/// One continuous paused interval of at least `--pfc-storm`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StormJson {
    pub mac: String,
    #[serde(default)]
    pub device: Option<String>,
    /// 0..7, or 8 for an 802.3x PAUSE sender (all priorities).
    pub priority: u8,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// `--evidence`: the pcapng file of the frames behind it, relative to the evidence directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CongestionTrees {
    /// One per priority with pause relations (8 = 802.3x PAUSE, all priorities).
    pub trees: Vec<Tree>,
    pub deadlocks: Vec<Deadlock>,
    /// Deadlocks past the listed ones (`MAX_LISTED_DEADLOCKS`), counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deadlocks_omitted: u64,
    /// PFC senders whose device or link peer the topology does not name (or no topology).
    pub unresolved: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    pub priority: u8,
    pub roots: Vec<Root>,
    pub edges: Vec<PauseEdge>,
    /// Flows paused on the way to a congested host (the first [`MAX_LISTED_FLOWS`](super::findings::MAX_LISTED_FLOWS)).
    pub contributors: Vec<FlowRef>,
    /// Flows paused on the way elsewhere: head-of-line blocking (likewise).
    pub victims: Vec<FlowRef>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Contributors and victims past [`MAX_LISTED_FLOWS`](super::findings::MAX_LISTED_FLOWS), counted, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flows_omitted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    pub device: String,
    /// The root's port toward `congested_host` (its likely congested egress).
    pub congested_port: Option<String>,
    /// The destination that received the most data bytes among flows crossing the root.
    pub congested_host: Option<String>,
}

/// "`from` pauses `to`": `to` may not send to `from` on `priority` while it lasts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseEdge {
    pub from: String,
    pub to: String,
    pub priority: u8,
    pub first_ns: u64,
    pub paused_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadlock {
    pub priority: u8,
    /// One cycle through it, as the example: from its first device (in the topology's order)
    /// the shortest way back.
    pub cycle: Vec<String>,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Every device that paused and was paused in a circle with the others while it lasted
    /// (reports before this field: the cycle's).
    #[serde(default)]
    pub devices: Vec<String>,
    /// Its pause links, [pauser, paused].
    #[serde(default)]
    pub links: Vec<[String; 2]>,
    /// `--evidence`: the pcapng file of the frames behind it, relative to the evidence directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// Pause frames of one sender (and priority), as the report shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseCounts {
    pub frames: u64,
    pub xoff: u64,
    pub xon: u64,
    /// Sum of pause quanta (each 512 bit times).
    pub quanta: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl From<&analyzer_common::maps::PfcCounters> for PauseCounts {
    fn from(c: &analyzer_common::maps::PfcCounters) -> Self {
        PauseCounts {
            frames: c.frames,
            xoff: c.xoff,
            xon: c.xon,
            quanta: c.quanta,
            first_ns: c.first_ns,
            last_ns: c.last_ns,
        }
    }
}

impl PauseCounts {
    pub const ZERO: PauseCounts = PauseCounts { frames: 0, xoff: 0, xon: 0, quanta: 0, first_ns: 0, last_ns: 0 };

    /// Adds another vantage point's counts of the same sender (merge), or names the first count
    /// whose sum would not fit 64 bits (then nothing is added).
    pub fn checked_add(&mut self, o: &PauseCounts) -> Result<(), &'static str> {
        let frames = self.frames.checked_add(o.frames).ok_or("frames")?;
        let xoff = self.xoff.checked_add(o.xoff).ok_or("xoff")?;
        let xon = self.xon.checked_add(o.xon).ok_or("xon")?;
        let quanta = self.quanta.checked_add(o.quanta).ok_or("quanta")?;
        self.first_ns = if self.frames == 0 { o.first_ns } else { self.first_ns.min(o.first_ns) };
        self.last_ns = self.last_ns.max(o.last_ns);
        (self.frames, self.xoff, self.xon, self.quanta) = (frames, xoff, xon, quanta);
        Ok(())
    }
}
