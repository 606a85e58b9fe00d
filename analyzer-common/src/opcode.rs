//! The IBTA BTH opcode table (vol. 1, table 38, plus FLUSH / ATOMIC WRITE of release 1.5 and
//! the RoCE v2 CNP): which transport an opcode belongs to, its name, and which extended
//! headers follow its BTH.
//!
//! Opcode = transport (top 3 bits) | operation (low 5 bits). RD packets carry an RDETH, and RD
//! requests a DETH; UD packets a DETH; XRC requests an XRCETH.

/// Bit flags of the extended headers that follow a BTH. Bit n is the n-th header in wire
/// order, so the offset of a header is the length of the headers selected by the lower bits
/// ([`headers_len`]`(mask & (flag - 1))`).
pub mod ext {
    pub const RDETH: u16 = 1 << 0;
    pub const DETH: u16 = 1 << 1;
    pub const XRCETH: u16 = 1 << 2;
    pub const FETH: u16 = 1 << 3;
    pub const RETH: u16 = 1 << 4;
    pub const ATOMIC_ETH: u16 = 1 << 5;
    pub const AETH: u16 = 1 << 6;
    pub const ATOMIC_ACK_ETH: u16 = 1 << 7;
    pub const IMMDT: u16 = 1 << 8;
    pub const IETH: u16 = 1 << 9;
    /// The 16 reserved bytes of a RoCE v2 CNP.
    pub const CNP_RESERVED: u16 = 1 << 10;
}

/// The RoCE v2 congestion notification packet.
pub const CNP: u8 = 0x81;

/// Transport service of an opcode (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Transport {
    Rc = 0,
    Uc = 1,
    Rd = 2,
    Ud = 3,
    Cnp = 4,
    Xrc = 5,
}

impl Transport {
    #[inline]
    pub const fn of(opcode: u8) -> Option<Transport> {
        match opcode >> 5 {
            0 => Some(Transport::Rc),
            1 => Some(Transport::Uc),
            2 => Some(Transport::Rd),
            3 => Some(Transport::Ud),
            4 => Some(Transport::Cnp),
            5 => Some(Transport::Xrc),
            _ => None,
        }
    }
    pub const fn prefix(self) -> &'static str {
        match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Rd => "RD",
            Transport::Ud => "UD",
            Transport::Cnp => "CNP",
            Transport::Xrc => "XRC",
        }
    }
}

/// Operation codes (low five bits).
pub mod op {
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    pub const RDMA_WRITE_FIRST: u8 = 0x06;
    pub const RDMA_WRITE_MIDDLE: u8 = 0x07;
    pub const RDMA_WRITE_LAST: u8 = 0x08;
    pub const RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    pub const RDMA_WRITE_ONLY: u8 = 0x0A;
    pub const RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0B;
    pub const RDMA_READ_REQUEST: u8 = 0x0C;
    pub const RDMA_READ_RESPONSE_FIRST: u8 = 0x0D;
    pub const RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0E;
    pub const RDMA_READ_RESPONSE_LAST: u8 = 0x0F;
    pub const RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    pub const ACKNOWLEDGE: u8 = 0x11;
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub const COMPARE_SWAP: u8 = 0x13;
    pub const FETCH_ADD: u8 = 0x14;
    pub const SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    pub const SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    pub const FLUSH: u8 = 0x1C;
    pub const ATOMIC_WRITE: u8 = 0x1D;
}

