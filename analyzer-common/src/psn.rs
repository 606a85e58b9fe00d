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
//!
//! The PMTU a READ is cut to belongs to its queue pair (issue "real vantage points", 3): two QPs
//! between the same hosts can have different MTUs, and a READ can come before any packet that
//! shows the MTU. So each flow learns its own: from its FIRST/MIDDLE payloads (exactly one
//! PMTU each), from the READ RESPONSE its peer sends for a READ (a note keyed by requester,
//! responder and the READ's PSN, [`PeerKey`]), or from the PSN of the request that follows a
//! READ, which must be where the READ ends at one of the legal MTUs (256 … 4096). Until then a
//! READ whose span depends on the MTU leaves the flow's expected PSN pending, and the next
//! request decides it.
//!
//! Besides the observer's view, the state models the responder as an RC responder (and the
//! rxe driver's counters) see the requests: an out-of-sequence request is not accepted (and
//! counted once per NAK episode), a request behind the expected PSN is a duplicate, and a
//! request answered by an RNR NAK was not accepted (learned from a note its NAK leaves).

use crate::PacketSummary;
use crate::opcode::{self, op};
use crate::wire::ext::{AckType, nak_code, syndrome_type};

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0x00FF_FFFF;
/// Half the PSN space: differences below it are "ahead", the rest "behind".
pub const PSN_HALF: u32 = 1 << 23;
/// The legal MTUs: `MIN_MTU << i` for i below [`MTU_COUNT`] (256, 512, 1024, 2048, 4096).
pub const MIN_MTU: u32 = 256;
pub const MTU_COUNT: u32 = 5;
/// A note's value saying that the request at its PSN was refused with an RNR NAK (never an
/// MTU: those are at least [`MIN_MTU`]).
pub const NOTE_RNR: u32 = 1;

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

/// Indices of [`PsnState::responder`]: what the responder's NIC counts for these requests.
pub mod responder {
    /// Out-of-sequence requests, once per NAK episode (rxe's `out_of_seq_request`).
    pub const OUT_OF_SEQ_REQUEST: usize = 0;
    /// Requests behind the responder's expected PSN (rxe's `duplicate_request`).
    pub const DUPLICATE_REQUEST: usize = 1;
    pub const COUNT: usize = 2;
    /// Report names, by index.
    pub const NAMES: [&str; COUNT] = ["out_of_seq_request", "duplicate_request"];
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

/// The later of two PSNs in 24-bit serial order (`a` when equal): folded over PSNs, the latest
/// a flow reached.
#[inline(always)]
pub const fn psn_later(a: u32, b: u32) -> u32 {
    let d = psn_diff(a, b);
    if d > 0 && d < PSN_HALF { b } else { a }
}

/// PSNs a READ REQUEST for `dma_len` bytes consumes at `pmtu` (at least 1; `pmtu` is never 0).
#[inline(always)]
pub fn read_psns(dma_len: u32, pmtu: u32) -> u32 {
    let pmtu = if pmtu == 0 { MIN_MTU } else { pmtu } as u64;
    let n = (dma_len as u64).div_ceil(pmtu);
    if n == 0 { 1 } else { (n as u32) & PSN_MASK }
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

/// Where the state machines count: the host keeps every counter of [`PsnState`] in the flow;
/// the kernel keeps those a frame can move every time in the flow's entry
/// ([`crate::maps::ENTRY_PSN_COUNTERS`]) and the rest, which an anomaly moves once, in its
/// extra map ([`crate::maps::extra_kind::PSN`]), so that the entry stays small.
pub trait Tally {
    /// Adds `n` to the counter at flat index `counter` ([`tally`]).
    fn add(&mut self, counter: u8, n: u32);
}

/// Flat indices of every PSN/AETH counter, for [`Tally`]: [`count`] first, then [`aeth`], then
/// [`responder`].
pub mod tally {
    use super::{aeth, count};
    pub const fn count(i: usize) -> u8 {
        i as u8
    }
    pub const fn aeth(i: usize) -> u8 {
        (count::COUNT + i) as u8
    }
    pub const fn responder(i: usize) -> u8 {
        (count::COUNT + aeth::COUNT + i) as u8
    }
}

/// What the state machines remember of a flow between its packets.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsnSeq {
    /// Next PSN expected in the request stream (valid when `started`).
    pub expected: u32,
    /// PSN of the previous READ RESPONSE packet (valid when `in_response`).
    pub response_psn: u32,
    /// This flow's PMTU once known (0 until then).
    pub pmtu: u32,
    /// The responder's expected PSN (valid when `started`).
    pub responder_expected: u32,
    /// The READ REQUEST whose span is pending: its PSN and DMA length.
    pub read_psn: u32,
    pub read_len: u32,
    pub started: u8,
    pub in_response: u8,
    /// Legal MTUs ruled out for this flow, bit i for `MIN_MTU << i` (0: none yet).
    pub mtus_excluded: u8,
    /// Whose expected PSN waits for the pending READ's span: [`pending::OBSERVER`],
    /// [`pending::RESPONDER`] (0: no READ pending).
    pub read_pending: u8,
    /// 1 while the responder is in a NAK episode (it counts one out-of-sequence request).
    pub responder_nak: u8,
    pub _pad: [u8; 3],
}

const _: () = assert!(core::mem::size_of::<PsnSeq>() == 32);

/// PSN state and counters of one flow, as the host keeps it. The kernel keeps the same
/// [`PsnSeq`] in the flow's entry ([`crate::maps::FlowEntry`]) with its counters split
/// ([`Tally`]): the sequence is a property of the flow, not of the CPU that saw a packet.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsnState {
    /// Sequence counters by [`count`] index.
    pub count: [u64; count::COUNT],
    /// AETHs by [`aeth`] index.
    pub aeth: [u64; aeth::COUNT],
    /// The responder model's counters by [`responder`] index.
    pub responder: [u64; responder::COUNT],
    pub seq: PsnSeq,
}

