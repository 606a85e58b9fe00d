//! The kernel's flow table: where a flow's [`FlowEntry`] lives, and how the XDP program finds
//! it with array lookups instead of a hash map's.
//!
//! A hash map lookup of the 40-byte key costs a RoCE frame ≈ 35 ns on the benchmark machine
//! (the kernel hashes the whole key with jhash and compares it in its bucket's list). Here a
//! flow's place is found from a cheap hash of its key computed by the program: one of
//! [`CHOICES`] candidate buckets of [`WAYS`] slots, each bucket's tags on one cache line ([`MAP_FLOW_TAGS`]), and the
//! key compared only in a slot whose tag matches ([`MAP_FLOW_SLOTS`]). Both arrays are
//! mapped by the agent, which reads the flows without a syscall per entry.
//!
//! A tag is a slot's state in its low byte and, for a live slot, 32 bits of the flow's hash
//! above it. The program claims a claimable slot with a compare-and-swap (two CPUs inserting at
//! once never take the same slot), fills it and then publishes its live tag. The agent retires
//! a flow in two steps, as it gives a removed flow's id back: live → [`tag::RETIRING`] (the
//! program no longer finds it; a later frame of the flow inserts it again, elsewhere), and one
//! poll later, when no frame that found it can still be updating it and no record naming it
//! can still wait, → [`tag::DEAD`], which the program may claim again. Slots never become
//! free again, which lets a lookup stop early ([`LEVELS`]).
//!
//! A flow's id (its records' [`crate::record::CompactRecord::flow`]) is its slot's index
//! plus one.

use crate::flow::FlowKey;
use crate::maps::FlowEntry;
use crate::mix::{M1, M2};

/// Array of [`Tags`], one per bucket (BPF_F_MMAPABLE).
pub const MAP_FLOW_TAGS: &str = "FLOW_TAGS";
/// Array of [`FlowSlot`], [`WAYS`] per bucket (BPF_F_MMAPABLE).
pub const MAP_FLOW_SLOTS: &str = "FLOW_SLOTS";
/// Read-only u32 global: the buckets the loader gave the two arrays.
pub const GLOBAL_FLOW_BUCKETS: &str = "FLOW_BUCKETS";
/// Read-only u32 global: `--max-flows`, the flows the table may hold at once (its slots are a
/// few more: [`buckets_for`]).
pub const GLOBAL_MAX_FLOWS: &str = "MAX_FLOWS";
/// Array of one u64 (BPF_F_MMAPABLE): the flows in the table, added to by the program (an
/// atomic add) when it inserts one, taken from by the agent when it retires one; a flow that
/// would make it exceed [`GLOBAL_MAX_FLOWS`] is not inserted (counted as the table full), so
/// the kernel keeps exactly as many flows as `--max-flows` says, as the host does offline.
pub const MAP_FLOW_COUNT: &str = "FLOW_COUNT";

/// Slots in a bucket: their tags fill one 64-byte cache line.
pub const WAYS: usize = 8;

/// A bucket's tags.
pub type Tags = [u64; WAYS];

/// A flow's slot: its key and its entry. 200 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSlot {
    pub key: FlowKey,
    pub entry: FlowEntry,
}

const _: () = assert!(core::mem::size_of::<FlowSlot>() == 200);

/// The tags' states (the low byte).
pub mod tag {
    pub const FREE: u64 = 0;
    /// Being filled by the CPU that claimed it.
    pub const CLAIMED: u64 = 1;
    /// With the flow's hash bits above: see [`live`].
    pub const LIVE: u64 = 2;
    /// Removed by the agent; not yet to be claimed again.
    pub const RETIRING: u64 = 3;
    /// Removed; may be claimed again.
    pub const DEAD: u64 = 4;

    /// The tag of a live slot holding a flow of hash `h`.
    #[inline(always)]
    pub const fn live(h: u64) -> u64 {
        (h & 0xffff_ffff_0000_0000) | LIVE
    }

    /// A slot's state.
    #[inline(always)]
    pub const fn state(t: u64) -> u64 {
        t & 0xff
    }

    /// Whether the program may claim a slot with this tag.
    #[inline(always)]
    pub const fn claimable(t: u64) -> bool {
        t == FREE || t == DEAD
    }
}

