//! The XDP program's maps: names, key and value layouts, counter indices. Shared by the
//! program (which fills them) and the host agent (which reads them), so both agree on every
//! byte. All types are `#[repr(C)]` without implicit padding.

use crate::flow::FlowKey;
use crate::summary::PacketSummary;
pub use crate::summary::{UNTAGGED, pcp_of};

/// An earlier release's shared hash map [`crate::flow::FlowKey`] → [`FlowEntry`] (this build
/// keeps flows in [`crate::table`]); the loader still sizes it for `--compare` runs.
pub const MAP_FLOWS: &str = "FLOWS";
pub const MAP_FLOW_EXTRA: &str = "FLOW_EXTRA";
pub const MAP_PFC: &str = "PFC";
/// Per-CPU array of [`PFC_SLOTS`] [`PfcSlot`]s: each CPU's PFC/PAUSE counters of the
/// (sender, priority) pairs that took a slot first; the others' are in [`MAP_PFC`].
pub const MAP_PFC_SLOTS: &str = "PFC_SLOTS";
pub const MAP_COUNTERS: &str = "COUNTERS";
pub const MAP_EVENTS: &str = "EVENTS";
/// LRU hash map [`crate::psn::PeerKey`] → note ([`crate::psn::PeerNotes`]): the MTU a READ
/// RESPONSE showed, or an RNR NAK, for the request at that PSN. LRU: a note is a hint for the
/// peer flow's next request, and an evicted one only means the PSN alone decides.
pub const MAP_NOTES: &str = "NOTES";
/// Array of [`crate::vantage::SightSlot`] (identity and sighting): frames seen in mirrored
/// copies, to count a frame that several switches mirror once.
pub const MAP_SIGHTINGS: &str = "SIGHTINGS";
/// Read-only u64 global: copies of one frame are matched within this (`--match-window`).
pub const GLOBAL_MATCH_WINDOW_NS: &str = "MATCH_WINDOW_NS";
/// Ring buffer of [`crate::record::CompactRecord`]s, one per RoCE/CNP frame when enabled, for the
/// CPUs without a log of their own in [`MAP_TIMELINE_LOG`].
pub const MAP_TIMELINE: &str = "TIMELINE";
/// Ring buffer of what names the timeline's flows: a [`FlowId`] for each flow entry the
/// program inserts (the key its records' id stands for), and a [`KeyedRecord`] for a frame
/// whose flow got no entry (the flow table full), which the agent names by an id of its
/// own ([`AGENT_IDS`]). The agent reads it after the logs and before it hands their records
/// on, so the id of every record it hands on has been read.
pub const MAP_FLOW_IDS: &str = "FLOW_IDS";
/// 1 MiB: 18 724 new flows (48 bytes and the ring's 8-byte header each) between two drains.
pub const DEFAULT_FLOW_IDS_BYTES: u32 = 1 << 20;
/// An earlier release's queue of the flow ids not given (this build's ids are its flow slots':
/// [`crate::table`]); the loader still fills it for `--compare` runs.
pub const MAP_FREE_FLOW_IDS: &str = "FREE_FLOW_IDS";

/// The ids the agent gives the records of [`KeyedRecord`]s have this bit set (the kernel's,
/// its flow slots' indices plus one, are below it).
pub const AGENT_IDS: u32 = 1 << 31;

/// The kinds of the items of [`MAP_FLOW_IDS`] (their first byte).
pub mod ids_kind {
    /// [`super::FlowId`].
    pub const FLOW: u8 = 1;
    /// [`super::KeyedRecord`].
    pub const RECORD: u8 = 2;
}

/// A flow's id and key: the program inserted the flow's entry with this id.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowId {
    /// [`ids_kind::FLOW`].
    pub kind: u8,
    pub _pad: [u8; 3],
    pub id: u32,
    pub key: crate::flow::FlowKey,
}

const _: () = assert!(core::mem::size_of::<FlowId>() == 48);

/// A whole timeline record, for a frame whose flow has no entry or no id to name it by.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyedRecord {
    /// [`ids_kind::RECORD`].
    pub kind: u8,
    pub _pad: [u8; 7],
    pub record: crate::record::Record,
}

