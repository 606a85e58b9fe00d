//! Fixtures of the transport-health analyses (PSN, NAKs, RTT, ECN/CNP/DSCP audit), each built
//! to produce a known answer that the tests state by hand.

use crate::synth::{Roce, udp_ipv4};
use analyzer_common::FrameClass;
use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::{Aeth, Reth, nak_code};

use crate::fixtures::{Fixture, Timed as At};

/// A plain UDP frame (it extends the capture's end time).
fn other(a: &mut At, ts: u64) {
    a.push(ts, FrameClass::NonRoce, udp_ipv4([10, 0, 9, 1], [10, 0, 9, 2], 5000, 5001, 32));
}

pub fn ip(d: u8) -> [u8; 4] {
    [10, 0, 1, d]
}

/// The requester's UDP source port and QP of a host pair (the responder's are these + 1).
fn sport(src: u8) -> u16 {
    0xC000 + src as u16
}

/// A request from `src` to `dst`'s QP `qp`.
fn req(src: u8, dst: u8, qp: u32, opcode: u8, psn: u32) -> Roce {
    let mut r = Roce::v4(ip(src), ip(dst), sport(src), opcode, qp, psn);
    r.payload_len = 256;
    r
}

/// An acknowledgement from `src` back to `dst`'s QP `qp`.
fn ack(src: u8, dst: u8, qp: u32, psn: u32, aeth: Aeth) -> Roce {
    let mut r = Roce::v4(ip(src), ip(dst), sport(src), op::ACKNOWLEDGE, qp, psn);
    r.ext.aeth = aeth;
    r
}

fn write(src: u8, dst: u8, qp: u32, psn: u32, ack_req: bool) -> Roce {
    let mut r = req(src, dst, qp, op::RDMA_WRITE_ONLY, psn);
    r.ext.reth = Reth { va: 0x1000, rkey: 7, dma_len: 256 };
    r.bth.ack_req = ack_req;
    r
}

const US: u64 = 1_000;

/// Loss of PSN 104 before the receiver, a PSN-sequence NAK, go-back-N from 104.
/// Requester 1 → 2 (QP 0x200), ACKs 2 → 1 (QP 0x100).
pub fn gobackn() -> Fixture {
    let mut a = At::default();
    let mut t = 0;
    for psn in (100..=103).chain(105..=109) {
        a.roce(t, &write(1, 2, 0x200, psn, psn == 103 || psn == 109));
        if psn == 105 {
            a.roce(t + 2 * US, &ack(2, 1, 0x100, 104, Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 3)));
        }
        t += US;
    }
    t += 5 * US;
    for psn in 104..=109 {
        a.roce(t, &write(1, 2, 0x200, psn, psn == 109));
        t += US;
    }
    a.roce(t + 3 * US, &ack(2, 1, 0x100, 109, Aeth::ack(31, 10)));
    a.fixture("gobackn.pcap")
}

/// Reordering without NAK: 500 501 503 502 504 505 (3 → 4, QP 0x300).
pub fn reorder() -> Fixture {
    let mut a = At::default();
    for (i, psn) in [500, 501, 503, 502, 504, 505].into_iter().enumerate() {
        a.roce(i as u64 * US, &write(3, 4, 0x300, psn, psn == 505));
    }
    a.roce(10 * US, &ack(4, 3, 0x103, 505, Aeth::ack(31, 6)));
    a.fixture("reorder.pcap")
}

fn read_request(src: u8, dst: u8, qp: u32, psn: u32, dma_len: u32) -> Roce {
    let mut r = req(src, dst, qp, op::RDMA_READ_REQUEST, psn);
    r.payload_len = 0;
    r.ext.reth = Reth { va: 0x9000, rkey: 9, dma_len };
    r
}

/// A READ RESPONSE of `n` packets from `src` to the requester's QP, PMTU 1024.
fn read_response(a: &mut At, t: u64, src: u8, dst: u8, qp: u32, psn: u32, n: u32) {
    read_response_at(a, t, (src, dst, qp), psn, n, 1024);
}

