//! UDP header.

use super::{be16, fixed_header_view, put16};

/// The IANA port of RoCE v2.
pub const ROCE_V2_PORT: u16 = 4791;

fixed_header_view!(
    /// The 8-byte UDP header.
    ; 8
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    /// Length of header plus payload, as the header states it.
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    pub fn is_empty(&self) -> bool {
        self.len() <= 8
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
}

/// A UDP header; `payload_len` excludes the 8 header bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: u16,
    pub checksum: u16,
}

impl Repr {
    pub const LEN: usize = 8;

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> super::Result<Self> {
        if p.len() < 8 {
            return Err(super::Error::Malformed);
        }
        Ok(Repr { src_port: p.src_port(), dst_port: p.dst_port(), payload_len: p.len() - 8, checksum: p.checksum() })
    }

    pub fn emit(&self, buf: &mut [u8]) {
        put16(buf, 0, self.src_port);
        put16(buf, 2, self.dst_port);
        put16(buf, 4, self.payload_len + 8);
        put16(buf, 6, self.checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        let h = [0xC0, 0x00, 0x12, 0xB7, 0x00, 0x24, 0x00, 0x00];
        let p = Packet::new_checked(&h[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (49152, ROCE_V2_PORT, 36));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 28);
        let mut out = [0u8; 8];
        r.emit(&mut out);
        assert_eq!(out, h);
    }

    #[test]
    fn length_below_header_is_malformed() {
        let h = [0, 1, 0x12, 0xB7, 0, 7, 0, 0];
        assert!(Repr::parse(&Packet::new_unchecked(&h[..])).is_err());
    }
}