const _: () = assert!(core::mem::size_of::<KeyedRecord>() == 80);

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (sizes asserted above).
unsafe impl aya::Pod for FlowId {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for KeyedRecord {}

/// Each CPU's timeline log: an array of [`crate::record::CompactRecord`]s that the agent maps into its
/// memory (`BPF_F_MMAPABLE`), [`TIMELINE_SLOTS`] per CPU, CPU `c`'s from index `c ×
/// TIMELINE_SLOTS`. A CPU writes its frame's record at its head (modulo the slots) and then
/// advances the head ([`MAP_TIMELINE_HEADS`]): no lock, no reservation, nothing another CPU
/// writes. The log laps: a record the agent has not read when its CPU comes round again is
/// overwritten, and the agent counts it (`timeline_full`) from the head it reads. The CPUs
/// below [`GLOBAL_TIMELINE_CPUS`] have one; the others write to [`MAP_TIMELINE`].
///
/// Order: the agent reads the head, then the records before it, then the head again (a record
/// the writer may have reached meanwhile is dropped and counted: so is a full log's oldest,
/// where the CPU's next record goes, as it cannot be told from one being written). That needs the record's
/// stores to be visible before the head's: x86-64's total store order, the architecture this
/// object is built for.
pub const MAP_TIMELINE_LOG: &str = "TIMELINE_LOG";
/// The CPUs' log heads: records each CPU has written to its log, at index `c ×`
/// [`HEAD_STRIDE`] (one cache line a CPU, so that no two CPUs write to one line).
pub const MAP_TIMELINE_HEADS: &str = "TIMELINE_HEADS";
/// u64s between two CPUs' heads: 64 bytes.
pub const HEAD_STRIDE: u32 = 8;
/// Read-only u32 global: the CPUs with a log of their own (CPU numbers below it), set by the
/// loader; 0 (the default) sends every record to [`MAP_TIMELINE`].
pub const GLOBAL_TIMELINE_CPUS: &str = "TIMELINE_CPUS";
/// Each CPU's event log: [`Event`]s (PFC, PAUSE, mirrored-copy sightings), [`EVENT_SLOTS`]
/// per CPU, written and read as [`MAP_TIMELINE_LOG`] is, with its heads in
/// [`MAP_EVENT_HEADS`]. The CPUs below [`GLOBAL_EVENT_CPUS`] have one; the others, and every
/// CM event (rare, another layout), write to [`MAP_EVENTS`].
pub const MAP_EVENT_LOG: &str = "EVENT_LOG";
pub const MAP_EVENT_HEADS: &str = "EVENT_HEADS";
/// Read-only u32 global: the CPUs with an event log of their own, set by the loader.
pub const GLOBAL_EVENT_CPUS: &str = "EVENT_CPUS";
/// Events of each CPU's log (232 bytes each: 0.95 MB a CPU).
pub const EVENT_SLOTS: u32 = 4096;
const _: () = assert!(EVENT_SLOTS.is_power_of_two());
/// CPUs with a timeline or event log of their own, at most.
pub const MAX_TIMELINE_CPUS: u32 = 1024;
/// Records of each CPU's log when the loader sets none ([`GLOBAL_TIMELINE_SLOTS`]), and the
/// fewest it gives: 1 MiB of 32-byte records, 43 ms of a 759 k frames/s stream on one CPU
/// (RSS sends a mirror port's traffic to few queues), against the agent's 10 ms drains.
pub const TIMELINE_SLOTS: u32 = 32768;
const _: () = assert!(TIMELINE_SLOTS.is_power_of_two());
/// Records of each CPU's log at most: 8 MiB, 345 ms of that stream. The margin is for the
/// agent's thread waiting for a CPU: at 494 k frames/s from two senders (both CPUs busy with
/// XDP in softirq), 1 MiB logs lapped and lost 10 % of the records (`cargo xtask bench-kernel
/// --only soak`, BENCHMARKS.md); 8 MiB lost none.
pub const TIMELINE_SLOTS_MAX: u32 = 262144;
const _: () = assert!(TIMELINE_SLOTS_MAX.is_power_of_two());
/// The bytes all CPUs' timeline logs take together, at most, where each CPU can keep more than
/// [`TIMELINE_SLOTS`]: a machine with many CPUs spreads the same traffic over more logs.
pub const TIMELINE_LOGS_BUDGET: u64 = 64 << 20;
/// Read-only u32 global: records of each CPU's log (a power of two), set by the loader to
/// [`timeline_slots`] of the CPUs it gives a log.
pub const GLOBAL_TIMELINE_SLOTS: &str = "TIMELINE_SLOTS";

/// Records of each CPU's log for `cpus` logs: the largest power of two within
/// [`TIMELINE_LOGS_BUDGET`] for them all, from [`TIMELINE_SLOTS`] to [`TIMELINE_SLOTS_MAX`]
/// (8 MiB a CPU up to 8 CPUs, 4 MiB at 16, 1 MiB from 64).
pub const fn timeline_slots(cpus: u32) -> u32 {
    let record = core::mem::size_of::<crate::record::CompactRecord>() as u64;
    let per_cpu = TIMELINE_LOGS_BUDGET / record / if cpus == 0 { 1 } else { cpus as u64 };
    let mut slots = TIMELINE_SLOTS_MAX;
    while slots > TIMELINE_SLOTS && (slots as u64) > per_cpu {
        slots /= 2;
    }
    slots
}

/// Read-only global of the XDP program: 1 (default) writes timeline records, 0 does not.
pub const GLOBAL_TIMELINE_ON: &str = "TIMELINE_ON";
/// Read-only u32 global: the PMTU of flows that have not shown their own (`--pmtu`); 0 (the
/// default) learns it per flow.
pub const GLOBAL_PMTU_DEFAULT: &str = "PMTU_DEFAULT";
/// Whether `--filter` is given (then the one entry of [`MAP_FILTER`] holds it).
pub const GLOBAL_FILTER_ON: &str = "FILTER_ON";
pub const MAP_FILTER: &str = "FILTER";
/// Per-CPU [`Scratch`] of a program run: the summary of the frame being classified (the last
/// one when the program returns; the kernel-equals-host test reads it).
pub const MAP_SCRATCH: &str = "SCRATCH";
/// `--evidence`: whether the program copies the frames the agent asks for.
pub const GLOBAL_EVIDENCE_ON: &str = "EVIDENCE_ON";
/// Flows whose frames are copied, each until its deadline (kernel monotonic ns).
pub const MAP_EVIDENCE_FLOWS: &str = "EVIDENCE_FLOWS";
/// The copy controls, by [`evidence_ctl`] index.
pub const MAP_EVIDENCE_CTL: &str = "EVIDENCE_CTL";
/// The ring the copies go to ([`EvidenceFrame`]).
pub const MAP_EVIDENCE: &str = "EVIDENCE";
pub const DEFAULT_EVIDENCE_BYTES: u32 = 4 << 20;
pub const DEFAULT_MAX_EVIDENCE_FLOWS: u32 = 4096;
pub const PROGRAM: &str = "roce_analyzer";
/// The same program without multi-buffer support (`xdp` instead of `xdp.frags`), for drivers
/// that refuse multi-buffer programs.
pub const PROGRAM_SINGLE: &str = "roce_analyzer_single";
/// A program that only returns XDP_PASS: the baseline of the kernel benchmark.
pub const PROGRAM_BASELINE: &str = "xdp_pass_baseline";

/// Stages of a RoCE/CNP frame's accounting. The program runs them all; `cargo xtask
/// bench-kernel` builds variants with fewer (`--cfg roce_stages="classify"` or `"flow"`) to
/// show what each costs a frame.
pub mod stage {
    /// The flow's counters (packets, bytes, ECN, opcodes, DSCP, PCP).
    pub const FLOW: u8 = 1 << 0;
    /// The flow's PSN state (sequence, NAKs, the responder model).
    pub const PSN: u8 = 1 << 1;
    pub const ALL: u8 = FLOW | PSN;
}

pub const DEFAULT_MAX_FLOWS: u32 = 65536;
/// Not preallocated: a flow's entries here are its anomalies and rare values.
pub const DEFAULT_MAX_EXTRA: u32 = 65536;
pub const DEFAULT_MAX_PFC: u32 = 4096;
pub const DEFAULT_RINGBUF_BYTES: u32 = 1 << 20;
pub const DEFAULT_MAX_NOTES: u32 = 16384;
pub const DEFAULT_MAX_SIGHTINGS: u32 = 65536;
/// 8 MiB: 209 715 records (32 bytes and the ring's 8-byte header each), 276 ms of a 759 k
/// frames/s stream between two 10 ms drains.
pub const DEFAULT_TIMELINE_BYTES: u32 = 8 << 20;
/// Bytes of a frame the XDP program copies for evidence, at most (`--evidence-snaplen`): more
/// than any Ethernet frame XDP is given (a 9 KB jumbo frame in several buffers included), so
/// evidence holds whole frames, which Wireshark dissects without calling them malformed. The
/// program assembles a copy in a per-CPU [`EvidenceFrame`] and puts only its head and the
/// frame's bytes on the ring.
pub const EVIDENCE_MAX_SNAPLEN: usize = 16384;
// The XDP program bounds copy lengths by masking with it minus one.
const _: () = assert!(EVIDENCE_MAX_SNAPLEN.is_power_of_two());

/// Indices of the per-CPU global counter array: one per [`crate::FrameClass`], then losses
/// and visibility counters.
pub mod counter {
    use crate::FrameClass;
    /// A RoCE/CNP frame whose flow could not be inserted: the flow table was full.
    pub const FLOW_MAP_FULL: u32 = FrameClass::COUNT as u32;
    /// A value outside a flow's primary transport/DSCP/PCP that found the extra map full.
    pub const EXTRA_MAP_FULL: u32 = FLOW_MAP_FULL + 1;
    /// A PFC/PAUSE (sender, priority) that found the PFC map full.
    pub const PFC_MAP_FULL: u32 = FLOW_MAP_FULL + 2;
    /// An event that found the event ring buffer full (the agent adds the events its CPU's
    /// log overwrote before they were read).
    pub const RINGBUF_FULL: u32 = FLOW_MAP_FULL + 3;
    /// RoCE frames whose extended headers were cut off.
    pub const EXT_CUT: u32 = FLOW_MAP_FULL + 4;
    /// Frames that were mirrored copies (GRE/ERSPAN).
    pub const ENCAPSULATED: u32 = FLOW_MAP_FULL + 5;
    /// Events written to the event ring buffer (the agent adds those of the CPUs' logs: their
    /// heads).
    pub const EVENTS: u32 = FLOW_MAP_FULL + 6;
    /// A RoCE frame whose flow could not be inserted (the flow table was full, [`FLOW_MAP_FULL`]
    /// counts it too): its PSN/AETH were not accounted.
    pub const PSN_MAP_FULL: u32 = FLOW_MAP_FULL + 7;
    /// A timeline record that found the shared timeline ring full (the agent adds the records
    /// its CPU's log overwrote before they were read).
    pub const TIMELINE_FULL: u32 = FLOW_MAP_FULL + 8;
    /// Timeline records written to the shared ring (the agent adds those of the CPUs' logs:
    /// their heads).
    pub const RECORDS: u32 = FLOW_MAP_FULL + 9;
    /// Frames that were copies cut short (fewer bytes than their IP header states).
    pub const CUT_COPIES: u32 = FLOW_MAP_FULL + 10;
    /// RoCE frames cut before the end of their BTH.
    pub const BTH_CUT: u32 = FLOW_MAP_FULL + 11;
    /// Mirrored copies of a frame already counted (another origin sent it within the window).
    pub const MATCHED_COPIES: u32 = FLOW_MAP_FULL + 12;
    /// Frames `--filter` left out (counted, not analysed).
    pub const FILTERED: u32 = FLOW_MAP_FULL + 13;
    /// Frames copied for evidence.
    pub const EVIDENCE: u32 = FLOW_MAP_FULL + 14;
    /// Frames to copy for evidence that found the evidence ring full.
    pub const EVIDENCE_FULL: u32 = FLOW_MAP_FULL + 15;
    /// Sightings of mirrored copies given up within the match window to make room in their
    /// bucket ([`crate::vantage::SightSlot`]): a later copy of such a frame counts as a frame.
    pub const SIGHTINGS_EVICTED: u32 = FLOW_MAP_FULL + 16;
    pub const COUNT: u32 = FLOW_MAP_FULL + 17;
}

/// The per-CPU scratch of one run of the XDP program, in one map so that a frame costs one
/// lookup for it: the summary of the frame being classified (192 bytes: too large for the
/// stack budget) and the slot through which the program hides values from the verifier
/// (`FrameBytes::widen`, copy lengths).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scratch {
    pub summary: PacketSummary,
    pub widen: u64,
}

