//! The report's data model: the v1 document (serde), its names and address formatting. A leaf:
//! it imports nothing of the engine, the analyses or the renderers, so every layer may use it.
//! Field names are the v1 contract.

pub mod addr;
pub mod codes;
pub mod count_map;
pub mod counters;
pub mod names;

pub use addr::*;
pub use codes::*;
pub use count_map::CountMap;
pub use counters::*;

pub const SCHEMA: &str = "roce-analyzer/report/v1";

use std::collections::BTreeMap;

use analyzer_common::psn;
use serde::{Deserialize, Serialize};

/// Summary of a sample set, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Percentiles {
    pub samples: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    /// False when the percentiles come from the 1% histogram (more than 2^20 samples).
    pub exact: bool,
}

impl Percentiles {
    /// min, p50, p90, p99, p99.9 and max, in that order (for tables).
    pub fn ladder(&self) -> [u64; 6] {
        [self.min, self.p50, self.p90, self.p99, self.p999, self.max]
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    /// "offline", "live", or "merged" (several reports combined by `roce-analyzer merge`).
    pub kind: String,
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
    /// `--evidence`: the pcapng files written, one per finding, episode, storm and deadlock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

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

/// Data frames and CE marks over time per traffic class (DSCP), from the first CE mark: the
/// CE fraction of each point is `ce / frames`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marking {
    pub classes: Vec<MarkingClass>,
    /// The same per outer VLAN PCP (the PFC priority; `pcp` null: untagged frames).
    #[serde(default)]
    pub priorities: Vec<MarkingPriority>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkingPriority {
    pub pcp: Option<u8>,
    #[serde(flatten)]
    pub series: MarkingSeries,
}

/// Frames and CE marks per point of `point_ns` from `start_ns`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MarkingSeries {
    pub start_ns: u64,
    pub point_ns: u64,
    pub frames: Vec<u64>,
    pub ce: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkingClass {
    pub dscp: u8,
    #[serde(flatten)]
    pub series: MarkingSeries,
}

/// How senders reacted to the CNPs they were sent, per flow and per sender host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dcqcn {
    pub rate_window_ns: u64,
    pub horizon_ns: u64,
    /// CNPs no single watched data flow could take (several flows between the two hosts and
    /// no ACK pairing, or none watched).
    pub unattributed_cnps: u64,
    pub flows: Vec<DcqcnFlow>,
    pub hosts: Vec<DcqcnHost>,
    /// Rate series of a few flows for the HTML plot: those the DCQCN findings name first,
    /// then those with the most CNPs.
    #[serde(default)]
    pub plots: Vec<DcqcnPlot>,
}

/// A flow's rate over its watched time: bytes and CE marks per point of `point_ns`, from
/// `start_ns`, and its CNPs' times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnPlot {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
    pub start_ns: u64,
    pub point_ns: u64,
    pub bytes: Vec<u64>,
    /// Data frames per point, and those CE-marked (the flow's CE fraction over time).
    pub frames: Vec<u64>,
    pub ce: Vec<u64>,
    pub cnps_ns: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnFlow {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
    #[serde(flatten)]
    pub stats: DcqcnStats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnHost {
    pub src: String,
    pub flows: u64,
    #[serde(flatten)]
    pub stats: DcqcnStats,
}

/// CNPs and the reaction to them: counts, and medians and worst over the CNPs judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcqcnStats {
    pub cnps: u64,
    /// Followed by a window below 90 % of the rate before, within the horizon.
    pub reacted: u64,
    pub unreacted_cnps: u64,
    /// CNPs with no steady rate before them (not judged: not watched yet, or a window without
    /// data among the 5 before).
    pub no_rate_before: u64,
    /// Reacted, and not back at 90 % of the rate before within the horizon.
    pub not_recovered: u64,
    /// Lowest rate after / rate before (0.5 is a halving); null when none was judged.
    pub cut_ratio_p50: Option<f64>,
    pub worst_cut_ratio: Option<f64>,
    pub reaction_ns_p50: Option<u64>,
    pub recovery_ns_p50: Option<u64>,
}

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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VantageHop {
    /// The point that sees the hop's frames first.
    pub from: String,
    pub to: String,
    /// Flows with frames matched at both points.
    pub flows: u64,
    pub frames_matched: u64,
    /// Frames of flows seen at both points that `from` saw and `to` never did.
    pub frames_missing: u64,
    /// Matched frames not CE-marked at `from` and CE-marked at `to`.
    pub ce_marked: u64,
    /// When frames were first CE-marked between the points, and from then on the frames
    /// matched (`frames`) and marked between (`ce`) over time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marking: Option<MarkingSeries>,
    /// `to`'s time minus `from`'s, over the matched frames (needs synchronised capture clocks).
    pub latency_ns: Percentiles,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Incast {
    pub window_ns: u64,
    pub min_senders: u32,
    pub episodes: Vec<Episode>,
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

/// A flow named in a finding or an analysis.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowRef {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
}

/// PSN sequence of a flow's request stream and its READ RESPONSEs: `requests`,
/// `out_of_sequence`, `psn_skipped`, `duplicates`, `response_out_of_sequence` (READ RESPONSE
/// packets out of sequence within one response), named by `analyzer_common::psn::count`.
pub type PsnJson = Counters<PsnNames, { psn::count::COUNT }>;

/// What the responder's NIC would count for a flow's requests (`out_of_seq_request`,
/// `duplicate_request`), named by `analyzer_common::psn::responder`.
pub type Responder = Counters<ResponderNames, { psn::responder::COUNT }>;

/// `flows[].psn`: the observer's sequence counters, and the responder model's under
/// `responder`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowPsn {
    #[serde(flatten)]
    pub sequence: PsnJson,
    pub responder: Responder,
}

impl FlowPsn {
    /// Adds another flow's, or names the first counter whose sum would not fit 64 bits.
    pub fn checked_add(&mut self, o: &Self) -> Result<(), String> {
        let mut sum = *self;
        sum.sequence.checked_add(&o.sequence).map_err(str::to_string)?;
        sum.responder.checked_add(&o.responder).map_err(|n| format!("responder.{n}"))?;
        *self = sum;
        Ok(())
    }
}

impl std::ops::Index<usize> for FlowPsn {
    type Output = u64;
    /// The sequence counter at a `psn::count` index.
    fn index(&self, i: usize) -> &u64 {
        &self.sequence.values[i]
    }
}

/// AETHs carried by a flow, by syndrome (`acks`, the NAK kinds, `reserved`), named by
/// `analyzer_common::psn::aeth`.
pub type Naks = Counters<AethNames, { psn::aeth::COUNT }>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsnNames;
impl CounterNames for PsnNames {
    const NAMES: &'static [&'static str] = &psn::count::NAMES;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponderNames;
impl CounterNames for ResponderNames {
    const NAMES: &'static [&'static str] = &psn::responder::NAMES;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AethNames;
impl CounterNames for AethNames {
    const NAMES: &'static [&'static str] = &psn::aeth::NAMES;
}

