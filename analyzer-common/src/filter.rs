//! `--filter`: which frames are analysed. The XDP program and the host run this one
//! [`Filter::admits`] on the frame's [`PacketSummary`], so live and offline select the same
//! frames; what it refuses is counted, not analysed.
//!
//! A filter is a conjunction of terms, each a set of at most [`MAX_VALUES`] values (or a bit
//! mask): source, destination, either-end and mirror-origin prefixes, destination QPs, DSCPs,
//! PCPs and VLANs. PFC and 802.3x PAUSE frames belong to the fabric, not to a flow: they are
//! always admitted.

use crate::{FrameClass, PacketSummary};

/// Values per term, at most (prefixes, QPs, VLANs).
pub const MAX_VALUES: usize = 4;

/// An address prefix over the 16-byte address form (IPv4 in the first four bytes, the rest
/// zero: an IPv4 prefix's mask covers those twelve zero bytes too).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prefix {
    pub net: [u64; 2],
    pub mask: [u64; 2],
    /// 4 or 6: the IP version of the addresses it holds.
    pub version: u64,
}

/// The address as two words, as [`Prefix`] stores its network and mask.
#[inline(always)]
pub fn words(a: &[u8; 16]) -> [u64; 2] {
    [
        u64::from_ne_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]]),
        u64::from_ne_bytes([a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]]),
    ]
}

impl Prefix {
    /// `addr/len` of IP version `version` (4: `addr`'s first four bytes).
    pub fn new(version: u8, addr: &[u8; 16], len: u8) -> Prefix {
        let bits: u32 = if version == 4 { 32 } else { 128 };
        let len = (len as u32).min(bits);
        let mut mask = [0u8; 16];
        for (i, m) in mask.iter_mut().enumerate() {
            let first = i as u32 * 8;
            // An IPv4 prefix's mask also covers the zero tail of the 16-byte form.
            *m = if (version == 4 && i >= 4) || len >= first + 8 {
                0xFF
            } else if len > first {
                0xFFu8 << (8 - (len - first))
            } else {
                0
            };
        }
        let mut net = [0u8; 16];
        for ((n, a), m) in net.iter_mut().zip(addr).zip(&mask) {
            *n = a & m;
        }
        Prefix { net: words(&net), mask: words(&mask), version: version as u64 }
    }

    #[inline(always)]
    fn holds(&self, w: [u64; 2], version: u8) -> bool {
        self.version == version as u64 && (w[0] & self.mask[0]) == self.net[0] && (w[1] & self.mask[1]) == self.net[1]
    }
}

/// Bits of [`Filter::flags`].
pub mod flag {
    /// The `dscp` term is given (`Filter::dscp` is its mask).
    pub const DSCP: u8 = 1;
    /// The `pcp` term is given.
    pub const PCP: u8 = 2;
    /// The `vlan` term admits untagged frames (`vlan=none`).
    pub const UNTAGGED: u8 = 4;
}

/// A filter as the XDP program reads it from its map. All zero admits every frame.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    pub src: [Prefix; MAX_VALUES],
    pub dst: [Prefix; MAX_VALUES],
    /// Either end (`host=`).
    pub host: [Prefix; MAX_VALUES],
    /// The mirror origin (outer source of a GRE/ERSPAN copy).
    pub origin: [Prefix; MAX_VALUES],
    pub qp: [u32; MAX_VALUES],
    /// Bit d: DSCP d admitted (with [`flag::DSCP`]).
    pub dscp: u64,
    pub vlan: [u16; MAX_VALUES],
    pub n_src: u8,
    pub n_dst: u8,
    pub n_host: u8,
    pub n_origin: u8,
    pub n_qp: u8,
    pub n_vlan: u8,
    /// Bit p: PCP p admitted (with [`flag::PCP`]).
    pub pcp: u8,
    pub flags: u8,
}

const _: () = assert!(core::mem::size_of::<Filter>() == 4 * 4 * 40 + 16 + 8 + 8 + 8);

#[inline(always)]
fn any_holds(list: &[Prefix; MAX_VALUES], n: u8, w: [u64; 2], version: u8) -> bool {
    let mut i = 0;
    while i < MAX_VALUES {
        if i < n as usize && list[i].holds(w, version) {
            return true;
        }
        i += 1;
    }
    false
}

#[inline(always)]
fn contains<T: PartialEq + Copy>(list: &[T; MAX_VALUES], n: u8, v: T) -> bool {
    let mut i = 0;
    while i < MAX_VALUES {
        if i < n as usize && list[i] == v {
            return true;
        }
        i += 1;
    }
    false
}

