//! roce-analyzer's XDP program: classifies every frame with the shared classifier of
//! `analyzer_common` and accounts it in per-CPU maps (frame classes, per-flow counters, PFC per
//! sender and priority, losses), with a ring buffer of the frames the analyses need at packet
//! resolution. It always returns XDP_PASS and never writes to the frame.
#![no_std]
#![no_main]
// The flow table claims a slot with a compare-and-swap, which core exposes on this target only
// as an intrinsic.
#![feature(core_intrinsics)]
#![allow(internal_features)]
// Map keys are passed by reference so that the 40-byte key is not copied again.
#![allow(clippy::needless_borrows_for_generic_args)]
// The benchmark's lower-bound variants (`floor`) leave the accounting unused.
#![cfg_attr(
    any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock"),
    allow(dead_code, unused_imports)
)]

use analyzer_common::classify::MAX_HEADER_OFFSET;
use analyzer_common::filter::Filter;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{
    self, CmEvent, DEFAULT_EVIDENCE_BYTES, DEFAULT_FLOW_IDS_BYTES, DEFAULT_MAX_EVIDENCE_FLOWS, DEFAULT_MAX_EXTRA,
    DEFAULT_MAX_FLOWS, DEFAULT_MAX_NOTES, DEFAULT_MAX_PFC, DEFAULT_MAX_SIGHTINGS, DEFAULT_RINGBUF_BYTES,
    DEFAULT_TIMELINE_BYTES, EVENT_SLOTS, EVIDENCE_MAX_SNAPLEN, Event, EvidenceFrame, ExtraKey, FlowEntry, FlowId,
    HEAD_STRIDE, KeyedRecord, PfcCounters, PfcKey, PfcSlot, Scratch, TIMELINE_SLOTS, counter, event_kind, evidence_ctl,
    extra_kind, ids_kind, stage,
};
use analyzer_common::psn::{self, PeerKey, Tally};
use analyzer_common::record::{CompactRecord, Record, write_addresses};
use analyzer_common::table::{self, CHOICES, FlowSlot, Tags, WAYS, tag};
use analyzer_common::vantage::{self, FrameId, SIGHT_WAYS, SightSlot, Verdict};
use analyzer_common::wire::cm;
use analyzer_common::{FrameBytes, FrameClass, PacketSummary, classify};
use aya_ebpf::bindings::{BPF_F_MMAPABLE, BPF_F_NO_PREALLOC, BPF_RB_NO_WAKEUP, xdp_action};
use aya_ebpf::helpers::generated::{bpf_ktime_get_coarse_ns, bpf_xdp_get_buff_len, bpf_xdp_load_bytes};
use aya_ebpf::helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns};
use aya_ebpf::macros::{map, xdp};
use aya_ebpf::maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf};
use aya_ebpf::programs::XdpContext;
use aya_log_ebpf::warn;

#[cfg(any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock"))]
mod floor;
/// What a frame runs: the accounting, or in the benchmark's lower-bound variants the
/// `floor` they measure.
#[cfg(any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock"))]
use floor::run;
#[cfg(not(any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock")))]
use try_roce_analyzer as run;

/// Each flow's counters and PSN state in one shared entry ([`FlowEntry`], with its key in a
/// [`FlowSlot`]), found by array lookups ([`analyzer_common::table`]): no hash map lookup of
/// the 40-byte key per frame, and the same memory per flow on any number of CPUs. The CPUs
/// update an entry without a lock: NICs and RSS keep a flow on one queue, and a flow handled
/// on several CPUs is counted in the entry (`cpu_moves`). Sized by the loader.
#[map]
static FLOW_SLOTS: Array<FlowSlot> =
    Array::with_max_entries(table::capacity(table::buckets_for(DEFAULT_MAX_FLOWS)), BPF_F_MMAPABLE);