const _: () = assert!(core::mem::size_of::<PsnState>() == 152);

/// The counters of a [`PsnState`], borrowed apart from its sequence state.
struct Counts<'a> {
    count: &'a mut [u64; count::COUNT],
    aeth: &'a mut [u64; aeth::COUNT],
    responder: &'a mut [u64; responder::COUNT],
}

impl Counts<'_> {
    /// The counter at flat index `counter` ([`tally`]); None past the last.
    #[inline(always)]
    fn at(&mut self, counter: u8) -> Option<&mut u64> {
        let i = counter as usize;
        if i < count::COUNT {
            Some(&mut self.count[i])
        } else if i < count::COUNT + aeth::COUNT {
            Some(&mut self.aeth[i - count::COUNT])
        } else {
            self.responder.get_mut(i - count::COUNT - aeth::COUNT)
        }
    }
}

impl Tally for Counts<'_> {
    #[inline(always)]
    fn add(&mut self, counter: u8, n: u32) {
        if let Some(c) = self.at(counter) {
            *c += n as u64;
        }
    }
}

impl PsnState {
    pub const fn zeroed() -> Self {
        // SAFETY: integers only.
        unsafe { core::mem::zeroed() }
    }

    fn counts(&mut self) -> (Counts<'_>, &mut PsnSeq) {
        let PsnState { count, aeth, responder, seq } = self;
        (Counts { count, aeth, responder }, seq)
    }

