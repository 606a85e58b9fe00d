//! What the program tells the agent: timeline records into each CPU's log (or the shared ring),
//! PFC/PAUSE and sighting events, CM messages, new flows' ids with their keys.

use analyzer_common::PacketSummary;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{
    CmEvent, DEFAULT_FLOW_IDS_BYTES, DEFAULT_RINGBUF_BYTES, DEFAULT_TIMELINE_BYTES, EVENT_SLOTS, Event, FlowId,
    HEAD_STRIDE, KeyedRecord, counter, event_kind, ids_kind,
};
use analyzer_common::record::{CompactRecord, Record, write_addresses};
use analyzer_common::wire::cm;
use aya_ebpf::bindings::{BPF_F_MMAPABLE, BPF_RB_NO_WAKEUP};
use aya_ebpf::helpers::generated::bpf_xdp_load_bytes;
use aya_ebpf::helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, RingBuf};
use aya_ebpf::programs::XdpContext;

use crate::counters::count;

#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(DEFAULT_RINGBUF_BYTES, 0);

/// Flow ids with their keys, and the records of frames without a flow entry
/// ([`maps::MAP_FLOW_IDS`]).
#[map]
pub(crate) static FLOW_IDS: RingBuf = RingBuf::with_byte_size(DEFAULT_FLOW_IDS_BYTES, 0);

/// Records of the CPUs without a log of their own in [`TIMELINE_LOG`].
#[map]
pub(crate) static TIMELINE: RingBuf = RingBuf::with_byte_size(DEFAULT_TIMELINE_BYTES, 0);

/// Each CPU's timeline log ([`maps::MAP_TIMELINE_LOG`]), sized by the loader (one CPU's worth
/// here, for a loader that sets none: [`TIMELINE_CPUS`] is 0 then, and it stays unused).
#[map]
pub(crate) static TIMELINE_LOG: Array<CompactRecord> =
    Array::with_max_entries(analyzer_common::maps::TIMELINE_SLOTS, BPF_F_MMAPABLE);

/// Each CPU's log head ([`maps::MAP_TIMELINE_HEADS`]), sized by the loader.
#[map]
pub(crate) static TIMELINE_HEADS: Array<u64> = Array::with_max_entries(HEAD_STRIDE, BPF_F_MMAPABLE);

/// The CPUs with a log (set by the loader to the entries it gave the two maps above).
#[unsafe(no_mangle)]
pub(crate) static TIMELINE_CPUS: u32 = 0;

/// Records of each CPU's log, a power of two (set by the loader:
/// [`analyzer_common::maps::timeline_slots`]).
#[unsafe(no_mangle)]
pub(crate) static TIMELINE_SLOTS: u32 = analyzer_common::maps::TIMELINE_SLOTS;

/// [`TIMELINE_SLOTS`] as the loader set it.
#[inline(always)]
pub(crate) fn timeline_slots() -> u32 {
    // SAFETY: a read-only global of this program.
    unsafe { core::ptr::read_volatile(&TIMELINE_SLOTS) }
}

/// Each CPU's event log ([`maps::MAP_EVENT_LOG`]) and heads, sized by the loader.
#[map]
pub(crate) static EVENT_LOG: Array<Event> = Array::with_max_entries(EVENT_SLOTS, BPF_F_MMAPABLE);

#[map]
pub(crate) static EVENT_HEADS: Array<u64> = Array::with_max_entries(HEAD_STRIDE, BPF_F_MMAPABLE);

/// The CPUs with an event log (set by the loader).
#[unsafe(no_mangle)]
pub(crate) static EVENT_CPUS: u32 = 0;

/// Whether to write timeline records (set by the loader; the verifier prunes the dead branch).
#[unsafe(no_mangle)]
pub(crate) static TIMELINE_ON: u8 = 1;

/// Announces a new flow's id with its key on [`FLOW_IDS`] before any record can carry it (a
/// record is written after this on this CPU, and another CPU finds the slot only once its tag
/// is live). An announcement the full ring refuses is made up by the agent's next read of the
/// table, whose entries hold their ids.
#[inline(always)]
pub(crate) fn announce_flow(id: u32, key: &FlowKey) {
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

/// A CM MAD's first bytes (rare: connection set-up), for the agent to pair QPs with.
#[inline(never)]
pub(crate) fn cm_event(ctx: &XdpContext, s: &PacketSummary) {
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

/// The slot of this CPU's log for its next item, and its head (to store `head + 1` in once
/// the slot is written); None for a CPU without a log (`cpus`: those with one). A log is
/// written by its CPU alone, and a program run is not interrupted by another on its CPU (XDP
/// runs in the softirq of its queue), so the head needs no atomic: the item's stores, then
/// the head's ([`log_done`]).
#[inline(always)]
pub(crate) fn log_slot<T>(
    log: &Array<T>,
    heads: &Array<u64>,
    cpus: &u32,
    slots: u32,
) -> Option<(*mut T, *mut u64, u64)> {
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
pub(crate) unsafe fn log_done(head: *mut u64, h: u64) {
    // Volatile stores keep their order, and the CPU's are seen in order (see
    // maps::MAP_TIMELINE_LOG): the item is whole before the head moves past it.
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::Release);
    // SAFETY: the caller's head.
    unsafe { core::ptr::write_volatile(head, h.wrapping_add(1)) };
}

/// One timeline record of flow `flow`, stamped `now` (the precise clock: RTT and incast need
/// nanoseconds), into this CPU's log (the shared ring when it has none).
#[inline(always)]
pub(crate) fn record(flow: u32, s: &PacketSummary, now: u64) {
    if let Some((slot, head, h)) = log_slot(&TIMELINE_LOG, &TIMELINE_HEADS, &TIMELINE_CPUS, timeline_slots()) {
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
pub(crate) fn keyed_record(s: &PacketSummary, now: u64) {
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
pub(crate) unsafe fn fill_event(p: *mut Event, s: &PacketSummary, now: u64, kind: u8) {
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
pub(crate) unsafe fn copy_words<T>(dst: *mut T, src: &T) {
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
pub(crate) fn event_at(s: &PacketSummary, now: u64, kind: u8) {
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
