//! The messages fixture (`messages.pcap`): one scenario per QP, each 1 ms after the previous
//! (so that no scenario's pause or episode overlaps another's messages), each built to give
//! completion times and tail causes the tests state by hand
//! (tests/integration/messages.rs).
//!
//! Hosts are 10.0.3.x; a requester `s` sends to QP `0x100 + s` of its responder, which answers
//! to QP `0x200 + s`. Times are µs after the scenario's base.

use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::{Aeth, AtomicEth, Deth, Reth, nak_code};

use crate::fixtures::{Fixture, Timed};
use crate::synth::{Roce, Vlan, pfc};

pub const US: u64 = 1_000;
/// Scenario `k` starts at `k` ms.
pub const SCENARIO: u64 = 1_000 * US;

pub fn ip(h: u8) -> [u8; 4] {
    [10, 0, 3, h]
}

pub struct Builder {
    pub a: Timed,
    base: u64,
}

impl Builder {
    fn at(&mut self, us: u64, r: &Roce) {
        self.a.roce(self.base + us * US, r);
    }
    fn at_ns(&mut self, ns: u64, r: &Roce) {
        self.a.roce(self.base + ns, r);
    }
}

/// A request from `s` to `d` (payload bytes, AckReq).
pub fn req(s: u8, d: u8, opcode: u8, psn: u32, payload: usize, ack_req: bool) -> Roce {
    let mut r = Roce::v4(ip(s), ip(d), 0xC000 + s as u16, opcode, 0x100 + s as u32, psn).payload(payload);
    r.bth.ack_req = ack_req;
    r
}

pub fn write(s: u8, d: u8, opcode: u8, psn: u32, dma_len: u32, payload: usize, ack_req: bool) -> Roce {
    let mut r = req(s, d, opcode, psn, payload, ack_req);
    r.ext.reth = Reth { va: 0x1000, rkey: 7, dma_len };
    r
}

/// A response from `d` back to `s`'s QP.
pub fn resp(s: u8, d: u8, opcode: u8, psn: u32, aeth: Aeth) -> Roce {
    let mut r = Roce::v4(ip(d), ip(s), 0xC000 + d as u16, opcode, 0x200 + s as u32, psn);
    r.ext.aeth = aeth;
    r
}

pub fn ack(s: u8, d: u8, psn: u32) -> Roce {
    resp(s, d, op::ACKNOWLEDGE, psn, Aeth::ack(31, 1))
}

/// Every scenario, in order; see each function.
pub fn messages() -> Fixture {
    let mut b = Builder { a: Timed::default(), base: 0 };
    let scenarios: [fn(&mut Builder); 12] = [
        coalesced,
        read_and_atomic,
        go_back_n,
        unreliable,
        paused,
        rate_cut,
        timeout_retransmission,
        incast,
        unexplained,
        rnr,
        capture_gap,
        ring,
    ];
    for (k, s) in scenarios.iter().enumerate() {
        b.base = k as u64 * SCENARIO;
        s(&mut b);
    }
    b.a.fixture("messages.pcap")
}

/// 1 → 2: SEND 1024 + 1024 + 512 B (PSN 10–12, 0–2 µs), WRITE ONLY 4096 B (PSN 13, 3 µs), one
/// coalesced ACK of 13 at 10 µs completes both (MCT 10 and 7 µs); WRITE 8192 B in two packets
/// (PSN 14–15, 20–21 µs), ACK at 25 µs (MCT 5 µs).
fn coalesced(b: &mut Builder) {
    b.at(0, &req(1, 2, op::SEND_FIRST, 10, 1024, false));
    b.at(1, &req(1, 2, op::SEND_MIDDLE, 11, 1024, false));
    b.at(2, &req(1, 2, op::SEND_LAST, 12, 512, true));
    b.at(3, &write(1, 2, op::RDMA_WRITE_ONLY, 13, 4096, 4096, true));
    b.at(10, &ack(1, 2, 13));
    b.at(20, &write(1, 2, op::RDMA_WRITE_FIRST, 14, 8192, 4096, false));
    b.at(21, &req(1, 2, op::RDMA_WRITE_LAST, 15, 4096, true));
    b.at(25, &ack(1, 2, 15));
}

