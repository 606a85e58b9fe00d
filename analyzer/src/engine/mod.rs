//! The engine: the counters of one run over every input, offline or live. It receives
//! classified frames (or, live, the kernel's per-flow counters) and keeps frame classes,
//! per-flow counters with their PSN/AETH state, PFC / PAUSE per sender, the capture's time span
//! and every drop. It knows nothing of the analyses above it: [`crate::pipeline`] hands the
//! same frames to both.

pub mod edges;
pub mod flows;
pub mod live;
pub mod pfc;

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;
use analyzer_common::maps;
use analyzer_common::psn::{self, PeerKey};
use analyzer_common::{FrameClass, PacketSummary};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::frames::FrameMeta;

pub use flows::{FlowStats, FlowTable};
pub use pfc::PfcTable;

/// Why a frame or record was not analysed. Every reason is always reported, zero or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropReason {
    /// The capture file ended inside a record.
    TruncatedRecord,
    /// The flow table was full (the kernel's live, `--max-flows` offline): the frame's
    /// flow was not counted.
    FlowMapFull,
    /// Live: the event ring had no room for an event, or its CPU's event log overwrote it
    /// before the agent read it.
    RingbufFull,
    /// Live: a flow's second transport, DSCP or PCP found the extra-value map full.
    ExtraMapFull,
    /// Live: a PFC/PAUSE sender and priority found the PFC map full.
    PfcMapFull,
    /// Live: a RoCE frame's flow found the flow table full (its PSN/AETH not accounted; counted
    /// in `FlowMapFull` too).
    PsnMapFull,
    /// Live: a timeline record found the shared timeline ring full, or its CPU's log
    /// overwrote it before the agent read it (RTT, CE/CNP timing and incast miss that frame).
    TimelineFull,
    /// Live: a timeline record or event still in its ring when the run ended, after the agent
    /// had drained for as long as it may (its analyses miss that frame).
    Undrained,
    /// A frame whose flow, address pair or destination found an analysis' state at its bound
    /// (`--max-flows` keys): that analysis did not follow it.
    AnalysisStateFull,
    /// A pcapng packet of an interface whose link type this tool does not read (skipped; the
    /// file's other interfaces are analysed).
    UnreadLinkType,
}

impl DropReason {
    pub const ALL: [DropReason; 10] = [
        DropReason::TruncatedRecord,
        DropReason::FlowMapFull,
        DropReason::RingbufFull,
        DropReason::ExtraMapFull,
        DropReason::PfcMapFull,
        DropReason::PsnMapFull,
        DropReason::TimelineFull,
        DropReason::Undrained,
        DropReason::AnalysisStateFull,
        DropReason::UnreadLinkType,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TruncatedRecord => "truncated_record",
            DropReason::FlowMapFull => "flow_map_full",
            DropReason::RingbufFull => "ringbuf_full",
            DropReason::ExtraMapFull => "extra_map_full",
            DropReason::PfcMapFull => "pfc_map_full",
            DropReason::PsnMapFull => "psn_map_full",
            DropReason::TimelineFull => "timeline_full",
            DropReason::Undrained => "undrained",
            DropReason::AnalysisStateFull => "analysis_state_full",
            DropReason::UnreadLinkType => "unread_link_type",
        }
    }
}

/// What of a flow's PSN state counts trouble: sequence errors, repeats and NAKs.
#[inline]
fn anomalies(p: &psn::PsnState) -> u64 {
    use psn::count;
    p.count[count::OUT_OF_SEQUENCE]
        + p.count[count::DUPLICATES]
        + p.count[count::RESPONSE_OUT_OF_SEQUENCE]
        + p.aeth[1..].iter().sum::<u64>()
}

/// The bucket of timestamps [`Engine::settle_span`] groups frames by.
const PERIOD_NS: u64 = 30 * 86_400 * 1_000_000_000;
/// Periods further apart than this are not one capture.
const YEAR_NS: u64 = 365 * 86_400 * 1_000_000_000;

/// A capture source as the report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// "pcap" or "live".
    pub kind: String,
    pub name: String,
    pub label: String,
    /// Live: how the XDP program is attached to it.
    pub xdp: Option<crate::model::XdpJson>,
}