/// Each bucket's tags, on one cache line.
#[map]
static FLOW_TAGS: Array<Tags> = Array::with_max_entries(table::buckets_for(DEFAULT_MAX_FLOWS), BPF_F_MMAPABLE);
/// The buckets of the two arrays above (set by the loader).
#[unsafe(no_mangle)]
static FLOW_BUCKETS: u32 = table::buckets_for(DEFAULT_MAX_FLOWS);
/// `--max-flows` (set by the loader).
#[unsafe(no_mangle)]
static MAX_FLOWS: u32 = DEFAULT_MAX_FLOWS;
/// The flows in the table ([`table::MAP_FLOW_COUNT`]).
#[map]
static FLOW_COUNT: Array<u64> = Array::with_max_entries(1, BPF_F_MMAPABLE);
#[map]
static FLOW_EXTRA: PerCpuHashMap<ExtraKey, u64> = PerCpuHashMap::with_max_entries(DEFAULT_MAX_EXTRA, BPF_F_NO_PREALLOC);
#[map]
static PFC: PerCpuHashMap<PfcKey, PfcCounters> = PerCpuHashMap::with_max_entries(DEFAULT_MAX_PFC, 0);
/// Each CPU's PFC counters of the pairs that took a slot ([`PfcSlot`]); the others in [`PFC`].
#[map]
static PFC_SLOTS: PerCpuArray<PfcSlot> = PerCpuArray::with_max_entries(maps::PFC_SLOTS, 0);
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(DEFAULT_RINGBUF_BYTES, 0);
/// Notes between the two directions of a connection ([`psn::PeerNotes`]): the MTU a READ
/// RESPONSE showed, RNR NAKs. LRU: an evicted note is a lost hint, not a lost count.
#[map]
static NOTES: LruHashMap<PeerKey, u32> = LruHashMap::with_max_entries(DEFAULT_MAX_NOTES, 0);
/// Frames seen in mirrored copies ([`vantage::sight`]): a frame several switches mirror to
/// this port counts once. Buckets of slots found by array lookups ([`SightSlot`]): a sighting
/// given up for another within the window makes a late copy count as a frame (counted).
#[map]
static SIGHTINGS: Array<SightSlot> = Array::with_max_entries(DEFAULT_MAX_SIGHTINGS, 0);
/// Set (entry 0) once an RNR NAK has been noted in [`NOTES`]: until then no request looks
/// for one there.
#[map]
static RNR_NOTED: Array<u64> = Array::with_max_entries(1, 0);
/// Copies of one frame are matched within this (`--match-window`).
#[unsafe(no_mangle)]
static MATCH_WINDOW_NS: u64 = vantage::DEFAULT_WINDOW_NS;
/// Flow ids with their keys, and the records of frames without a flow entry
/// ([`maps::MAP_FLOW_IDS`]).
#[map]
static FLOW_IDS: RingBuf = RingBuf::with_byte_size(DEFAULT_FLOW_IDS_BYTES, 0);
/// Records of the CPUs without a log of their own in [`TIMELINE_LOG`].
#[map]
static TIMELINE: RingBuf = RingBuf::with_byte_size(DEFAULT_TIMELINE_BYTES, 0);
/// Each CPU's timeline log ([`maps::MAP_TIMELINE_LOG`]), sized by the loader (one CPU's worth
/// here, for a loader that sets none: [`TIMELINE_CPUS`] is 0 then, and it stays unused).
#[map]
static TIMELINE_LOG: Array<CompactRecord> = Array::with_max_entries(TIMELINE_SLOTS, BPF_F_MMAPABLE);
/// Each CPU's log head ([`maps::MAP_TIMELINE_HEADS`]), sized by the loader.
#[map]
static TIMELINE_HEADS: Array<u64> = Array::with_max_entries(HEAD_STRIDE, BPF_F_MMAPABLE);
/// The CPUs with a log (set by the loader to the entries it gave the two maps above).
#[unsafe(no_mangle)]
static TIMELINE_CPUS: u32 = 0;
/// Each CPU's event log ([`maps::MAP_EVENT_LOG`]) and heads, sized by the loader.
#[map]
static EVENT_LOG: Array<Event> = Array::with_max_entries(EVENT_SLOTS, BPF_F_MMAPABLE);
#[map]
static EVENT_HEADS: Array<u64> = Array::with_max_entries(HEAD_STRIDE, BPF_F_MMAPABLE);
/// The CPUs with an event log (set by the loader).
#[unsafe(no_mangle)]
static EVENT_CPUS: u32 = 0;
/// Whether to write timeline records (set by the loader; the verifier prunes the dead branch).
#[unsafe(no_mangle)]
static TIMELINE_ON: u8 = 1;
/// PMTU of flows that have not shown their own (`--pmtu`); 0 learns it per flow.
#[unsafe(no_mangle)]
static PMTU_DEFAULT: u32 = 0;
/// Whether `--filter` is given (set by the loader; the verifier prunes the branch when not).
#[unsafe(no_mangle)]
static FILTER_ON: u8 = 0;
/// The `--filter` (entry 0), written by the loader.
#[map]
static FILTER: Array<Filter> = Array::with_max_entries(1, 0);
/// Whether `--evidence` is given (set by the loader; the verifier prunes the copies when not).
#[unsafe(no_mangle)]
static EVIDENCE_ON: u8 = 0;
/// Flows whose frames the agent wants copied, each until its deadline (monotonic ns).
#[map]
static EVIDENCE_FLOWS: HashMap<FlowKey, u64> = HashMap::with_max_entries(DEFAULT_MAX_EVIDENCE_FLOWS, 0);
/// The copy controls ([`evidence_ctl`]).
#[map]
static EVIDENCE_CTL: Array<u64> = Array::with_max_entries(evidence_ctl::COUNT, 0);
/// Copied frames for the agent's evidence files.
#[map]
static EVIDENCE: RingBuf = RingBuf::with_byte_size(DEFAULT_EVIDENCE_BYTES, 0);
/// The frame's summary and the `widen` slot ([`Scratch`]): one lookup per frame.
#[map]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// A zeroed flow entry in read-only data: inserting it avoids a memset on the stack.
static ZERO_FLOW: FlowEntry = FlowEntry::zeroed();

/// The frame, read through bounds checks against `data_end`.
struct Packet {
    start: usize,
    end: usize,
    /// This CPU's `Scratch::widen`.
    word: Word,
}

impl FrameBytes for Packet {
    #[inline(always)]
    fn read<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        if self.start + offset + N > self.end {
            return None;
        }
        // SAFETY: the N bytes at start + offset lie before data_end (checked above).
        Some(unsafe { core::ptr::read_unaligned((self.start + offset) as *const [u8; N]) })
    }

    /// Laundered ([`Word::launder`]), bounded again by the mask (every classifier offset is
    /// below MAX_HEADER_OFFSET).
    #[inline(always)]
    fn widen(&self, offset: usize) -> usize {
        (self.word.launder(offset as u64) as usize) & (MAX_HEADER_OFFSET - 1)
    }
}

/// This CPU's scratch word (`Scratch::widen`), through which values are laundered.
#[derive(Clone, Copy)]
struct Word(*mut u64);

impl Word {
    /// This CPU's word (None only if the scratch map had no entry, which it always has).
    #[inline(always)]
    fn get() -> Option<Word> {
        // SAFETY: a field of this CPU's scratch entry; only its address is taken.
        SCRATCH.get_ptr_mut(0).map(|p| Word(unsafe { core::ptr::addr_of_mut!((*p).widen) }))
    }

    /// `v` through map memory, which the verifier does not track: the value read back is an
    /// unknown scalar, so paths that computed different values go on as one (it checks what
    /// follows once, not once per value), and a range LLVM or the verifier kept is forgotten
    /// (a caller bounds it again with a mask).
    #[inline(always)]
    fn launder(self, v: u64) -> u64 {
        // SAFETY: this CPU's scratch word (a Word is made only from this CPU's scratch entry:
        // `get`, or the program's one lookup of it), used by this program run only: XDP runs
        // are not interrupted by another on their CPU.
        unsafe {
            core::ptr::write_volatile(self.0, v);
            core::ptr::read_volatile(self.0)
        }
    }
}

/// Multi-buffer aware (`xdp.frags`): mirror ports run jumbo MTUs for 4096-byte RoCE payloads,
/// and drivers refuse native XDP above one page per frame otherwise. The headers are in the
/// first buffer, which is all `data..data_end` covers; the length is the whole frame's
/// (`bpf_xdp_get_buff_len`).
// Inlined into the entry the macro wraps it in: no BPF-to-BPF call per frame.
#[xdp(frags)]
#[inline(always)]
pub fn roce_analyzer(ctx: XdpContext) -> u32 {
    let _ = run(&ctx);
    xdp_action::XDP_PASS
}

/// The same program without `xdp.frags`, for drivers that refuse multi-buffer programs (the
/// agent attaches it when the multi-buffer one is refused, or with `--xdp-frags off`). Such a
/// driver keeps frames in one buffer, so nothing is lost by it.
#[xdp]
#[inline(always)]
pub fn roce_analyzer_single(ctx: XdpContext) -> u32 {
    let _ = run(&ctx);
    xdp_action::XDP_PASS
}