/// The buckets for `max_flows` flows: one slot in eight left over, so that a flow rarely finds
/// all its buckets full before the table is.
pub const fn buckets_for(max_flows: u32) -> u32 {
    let b = max_flows.div_ceil(WAYS as u32 - 1);
    if b == 0 { 1 } else { b }
}

/// The flows a table of `buckets` holds.
pub const fn capacity(buckets: u32) -> u32 {
    buckets * WAYS as u32
}

/// Kernel memory per flow of `--max-flows` (tags and slots, whatever the CPU count), bytes.
pub const fn bytes_per_flow(max_flows: u32) -> u64 {
    let b = buckets_for(max_flows) as u64;
    b * (core::mem::size_of::<Tags>() as u64 + WAYS as u64 * core::mem::size_of::<FlowSlot>() as u64)
        / if max_flows == 0 { 1 } else { max_flows as u64 }
}

/// The key's hash: its ten 32-bit words folded with multiplications (a few instructions in
/// the program, where the kernel's jhash of 40 bytes is tens).
#[inline(always)]
pub fn hash(k: &FlowKey) -> u64 {
    let mut h = 0u64;
    let mut i = 0;
    while i < KEY_WORDS {
        h = (h ^ (word(k, i) as u64 | (word(k, i + 1) as u64) << 32)).wrapping_mul(M1);
        h ^= h >> 29;
        i += 2;
    }
    h.wrapping_mul(M2) ^ (h >> 32)
}

/// The 32-bit words of a key.
pub const KEY_WORDS: usize = core::mem::size_of::<FlowKey>() / 4;

/// Word `i` (< [`KEY_WORDS`]) of the key, read in place (no copy of the key on the program's
/// stack, which the verifier bounds to 512 bytes for a chain of calls).
#[inline(always)]
pub fn word(k: &FlowKey, i: usize) -> u32 {
    debug_assert!(i < KEY_WORDS);
    // SAFETY: FlowKey is repr(C), 4-byte aligned, 40 bytes of integers without padding: word
    // i lies within it.
    unsafe { core::ptr::read((k as *const FlowKey as *const u32).add(i % KEY_WORDS)) }
}

