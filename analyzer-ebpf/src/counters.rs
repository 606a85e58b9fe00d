//! The per-CPU counters of frame classes and losses ([`counter`]): every drop the program makes is
//! one of them.

use analyzer_common::maps::counter;
use aya_ebpf::macros::map;
use aya_ebpf::maps::PerCpuArray;

#[map]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

#[inline(always)]
pub(crate) fn count(index: u32) -> u64 {
    match COUNTERS.get_ptr_mut(index) {
        // SAFETY: this CPU's slot.
        Some(c) => unsafe {
            *c += 1;
            *c
        },
        None => 0,
    }
}