/// The benchmark baseline: the cheapest possible XDP program.
#[xdp(frags)]
pub fn xdp_pass_baseline(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_PASS
}

/// The accounting stages this build runs: all, except in the variants `cargo xtask
/// bench-kernel` builds to show what each stage costs a frame (a constant: the program built
/// without the cfg is the same code as without stages).
#[cfg(not(any(roce_stages = "classify", roce_stages = "flow")))]
const STAGES: u8 = stage::ALL;
#[cfg(roce_stages = "classify")]
const STAGES: u8 = 0;
#[cfg(roce_stages = "flow")]
const STAGES: u8 = stage::FLOW;
/// Whether a RoCE frame reads a clock: in every build but the benchmark's variants that show
/// what a frame costs without one (`roce_stages = "noclock"`: every stage, the flow's times a
/// constant; `"bare_noclock"`: the bare frame of `floor`).
const CLOCK: bool = !cfg!(any(roce_stages = "noclock", roce_stages = "bare_noclock"));

#[inline(always)]
fn count(index: u32) -> u64 {
    match COUNTERS.get_ptr_mut(index) {
        // SAFETY: this CPU's slot.
        Some(c) => unsafe {
            *c += 1;
            *c
        },
        None => 0,
    }
}

#[inline(always)]
fn try_roce_analyzer(ctx: &XdpContext) -> Result<(), ()> {
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(())?;
    // SAFETY: this CPU's scratch, used by this run only; the summary and the word are distinct
    // fields (the word is only reached through its raw pointer).
    let (s, word) = unsafe { (&mut (*scratch).summary, Word(core::ptr::addr_of_mut!((*scratch).widen))) };
    let pkt = Packet { start: ctx.data(), end: ctx.data_end(), word };
    // data_end - data would be arithmetic on pkt_end, which the verifier refuses.
    // SAFETY: helper on the program's own context.
    let wire_len = unsafe { bpf_xdp_get_buff_len(ctx.ctx) } as u32;
    let class = classify(&pkt, wire_len, s);
    // SAFETY: a read-only global of this program.
    if unsafe { core::ptr::read_volatile(&FILTER_ON) } != 0
        && let Some(f) = FILTER.get(0)
        && !f.admits(s)
    {
        // Left out by --filter: counted, not analysed (the host does the same offline).
        count(counter::FILTERED);
        return Ok(());
    }
    count(class as u32);
    if s.encap != 0 {
        count(counter::ENCAPSULATED);
    }
    if s.cut != 0 {
        count(counter::CUT_COPIES);
    }
    if s.bth_cut != 0 {
        count(counter::BTH_CUT);
    }
    match class {
        FrameClass::Roce | FrameClass::Cnp => {
            if s.ext_missing != 0 {
                count(counter::EXT_CUT);
            }
            let key = FlowKey::from_summary(s);
            // SAFETY: a read-only global of this program.
            let timeline = unsafe { core::ptr::read_volatile(&TIMELINE_ON) } != 0;
            // One clock read per frame. The timeline record needs the precise clock (RTT and
            // incast need nanoseconds), and then the flow's first/last times take it too;
            // without records they use the coarse one (the kernel tick), which is cheaper.
            let now = match CLOCK {
                // SAFETY: helpers without arguments.
                true => unsafe { if timeline { bpf_ktime_get_ns() } else { bpf_ktime_get_coarse_ns() } },
                false => 1,
            };
            if s.encap != 0 {
                // Every mirrored copy, at the precise time: the agent's vantage points and hops.
                // The frame's own clock read when records take the precise one (a second read
                // was ≈ 20 ns more for every copy).
                // SAFETY: helper without arguments.
                let precise = if timeline { now } else { unsafe { bpf_ktime_get_ns() } };
                event_at(s, precise, event_kind::SIGHTING);
                if let Some(previous_ecn) = matched_copy(s, now) {
                    // Counted already from another mirror origin: only its ECN is the newer.
                    count(counter::MATCHED_COPIES);
                    restate_ecn(&key, previous_ecn, s.ecn & 3);
                    return Ok(());
                }
            }
            let entry = if STAGES & stage::FLOW != 0 { account_flow(ctx, &key, s, now, word) } else { None };
            if let Some(entry) = entry
                && class == FrameClass::Roce
                && STAGES & stage::PSN != 0
            {
                account_psn(&key, entry, s);
            }
            // SAFETY: a read-only global of this program.
            if unsafe { core::ptr::read_volatile(&EVIDENCE_ON) } != 0 {
                evidence_flow(ctx, &key, s, now);
            }
            if timeline {
                // SAFETY: the flow's map value (its id is written once, at its insertion).
                match entry.map_or(0, |e| unsafe { (*e).counters.id }) {
                    // The benchmark's variants without flows: a record of no flow.
                    _ if STAGES & stage::FLOW == 0 => record(0, s, now),
                    0 => keyed_record(s, now),
                    id => record(id, s, now),
                }
            }
            if cm::is_carrier(s.opcode, s.dst_qp) {
                cm_event(ctx, s);
            }
        }
        FrameClass::Pfc | FrameClass::Pause => {
            // Rare frames whose timing the analyses need: the precise clock.
            // SAFETY: helper without arguments.
            let now = unsafe { bpf_ktime_get_ns() };
            account_pfc(s, now);
            let kind = if class == FrameClass::Pfc { event_kind::PFC } else { event_kind::PAUSE };
            event_at(s, now, kind);
            // SAFETY: a read-only global of this program.
            if unsafe { core::ptr::read_volatile(&EVIDENCE_ON) } != 0
                && EVIDENCE_CTL.get(evidence_ctl::PAUSE_UNTIL).is_some_and(|u| now <= *u)
            {
                evidence_copy(ctx, s, &FlowKey::from_summary(s), now, wire_len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Counts the frame in its flow's entry (inserted for its first frame); returns the entry, or
/// None when the map is full (counted, also as a PSN loss for a RoCE frame).
#[inline(always)]
fn account_flow(ctx: &XdpContext, key: &FlowKey, s: &PacketSummary, now: u64, word: Word) -> Option<*mut FlowEntry> {
    let h = table::hash(key);
    let entry = match find_flow(key, h, word) {
        Some(e) => e,
        None => match insert_flow(key, h) {
            Some(e) => e,
            None => {
                let n = count(counter::FLOW_MAP_FULL);
                if s.class == FrameClass::Roce as u8 {
                    count(counter::PSN_MAP_FULL);
                }
                // Rare path; silent unless the agent runs with --kernel-log, and rate-limited:
                // a line at the 1st, 2nd, 4th, 8th, ... such frame on each CPU, so a full table
                // under a flood logs tens of lines, not one per frame.
                if n & n.wrapping_sub(1) == 0 {
                    warn!(
                        ctx,
                        "flow table full: {} frames on this CPU not counted in a flow so far (last to QP {}; logged at powers of two)",
                        n,
                        s.dst_qp
                    );
                }
                return None;
            }
        },
    };
    // SAFETY: the flow's slot (shared: see FLOW_SLOTS).
    let c = unsafe { &mut (*entry).counters };
    let pcp = maps::pcp_of(s);
    // SAFETY: helper without arguments.
    let cpu = unsafe { bpf_get_smp_processor_id() } as u16;
    // A new entry (its packet count wraps, its first time is never 0 again).
    if c.first_ns == 0 {
        c.first_ns = now;
        c.dscp = s.dscp;
        c.pcp = pcp;
        c.cpu = cpu;
    } else if c.cpu != cpu {
        c.cpu = cpu;
        c.cpu_moves = c.cpu_moves.saturating_add(1);
    }
    c.packets = c.packets.wrapping_add(1);
    c.bytes += s.frame_len as u64;
    c.last_ns = now;
    match (s.ecn as usize & 3).checked_sub(1).and_then(|e| c.ecn.get_mut(e)) {
        Some(n) => *n = n.wrapping_add(1),
        // SAFETY: the flow's slot (shared: see FLOW_SLOTS).
        None => unsafe { (*entry).not_ect = (*entry).not_ect.wrapping_add(1) },
    }
    c.fecn = c.fecn.wrapping_add(s.fecn as u32);
    c.becn = c.becn.wrapping_add(s.becn as u32);
    c.ack_req = c.ack_req.wrapping_add(s.ack_req as u32);
    count_opcode(c, key, s.opcode);
    if s.dscp == c.dscp {
        c.dscp_packets = c.dscp_packets.wrapping_add(1);
    } else {
        extra(*key, extra_kind::DSCP, s.dscp);
    }
    if pcp == c.pcp {
        c.pcp_packets = c.pcp_packets.wrapping_add(1);
    } else {
        extra(*key, extra_kind::PCP, pcp);
    }
    Some(entry)
}

/// The entry of the flow `key` (of hash `h`) if it is in the table: the first slot, in the
/// order of its buckets and their ways, whose tag is the flow's live tag and which holds the
/// key. A free slot among a bucket's first [`table::LEVELS`]`[0]` ends the search: the flow
/// would have been put there ([`insert_flow`]), so it is in none of the later buckets.
#[inline(always)]
fn find_flow(key: &FlowKey, h: u64, word: Word) -> Option<*mut FlowEntry> {
    // Laundered: the search stops at one of many places, and the verifier would check what
    // follows (the flow's insertion above all) once for each.
    let found = word.launder(find_slot(key, h));
    if found == 0 {
        return None;
    }
    let slot = FLOW_SLOTS.get_ptr_mut((found - 1) as u32)?;
    // SAFETY: the slot the search found holding the key.
    Some(unsafe { core::ptr::addr_of_mut!((*slot).entry) })
}

/// [`find_flow`]'s search: the slot's index plus one, or 0.
#[inline(always)]
fn find_slot(key: &FlowKey, h: u64) -> u64 {
    let want = tag::live(h);
    let n = flow_buckets();
    for c in 0..CHOICES {
        let b = table::bucket(h, c, n);
        let Some(tags) = FLOW_TAGS.get(b) else { return 0 };
        for (way, &t) in tags.iter().enumerate() {
            let i = b * WAYS as u32 + way as u32;
            if t == want
                && let Some(slot) = FLOW_SLOTS.get_ptr_mut(i)
                // SAFETY: the slot, published by its live tag (its key written before).
                && table::same(unsafe { &(*slot).key }, key)
            {
                return i as u64 + 1;
            }
        }
        // A bucket's free slots are its last ways (slots are claimed in order and never free
        // again): one among its first LEVELS[0] is the last of those.
        if tags[table::LEVELS[0] as usize - 1] == tag::FREE {
            return 0;
        }
    }
    0
}

/// Puts the flow `key` into a claimable slot of one of its buckets ([`table::LEVELS`]: the
/// first bucket with one among its first four ways, else six, else seven, else any),
/// claimed with a compare-and-swap so that no other CPU takes it; its entry zeroed, its id
/// (the slot's) written and announced, then its live tag published. None when the table holds
/// `--max-flows` flows already ([`FLOW_COUNT`]) or all the flow's buckets are full (counted by
/// the caller as the table full).
#[inline(never)]
fn insert_flow(key: &FlowKey, h: u64) -> Option<*mut FlowEntry> {
    let count = FLOW_COUNT.get_ptr_mut(0)?;
    // SAFETY: a read-only global of this program.
    let max = unsafe { core::ptr::read_volatile(&MAX_FLOWS) } as u64;
    if !count_flow(count, max) {
        return None;
    }
    // The index comes from one site of claim_slot, laundered: one filling of the slot to check.
    let Some(index) = claim_slot(h) else {
        flow_gone();
        return None;
    };
    fill_slot(key, h, index)
}

/// One flow more in the table ([`FLOW_COUNT`]) unless it holds `max`: a compare-and-swap
/// (an atomic add whose result is read needs a newer instruction set than the object's), tried
/// again while other CPUs insert at the same moment (a few times: then the table counts as full
/// for this frame, and the next frame of the flow tries again).
#[inline(always)]
fn count_flow(count: *mut u64, max: u64) -> bool {
    let mut tries = 0;
    while tries < 8 {
        // SAFETY: the map's one u64, changed only atomically (the program's and the agent's).
        let old = unsafe { core::ptr::read_volatile(count) };
        if old >= max {
            return false;
        }
        // SAFETY: as above.
        if unsafe {
            core::intrinsics::atomic_cxchg::<
                u64,
                { core::intrinsics::AtomicOrdering::AcqRel },
                { core::intrinsics::AtomicOrdering::Relaxed },
            >(count, old, old + 1)
        }
        .1
        {
            return true;
        }
        tries += 1;
    }
    false
}

/// One flow fewer in the table ([`FLOW_COUNT`]): one this CPU counted and did not insert.
#[inline(never)]
fn flow_gone() {
    if let Some(count) = FLOW_COUNT.get_ptr_mut(0) {
        // SAFETY: as in count_flow; an atomic add of -1 whose result is not read.
        let _ = unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(count, u64::MAX)
        };
    }
}

/// The buckets of the flow table (set by the loader).
#[inline(always)]
fn flow_buckets() -> u32 {
    // SAFETY: a read-only global of this program.
    unsafe { core::ptr::read_volatile(&FLOW_BUCKETS) }
}

/// Times [`claim_slot`] looks for a slot again after another CPU claimed the one it found.
const CLAIM_TRIES: u32 = 4;

/// Claims a claimable slot ([`claimable_slot`]) with a compare-and-swap of its tag to
/// [`tag::CLAIMED`]; its index. A slot another CPU claimed between the look and the swap is
/// no longer claimable, so the next look finds another: after [`CLAIM_TRIES`] such races (as
/// many CPUs inserting into the same buckets at the same instant) the frame counts as the
/// table full. One swap site, with the slot's index laundered ([`Word::launder`]): the verifier
/// checks one swap, not one per place the look could stop at (a swap in the look's loop made
/// it walk ≈ 180 000 instructions, a third of the program's load time).
#[inline(never)]
fn claim_slot(h: u64) -> Option<u32> {
    let word = Word::get()?;
    let mut tries = 0;
    while tries < CLAIM_TRIES {
        let i = word.launder(claimable_slot(h)? as u64) as u32;
        let tags = FLOW_TAGS.get_ptr_mut(i / WAYS as u32)?;
        // SAFETY: the slot's tag in its bucket (shared: claimed by compare-and-swap).
        let t = unsafe { core::ptr::addr_of_mut!((*tags)[(i % WAYS as u32) as usize]) };
        // SAFETY: an aligned u64 of the map.
        let old = unsafe { core::ptr::read_volatile(t) };
        if tag::claimable(old)
            // SAFETY: as above.
            && unsafe {
                core::intrinsics::atomic_cxchg::<
                    u64,
                    { core::intrinsics::AtomicOrdering::AcqRel },
                    { core::intrinsics::AtomicOrdering::Relaxed },
                >(t, old, tag::CLAIMED)
            }
            .1
        {
            return Some(i);
        }
        tries += 1;
    }
    None
}

/// The slot a new flow of hash `h` would take ([`table::pick`]: the first of its buckets
/// with a claimable slot among its first four ways, else six, else seven, else any; that
/// bucket's first claimable slot), read without claiming it. Each bucket's claimable ways
/// are a mask made without a branch ([`claimable_ways`]); only the choice among the masks
/// branches, sixteen times at most.
#[inline(always)]
fn claimable_slot(h: u64) -> Option<u32> {
    let n = flow_buckets();
    let masks = [
        claimable_ways(table::bucket(h, 0, n)),
        claimable_ways(table::bucket(h, 1, n)),
        claimable_ways(table::bucket(h, 2, n)),
        claimable_ways(table::bucket(h, 3, n)),
    ];
    let (c, way) = table::pick(masks)?;
    Some(table::bucket(h, c, n) * WAYS as u32 + way)
}

/// Bit `way` set for each claimable slot of bucket `b` ([`table::claimable_bit`]; none for a
/// bucket beyond the array).
#[inline(always)]
fn claimable_ways(b: u32) -> u32 {
    let Some(tags) = FLOW_TAGS.get(b) else { return 0 };
    let mut m = 0u32;
    for (way, t) in tags.iter().enumerate() {
        // SAFETY: an aligned u64 of the map (other CPUs claim by compare-and-swap).
        m |= table::claimable_bit(unsafe { core::ptr::read_volatile(t) }, way);
    }
    m
}

/// Fills the slot `index` that this CPU claimed with the flow `key`, and publishes it.
#[inline(never)]
fn fill_slot(key: &FlowKey, h: u64, index: u32) -> Option<*mut FlowEntry> {
    let (b, way) = (index / WAYS as u32, index % WAYS as u32);
    let tags = FLOW_TAGS.get_ptr_mut(b)?;
    // SAFETY: the claimed slot's tag, in its bucket.
    let t = unsafe { core::ptr::addr_of_mut!((*tags)[(way & (WAYS as u32 - 1)) as usize]) };
    let Some(slot) = FLOW_SLOTS.get_ptr_mut(index) else {
        // SAFETY: the claimed tag (a slot beyond the table cannot be: the arrays match).
        unsafe { core::ptr::write_volatile(t, tag::DEAD) };
        flow_gone();
        return None;
    };
    let id = table::id_of(b, way);
    // SAFETY: the slot this CPU claimed; nobody reads it until its tag is live.
    unsafe {
        copy_words(core::ptr::addr_of_mut!((*slot).key), key);
        copy_words(core::ptr::addr_of_mut!((*slot).entry), &ZERO_FLOW);
        (*slot).entry.counters.id = id;
    }
    announce_flow(id, key);
    // The key and entry are written before the tag that publishes them (x86-64 keeps the
    // order of the stores; the compiler is told to).
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::Release);
    // SAFETY: the claimed tag.
    unsafe { core::ptr::write_volatile(t, tag::live(h)) };
    // Another CPU inserting the same flow at the same moment took another slot: the one a
    // lookup finds first stays the flow's (every later lookup goes there), the other is given
    // up (both CPUs look, after publishing their own). A frame a third CPU counted in the one
    // given up meanwhile is lost (three CPUs, one new flow, the same instant).
    if let Some(word) = Word::get()
        && let Some(first) = find_flow(key, h, word)
        // SAFETY: the entry of a published slot (its id written before its tag).
        && unsafe { (*first).counters.id } != id
    {
        // SAFETY: the claimed tag.
        unsafe { core::ptr::write_volatile(t, tag::DEAD) };
        flow_gone();
        return Some(first);
    }
    // SAFETY: the slot, now this flow's.
    Some(unsafe { core::ptr::addr_of_mut!((*slot).entry) })
}

/// Announces a new flow's id with its key on [`FLOW_IDS`] before any record can carry it (a
/// record is written after this on this CPU, and another CPU finds the slot only once its tag
/// is live). An announcement the full ring refuses is made up by the agent's next read of the
/// table, whose entries hold their ids.
#[inline(always)]
fn announce_flow(id: u32, key: &FlowKey) {
    if let Some(mut e) = FLOW_IDS.reserve::<FlowId>(0) {
        let p = e.as_mut_ptr();
        // SAFETY: the reservation is one FlowId; every field is written before submit.
        unsafe {
            (*p).kind = ids_kind::FLOW;
            (*p)._pad = [0; 3];
            (*p).id = id;
            copy_words(core::ptr::addr_of_mut!((*p).key), key);
        }
        e.submit(BPF_RB_NO_WAKEUP as u64);
    }
}

/// Counts the frame's opcode in the entry's slot for it, claiming the next free slot for an
/// opcode the flow has not shown; past the slots, in the extra map.
#[inline(always)]
fn count_opcode(c: &mut maps::FlowCounters, key: &FlowKey, opcode: u8) {
    let used = c.op_used as usize;
    // Iterators, not indices: no bounds check can become a panic the verifier refuses.
    for (code, n) in c.op_codes.iter().zip(c.op_counts.iter_mut()).take(used) {
        if *code == opcode {
            *n = n.wrapping_add(1);
            return;
        }
    }
    match (c.op_codes.get_mut(used), c.op_counts.get_mut(used)) {
        (Some(code), Some(n)) => {
            *code = opcode;
            *n = 1;
            c.op_used = used as u8 + 1;
        }
        _ => extra(*key, extra_kind::OPCODE, opcode),
    }
}

/// Whether a mirrored copy is a frame counted already (from another origin, within the
/// window): then the ECN its previous copy had. A frame not sighted takes the slot of its
/// bucket seen longest ago. A call of its own: inlined, its identity and slots on the
/// program's stack took the deepest call chain past the verifier's 512 bytes.
#[inline(never)]
fn matched_copy(s: &PacketSummary, now: u64) -> Option<u8> {
    let id = FrameId::of(s);
    // SAFETY: a read-only global of this program.
    let window = unsafe { core::ptr::read_volatile(&MATCH_WINDOW_NS) };
    let first = vantage::sight_bucket(&id) * SIGHT_WAYS;
    let (mut victim, mut oldest) = (first, u64::MAX);
    for i in first..first + SIGHT_WAYS {
        let slot = SIGHTINGS.get_ptr_mut(i)?;
        // SAFETY: the map value (shared: a copy racing another of its frame at worst counts
        // once more, a torn identity matches nothing).
        let slot = unsafe { &mut *slot };
        if vantage::same_id(&slot.id, &id) {
            return match vantage::sight(&mut slot.seen, true, s, now, window) {
                Verdict::Copy { previous_ecn } => Some(previous_ecn),
                Verdict::New => None,
            };
        }
        if slot.seen.first_ns < oldest {
            (victim, oldest) = (i, slot.seen.first_ns);
        }
    }
    let slot = SIGHTINGS.get_ptr_mut(victim)?;
    if oldest != 0 && now.wrapping_sub(oldest) <= window {
        count(counter::SIGHTINGS_EVICTED);
    }
    // SAFETY: the slot taken (shared, as above).
    unsafe {
        copy_words(core::ptr::addr_of_mut!((*slot).id), &id);
        vantage::sight(&mut (*slot).seen, false, s, now, window);
    }
    None
}

/// Moves one of the flow's ECN counts from `from` to `to`: a count in the extra map (rare:
/// copies that differ in ECN), which the host applies to the flow.
#[inline(always)]
fn restate_ecn(key: &FlowKey, from: u8, to: u8) {
    if from != to {
        extra(*key, extra_kind::ECN_MOVED, ((from & 3) << 2) | (to & 3));
    }
}

/// Counts a value outside the flow entry's opcodes, DSCP or PCP (rare).
#[inline(always)]
fn extra(flow: FlowKey, kind: u8, value: u8) {
    extra_add(flow, kind, value, 1);
}

/// Adds `n` to a count of the extra map (rare values and anomalies).
#[inline(never)]
fn extra_add(flow: FlowKey, kind: u8, value: u8, n: u64) {
    let key = ExtraKey { flow, kind, value, _pad: [0; 6] };
    match FLOW_EXTRA.get_ptr_mut(&key) {
        // SAFETY: this CPU's value.
        Some(v) => unsafe { *v += n },
        None => {
            if FLOW_EXTRA.insert(&key, &n, 0).is_err() {
                count(counter::EXTRA_MAP_FULL);
            }
        }
    }
}

/// The PSN/AETH counts of a flow entry: those a frame can move every time in the entry
/// ([`maps::ENTRY_PSN_COUNTERS`]), those only an anomaly moves in the extra map
/// ([`extra_kind::PSN`]).
struct EntryTally<'a> {
    key: &'a FlowKey,
    entry: *mut FlowEntry,
}

impl Tally for EntryTally<'_> {
    #[inline(always)]
    fn add(&mut self, counter: u8, n: u32) {
        // SAFETY: the flow's map value, valid for this program run (its counters are apart
        // from the sequence state the state machine holds).
        match unsafe { (*self.entry).psn_count(counter) } {
            Some(c) => *c = c.wrapping_add(n),
            None => extra_add(*self.key, extra_kind::PSN, counter, n as u64),
        }
    }
}

#[inline(always)]
fn account_pfc(s: &PacketSummary, now: u64) {
    if s.class == FrameClass::Pause as u8 {
        pfc_one(s.src_mac, maps::PAUSE_PRIORITY, s.pfc_quanta[0], now);
        return;
    }
    let mut p = 0;
    while p < 8 {
        if s.pfc_enable & (1 << p) != 0 {
            pfc_one(s.src_mac, p as u8, s.pfc_quanta[p], now);
        }
        p += 1;
    }
}

#[inline(always)]
fn pfc_one(mac: [u8; 6], priority: u8, quanta: u16, now: u64) {
    let key = PfcKey { mac, priority, _pad: 0 };
    let word = key.word();
    if let Some(slot) = PFC_SLOTS.get_ptr_mut(PfcKey::slot(word)) {
        // SAFETY: this CPU's slot (its counters start zeroed, as the array does).
        unsafe {
            if (*slot).key == 0 {
                (*slot).key = word;
            }
            if (*slot).key == word {
                (*slot).counters.record(now, quanta);
                return;
            }
        }
    }
    // The slot is another pair's: the hash map.
    let c = match PFC.get_ptr_mut(&key) {
        Some(c) => c,
        None => {
            if PFC.insert(&key, &PfcCounters::default(), 0).is_err() {
                count(counter::PFC_MAP_FULL);
                return;
            }
            match PFC.get_ptr_mut(&key) {
                Some(c) => c,
                None => return,
            }
        }
    };
    // SAFETY: this CPU's value.
    unsafe { (*c).record(now, quanta) };
}

/// The notes map as the shared accounting sees it ([`psn::account`]).
struct KernelNotes;

impl psn::PeerNotes for KernelNotes {
    #[inline(never)]
    fn get(&self, key: &PeerKey) -> Option<u32> {
        // SAFETY: the map value.
        NOTES.get_ptr(key).map(|p| unsafe { *p })
    }

    #[inline(never)]
    fn put(&mut self, key: &PeerKey, note: u32) {
        if note == psn::NOTE_RNR
            && let Some(f) = RNR_NOTED.get_ptr_mut(0)
        {
            // Before the note, so that a CPU that finds the flag clear cannot find the note.
            // SAFETY: the map value (a flag any CPU may set; never cleared).
            unsafe { core::ptr::write_volatile(f, 1) };
        }
        // An LRU map makes room by evicting: this cannot fail for want of space.
        let _ = NOTES.insert(key, &note, 0);
    }

    /// Asked for every request behind the responder, which every repeated request is (a
    /// retransmission, the test run's repeated frame): while no RNR NAK has been noted there
    /// can be no RNR note, and one array read replaces the notes map's lookup.
    #[inline(always)]
    fn take_rnr(&mut self, key: &PeerKey) -> bool {
        // SAFETY: the map value, read once.
        RNR_NOTED.get_ptr(0).is_some_and(|f| unsafe { core::ptr::read_volatile(f) } != 0) && take_rnr_note(key)
    }

    #[inline(always)]
    fn default_pmtu(&self) -> u32 {
        // SAFETY: a read-only global of this program.
        unsafe { core::ptr::read_volatile(&PMTU_DEFAULT) }
    }
}

/// Whether the note at `key` is an RNR NAK's, removed if so ([`psn::PeerNotes::take_rnr`]).
#[inline(never)]
fn take_rnr_note(key: &PeerKey) -> bool {
    // SAFETY: the map value, read before the entry is removed.
    let rnr = NOTES.get_ptr(key).is_some_and(|p| unsafe { *p } == psn::NOTE_RNR);
    if rnr {
        let _ = NOTES.remove(key);
    }
    rnr
}

/// The frame's PSN/AETH accounting on its flow's entry. Inlined, like every step of a
/// frame's usual path: a BPF-to-BPF call costs its return, which a kernel with return-stack
/// mitigations (AMD's "Safe RET" here) makes dear; as a call of its own it cost 5–12 ns a RoCE
/// frame. The verifier walks ≈ 54 000 instructions more for it.
#[inline(always)]
fn account_psn(key: &FlowKey, entry: *mut FlowEntry, s: &PacketSummary) {
    let mut tally = EntryTally { key, entry };
    // SAFETY: the flow's map value, valid for this program run.
    psn::account_with(unsafe { &mut (*entry).seq }, &mut tally, s, &mut KernelNotes);
}

/// A CM MAD's first bytes (rare: connection set-up), for the agent to pair QPs with.
#[inline(never)]
fn cm_event(ctx: &XdpContext, s: &PacketSummary) {
    let Some(mut e) = EVENTS.reserve::<CmEvent>(0) else {
        count(counter::RINGBUF_FULL);
        return;
    };
    let p = e.as_mut_ptr();
    // SAFETY: the reservation is one CmEvent; every field is written before submit, the MAD
    // bytes by the helper, which checks the offset and length against the frame.
    let loaded = unsafe {
        (*p).ts_ns = bpf_ktime_get_ns();
        (*p).kind = event_kind::CM;
        (*p).ip_version = s.ip_version;
        (*p)._pad = [0; 6];
        // The addresses are words 2–5 of a CmEvent.
        write_addresses((p as *mut u64).add(2), s);
        bpf_xdp_load_bytes(ctx.ctx, s.payload_off as u32, (*p).mad.as_mut_ptr() as *mut _, cm::BYTES as u32)
    };
    if loaded == 0 {
        e.submit(BPF_RB_NO_WAKEUP as u64);
        count(counter::EVENTS);
    } else {
        // A MAD shorter than the bytes read: not a CM message the agent could use.
        e.discard(0);
    }
}

/// A RoCE frame of a flow the agent asked for (a finding named it): copied until the flow's
/// deadline. While no flow is asked for (or every deadline has passed), one array read and a
/// compare against the clock the flow accounting read already; the precise clock for a frame
/// copied.
#[inline(always)]
fn evidence_flow(ctx: &XdpContext, key: &FlowKey, s: &PacketSummary, now: u64) {
    let Some(until) = EVIDENCE_CTL.get(evidence_ctl::FLOWS_UNTIL) else { return };
    if now > *until {
        return;
    }
    // SAFETY: the value is read once; the agent may update it concurrently (a u64 write).
    if unsafe { EVIDENCE_FLOWS.get(key) }.is_some_and(|d| now <= *d) {
        // SAFETY: helper without arguments.
        // The frame's whole length (the classifier's, from `bpf_xdp_get_buff_len`).
        evidence_copy(ctx, s, key, unsafe { bpf_ktime_get_ns() }, s.frame_len);
    }
}

/// The frame's first bytes (up to the snap length) into the evidence ring.
#[inline(never)]
fn evidence_copy(ctx: &XdpContext, s: &PacketSummary, key: &FlowKey, now: u64, wire_len: u32) {
    let snap = EVIDENCE_CTL.get(evidence_ctl::SNAPLEN).copied().unwrap_or(0) as u32;
    let len = if snap < wire_len { snap } else { wire_len };
    let len = if len > EVIDENCE_MAX_SNAPLEN as u32 { EVIDENCE_MAX_SNAPLEN as u32 } else { len };
    let Some(mut e) = EVIDENCE.reserve::<EvidenceFrame>(0) else {
        count(counter::EVIDENCE_FULL);
        return;
    };
    let p = e.as_mut_ptr();
    // SAFETY: the reservation is one EvidenceFrame; every field but the data beyond `caplen`
    // is written before submit; the bytes by the helper, which checks them against the frame.
    let loaded = unsafe {
        EvidenceFrame::fill_head(p, now, wire_len, s, key);
        match Word::get() {
            Some(word) if len >= 1 => {
                // Laundered, so that neither LLVM nor the verifier keeps the range of `len`:
                // the mask alone bounds the length to 1..=256 for the helper.
                let n = (word.launder((len - 1) as u64) & (EVIDENCE_MAX_SNAPLEN as u64 - 1)) as u32 + 1;
                (*p).caplen = n as u16;
                bpf_xdp_load_bytes(ctx.ctx, 0, (*p).data.as_mut_ptr() as *mut _, n)
            }
            _ => {
                (*p).caplen = 0;
                0
            }
        }
    };
    if loaded == 0 {
        e.submit(BPF_RB_NO_WAKEUP as u64);
        count(counter::EVIDENCE);
    } else {
        e.discard(0);
    }
}

/// The slot of this CPU's log for its next item, and its head (to store `head + 1` in once
/// the slot is written); None for a CPU without a log (`cpus`: those with one). A log is
/// written by its CPU alone, and a program run is not interrupted by another on its CPU (XDP
/// runs in the softirq of its queue), so the head needs no atomic: the item's stores, then
/// the head's ([`log_done`]).
#[inline(always)]
fn log_slot<T>(log: &Array<T>, heads: &Array<u64>, cpus: &u32, slots: u32) -> Option<(*mut T, *mut u64, u64)> {
    // SAFETY: helper without arguments.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    // SAFETY: a read-only global of this program.
    if cpu >= unsafe { core::ptr::read_volatile(cpus) } {
        return None;
    }
    let head = heads.get_ptr_mut(cpu * HEAD_STRIDE)?;
    // SAFETY: this CPU's head, written by this CPU only.
    let h = unsafe { core::ptr::read_volatile(head) };
    let slot = log.get_ptr_mut(cpu * slots + (h as u32 & (slots - 1)))?;
    Some((slot, head, h))
}

/// Publishes the item written at the slot [`log_slot`] gave.
///
/// # Safety
/// `head` is the head `log_slot` returned with `h`.
#[inline(always)]
unsafe fn log_done(head: *mut u64, h: u64) {
    // Volatile stores keep their order, and the CPU's are seen in order (see
    // maps::MAP_TIMELINE_LOG): the item is whole before the head moves past it.
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::Release);
    // SAFETY: the caller's head.
    unsafe { core::ptr::write_volatile(head, h.wrapping_add(1)) };
}