impl Naks {
    /// NAKs of every kind (everything but ACKs).
    pub fn total(&self) -> u64 {
        self.values[psn::aeth::ACK + 1..].iter().sum()
    }
}

/// RTT of one request flow (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRtt {
    #[serde(flatten)]
    pub percentiles: Percentiles,
    /// Requests with AckReq not acknowledged within `--rtt-timeout`.
    pub timeouts: u64,
    /// Requests still waiting at the end, less than the timeout before it.
    pub pending: u64,
}

/// RTT over all flows (ns), with the pairing's bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    #[serde(flatten)]
    pub percentiles: Percentiles,
    pub timeouts: u64,
    pub pending: u64,
    /// ACKs whose request flow could not be told apart from another (see the docs on pairing).
    pub ambiguous_acks: u64,
    /// ACKs of requests this vantage point did not see.
    pub unpaired_acks: u64,
    /// QP pairs (one per direction) learned from captured CM REQ/REP exchanges.
    #[serde(default)]
    pub cm_paired: u64,
    /// Requests dropped undecided because their flow already had the most requests waiting a
    /// flow keeps (a vantage point that does not see the ACKs).
    #[serde(default)]
    pub pending_evicted: u64,
    pub timeout_ns: u64,
    /// Every sample in log buckets, so that `merge` combines the percentiles of several
    /// reports (within `relative_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<RttHistogram>,
}

