//! Fixtures of the tuning rules as checks (capture loss told apart from network loss, the first
//! CNP judged), each built to give answers the tests state by hand (tests/integration/tuning.rs).
//! Hosts are 10.0.3.4x; a requester `s` sends to QP `0x100 + s`, its responder answers to QP
//! `0x200 + s` (the helpers of [`crate::messages`]).

use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::{Aeth, nak_code};

use crate::fixtures::{Fixture, Timed};
use crate::messages::{US, resp, write};
use crate::synth::Roce;

/// A WRITE ONLY of 1024 B.
fn w(s: u8, d: u8, opcode: u8, psn: u32, ack_req: bool) -> Roce {
    write(s, d, opcode, psn, 1024, 1024, ack_req)
}

fn ack(s: u8, d: u8, psn: u32) -> Roce {
    resp(s, d, op::ACKNOWLEDGE, psn, Aeth::ack(31, 1))
}

/// Capture loss and network loss, 1 ms apart:
/// * 41 → 42: WRITE ONLY PSN 0–19 one a µs, AckReq on every fifth; this capture lacks PSN 3, 7
///   and 8; the ACKs of 4, 9, 14 and 19 cover them, no NAK, no retransmission: 3 frames the
///   capture missed, no loss.
/// * 43 → 44: PSN 0–9 without 5; a PSN-sequence NAK of 5, go-back-N from 5, ACK of 9: loss
///   before this point (the gap was retransmitted), go_back_n.
/// * 45 → 46: PSN 0–9 without 4; the last ACK is of 3: a gap no ACK covers, psn_gap.
pub fn capture_loss() -> Fixture {
    let mut a = Timed::default();
    for psn in (0..20u32).filter(|p| ![3, 7, 8].contains(p)) {
        a.roce(psn as u64 * US, &w(41, 42, op::RDMA_WRITE_ONLY, psn, psn % 5 == 4));
    }
    for psn in [4, 9, 14, 19u32] {
        a.roce(psn as u64 * US + 3 * US, &ack(41, 42, psn));
    }
    let t0 = 1_000 * US;
    for psn in (0..10u32).filter(|p| *p != 5) {
        a.roce(t0 + psn as u64 * US, &w(43, 44, op::RDMA_WRITE_ONLY, psn, psn == 9));
    }
    a.roce(t0 + 7 * US, &resp(43, 44, op::ACKNOWLEDGE, 5, Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 1)));
    for psn in 5..10u32 {
        a.roce(t0 + (20 + psn) as u64 * US, &w(43, 44, op::RDMA_WRITE_ONLY, psn, psn == 9));
    }
    a.roce(t0 + 35 * US, &ack(43, 44, 9));
    let t1 = 2_000 * US;
    for psn in (0..10u32).filter(|p| *p != 4) {
        a.roce(t1 + psn as u64 * US, &w(45, 46, op::RDMA_WRITE_ONLY, psn, psn == 3 || psn == 9));
    }
    a.roce(t1 + 5 * US, &ack(45, 46, 3));
    a.fixture("capture_loss.pcap")
}

/// Flows whose first CNP comes into steady traffic, no CE mark seen here (the switch marked
/// after this point), each RC WRITE MIDDLE of 1000 B payload one a µs, ACKed every 10 (AckReq)
/// so that the CNPs to the requester's QP are paired with the flow:
/// * 47 → 48: a CNP at 300 µs; from 310 µs one frame every 2 µs (halved) until 600 µs: one CNP,
///   reacted.
/// * 49 → 50 (1 ms later): CNPs at 300, 400 and 500 µs, the rate never changes until 1600 µs:
///   three CNPs ignored, `cnp_ignored`.
pub fn first_cnp() -> Fixture {
    first_cnp_scaled(1, "first_cnp.pcap")
}

