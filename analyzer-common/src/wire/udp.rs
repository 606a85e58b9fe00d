//! UDP header.

use super::{be16, fixed_header_view, put16};

/// The IANA port of RoCE v2.
pub const ROCE_V2_PORT: u16 = 4791;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

fixed_header_view!(
    /// The 8-byte UDP header.
    ; 8
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// Length of header plus payload, as the header states it.
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn is_empty(&self) -> bool {
        self.len() <= 8
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }
    /// Header plus payload bytes.
    pub fn set_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
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

    /// Writes the header into the first 8 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(buf);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(self.payload_len + 8);
        p.set_checksum(self.checksum);
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
