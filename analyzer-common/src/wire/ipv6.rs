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

/// The GRH next-header value for an InfiniBand BTH (RoCE v1).
pub const NEXT_HEADER_IB_BTH: u8 = 0x1B;

fixed_header_view!(
    /// The 40-byte IPv6 header (or InfiniBand GRH, same layout).
    ; 40
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    pub fn traffic_class(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }
    pub fn flow_label(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([0, b[1] & 0x0F, b[2], b[3]])
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[6]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }
    pub fn src(&self) -> [u8; 16] {
        addr16(self.buffer.as_ref(), 8)
    }
    pub fn dst(&self) -> [u8; 16] {
        addr16(self.buffer.as_ref(), 24)
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

    pub fn emit(&self, buf: &mut [u8]) {
        let tc = (self.dscp << 2) | (self.ecn & 3);
        let fl = self.flow_label & 0x000F_FFFF;
        buf[0] = 0x60 | (tc >> 4);
        buf[1] = (tc << 4) | (fl >> 16) as u8;
        put16(buf, 2, fl as u16);
        put16(buf, 4, self.payload_len);
        buf[6] = self.next_header;
        buf[7] = self.hop_limit;
        buf[8..24].copy_from_slice(&self.src);
        buf[24..40].copy_from_slice(&self.dst);
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