/// [`first_cnp`] with its times `scale` times longer, for a replay that keeps the capture's
/// pacing (with `--rate-window`, `--dcqcn-horizon`, `--dcqcn-slow-recovery` and
/// `--cnp-interval` scaled too, the answers are the same).
pub fn first_cnp_scaled(scale: u64, name: &'static str) -> Fixture {
    let us = US * scale;
    let mut a = Timed::default();
    let send = |a: &mut Timed, base: u64, s: u8, times: &[u64]| {
        for (i, t) in times.iter().enumerate() {
            let mut r = write(s, s + 1, op::RDMA_WRITE_MIDDLE, i as u32, 0, 1000, i % 10 == 9);
            r.ext.reth = Default::default();
            a.roce(base + t * us, &r);
            if i % 10 == 9 {
                a.roce(base + t * us + 2 * us, &resp(s, s + 1, op::ACKNOWLEDGE, i as u32, Aeth::ack(31, 1)));
            }
        }
    };
    let cnp = |s: u8| {
        let mut c = Roce::v4(
            crate::messages::ip(s + 1),
            crate::messages::ip(s),
            0xC000 + s as u16 + 1,
            CNP,
            0x200 + s as u32,
            0,
        );
        c.dscp = 48;
        c.payload_len = 16;
        c
    };
    let halved: Vec<u64> = (0..310).chain((310..600).step_by(2)).collect();
    send(&mut a, 0, 47, &halved);
    a.roce(300 * us, &cnp(47));
    let base = 1_000 * us;
    let steady: Vec<u64> = (0..1600).collect();
    send(&mut a, base, 49, &steady);
    for t in [300, 400, 500] {
        a.roce(base + t * us, &cnp(49));
    }
    a.fixture(name)
}

/// ECN before PFC, at 100 Gbit/s (a quantum is 5.12 ns):
/// * 51 → 52 on VLAN priority 3: 1000 WRITE MIDDLE frames, one a µs, CE-marked at 150 and
///   370 µs; a switch port (MAC 02:00:00:00:aa:01) sends XOFF of 1000 quanta (5.12 µs) for
///   priority 3 at 200, 400 and 600 µs: 2 of 3 onsets had marks in the 100 µs before (leads 50
///   and 30 µs, median 30 µs); 3 pause frames per 1000 data frames (3000 per million).
/// * 53 → 54 on priority 5: 200 frames one every 5 µs, none marked; 02:00:00:00:bb:01 pauses
///   priority 5 at 300 and 700 µs: 0 of 2 onsets had marks (`pfc_before_ecn`); 2 per 200
///   (10 000 per million).
pub fn ecn_lead() -> Fixture {
    ecn_lead_scaled(1, "ecn_lead.pcap")
}

/// A switch `sw` for [`ecn_lead`]'s hosts h51–h54 (10.0.3.51–54), one port each. `on_path`:
/// the port that pauses priority 3 (…aa:01) faces h51, the sender of the marked flow 51 → 52,
/// and the one pausing priority 5 (…bb:01) faces h53: the same answers as without a topology.
/// Else they are swapped: …aa:01 pauses h53, whose flow carries no mark (0 of 3 onsets
/// preceded), and …bb:01 pauses h51, whose marks are of priority 3 (0 of 2).
pub fn ecn_lead_topology(on_path: bool) -> String {
    let (aa, bb) = if on_path { (51, 53) } else { (53, 51) };
    let mut t =
        String::from("# Fixture topology: one switch, the four hosts of ecn_lead.pcap.\n[[device]]\nname = \"sw\"\n");
    t += "ports = { aa = \"02:00:00:00:aa:01\", bb = \"02:00:00:00:bb:01\", c = \"02:00:00:00:cc:03\", d = \"02:00:00:00:cc:04\" }\n";
    for h in 51..=54u8 {
        t += &format!("[[host]]\nname = \"h{h}\"\nmac = \"02:00:00:00:0b:{h:02x}\"\nip = \"10.0.3.{h}\"\n");
    }
    for (port, h) in [("aa", aa), ("bb", bb), ("c", 52), ("d", 54)] {
        t += &format!("[[link]]\na = \"sw:{port}\"\nb = \"h{h}\"\n");
    }
    t
}

/// [`ecn_lead`] with its times `scale` times longer (pauses still of 1000 quanta), for a replay
/// at its own pacing: a frame a µs is more than a replay keeps pace with, a frame a ms is not
/// (with `--ecn-lead` scaled too, the answers are the same).
pub fn ecn_lead_scaled(scale: u64, name: &'static str) -> Fixture {
    use analyzer_common::FrameClass;
    let us = US * scale;
    let mut a = Timed::default();
    let frame = |s: u8, psn: u32, pcp: u8, ce: bool| {
        let mut r = write(s, s + 1, op::RDMA_WRITE_MIDDLE, psn, 0, 1000, false);
        r.ext.reth = Default::default();
        r.vlans = vec![crate::synth::Vlan::dot1q(pcp, 100)];
        if ce {
            r.ecn = 3;
        }
        r
    };
    for i in 0..1000u32 {
        a.roce(i as u64 * us, &frame(51, i, 3, i == 150 || i == 370));
    }
    for i in 0..200u32 {
        a.roce(i as u64 * 5 * us, &frame(53, i, 5, false));
    }
    let xoff = |mac_last: u8, prio: usize| {
        let mut q = [0u16; 8];
        q[prio] = 1000;
        crate::synth::pfc([0x02, 0, 0, 0, mac_last, 1], 1 << prio, q)
    };
    for t in [200, 400, 600] {
        a.push(t * us + 500 * scale, FrameClass::Pfc, xoff(0xaa, 3));
    }
    for t in [300, 700] {
        a.push(t * us + 500 * scale, FrameClass::Pfc, xoff(0xbb, 5));
    }
    a.fixture(name)
}