/// Frames that were mirrored copies or were cut by the snap length (for the visibility notes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visibility {
    pub encapsulated: u64,
    pub ext_cut: u64,
    /// Copies cut short (a truncating mirror session): counted at the length their IP
    /// header states.
    pub cut_copies: u64,
    /// RoCE frames cut before the end of their BTH, and the most bytes one of them needed kept
    /// (offline; 0 live, where the kernel counts them only).
    pub bth_cut: u64,
    pub bth_needs: u16,
    /// Copies of a frame counted already (seen at another vantage point: an input, or a mirror
    /// origin), counted once.
    pub matched_copies: u64,
    /// Live: sightings of mirrored copies the kernel gave up within the match window to make
    /// room (a later copy of such a frame counted as a frame). 0 offline, which holds every
    /// frame for the window.
    pub sightings_evicted: u64,
    /// pcapng link types skipped (their packets count as `unread_link_type`).
    pub skipped_linktypes: std::collections::BTreeSet<u32>,
    /// Live: RDMA devices of the interface, set when no RoCE was seen on it.
    pub rdma_devices: Vec<String>,
    /// Live: flows the kernel handled on more than one CPU (their entry, counters and PSN state,
    /// is one value the CPUs update without a lock). 0 offline.
    pub several_cpus: u64,
}

/// The host's notes between a connection's two directions for [`psn::account`]: the XDP
/// program's LRU map, offline. Bounded alike ([`maps::DEFAULT_MAX_NOTES`]); the oldest note
/// goes first (a hint lost, not a count).
#[derive(Debug)]
struct HostNotes {
    /// Note and the sequence number of its put.
    notes: FxHashMap<PeerKey, (u32, u64)>,
    /// Puts in order; an entry whose sequence number is not its key's current one is stale.
    order: std::collections::VecDeque<(PeerKey, u64)>,
    puts: u64,
    /// `--pmtu`, 0 to learn each flow's.
    default: u32,
}

impl psn::PeerNotes for HostNotes {
    fn get(&self, key: &PeerKey) -> Option<u32> {
        self.notes.get(key).map(|n| n.0)
    }
    fn put(&mut self, key: &PeerKey, note: u32) {
        self.puts += 1;
        self.notes.insert(*key, (note, self.puts));
        self.order.push_back((*key, self.puts));
        while self.notes.len() > maps::DEFAULT_MAX_NOTES as usize
            || self.order.len() > 2 * maps::DEFAULT_MAX_NOTES as usize
        {
            let Some((old, seq)) = self.order.pop_front() else { break };
            if self.notes.get(&old).is_some_and(|n| n.1 == seq) {
                self.notes.remove(&old);
            }
        }
    }
    fn take_rnr(&mut self, key: &PeerKey) -> bool {
        let rnr = self.notes.get(key).is_some_and(|n| n.0 == psn::NOTE_RNR);
        if rnr {
            self.notes.remove(key);
        }
        rnr
    }
    fn default_pmtu(&self) -> u32 {
        self.default
    }
}

#[derive(Debug)]
pub struct Engine {
    pub sources: Vec<Source>,
    pub classes: [u64; FrameClass::COUNT],
    pub frames: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// Offline: frames per 30-day period of their timestamps, (first, last, frames), to tell
    /// a capture's span from timestamps that cannot be right ([`Engine::settle_span`]).
    periods: Vec<(u64, (u64, u64, u64))>,
    /// The index in `periods` of the last frame's period (consecutive frames share one).
    period_hit: usize,
    /// Frames whose timestamps lie more than a year from the capture's bulk (left out of its
    /// span).
    pub implausible_timestamps: u64,
    /// Frames `--filter` left out (not in `frames` nor `classes`).
    pub filtered: u64,
    /// Flows folded into an aggregate ([`Engine::fold_idle`]).
    pub folded: flows::Folded,
    pub flows: FlowTable,
    pub pfc: PfcTable,
    pub dropped: BTreeMap<DropReason, u64>,
    pub visibility: Visibility,
    /// Set when some input ended early (truncated file); the report is partial.
    pub partial: bool,
    /// Live with `--nic-counters`: the NIC's counters over the run so far.
    pub nic: Option<crate::model::Nic>,
    /// Notes between connections' two directions (the kernel's notes map, offline).
    notes: HostNotes,
    /// Flows kept, at most (`--max-flows`); the frames of others count as `flow_map_full`.
    pub max_flows: usize,
    /// False when live timeline records are off (`--no-timeline`): the packet-resolution
    /// analyses then have no input, and the report says so.
    pub timeline: bool,
    /// Offline with `--evidence`: note each flow's first trouble ([`FlowStats::first_event_ns`],
    /// where its evidence starts); off, no frame pays for it.
    pub first_events: bool,
    /// Offline with `--edges`: each flow's first frames for `merge` in time
    /// ([`edges::Heads`]); off, no frame pays for it.
    pub heads: Option<edges::Heads>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::with_pmtu(0)
    }
}