/// 3 → 4: READ of 8192 B (PSN 100 at 0 µs; responses PSN 100 at 6 µs, 101 at 8 µs: MCT 8 µs);
/// FETCH&ADD (PSN 102 at 10 µs, its span after the READ's two) answered at 13 µs (MCT 3 µs).
fn read_and_atomic(b: &mut Builder) {
    b.at(0, &write(3, 4, op::RDMA_READ_REQUEST, 100, 8192, 0, false));
    let mut first = resp(3, 4, op::RDMA_READ_RESPONSE_FIRST, 100, Aeth::ack(31, 1));
    first.payload_len = 4096;
    b.at(6, &first);
    let mut last = resp(3, 4, op::RDMA_READ_RESPONSE_LAST, 101, Aeth::ack(31, 1));
    last.payload_len = 4096;
    b.at(8, &last);
    let mut fa = req(3, 4, op::FETCH_ADD, 102, 0, true);
    fa.ext.atomic = AtomicEth { va: 0x2000, rkey: 9, swap_add: 1, compare: 0 };
    b.at(10, &fa);
    let mut aa = resp(3, 4, op::ATOMIC_ACKNOWLEDGE, 102, Aeth::ack(31, 2));
    aa.ext.atomic_ack = 41;
    b.at(13, &aa);
}

/// 5 → 6: WRITE of 4 × 1024 B (PSN 200–203); 202 lost before this point, a PSN-sequence NAK
/// at 5 µs, go-back-N from 202 at 8 µs, ACK at 12 µs: MCT 12 µs (from the first start),
/// retransmission from the NAK (7 µs).
fn go_back_n(b: &mut Builder) {
    b.at(0, &write(5, 6, op::RDMA_WRITE_FIRST, 200, 4096, 1024, false));
    b.at(1, &req(5, 6, op::RDMA_WRITE_MIDDLE, 201, 1024, false));
    b.at(3, &req(5, 6, op::RDMA_WRITE_LAST, 203, 1024, true));
    b.at(5, &resp(5, 6, op::ACKNOWLEDGE, 202, Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 1)));
    b.at(8, &req(5, 6, op::RDMA_WRITE_MIDDLE, 202, 1024, false));
    b.at(9, &req(5, 6, op::RDMA_WRITE_LAST, 203, 1024, true));
    b.at(12, &ack(5, 6, 203));
}

/// 7 → 8: a UC SEND of 1000 + 500 B over 4 µs, and a UD SEND ONLY of 100 B.
fn unreliable(b: &mut Builder) {
    b.at(0, &req(7, 8, 0x20 | op::SEND_FIRST, 0, 1000, false));
    b.at(4, &req(7, 8, 0x20 | op::SEND_LAST, 1, 500, false));
    let mut ud = req(7, 8, 0x60 | op::SEND_ONLY, 5, 100, false);
    ud.ext.deth = Deth { qkey: 0x1111, src_qp: 0x77 };
    b.at(6, &ud);
}

/// 9 → 10 on VLAN priority 3: a WRITE ONLY at 0, ACK at 50 µs. A switch port pauses
/// priority 3 at 10 µs for 2500 quanta (12.8 µs at 100 Gbit/s): 12 800 ns of its time paused.
fn paused(b: &mut Builder) {
    let mut w = write(9, 10, op::RDMA_WRITE_ONLY, 300, 1024, 1024, true);
    w.vlans = vec![Vlan::dot1q(3, 100)];
    b.at(0, &w);
    let mut q = [0u16; 8];
    q[3] = 2500;
    b.a.push(b.base + 10 * US, analyzer_common::FrameClass::Pfc, pfc([0x02, 0, 0, 0, 0x99, 1], 1 << 3, q));
    let mut a = ack(9, 10, 300);
    a.vlans = vec![Vlan::dot1q(3, 100)];
    b.at(50, &a);
}