/// PMTU 1024. QP 5 → 6 (0x600): a 3-packet WRITE shows the PMTU, then READs of 4, 1 and 8
/// PMTUs interleaved with WRITEs, responses (6 → 5, QP 0x105) arriving after later requests:
/// no anomaly. QP 7 → 6 (0x610) only reads (2 PMTUs, then 1) before any response: its first
/// READ is cut by `--pmtu` (4096 by default: a false gap; 1024: none).
pub fn reads() -> Fixture {
    let mut a = At::default();
    for (i, (opcode, len)) in [(op::RDMA_WRITE_FIRST, 1024), (op::RDMA_WRITE_MIDDLE, 1024), (op::RDMA_WRITE_LAST, 512)]
        .into_iter()
        .enumerate()
    {
        let mut w = req(5, 6, 0x600, opcode, 1000 + i as u32);
        w.payload_len = len;
        w.ext.reth = Reth { va: 0x1000, rkey: 7, dma_len: 2560 };
        w.bth.ack_req = opcode == op::RDMA_WRITE_LAST;
        a.roce(i as u64 * US, &w);
    }
    a.roce(3 * US, &read_request(5, 6, 0x600, 1003, 3 * 1024 + 1));
    a.roce(4 * US, &write(5, 6, 0x600, 1007, true));
    read_response(&mut a, 5 * US, 6, 5, 0x105, 1003, 4);
    a.roce(10 * US, &read_request(5, 6, 0x600, 1008, 1024));
    a.roce(11 * US, &read_request(5, 6, 0x600, 1009, 8 * 1024));
    a.roce(12 * US, &write(5, 6, 0x600, 1017, true));
    read_response(&mut a, 13 * US, 6, 5, 0x105, 1008, 1);
    read_response(&mut a, 14 * US, 6, 5, 0x105, 1009, 8);
    a.roce(30 * US, &ack(6, 5, 0x105, 1017, Aeth::ack(31, 9)));

    a.roce(40 * US, &read_request(7, 6, 0x610, 50, 2048));
    a.roce(41 * US, &read_request(7, 6, 0x610, 52, 1024));
    read_response(&mut a, 42 * US, 6, 7, 0x107, 50, 2);
    read_response(&mut a, 45 * US, 6, 7, 0x107, 52, 1);
    a.fixture("reads.pcap")
}

/// A READ RESPONSE of `n` packets at PMTU `mtu` (the last one 100 bytes).
fn read_response_at(a: &mut At, t: u64, (src, dst, qp): (u8, u8, u32), psn: u32, n: u32, mtu: usize) {
    for i in 0..n {
        let opcode = match (n, i) {
            (1, _) => op::RDMA_READ_RESPONSE_ONLY,
            (_, 0) => op::RDMA_READ_RESPONSE_FIRST,
            (_, i) if i == n - 1 => op::RDMA_READ_RESPONSE_LAST,
            _ => op::RDMA_READ_RESPONSE_MIDDLE,
        };
        let mut r = Roce::v4(ip(src), ip(dst), sport(src), opcode, qp, psn + i);
        r.payload_len = if i == n - 1 { 100 } else { mtu };
        r.ext.aeth = Aeth::ack(31, 1);
        a.roce(t + i as u64 * US, &r);
    }
}