/// Whether two keys are equal, word by word (a struct compare may become a `bcmp` call, which
/// the program cannot make).
#[inline(always)]
pub fn same(a: &FlowKey, b: &FlowKey) -> bool {
    let mut i = 0;
    while i < KEY_WORDS {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(core::mem::align_of::<FlowKey>() == 4 && core::mem::size_of::<FlowKey>().is_multiple_of(8));

/// The buckets a flow may be in, tried in this order.
pub const CHOICES: usize = 4;

/// How the program places a new flow: in the first of its buckets with a claimable slot among
/// its first 4 ways, else among its first 6, else 7, else any. This holds `--max-flows` flows
/// with one slot in eight left over (a simulation with ideal hashes filling 65 536: 392
/// refused when taking the first bucket with any claimable slot, 14 with levels 6 and 8, none
/// with these; a test below fills it with this hash), needs no count of a bucket's free slots
/// (whose branches the verifier would explore in every combination), and keeps most flows in
/// their first bucket, the one a lookup reads first. A free slot among a bucket's first 4
/// ways tells a lookup that the flow is in no later bucket.
pub const LEVELS: [u32; 4] = [4, 6, 7, WAYS as u32];

/// Bit `way` set if a slot of tag `t` may be claimed ([`tag::claimable`]: free or dead, 0 or
/// 4), computed without a branch: such a tag is 0 once bit 2 is cleared, and `(x | -x) >> 63`
/// is 1 for any x but 0. The program builds a bucket's mask of claimable ways from these, so
/// the verifier walks no branch per way.
#[inline(always)]
pub const fn claimable_bit(t: u64, way: usize) -> u32 {
    let x = t & !tag::DEAD;
    ((1 ^ ((x | x.wrapping_neg()) >> 63)) as u32) << way
}

const _: () = assert!(tag::FREE == 0 && tag::DEAD == 4);

/// The position of the lowest set bit of `x` (≠ 0), by arithmetic: the BPF target has no
/// count-trailing-zeros instruction.
#[inline(always)]
pub const fn lowest_bit(x: u32) -> u32 {
    (x & x.wrapping_neg()).wrapping_sub(1).count_ones()
}

/// Where a new flow goes ([`LEVELS`]), given each of its buckets' claimable ways (bit `w` of
/// `masks[c]`: way `w` of its choice-`c` bucket): the first choice with a claimable way among
/// the level's first ways, at its first claimable way; None when every bucket is full. The
/// program's placement and the host's model of it.
#[inline(always)]
pub fn pick(masks: [u32; CHOICES]) -> Option<(usize, u32)> {
    for limit in LEVELS {
        for (c, m) in masks.iter().enumerate() {
            let low = m & ((1u32 << limit) - 1);
            if low != 0 {
                return Some((c, lowest_bit(low)));
            }
        }
    }
    None
}

/// Choice `c` (< [`CHOICES`]) of the buckets (of `buckets`) a flow of hash `h` may be in: from
/// four 32-bit values of the hash by multiply-shift (no power of two needed). Computed where
/// needed, not kept in an array: the program's stack has no room to spare.
#[inline(always)]
pub fn bucket(h: u64, c: usize, buckets: u32) -> u32 {
    let x = match c {
        0 => h,
        1 => h >> 32,
        _ => {
            let g = h.wrapping_mul(M1) ^ (h >> 31);
            if c == 2 { g } else { g >> 32 }
        }
    };
    (((x & 0xffff_ffff) * buckets as u64) >> 32) as u32
}

/// All [`CHOICES`] buckets of a flow ([`bucket`]), in order.
pub fn buckets(h: u64, buckets: u32) -> [u32; CHOICES] {
    [bucket(h, 0, buckets), bucket(h, 1, buckets), bucket(h, 2, buckets), bucket(h, 3, buckets)]
}

/// The id of the flow in slot `way` of bucket `bucket`.
#[inline(always)]
pub const fn id_of(bucket: u32, way: u32) -> u32 {
    bucket * WAYS as u32 + way + 1
}

/// The slot index of id `id` (≥ 1).
#[inline(always)]
pub const fn slot_of(id: u32) -> u32 {
    id - 1
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (size asserted above).
unsafe impl aya::Pod for FlowSlot {}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            src: [10, (i >> 16) as u8, (i >> 8) as u8, i as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst_qp: 0x100 + (i % 7),
            udp_sport: 49152,
            ip_version: 4,
            _pad: 0,
        }
    }

    #[test]
    fn memory_per_flow_is_within_256_bytes() {
        for n in [1, 2, 7, 8, 1000, 65536, 1 << 20] {
            let b = buckets_for(n);
            assert!(capacity(b) >= n, "{n} flows, {b} buckets");
            if n >= 1000 {
                assert!(bytes_per_flow(n) <= 256, "{n} flows: {} bytes a flow", bytes_per_flow(n));
            }
        }
        // 65536 flows: 9363 buckets of 8 slots (200 bytes) and their 64-byte tag line.
        assert_eq!(buckets_for(65536), 9363);
        assert_eq!(bytes_per_flow(65536), 237);
    }

    #[test]
    fn the_buckets_are_within_the_table_and_spread() {
        for n in [1u32, 2, 3, 100, 9363] {
            let mut first = [0u32; 128];
            for i in 0..5000 {
                let b = buckets(hash(&key(i)), n);
                assert!(b.iter().all(|&x| x < n), "{n} buckets: {b:?}");
                first[(b[0] % 128) as usize] += 1;
            }
            if n >= 128 {
                // 5000 flows over 128 groups of buckets: about 39 each.
                assert!(first.iter().all(|&c| (10..=80).contains(&c)), "{n} buckets: {first:?}");
            }
        }
        assert_eq!(buckets(hash(&key(1)), 1), [0; CHOICES]);
    }

    /// Where the program puts a new flow ([`pick`]), in a table of buckets filled to `used`
    /// (their first ways taken); None when all its buckets are full.
    fn place(used: &[u8], c: [u32; CHOICES]) -> Option<u32> {
        let masks = c.map(|x| !((1u32 << used[x as usize]) - 1) & 0xff);
        pick(masks).map(|(choice, way)| {
            assert_eq!(way, used[c[choice] as usize] as u32, "the first free way");
            c[choice]
        })
    }

    /// The levels by hand: the first bucket with a free way among its first four, else six,
    /// else seven, else any; a bucket's first claimable way, dead or free.
    #[test]
    fn a_new_flow_takes_the_first_claimable_way_of_the_first_bucket_at_the_lowest_level() {
        let ways = |w: &[u32]| w.iter().fold(0u32, |m, &x| m | 1 << x);
        // Choice 0 full to way 4, choice 1 free from way 2: level 4 picks choice 1, way 2.
        assert_eq!(pick([ways(&[5, 6, 7]), ways(&[2, 3, 4, 5, 6, 7]), 0, 0]), Some((1, 2)));
        // Nothing among the first four ways: level 6 takes choice 0's way 4 before choice 2's.
        assert_eq!(pick([ways(&[4, 5, 6, 7]), 0, ways(&[5, 6, 7]), 0]), Some((0, 4)));
        // Only way 7 anywhere: the last level, the first choice that has it.
        assert_eq!(pick([0, 0, ways(&[7]), ways(&[7])]), Some((2, 7)));
        // A dead slot among live ones is claimable at its way.
        assert_eq!(pick([ways(&[1]), 0, 0, 0]), Some((0, 1)));
        assert_eq!(pick([0; CHOICES]), None);
    }

    /// The branch-free tests agree with their plain forms: every slot state, with and without
    /// hash bits above it; every mask's lowest bit.
    #[test]
    fn claimable_bits_and_lowest_bits_agree_with_their_plain_forms() {
        for state in 0..=0xffu64 {
            for high in [0u64, 1 << 8, 0xffff_ffff_0000_0000, !0xff] {
                let t = state | high;
                for way in 0..WAYS {
                    assert_eq!(claimable_bit(t, way), (tag::claimable(t) as u32) << way, "tag {t:#x}");
                }
            }
        }
        for x in 1..=u16::MAX as u32 {
            assert_eq!(lowest_bit(x), x.trailing_zeros(), "{x:#x}");
        }
        assert_eq!(lowest_bit(1 << 31), 31);
    }

    /// A table filled to its `--max-flows` as the program fills it: no flow finds all its
    /// buckets full, and most are in their first.
    #[test]
    fn the_levels_hold_max_flows() {
        for n in [1000u32, 65536] {
            let b = buckets_for(n);
            let mut used = [0u8; 9363];
            let (mut refused, mut first) = (0, 0);
            for i in 0..n {
                let c = buckets(hash(&key(i)), b);
                match place(&used[..b as usize], c) {
                    Some(x) => {
                        used[x as usize] += 1;
                        first += (x == c[0]) as u32;
                    }
                    None => refused += 1,
                }
            }
            assert_eq!(refused, 0, "{n} flows in {b} buckets");
            assert!(first * 10 > n * 6, "{first} of {n} in their first bucket");
        }
    }

    #[test]
    fn keys_compare_and_hash_by_every_word() {
        let (a, mut b) = (key(5), key(5));
        assert!(same(&a, &b) && hash(&a) == hash(&b));
        for field in 0..4 {
            b = key(5);
            match field {
                0 => b.src[15] = 1,
                1 => b.dst[0] = 11,
                2 => b.dst_qp ^= 1 << 20,
                _ => b.ip_version = 6,
            }
            assert!(!same(&a, &b) && hash(&a) != hash(&b), "field {field}");
        }
    }

    #[test]
    fn tags_of_live_slots_carry_the_hash_and_never_look_free() {
        let h = hash(&key(3));
        let t = tag::live(h);
        assert_eq!(tag::state(t), tag::LIVE);
        assert!(!tag::claimable(t) && tag::claimable(tag::FREE) && tag::claimable(tag::DEAD));
        assert!(!tag::claimable(tag::CLAIMED) && !tag::claimable(tag::RETIRING));
        assert_ne!(tag::live(hash(&key(4))), t, "another flow's tag");
        assert_eq!((id_of(0, 0), id_of(2, 7), slot_of(id_of(2, 7))), (1, 24, 23));
    }
}
