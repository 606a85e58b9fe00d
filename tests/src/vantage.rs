//! Fixtures of vantage points: the same frames seen at two points (two labelled captures, or
//! ERSPAN copies from two switches at one collector), each built for answers the tests state
//! by hand (tests/integration/vantage.rs).

use analyzer_common::FrameClass;
use analyzer_common::opcode::op;
use analyzer_common::wire::ext::Aeth;

use crate::fixtures::{Fixture, Timed};
use crate::synth::{Encap, Roce, mirror_from};

const US: u64 = 1_000;

fn ip(d: u8) -> [u8; 4] {
    [10, 0, 2, d]
}

/// Flow X's data: 1 → 2, QP 0x700, ECT(0); Y's ACKs: 2 → 1, QP 0x100.
fn data(psn: u32, ce: bool) -> Roce {
    let mut r = Roce::v4(ip(1), ip(2), 0xC001, op::RDMA_WRITE_MIDDLE, 0x700, psn);
    r.payload_len = 1024;
    r.ecn = if ce { 3 } else { 2 };
    r.ident = 0x1000 + psn as u16;
    r
}

fn ack(psn: u32) -> Roce {
    let mut r = Roce::v4(ip(2), ip(1), 0xC002, op::ACKNOWLEDGE, 0x100, psn);
    r.ext.aeth = Aeth::ack(31, psn);
    r.ident = 0x2000 + psn as u16;
    r
}

/// Flow Z: 3 → 4, QP 0x900, seen at the leaf only (another path).
fn other(psn: u32) -> Roce {
    let mut r = Roce::v4(ip(3), ip(4), 0xC003, op::SEND_ONLY, 0x900, psn);
    r.payload_len = 256;
    r.ident = 0x3000 + psn as u16;
    r
}

/// Frames at their times at one point.
type Seen = Vec<(u64, Roce)>;

/// Where and when each point sees the frames; `spine_offset` shifts the spine's clock.
fn frames(spine_offset: i64) -> (Seen, Seen) {
    let spine_time = |t: u64| t.saturating_add_signed(spine_offset);
    let (mut leaf, mut spine) = (Vec::new(), Vec::new());
    // X: PSN i at 10 µs × i at the leaf, at the spine 3 µs + (i mod 5) × 100 ns later; 40 and 41
    // never reach the spine; 60..69 arrive CE-marked there. PSN 99 is resent at 1000 µs and
    // reaches the spine 3 µs later.
    for psn in 0..100u32 {
        let t = psn as u64 * 10 * US;
        leaf.push((t, data(psn, false)));
        if psn != 40 && psn != 41 {
            spine.push((spine_time(t + 3 * US + (psn as u64 % 5) * 100), data(psn, (60..70).contains(&psn))));
        }
    }
    leaf.push((1000 * US, data(99, false)));
    spine.push((spine_time(1003 * US), data(99, false)));
    // Y: ten ACKs seen at the spine first, at the leaf 2 µs later.
    for i in 0..10u32 {
        let t = i as u64 * 100 * US + 5 * US;
        spine.push((spine_time(t), ack(i * 10 + 9)));
        leaf.push((t + 2 * US, ack(i * 10 + 9)));
    }
    // Z: five SENDs at the leaf only.
    for psn in 0..5u32 {
        leaf.push((psn as u64 * 50 * US + 7 * US, other(psn)));
    }
    (leaf, spine)
}

fn timed(name: &'static str, frames: &[(u64, Roce)]) -> Fixture {
    let mut a = Timed::default();
    for (t, r) in frames {
        a.roce(*t, r);
    }
    a.fixture(name)
}

/// The leaf's capture (`leaf=vantage_leaf.pcap`).
pub fn leaf() -> Fixture {
    timed("vantage_leaf.pcap", &frames(0).0)
}

/// The spine's capture (`spine=vantage_spine.pcap`).
pub fn spine() -> Fixture {
    timed("vantage_spine.pcap", &frames(0).1)
}

/// The spine's capture with its clock 1 ms ahead (`--clock-offset spine=-1ms` corrects it).
pub fn spine_clock_ahead() -> Fixture {
    timed("vantage_spine_clock.pcap", &frames(1_000_000).1)
}

/// The spine's capture stopped after its first 10 % (frames before 100 µs: X's PSN 0–9, Y's
/// first ACK): the leaf's later frames of X and Y lay outside the span both captured.
pub fn spine_early() -> Fixture {
    let early: Vec<_> = frames(0).1.into_iter().filter(|(t, _)| *t < 100 * US).collect();
    timed("vantage_spine_early.pcap", &early)
}

/// Both captures as ERSPAN II copies at one collector: the leaf's from 192.0.2.1 (session 5),
/// the spine's from 192.0.2.2 (session 6), time-ordered in one file.
pub fn erspan_collector() -> Fixture {
    let (leaf, spine) = frames(0);
    let mut a = Timed::default();
    for (origin, session, list) in [([192, 0, 2, 1], 5, &leaf), ([192, 0, 2, 2], 6, &spine)] {
        for (t, r) in list {
            let copy = mirror_from(origin, session, Encap::ErspanII, &r.build(), None);
            a.push(*t, FrameClass::Roce, copy);
        }
    }
    a.fixture("vantage_erspan.pcap")
}