/// One timeline record of flow `flow`, stamped `now` (the precise clock: RTT and incast need
/// nanoseconds), into this CPU's log (the shared ring when it has none).
#[inline(always)]
fn record(flow: u32, s: &PacketSummary, now: u64) {
    if let Some((slot, head, h)) = log_slot(&TIMELINE_LOG, &TIMELINE_HEADS, &TIMELINE_CPUS, TIMELINE_SLOTS) {
        // SAFETY: a slot of this CPU's part of the log; `fill` writes every field.
        unsafe {
            CompactRecord::fill(slot, now, flow, s);
            log_done(head, h);
        }
        return;
    }
    match TIMELINE.reserve::<CompactRecord>(0) {
        Some(mut r) => {
            // SAFETY: the reservation is exactly one CompactRecord; `fill` writes every field.
            unsafe { CompactRecord::fill(r.as_mut_ptr(), now, flow, s) };
            r.submit(BPF_RB_NO_WAKEUP as u64);
            count(counter::RECORDS);
        }
        None => {
            count(counter::TIMELINE_FULL);
        }
    }
}

/// The whole record of a frame whose flow has no entry (the flow map full) or no id, with its
/// key, on [`FLOW_IDS`] (rare). One the ring has no room for is counted like a record
/// the timeline had no room for.
#[inline(never)]
fn keyed_record(s: &PacketSummary, now: u64) {
    match FLOW_IDS.reserve::<KeyedRecord>(0) {
        Some(mut r) => {
            let p = r.as_mut_ptr();
            // SAFETY: the reservation is one KeyedRecord; `fill` writes every field of the
            // record, the rest is written here.
            unsafe {
                (*p).kind = ids_kind::RECORD;
                (*p)._pad = [0; 7];
                Record::fill(core::ptr::addr_of_mut!((*p).record), now, s);
            }
            r.submit(BPF_RB_NO_WAKEUP as u64);
            count(counter::RECORDS);
        }
        None => {
            count(counter::TIMELINE_FULL);
        }
    }
}

