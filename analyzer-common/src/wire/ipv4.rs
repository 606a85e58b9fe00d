//! IPv4 header (options are skipped through IHL).

use super::{be16, fixed_header_view, put16};

/// IP protocol numbers the classifier follows.
pub mod protocol {
    pub const UDP: u8 = 17;
    pub const GRE: u8 = 47;
}

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: core::ops::Range<usize> = 12..16;
    pub const DST: core::ops::Range<usize> = 16..20;
}

fixed_header_view!(
    /// The fixed 20 bytes of an IPv4 header.
    ; 20
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::VER_IHL] & 0x0F) as usize) * 4
    }
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] & 3
    }
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TOTAL_LEN)
    }
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }
    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS_FRAG] & 0x40 != 0
    }
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS_FRAG] & 0x20 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLAGS_FRAG) & 0x1FFF) * 8
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn src(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }
    pub fn dst(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Version 4 and the header length in bytes (a multiple of 4).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (len / 4) as u8;
    }
    pub fn set_tos(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::TOS] = (dscp << 2) | (ecn & 3);
    }
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::TOTAL_LEN, v);
    }
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT, v);
    }
    /// DF, MF and the fragment offset in bytes (a multiple of 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let flags = ((dont_frag as u16) << 14) | ((more_frags as u16) << 13);
        put16(self.buffer.as_mut(), field::FLAGS_FRAG, flags | (offset / 8));
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    pub fn set_src(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }
    pub fn set_dst(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }
    /// Computes the header checksum over `header_len()` bytes (options included) and stores it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }
}

/// Internet checksum (RFC 1071) of `data`, folded and complemented.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 header without options (emit writes IHL 5 unless `options_len` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    pub ident: u16,
    /// Payload length in bytes (after header and options).
    pub payload_len: u16,
    /// Bytes of options (a multiple of 4, at most 40) written as NOPs... then End.
    pub options_len: u8,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
}

impl Repr {
    pub fn header_len(&self) -> usize {
        20 + self.options_len as usize
    }

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> super::Result<Self> {
        if p.version() != 4 || p.header_len() < 20 || (p.total_len() as usize) < p.header_len() {
            return Err(super::Error::Malformed);
        }
        Ok(Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ttl: p.ttl(),
            ident: p.ident(),
            payload_len: p.total_len() - p.header_len() as u16,
            options_len: (p.header_len() - 20) as u8,
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        })
    }

    /// Writes the header and options (with a correct checksum) into `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let hl = self.header_len();
        // Options: NOPs, then End of Option List in the last byte.
        for b in &mut buf[20..hl] {
            *b = 1;
        }
        if hl > 20 {
            buf[hl - 1] = 0;
        }
        let mut p = Packet::new_unchecked(buf);
        p.set_header_len(hl);
        p.set_tos(self.dscp, self.ecn);
        p.set_total_len((hl + self.payload_len as usize) as u16);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, self.more_frags, self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src(self.src);
        p.set_dst(self.dst);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.0.1 -> 10.0.0.2, UDP, DSCP 26 ECN CE, DF, total 48.
    const HDR: [u8; 20] =
        [0x45, 0x6B, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0, 0, 2];

    #[test]
    fn parses_fields() {
        let p = Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!((p.version(), p.header_len(), p.dscp(), p.ecn()), (4, 20, 26, 3));
        assert_eq!((p.total_len(), p.ident(), p.protocol()), (48, 0x1234, 17));
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!((p.src(), p.dst()), ([10, 0, 0, 1], [10, 0, 0, 2]));
    }

    #[test]
    fn emit_sets_checksum_and_round_trips() {
        let r = Repr::parse(&Packet::new_unchecked(&HDR[..])).unwrap();
        let mut buf = [0u8; 20];
        r.emit(&mut buf);
        assert_eq!(checksum(&buf), 0, "a header with its checksum sums to zero");
        buf[10] = 0;
        buf[11] = 0;
        assert_eq!(buf, HDR);
    }

    #[test]
    fn options_and_fragments() {
        let r = Repr {
            src: [1, 2, 3, 4],
            dst: [5, 6, 7, 8],
            protocol: 17,
            dscp: 0,
            ecn: 0,
            ttl: 1,
            ident: 0,
            payload_len: 8,
            options_len: 8,
            dont_frag: false,
            more_frags: true,
            frag_offset: 1480,
        };
        let mut buf = [0u8; 28];
        r.emit(&mut buf);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.header_len(), p.frag_offset(), p.more_frags()), (28, 1480, true));
        assert_eq!(Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn bad_ihl_is_malformed() {
        let mut h = HDR;
        h[0] = 0x44;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&h[..])), Err(super::super::Error::Malformed));
    }
}