const _: () = assert!(core::mem::size_of::<Scratch>() == core::mem::size_of::<PacketSummary>() + 8);

#[cfg(feature = "user")]
// SAFETY: repr(C), two integer-only fields, no implicit padding (size asserted above).
unsafe impl aya::Pod for Scratch {}

/// Opcodes a flow entry counts itself ([`FlowCounters::op_codes`]); a flow's further opcodes
/// are counted in the extra map. Six: a WRITE stream's FIRST, MIDDLE, LAST, ONLY and the two
/// with immediate data; the entry's other four bytes hold the flow's id.
pub const OP_SLOTS: usize = 6;

/// A flow's counters in the kernel's flow entry ([`FlowEntry`]).
///
/// A flow almost always uses one DSCP, one VLAN PCP and a handful of opcodes, so the entry
/// keeps the DSCP and PCP of its first packet with counts, and its first [`OP_SLOTS`] opcodes
/// with counts; anything else goes to the extra map ([`ExtraKey`]): one hash lookup per packet
/// in the common case. The u32 counters wrap; the host accumulates their differences between
/// polls.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowCounters {
    /// Sum of frame lengths.
    pub bytes: u64,
    /// Monotonic time of the first and last packet: the precise clock when the program writes
    /// timeline records (it reads that one for them anyway), else `bpf_ktime_get_coarse_ns`
    /// (CLOCK_MONOTONIC_COARSE, the kernel tick's resolution).
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u32,
    pub ack_req: u32,
    /// Indexed by ECN codepoint less one: ECT(1), ECT(0), CE (Not-ECT: [`FlowEntry::not_ect`]).
    pub ecn: [u32; 3],
    pub fecn: u32,
    pub becn: u32,
    /// Packets with DSCP `dscp`; with outer PCP `pcp` (or untagged, `pcp` = 8).
    pub dscp_packets: u32,
    pub pcp_packets: u32,
    /// Packets of opcode `op_codes[i]`, for the first `op_used` opcodes the flow showed.
    pub op_counts: [u32; OP_SLOTS],
    /// The flow's id, which its timeline records carry instead of its key
    /// ([`crate::record::CompactRecord`]): its slot's index plus one ([`crate::table`]),
    /// written when the flow is inserted, and announced with the key ([`FlowId`]).
    pub id: u32,
    pub op_codes: [u8; OP_SLOTS],
    pub op_used: u8,
    pub dscp: u8,
    pub pcp: u8,
    pub _pad0: u8,
    /// The CPU that handled the flow's last packet.
    pub cpu: u16,
    /// Packets handled on another CPU than the flow's previous one (saturating): the entry is
    /// shared by the CPUs without a lock, so a flow handled on two at once can lose counts.
    pub cpu_moves: u16,
    pub _pad: u16,
}

