//! The flow table: each flow's counters and PSN state in one shared entry of array slots, found by
//! its hash's buckets and claimed by compare-and-swap ([`analyzer_common::table`]).

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{self, DEFAULT_MAX_FLOWS, FlowEntry, counter, extra_kind};
use analyzer_common::table::{self, CHOICES, FlowSlot, Tags, WAYS, tag};
use analyzer_common::{FrameClass, PacketSummary};
use aya_ebpf::bindings::BPF_F_MMAPABLE;
use aya_ebpf::helpers::bpf_get_smp_processor_id;
use aya_ebpf::macros::map;
use aya_ebpf::maps::Array;
use aya_ebpf::programs::XdpContext;
use aya_log_ebpf::warn;

use crate::counters::count;
use crate::extra::extra;
use crate::logs::{announce_flow, copy_words};
use crate::scratch::Word;

/// Each flow's counters and PSN state in one shared entry ([`FlowEntry`], with its key in a
/// [`FlowSlot`]), found by array lookups ([`analyzer_common::table`]): no hash map lookup of
/// the 40-byte key per frame, and the same memory per flow on any number of CPUs. The CPUs
/// update an entry without a lock: NICs and RSS keep a flow on one queue, and a flow handled
/// on several CPUs is counted in the entry (`cpu_moves`). Sized by the loader.
#[map]
pub(crate) static FLOW_SLOTS: Array<FlowSlot> =
    Array::with_max_entries(table::capacity(table::buckets_for(DEFAULT_MAX_FLOWS)), BPF_F_MMAPABLE);

/// Each bucket's tags, on one cache line.
#[map]
pub(crate) static FLOW_TAGS: Array<Tags> =
    Array::with_max_entries(table::buckets_for(DEFAULT_MAX_FLOWS), BPF_F_MMAPABLE);

/// The buckets of the two arrays above (set by the loader).
#[unsafe(no_mangle)]
pub(crate) static FLOW_BUCKETS: u32 = table::buckets_for(DEFAULT_MAX_FLOWS);

/// `--max-flows` (set by the loader).
#[unsafe(no_mangle)]
pub(crate) static MAX_FLOWS: u32 = DEFAULT_MAX_FLOWS;

/// The flows in the table ([`table::MAP_FLOW_COUNT`]).
#[map]
pub(crate) static FLOW_COUNT: Array<u64> = Array::with_max_entries(1, BPF_F_MMAPABLE);

/// A zeroed flow entry in read-only data: inserting it avoids a memset on the stack.
pub(crate) static ZERO_FLOW: FlowEntry = FlowEntry::zeroed();

/// Counts the frame in its flow's entry (inserted for its first frame); returns the entry, or
/// None when the map is full (counted, also as a PSN loss for a RoCE frame).
#[inline(always)]
pub(crate) fn account_flow(
    ctx: &XdpContext,
    key: &FlowKey,
    s: &PacketSummary,
    now: u64,
    word: Word,
) -> Option<*mut FlowEntry> {
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
pub(crate) fn find_flow(key: &FlowKey, h: u64, word: Word) -> Option<*mut FlowEntry> {
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
pub(crate) fn find_slot(key: &FlowKey, h: u64) -> u64 {
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
/// the caller as the table full). Inlined into the program: as a call of its own, the chain
/// program → insert_flow → fill_slot passed the verifier's 512 bytes of stack once the
/// program's own frame grew to 312 (its layout moves with LLVM's whims).
#[inline(always)]
pub(crate) fn insert_flow(key: &FlowKey, h: u64) -> Option<*mut FlowEntry> {
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
pub(crate) fn count_flow(count: *mut u64, max: u64) -> bool {
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
#[inline(always)]
pub(crate) fn flow_gone() {
    if let Some(count) = FLOW_COUNT.get_ptr_mut(0) {
        // SAFETY: as in count_flow; an atomic add of -1 whose result is not read.
        let _ = unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(count, u64::MAX)
        };
    }
}

/// The buckets of the flow table (set by the loader).
#[inline(always)]
pub(crate) fn flow_buckets() -> u32 {
    // SAFETY: a read-only global of this program.
    unsafe { core::ptr::read_volatile(&FLOW_BUCKETS) }
}

/// Times [`claim_slot`] looks for a slot again after another CPU claimed the one it found.
pub(crate) const CLAIM_TRIES: u32 = 4;

/// Claims a claimable slot ([`claimable_slot`]) with a compare-and-swap of its tag to
/// [`tag::CLAIMED`]; its index. A slot another CPU claimed between the look and the swap is
/// no longer claimable, so the next look finds another: after [`CLAIM_TRIES`] such races (as
/// many CPUs inserting into the same buckets at the same instant) the frame counts as the
/// table full. One swap site, with the slot's index laundered ([`Word::launder`]): the verifier
/// checks one swap, not one per place the look could stop at (a swap in the look's loop made
/// it walk ≈ 180 000 instructions, a third of the program's load time).
#[inline(never)]
pub(crate) fn claim_slot(h: u64) -> Option<u32> {
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
pub(crate) fn claimable_slot(h: u64) -> Option<u32> {
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
pub(crate) fn claimable_ways(b: u32) -> u32 {
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
pub(crate) fn fill_slot(key: &FlowKey, h: u64, index: u32) -> Option<*mut FlowEntry> {
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

/// Counts the frame's opcode in the entry's slot for it, claiming the next free slot for an
/// opcode the flow has not shown; past the slots, in the extra map.
#[inline(always)]
pub(crate) fn count_opcode(c: &mut maps::FlowCounters, key: &FlowKey, opcode: u8) {
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