impl Engine {
    pub fn new() -> Self {
        Self::default()
    }

    /// An engine whose flows' PMTU is `pmtu_default` until they show their own (0: learned).
    pub fn with_pmtu(pmtu_default: u32) -> Self {
        Engine {
            sources: Vec::new(),
            classes: [0; FrameClass::COUNT],
            frames: 0,
            first_ns: None,
            last_ns: None,
            periods: Vec::new(),
            period_hit: 0,
            implausible_timestamps: 0,
            filtered: 0,
            folded: flows::Folded::default(),
            flows: FlowTable::default(),
            pfc: PfcTable::default(),
            dropped: BTreeMap::new(),
            visibility: Visibility::default(),
            partial: false,
            nic: None,
            notes: HostNotes { notes: FxHashMap::default(), order: Default::default(), puts: 0, default: pmtu_default },
            max_flows: usize::MAX,
            timeline: true,
            first_events: false,
            heads: None,
        }
    }

    /// Registers an input and returns its index for [`FrameMeta::source`].
    pub fn add_source(&mut self, kind: &str, name: &str, label: &str) -> u16 {
        self.sources.push(Source { kind: kind.into(), name: name.into(), label: label.into(), xdp: None });
        (self.sources.len() - 1) as u16
    }

    /// Accounts one classified frame (its counters; the analyses get it from the pipeline).
    /// Returns the index of its flow in [`Engine::flows`] (RoCE and CNP frames of a flow kept).
    #[inline]
    pub fn observe(&mut self, meta: FrameMeta, s: &PacketSummary) -> Option<u32> {
        let class = s.class();
        self.classes[class as usize] += 1;
        self.frames += 1;
        self.first_ns = Some(self.first_ns.map_or(meta.ts_ns, |t| t.min(meta.ts_ns)));
        self.last_ns = Some(self.last_ns.map_or(meta.ts_ns, |t| t.max(meta.ts_ns)));
        self.count_period(meta.ts_ns);
        if s.encap != 0 {
            self.visibility.encapsulated += 1;
        }
        if s.cut != 0 {
            self.visibility.cut_copies += 1;
        }
        if s.bth_cut != 0 {
            self.visibility.bth_cut += 1;
            self.visibility.bth_needs = self.visibility.bth_needs.max(s.payload_off);
        }
        match class {
            FrameClass::Roce | FrameClass::Cnp => {
                if s.ext_missing != 0 {
                    self.visibility.ext_cut += 1;
                }
                let Some(i) = self.flows.index_within(FlowKey::from_summary(s), self.max_flows) else {
                    // As the XDP program with its flow table full: counted, not kept.
                    self.count_drop(DropReason::FlowMapFull, 1);
                    return None;
                };
                let stats = self.flows.at_index_mut(i);
                stats.observe(meta, s);
                let before = (self.first_events && stats.first_event_ns == 0).then(|| anomalies(&stats.psn));
                if class == FrameClass::Roce {
                    // As the XDP program does, with the same function.
                    psn::account(&mut stats.psn, s, &mut self.notes);
                    if let Some(h) = self.heads.as_mut() {
                        h.observe(i, meta.ts_ns, s, &stats.psn.seq);
                    }
                }
                if let Some(before) = before
                    && (s.ecn == 3 || class == FrameClass::Cnp || anomalies(&stats.psn) != before)
                {
                    stats.first_event_ns = meta.ts_ns.max(1);
                }
                return Some(i as u32);
            }
            FrameClass::Pfc | FrameClass::Pause => self.pfc.observe(meta, s),
            _ => {}
        }
        None
    }

    /// The MTU the READ RESPONSE of flow `key`'s pending READ showed (`seq.read_pending`),
    /// when its note is here.
    pub fn read_note(&self, key: &FlowKey, seq: &psn::PsnSeq) -> Option<u32> {
        use psn::PeerNotes;
        let at = PeerKey { requester: key.src, responder: key.dst, psn: seq.read_psn };
        (seq.read_pending != 0).then(|| self.notes.get(&at)).flatten().filter(|m| *m >= psn::MIN_MTU)
    }