const _: () = assert!(core::mem::size_of::<FlowCounters>() == 104);

impl FlowCounters {
    pub const fn zeroed() -> Self {
        // SAFETY: integers only.
        unsafe { core::mem::zeroed() }
    }
}

/// The kernel's state of one flow, in its slot of the shared flow table ([`crate::table`]): its
/// counters, its PSN sequence state, and the PSN/AETH counters that a frame can move each
/// time: requests and ACKs, and those of a retransmission or of a frame the sender repeats
/// (the rest, which an anomaly moves once, are in the extra map: [`extra_kind::PSN`]).
/// One lookup per frame, and the same memory per flow on every collector: a per-CPU value
/// would be allocated for every possible CPU. 160 bytes, so that with its 40-byte key, its
/// tag and the table's slot in eight left over a flow takes 237 bytes.
///
/// The CPUs update it without a lock: a flow's frames arrive on one NIC queue (RSS), and a
/// flow seen on several CPUs is counted ([`FlowCounters::cpu_moves`]) and said in the report.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowEntry {
    pub counters: FlowCounters,
    /// Written for RoCE frames only (a CNP flow's stays zero).
    pub seq: crate::psn::PsnSeq,
    /// The counts of the PSN/AETH counters of [`ENTRY_PSN_COUNTERS`], in its order, wrapping.
    pub psn_counts: [u32; ENTRY_PSN_COUNTERS.len()],
    /// Not-ECT packets, wrapping (with [`FlowCounters::ecn`] every packet has its codepoint
    /// counted: a count derived from the others would be off for good after a read that saw
    /// one counter updated and not the other).
    pub not_ect: u32,
}

