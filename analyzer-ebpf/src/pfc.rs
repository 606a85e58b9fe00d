//! PFC and 802.3x PAUSE counters per sender and priority: per-CPU array slots first, a per-CPU hash
//! map for the rest.

use analyzer_common::maps::{self, DEFAULT_MAX_PFC, PfcCounters, PfcKey, PfcSlot, counter};
use analyzer_common::{FrameClass, PacketSummary};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{PerCpuArray, PerCpuHashMap};

use crate::counters::count;

#[map]
pub(crate) static PFC: PerCpuHashMap<PfcKey, PfcCounters> = PerCpuHashMap::with_max_entries(DEFAULT_MAX_PFC, 0);

/// Each CPU's PFC counters of the pairs that took a slot ([`PfcSlot`]); the others in [`PFC`].
#[map]
pub(crate) static PFC_SLOTS: PerCpuArray<PfcSlot> = PerCpuArray::with_max_entries(maps::PFC_SLOTS, 0);

#[inline(always)]
pub(crate) fn account_pfc(s: &PacketSummary, now: u64) {
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
pub(crate) fn pfc_one(mac: [u8; 6], priority: u8, quanta: u16, now: u64) {
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