/// Per-QP PMTUs between the same two hosts (20 → 21; responses and ACKs to QP + 0x1000):
/// - QP 0xB01, MTU 4096: a 3-packet WRITE shows it, then a READ of 8192 bytes (2 PSNs).
/// - QP 0xB00, MTU 1024: READs first (4096 bytes at 100, 3000 at 104), responses only after
///   both: 104 is where the first READ ends at 1024 (at 4096, the other QP's, it would be a
///   gap of 3). Then a WRITE at 107.
/// - QP 0xB02: a READ of 2048 at 300, whose response FIRST (1024 bytes) arrives before the
///   next request, a SEND at 304: the READ ended at 302, so 302 and 303 were lost (at 512 it
///   would have ended at 304: the response, not the PSN, decides).
/// - QP 0xB03, the responder model: SENDs 400 401 403 404, a PSN-sequence NAK (402), 402 403
///   404 again, 403 once more, 405 406, an RNR NAK for 405 (after 406), 405 406 again, an ACK.
///   The responder counts 403 (one NAK episode with 404), 406 (taken while 405 was refused),
///   and the duplicate 403: out_of_seq_request 2, duplicate_request 1.
pub fn qp_mtus() -> Fixture {
    let mut a = At::default();
    let mut t = 0;
    let mut next = |a: &mut At, r: &Roce| {
        a.roce(t, r);
        t += US;
    };
    for (opcode, psn, len) in
        [(op::RDMA_WRITE_FIRST, 200, 4096), (op::RDMA_WRITE_MIDDLE, 201, 4096), (op::RDMA_WRITE_LAST, 202, 100)]
    {
        let mut w = req(20, 21, 0xB01, opcode, psn);
        w.payload_len = len;
        w.ext.reth = Reth { va: 0x1000, rkey: 7, dma_len: 8292 };
        next(&mut a, &w);
    }
    next(&mut a, &read_request(20, 21, 0xB01, 203, 8192));
    next(&mut a, &write(20, 21, 0xB01, 205, true));
    read_response_at(&mut a, 10 * US, (21, 20, 0x1B01), 203, 2, 4096);

    let mut t = 20 * US;
    for r in [read_request(20, 21, 0xB00, 100, 4096), read_request(20, 21, 0xB00, 104, 3000)] {
        a.roce(t, &r);
        t += US;
    }
    read_response_at(&mut a, t, (21, 20, 0x1B00), 100, 4, 1024);
    read_response_at(&mut a, t + 4 * US, (21, 20, 0x1B00), 104, 3, 1024);
    a.roce(t + 8 * US, &write(20, 21, 0xB00, 107, true));

    a.roce(40 * US, &read_request(20, 21, 0xB02, 300, 2048));
    read_response_at(&mut a, 41 * US, (21, 20, 0x1B02), 300, 2, 1024);
    a.roce(45 * US, &req(20, 21, 0xB02, op::SEND_ONLY, 304));

    let mut t = 60 * US;
    let send = |psn| req(20, 21, 0xB03, op::SEND_ONLY, psn);
    let nak_seq = ack(21, 20, 0x1B03, 402, Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 3));
    let rnr = ack(21, 20, 0x1B03, 405, Aeth::rnr_nak(14, 0));
    let done = ack(21, 20, 0x1B03, 406, Aeth::ack(31, 5));
    let mut frames: Vec<Roce> = [400, 401, 403, 404].map(send).into();
    frames.push(nak_seq);
    frames.extend([402, 403, 404, 403, 405, 406].map(send));
    frames.push(rnr);
    frames.extend([405, 406].map(send));
    frames.push(done);
    for r in &frames {
        a.roce(t, r);
        t += US;
    }
    a.fixture("qp_mtus.pcap")
}

/// RNR NAKs: a SEND to a receiver with no receive posted, retried twice (8 → 9, QP 0x800).
pub fn rnr() -> Fixture {
    let mut a = At::default();
    let send = || {
        let mut s = req(8, 9, 0x800, op::SEND_ONLY, 7);
        s.bth.ack_req = true;
        s
    };
    for i in 0..3u64 {
        a.roce(i * 100 * US, &send());
        let aeth = if i < 2 { Aeth::rnr_nak(14, 0) } else { Aeth::ack(31, 1) };
        a.roce(i * 100 * US + 5 * US, &ack(9, 8, 0x108, 7, aeth));
    }
    a.fixture("rnr.pcap")
}

