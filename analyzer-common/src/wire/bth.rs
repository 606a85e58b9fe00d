//! InfiniBand Base Transport Header (12 bytes), as carried by RoCE v1 and v2.

use super::{be16, be24, fixed_header_view, put16, put24};

mod field {
    pub const OPCODE: usize = 0;
    /// SE (bit 7), MigReq (bit 6), PadCnt (bits 5..4), TVer (bits 3..0).
    pub const FLAGS: usize = 1;
    pub const PKEY: usize = 2;
    /// FECN (bit 7), BECN (bit 6), reserved.
    pub const ECN: usize = 4;
    pub const DST_QP: usize = 5;
    /// AckReq (bit 7), reserved.
    pub const ACK_REQ: usize = 8;
    pub const PSN: usize = 9;
}

fixed_header_view!(
    /// The 12-byte BTH.
    ; 12
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn opcode(&self) -> u8 {
        self.buffer.as_ref()[field::OPCODE]
    }
    /// Solicited event.
    pub fn se(&self) -> bool {
        self.flags() & 0x80 != 0
    }
    /// Migration state.
    pub fn migreq(&self) -> bool {
        self.flags() & 0x40 != 0
    }
    /// Pad bytes added to align the payload to 4 bytes.
    pub fn pad_count(&self) -> u8 {
        (self.flags() >> 4) & 3
    }
    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.flags() & 0x0F
    }
    /// The flags byte (SE, M, PadCnt, TVer) as on the wire.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn pkey(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PKEY)
    }
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::ECN] & 0x80 != 0
    }
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::ECN] & 0x40 != 0
    }
    pub fn dst_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), field::DST_QP)
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }
    /// 24-bit packet sequence number.
    pub fn psn(&self) -> u32 {
        be24(self.buffer.as_ref(), field::PSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_opcode(&mut self, v: u8) {
        self.buffer.as_mut()[field::OPCODE] = v;
    }
    /// SE, MigReq, PadCnt and TVer in one byte.
    pub fn set_flags(&mut self, se: bool, migreq: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] =
            ((se as u8) << 7) | ((migreq as u8) << 6) | ((pad_count & 3) << 4) | (tver & 0x0F);
    }
    pub fn set_pkey(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PKEY, v);
    }
    /// FECN and BECN (the byte's other bits are reserved, written as zero).
    pub fn set_ecn(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::ECN] = ((fecn as u8) << 7) | ((becn as u8) << 6);
    }
    pub fn set_dst_qp(&mut self, v: u32) {
        put24(self.buffer.as_mut(), field::DST_QP, v);
    }
    /// AckReq (the byte's other bits are reserved, written as zero).
    pub fn set_ack_req(&mut self, v: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = (v as u8) << 7;
    }
    pub fn set_psn(&mut self, v: u32) {
        put24(self.buffer.as_mut(), field::PSN, v);
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

    /// Writes the header into the first 12 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(buf);
        p.set_opcode(self.opcode);
        p.set_flags(self.se, self.migreq, self.pad_count, self.tver);
        p.set_pkey(self.pkey);
        p.set_ecn(self.fecn, self.becn);
        p.set_dst_qp(self.dst_qp);
        p.set_ack_req(self.ack_req);
        p.set_psn(self.psn);
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