/// Name of an operation (low five bits), or `None` for a reserved code.
pub const fn op_name(operation: u8) -> Option<&'static str> {
    Some(match operation {
        op::SEND_FIRST => "SEND_FIRST",
        op::SEND_MIDDLE => "SEND_MIDDLE",
        op::SEND_LAST => "SEND_LAST",
        op::SEND_LAST_WITH_IMMEDIATE => "SEND_LAST_WITH_IMMEDIATE",
        op::SEND_ONLY => "SEND_ONLY",
        op::SEND_ONLY_WITH_IMMEDIATE => "SEND_ONLY_WITH_IMMEDIATE",
        op::RDMA_WRITE_FIRST => "RDMA_WRITE_FIRST",
        op::RDMA_WRITE_MIDDLE => "RDMA_WRITE_MIDDLE",
        op::RDMA_WRITE_LAST => "RDMA_WRITE_LAST",
        op::RDMA_WRITE_LAST_WITH_IMMEDIATE => "RDMA_WRITE_LAST_WITH_IMMEDIATE",
        op::RDMA_WRITE_ONLY => "RDMA_WRITE_ONLY",
        op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        op::RDMA_READ_REQUEST => "RDMA_READ_REQUEST",
        op::RDMA_READ_RESPONSE_FIRST => "RDMA_READ_RESPONSE_FIRST",
        op::RDMA_READ_RESPONSE_MIDDLE => "RDMA_READ_RESPONSE_MIDDLE",
        op::RDMA_READ_RESPONSE_LAST => "RDMA_READ_RESPONSE_LAST",
        op::RDMA_READ_RESPONSE_ONLY => "RDMA_READ_RESPONSE_ONLY",
        op::ACKNOWLEDGE => "ACKNOWLEDGE",
        op::ATOMIC_ACKNOWLEDGE => "ATOMIC_ACKNOWLEDGE",
        op::COMPARE_SWAP => "COMPARE_SWAP",
        op::FETCH_ADD => "FETCH_ADD",
        op::SEND_LAST_WITH_INVALIDATE => "SEND_LAST_WITH_INVALIDATE",
        op::SEND_ONLY_WITH_INVALIDATE => "SEND_ONLY_WITH_INVALIDATE",
        op::FLUSH => "FLUSH",
        op::ATOMIC_WRITE => "ATOMIC_WRITE",
        _ => return None,
    })
}

/// Whether the IBTA defines `opcode` (for its transport). Unknown opcodes are still RoCE: the
/// classifier decodes their BTH and counts them by number.
#[inline]
pub const fn is_defined(opcode: u8) -> bool {
    let o = opcode & 0x1F;
    match Transport::of(opcode) {
        Some(Transport::Rc) => o <= 0x14 || matches!(o, 0x16 | 0x17 | 0x1C | 0x1D),
        Some(Transport::Uc) => o <= op::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        Some(Transport::Rd) => o <= op::FETCH_ADD,
        Some(Transport::Ud) => matches!(o, op::SEND_ONLY | op::SEND_ONLY_WITH_IMMEDIATE),
        Some(Transport::Cnp) => opcode == CNP,
        Some(Transport::Xrc) => o <= 0x14 || matches!(o, 0x16 | 0x17),
        None => false,
    }
}

/// True for request packets (the sender's data-path stream): SEND, RDMA WRITE, READ REQUEST,
/// atomics, FLUSH and ATOMIC WRITE. Responses are READ RESPONSE, ACK and ATOMIC ACK.
#[inline]
pub const fn is_request(opcode: u8) -> bool {
    is_defined(opcode) && opcode != CNP && !is_response(opcode)
}

/// A request of a reliable transport (RC, RD, XRC): one its responder acknowledges.
#[inline]
pub const fn is_reliable_request(opcode: u8) -> bool {
    matches!(Transport::of(opcode), Some(Transport::Rc | Transport::Rd | Transport::Xrc)) && is_request(opcode)
}

/// READ RESPONSE, ACKNOWLEDGE and ATOMIC ACKNOWLEDGE.
#[inline]
pub const fn is_response(opcode: u8) -> bool {
    let o = opcode & 0x1F;
    is_defined(opcode) && opcode != CNP && o >= op::RDMA_READ_RESPONSE_FIRST && o <= op::ATOMIC_ACKNOWLEDGE
}