const _: () = assert!(core::mem::size_of::<FlowEntry>() == 160);

/// The PSN/AETH counters ([`crate::psn::tally`] indices) a frame can move every time, which a
/// flow entry keeps itself ([`FlowEntry::psn_counts`], in this order): requests, ACKs,
/// duplicates, duplicate requests, READ RESPONSEs out of sequence.
pub const ENTRY_PSN_COUNTERS: [u8; 5] = {
    use crate::psn::{aeth, count, responder, tally};
    [
        tally::count(count::REQUESTS),
        tally::aeth(aeth::ACK),
        tally::count(count::DUPLICATES),
        tally::responder(responder::DUPLICATE_REQUEST),
        tally::count(count::RESPONSE_OUT_OF_SEQUENCE),
    ]
};

impl FlowEntry {
    pub const fn zeroed() -> Self {
        // SAFETY: integers only.
        unsafe { core::mem::zeroed() }
    }

    /// The entry's count of a PSN/AETH counter ([`crate::psn::tally`] index); None: it is
    /// counted in the extra map.
    #[inline(always)]
    pub fn psn_count(&mut self, counter: u8) -> Option<&mut u32> {
        let i = ENTRY_PSN_COUNTERS.iter().position(|c| *c == counter)?;
        self.psn_counts.get_mut(i)
    }
}