/// RTT samples in logarithmic buckets: bucket i holds [growth^i, growth^(i+1)) ns; a value read
/// back (its bucket's geometric middle) is within `relative_error` of every sample in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RttHistogram {
    pub growth: f64,
    pub relative_error: f64,
    /// [bucket index, samples], by index.
    pub buckets: Vec<[u64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// Sender of the data, receiver of the CNPs.
    pub a: String,
    pub b: String,
    pub data_packets: u64,
    /// CE-marked data packets a → b.
    pub ce: u64,
    /// CNPs b → a.
    pub cnp_back: u64,
    /// CE marks with no CNP back within `--cnp-timeout`, and not covered by a CNP's pacing.
    pub ce_unanswered: u64,
    /// CE marks with no CNP of their own that came within the CNP pacing interval after one
    /// (the notification point sends at most one per interval).
    #[serde(default)]
    pub ce_covered: u64,
}

/// The CNP pacing interval the audit used: `source` is `inferred` (the smallest CNP gap of a
/// QP with at least 3 CNPs), `given` (`--cnp-interval`) or `none` (`ns` 0: too few CNPs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CnpInterval {
    pub ns: u64,
    pub source: String,
}

impl Default for CnpInterval {
    fn default() -> Self {
        CnpInterval { ns: 0, source: "none".into() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CnpPacing {
    /// The notified (data-sending) address and QP.
    pub dst: String,
    pub dst_qp: u32,
    pub cnps: u64,
    pub min_gap_ns: u64,
    pub median_gap_ns: u64,
}

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub src: String,
    pub dst: String,
    pub ip_version: u8,
    pub udp_sport: u16,
    pub dst_qp: u32,
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub opcodes: CountMap,
    pub ecn: Ecn,
    pub dscp: CountMap,
    /// Frames by outer VLAN PCP; "untagged" counts frames without a tag.
    pub pcp: CountMap,
    pub fecn: u64,
    pub becn: u64,
    pub ack_req: u64,
    pub labels: Vec<String>,
    #[serde(default)]
    pub psn: FlowPsn,
    #[serde(default)]
    pub naks: Naks,
    /// Present on flows that sent requests with AckReq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ns: Option<FlowRtt>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ecn {
    pub not_ect: u64,
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// Paused intervals a report lists per sender and priority, at most.
pub const MAX_INTERVALS: usize = 10_000;

fn yes() -> bool {
    true
}

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
}

impl Default for PauseTime {
    fn default() -> Self {
        PauseTime { paused_ns: 0, intervals: Vec::new(), intervals_complete: true }
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
        }
    }

    /// Adds another vantage point's view of the same sender (merge): intervals gathered for
    /// a union on time, the pause time the largest seen until then.
    pub fn join(&mut self, o: &PauseTime) {
        self.paused_ns = self.paused_ns.max(o.paused_ns);
        self.intervals.extend_from_slice(&o.intervals);
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
    /// PFC senders whose device or link peer the topology does not name (or no topology).
    pub unresolved: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    pub priority: u8,
    pub roots: Vec<Root>,
    pub edges: Vec<PauseEdge>,
    /// Flows paused on the way to a congested host (the first [`MAX_LISTED_FLOWS`]).
    pub contributors: Vec<FlowRef>,
    /// Flows paused on the way elsewhere: head-of-line blocking (likewise).
    pub victims: Vec<FlowRef>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Contributors and victims past [`MAX_LISTED_FLOWS`], counted, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flows_omitted: u64,
}

/// Flows a finding or a tree lists, at most (the rest are counted in `flows_omitted`).
pub const MAX_LISTED_FLOWS: usize = 1000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Keeps the first [`MAX_LISTED_FLOWS`] of `flows`; returns how many it left out.
pub fn cap_flows(flows: &mut Vec<FlowRef>) -> u64 {
    let omitted = flows.len().saturating_sub(MAX_LISTED_FLOWS) as u64;
    flows.truncate(MAX_LISTED_FLOWS);
    omitted
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
    pub cycle: Vec<String>,
    pub start_ns: u64,
    pub duration_ns: u64,
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
