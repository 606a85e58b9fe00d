//! InfiniBand extended transport headers that follow the BTH (IBTA vol. 1, ch. 9.3), in the
//! order they appear: RDETH, DETH, XRCETH, RETH / AtomicETH / FETH, AETH, AtomicAckETH,
//! ImmDt / IETH.

use super::{be24, be32, be64, put24, put32, put64};

/// Sizes in bytes.
pub const RDETH_LEN: usize = 4;
pub const DETH_LEN: usize = 8;
pub const XRCETH_LEN: usize = 4;
pub const RETH_LEN: usize = 16;
pub const ATOMIC_ETH_LEN: usize = 28;
pub const FETH_LEN: usize = 4;
pub const AETH_LEN: usize = 4;
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
pub const IMMDT_LEN: usize = 4;
pub const IETH_LEN: usize = 4;
/// The invariant CRC that ends every RoCE packet.
pub const ICRC_LEN: usize = 4;
/// The reserved bytes of a RoCE v2 CNP after its BTH.
pub const CNP_RESERVED_LEN: usize = 16;

/// Byte offsets of the fields within each extended header.
mod field {
    pub mod reth {
        pub const VA: usize = 0;
        pub const RKEY: usize = 8;
        pub const DMA_LEN: usize = 12;
    }
    pub mod aeth {
        pub const SYNDROME: usize = 0;
        pub const MSN: usize = 1;
    }
    pub mod atomic {
        pub const VA: usize = 0;
        pub const RKEY: usize = 8;
        pub const SWAP_ADD: usize = 12;
        pub const COMPARE: usize = 20;
    }
    /// AtomicAckETH's original data, ImmDt's and IETH's one word.
    pub const VALUE: usize = 0;
}

/// RDMA Extended Transport Header: virtual address, R_Key, DMA length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl Reth {
    pub fn parse(b: &[u8; RETH_LEN]) -> Self {
        use field::reth::*;
        Reth { va: be64(b, VA), rkey: be32(b, RKEY), dma_len: be32(b, DMA_LEN) }
    }
    pub fn emit(&self, b: &mut [u8]) {
        use field::reth::*;
        put64(b, VA, self.va);
        put32(b, RKEY, self.rkey);
        put32(b, DMA_LEN, self.dma_len);
    }
}

/// AETH syndrome types (bits 6..5 of the syndrome).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AckType {
    Ack = 0,
    RnrNak = 1,
    Reserved = 2,
    Nak = 3,
}

/// NAK codes carried in the low five syndrome bits when the type is NAK.
pub mod nak_code {
    pub const PSN_SEQUENCE_ERROR: u8 = 0;
    pub const INVALID_REQUEST: u8 = 1;
    pub const REMOTE_ACCESS_ERROR: u8 = 2;
    pub const REMOTE_OPERATIONAL_ERROR: u8 = 3;
    pub const INVALID_RD_REQUEST: u8 = 4;
}

/// ACK Extended Transport Header: syndrome and message sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: u32,
}

impl Aeth {
    pub fn parse(b: &[u8; AETH_LEN]) -> Self {
        Aeth { syndrome: b[field::aeth::SYNDROME], msn: be24(b, field::aeth::MSN) }
    }
    pub fn emit(&self, b: &mut [u8]) {
        b[field::aeth::SYNDROME] = self.syndrome;
        put24(b, field::aeth::MSN, self.msn);
    }
    pub fn ack_type(&self) -> AckType {
        syndrome_type(self.syndrome)
    }
    /// Credit count (ACK), RNR timer code (RNR NAK) or NAK code (NAK).
    pub fn value(&self) -> u8 {
        self.syndrome & 0x1F
    }
    pub fn ack(credits: u8, msn: u32) -> Self {
        Aeth { syndrome: credits & 0x1F, msn }
    }
    pub fn rnr_nak(timer: u8, msn: u32) -> Self {
        Aeth { syndrome: 0x20 | (timer & 0x1F), msn }
    }
    pub fn nak(code: u8, msn: u32) -> Self {
        Aeth { syndrome: 0x60 | (code & 0x1F), msn }
    }
}

/// The type of an AETH syndrome byte.
pub const fn syndrome_type(syndrome: u8) -> AckType {
    match (syndrome >> 5) & 3 {
        0 => AckType::Ack,
        1 => AckType::RnrNak,
        2 => AckType::Reserved,
        _ => AckType::Nak,
    }
}

/// Atomic Extended Transport Header: address, R_Key, swap (or add) data, compare data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

