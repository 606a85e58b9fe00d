//! IPv6 fixed header; also the layout of the InfiniBand GRH that RoCE v1 carries.

use super::{be16, fixed_header_view, put16};

/// Next-header values that are IPv6 extension headers (RFC 8200 and the IANA list): a frame
/// with one of these before UDP is counted as unsupported rather than guessed at.
pub const fn is_extension_header(next: u8) -> bool {
    matches!(next, 0 | 43 | 44 | 50 | 51 | 60 | 135 | 139 | 140 | 253 | 254)
}

/// 16 bytes at `at`, as two 8-byte words: a `copy_from_slice` here becomes a byte-loop
/// `memcpy` call in the BPF program.
#[inline(always)]
fn addr16(b: &[u8], at: usize) -> [u8; 16] {
    let hi = super::be64(b, at);
    let lo = super::be64(b, at + 8);
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&hi.to_be_bytes());
    a[8..].copy_from_slice(&lo.to_be_bytes());
    a
}

/// The hop-by-hop options header's next-header value.
pub const HOP_BY_HOP: u8 = 0;

/// The GRH next-header value for an InfiniBand BTH (RoCE v1).
pub const NEXT_HEADER_IB_BTH: u8 = 0x1B;

mod field {
    /// Version (4 bits), traffic class (8), flow label (20).
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: core::ops::Range<usize> = 8..24;
    pub const DST: core::ops::Range<usize> = 24..40;
}

fixed_header_view!(
    /// The 40-byte IPv6 header (or InfiniBand GRH, same layout).
    ; 40
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn ver_tc_flow(&self) -> u32 {
        super::be32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000F_FFFF
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    pub fn src(&self) -> [u8; 16] {
        addr16(self.buffer.as_ref(), field::SRC.start)
    }
    pub fn dst(&self) -> [u8; 16] {
        addr16(self.buffer.as_ref(), field::DST.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Version 6, the traffic class (DSCP and ECN) and the flow label.
    pub fn set_ver_tc_flow(&mut self, dscp: u8, ecn: u8, flow_label: u32) {
        let tc = ((dscp << 2) | (ecn & 3)) as u32;
        super::put32(self.buffer.as_mut(), field::VER_TC_FLOW, (6 << 28) | (tc << 20) | (flow_label & 0x000F_FFFF));
    }
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    pub fn set_src(&mut self, a: [u8; 16]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }
    pub fn set_dst(&mut self, a: [u8; 16]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }
}

/// An IPv6 header (or GRH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub next_header: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub flow_label: u32,
    pub payload_len: u16,
    pub hop_limit: u8,
}

impl Repr {
    pub const LEN: usize = 40;

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> super::Result<Self> {
        if p.version() != 6 {
            return Err(super::Error::Malformed);
        }
        Ok(Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            flow_label: p.flow_label(),
            payload_len: p.payload_len(),
            hop_limit: p.hop_limit(),
        })
    }

    /// Writes the header into the first 40 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(buf);
        p.set_ver_tc_flow(self.dscp, self.ecn, self.flow_label);
        p.set_payload_len(self.payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src(self.src);
        p.set_dst(self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_traffic_class_and_round_trips() {
        let mut h = [0u8; 40];
        h[..8].copy_from_slice(&[0x66, 0xA1, 0x23, 0x45, 0x00, 0x20, 17, 64]);
        h[8] = 0xfd;
        h[24] = 0xfd;
        h[39] = 2;
        let p = Packet::new_checked(&h[..]).unwrap();
        assert_eq!((p.version(), p.traffic_class(), p.dscp(), p.ecn()), (6, 0x6A, 26, 2));
        assert_eq!((p.flow_label(), p.payload_len(), p.next_header()), (0x12345, 32, 17));
        let r = Repr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        r.emit(&mut out);
        assert_eq!(out, h);
    }

    #[test]
    fn extension_headers() {
        assert!(is_extension_header(0) && is_extension_header(44) && is_extension_header(60));
        assert!(!is_extension_header(17) && !is_extension_header(6) && !is_extension_header(58));
    }
}
