//! Per-flow PSN and ACK/NAK accounting: one state machine that the XDP program runs on its map
//! value and the host runs per flow offline, so both count the same anomalies.
//!
//! The contract (issue "transport health"): the request stream of a flow is its SEND, RDMA
//! WRITE, READ REQUEST, atomic, FLUSH and ATOMIC WRITE packets. The first sets `expected =
//! PSN + 1`; PSN == expected advances it; a PSN ahead (24-bit serial arithmetic, within 2^23)
//! is out of sequence and skips `PSN - expected` PSNs; a PSN behind is a duplicate. A READ
//! REQUEST consumes `max(1, ceil(DMA length / PMTU))` PSNs. READ RESPONSE packets are checked
//! within one response only (FIRST … LAST). Every AETH is counted by its syndrome on the flow
//! that carries it.

use crate::PacketSummary;
use crate::opcode::{self, op};
use crate::wire::ext::{AckType, nak_code, syndrome_type};

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0x00FF_FFFF;
/// Half the PSN space: differences below it are "ahead", the rest "behind".
pub const PSN_HALF: u32 = 1 << 23;
/// The PMTU assumed for READ REQUESTs until a FIRST/MIDDLE payload reveals it (`--pmtu`).
pub const DEFAULT_PMTU: u32 = 4096;

/// Indices of [`PsnState::count`]: the request stream's and READ RESPONSEs' sequence counters.
pub mod count {
    /// Request-stream packets.
    pub const REQUESTS: usize = 0;
    pub const OUT_OF_SEQUENCE: usize = 1;
    pub const PSN_SKIPPED: usize = 2;
    pub const DUPLICATES: usize = 3;
    /// READ RESPONSE packets whose PSN was not the previous one + 1 within one response.
    pub const RESPONSE_OUT_OF_SEQUENCE: usize = 4;
    pub const COUNT: usize = 5;
    /// Report names, by index.
    pub const NAMES: [&str; COUNT] =
        ["requests", "out_of_sequence", "psn_skipped", "duplicates", "response_out_of_sequence"];
}

/// Indices of [`PsnState::aeth`]: AETHs by syndrome.
pub mod aeth {
    /// AETH type ACK (explicit ACKs, atomic ACKs and the AETH of READ RESPONSEs).
    pub const ACK: usize = 0;
    pub const PSN_SEQUENCE_ERROR: usize = 1;
    pub const RNR: usize = 2;
    pub const INVALID_REQUEST: usize = 3;
    pub const REMOTE_ACCESS: usize = 4;
    pub const REMOTE_OPERATIONAL: usize = 5;
    pub const INVALID_RD_REQUEST: usize = 6;
    /// The reserved syndrome type and NAK codes the IBTA does not define.
    pub const RESERVED: usize = 7;
    pub const COUNT: usize = 8;
    /// Report names, by index.
    pub const NAMES: [&str; COUNT] = [
        "acks",
        "psn_sequence_error",
        "rnr",
        "invalid_request",
        "remote_access",
        "remote_operational",
        "invalid_rd_request",
        "reserved",
    ];
}

/// The [`aeth`] index of a syndrome byte.
#[inline(always)]
pub const fn aeth_index(syndrome: u8) -> usize {
    match syndrome_type(syndrome) {
        AckType::Ack => aeth::ACK,
        AckType::RnrNak => aeth::RNR,
        AckType::Reserved => aeth::RESERVED,
        AckType::Nak => match syndrome & 0x1F {
            nak_code::PSN_SEQUENCE_ERROR => aeth::PSN_SEQUENCE_ERROR,
            nak_code::INVALID_REQUEST => aeth::INVALID_REQUEST,
            nak_code::REMOTE_ACCESS_ERROR => aeth::REMOTE_ACCESS,
            nak_code::REMOTE_OPERATIONAL_ERROR => aeth::REMOTE_OPERATIONAL,
            nak_code::INVALID_RD_REQUEST => aeth::INVALID_RD_REQUEST,
            _ => aeth::RESERVED,
        },
    }
}

/// `b - a` in 24-bit serial arithmetic: 0 when equal, below [`PSN_HALF`] when `b` is ahead.
#[inline(always)]
pub const fn psn_diff(a: u32, b: u32) -> u32 {
    b.wrapping_sub(a) & PSN_MASK
}

/// PSNs a READ REQUEST for `dma_len` bytes consumes at `pmtu` (0 means the default).
#[inline(always)]
pub fn read_psns(dma_len: u32, pmtu: u32) -> u32 {
    let pmtu = if pmtu == 0 { DEFAULT_PMTU } else { pmtu } as u64;
    let n = (dma_len as u64).div_ceil(pmtu);
    if n == 0 { 1 } else { (n as u32) & PSN_MASK }
}

/// Whether a frame is cut by its path's PMTU: a READ REQUEST.
#[inline(always)]
pub const fn reads_path_pmtu(opcode: u8) -> bool {
    opcode::is_request(opcode) && opcode & 0x1F == op::RDMA_READ_REQUEST
}

