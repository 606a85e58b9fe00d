//! Mirrored copies: a frame several switches mirror to this port counts once
//! ([`analyzer_common::vantage::sight`]).

use analyzer_common::PacketSummary;
use analyzer_common::maps::{DEFAULT_MAX_SIGHTINGS, counter};
use analyzer_common::vantage::{self, FrameId, SIGHT_WAYS, SightSlot, Verdict};
use aya_ebpf::macros::map;
use aya_ebpf::maps::Array;

use crate::counters::count;
use crate::logs::copy_words;

/// Frames seen in mirrored copies ([`vantage::sight`]): a frame several switches mirror to
/// this port counts once. Buckets of slots found by array lookups ([`SightSlot`]): a sighting
/// given up for another within the window makes a late copy count as a frame (counted).
#[map]
pub(crate) static SIGHTINGS: Array<SightSlot> = Array::with_max_entries(DEFAULT_MAX_SIGHTINGS, 0);

/// Copies of one frame are matched within this (`--match-window`).
#[unsafe(no_mangle)]
pub(crate) static MATCH_WINDOW_NS: u64 = vantage::DEFAULT_WINDOW_NS;

/// Whether a mirrored copy is a frame counted already (from another origin, within the
/// window): then the ECN its previous copy had. A frame not sighted takes the slot of its
/// bucket seen longest ago. A call of its own: inlined, its identity and slots on the
/// program's stack took the deepest call chain past the verifier's 512 bytes.
#[inline(never)]
pub(crate) fn matched_copy(s: &PacketSummary, now: u64) -> Option<u8> {
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
