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

/// Copies of one frame are matched within this by default (`--match-window`).
pub const DEFAULT_WINDOW_NS: u64 = 100_000_000;

/// Identity of a RoCE frame across vantage points.
#[repr(C)]
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

impl FrameId {
    #[inline(always)]
    pub fn of(s: &PacketSummary) -> Self {
        FrameId {
            src: s.src_ip,
            dst: s.dst_ip,
            dst_qp: s.dst_qp,
            psn: s.psn,
            ip_id: s.ip_id,
            udp_sport: s.udp_sport,
            opcode: s.opcode,
            _pad: [0; 3],
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

/// The bit of a copy's origin (outer source address and ERSPAN session), one of 32: two
/// origins that share a bit look like one (a copy then counts as a retransmission).
#[inline(always)]
pub fn origin_bit(s: &PacketSummary) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    let mut i = 0;
    while i < 16 {
        h = (h ^ s.origin_ip[i] as u32).wrapping_mul(0x0100_0193);
        i += 1;
    }
    h = (h ^ s.origin_session as u32).wrapping_mul(0x0100_0193);
    1 << ((h ^ (h >> 16)) & 31)
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
    *entry = Sighting { first_ns: now, origins: bit, ecn, _pad: [0; 3] };
    Verdict::New
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted above).
    unsafe impl aya::Pod for super::FrameId {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Sighting {}
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
