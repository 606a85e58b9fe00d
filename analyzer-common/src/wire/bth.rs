//! InfiniBand Base Transport Header (12 bytes), as carried by RoCE v1 and v2.

use super::{be16, be24, fixed_header_view, put16, put24};

fixed_header_view!(
    /// The 12-byte BTH.
    ; 12
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn opcode(&self) -> u8 {
        self.buffer.as_ref()[0]
    }
    /// Solicited event.
    pub fn se(&self) -> bool {
        self.buffer.as_ref()[1] & 0x80 != 0
    }
    /// Migration state.
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[1] & 0x40 != 0
    }
    /// Pad bytes added to align the payload to 4 bytes.
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[1] >> 4) & 3
    }
    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[1] & 0x0F
    }
    /// The flags byte (SE, M, PadCnt, TVer) as on the wire.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[1]
    }
    pub fn pkey(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[4] & 0x80 != 0
    }
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[4] & 0x40 != 0
    }
    pub fn dst_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), 5)
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[8] & 0x80 != 0
    }
    /// 24-bit packet sequence number.
    pub fn psn(&self) -> u32 {
        be24(self.buffer.as_ref(), 9)
    }
}

/// A BTH with every field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    pub opcode: u8,
    pub se: bool,
    pub migreq: bool,
    pub pad_count: u8,
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub dst_qp: u32,
    pub ack_req: bool,
    pub psn: u32,
}

impl Repr {
    pub const LEN: usize = 12;

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Repr {
            opcode: p.opcode(),
            se: p.se(),
            migreq: p.migreq(),
            pad_count: p.pad_count(),
            tver: p.tver(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dst_qp: p.dst_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        }
    }

    pub fn emit(&self, buf: &mut [u8]) {
        buf[0] = self.opcode;
        buf[1] = ((self.se as u8) << 7) | ((self.migreq as u8) << 6) | ((self.pad_count & 3) << 4) | (self.tver & 0x0F);
        put16(buf, 2, self.pkey);
        buf[4] = ((self.fecn as u8) << 7) | ((self.becn as u8) << 6);
        put24(buf, 5, self.dst_qp);
        buf[8] = (self.ack_req as u8) << 7;
        put24(buf, 9, self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field() {
        // RC RDMA WRITE ONLY, SE, pad 2, pkey 0xffff, FECN, QP 0x000123, AckReq, PSN 0xabcdef
        let h = [0x0A, 0xA0, 0xFF, 0xFF, 0x80, 0x00, 0x01, 0x23, 0x80, 0xAB, 0xCD, 0xEF];
        let p = Packet::new_checked(&h[..]).unwrap();
        let r = Repr::parse(&p);
        assert_eq!(
            r,
            Repr {
                opcode: 0x0A,
                se: true,
                migreq: false,
                pad_count: 2,
                tver: 0,
                pkey: 0xFFFF,
                fecn: true,
                becn: false,
                dst_qp: 0x123,
                ack_req: true,
                psn: 0xABCDEF
            }
        );
        let mut out = [0u8; 12];
        r.emit(&mut out);
        assert_eq!(out, h);
    }

    #[test]
    fn becn_migreq_tver() {
        let h = [0x81, 0x41, 0, 0, 0x40, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0];
        let p = Packet::new_unchecked(&h[..]);
        assert!(p.becn() && !p.fecn() && p.migreq() && !p.se() && !p.ack_req());
        assert_eq!((p.tver(), p.dst_qp(), p.psn()), (1, 0xFF_FFFF, 0));
    }
}
