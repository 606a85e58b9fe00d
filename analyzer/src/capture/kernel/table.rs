//! The kernel's flow table ([`analyzer_common::table`]) as the agent reads it: both arrays
//! mapped into its memory, the live slots read without a syscall, and flows retired in two
//! steps by their tags.

use std::sync::atomic::{AtomicU64, Ordering};

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::FlowEntry;
use analyzer_common::table::{self, FlowSlot, MAP_FLOW_COUNT, MAP_FLOW_SLOTS, MAP_FLOW_TAGS, Tags, WAYS, tag};
use aya::maps::MapData;

use super::KernelError;
use super::logs::Mapped;

pub(crate) struct FlowTable {
    tags: Mapped,
    slots: Mapped,
    /// The flows in the table ([`MAP_FLOW_COUNT`]).
    count: Mapped,
    buckets: usize,
    _maps: (MapData, MapData, MapData),
}

impl FlowTable {
    pub(crate) fn new(ebpf: &mut aya::Ebpf) -> Result<Self, KernelError> {
        let array = |ebpf: &mut aya::Ebpf, name: &'static str| match super::access::take(ebpf, name)? {
            aya::maps::Map::Array(d) => Ok(d),
            _ => Err(KernelError::MapLayout { map: name, what: "not an array" }),
        };
        let tags = array(ebpf, MAP_FLOW_TAGS)?;
        let slots = array(ebpf, MAP_FLOW_SLOTS)?;
        let count = array(ebpf, MAP_FLOW_COUNT)?;
        let buckets = tags.info().map_err(super::access::map_err(MAP_FLOW_TAGS))?.max_entries() as usize;
        let n = slots.info().map_err(super::access::map_err(MAP_FLOW_SLOTS))?.max_entries() as usize;
        if n != buckets * WAYS {
            return Err(KernelError::MapLayout { map: MAP_FLOW_SLOTS, what: "not eight slots a bucket" });
        }
        Ok(FlowTable {
            tags: Mapped::writable(&tags, MAP_FLOW_TAGS, buckets * std::mem::size_of::<Tags>())?,
            slots: Mapped::new(&slots, MAP_FLOW_SLOTS, n * std::mem::size_of::<FlowSlot>())?,
            count: Mapped::writable(&count, MAP_FLOW_COUNT, 8)?,
            buckets,
            _maps: (tags, slots, count),
        })
    }

    /// The tag of slot `i` (< buckets × WAYS).
    fn tag(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.buckets * WAYS);
        // SAFETY: within the tags mapping, 8-byte aligned (a page-aligned array of u64s); the
        // program reads and writes tags whole (aligned 8-byte accesses and compare-and-swap).
        unsafe { &*(self.tags.ptr as *const AtomicU64).add(i) }
    }

    /// Every live slot's key and entry. An entry is copied while CPUs may update it, as a map
    /// lookup copies it: a count moving meanwhile is read at either value.
    pub(crate) fn live(&self, mut f: impl FnMut(FlowKey, FlowEntry)) {
        for i in 0..self.buckets * WAYS {
            if tag::state(self.tag(i).load(Ordering::Acquire)) != tag::LIVE {
                continue;
            }
            // SAFETY: slot i of the slots mapping; its key was written before its live tag
            // (read with Acquire above); a volatile copy of plain integers.
            let slot = unsafe { std::ptr::read_volatile((self.slots.ptr as *const FlowSlot).add(i)) };
            f(slot.key, slot.entry);
        }
    }

    /// Whether `id` names a slot of the table.
    fn holds_id(&self, id: u32) -> bool {
        id >= 1 && (table::slot_of(id) as usize) < self.buckets * WAYS
    }

    /// Retires the flow with id `id`: the program no longer finds it (a later frame of the
    /// flow inserts it again), nor claims its slot ([`FlowTable::kill`] lets it); it no longer
    /// counts against `--max-flows`.
    pub(crate) fn retire(&self, id: u32) {
        if !self.holds_id(id) {
            return;
        }
        let t = self.tag(table::slot_of(id) as usize);
        let old = t.load(Ordering::Acquire);
        // Only this side changes a live tag (the program gives up one it published only in
        // the instant it inserts it); the flow leaves the count, making room for another.
        if tag::state(old) == tag::LIVE
            && t.compare_exchange(old, tag::RETIRING, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            // SAFETY: the count mapping's first u64, changed by atomic adds on both sides.
            unsafe { &*(self.count.ptr as *const AtomicU64) }.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Lets the program claim the slot of `id`, retired a poll ago: no frame that found it
    /// can still be updating it, and no record naming it can still wait.
    pub(crate) fn kill(&self, id: u32) {
        if self.holds_id(id) {
            let t = self.tag(table::slot_of(id) as usize);
            let _ = t.compare_exchange(tag::RETIRING, tag::DEAD, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}