/// 11 → 12: one WRITE of [`RATE_CUT_PACKETS`] × 1000 B. One packet a µs from 0 to 109 µs
/// (the first CE-marked: DCQCN watches the flow), a CNP at 100 µs, then one packet every 2 µs
/// from 110 to 298 µs (the rate halved from the 10 µs window at 110 µs), LAST at 300 µs, ACK at
/// 305 µs: MCT 305 µs, the cut from 110 µs to the message's end (195 µs).
fn rate_cut(b: &mut Builder) {
    let times: Vec<u64> = (0..110).chain((110..300).step_by(2)).chain([300]).collect();
    for (i, t) in times.iter().enumerate() {
        let opcode = match i {
            0 => op::RDMA_WRITE_FIRST,
            i if i + 1 == times.len() => op::RDMA_WRITE_LAST,
            _ => op::RDMA_WRITE_MIDDLE,
        };
        let mut r = write(11, 12, opcode, i as u32, RATE_CUT_PACKETS * 1000, 1000, i + 1 == times.len());
        if i == 0 {
            r.ecn = 3;
        }
        b.at(*t, &r);
    }
    let mut cnp = Roce::v4(ip(12), ip(11), 0xC000 + 12, CNP, 0x200 + 11, 0);
    cnp.dscp = 48;
    cnp.payload_len = 16;
    b.at(100, &cnp);
    b.at(305, &ack(11, 12, times.len() as u32 - 1));
}

/// Packets of the rate-cut WRITE: 110 at 1 µs, 95 at 2 µs, the LAST.
pub const RATE_CUT_PACKETS: u32 = 110 + 95 + 1;

/// 13 → 14: a WRITE ONLY at 0 whose ACK never comes; sent again at 30 µs (a timeout), ACK at
/// 33 µs: MCT 33 µs, retransmission for the last 3 µs.
fn timeout_retransmission(b: &mut Builder) {
    b.at(0, &write(13, 14, op::RDMA_WRITE_ONLY, 400, 1024, 1024, true));
    b.at(30, &write(13, 14, op::RDMA_WRITE_ONLY, 400, 1024, 1024, true));
    b.at(33, &ack(13, 14, 400));
}

/// 21, 22, 23, 24 → 20: each a WRITE of 21 × 1000 B, one packet a µs from 0 (sender 21) … 3
/// (sender 24) µs; ACKs at 40 µs. Four senders within the 100 µs window from the fourth's
/// first packet at 3 µs until the first sender's last packet (20 µs) leaves the window at
/// 120 µs: an incast episode at 10.0.3.20 over each of the four messages (MCT 40, 39, 38,
/// 37 µs) from 3 µs to their ACK at 40 µs: 37 µs each.
fn incast(b: &mut Builder) {
    for s in 21..=24u8 {
        let start = (s - 21) as u64;
        for i in 0..21u32 {
            let opcode = match i {
                0 => op::RDMA_WRITE_FIRST,
                20 => op::RDMA_WRITE_LAST,
                _ => op::RDMA_WRITE_MIDDLE,
            };
            b.at(start + i as u64, &write(s, 20, opcode, i, 21_000, 1000, i == 20));
        }
        b.at(40, &ack(s, 20, 20));
    }
}

/// 15 → 16: a WRITE ONLY at 0, ACK at 90 µs; nothing else happens: unexplained.
fn unexplained(b: &mut Builder) {
    b.at(0, &write(15, 16, op::RDMA_WRITE_ONLY, 700, 1024, 1024, true));
    b.at(90, &ack(15, 16, 700));
}