pub mod extra_kind {
    /// `value` is an opcode past the entry's [`super::OP_SLOTS`].
    pub const OPCODE: u8 = 0;
    pub const DSCP: u8 = 1;
    pub const PCP: u8 = 2;
    /// Mirrored copies of a counted frame whose ECN differed from the previous copy's: `value`
    /// is `previous << 2 | this` (the flow's count moves from one to the other).
    pub const ECN_MOVED: u8 = 3;
    /// `value` is a PSN/AETH counter ([`crate::psn::tally`]) other than those the flow entry
    /// keeps ([`super::ENTRY_PSN_COUNTERS`]); the map's value is its count.
    pub const PSN: u8 = 4;
}

/// Key of the extra map: a flow, what is counted and its value; the map's value is a u64.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtraKey {
    pub flow: FlowKey,
    pub kind: u8,
    pub value: u8,
    pub _pad: [u8; 6],
}

const _: () = assert!(core::mem::size_of::<ExtraKey>() == 48);

/// PFC/PAUSE per sender and priority; priority 8 is 802.3x PAUSE (all priorities).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PfcKey {
    pub mac: [u8; 6],
    pub priority: u8,
    pub _pad: u8,
}

pub const PAUSE_PRIORITY: u8 = 8;

impl PfcKey {
    /// The key as one word, its padding byte set: never 0, which marks an empty [`PfcSlot`].
    #[inline(always)]
    pub fn word(&self) -> u64 {
        let m = self.mac;
        u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], self.priority, 1])
    }

    /// The key of a [`PfcKey::word`].
    pub fn from_word(w: u64) -> PfcKey {
        let b = w.to_le_bytes();
        PfcKey { mac: [b[0], b[1], b[2], b[3], b[4], b[5]], priority: b[6], _pad: 0 }
    }

    /// The [`PfcSlot`] a key's word may take (of [`PFC_SLOTS`], by multiply-shift).
    #[inline(always)]
    pub fn slot(word: u64) -> u32 {
        (word.wrapping_mul(crate::mix::M1) >> (64 - PFC_SLOTS.trailing_zeros())) as u32
    }
}

/// Slots of [`MAP_PFC_SLOTS`] on each CPU: more (sender, priority) pairs than a switch's
/// ports show pause frames on a mirror port at once; a pair whose slot another took goes to
/// the hash map.
pub const PFC_SLOTS: u32 = 64;
const _: () = assert!(PFC_SLOTS.is_power_of_two());

/// One CPU's counters of one (sender, priority), found by an array lookup: the hash map's
/// lookup (hashing the key and walking a bucket in the kernel's functions) was ≈ 20 ns of a
/// PFC frame's ≈ 100.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PfcSlot {
    /// [`PfcKey::word`] of the pair; 0 while the slot is free.
    pub key: u64,
    pub counters: PfcCounters,
}

const _: () = assert!(core::mem::size_of::<PfcSlot>() == 8 + core::mem::size_of::<PfcCounters>());