/// PSNs across 2^24: in order on QP 0xA00; a gap of two across the wrap and one straggler on
/// QP 0xA01 (10 → 11).
pub fn psn_wrap() -> Fixture {
    let mut a = At::default();
    for (i, psn) in [0xFF_FFFC, 0xFF_FFFD, 0xFF_FFFE, 0xFF_FFFF, 0, 1, 2].into_iter().enumerate() {
        a.roce(i as u64 * US, &write(10, 11, 0xA00, psn, false));
    }
    for (i, psn) in [0xFF_FFFE, 1, 0xFF_FFFF, 2].into_iter().enumerate() {
        a.roce(20 * US + i as u64 * US, &write(10, 11, 0xA01, psn, false));
    }
    a.fixture("psn_wrap.pcap")
}

/// A notification point that paces CNPs (one per QP per 50 µs): senders 30, 31 write to 40
/// every 2 µs from 0 to 398 µs, CE-marked from 100 µs on (150 marks each); the NP, 1 µs away,
/// answers a mark with a CNP (seen 2 µs after the mark) unless it sent one in the last 50 µs:
/// CNPs for the marks at 100, 150, …, 350. The marks after 350 get none: covered by the one
/// before. Sender 32's NP stops after two CNPs (marks at 100 and 150): its marks from 204 µs on
/// are more than 50 µs after the last CNP (seen at 152) and unanswered. Sender 33 gets no CNP.
/// The capture ends at 2 ms.
pub fn cnp_paced() -> Fixture {
    let mut a = At::default();
    for (src, qp) in [(30u8, 0xD00u32), (31, 0xD01), (32, 0xD02), (33, 0xD03)] {
        let mut last_cnp: Option<u64> = None;
        let mut sent = 0;
        for i in 0..200u64 {
            let t = i * 2 * US;
            let ce = t >= 100 * US;
            let mut d = Roce::v4(ip(src), ip(40), sport(src), op::RDMA_WRITE_MIDDLE, qp, i as u32);
            d.payload_len = 256;
            d.ecn = if ce { 3 } else { 2 };
            a.roce(t, &d);
            let np_gets = t + US;
            let pacing_ok = last_cnp.is_none_or(|c| np_gets - c >= 50 * US);
            let np_works = match src {
                32 => sent < 2,
                33 => false,
                _ => true,
            };
            if ce && pacing_ok && np_works {
                let mut c = Roce::v4(ip(40), ip(src), sport(40), CNP, qp + 0x100, 0);
                c.dscp = 48;
                c.ecn = 0;
                a.roce(np_gets + US, &c);
                last_cnp = Some(np_gets);
                sent += 1;
            }
        }
    }
    // The capture goes on past the 1 ms CNP timeout, so every mark is decided.
    other(&mut a, 2_000 * US);
    a.fixture("cnp_paced.pcap")
}

/// Requests and RTTs of the RTT fixture's QP 0xC00 (12 → 13): request i at i × 200 µs,
/// acknowledged (i + 1) × 100 ns later; QP 0xC01: 100 requests acknowledged after 7 µs.
pub const RTT_FAST: u32 = 1000;
pub const RTT_SLOW: u32 = 100;

/// Known RTT distributions on two QPs between the same hosts (paired by PSN), plus one request
/// never acknowledged, 2 s before the end of the capture (a timeout).
pub fn rtt() -> Fixture {
    let mut a = At::default();
    for i in 0..RTT_FAST {
        let t = i as u64 * 200 * US;
        a.roce(t, &write(12, 13, 0xC00, 0x1_0000 + i, true));
        a.roce(t + (i as u64 + 1) * 100, &ack(13, 12, 0x10C, 0x1_0000 + i, Aeth::ack(31, i)));
    }
    for i in 0..RTT_SLOW {
        let t = i as u64 * 200 * US + 50 * US;
        a.roce(t, &write(12, 13, 0xC01, 0x80_0000 + i, true));
        a.roce(t + 7 * US, &ack(13, 12, 0x11C, 0x80_0000 + i, Aeth::ack(31, i)));
    }
    let end = RTT_FAST as u64 * 200 * US;
    a.roce(end, &write(12, 13, 0xC00, 0x1_0000 + RTT_FAST, true));
    other(&mut a, end + 2_000_000_000);
    a.fixture("rtt.pcap")
}