/// The extended headers that follow the BTH of `opcode`, as [`ext`] flags, in wire order.
/// Undefined opcodes have none (only their BTH is decoded).
#[inline(always)]
pub const fn headers(opcode: u8) -> u16 {
    if !is_defined(opcode) {
        return 0;
    }
    if opcode == CNP {
        return ext::CNP_RESERVED;
    }
    let o = opcode & 0x1F;
    let base = match o {
        op::SEND_LAST_WITH_IMMEDIATE | op::SEND_ONLY_WITH_IMMEDIATE => ext::IMMDT,
        op::RDMA_WRITE_LAST_WITH_IMMEDIATE => ext::IMMDT,
        op::RDMA_WRITE_FIRST | op::RDMA_WRITE_ONLY | op::RDMA_READ_REQUEST => ext::RETH,
        op::ATOMIC_WRITE => ext::RETH,
        op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => ext::RETH | ext::IMMDT,
        op::RDMA_READ_RESPONSE_FIRST | op::RDMA_READ_RESPONSE_LAST => ext::AETH,
        op::RDMA_READ_RESPONSE_ONLY | op::ACKNOWLEDGE => ext::AETH,
        op::ATOMIC_ACKNOWLEDGE => ext::AETH | ext::ATOMIC_ACK_ETH,
        op::COMPARE_SWAP | op::FETCH_ADD => ext::ATOMIC_ETH,
        op::SEND_LAST_WITH_INVALIDATE | op::SEND_ONLY_WITH_INVALIDATE => ext::IETH,
        op::FLUSH => ext::FETH | ext::RETH,
        _ => 0,
    };
    let request = !is_response(opcode);
    base | match Transport::of(opcode) {
        Some(Transport::Rd) if request => ext::RDETH | ext::DETH,
        Some(Transport::Rd) => ext::RDETH,
        Some(Transport::Ud) => ext::DETH,
        Some(Transport::Xrc) if request => ext::XRCETH,
        _ => 0,
    }
}

/// Length in bytes of each extended header, indexed by its bit in [`ext`].
pub const EXT_LEN: [usize; 11] = {
    use crate::wire::ext as e;
    [
        e::RDETH_LEN,
        e::DETH_LEN,
        e::XRCETH_LEN,
        e::FETH_LEN,
        e::RETH_LEN,
        e::ATOMIC_ETH_LEN,
        e::AETH_LEN,
        e::ATOMIC_ACK_ETH_LEN,
        e::IMMDT_LEN,
        e::IETH_LEN,
        e::CNP_RESERVED_LEN,
    ]
};

/// Length in bytes of the extended headers in `mask`. Branch-free (a sum of bit × length),
/// which keeps the verifier from exploring one path per combination of headers.
#[inline(always)]
pub const fn headers_len(mask: u16) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < EXT_LEN.len() {
        n += ((mask as usize >> i) & 1) * EXT_LEN[i];
        i += 1;
    }
    n
}

/// Where an opcode's extended headers lie: [`headers`] and, for each header bit, its offset
/// after the BTH ([`headers_len`] of the lower bits), with their total length. Computed for
/// every opcode at build time, so that the classifier reads them with one table load per
/// frame instead of walking the opcode's transport and eleven header lengths (≈ 6 ns a frame
/// in the XDP program).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// [`headers`] of the opcode.
    pub mask: u16,
    /// [`headers_len`] of `mask`.
    pub len: u8,
    /// 1 if the IBTA defines the opcode ([`is_defined`]).
    pub defined: u8,
    /// Offset of each header (by its bit in [`ext`]) after the BTH; that of the headers the
    /// opcode has not is meaningless.
    pub at: [u8; EXT_LEN.len()],
    pub _pad: u8,
}

// No implicit padding.
const _: () = assert!(core::mem::size_of::<Layout>() == 2 + 1 + 1 + EXT_LEN.len() + 1);

/// [`Layout`] of every opcode.
pub static LAYOUTS: [Layout; 256] = {
    let mut t = [Layout { mask: 0, len: 0, defined: 0, at: [0; EXT_LEN.len()], _pad: 0 }; 256];
    let mut opcode = 0;
    while opcode < 256 {
        let mask = headers(opcode as u8);
        let mut at = [0u8; EXT_LEN.len()];
        let mut bit = 0;
        while bit < EXT_LEN.len() {
            at[bit] = headers_len(mask & ((1 << bit) - 1)) as u8;
            bit += 1;
        }
        let defined = is_defined(opcode as u8) as u8;
        t[opcode] = Layout { mask, len: headers_len(mask) as u8, defined, at, _pad: 0 };
        opcode += 1;
    }
    t
};