/// Pause frames of one sender and priority (or one 802.3x sender): the same counters in the
/// kernel map and in the host engine, updated by the same [`PfcCounters::record`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PfcCounters {
    /// Frames that carried a quanta for this priority.
    pub frames: u64,
    /// Quanta > 0: pause.
    pub xoff: u64,
    /// Quanta = 0: resume.
    pub xon: u64,
    /// Sum of quanta (512 bit times each).
    pub quanta: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl PfcCounters {
    /// Accounts one frame with `quanta` at time `now`.
    #[inline(always)]
    pub fn record(&mut self, now: u64, quanta: u16) {
        if self.frames == 0 || now < self.first_ns {
            self.first_ns = now;
        }
        if now > self.last_ns {
            self.last_ns = now;
        }
        self.frames += 1;
        if quanta > 0 {
            self.xoff += 1;
        } else {
            self.xon += 1;
        }
        self.quanta += quanta as u64;
    }

    /// Adds `other`'s frames (another CPU's, another map's) to these.
    pub fn merge(&mut self, other: &PfcCounters) {
        if other.frames == 0 {
            return;
        }
        self.first_ns = if self.frames == 0 { other.first_ns } else { self.first_ns.min(other.first_ns) };
        self.frames += other.frames;
        self.xoff += other.xoff;
        self.xon += other.xon;
        self.quanta += other.quanta;
        self.last_ns = self.last_ns.max(other.last_ns);
    }
}

pub mod event_kind {
    pub const PFC: u8 = 1;
    pub const PAUSE: u8 = 2;
    /// A CM MAD ([`super::CmEvent`]).
    pub const CM: u8 = 5;
    /// A mirrored RoCE frame (first copy or not), for the vantage points' hops: which origin
    /// sent it, when, with which ECN.
    pub const SIGHTING: u8 = 6;
}

/// A CM MAD (UD SEND ONLY to QP 1): its addresses and first bytes, parsed on the host by
/// [`crate::wire::cm::Repr::parse`]. `kind` sits where [`Event::kind`] does, so the agent
/// tells the two apart by it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmEvent {
    pub ts_ns: u64,
    pub kind: u8,
    pub ip_version: u8,
    pub _pad: [u8; 6],
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
    pub mad: [u8; crate::wire::cm::BYTES],
}

const _: () = assert!(core::mem::size_of::<CmEvent>() == 120);

/// A frame the analyses need at packet resolution, with its kernel timestamp.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    pub kind: u8,
    pub _pad: [u8; 7],
    pub summary: PacketSummary,
}

const _: () = assert!(core::mem::size_of::<Event>() == 232);

/// Indices of [`MAP_EVIDENCE_CTL`] (u64 each).
pub mod evidence_ctl {
    /// Kernel monotonic ns until which some flow of [`super::MAP_EVIDENCE_FLOWS`] is copied
    /// (before looking a flow up; 0: none).
    pub const FLOWS_UNTIL: u32 = 0;
    /// Kernel monotonic ns until which PFC and PAUSE frames are copied.
    pub const PAUSE_UNTIL: u32 = 1;
    /// Bytes of each frame copied, at most [`super::EVIDENCE_MAX_SNAPLEN`].
    pub const SNAPLEN: u32 = 2;
    pub const COUNT: u32 = 3;
}

/// A frame copied for evidence: its first `caplen` bytes, with what the agent needs to route
/// it to the findings it shows (the flow, the reply and PFC bits of [`crate::PacketSummary`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvidenceFrame {
    /// Kernel monotonic ns.
    pub ts_ns: u64,
    /// The frame's whole length.
    pub orig_len: u32,
    pub caplen: u16,
    /// A [`crate::FrameClass`].
    pub class: u8,
    /// The frame carries an AETH.
    pub aeth: u8,
    /// PFC class-enable vector (bit 8: an 802.3x PAUSE).
    pub priorities: u16,
    pub src_mac: [u8; 6],
    pub flow: FlowKey,
    pub data: [u8; EVIDENCE_MAX_SNAPLEN],
}

const _: () = assert!(core::mem::size_of::<EvidenceFrame>() == EvidenceFrame::HEAD + EVIDENCE_MAX_SNAPLEN);

/// The bit of an 802.3x PAUSE (all priorities) in [`EvidenceFrame::priorities`].
pub const PAUSE_PRIORITIES: u16 = 1 << 8;

impl EvidenceFrame {
    /// Bytes before [`EvidenceFrame::data`] (what the host's evidence spool keeps of a frame
    /// besides its bytes).
    pub const HEAD: usize = 64;

    pub const fn zeroed() -> Self {
        // SAFETY: integers and byte arrays only.
        unsafe { core::mem::zeroed() }
    }