impl Filter {
    pub const fn zeroed() -> Filter {
        // SAFETY: integers and integer arrays only, for which zero is valid.
        unsafe { core::mem::zeroed() }
    }

    /// Whether the filter has any term (an empty one admits everything).
    pub fn is_empty(&self) -> bool {
        self.n_src == 0
            && self.n_dst == 0
            && self.n_host == 0
            && self.n_origin == 0
            && self.n_qp == 0
            && self.n_vlan == 0
            && self.flags == 0
    }

    /// Whether the frame is analysed. Every term must hold; a term on a field the frame does
    /// not have (an address of a frame without IP, the QP of a frame without BTH, the PCP of
    /// an untagged frame, the origin of a frame that is not a mirrored copy) does not.
    #[inline(always)]
    pub fn admits(&self, s: &PacketSummary) -> bool {
        if s.class == FrameClass::Pfc as u8 || s.class == FrameClass::Pause as u8 {
            return true;
        }
        let v = s.ip_version;
        if self.n_src != 0 && !any_holds(&self.src, self.n_src, words(&s.src_ip), v) {
            return false;
        }
        if self.n_dst != 0 && !any_holds(&self.dst, self.n_dst, words(&s.dst_ip), v) {
            return false;
        }
        if self.n_host != 0
            && !any_holds(&self.host, self.n_host, words(&s.src_ip), v)
            && !any_holds(&self.host, self.n_host, words(&s.dst_ip), v)
        {
            return false;
        }
        if self.n_origin != 0 {
            // The origin's version is not kept: IPv4 by the zero tail of the 16-byte form.
            let o = &s.origin_ip;
            let w = words(o);
            let ov = if w[1] == 0 && u32::from_ne_bytes([o[4], o[5], o[6], o[7]]) == 0 { 4 } else { 6 };
            if s.encap == 0 || !any_holds(&self.origin, self.n_origin, w, ov) {
                return false;
            }
        }
        if self.n_qp != 0 && (s.roce_version == 0 || !contains(&self.qp, self.n_qp, s.dst_qp)) {
            return false;
        }
        if self.flags & flag::DSCP != 0 && (v == 0 || (self.dscp >> (s.dscp & 63)) & 1 == 0) {
            return false;
        }
        if self.flags & flag::PCP != 0 && (s.vlan_tags == 0 || (self.pcp >> (s.pcp & 7)) & 1 == 0) {
            return false;
        }
        if self.n_vlan != 0 || self.flags & flag::UNTAGGED != 0 {
            let ok = if s.vlan_tags == 0 {
                self.flags & flag::UNTAGGED != 0
            } else {
                contains(&self.vlan, self.n_vlan, s.vlan_id)
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (size asserted above).
unsafe impl aya::Pod for Filter {}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&a);
        b
    }

    #[test]
    fn prefix_boundaries() {
        let p = Prefix::new(4, &v4([10, 1, 2, 3]), 23);
        assert!(p.holds(words(&v4([10, 1, 3, 255])), 4), "10.1.2.0/23 holds 10.1.3.255");
        assert!(!p.holds(words(&v4([10, 1, 4, 0])), 4));
        assert!(!p.holds(words(&v4([10, 1, 2, 3])), 6), "not for another IP version");
        let mut tail = v4([10, 1, 2, 3]);
        tail[15] = 1;
        assert!(!p.holds(words(&tail), 4), "an IPv4 prefix needs the zero tail");
        let all = Prefix::new(6, &[0; 16], 0);
        assert!(all.holds(words(&[0xFF; 16]), 6));
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = 0x02;
        let p = Prefix::new(6, &a, 127);
        assert!(p.holds(words(&a), 6));
        a[15] = 0x03;
        assert!(p.holds(words(&a), 6), "/127 holds both ends");
        a[15] = 0x04;
        assert!(!p.holds(words(&a), 6));
        assert_eq!(Prefix::new(4, &v4([10, 1, 2, 3]), 40), Prefix::new(4, &v4([10, 1, 2, 3]), 32), "clamped");
    }

    #[test]
    fn an_empty_filter_admits_everything() {
        let f = Filter::zeroed();
        assert!(f.is_empty());
        let mut s = PacketSummary::zeroed();
        for class in [FrameClass::Roce, FrameClass::NonRoce, FrameClass::Pfc, FrameClass::BadIpHeader] {
            s.class = class as u8;
            assert!(f.admits(&s));
        }
    }
}