/// True for FIRST and MIDDLE packets, whose payload is exactly one PMTU.
#[inline(always)]
pub const fn reveals_pmtu(opcode: u8) -> bool {
    if !opcode::is_defined(opcode) || opcode == opcode::CNP {
        return false;
    }
    matches!(
        opcode & 0x1F,
        op::SEND_FIRST
            | op::SEND_MIDDLE
            | op::RDMA_WRITE_FIRST
            | op::RDMA_WRITE_MIDDLE
            | op::RDMA_READ_RESPONSE_FIRST
            | op::RDMA_READ_RESPONSE_MIDDLE
    )
}

/// PSN state and counters of one flow. In the kernel this is the value of a shared (not
/// per-CPU) hash map: the sequence is a property of the flow, not of the CPU that saw a packet.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsnState {
    /// Sequence counters by [`count`] index.
    pub count: [u64; count::COUNT],
    /// AETHs by [`aeth`] index.
    pub aeth: [u64; aeth::COUNT],
    /// Next PSN expected in the request stream (valid when `started`).
    pub expected: u32,
    /// PSN of the previous READ RESPONSE packet (valid when `in_response`).
    pub response_psn: u32,
    /// The largest FIRST/MIDDLE payload this flow has published to its path's PMTU entry.
    pub pmtu: u32,
    pub started: u8,
    pub in_response: u8,
    pub _pad: [u8; 2],
}

const _: () = assert!(core::mem::size_of::<PsnState>() == 120);

impl PsnState {
    pub const fn zeroed() -> Self {
        // SAFETY: integers only.
        unsafe { core::mem::zeroed() }
    }

    /// True when this frame raises the PMTU this flow has published for its path (a FIRST or
    /// MIDDLE payload larger than any before on this flow); records it. Only then does the
    /// path's PMTU entry need an update, which spares the XDP program a lookup per packet.
    #[inline(always)]
    pub fn publishes_pmtu(&mut self, s: &PacketSummary) -> bool {
        if reveals_pmtu(s.opcode) && s.payload_len > self.pmtu {
            self.pmtu = s.payload_len;
            return true;
        }
        false
    }

    /// Accounts one RoCE packet of this flow; `pmtu` is the path's PMTU as known now, read for
    /// a READ REQUEST only (callers pass 0 for other frames; 0 also means [`DEFAULT_PMTU`]).
    #[inline(always)]
    pub fn observe(&mut self, s: &PacketSummary, pmtu: u32) {
        if s.ext & opcode::ext::AETH != 0 {
            let i = aeth_index(s.aeth_syndrome);
            self.aeth[i] += 1;
        }
        let o = s.opcode & 0x1F;
        if opcode::is_request(s.opcode) {
            let n = if o == op::RDMA_READ_REQUEST { read_psns(s.reth_dma_len, pmtu) } else { 1 };
            self.request(s.psn & PSN_MASK, n);
        } else if opcode::is_response(s.opcode) {
            match o {
                op::RDMA_READ_RESPONSE_FIRST => {
                    self.in_response = 1;
                    self.response_psn = s.psn & PSN_MASK;
                }
                op::RDMA_READ_RESPONSE_MIDDLE | op::RDMA_READ_RESPONSE_LAST => {
                    if self.in_response != 0 && psn_diff(self.response_psn, s.psn) != 1 {
                        self.count[count::RESPONSE_OUT_OF_SEQUENCE] += 1;
                    }
                    self.in_response = if o == op::RDMA_READ_RESPONSE_LAST { 0 } else { 1 };
                    self.response_psn = s.psn & PSN_MASK;
                }
                _ => {}
            }
        }
    }

    #[inline(always)]
    fn request(&mut self, psn: u32, n: u32) {
        self.count[count::REQUESTS] += 1;
        if self.started == 0 {
            self.started = 1;
            self.expected = psn.wrapping_add(n) & PSN_MASK;
            return;
        }
        let d = psn_diff(self.expected, psn);
        if d == 0 {
            self.expected = psn.wrapping_add(n) & PSN_MASK;
        } else if d < PSN_HALF {
            self.count[count::OUT_OF_SEQUENCE] += 1;
            self.count[count::PSN_SKIPPED] += d as u64;
            self.expected = psn.wrapping_add(n) & PSN_MASK;
        } else {
            self.count[count::DUPLICATES] += 1;
        }
    }

    /// NAKs of any kind (everything but ACKs).
    pub fn naks(&self) -> u64 {
        let mut n = 0;
        let mut i = 1;
        while i < aeth::COUNT {
            n += self.aeth[i];
            i += 1;
        }
        n
    }
}

/// Where paths' PMTUs are kept: the XDP program's PMTU map, or a host map offline.
pub trait PmtuTable {
    /// The path's PMTU as learned so far.
    fn get(&self, path: &PathKey) -> Option<u32>;
    /// Raises the path's PMTU to `payload` (a larger FIRST/MIDDLE payload than before).
    fn raise(&mut self, path: &PathKey, payload: u32);
    /// The PMTU assumed on a path that has not shown its own (`--pmtu`).
    fn default_pmtu(&self) -> u32;
}