/// Packet spraying over four uplinks, each captured at its far end (`spray_u0.pcap` …
/// `spray_u3.pcap`, labels u0–u3; `spray.pcap` holds them all as one capture). WRITE ONLY of
/// 1024 B, one a µs; a request of PSN p takes uplink p mod 4; ACKs and NAKs come back on u0.
/// * 61 → 62 (sprayed, the receiver places out of order): PSN 0–39; uplink 3 is 1.5 µs slower,
///   so PSN 3, 7, …, 35 arrive after the next one (9 late, displacement 1; 39 is the last and
///   comes in order); AckReq on every eighth, ACKed 1 µs after it arrived. No NAK.
/// * 63 → 64 (1 ms later; sprayed, the receiver does not place out of order): PSN 0–7, uplink 3
///   2.5 µs slower: PSN 3 arrives at 5.5 µs after 4 and 5 (late, displacement 2; 7 at 9.5 µs is
///   in order); the receiver NAKs PSN 3 on seeing 4 (the NAK passes u0 at 6 µs), and the
///   sender goes back: 3–7 again at 10–14 µs on u0, the ACK of 7 at 15 µs. 13 requests, 1 NAK.
/// * 65 → 66 (2 ms later; hashed per flow): PSN 0–9 on u1 only, ACK of 9 at 11 µs.
///
/// Each frame's IPv4 identification is its own (the senders count it up, as NICs do): a resend
/// is not a copy of its first transmission seen at another uplink.
///
/// By hand: 3 request flows of 63 requests, 2 sprayed (mode mixed), 10 reordered (density
/// {1: 9, 2: 1}: p50 1, max 2); `spraying_without_ooo` names 63 → 64 only.
fn spray_frames() -> Vec<(u64, u8, Roce)> {
    let mut out = Vec::new();
    let w = |s: u8, psn: u32, ack_req: bool| write(s, s + 1, op::RDMA_WRITE_ONLY, psn, 1024, 1024, ack_req);
    for psn in 0..40u32 {
        let arrival = psn as u64 * US + if psn % 4 == 3 { 1_500 } else { 0 };
        out.push((arrival, (psn % 4) as u8, w(61, psn, psn % 8 == 7)));
        if psn % 8 == 7 {
            out.push((arrival + US, 0, ack(61, 62, psn)));
        }
    }
    let base = 1_000 * US;
    for psn in 0..8u32 {
        let arrival = base + psn as u64 * US + if psn % 4 == 3 { 2_500 } else { 0 };
        out.push((arrival, (psn % 4) as u8, w(63, psn, psn == 7)));
    }
    out.push((base + 6 * US, 0, resp(63, 64, op::ACKNOWLEDGE, 3, Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 1))));
    for psn in 3..8u32 {
        out.push((base + (7 + psn) as u64 * US, 0, w(63, psn, psn == 7)));
    }
    out.push((base + 15 * US, 0, ack(63, 64, 7)));
    let base = 2_000 * US;
    for psn in 0..10u32 {
        out.push((base + psn as u64 * US, 1, w(65, psn, psn == 9)));
    }
    out.push((base + 11 * US, 0, ack(65, 66, 9)));
    for (i, (_, _, r)) in out.iter_mut().enumerate() {
        r.ident = 0x4000 + i as u16;
    }
    out
}

/// What uplink `u` saw of [`spray_frames`] (`u` = None: all of them, one capture).
fn spray_at(u: Option<u8>, name: &'static str) -> Fixture {
    let mut a = Timed::default();
    for (t, at, r) in spray_frames() {
        if u.is_none_or(|u| u == at) {
            a.roce(t, &r);
        }
    }
    a.fixture(name)
}

pub fn spray() -> Vec<Fixture> {
    vec![
        spray_at(None, "spray.pcap"),
        spray_at(Some(0), "spray_u0.pcap"),
        spray_at(Some(1), "spray_u1.pcap"),
        spray_at(Some(2), "spray_u2.pcap"),
        spray_at(Some(3), "spray_u3.pcap"),
    ]
}

pub fn all() -> Vec<Fixture> {
    let mut v = vec![capture_loss(), first_cnp(), ecn_lead()];
    v.extend(spray());
    v
}
