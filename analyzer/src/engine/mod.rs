//! The engine: one analysis over every input, offline or live. It receives classified frames
//! (or, live, the kernel's per-flow counters) and keeps what the report needs: frame classes,
//! per-flow counters, PFC / PAUSE per sender, the capture's time span and every drop.

pub mod flows;
pub mod live;
pub mod pfc;

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;
use analyzer_common::psn::{self, PathKey};
use analyzer_common::record::Record;
use analyzer_common::{FrameClass, PacketSummary};
use rustc_hash::FxHashMap;

use crate::analyses::{Analyses, Config};

pub use flows::{FlowStats, FlowTable};
pub use pfc::PfcTable;

/// Why a frame or record was not analysed. Every reason is always reported, zero or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropReason {
    /// The capture file ended inside a record.
    TruncatedRecord,
    /// Live: the kernel flow map was full, the frame's flow was not counted.
    FlowMapFull,
    /// Live: the ring buffer had no room for an event.
    RingbufFull,
    /// Live: a flow's second transport, DSCP or PCP found the extra-value map full.
    ExtraMapFull,
    /// Live: a PFC/PAUSE sender and priority found the PFC map full.
    PfcMapFull,
    /// Live: a RoCE frame's flow found the PSN map full (its PSN/AETH not accounted).
    PsnMapFull,
    /// Live: a path's PMTU found the PMTU map full (READ REQUESTs there assume `--pmtu`).
    PmtuMapFull,
    /// Live: a timeline record found the timeline ring buffer full (RTT, CE/CNP timing and
    /// incast miss that frame).
    TimelineFull,
}

impl DropReason {
    pub const ALL: [DropReason; 8] = [
        DropReason::TruncatedRecord,
        DropReason::FlowMapFull,
        DropReason::RingbufFull,
        DropReason::ExtraMapFull,
        DropReason::PfcMapFull,
        DropReason::PsnMapFull,
        DropReason::PmtuMapFull,
        DropReason::TimelineFull,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TruncatedRecord => "truncated_record",
            DropReason::FlowMapFull => "flow_map_full",
            DropReason::RingbufFull => "ringbuf_full",
            DropReason::ExtraMapFull => "extra_map_full",
            DropReason::PfcMapFull => "pfc_map_full",
            DropReason::PsnMapFull => "psn_map_full",
            DropReason::PmtuMapFull => "pmtu_map_full",
            DropReason::TimelineFull => "timeline_full",
        }
    }
}

/// Metadata of a frame that is not in its summary.
#[derive(Debug, Clone, Copy)]
pub struct FrameMeta {
    pub ts_ns: u64,
    /// Index of the input (capture file or interface) in [`Engine::sources`].
    pub source: u16,
}

/// A capture source as the report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// "pcap" or "live".
    pub kind: String,
    pub name: String,
    pub label: String,
}

/// Frames that were mirrored copies or were cut by the snap length (for the visibility notes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visibility {
    pub encapsulated: u64,
    pub ext_cut: u64,
    /// Live: RDMA devices of the interface, set when no RoCE was seen on it.
    pub rdma_devices: Vec<String>,
}

#[derive(Debug)]
pub struct Engine {
    pub sources: Vec<Source>,
    pub classes: [u64; FrameClass::COUNT],
    pub frames: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub flows: FlowTable,
    pub pfc: PfcTable,
    pub dropped: BTreeMap<DropReason, u64>,
    pub visibility: Visibility,
    /// Set when some input ended early (truncated file); the report is partial.
    pub partial: bool,
    /// Live with `--nic-counters`: the NIC's counters over the run so far.
    pub nic: Option<crate::report::Nic>,
    /// Largest FIRST/MIDDLE payload per path (the kernel's PMTU map, offline).
    pmtu: FxHashMap<PathKey, u32>,
    pub analyses: Analyses,
    /// False when live timeline records are off (`--no-timeline`): the packet-resolution
    /// analyses then have no input, and the report says so.
    pub timeline: bool,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::with_config(Config::default())
    }
}