/// A switch with a known RED profile between two points: flow M (5 → 6, QP 0xA00, ECT(0)),
/// a frame every 1 µs at the leaf for 6000 µs; the queueing delay it meets rises from 0 to 30 µs
/// in 100 ns steps over 300 frames and falls back over the next 300, ten times; the spine sees
/// each frame 2 µs + its delay later. Between them the switch marks CE with probability 0 below
/// 2 µs of delay (Kmin: 25 KB at 100 Gbit/s), rising linearly to 0.2 just below 16 µs, and
/// every frame from 16 µs (Kmax: 200 KB) on; the marks fall where the running sum of the
/// probabilities passes a whole number (error diffusion, no randomness).
fn red_frames() -> (Seen, Seen) {
    let (mut leaf, mut spine) = (Vec::new(), Vec::new());
    let mut owed = 0.0;
    for i in 0..6000u32 {
        let step = (i % 600) as u64;
        let delay = if step <= 300 { step * 100 } else { (600 - step) * 100 };
        let p = match delay {
            d if d < 2 * US => 0.0,
            d if d < 16 * US => 0.2 * (d - 2 * US) as f64 / (14 * US) as f64,
            _ => 1.0,
        };
        owed += p;
        let marked = owed >= 1.0 - 1e-9;
        if marked {
            owed -= 1.0;
        }
        let mut r = Roce::v4([10, 0, 2, 5], [10, 0, 2, 6], 0xC005, op::RDMA_WRITE_MIDDLE, 0xA00, i);
        r.payload_len = 16;
        r.ecn = 2;
        r.ident = i as u16;
        let t = i as u64 * US;
        leaf.push((t, r.clone()));
        r.ecn = if marked { 3 } else { 2 };
        spine.push((t + 2 * US + delay, r));
    }
    spine.sort_by_key(|(t, _)| *t);
    (leaf, spine)
}

/// The leaf's side of the RED switch (`leaf=marking_leaf.pcap`).
pub fn red_leaf() -> Fixture {
    timed("marking_leaf.pcap", &red_frames().0)
}

/// The spine's side of the RED switch (`spine=marking_spine.pcap`).
pub fn red_spine() -> Fixture {
    timed("marking_spine.pcap", &red_frames().1)
}

pub fn all() -> Vec<Fixture> {
    vec![leaf(), spine(), spine_clock_ahead(), spine_early(), erspan_collector(), red_leaf(), red_spine()]
}

/// Two collectors for trajectory sampling (tests/integration/vantage.rs): flow X's `n` data
/// frames (1 → 2) pass the leaf, then the spine 3 µs + (PSN mod 5) × 100 ns later; PSNs ≡ 3
/// (mod 10) never reach the spine (10 % lost), PSNs ≡ 1 (mod 10) arrive CE-marked (1 in 9 of
/// those that arrive). Every 10th PSN is acknowledged (2 → 1): the spine sees the ACK, the leaf
/// 2 µs later. The spine's clock runs `spine_offset_ns` ahead.
pub fn trajectory_pair(n: u32, spine_offset_ns: u64) -> (Fixture, Fixture) {
    let (mut leaf, mut spine) = (Vec::new(), Vec::new());
    for psn in 0..n {
        let t = 1_000_000 + psn as u64 * 2 * US;
        let mut d = data(psn, false);
        d.ident = psn as u16;
        leaf.push((t, d.clone()));
        if psn % 10 != 3 {
            let mut s = data(psn, psn % 10 == 1);
            s.ident = psn as u16;
            spine.push((t + 3 * US + (psn as u64 % 5) * 100 + spine_offset_ns, s));
        }
        if psn % 10 == 9 {
            let mut a = ack(psn);
            a.ident = psn as u16;
            spine.push((t + 4 * US + spine_offset_ns, a.clone()));
            leaf.push((t + 6 * US, a));
        }
    }
    spine.sort_by_key(|f| f.0);
    leaf.sort_by_key(|f| f.0);
    (timed("trajectory_leaf.pcap", &leaf), timed("trajectory_spine.pcap", &spine))
}

/// [`trajectory_pair`] written into `dir`: per point (leaf, then spine) its `label=FILE` input
/// and the export directory to give its run.
pub fn trajectory_inputs(dir: &std::path::Path, n: u32, spine_offset_ns: u64) -> Vec<(String, std::path::PathBuf)> {
    let (leaf, spine) = trajectory_pair(n, spine_offset_ns);
    [("leaf", &leaf), ("spine", &spine)]
        .into_iter()
        .map(|(label, f)| {
            let pcap = dir.join(f.name);
            std::fs::write(&pcap, f.bytes()).unwrap();
            (format!("{label}={}", pcap.display()), dir.join(format!("{label}.export")))
        })
        .collect()
}