    /// Its bytes, the head then `data` (repr(C) without padding: plain bytes).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: integers and byte arrays only, no padding (the size assertion above).
        unsafe { core::slice::from_raw_parts(self as *const Self as *const u8, core::mem::size_of::<Self>()) }
    }

    /// The same, to be written: any bytes are a valid value.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `as_bytes`; every bit pattern is a valid EvidenceFrame.
        unsafe { core::slice::from_raw_parts_mut(self as *mut Self as *mut u8, core::mem::size_of::<Self>()) }
    }

    /// Fills what routes a frame to the findings it shows (all but `caplen` and `data`) from
    /// its summary: the XDP program and the host's offline spool call this one function.
    ///
    /// # Safety
    /// `dst` must be valid for writes of one `EvidenceFrame`.
    #[inline(always)]
    pub unsafe fn fill_head(dst: *mut EvidenceFrame, ts_ns: u64, orig_len: u32, s: &PacketSummary, flow: &FlowKey) {
        // SAFETY: the caller guarantees `dst`; field by field (ring-buffer memory in the kernel).
        unsafe {
            (*dst).ts_ns = ts_ns;
            (*dst).orig_len = orig_len;
            (*dst).class = s.class;
            (*dst).aeth = (s.ext & crate::opcode::ext::AETH != 0) as u8;
            (*dst).priorities = match s.class() {
                crate::FrameClass::Pfc => s.pfc_enable & 0xFF,
                crate::FrameClass::Pause => PAUSE_PRIORITIES,
                _ => 0,
            };
            (*dst).src_mac = s.src_mac;
            (*dst).flow = *flow;
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: repr(C), integer fields only, no implicit padding (sizes asserted above).
    unsafe impl aya::Pod for FlowCounters {}
    // SAFETY: repr(C), integer-only fields, no implicit padding (size asserted above).
    unsafe impl aya::Pod for FlowEntry {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for ExtraKey {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for PfcKey {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for PfcCounters {}
    // SAFETY: repr(C), integers only, no implicit padding (size asserted with the type).
    unsafe impl aya::Pod for PfcSlot {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for Event {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for CmEvent {}
    // SAFETY: repr(C), integers and byte arrays, no padding.
    unsafe impl aya::Pod for EvidenceFrame {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfc_keys_as_words_and_their_slots() {
        let k = PfcKey { mac: [2, 0, 0, 0, 7, 1], priority: 3, _pad: 0 };
        assert_eq!(k.word(), 0x0103_0107_0000_0002);
        assert_eq!(PfcKey::from_word(k.word()), k);
        // The all-zero sender at priority 0 is not an empty slot's word.
        assert_ne!(PfcKey { mac: [0; 6], priority: 0, _pad: 0 }.word(), 0);
        // Every slot is within the array, and 8 priorities of 64 senders spread over them.
        let mut used = [0u32; PFC_SLOTS as usize];
        for sender in 0..64u8 {
            for priority in 0..8 {
                let w = PfcKey { mac: [2, 0, 0, 0, 1, sender], priority, _pad: 0 }.word();
                used[PfcKey::slot(w) as usize] += 1;
            }
        }
        assert!(used.iter().all(|&n| (2..=16).contains(&n)), "{used:?}");
    }

    #[test]
    fn pfc_counters_merge_like_one_sequence() {
        let (mut a, mut b, mut both) = (PfcCounters::default(), PfcCounters::default(), PfcCounters::default());
        for (t, q) in [(10, 5), (30, 0)] {
            a.record(t, q);
            both.record(t, q);
        }
        for (t, q) in [(5, 1), (20, 7)] {
            b.record(t, q);
            both.record(t, q);
        }
        let mut sum = PfcCounters::default();
        sum.merge(&a);
        sum.merge(&PfcCounters::default());
        sum.merge(&b);
        assert_eq!(sum, both);
    }
}

#[cfg(test)]
mod timeline_slots_tests {
    use super::*;

    #[test]
    fn logs_shrink_with_the_cpus_within_their_bounds() {
        // 64 MiB of 32-byte records is 2 Mi records: 8 MiB a CPU up to 8 CPUs.
        for (cpus, slots) in [
            (0, 262144),
            (1, 262144),
            (2, 262144),
            (8, 262144),
            (9, 131072),
            (16, 131072),
            (32, 65536),
            (64, 32768),
            (1024, 32768),
        ] {
            assert_eq!(timeline_slots(cpus), slots, "{cpus} CPUs");
        }
    }
}