impl Engine {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_config(config: Config) -> Self {
        Engine {
            sources: Vec::new(),
            classes: [0; FrameClass::COUNT],
            frames: 0,
            first_ns: None,
            last_ns: None,
            flows: FlowTable::default(),
            pfc: PfcTable::default(),
            dropped: BTreeMap::new(),
            visibility: Visibility::default(),
            partial: false,
            nic: None,
            pmtu: FxHashMap::default(),
            analyses: Analyses::new(config),
            timeline: true,
        }
    }

    /// Registers an input and returns its index for [`FrameMeta::source`].
    pub fn add_source(&mut self, kind: &str, name: &str, label: &str) -> u16 {
        self.sources.push(Source { kind: kind.into(), name: name.into(), label: label.into() });
        (self.sources.len() - 1) as u16
    }

    /// Accounts one classified frame.
    #[inline]
    pub fn observe(&mut self, meta: FrameMeta, s: &PacketSummary) {
        let class = s.class();
        self.classes[class as usize] += 1;
        self.frames += 1;
        self.first_ns = Some(self.first_ns.map_or(meta.ts_ns, |t| t.min(meta.ts_ns)));
        self.last_ns = Some(self.last_ns.map_or(meta.ts_ns, |t| t.max(meta.ts_ns)));
        if s.encap != 0 {
            self.visibility.encapsulated += 1;
        }
        match class {
            FrameClass::Roce | FrameClass::Cnp => {
                if s.ext_missing != 0 {
                    self.visibility.ext_cut += 1;
                }
                let stats = self.flows.get_or_insert(FlowKey::from_summary(s));
                let pmtu = if class == FrameClass::Roce {
                    // As the XDP program: read the path's PMTU for a READ REQUEST, raise it
                    // when the flow shows a larger FIRST/MIDDLE payload than before.
                    let known = if psn::reads_path_pmtu(s.opcode) {
                        self.pmtu.get(&PathKey::of(s)).copied().unwrap_or(self.analyses.config.pmtu)
                    } else {
                        0
                    };
                    if stats.psn.publishes_pmtu(s) {
                        let e = self.pmtu.entry(PathKey::of(s)).or_default();
                        *e = (*e).max(s.payload_len);
                    }
                    known
                } else {
                    0
                };
                stats.observe(meta, s, pmtu);
                self.analyses.observe(&Record::from_summary(meta.ts_ns, s));
            }
            FrameClass::Pfc | FrameClass::Pause => {
                self.pfc.observe(meta, s);
                self.analyses.observe_pause(meta.ts_ns, s);
            }
            _ => {}
        }
    }

    /// Live: a timeline record from the kernel (its timestamp already wall-clock). The frame's
    /// counters are in the kernel maps; the record feeds the packet-resolution analyses.
    pub fn observe_record(&mut self, r: &Record) {
        self.analyses.observe(r);
    }

    /// A CM MAD (UD SEND ONLY to QP 1) from `src` to `dst`: REQ and REP pair QPs for RTT.
    pub fn observe_cm(&mut self, src: &[u8; 16], dst: &[u8; 16], mad: &[u8]) {
        if let Some(cm) = analyzer_common::wire::cm::Repr::parse(mad) {
            self.analyses.rtt.cm(src, dst, &cm);
        }
    }

    /// Live: a PFC or PAUSE frame the kernel sent with its precise timestamp. Its counters are
    /// in the kernel maps already.
    pub fn observe_event(&mut self, meta: FrameMeta, event: &analyzer_common::maps::Event) {
        self.analyses.observe_pause(meta.ts_ns, &event.summary);
    }

    pub fn count_drop(&mut self, reason: DropReason, n: u64) {
        *self.dropped.entry(reason).or_default() += n;
    }

    pub fn class_count(&self, c: FrameClass) -> u64 {
        self.classes[c as usize]
    }
}