/// Every audit finding, and traffic that must raise none:
/// * 20 → 21: RoCE data Not-ECT (`not_ect`);
/// * 22 → 23: data with DSCP 24 (`roce_dscp`);
/// * 24 → 25: CE marks and no CNP back (`ce_without_cnp`);
/// * 26 → 27: CNPs back (DSCP 46) with no CE seen (`cnp_without_ce`, `cnp_dscp`);
/// * 28 → 29: CE marks answered by CNPs within 50 µs, everything marked right (no finding).
pub fn ecn_audit() -> Fixture {
    let mut a = At::default();
    for i in 0..4u64 {
        let t = i * 100 * US;
        let mut w = write(20, 21, 0x1400, i as u32, false);
        w.ecn = 0;
        a.roce(t, &w);
        let mut w = write(22, 23, 0x1600, i as u32, false);
        w.dscp = 24;
        a.roce(t + US, &w);
        let mut w = write(24, 25, 0x1800, i as u32, false);
        w.ecn = 3;
        a.roce(t + 2 * US, &w);
        a.roce(t + 3 * US, &write(26, 27, 0x1A00, i as u32, false));
        let mut c = Roce::v4(ip(27), ip(26), sport(27), CNP, 0x11A, 0);
        c.dscp = 46;
        c.ecn = 0;
        c.bth.becn = true;
        a.roce(t + 4 * US, &c);
        let mut w = write(28, 29, 0x1C00, i as u32, false);
        w.ecn = 3;
        a.roce(t + 5 * US, &w);
        let mut c = Roce::v4(ip(29), ip(28), sport(29), CNP, 0x11C, 0);
        c.dscp = 48;
        c.ecn = 0;
        c.bth.becn = true;
        // The CNP 50 + 10 i µs after the mark: 110 µs between CNPs.
        a.roce(t + 5 * US + 50 * US + i * 10 * US, &c);
    }
    other(&mut a, 20_000 * US);
    a.fixture("ecn_audit.pcap")
}

/// The CM exchange of [`rtt_cm`]: a REQ from 10.0.1.40 (QP 0xA40) and the REP of 10.0.1.41
/// (QP 0xB41).
pub const CM_FRAMES: usize = 2;

/// Two QPs between the same hosts with the same PSNs (so PSN continuity cannot tell their ACKs
/// apart): the CM exchange of the first is captured, which pairs it; the second is then the
/// only candidate left. RTT 2 µs on QP 0xB41, 3 µs on QP 0xB42, 20 requests each.
pub fn rtt_cm() -> Fixture {
    use analyzer_common::wire::cm::{Kind, Repr};
    let mut a = At::default();
    let req = Repr { kind: Kind::Req, local_comm_id: 0x1111, remote_comm_id: 0, local_qpn: 0xA40, starting_psn: 100 };
    let rep =
        Repr { kind: Kind::Rep, local_comm_id: 0x2222, remote_comm_id: 0x1111, local_qpn: 0xB41, starting_psn: 100 };
    a.push(0, FrameClass::Roce, crate::synth::cm_mad(ip(40), ip(41), &req));
    a.push(5 * US, FrameClass::Roce, crate::synth::cm_mad(ip(41), ip(40), &rep));
    for i in 0..20u64 {
        let t = 100 * US + i * 50 * US;
        let psn = 100 + i as u32;
        a.roce(t, &write(40, 41, 0xB41, psn, true));
        a.roce(t + US, &write(40, 41, 0xB42, psn, true));
        a.roce(t + 2 * US, &ack(41, 40, 0xA40, psn, Aeth::ack(31, i as u32)));
        a.roce(t + 4 * US, &ack(41, 40, 0xA42, psn, Aeth::ack(31, i as u32)));
    }
    a.fixture("rtt_cm.pcap")
}

