//! Fixtures of the fabric analyses (incast, PFC pause time and storms, congestion trees,
//! deadlocks, ECMP), with the topology files they need. Each is built so that its answer can
//! be stated by hand in the tests.

use crate::synth::{Roce, Vlan, pause, pfc};
use analyzer_common::FrameClass;
use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::Reth;

use crate::fixtures::{Fixture, Timed as At};

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;

/// PFC on priority 3 with `quanta`.
fn pfc3(a: &mut At, ts: u64, mac: [u8; 6], quanta: u16) {
    pfc_on(a, ts, mac, 3, quanta);
}

fn pfc_on(a: &mut At, ts: u64, mac: [u8; 6], prio: u8, quanta: u16) {
    let mut q = [0u16; 8];
    q[prio as usize] = quanta;
    a.push(ts, FrameClass::Pfc, pfc(mac, 1 << prio, q));
}

/// A host's MAC as the frame builder derives it from its address (02:00:00:00:c:d).
pub fn host_mac(ip: [u8; 4]) -> [u8; 6] {
    [0x02, 0, 0, 0, ip[2], ip[3]]
}

/// A device port's MAC: 02:00:00:dd:00:pp.
pub fn port_mac(device: u8, port: u8) -> [u8; 6] {
    [0x02, 0, 0, device, 0, port]
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// A 1024-byte RDMA WRITE ONLY on priority 3 (VLAN 100): 1102-byte frames.
pub fn data(src: [u8; 4], dst: [u8; 4], sport: u16, qp: u32, psn: u32) -> Roce {
    let mut r = Roce::v4(src, dst, sport, op::RDMA_WRITE_ONLY, qp, psn);
    r.vlans = vec![Vlan::dot1q(3, 100)];
    r.payload_len = 1024;
    r.ext.reth = Reth { va: 0x1000, rkey: 1, dma_len: 1024 };
    r
}

/// Frame length of [`data`]: Ethernet 14 + VLAN 4 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 +
/// payload 1024 + ICRC 4.
pub const DATA_FRAME: u64 = 14 + 4 + 20 + 8 + 12 + 16 + 1024 + 4;

// ---------------------------------------------------------------------------------------------
// Incast

pub const INCAST_DST: [u8; 4] = [10, 0, 2, 100];
/// Start of each 16-to-1 burst.
pub const BURSTS: [u64; 3] = [0, MS, 2 * MS];
pub const INCAST_SWITCH: [u8; 6] = [0x02, 0, 0, 0x20, 0, 1];

/// Sixteen senders 10.0.2.1..16 write to 10.0.2.100 in three bursts 1 ms apart: sender k's
/// four packets at burst + k µs + j × 5 µs (j = 0..3); the last one is CE-marked and answered by
/// a CNP 5 µs later. During the second burst the switch sends two PFC frames. Background: three
/// senders to 10.0.2.101 every 10 µs for 3 ms (never four at once: no incast). `stretch`
/// multiplies every time (the live test replays a slowed copy that the replay pacing cannot
/// blur).
pub fn incast_scaled(stretch: u64, name: &'static str) -> Fixture {
    let mut a = At::default();
    for (b, &t0) in BURSTS.iter().enumerate() {
        for k in 0..16u8 {
            let src = [10, 0, 2, k + 1];
            for j in 0..4u64 {
                let t = t0 + k as u64 * US + j * 5 * US;
                let mut d = data(src, INCAST_DST, 0xC100 + k as u16, 0x500 + k as u32, (b as u32) * 4 + j as u32);
                if j == 3 {
                    d.ecn = 3;
                    let mut c = Roce::v4(INCAST_DST, src, 0xC200, CNP, 0x600 + k as u32, 0);
                    c.dscp = 48;
                    c.ecn = 0;
                    c.vlans = vec![Vlan::dot1q(6, 100)];
                    a.roce((t + 5 * US) * stretch, &c);
                }
                a.roce(t * stretch, &d);
            }
        }
        if b == 1 {
            pfc3(&mut a, (t0 + 10 * US) * stretch, INCAST_SWITCH, 1000);
            pfc3(&mut a, (t0 + 20 * US) * stretch, INCAST_SWITCH, 0);
        }
    }
    for i in 0..300u64 {
        let s = (i % 3) as u8;
        let psn = (i / 3) as u32;
        a.roce(i * 10 * US * stretch, &data([10, 0, 2, 50 + s], [10, 0, 2, 101], 0xC300 + s as u16, 0x700, psn));
    }
    a.fixture(name)
}

pub fn incast() -> Fixture {
    incast_scaled(1, "incast.pcap")
}

// ---------------------------------------------------------------------------------------------
// PFC cascade: leaf2 (congested toward h4) pauses spine1, spine1 pauses leaf1, leaf1 pauses
// its hosts h1, h2, h3. h1 and h2 send to h4 (contributors); h3 sends to h6 behind leaf3 (a
// victim of head-of-line blocking); h6 → h3 crosses nothing paused.

pub fn cascade_ip(h: u8) -> [u8; 4] {
    [10, 0, 3, h]
}

pub const LEAF1: u8 = 0x11;
pub const LEAF2: u8 = 0x12;
pub const LEAF3: u8 = 0x13;
pub const SPINE1: u8 = 0x21;

pub fn cascade_topology() -> String {
    let dev = |name: &str, id: u8, ports: &[u8]| {
        let p: Vec<String> = ports.iter().map(|p| format!("p{p} = \"{}\"", mac_text(port_mac(id, *p)))).collect();
        format!("[[device]]\nname = \"{name}\"\nports = {{ {} }}\n", p.join(", "))
    };
    let mut t = String::from("# Fixture topology: two tiers, three leaves, one spine.\n");
    t += &dev("leaf1", LEAF1, &[1, 2, 3, 9]);
    t += &dev("leaf2", LEAF2, &[1, 9]);
    t += &dev("leaf3", LEAF3, &[1, 9]);
    t += &dev("spine1", SPINE1, &[1, 2, 3]);
    for h in [1, 2, 3, 4, 6] {
        let ip = cascade_ip(h);
        t += &format!(
            "[[host]]\nname = \"h{h}\"\nmac = \"{}\"\nip = \"{}.{}.{}.{}\"\n",
            mac_text(host_mac(ip)),
            ip[0],
            ip[1],
            ip[2],
            ip[3]
        );
    }
    for (a, b) in [
        ("leaf1:p1", "h1"),
        ("leaf1:p2", "h2"),
        ("leaf1:p3", "h3"),
        ("leaf2:p1", "h4"),
        ("leaf3:p1", "h6"),
        ("leaf1:p9", "spine1:p1"),
        ("leaf2:p9", "spine1:p2"),
        ("leaf3:p9", "spine1:p3"),
    ] {
        t += &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\n");
    }
    t
}

/// Refreshes an XOFF (65535 quanta) every 200 µs from `from` while before `until`, then XON.
fn hold(a: &mut At, mac: [u8; 6], prio: u8, from: u64, until: u64, every: u64) {
    let mut t = from;
    while t < until {
        pfc_on(a, t, mac, prio, 0xFFFF);
        t += every;
    }
    pfc_on(a, until, mac, prio, 0);
}

pub fn cascade() -> Fixture {
    let mut a = At::default();
    let flows = [(1, 4), (2, 4), (3, 6), (6, 3)];
    for i in 0..50u64 {
        for (n, (s, d)) in flows.iter().enumerate() {
            let r = data(cascade_ip(*s), cascade_ip(*d), 0xC400 + n as u16, 0x800 + *d as u32, i as u32);
            a.roce(i * MS + n as u64 * US, &r);
        }
    }
    hold(&mut a, port_mac(LEAF2, 9), 3, MS, 3 * MS, 200 * US);
    hold(&mut a, port_mac(SPINE1, 1), 3, MS + 200 * US, 3 * MS, 200 * US);
    for p in 1..=3 {
        hold(&mut a, port_mac(LEAF1, p), 3, MS + 400 * US, 3 * MS, 200 * US);
    }
    a.fixture("pfc_cascade.pcap")
}

// ---------------------------------------------------------------------------------------------
// Storm: a host NIC refreshes XOFF every 300 µs for 150 ms among short pauses of a switch port
// and an 802.3x sender.

pub const STORM_NIC: [u8; 6] = [0x02, 0, 0, 0, 4, 7];
pub const SHORT_PAUSER: [u8; 6] = [0x02, 0, 0, 0x30, 0, 1];
pub const DOT3X_PAUSER: [u8; 6] = [0x02, 0, 0, 0x31, 0, 1];
pub const STORM_FRAMES: u64 = 500;

pub fn storm() -> Fixture {
    let mut a = At::default();
    for i in 0..STORM_FRAMES {
        pfc3(&mut a, i * 300 * US, STORM_NIC, 0xFFFF);
    }
    for i in 0..20u64 {
        pfc3(&mut a, 5 * MS + i * MS, SHORT_PAUSER, 1000);
    }
    for i in 0..4u64 {
        a.push(7 * MS + i * 10 * MS, FrameClass::Pause, pause(DOT3X_PAUSER, 100));
    }
    a.fixture("pfc_storm.pcap")
}

// ---------------------------------------------------------------------------------------------
// Deadlock: sw1 → sw2 → sw3 → sw1 pause each other on priority 3 from 1.0/1.1/1.2 ms to 30 ms
// (all three together for 28.8 ms: a deadlock); the same ring on priority 5 only 5 ms
// together (below --deadlock-min); a chain sw4 → sw5 → sw6 on priority 4 (no cycle).

pub fn ring_topology() -> String {
    let mut t = String::from("# Fixture topology: a ring of three switches and a chain of three.\n");
    for s in 1..=6u8 {
        t += &format!(
            "[[device]]\nname = \"sw{s}\"\nports = {{ a = \"{}\", b = \"{}\" }}\n",
            mac_text(port_mac(0x40 + s, 1)),
            mac_text(port_mac(0x40 + s, 2))
        );
    }
    // Port a of sw(n) faces port b of sw(n+1) in the ring, and along the chain.
    for (x, y) in [(1, 2), (2, 3), (3, 1), (4, 5), (5, 6)] {
        t += &format!("[[link]]\na = \"sw{x}:a\"\nb = \"sw{y}:b\"\n");
    }
    t
}

pub fn deadlock() -> Fixture {
    let mut a = At::default();
    for (i, s) in [1u8, 2, 3].into_iter().enumerate() {
        hold(&mut a, port_mac(0x40 + s, 1), 3, MS + i as u64 * 100 * US, 30 * MS, 200 * US);
        hold(&mut a, port_mac(0x40 + s, 1), 5, 40 * MS + i as u64 * 100 * US, 45 * MS + 200 * US, 200 * US);
    }
    for s in [4u8, 5] {
        hold(&mut a, port_mac(0x40 + s, 1), 4, MS, 30 * MS, 200 * US);
    }
    a.fixture("pfc_deadlock.pcap")
}

// ---------------------------------------------------------------------------------------------
// ECMP: three uplink captures. up1 carries 7 flows of 1000 frames' worth, up2 three, up3
// nothing; one flow moves from up1 to up2 halfway (seen on both).

pub fn uplink(n: u8) -> Fixture {
    let mut a = At::default();
    let name = match n {
        1 => "uplink1.pcap",
        2 => "uplink2.pcap",
        _ => "uplink3.pcap",
    };
    let flows: Vec<u16> = match n {
        1 => (0..7).collect(),
        2 => (7..10).collect(),
        _ => Vec::new(),
    };
    for f in &flows {
        for i in 0..10u64 {
            let d = data([10, 0, 5, 1], [10, 0, 6, 1], 0xD000 + f, 0x900, i as u32);
            a.roce(i * 10 * US + *f as u64, &d);
        }
    }
    // Flow 0 moves: 5 more packets on up2 (its bytes stay counted on up1 in proportion).
    if n == 2 {
        for i in 10..15u64 {
            a.roce(i * 10 * US, &data([10, 0, 5, 1], [10, 0, 6, 1], 0xD000, 0x900, i as u32));
        }
    }
    a.fixture(name)
}

/// 64 flows between two hosts, one per UDP source port 0xC000 + i (for the tier predictions).
pub fn ecmp_flows() -> Fixture {
    let mut a = At::default();
    for i in 0..64u16 {
        a.roce(i as u64 * US, &data([10, 0, 7, 1], [10, 0, 8, 1], 0xC000 + i, 0xA00, 0));
    }
    a.fixture("ecmp_flows.pcap")
}

pub fn all() -> Vec<Fixture> {
    vec![incast(), cascade(), storm(), deadlock(), uplink(1), uplink(2), uplink(3), ecmp_flows(), via_spine2()]
}

/// Topology files written beside the captures.
pub fn topologies() -> Vec<(&'static str, String)> {
    vec![
        ("cascade.toml", cascade_topology()),
        ("ring.toml", ring_topology()),
        ("two_spines.toml", two_spines_topology(false)),
        ("two_spines_vantage.toml", two_spines_topology(true)),
        ("ecn_lead_on_path.toml", crate::tuning::ecn_lead_topology(true)),
        ("ecn_lead_off_path.toml", crate::tuning::ecn_lead_topology(false)),
    ]
}

// ---------------------------------------------------------------------------------------------
// A vantage point that shows a flow's path: two leaves joined by two spines; the capture
// labelled s2 mirrors the link leaf1 — spine2, where spine2 pauses leaf1.

pub const TS_LEAF1: u8 = 0x51;
pub const TS_LEAF2: u8 = 0x52;
pub const TS_SPINE1: u8 = 0x61;
pub const TS_SPINE2: u8 = 0x62;

pub fn two_spines_ip(h: u8) -> [u8; 4] {
    [10, 0, 10, h]
}

/// Shortest paths go through spine1 (neighbours in name order); with `vantage`, a
/// `[[vantage]]` ties the label s2 to the link spine2:p1 — leaf1:p3.
pub fn two_spines_topology(vantage: bool) -> String {
    let dev = |name: &str, id: u8, ports: &[u8]| {
        let p: Vec<String> = ports.iter().map(|p| format!("p{p} = \"{}\"", mac_text(port_mac(id, *p)))).collect();
        format!("[[device]]\nname = \"{name}\"\nports = {{ {} }}\n", p.join(", "))
    };
    let mut t = String::from("# Fixture topology: two leaves, two spines.\n");
    t += &dev("leaf1", TS_LEAF1, &[1, 2, 3]);
    t += &dev("leaf2", TS_LEAF2, &[1, 2, 3]);
    t += &dev("spine1", TS_SPINE1, &[1, 2]);
    t += &dev("spine2", TS_SPINE2, &[1, 2]);
    for h in [1, 2] {
        let ip = two_spines_ip(h);
        t += &format!("[[host]]\nname = \"h{h}\"\nmac = \"{}\"\nip = \"10.0.10.{h}\"\n", mac_text(host_mac(ip)));
    }
    for (a, b) in [
        ("leaf1:p1", "h1"),
        ("leaf2:p1", "h2"),
        ("leaf1:p2", "spine1:p1"),
        ("leaf2:p2", "spine1:p2"),
        ("leaf1:p3", "spine2:p1"),
        ("leaf2:p3", "spine2:p2"),
    ] {
        t += &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\n");
    }
    if vantage {
        t += "[[vantage]]\nlabel = \"s2\"\nlink = \"spine2:p1\"\n";
    }
    t
}

/// h1 → h2 (QP 0xB00) every 100 µs for 10 ms; spine2:p1 pauses leaf1 on priority 3 from 2 to
/// 6 ms.
pub fn via_spine2() -> Fixture {
    let mut a = At::default();
    for i in 0..100u64 {
        a.roce(i * 100 * US, &data(two_spines_ip(1), two_spines_ip(2), 0xC500, 0xB00, i as u32));
    }
    hold(&mut a, port_mac(TS_SPINE2, 1), 3, 2 * MS, 6 * MS, 200 * US);
    a.fixture("via_spine2.pcap")
}
