//! GRE (RFC 2784/2890) and the ERSPAN headers that mirror sessions put inside it.
//!
//! The classifier reads the 4-byte GRE base header, skips the optional checksum, key and
//! sequence words, then by protocol: 0x6558 (transparent Ethernet bridging) is followed by the
//! inner frame; 0x88BE is ERSPAN type II (8-byte header) or, without the sequence bit, type I
//! (no header); 0x22EB is ERSPAN type III (12 bytes, plus 8 when the O bit says a
//! platform-specific sub-header follows).

use super::{be16, be32, fixed_header_view, put16, put32};

pub mod flags {
    pub const CHECKSUM: u16 = 0x8000;
    pub const ROUTING: u16 = 0x4000;
    pub const KEY: u16 = 0x2000;
    pub const SEQUENCE: u16 = 0x1000;
    pub const VERSION: u16 = 0x0007;
}

pub const ERSPAN_II_LEN: usize = 8;
pub const ERSPAN_III_LEN: usize = 12;
pub const ERSPAN_III_PLATFORM_LEN: usize = 8;

fixed_header_view!(
    /// The 4-byte GRE base header (flags/version, protocol).
    ; 4
);

mod field {
    /// GRE: flags and version, then the protocol; the optional words follow.
    pub const FLAGS: usize = 0;
    pub const PROTOCOL: usize = 2;
    pub const OPTIONAL: usize = 4;
    /// ERSPAN II/III: version, VLAN, COS, truncated bit, session id in the first word.
    pub const ERSPAN_WORD0: usize = 0;
    /// ERSPAN II: index; ERSPAN III: timestamp.
    pub const ERSPAN_WORD1: usize = 4;
    /// ERSPAN III: SGT, frame type, hardware id, platform-subheader bit.
    pub const ERSPAN_WORD2: usize = 8;
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLAGS)
    }
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PROTOCOL)
    }
    /// Length of the whole GRE header with its optional words, or `None` when the routing bit
    /// or a non-zero version makes it a GRE this tool does not follow.
    pub fn header_len(&self) -> Option<usize> {
        gre_header_len(self.flags())
    }
}

/// GRE header length for the given flags word; `None` for routing or version ≠ 0.
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_flags(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::FLAGS, v);
    }
    pub fn set_protocol(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PROTOCOL, v);
    }
    /// The `i`-th optional word (checksum, key, sequence: those the flags announce, in order).
    pub fn set_optional(&mut self, i: usize, v: u32) {
        put32(self.buffer.as_mut(), field::OPTIONAL + 4 * i, v);
    }
}

#[inline(always)]
pub const fn gre_header_len(f: u16) -> Option<usize> {
    if f & (flags::ROUTING | flags::VERSION) != 0 {
        return None;
    }
    let mut len = 4;
    if f & flags::CHECKSUM != 0 {
        len += 4;
    }
    if f & flags::KEY != 0 {
        len += 4;
    }
    if f & flags::SEQUENCE != 0 {
        len += 4;
    }
    Some(len)
}

/// A GRE header with optional key and sequence number (checksum is never emitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub protocol: u16,
    pub key: Option<u32>,
    pub seq: Option<u32>,
}

impl Repr {
    pub fn header_len(&self) -> usize {
        4 + 4 * (self.key.is_some() as usize + self.seq.is_some() as usize)
    }
    pub fn emit(&self, buf: &mut [u8]) {
        let f = if self.key.is_some() { flags::KEY } else { 0 } | if self.seq.is_some() { flags::SEQUENCE } else { 0 };
        let mut p = Packet::new_unchecked(buf);
        p.set_flags(f);
        p.set_protocol(self.protocol);
        for (i, word) in self.key.into_iter().chain(self.seq).enumerate() {
            p.set_optional(i, word);
        }
    }
}

/// ERSPAN version field (top 4 bits of the first byte): 1 = type II, 2 = type III.
#[inline(always)]
pub const fn erspan_version(first: u8) -> u8 {
    first >> 4
}

/// ERSPAN type II: version 1, VLAN, CoS, encapsulation type, truncated bit, session, index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErspanII {
    pub vlan: u16,
    pub cos: u8,
    pub truncated: bool,
    pub session: u16,
    pub index: u32,
}

/// The first word of ERSPAN II and III: (VLAN, COS, truncated, session).
fn word0(w0: u32) -> (u16, u8, bool, u16) {
    (((w0 >> 16) & 0x0FFF) as u16, ((w0 >> 13) & 7) as u8, (w0 >> 10) & 1 != 0, (w0 & 0x3FF) as u16)
}