/// The [`Layout`] of `opcode`.
#[inline(always)]
pub fn layout(opcode: u8) -> &'static Layout {
    &LAYOUTS[opcode as usize]
}

/// Data packets in the incast sense: SEND, RDMA WRITE, READ RESPONSE, atomics (not ACK/NAK,
/// CNP or READ REQUEST).
#[inline]
pub const fn is_data(opcode: u8) -> bool {
    let o = opcode & 0x1F;
    is_defined(opcode)
        && opcode != CNP
        && o != op::RDMA_READ_REQUEST
        && o != op::ACKNOWLEDGE
        && o != op::ATOMIC_ACKNOWLEDGE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_ibta() {
        assert_eq!(headers(0x0A), ext::RETH); // RC WRITE ONLY
        assert_eq!(headers(0x0B), ext::RETH | ext::IMMDT);
        assert_eq!(headers(0x11), ext::AETH); // RC ACK
        assert_eq!(headers(0x12), ext::AETH | ext::ATOMIC_ACK_ETH);
        assert_eq!(headers(0x13), ext::ATOMIC_ETH);
        assert_eq!(headers(0x17), ext::IETH);
        assert_eq!(headers(0x1C), ext::FETH | ext::RETH);
        assert_eq!(headers(0x64), ext::DETH); // UD SEND ONLY
        assert_eq!(headers(0x65), ext::DETH | ext::IMMDT);
        assert_eq!(headers(0x4A), ext::RDETH | ext::DETH | ext::RETH); // RD WRITE ONLY
        assert_eq!(headers(0x51), ext::RDETH | ext::AETH); // RD ACK
        assert_eq!(headers(0xAC), ext::XRCETH | ext::RETH); // XRC READ REQUEST
        assert_eq!(headers(0xB0), ext::AETH); // XRC READ RESPONSE ONLY
        assert_eq!(headers(CNP), ext::CNP_RESERVED);
        assert_eq!(headers(0x2C), 0, "UC has no READ");
        assert_eq!(headers(0x15), 0, "0x15 is reserved");
        assert_eq!(headers(0xC0), 0, "manufacturer specific");
    }

    #[test]
    fn defined_and_classes() {
        assert!(is_defined(0x00) && is_defined(0x2B) && !is_defined(0x2C));
        assert!(is_defined(0x64) && !is_defined(0x60) && is_defined(CNP) && !is_defined(0x80));
        assert!(is_request(0x0C) && !is_request(0x10) && is_response(0x11) && !is_request(CNP));
        assert!(is_data(0x10) && is_data(0x06) && !is_data(0x0C) && !is_data(0x11) && !is_data(CNP));
        assert_eq!(headers_len(ext::RETH | ext::IMMDT), 20);
        assert_eq!(headers_len(ext::RDETH | ext::DETH | ext::ATOMIC_ETH), 40);
        assert_eq!(op_name(0x0C), Some("RDMA_READ_REQUEST"));
        // The table: RC RDMA WRITE ONLY WITH IMMEDIATE is RETH then ImmDt; RD COMPARE SWAP is
        // RDETH, DETH, AtomicETH.
        let w = layout(0x0B);
        assert_eq!((w.mask, w.len, w.at[4], w.at[8]), (ext::RETH | ext::IMMDT, 20, 0, 16));
        let a = layout(0x53);
        assert_eq!(
            (a.mask, a.len, a.at[0], a.at[1], a.at[5]),
            (ext::RDETH | ext::DETH | ext::ATOMIC_ETH, 40, 0, 4, 12)
        );
        assert_eq!(*layout(0xC0), Layout { mask: 0, len: 0, defined: 0, at: [0; 11], _pad: 0 });
        assert!(layout(CNP).defined == 1 && layout(0x0A).defined == 1 && layout(0x2C).defined == 0);
        assert_eq!(Transport::of(0xA6).map(Transport::prefix), Some("XRC"));
    }
}