    /// Adds `n` to the counter at flat index `counter` ([`tally`]; an index past the last is
    /// ignored): what the host does with the counts the kernel keeps apart.
    pub fn add(&mut self, counter: u8, n: u64) {
        if let Some(c) = self.counts().0.at(counter) {
            *c += n;
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

/// Bits of [`PsnSeq::read_pending`].
pub mod pending {
    pub const OBSERVER: u8 = 1;
    pub const RESPONDER: u8 = 2;
}

const ALL_MTUS: u8 = (1 << MTU_COUNT) - 1;

/// The largest MTU of a candidate set (`MIN_MTU` for none).
#[inline(always)]
const fn largest_mtu(left: u8) -> u32 {
    MIN_MTU << (7 - (left | 1).leading_zeros())
}

impl PsnSeq {
    /// Takes a PMTU a packet showed (own FIRST/MIDDLE payload, or the peer's READ RESPONSE).
    #[inline(always)]
    fn learn_pmtu(&mut self, pmtu: u32) {
        if pmtu > self.pmtu {
            self.pmtu = pmtu;
        }
    }

    /// The legal MTUs not ruled out yet, a bit each.
    #[inline(always)]
    fn mtus_left(&self) -> u8 {
        ALL_MTUS & !self.mtus_excluded
    }

    /// Rules out the MTUs of `bits`; when one is left, it is the PMTU.
    #[inline(always)]
    fn exclude(&mut self, bits: u8) {
        self.mtus_excluded |= bits;
        let left = self.mtus_left();
        if left != 0 && left & (left - 1) == 0 {
            self.learn_pmtu(MIN_MTU << left.trailing_zeros());
        }
    }

    /// PSNs this READ spans, and whether that depends on an MTU not known yet (then the span
    /// returned is the shortest possible one).
    #[inline(always)]
    fn read_span(&self, dma_len: u32, default_pmtu: u32) -> (u32, bool) {
        let pmtu = if self.pmtu != 0 { self.pmtu } else { default_pmtu };
        if pmtu != 0 {
            return (read_psns(dma_len, pmtu), false);
        }
        let left = self.mtus_left();
        let smallest = MIN_MTU << (left | 0x80).trailing_zeros().min(MTU_COUNT - 1);
        let (short, long) = (read_psns(dma_len, largest_mtu(left)), read_psns(dma_len, smallest));
        (short, short != long)
    }

    /// Decides the pending READ's span now that a request at `psn` followed it (`note`: the
    /// MTU its READ RESPONSE showed, if one did), and moves the expected PSNs that waited.
    #[inline(always)]
    fn resolve_read(&mut self, psn: u32, note: Option<u32>) {
        let (p, len) = (self.read_psn, self.read_len);
        let left = self.mtus_left();
        let mut span = read_psns(len, largest_mtu(left));
        if let Some(m) = note {
            self.learn_pmtu(m);
            span = read_psns(len, m);
        } else {
            // The MTUs at which the READ ends exactly here; else the one ending closest
            // before (fewest PSNs skipped).
            let mut exact = 0u8;
            let mut closest = PSN_HALF;
            let mut i = 0;
            while i < MTU_COUNT {
                if left & (1 << i) != 0 {
                    let n = read_psns(len, MIN_MTU << i);
                    let d = psn_diff(p.wrapping_add(n), psn);
                    if d == 0 {
                        exact |= 1 << i;
                    }
                    if d < closest {
                        closest = d;
                        span = n;
                    }
                }
                i += 1;
            }
            if exact != 0 {
                self.exclude(left & !exact);
            }
        }
        let end = p.wrapping_add(span) & PSN_MASK;
        if self.read_pending & pending::OBSERVER != 0 {
            self.expected = end;
        }
        if self.read_pending & pending::RESPONDER != 0 {
            self.responder_expected = end;
        }
        self.read_pending = 0;
    }

    /// The observer's view of a request: returns whether it moved the expected PSN.
    #[inline(always)]
    fn observe_request<C: Tally>(&mut self, tally: &mut C, psn: u32, n: u32) -> bool {
        let d = psn_diff(self.expected, psn);
        if d == 0 {
            self.expected = psn.wrapping_add(n) & PSN_MASK;
            true
        } else if d < PSN_HALF {
            tally.add(tally::count(count::OUT_OF_SEQUENCE), 1);
            tally.add(tally::count(count::PSN_SKIPPED), d);
            self.expected = psn.wrapping_add(n) & PSN_MASK;
            true
        } else {
            tally.add(tally::count(count::DUPLICATES), 1);
            false
        }
    }

    /// The responder's view of a request behind its expected PSN unless `refused` (answered
    /// by an RNR NAK: then it was never accepted). Returns whether the responder accepts it.
    #[inline(always)]
    fn respond<C: Tally>(&mut self, tally: &mut C, psn: u32, n: u32, refused: bool) -> bool {
        let d = psn_diff(self.responder_expected, psn);
        let end = psn.wrapping_add(n) & PSN_MASK;
        if d == 0 {
            self.responder_expected = end;
            self.responder_nak = 0;
            true
        } else if d < PSN_HALF {
            if self.responder_nak == 0 {
                self.responder_nak = 1;
                tally.add(tally::responder(responder::OUT_OF_SEQ_REQUEST), 1);
            }
            false
        } else if refused {
            // Requests taken after it were out of sequence at the responder (one episode).
            if self.responder_expected != end && self.responder_nak == 0 {
                tally.add(tally::responder(responder::OUT_OF_SEQ_REQUEST), 1);
            }
            self.responder_expected = end;
            self.responder_nak = 0;
            true
        } else {
            tally.add(tally::responder(responder::DUPLICATE_REQUEST), 1);
            false
        }
    }
}

/// Notes one flow leaves for its peer's (the reverse direction's): the MTU a READ RESPONSE
/// showed, an RNR NAK. The XDP program keeps them in an LRU map, the host in a bounded map.
pub trait PeerNotes {
    fn get(&self, key: &PeerKey) -> Option<u32>;
    fn put(&mut self, key: &PeerKey, note: u32);
    /// Whether the note at `key` is an RNR NAK's ([`NOTE_RNR`]), forgetting it if so. A note
    /// of another kind stays: at a request's key it is the MTU its READ RESPONSE showed, which
    /// a repeated READ REQUEST must not take from the READ it may still settle.
    fn take_rnr(&mut self, key: &PeerKey) -> bool;
    /// The PMTU of flows that have not shown theirs (`--pmtu`); 0 learns it per flow.
    fn default_pmtu(&self) -> u32;
}

/// [`account_with`] on a host flow's state, which holds every counter itself.
#[inline(always)]
pub fn account<T: PeerNotes>(st: &mut PsnState, s: &PacketSummary, notes: &mut T) {
    let (mut counts, seq) = st.counts();
    account_with(seq, &mut counts, s, notes);
}

/// Accounts one RoCE frame of a flow: PMTU learning, notes for the peer, the observer's and
/// the responder's PSN state machines, AETHs (counted into `tally`). The one function the XDP
/// program and the host both call, so they count alike. Notes are written for READ RESPONSE
/// FIRST packets and RNR NAKs only, and read only to settle a pending READ or a request
/// behind the responder.
#[inline(always)]
pub fn account_with<T: PeerNotes, C: Tally>(st: &mut PsnSeq, tally: &mut C, s: &PacketSummary, notes: &mut T) {
    let o = s.opcode & 0x1F;
    if reveals_pmtu(s.opcode) {
        st.learn_pmtu(s.payload_len);
    }
    if s.ext & opcode::ext::AETH != 0 {
        tally.add(tally::aeth(aeth_index(s.aeth_syndrome)), 1);
        if syndrome_type(s.aeth_syndrome) as u8 == AckType::RnrNak as u8 {
            notes.put(&PeerKey::toward_requester(s), NOTE_RNR);
        }
    }
    if opcode::is_request(s.opcode) {
        let psn = s.psn & PSN_MASK;
        if st.read_pending != 0 && psn_diff(st.read_psn, psn).wrapping_sub(1) < PSN_HALF - 1 {
            let note = match notes.get(&PeerKey::of_request(s, st.read_psn)) {
                Some(m) if m >= MIN_MTU => Some(m),
                _ => None,
            };
            st.resolve_read(psn, note);
        }
        let (n, unsure) =
            if o == op::RDMA_READ_REQUEST { st.read_span(s.reth_dma_len, notes.default_pmtu()) } else { (1, false) };
        tally.add(tally::count(count::REQUESTS), 1);
        let (seen, taken) = if st.started == 0 {
            st.started = 1;
            st.expected = psn.wrapping_add(n) & PSN_MASK;
            st.responder_expected = st.expected;
            (true, true)
        } else {
            let seen = st.observe_request(tally, psn, n);
            let behind = psn_diff(st.responder_expected, psn) >= PSN_HALF;
            let refused = behind && notes.take_rnr(&PeerKey::of_request(s, psn));
            (seen, st.respond(tally, psn, n, refused))
        };
        if unsure && (seen || taken) {
            st.read_psn = psn;
            st.read_len = s.reth_dma_len;
            st.read_pending = ((seen as u8) * pending::OBSERVER) | ((taken as u8) * pending::RESPONDER);
        }
    } else if opcode::is_response(s.opcode) {
        match o {
            op::RDMA_READ_RESPONSE_FIRST => {
                st.in_response = 1;
                st.response_psn = s.psn & PSN_MASK;
                notes.put(&PeerKey::toward_requester(s), s.payload_len);
            }
            op::RDMA_READ_RESPONSE_MIDDLE | op::RDMA_READ_RESPONSE_LAST => {
                if st.in_response != 0 && psn_diff(st.response_psn, s.psn) != 1 {
                    tally.add(tally::count(count::RESPONSE_OUT_OF_SEQUENCE), 1);
                }
                st.in_response = if o == op::RDMA_READ_RESPONSE_LAST { 0 } else { 1 };
                st.response_psn = s.psn & PSN_MASK;
            }
            _ => {}
        }
    }
}

/// Key of a note between the two directions of a connection: the request's PSN with its
/// requester and responder. A response or NAK carries the PSN of the request it answers, and
/// travels from the responder to the requester.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PeerKey {
    pub requester: [u8; 16],
    pub responder: [u8; 16],
    pub psn: u32,
}

const _: () = assert!(core::mem::size_of::<PeerKey>() == 36);

impl PeerKey {
    /// The key of a request (from the requester) at `psn`.
    #[inline(always)]
    pub fn of_request(s: &PacketSummary, psn: u32) -> Self {
        PeerKey { requester: s.src_ip, responder: s.dst_ip, psn }
    }

    /// The key of the request a response or NAK (from the responder) answers.
    #[inline(always)]
    pub fn toward_requester(s: &PacketSummary) -> Self {
        PeerKey { requester: s.dst_ip, responder: s.src_ip, psn: s.psn & PSN_MASK }
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: repr(C), integers only, no implicit padding (size asserted above).
    unsafe impl aya::Pod for super::PsnState {}
    // SAFETY: repr(C), integers only, no implicit padding (sizes asserted with the type).
    unsafe impl aya::Pod for super::PeerKey {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcode::ext;

    /// Notes in a small array (the host's and the kernel's maps are tested elsewhere).
    #[derive(Default)]
    struct Notes {
        list: [(PeerKey, u32); 8],
        len: usize,
        default: u32,
    }

    impl PeerNotes for Notes {
        fn get(&self, key: &PeerKey) -> Option<u32> {
            self.list[..self.len].iter().find(|(k, _)| k == key).map(|(_, v)| *v)
        }
        fn put(&mut self, key: &PeerKey, note: u32) {
            self.list[self.len] = (*key, note);
            self.len += 1;
        }
        fn take_rnr(&mut self, key: &PeerKey) -> bool {
            let Some(i) = self.list[..self.len].iter().position(|(k, v)| k == key && *v == NOTE_RNR) else {
                return false;
            };
            self.list[i] = self.list[self.len - 1];
            self.len -= 1;
            true
        }
        fn default_pmtu(&self) -> u32 {
            self.default
        }
    }

    const A: [u8; 16] = [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    const B: [u8; 16] = [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

    /// A packet from A to B (requests) or, for responses and ACKs, from B to A.
    fn pkt(opcode: u8, psn: u32) -> PacketSummary {
        let mut s = PacketSummary::zeroed();
        s.opcode = opcode;
        s.psn = psn;
        s.ext = crate::opcode::headers(opcode);
        let back = crate::opcode::is_response(opcode);
        (s.src_ip, s.dst_ip) = if back { (B, A) } else { (A, B) };
        s
    }

    fn read(psn: u32, len: u32) -> PacketSummary {
        let mut r = pkt(0x0C, psn);
        r.reth_dma_len = len;
        r
    }

    fn run(st: &mut PsnState, notes: &mut Notes, ops: &[(u8, u32)]) {
        for &(o, p) in ops {
            account(st, &pkt(o, p), notes);
        }
    }

    fn seq(st: &PsnState) -> (u64, u64, u64, u32) {
        (st.count[count::OUT_OF_SEQUENCE], st.count[count::PSN_SKIPPED], st.count[count::DUPLICATES], st.seq.expected)
    }

    #[test]
    fn in_order_loss_and_duplicates() {
        let mut st = PsnState::zeroed();
        run(&mut st, &mut Notes::default(), &[(0x06, 10), (0x07, 11), (0x07, 14), (0x08, 15), (0x07, 12), (0x07, 13)]);
        assert_eq!(st.count[..4], [6, 1, 2, 2]);
        assert_eq!(st.seq.expected, 16);
    }

    #[test]
    fn the_later_psn_in_serial_order() {
        assert_eq!([psn_later(5, 9), psn_later(9, 5), psn_later(7, 7)], [9, 9, 7]);
        assert_eq!(psn_later(0xFF_FFFE, 1), 1, "across the wrap");
        assert_eq!([0xFF_FFF0, 3, 0xFF_FFFF, 2].into_iter().fold(0xFF_FFF0, psn_later), 3);
    }

    #[test]
    fn wraps_at_two_to_the_24() {
        let mut st = PsnState::zeroed();
        let ops = [(0x0A, 0xFF_FFFE), (0x0A, 0xFF_FFFF), (0x0A, 0), (0x0A, 1), (0x0A, 0xFF_FFFF)];
        run(&mut st, &mut Notes::default(), &ops);
        assert_eq!(seq(&st), (0, 0, 1, 2));
    }

    #[test]
    fn read_request_consumes_ceil_dma_over_pmtu() {
        let mut st = PsnState::zeroed();
        let mut notes = Notes { default: 1024, ..Default::default() };
        account(&mut st, &read(100, 3 * 1024 + 1), &mut notes);
        account(&mut st, &pkt(0x0A, 104), &mut notes);
        assert_eq!(seq(&st), (0, 0, 0, 105));
        assert_eq!(
            (read_psns(0, 256), read_psns(4096, 4096), read_psns(4097, 4096), read_psns(8192, 4096)),
            (1, 1, 2, 2)
        );
    }

    /// A READ first on a flow: the next request's PSN is where the READ ends at the flow's
    /// MTU. 4096 bytes end at +16, +8, +4, +2 or +1 for 256 … 4096; +4 says 1024.
    #[test]
    fn the_request_after_a_read_teaches_the_mtu() {
        let mut st = PsnState::zeroed();
        let mut notes = Notes::default();
        account(&mut st, &read(100, 4096), &mut notes);
        assert_eq!((st.seq.read_pending, st.seq.pmtu), (pending::OBSERVER | pending::RESPONDER, 0));
        account(&mut st, &read(104, 3000), &mut notes);
        assert_eq!((st.seq.pmtu, seq(&st)), (1024, (0, 0, 0, 107)), "known: 3000 bytes are 3 PSNs at once");
        assert_eq!(st.seq.read_pending, 0);
        account(&mut st, &pkt(0x0A, 107), &mut notes);
        assert_eq!(seq(&st), (0, 0, 0, 108));
        assert_eq!(st.responder, [0, 0]);
    }

    /// 1000 bytes end at +4, +2 or +1: +1 leaves 1024, 2048 and 4096 possible, and a later
    /// READ of 3000 bytes then spans 3, 2 or 1: the next PSN decides again.
    #[test]
    fn ambiguous_ends_narrow_the_candidates() {
        let mut st = PsnState::zeroed();
        let mut notes = Notes::default();
        account(&mut st, &read(0, 1000), &mut notes);
        account(&mut st, &read(1, 3000), &mut notes);
        assert_eq!((st.seq.pmtu, st.seq.mtus_excluded, st.seq.read_pending != 0), (0, 0b11, true));
        account(&mut st, &pkt(0x0A, 3), &mut notes);
        assert_eq!((st.seq.pmtu, seq(&st)), (2048, (0, 0, 0, 4)));
    }

    /// A READ of 2048 bytes at 300 on a flow that has not shown its MTU, and the READ RESPONSE
    /// FIRST (1024 bytes) its peer sends back: (the READ's flow, the peer's, the notes).
    fn read_and_its_first_response() -> (PsnState, PsnState, Notes) {
        let (mut st, mut peer, mut notes) = (PsnState::zeroed(), PsnState::zeroed(), Notes::default());
        account(&mut st, &read(300, 2048), &mut notes);
        let mut first = pkt(0x0D, 300);
        first.payload_len = 1024;
        account(&mut peer, &first, &mut notes);
        (st, peer, notes)
    }

    /// The READ RESPONSE FIRST of the peer shows the MTU (1024) before the next request: then
    /// a request at +4 is two PSNs beyond the READ's end (+2), not an end at 512.
    #[test]
    fn the_peers_read_response_teaches_the_mtu() {
        let (mut st, peer, mut notes) = read_and_its_first_response();
        account(&mut st, &pkt(0x0A, 304), &mut notes);
        assert_eq!((st.seq.pmtu, seq(&st)), (1024, (1, 2, 0, 305)));
        assert_eq!(st.responder[responder::OUT_OF_SEQ_REQUEST], 1);
        assert_eq!(peer.seq.pmtu, 1024, "a response's own flow learns it too");
    }

    /// The READ REQUEST repeated after its READ RESPONSE FIRST (a retransmission) is a
    /// request behind the responder, which asks the notes for an RNR NAK: it must leave the
    /// MTU note the response wrote there, which settles the READ at the next request.
    #[test]
    fn a_repeated_read_leaves_the_mtu_note() {
        let (mut st, _, mut notes) = read_and_its_first_response();
        account(&mut st, &read(300, 2048), &mut notes);
        assert_eq!((notes.len, st.count[count::DUPLICATES]), (1, 1), "the note stays; the repeat is a duplicate");
        account(&mut st, &pkt(0x0A, 304), &mut notes);
        assert_eq!((st.seq.pmtu, st.seq.expected), (1024, 305), "settled by the note, not by the PSN alone (512)");
    }

    #[test]
    fn own_first_payload_and_default_pmtu() {
        let mut st = PsnState::zeroed();
        let mut notes = Notes::default();
        let mut w = pkt(0x06, 10);
        w.payload_len = 4096;
        account(&mut st, &w, &mut notes);
        account(&mut st, &read(11, 8192), &mut notes);
        assert_eq!((st.seq.pmtu, st.seq.read_pending, st.seq.expected), (4096, 0, 13));
        let mut st = PsnState::zeroed();
        let mut notes = Notes { default: 512, ..Default::default() };
        account(&mut st, &read(0, 2048), &mut notes);
        assert_eq!((st.seq.read_pending, st.seq.expected), (0, 4), "--pmtu 512: known at once");
    }

    /// rxe's responder: 403 out of sequence (a NAK episode, 404 inside it), 402 … 404 again,
    /// 403 a duplicate; 405 refused with an RNR NAK seen only after 406: 406 was out of
    /// sequence there, and 405, 406 again are accepted.
    #[test]
    fn responder_model() {
        let mut st = PsnState::zeroed();
        let mut notes = Notes::default();
        let send = 0x04;
        run(&mut st, &mut notes, &[(send, 400), (send, 401), (send, 403), (send, 404)]);
        assert_eq!((st.responder, st.seq.responder_nak, st.seq.responder_expected), ([1, 0], 1, 402));
        run(&mut st, &mut notes, &[(send, 402), (send, 403), (send, 404), (send, 403), (send, 405), (send, 406)]);
        assert_eq!((st.responder, st.seq.responder_expected), ([1, 1], 407));
        let mut nak = pkt(0x11, 405);
        nak.aeth_syndrome = 0x20 | 14;
        account(&mut PsnState::zeroed(), &nak, &mut notes);
        run(&mut st, &mut notes, &[(send, 405)]);
        assert_eq!((st.responder, st.seq.responder_expected), ([2, 1], 406));
        run(&mut st, &mut notes, &[(send, 406)]);
        assert_eq!((st.responder, st.seq.responder_expected, notes.len), ([2, 1], 407, 0));
        assert_eq!(seq(&st), (1, 1, 6, 407), "the observer's view of the same requests");
    }

    #[test]
    fn responses_are_checked_within_one_response_only() {
        let mut st = PsnState::zeroed();
        let ops = [(0x0D, 50), (0x0E, 51), (0x0F, 52), (0x0D, 90), (0x0E, 92), (0x0F, 93), (0x10, 7)];
        run(&mut st, &mut Notes::default(), &ops);
        assert_eq!((st.count[count::REQUESTS], st.count[count::RESPONSE_OUT_OF_SEQUENCE]), (0, 1));
        assert_eq!(st.aeth[aeth::ACK], 5, "FIRST and LAST of both responses and the ONLY carry an AETH");
    }

    #[test]
    fn aeth_syndromes() {
        let mut st = PsnState::zeroed();
        let mut notes = Notes::default();
        for syn in [0x1F, 0x60, 0x21, 0x61, 0x62, 0x63, 0x64, 0x65, 0x40] {
            let mut s = pkt(0x11, 1);
            s.aeth_syndrome = syn;
            account(&mut st, &s, &mut notes);
        }
        assert_eq!(st.aeth, [1, 1, 1, 1, 1, 1, 1, 2]);
        assert_eq!(st.naks(), 8);
        assert_eq!(st.count[count::REQUESTS], 0, "ACKs are not requests");
        let mut cnp = pkt(crate::opcode::CNP, 5);
        cnp.ext = ext::CNP_RESERVED;
        account(&mut st, &cnp, &mut notes);
        assert_eq!((st.count[count::REQUESTS], st.seq.started), (0, 0));
    }
}
