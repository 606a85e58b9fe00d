//! One frame seen at several vantage points: its identity, and the decision whether a
//! mirrored copy is a frame already counted (issue "real vantage points", 2).
//!
//! A frame's identity across vantage points is (source, destination, destination QP, PSN,
//! opcode, UDP source port, IPv4 identification). Offline, the host matches every input's
//! frames with it (holding them for the match window). Live, one collector port can receive
//! copies of the same frame from several switches: the XDP program keeps, per identity seen in
//! a mirrored copy, when it was first seen and which mirror origins sent it ([`Sighting`]); a
//! copy from another origin within the window is the frame already counted, and only its ECN
//! moves the flow's count (the last copy is what the receiver got). A repeat from an origin
//! that already sent it is a new frame (a retransmission).

use crate::PacketSummary;
use crate::mix::{M1, M2};

/// Copies of one frame are matched within this by default (`--match-window`).
pub const DEFAULT_WINDOW_NS: u64 = 100_000_000;

/// Identity of a RoCE frame across vantage points. 8-aligned: the XDP program builds it on
/// its stack in six 8-byte stores ([`FrameId::fill`]).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FrameId {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub dst_qp: u32,
    pub psn: u32,
    /// IPv4 identification (0 for IPv6, or when a sender leaves it 0).
    pub ip_id: u16,
    /// Copies keep the UDP header; two source QPs of one host sending to one UD QP differ in it.
    pub udp_sport: u16,
    pub opcode: u8,
    pub _pad: [u8; 3],
}

const _: () = assert!(core::mem::size_of::<FrameId>() == 48);
// The words `FrameId::fill` builds: the fields' offsets, on a little-endian target.
const _: () = {
    use core::mem::offset_of;
    assert!(cfg!(target_endian = "little"));
    assert!(offset_of!(FrameId, src) == 0 && offset_of!(FrameId, dst) == 16);
    assert!(offset_of!(FrameId, dst_qp) == 32 && offset_of!(FrameId, psn) == 36);
    assert!(offset_of!(FrameId, ip_id) == 40 && offset_of!(FrameId, udp_sport) == 42);
    assert!(offset_of!(FrameId, opcode) == 44 && offset_of!(FrameId, _pad) == 45);
};

impl FrameId {
    #[inline(always)]
    pub fn of(s: &PacketSummary) -> Self {
        let mut id = core::mem::MaybeUninit::<FrameId>::uninit();
        // SAFETY: `fill` writes all of the FrameId's 48 bytes (its padding included).
        unsafe {
            FrameId::fill(id.as_mut_ptr(), s);
            id.assume_init()
        }
    }

    /// Its `i`-th 8-byte word (0..6: the addresses, then destination QP and PSN, then IP
    /// identification, UDP source port and opcode), as [`FrameId::fill`] writes them.
    #[inline(always)]
    pub fn word(&self, i: usize) -> u64 {
        debug_assert!(i < 6);
        // SAFETY: a FrameId is six 8-aligned words; `i` is below six at every call.
        unsafe { core::ptr::read((self as *const FrameId as *const u64).add(i)) }
    }

    /// Writes the identity of the frame `s` at `dst` as six 8-byte stores: the addresses, then
    /// words built in registers (field by field the padding was a call to a byte loop in the
    /// XDP program, for every mirrored copy).
    ///
    /// # Safety
    /// `dst` must be valid for writes of one `FrameId` (8-aligned, as the type is).
    #[inline(always)]
    pub unsafe fn fill(dst: *mut FrameId, s: &PacketSummary) {
        let w = dst as *mut u64;
        let qp_psn = s.dst_qp as u64 | (s.psn as u64) << 32;
        let rest = s.ip_id as u64 | (s.udp_sport as u64) << 16 | (s.opcode as u64) << 32;
        // SAFETY: the caller guarantees `dst`: six words, the identity's 48 bytes.
        unsafe {
            crate::record::write_addresses(w, s);
            core::ptr::write_volatile(w.add(4), qp_psn);
            core::ptr::write_volatile(w.add(5), rest);
        }
    }
}

/// A mirrored frame's first sighting: when, which origins sent copies (a bit per origin,
/// [`origin_bit`]), and the ECN of the latest copy.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sighting {
    pub first_ns: u64,
    pub origins: u32,
    pub ecn: u8,
    pub _pad: [u8; 3],
}

const _: () = assert!(core::mem::size_of::<Sighting>() == 16);
const _: () = assert!(core::mem::offset_of!(Sighting, origins) == 8 && core::mem::offset_of!(Sighting, ecn) == 12);