    /// The RNR NAK notes still held, by (requester, responder): the PSNs of requests refused
    /// that a repeat has not taken yet (`--edges`: the next capture's repeats are refused ones).
    pub fn rnr_notes(&self) -> FxHashMap<([u8; 16], [u8; 16]), Vec<u32>> {
        let mut by: FxHashMap<([u8; 16], [u8; 16]), Vec<u32>> = FxHashMap::default();
        for (k, (note, _)) in &self.notes.notes {
            if *note == psn::NOTE_RNR {
                by.entry((k.requester, k.responder)).or_default().push(k.psn);
            }
        }
        by.values_mut().for_each(|v| v.sort_unstable());
        by
    }

    /// Live, bounding memory under churn: when more than `keep` flows are idle (not in
    /// `active`, the kernel's flow table), folds the oldest of them (by last packet) into
    /// [`Engine::folded`] until `keep` × 3/4 are left, and returns their keys (the analyses
    /// forget them too). Their packets and bytes stay in the totals of the folded aggregate.
    pub fn fold_idle(&mut self, keep: usize, active: &FxHashSet<FlowKey>) -> FxHashSet<FlowKey> {
        let idle = self.flows.len().saturating_sub(active.len());
        if idle <= keep {
            return FxHashSet::default();
        }
        let mut candidates: Vec<(u64, FlowKey)> =
            self.flows.iter().filter(|(k, _)| !active.contains(*k)).map(|(k, s)| (s.last_ns, *k)).collect();
        candidates.sort_unstable();
        let n = candidates.len().saturating_sub(keep * 3 / 4);
        let gone: FxHashSet<FlowKey> = candidates[..n].iter().map(|(_, k)| *k).collect();
        for (_, s) in self.flows.iter().filter(|(k, _)| gone.contains(*k)) {
            self.folded.flows += 1;
            self.folded.packets += s.packets;
            self.folded.bytes += s.bytes;
        }
        self.flows.remove(&gone);
        gone
    }

    /// A copy of a frame counted already (another vantage point saw it): a frame of the
    /// capture and of its input's byte share, not one more packet of its flow.
    /// `frame_len` is given for the first copy of its input (its byte share counts it once).
    pub fn observe_copy(
        &mut self,
        source: u16,
        frame_len: Option<u32>,
        (encap, cut): (bool, bool),
        first: &PacketSummary,
    ) {
        self.classes[first.class() as usize] += 1;
        self.frames += 1;
        self.visibility.encapsulated += encap as u64;
        self.visibility.cut_copies += cut as u64;
        self.visibility.matched_copies += 1;
        if let Some(stats) = self.flows.get_mut(&FlowKey::from_summary(first)) {
            stats.sources |= crate::frames::source_bit(source);
            if let Some(len) = frame_len {
                stats.add_source_bytes(source, len as u64);
            }
        }
    }

    /// Counts `ts` in its period (sorted by period; the last one hit is tried first).
    #[inline]
    fn count_period(&mut self, ts: u64) {
        let period = ts / PERIOD_NS;
        let i = match self.periods.get(self.period_hit) {
            Some((p, _)) if *p == period => self.period_hit,
            _ => match self.periods.binary_search_by_key(&period, |(p, _)| *p) {
                Ok(i) => i,
                Err(i) => {
                    self.periods.insert(i, (period, (ts, ts, 0)));
                    i
                }
            },
        };
        self.period_hit = i;
        let (_, p) = &mut self.periods[i];
        *p = (p.0.min(ts), p.1.max(ts), p.2 + 1);
    }

    /// Offline, after the last frame: the capture's span is that of its bulk, the periods whose
    /// timestamps lie within a year of each other that hold the most frames; frames outside it
    /// (a clock at 1970, a year field gone wrong) are counted, not taken as a 540-year capture.
    pub fn settle_span(&mut self) {
        let mut groups: Vec<(u64, u64, u64)> = Vec::new();
        for &(_, (first, last, n)) in &self.periods {
            match groups.last_mut() {
                Some(g) if first.saturating_sub(g.1) <= YEAR_NS => *g = (g.0, last, g.2 + n),
                _ => groups.push((first, last, n)),
            }
        }
        let Some(&(first, last, n)) = groups.iter().max_by_key(|g| g.2) else { return };
        if groups.len() > 1 {
            self.first_ns = Some(first);
            self.last_ns = Some(last);
            self.implausible_timestamps = self.frames.saturating_sub(n);
        }
    }

    pub fn count_drop(&mut self, reason: DropReason, n: u64) {
        *self.dropped.entry(reason).or_default() += n;
    }

    pub fn class_count(&self, c: FrameClass) -> u64 {
        self.classes[c as usize]
    }
}
