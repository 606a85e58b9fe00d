//! Notes between the two directions of a connection (the MTU a READ RESPONSE showed, RNR NAKs), in
//! an LRU map.

use analyzer_common::maps::DEFAULT_MAX_NOTES;
use analyzer_common::psn::{self, PeerKey};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, LruHashMap};

/// PMTU of flows that have not shown their own (`--pmtu`); 0 learns it per flow.
#[unsafe(no_mangle)]
pub(crate) static PMTU_DEFAULT: u32 = 0;

/// Notes between the two directions of a connection ([`psn::PeerNotes`]): the MTU a READ
/// RESPONSE showed, RNR NAKs. LRU: an evicted note is a lost hint, not a lost count.
#[map]
pub(crate) static NOTES: LruHashMap<PeerKey, u32> = LruHashMap::with_max_entries(DEFAULT_MAX_NOTES, 0);

/// Set (entry 0) once an RNR NAK has been noted in [`NOTES`]: until then no request looks
/// for one there.
#[map]
pub(crate) static RNR_NOTED: Array<u64> = Array::with_max_entries(1, 0);

/// The notes map as the shared accounting sees it ([`psn::account`]).
pub(crate) struct KernelNotes;

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
pub(crate) fn take_rnr_note(key: &PeerKey) -> bool {
    // SAFETY: the map value, read before the entry is removed.
    let rnr = NOTES.get_ptr(key).is_some_and(|p| unsafe { *p } == psn::NOTE_RNR);
    if rnr {
        let _ = NOTES.remove(key);
    }
    rnr
}