impl Sighting {
    /// Sets the whole sighting (its padding zero) as two 8-byte stores: a struct assignment
    /// was a call to a byte loop for the padding in the XDP program.
    #[inline(always)]
    pub fn set(&mut self, first_ns: u64, origins: u32, ecn: u8) {
        let w = self as *mut Sighting as *mut u64;
        // SAFETY: a Sighting is two 8-aligned words: the first time, then origins, ECN and
        // padding (offsets asserted above, little-endian like every target this runs on).
        unsafe {
            core::ptr::write_volatile(w, first_ns);
            core::ptr::write_volatile(w.add(1), origins as u64 | (ecn as u64) << 32);
        }
    }
}

// `origin_bit` reads the origin as two 8-byte words of the summary.
const _: () = assert!(core::mem::offset_of!(PacketSummary, origin_ip) % 8 == 0);

/// The bit of a copy's origin (outer source address and ERSPAN session), one of 32: two
/// origins that share a bit look like one (a copy then counts as a retransmission). The top
/// bits of two independent products of the origin's words: a few instructions for every
/// mirrored copy (a byte-wise FNV over the 17 bytes was seventeen dependent multiplications).
#[inline(always)]
pub fn origin_bit(s: &PacketSummary) -> u32 {
    let w = &s.origin_ip as *const [u8; 16] as *const u64;
    // SAFETY: the 16-byte address as two words (8-aligned in the summary, asserted above).
    let (lo, hi) = unsafe { (core::ptr::read(w), core::ptr::read(w.add(1))) };
    let hi = hi ^ (s.origin_session as u64) << 48;
    let h = (lo ^ 0x243F_6A88_85A3_08D3).wrapping_mul(M1) ^ (hi ^ 0x1319_8A2E_0370_7344).wrapping_mul(M2);
    1 << (h >> 59)
}

/// What a mirrored copy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first sighting of a frame (or a repeat from an origin that sent it already):
    /// count it.
    New,
    /// A copy of a frame counted already, whose latest copy had ECN `previous_ecn`.
    Copy { previous_ecn: u8 },
}

/// Decides a mirrored copy seen at `now` given its identity's sighting, and updates (or
/// starts) the sighting.
#[inline(always)]
pub fn sight(entry: &mut Sighting, exists: bool, s: &PacketSummary, now: u64, window_ns: u64) -> Verdict {
    let bit = origin_bit(s);
    let ecn = s.ecn & 3;
    if exists && entry.origins & bit == 0 && now.wrapping_sub(entry.first_ns) <= window_ns {
        let previous_ecn = entry.ecn;
        entry.origins |= bit;
        entry.ecn = ecn;
        return Verdict::Copy { previous_ecn };
    }
    entry.set(now, bit, ecn);
    Verdict::New
}

/// Ways of a bucket of the kernel's sightings table.
pub const SIGHT_WAYS: u32 = 4;
/// Buckets of the kernel's sightings table: [`crate::maps::DEFAULT_MAX_SIGHTINGS`] slots.
pub const SIGHT_BUCKETS: u32 = crate::maps::DEFAULT_MAX_SIGHTINGS / SIGHT_WAYS;
// A bucket is a PSN's place modulo their number ([`sight_bucket`]).
const _: () = assert!(SIGHT_BUCKETS.is_power_of_two());

/// A slot of the kernel's sightings table ([`crate::maps::MAP_SIGHTINGS`]): an array of
/// [`SIGHT_BUCKETS`] buckets of [`SIGHT_WAYS`] slots, one cache line each, found by array
/// lookups ([`sight_bucket`]). A frame not sighted takes the slot of its bucket seen longest ago
/// (a free slot's time is 0). It replaced an LRU hash map, whose insertion (the path of every
/// new copy, with its locks and lists) left a mirrored frame 370–480 ns dearer than a plain one
/// on replayed traffic (≈ 90 now, BENCHMARKS.md); a sighting given up within the window is counted
/// ([`crate::maps::counter::SIGHTINGS_EVICTED`]), which the LRU map's evictions were not.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SightSlot {
    pub id: FrameId,
    pub seen: Sighting,
}

const _: () = assert!(core::mem::size_of::<SightSlot>() == 64);