impl AtomicEth {
    pub fn parse(b: &[u8; ATOMIC_ETH_LEN]) -> Self {
        use field::atomic::*;
        AtomicEth { va: be64(b, VA), rkey: be32(b, RKEY), swap_add: be64(b, SWAP_ADD), compare: be64(b, COMPARE) }
    }
    pub fn emit(&self, b: &mut [u8]) {
        use field::atomic::*;
        put64(b, VA, self.va);
        put32(b, RKEY, self.rkey);
        put64(b, SWAP_ADD, self.swap_add);
        put64(b, COMPARE, self.compare);
    }
}

/// Atomic Acknowledge ETH: the original remote data.
pub fn parse_atomic_ack(b: &[u8; ATOMIC_ACK_ETH_LEN]) -> u64 {
    be64(b, field::VALUE)
}
pub fn emit_atomic_ack(orig: u64, b: &mut [u8]) {
    put64(b, field::VALUE, orig);
}

/// ImmDt and IETH are one 32-bit value each (immediate data, or the R_Key to invalidate).
pub fn parse_u32(b: &[u8; 4]) -> u32 {
    be32(b, field::VALUE)
}
pub fn emit_u32(v: u32, b: &mut [u8]) {
    put32(b, field::VALUE, v);
}

/// Datagram ETH: Q_Key and source QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    pub qkey: u32,
    pub src_qp: u32,
}

impl Deth {
    pub fn parse(b: &[u8; DETH_LEN]) -> Self {
        Deth { qkey: be32(b, 0), src_qp: be24(b, 5) }
    }
    pub fn emit(&self, b: &mut [u8]) {
        put32(b, 0, self.qkey);
        b[4] = 0;
        put24(b, 5, self.src_qp);
    }
}

/// RDETH (EE context) and XRCETH (XRC SRQ) are one reserved byte and a 24-bit number.
pub fn parse_u24(b: &[u8; 4]) -> u32 {
    be24(b, 1)
}
pub fn emit_u24(v: u32, b: &mut [u8]) {
    b[0] = 0;
    put24(b, 1, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reth() {
        let b = [0, 0, 0x7f, 0, 0, 0, 0x10, 0, 0xde, 0xad, 0xbe, 0xef, 0, 1, 0, 0];
        let r = Reth::parse(&b);
        assert_eq!(r, Reth { va: 0x7f00_0000_1000, rkey: 0xdeadbeef, dma_len: 65536 });
        let mut out = [0u8; 16];
        r.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn aeth_types() {
        let ack = Aeth::parse(&[0x1F, 0, 0, 5]);
        assert_eq!((ack.ack_type(), ack.value(), ack.msn), (AckType::Ack, 31, 5));
        let rnr = Aeth::parse(&[0x2E, 0, 1, 0]);
        assert_eq!((rnr.ack_type(), rnr.value(), rnr.msn), (AckType::RnrNak, 14, 256));
        let nak = Aeth::parse(&[0x60, 0xFF, 0xFF, 0xFF]);
        assert_eq!((nak.ack_type(), nak.value()), (AckType::Nak, nak_code::PSN_SEQUENCE_ERROR));
        assert_eq!(Aeth::nak(3, 7), Aeth::parse(&[0x63, 0, 0, 7]));
        assert_eq!(Aeth::rnr_nak(14, 256), rnr);
        assert_eq!(syndrome_type(0x40), AckType::Reserved);
    }

    #[test]
    fn atomic_eth() {
        let a = AtomicEth { va: 0x1000, rkey: 7, swap_add: 0x0102030405060708, compare: 9 };
        let mut b = [0u8; 28];
        a.emit(&mut b);
        assert_eq!(&b[12..20], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(AtomicEth::parse(&b), a);
    }

    #[test]
    fn deth_and_u24() {
        let b = [0x11, 0x11, 0x11, 0x11, 0xAA, 0x00, 0x00, 0x01];
        assert_eq!(Deth::parse(&b), Deth { qkey: 0x11111111, src_qp: 1 });
        assert_eq!(parse_u24(&[0xFF, 0x12, 0x34, 0x56]), 0x123456);
        let mut x = [0u8; 4];
        emit_u24(0xABCDEF, &mut x);
        assert_eq!(x, [0, 0xAB, 0xCD, 0xEF]);
        assert_eq!(parse_u32(&[0, 0, 1, 0]), 256);
        let mut y = [0u8; 8];
        emit_atomic_ack(42, &mut y);
        assert_eq!(parse_atomic_ack(&y), 42);
    }
}
