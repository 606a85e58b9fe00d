//! Ethernet II header and 802.1Q / 802.1ad VLAN tags.

use super::{be16, fixed_header_view, put16};

/// EtherType values the classifier recognises.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86DD;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88A8;
    /// Pre-standard QinQ used by some switches.
    pub const QINQ_LEGACY: u16 = 0x9100;
    pub const MAC_CONTROL: u16 = 0x8808;
    /// RoCE v1: GRH + BTH directly over Ethernet.
    pub const ROCE_V1: u16 = 0x8915;
    /// Transparent Ethernet bridging (inner frame inside GRE).
    pub const TEB: u16 = 0x6558;
    /// ERSPAN type I and II (GRE protocol).
    pub const ERSPAN_II: u16 = 0x88BE;
    /// ERSPAN type III (GRE protocol).
    pub const ERSPAN_III: u16 = 0x22EB;
}

/// True for the tag protocol identifiers of a VLAN tag (802.1Q, 802.1ad, legacy 0x9100).
#[inline(always)]
pub const fn is_vlan_tpid(ethertype: u16) -> bool {
    matches!(ethertype, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_LEGACY)
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
}

fixed_header_view!(
    /// The 14-byte Ethernet II header.
    ; 14
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn dst(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        m
    }
    pub fn src(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        m
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_dst(&mut self, m: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&m);
    }
    pub fn set_src(&mut self, m: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&m);
    }
    pub fn set_ethertype(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, v);
    }
}

/// An Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: u16,
}

impl Repr {
    pub const LEN: usize = 14;

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Repr { dst: p.dst(), src: p.src(), ethertype: p.ethertype() }
    }

    /// Writes the header into the first 14 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(buf);
        p.set_dst(self.dst);
        p.set_src(self.src);
        p.set_ethertype(self.ethertype);
    }
}

/// A VLAN tag as it follows the TPID: 2 bytes TCI, 2 bytes inner EtherType.
pub mod vlan {
    use super::super::{be16, fixed_header_view, put16};

    mod field {
        /// PCP (bits 15..13), DEI (bit 12), VID (bits 11..0).
        pub const TCI: usize = 0;
        pub const ETHERTYPE: usize = 2;
    }

    fixed_header_view!(
        /// The 4 bytes after a VLAN TPID: TCI (PCP, DEI, VID) and the next EtherType.
        ; 4
    );

    impl<T: AsRef<[u8]>> Packet<T> {
        fn tci(&self) -> u16 {
            be16(self.buffer.as_ref(), field::TCI)
        }
        pub fn pcp(&self) -> u8 {
            (self.tci() >> 13) as u8
        }
        pub fn dei(&self) -> bool {
            self.tci() & 0x1000 != 0
        }
        pub fn vid(&self) -> u16 {
            self.tci() & 0x0FFF
        }
        pub fn ethertype(&self) -> u16 {
            be16(self.buffer.as_ref(), field::ETHERTYPE)
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        /// PCP, DEI and VID.
        pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
            put16(self.buffer.as_mut(), field::TCI, ((pcp as u16 & 7) << 13) | ((dei as u16) << 12) | (vid & 0x0FFF));
        }
        pub fn set_ethertype(&mut self, v: u16) {
            put16(self.buffer.as_mut(), field::ETHERTYPE, v);
        }
    }

    /// A VLAN tag: TPID (written before it by the caller), PCP, VID and the next EtherType.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        pub pcp: u8,
        pub vid: u16,
        pub ethertype: u16,
    }

    impl Repr {
        pub const LEN: usize = 4;
        pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
            Repr { pcp: p.pcp(), vid: p.vid(), ethertype: p.ethertype() }
        }
        pub fn emit(&self, buf: &mut [u8]) {
            let mut p = Packet::new_unchecked(buf);
            p.set_tci(self.pcp, false, self.vid);
            p.set_ethertype(self.ethertype);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x81, 0x00, // dst, src, 802.1Q
        0x60, 0x64, 0x08, 0x00, // PCP 3, VID 100, IPv4
    ];

    #[test]
    fn parses_header_and_tag() {
        let eth = Packet::new_checked(&FRAME[..]).unwrap();
        assert_eq!(eth.dst(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(eth.src(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(eth.ethertype(), ethertype::VLAN);
        assert!(is_vlan_tpid(eth.ethertype()));
        let tag = vlan::Packet::new_checked(&FRAME[14..]).unwrap();
        assert_eq!(vlan::Repr::parse(&tag), vlan::Repr { pcp: 3, vid: 100, ethertype: 0x0800 });
        assert!(!tag.dei());
    }

    #[test]
    fn emit_round_trips() {
        let mut buf = [0u8; 18];
        Repr::parse(&Packet::new_unchecked(&FRAME[..])).emit(&mut buf);
        vlan::Repr { pcp: 3, vid: 100, ethertype: 0x0800 }.emit(&mut buf[14..]);
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&FRAME[..13]), Err(super::super::Error::Truncated));
    }
}