/// Accounts one RoCE frame of a flow: PMTU learning and the PSN/AETH state machine. The one
/// function the XDP program and the host both call, so they count alike. The path's PMTU is
/// read for a READ REQUEST only (other frames pass 0), and the path's entry is touched only
/// when this flow shows a larger FIRST/MIDDLE payload than it did before.
#[inline(always)]
pub fn account<T: PmtuTable>(st: &mut PsnState, s: &PacketSummary, paths: &mut T) {
    let pmtu = if reads_path_pmtu(s.opcode) {
        match paths.get(&PathKey::of(s)) {
            Some(p) => p,
            None => paths.default_pmtu(),
        }
    } else {
        0
    };
    if st.publishes_pmtu(s) {
        paths.raise(&PathKey::of(s), s.payload_len);
    }
    st.observe(s, pmtu);
}

/// Key of the PMTU map: the two addresses of a path in ascending order. PMTU is a property of
/// the path, the same both ways, so READ RESPONSEs (which travel the other way on another flow)
/// reveal the PMTU the requester's READ REQUESTs are cut to.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PathKey {
    pub lo: [u8; 16],
    pub hi: [u8; 16],
}

impl PathKey {
    #[inline(always)]
    pub fn of(s: &PacketSummary) -> Self {
        if s.src_ip <= s.dst_ip {
            PathKey { lo: s.src_ip, hi: s.dst_ip }
        } else {
            PathKey { lo: s.dst_ip, hi: s.src_ip }
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: repr(C), integers only, no implicit padding (size asserted above).
    unsafe impl aya::Pod for super::PsnState {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for super::PathKey {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcode::ext;

    fn pkt(opcode: u8, psn: u32) -> PacketSummary {
        let mut s = PacketSummary::zeroed();
        s.opcode = opcode;
        s.psn = psn;
        s.ext = crate::opcode::headers(opcode);
        s
    }

    fn run(st: &mut PsnState, ops: &[(u8, u32)]) {
        for &(o, p) in ops {
            st.observe(&pkt(o, p), 0);
        }
    }

    #[test]
    fn in_order_loss_and_duplicates() {
        let mut st = PsnState::zeroed();
        run(&mut st, &[(0x06, 10), (0x07, 11), (0x07, 14), (0x08, 15), (0x07, 12), (0x07, 13)]);
        assert_eq!(st.count[..4], [6, 1, 2, 2]);
        assert_eq!(st.expected, 16);
    }

    #[test]
    fn wraps_at_two_to_the_24() {
        let mut st = PsnState::zeroed();
        run(&mut st, &[(0x0A, 0xFF_FFFE), (0x0A, 0xFF_FFFF), (0x0A, 0), (0x0A, 1), (0x0A, 0xFF_FFFF)]);
        assert_eq!((st.count[count::OUT_OF_SEQUENCE], st.count[count::DUPLICATES], st.expected), (0, 1, 2));
    }

    #[test]
    fn read_request_consumes_ceil_dma_over_pmtu() {
        let mut st = PsnState::zeroed();
        let mut r = pkt(0x0C, 100);
        r.reth_dma_len = 3 * 1024 + 1;
        st.observe(&r, 1024);
        st.observe(&pkt(0x0A, 104), 1024);
        assert_eq!((st.count[count::OUT_OF_SEQUENCE], st.count[count::DUPLICATES], st.expected), (0, 0, 105));
        assert_eq!((read_psns(0, 0), read_psns(4096, 0), read_psns(4097, 0), read_psns(8192, 4096)), (1, 1, 2, 2));
    }

    #[test]
    fn responses_are_checked_within_one_response_only() {
        let mut st = PsnState::zeroed();
        run(&mut st, &[(0x0D, 50), (0x0E, 51), (0x0F, 52), (0x0D, 90), (0x0E, 92), (0x0F, 93), (0x10, 7)]);
        assert_eq!((st.count[count::REQUESTS], st.count[count::RESPONSE_OUT_OF_SEQUENCE]), (0, 1));
        assert_eq!(st.aeth[aeth::ACK], 5, "FIRST and LAST of both responses and the ONLY carry an AETH");
    }

    #[test]
    fn aeth_syndromes() {
        let mut st = PsnState::zeroed();
        for syn in [0x1F, 0x60, 0x21, 0x61, 0x62, 0x63, 0x64, 0x65, 0x40] {
            let mut s = pkt(0x11, 1);
            s.aeth_syndrome = syn;
            st.observe(&s, 0);
        }
        assert_eq!(st.aeth, [1, 1, 1, 1, 1, 1, 1, 2]);
        assert_eq!(st.naks(), 8);
        assert_eq!(st.count[count::REQUESTS], 0, "ACKs are not requests");
        let mut cnp = pkt(crate::opcode::CNP, 5);
        cnp.ext = ext::CNP_RESERVED;
        st.observe(&cnp, 0);
        assert_eq!((st.count[count::REQUESTS], st.started), (0, 0));
    }
}