fn put_word0(b: &mut [u8], version: u32, vlan: u16, cos: u8, truncated: bool, session: u16) {
    let w0 = (version << 28)
        | ((vlan as u32 & 0x0FFF) << 16)
        | ((cos as u32 & 7) << 13)
        | ((truncated as u32) << 10)
        | (session as u32 & 0x3FF);
    put32(b, field::ERSPAN_WORD0, w0);
}

impl ErspanII {
    pub fn parse(b: &[u8; ERSPAN_II_LEN]) -> Self {
        let (vlan, cos, truncated, session) = word0(be32(b, field::ERSPAN_WORD0));
        ErspanII { vlan, cos, truncated, session, index: be32(b, field::ERSPAN_WORD1) & 0x000F_FFFF }
    }
    pub fn emit(&self, b: &mut [u8]) {
        put_word0(b, 1, self.vlan, self.cos, self.truncated, self.session);
        put32(b, field::ERSPAN_WORD1, self.index & 0x000F_FFFF);
    }
}

/// ERSPAN type III: version 2, VLAN, CoS, truncated bit, session, timestamp, frame type, and
/// the O bit announcing the optional 8-byte platform-specific sub-header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErspanIII {
    pub vlan: u16,
    pub cos: u8,
    pub truncated: bool,
    pub session: u16,
    pub timestamp: u32,
    pub sgt: u16,
    /// Frame type: 0 = Ethernet (the only one followed), 2 = IP.
    pub frame_type: u8,
    pub hw_id: u8,
    pub platform_subheader: bool,
}

impl ErspanIII {
    pub fn parse(b: &[u8; ERSPAN_III_LEN]) -> Self {
        let (vlan, cos, truncated, session) = word0(be32(b, field::ERSPAN_WORD0));
        let w2 = be32(b, field::ERSPAN_WORD2);
        ErspanIII {
            vlan,
            cos,
            truncated,
            session,
            timestamp: be32(b, field::ERSPAN_WORD1),
            sgt: (w2 >> 16) as u16,
            frame_type: ((w2 >> 10) & 0x1F) as u8,
            hw_id: ((w2 >> 4) & 0x3F) as u8,
            platform_subheader: w2 & 1 != 0,
        }
    }
    /// Length including the platform-specific sub-header when present.
    pub fn header_len(&self) -> usize {
        ERSPAN_III_LEN + if self.platform_subheader { ERSPAN_III_PLATFORM_LEN } else { 0 }
    }
    /// Writes the header (and a zeroed platform sub-header when the O bit is set).
    pub fn emit(&self, b: &mut [u8]) {
        put_word0(b, 2, self.vlan, self.cos, self.truncated, self.session);
        put32(b, field::ERSPAN_WORD1, self.timestamp);
        let w2 = ((self.sgt as u32) << 16)
            | ((self.frame_type as u32 & 0x1F) << 10)
            | ((self.hw_id as u32 & 0x3F) << 4)
            | self.platform_subheader as u32;
        put32(b, field::ERSPAN_WORD2, w2);
        if self.platform_subheader {
            b[12..20].fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gre_lengths() {
        assert_eq!(gre_header_len(0), Some(4));
        assert_eq!(gre_header_len(flags::SEQUENCE), Some(8));
        assert_eq!(gre_header_len(flags::CHECKSUM | flags::KEY | flags::SEQUENCE), Some(16));
        assert_eq!(gre_header_len(flags::ROUTING), None);
        assert_eq!(gre_header_len(1), None);
        let r = Repr { protocol: 0x88BE, key: Some(5), seq: Some(9) };
        let mut b = [0u8; 12];
        r.emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.protocol(), p.header_len()), (0x88BE, Some(12)));
    }

    #[test]
    fn erspan_ii() {
        // ver 1, VLAN 100, CoS 3, T, session 42, index 7
        let b = [0x10, 0x64, 0x64, 0x2A, 0x00, 0x00, 0x00, 0x07];
        let e = ErspanII::parse(&b);
        assert_eq!(e, ErspanII { vlan: 100, cos: 3, truncated: true, session: 42, index: 7 });
        assert_eq!(erspan_version(b[0]), 1);
        let mut out = [0u8; 8];
        e.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn erspan_iii() {
        let e = ErspanIII {
            vlan: 5,
            cos: 1,
            truncated: false,
            session: 1023,
            timestamp: 0xAABBCCDD,
            sgt: 9,
            frame_type: 0,
            hw_id: 3,
            platform_subheader: true,
        };
        let mut b = [0u8; 20];
        e.emit(&mut b);
        assert_eq!(erspan_version(b[0]), 2);
        let mut h = [0u8; 12];
        h.copy_from_slice(&b[..12]);
        assert_eq!(ErspanIII::parse(&h), e);
        assert_eq!(e.header_len(), 20);
    }
}