/// The DCQCN fixture's senders (10.0.1.S → 10.0.1.S+10, QP 0xE00 + S), 500-byte frames on a
/// 10 µs rate window (× `scale` in the scaled copy), CNPs from the receiver to QP 0xF00 + S:
/// * 61 cuts to half 10 µs after its CNP at 100 µs, recovers in stages (15, then 20 frames a
///   window from 310 and 510 µs): cut 0.5, reaction 10 µs, recovery 410 µs;
/// * 62 keeps 20 frames a window through CNPs at 100, 200 and 300 µs: cnp_ignored;
/// * 63 has CE marks from 100 µs and never a CNP back: ce_without_cnp, not in `dcqcn`;
/// * 64 halves 10 µs after its CNP at 100 µs and is back only at 710 µs: recovery 610 µs,
///   slow_recovery (over 500 µs);
/// * 65 keeps its rate through a CNP every 10 µs from 100 to 300 µs (21): cnp_storm (20 of
///   them within half the 50 µs pacing interval of the previous) and cnp_ignored.
///
/// Each sender's first frame is CE-marked (it is watched from then on).
pub fn dcqcn_scaled(scale: u64, name: &'static str) -> Fixture {
    let window = 10 * US * scale;
    let mut a = At::default();
    // (sender, [(from µs, frames per window)], CNP times µs, CE from µs)
    type Plan = (u8, &'static [(u64, u64)], Vec<u64>, Option<u64>);
    let plans: [Plan; 5] = [
        (61, &[(0, 20), (110, 10), (310, 15), (510, 20)], vec![100], None),
        (62, &[(0, 20)], vec![100, 200, 300], None),
        (63, &[(0, 20)], vec![], Some(100)),
        (64, &[(0, 20), (110, 10), (710, 20)], vec![100], None),
        (65, &[(0, 20)], (0..21).map(|i| 100 + 10 * i).collect(), None),
    ];
    for (s, steps, cnps, ce_from) in plans {
        let qp = 0xE00 + s as u32;
        let mut psn = 0;
        for w in 0..120u64 {
            let at_us = w * 10;
            let n = steps.iter().rev().find(|(from, _)| *from <= at_us).map_or(0, |(_, n)| *n);
            for i in 0..n {
                // Half a spacing into the window: a replay's jitter keeps each in its window.
                let t = w * window + (2 * i + 1) * window / (2 * n);
                let mut d = Roce::v4(ip(s), ip(s + 10), sport(s), op::RDMA_WRITE_MIDDLE, qp, psn);
                d.payload_len = 500 - 62 - 4;
                let ce = psn == 0 || ce_from.is_some_and(|c| t >= c * US * scale);
                d.ecn = if ce { 3 } else { 2 };
                a.roce(t, &d);
                psn += 1;
            }
        }
        for c in cnps {
            let mut p = Roce::v4(ip(s + 10), ip(s), sport(s + 10), CNP, 0xF00 + s as u32, 0);
            p.dscp = 48;
            p.ecn = 0;
            a.roce(c * US * scale, &p);
        }
    }
    a.fixture(name)
}

pub fn dcqcn() -> Fixture {
    dcqcn_scaled(1, "dcqcn.pcap")
}

pub fn all() -> Vec<Fixture> {
    vec![
        gobackn(),
        reorder(),
        reads(),
        qp_mtus(),
        rnr(),
        psn_wrap(),
        rtt(),
        rtt_cm(),
        ecn_audit(),
        cnp_paced(),
        dcqcn(),
    ]
}