/// Writes every field of an event at `p`.
///
/// # Safety
/// `p` must be valid for writes of one `Event`.
#[inline(always)]
unsafe fn fill_event(p: *mut Event, s: &PacketSummary, now: u64, kind: u8) {
    const _: () = assert!(core::mem::offset_of!(Event, kind) == 8 && cfg!(target_endian = "little"));
    // SAFETY: the caller guarantees `p`; the kind and its padding are the event's second word
    // (one store: the padding as an array is a call to a byte loop).
    unsafe {
        core::ptr::write_volatile(p as *mut u64, now);
        core::ptr::write_volatile((p as *mut u64).add(1), kind as u64);
        copy_words(core::ptr::addr_of_mut!((*p).summary), s);
    }
}

/// Copies `*src` to `dst` word by word: a struct assignment becomes a byte-loop `memcpy` call.
///
/// # Safety
/// `dst` must be valid for writes of one `T`, 8-byte aligned; `T`'s size a multiple of 8.
#[inline(always)]
unsafe fn copy_words<T>(dst: *mut T, src: &T) {
    let (dst, src) = (dst as *mut u64, src as *const T as *const u64);
    let mut i = 0;
    while i < core::mem::size_of::<T>() / 8 {
        // SAFETY: word `i` of both, within their sizes (the caller guarantees `dst`).
        unsafe { core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i))) };
        i += 1;
    }
}

/// A PFC/PAUSE frame or a mirrored copy's sighting, stamped `now`, into this CPU's event log
/// (the shared event ring when it has none).
#[inline(always)]
fn event_at(s: &PacketSummary, now: u64, kind: u8) {
    if let Some((slot, head, h)) = log_slot(&EVENT_LOG, &EVENT_HEADS, &EVENT_CPUS, EVENT_SLOTS) {
        // SAFETY: a slot of this CPU's part of the log; every field is written.
        unsafe {
            fill_event(slot, s, now, kind);
            log_done(head, h);
        }
        return;
    }
    match EVENTS.reserve::<Event>(0) {
        Some(mut e) => {
            // SAFETY: the reservation is exactly one Event.
            unsafe { fill_event(e.as_mut_ptr(), s, now, kind) };
            // The agent drains the ring on its poll interval: no wakeup per event.
            e.submit(BPF_RB_NO_WAKEUP as u64);
            count(counter::EVENTS);
        }
        None => {
            count(counter::RINGBUF_FULL);
        }
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