/// The bucket of a frame identity: a hash of its flow (addresses, destination QP, UDP source
/// port) plus its PSN, so that a flow's consecutive frames take consecutive buckets. Every new
/// copy writes a slot of a table of megabytes: at random places each was a cache and TLB miss
/// (≈ 290 ns a copy on replayed traffic, against a table small enough for the cache); in PSN
/// order a flow walks through memory, a page every sixteen frames. The hash is the XOR of
/// independent products of the flow's words (they multiply in parallel), its top bits taken.
#[inline(always)]
pub fn sight_bucket(id: &FrameId) -> u32 {
    let ends = id.word(1) ^ id.word(3) ^ (id.dst_qp as u64) << 32 ^ id.udp_sport as u64;
    let h = (id.word(0) ^ 0x243F_6A88_85A3_08D3).wrapping_mul(M1)
        ^ (id.word(2) ^ 0x1319_8A2E_0370_7344).wrapping_mul(M2)
        ^ (ends ^ 0xA409_3822_299F_31D0).wrapping_mul(0x1656_67B1_9E37_79F9);
    ((h >> 32) as u32).wrapping_add(id.psn) & (SIGHT_BUCKETS - 1)
}

/// Whether two identities are the same, word by word.
#[inline(always)]
pub fn same_id(a: &FrameId, b: &FrameId) -> bool {
    let mut diff = 0;
    let mut i = 0;
    while i < 6 {
        diff |= a.word(i) ^ b.word(i);
        i += 1;
    }
    diff == 0
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted above).
    unsafe impl aya::Pod for super::FrameId {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Sighting {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SightSlot {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(origin: u8, ecn: u8) -> PacketSummary {
        let mut s = PacketSummary::zeroed();
        s.origin_ip[..4].copy_from_slice(&[192, 0, 2, origin]);
        s.encap = 3;
        s.ecn = ecn;
        s
    }

    #[test]
    fn frame_id_words_are_its_fields() {
        let mut s = PacketSummary::zeroed();
        s.src_ip = core::array::from_fn(|i| i as u8 + 1);
        s.dst_ip = core::array::from_fn(|i| 0xF0 - i as u8);
        (s.dst_qp, s.psn, s.ip_id, s.udp_sport, s.opcode) = (0xAB_CDEF, 0x12_3456, 0xBEEF, 49152, 0x07);
        let id = FrameId::of(&s);
        let fields = FrameId {
            src: s.src_ip,
            dst: s.dst_ip,
            dst_qp: s.dst_qp,
            psn: s.psn,
            ip_id: s.ip_id,
            udp_sport: s.udp_sport,
            opcode: s.opcode,
            _pad: [0; 3],
        };
        assert_eq!(id, fields);
        let mut e = Sighting { first_ns: 1, origins: 2, ecn: 3, _pad: [9; 3] };
        e.set(0x1122_3344_5566_7788, 0x8000_0001, 2);
        assert_eq!(e, Sighting { first_ns: 0x1122_3344_5566_7788, origins: 0x8000_0001, ecn: 2, _pad: [0; 3] });
    }

    /// The origins of the ERSPAN collector fixture (`vantage_erspan.pcap`, matched live too)
    /// and the sessions of one origin take distinct bits.
    #[test]
    fn origins_take_distinct_bits() {
        let (mut a, mut b) = (copy(1, 0), copy(2, 0));
        (a.origin_session, b.origin_session) = (6, 7);
        assert_ne!(origin_bit(&a), origin_bit(&b));
        let bits: [u32; 8] = core::array::from_fn(|i| {
            let mut c = copy(1, 0);
            c.origin_session = i as u16 + 1;
            origin_bit(&c)
        });
        assert!(bits.iter().all(|b| b.count_ones() == 1));
        let distinct = bits.iter().fold(0u32, |m, b| m | b).count_ones();
        assert!(distinct >= 6, "8 sessions of one origin spread over {distinct} bits");
    }

    #[test]
    fn copies_from_other_origins_within_the_window() {
        let (a, b) = (copy(1, 2), copy(2, 3));
        assert_ne!(origin_bit(&a), origin_bit(&b));
        let mut e = Sighting::default();
        assert_eq!(sight(&mut e, false, &a, 1000, 100), Verdict::New);
        assert_eq!(sight(&mut e, true, &b, 1050, 100), Verdict::Copy { previous_ecn: 2 });
        assert_eq!(e.ecn, 3, "the last copy's ECN");
        // A repeat from an origin that sent it: a new frame (a retransmission).
        assert_eq!(sight(&mut e, true, &a, 1060, 100), Verdict::New);
        // Past the window: a new frame.
        assert_eq!(sight(&mut e, true, &b, 1200, 100), Verdict::New);
    }
}