/// 17 → 18: a SEND ONLY at 0 meets an RNR NAK at 2 µs, is sent again at 20 µs and ACKed at
/// 23 µs: MCT 23 µs, rnr for 21 µs, retransmission for 3 µs.
fn rnr(b: &mut Builder) {
    b.at(0, &req(17, 18, op::SEND_ONLY, 500, 512, true));
    b.at(2, &resp(17, 18, op::ACKNOWLEDGE, 500, Aeth::rnr_nak(14, 0)));
    b.at(20, &req(17, 18, op::SEND_ONLY, 500, 512, true));
    b.at(23, &ack(17, 18, 500));
}

/// 25 → 26: a WRITE over PSN 600–602 whose 601 this capture does not hold; the ACK of 602 at
/// 60 µs covers it (delivered, not retransmitted): MCT 60 µs, capture_gap for all of it.
fn capture_gap(b: &mut Builder) {
    b.at(0, &write(25, 26, op::RDMA_WRITE_FIRST, 600, 3072, 1024, false));
    b.at(2, &req(25, 26, op::RDMA_WRITE_LAST, 602, 1024, true));
    b.at(60, &ack(25, 26, 602));
}

/// A ring 31 → 32 → 33 → 34 → 31: each edge 10 WRITE ONLY of 4096 B, one every 10 µs, each
/// ACKed 4 µs after it (8.192 Gbit/s), but 33 → 34 8 µs after (4.096 Gbit/s): the ring's
/// median edge runs 2× faster than its straggler.
fn ring(b: &mut Builder) {
    for (s, d) in [(31, 32), (32, 33), (33, 34), (34, 31)] {
        let mct = if s == 33 { 8 } else { 4 };
        for i in 0..10u32 {
            let t = i as u64 * 10;
            b.at(t, &write(s, d, op::RDMA_WRITE_ONLY, i, 4096, 4096, true));
            b.at_ns(t * US + mct * US, &ack(s, d, i));
        }
    }
}

pub fn all() -> Vec<Fixture> {
    let (leaf, spine) = queueing();
    vec![messages(), leaf, spine]
}

/// Two vantage points, a queue between them (`leaf=queueing_leaf.pcap spine=queueing_spine.pcap`):
/// 1 → 2 sends a WRITE ONLY of 1024 B every 10 µs from 0 (message k at 10k µs at the leaf); the
/// spine sees it 2 µs later, except messages 40–49, which queue and arrive 9 µs later (still in
/// order: a queue does not reorder). The spine sees each ACK 3 µs after the request reached it,
/// the leaf 2 µs after the spine.
///
/// By hand: each message's MCT (from its first sighting, the leaf, to its ACK's, the spine) is
/// 5 µs, 12 µs for 40–49. The hop leaf→spine's p90 is 2 µs (90 of 100 frames); by 10 µs windows
/// at the spine's time, window k holds message k alone: windows 40–49 are slow, the hop queued
/// over [400, 500) µs. With `--tail-threshold 10us` the ten 12 µs messages are the tail, each
/// overlapping that span by 12 µs but the last (490–502 µs: 10 µs): 118 µs, `queueing` at
/// leaf→spine.
pub fn queueing() -> (Fixture, Fixture) {
    let (mut leaf, mut spine) = (Timed::default(), Timed::default());
    for k in 0..100u32 {
        let t = k as u64 * 10 * US;
        let delay = if (40..50).contains(&k) { 9 } else { 2 } * US;
        let mut w = write(1, 2, op::RDMA_WRITE_ONLY, k, 1024, 1024, true);
        w.ident = k as u16;
        leaf.roce(t, &w);
        spine.roce(t + delay, &w);
        let mut a = ack(1, 2, k);
        a.ident = 0x8000 + k as u16;
        spine.roce(t + delay + 3 * US, &a);
        leaf.roce(t + delay + 5 * US, &a);
    }
    (leaf.fixture("queueing_leaf.pcap"), spine.fixture("queueing_spine.pcap"))
}
