//! The fixture captures. Every frame is built with `crate::synth` and carries the class it
//! was built to be, so the tests can check the analyzer's classes against the generator's
//! intent (and tshark checks the decoded fields independently).

use std::path::{Path, PathBuf};

use crate::synth::pcap::{DataLink, NgInterface, PcapOptions, Record, write_pcap, write_pcapng};
use crate::synth::scenario::{ScenarioOptions, cluster};
use crate::synth::{Encap, IpAddrs, Roce, Vlan, ethernet, mirror, pause, pfc, udp_ipv4};
use analyzer_common::FrameClass;
use analyzer_common::opcode::{self, CNP, op};
use analyzer_common::wire::ext::{Aeth, AtomicEth, Deth, Reth, nak_code};

/// 2026-11-29T00:00:00Z
pub const T0: u64 = 1_795_910_400_000_000_000;

/// One frame and the class it was built to be.
#[derive(Debug, Clone)]
pub struct Frame {
    pub record: Record,
    pub class: FrameClass,
}

#[derive(Debug, Clone)]
pub enum Format {
    Pcap(PcapOptions),
    PcapNg(Vec<NgInterface>),
}

/// A capture fixture.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub name: &'static str,
    pub format: Format,
    pub frames: Vec<Frame>,
}

impl Fixture {
    pub fn bytes(&self) -> Vec<u8> {
        let recs: Vec<Record> = self.frames.iter().map(|f| f.record.clone()).collect();
        match &self.format {
            Format::Pcap(o) => write_pcap(Vec::new(), *o, &recs).expect("pcap in memory"),
            Format::PcapNg(i) => write_pcapng(Vec::new(), i, &recs).expect("pcapng in memory"),
        }
    }
    /// Expected frames per class.
    /// The frames as they go on the wire, written to `dir`: a replayer sends the captured
    /// bytes, so a record cut by the snap length becomes a short frame (a live report is
    /// compared with the offline report of this capture, identical to the fixture when
    /// nothing was cut).
    pub fn as_sent(&self, dir: &Path) -> PathBuf {
        let recs: Vec<_> = self
            .frames
            .iter()
            .map(|fr| {
                let mut r = fr.record.clone();
                r.orig_len = r.data.len() as u32;
                r
            })
            .collect();
        let p = dir.join(format!("{}.sent.pcap", self.name));
        let bytes = write_pcap(Vec::new(), PcapOptions { nanosecond: true, ..Default::default() }, &recs)
            .expect("writing to memory");
        std::fs::write(&p, bytes).expect("writing the sent capture");
        p
    }

    pub fn class_counts(&self) -> [u64; FrameClass::COUNT] {
        let mut c = [0; FrameClass::COUNT];
        for f in &self.frames {
            c[f.class as usize] += 1;
        }
        c
    }
}

/// Frames at explicit times after [`T0`], sorted by time into a nanosecond pcap fixture.
#[derive(Default)]
pub struct Timed {
    pub frames: Vec<Frame>,
}

impl Timed {
    pub fn push(&mut self, ts: u64, class: FrameClass, data: Vec<u8>) {
        self.frames.push(Frame { record: Record::new(T0 + ts, data), class });
    }
    /// A RoCE frame (a CNP when the opcode says so).
    pub fn roce(&mut self, ts: u64, r: &Roce) {
        let class = if r.bth.opcode == CNP { FrameClass::Cnp } else { FrameClass::Roce };
        self.push(ts, class, r.build());
    }
    pub fn fixture(mut self, name: &'static str) -> Fixture {
        self.frames.sort_by_key(|f| f.record.ts_ns);
        Fixture {
            name,
            format: Format::Pcap(PcapOptions { nanosecond: true, ..Default::default() }),
            frames: self.frames,
        }
    }
}

/// One decoded record of a capture file.
#[derive(Debug, Clone, Copy)]
pub struct Decoded {
    pub summary: analyzer_common::PacketSummary,
    pub ts_ns: u64,
    pub orig_len: u32,
}

/// Reads a capture through the analyzer's reader and frame path, record by record.
pub fn decode_file(path: &Path) -> Vec<Decoded> {
    let mut v = Vec::new();
    analyzer::capture::pcap::read_file(
        path,
        |r| {
            let mut summary = analyzer_common::PacketSummary::zeroed();
            analyzer::frames::decode(r.link, r.data, r.orig_len, &mut summary);
            v.push(Decoded { summary, ts_ns: r.ts_ns, orig_len: r.orig_len });
        },
        |_| {},
    )
    .unwrap_or_else(|e| panic!("{e}"));
    v
}

/// A malformed input file and the error it must produce.
#[derive(Debug, Clone)]
pub struct BadInput {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    /// Substrings the error message must contain (besides the file name).
    pub expect: &'static [&'static str],
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

struct B {
    frames: Vec<Frame>,
    t: u64,
}

impl B {
    fn new() -> Self {
        B { frames: Vec::new(), t: T0 }
    }
    fn add(&mut self, class: FrameClass, data: Vec<u8>) -> &mut Record {
        self.t += 1_000;
        self.frames.push(Frame { record: Record::new(self.t, data), class });
        &mut self.frames.last_mut().expect("just pushed").record
    }
}

fn ip4(d: u8) -> [u8; 4] {
    [10, 0, 0, d]
}

fn ip6(d: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[1] = 0x00;
    a[15] = d;
    a
}

/// A RoCE v2 packet with plausible values in every extended header its opcode carries.
pub fn full(opcode: u8, psn: u32) -> Roce {
    let mut r = Roce::v4(ip4(1), ip4(2), 0xC000 | opcode as u16, opcode, 0x100 + opcode as u32, psn);
    r.bth.ack_req = psn % 2 == 1;
    r.bth.se = opcode.is_multiple_of(3);
    r.ext.reth = Reth {
        va: 0x7f00_dead_0000 + opcode as u64,
        rkey: 0xabc0 + opcode as u32,
        dma_len: 4096 * (1 + opcode as u32 % 5),
    };
    r.ext.aeth = match opcode % 4 {
        0 => Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 17),
        1 => Aeth::rnr_nak(12, 18),
        _ => Aeth::ack(31, 19),
    };
    r.ext.atomic = AtomicEth { va: 0x1000, rkey: 0x55, swap_add: 5, compare: 6 };
    r.ext.atomic_ack = 0x1122;
    r.ext.immdt = 0xfeed_0000 + opcode as u32;
    r.ext.ieth = 0xbeef;
    r.ext.deth = Deth { qkey: 0x1111_1111, src_qp: 0x33 };
    r.ext.rdeth_ee = 0x44;
    r.ext.xrc_srq = 0x66;
    r.payload_len = if opcode::is_data(opcode) { 256 + opcode as usize } else { 0 };
    r
}

/// Every opcode the IBTA defines for RC, UC, RD, UD and XRC, the CNP, and unknown ones.
fn opcodes() -> Fixture {
    let mut b = B::new();
    let mut psn = 0xFF_FFF0;
    for opc in 0..=255u8 {
        if opcode::is_defined(opc) || matches!(opc, 0x15 | 0x1E | 0xC0 | 0xFF) {
            let class = if opc == CNP { FrameClass::Cnp } else { FrameClass::Roce };
            b.add(class, full(opc, psn).build());
            psn = (psn + 1) & 0xFF_FFFF;
        }
    }
    Fixture { name: "opcodes.pcap", format: Format::Pcap(PcapOptions::default()), frames: b.frames }
}

fn pfc_frames() -> Fixture {
    let mut b = B::new();
    let sw = [0x02, 0, 0, 0, 0x07, 0xd1];
    b.add(FrameClass::Pfc, pfc(sw, 1 << 3, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]));
    b.add(FrameClass::Pfc, pfc(sw, 1 << 3, [0; 8]));
    b.add(FrameClass::Pfc, pfc(sw, 0b1000_1001, [0x100, 0, 0, 0x200, 0, 0, 0, 0x300]));
    b.add(FrameClass::Pfc, pfc([0x02, 0, 0, 0, 0x03, 0xe9], 0xFF, [1, 2, 3, 4, 5, 6, 7, 8]));
    b.add(FrameClass::Pause, pause([0x02, 0, 0, 0, 0x03, 0xea], 0x1000));
    b.add(FrameClass::Pause, pause([0x02, 0, 0, 0, 0x03, 0xea], 0));
    // An unknown MAC control opcode is not PFC.
    let mut gate = pause([0x02, 0, 0, 0, 0x03, 0xeb], 1);
    gate[14..16].copy_from_slice(&0x0002u16.to_be_bytes());
    b.add(FrameClass::NonRoce, gate);
    Fixture { name: "pfc.pcap", format: Format::Pcap(PcapOptions::default()), frames: b.frames }
}

fn vlans() -> Fixture {
    let mut b = B::new();
    let mut r = full(op::RDMA_WRITE_ONLY, 1);
    r.vlans = vec![Vlan::dot1q(3, 100)];
    b.add(FrameClass::Roce, r.build());
    r.vlans = vec![Vlan::qinq(5, 200), Vlan::dot1q(3, 100)];
    b.add(FrameClass::Roce, r.build());
    let mut c = full(CNP, 0);
    c.vlans = vec![Vlan::dot1q(6, 101)];
    b.add(FrameClass::Cnp, c.build());
    let mut p = pfc([2, 0, 0, 0, 7, 1], 8, [0, 0, 0, 7, 0, 0, 0, 0]);
    p.splice(12..12, [0x81, 0x00, 0x70, 0x64]); // PFC inside a VLAN tag (PCP 3, VID 100)
    b.add(FrameClass::Pfc, p);
    r.vlans = vec![Vlan::qinq(1, 1), Vlan::dot1q(2, 2), Vlan::dot1q(3, 3)];
    b.add(FrameClass::TooManyVlanTags, r.build());
    // Microsecond timestamps, big-endian headers (the other byte order and resolutions are in
    // nanosecond_be.pcap and the little-endian fixtures).
    Fixture {
        name: "vlan.pcap",
        format: Format::Pcap(PcapOptions { big_endian: true, ..Default::default() }),
        frames: b.frames,
    }
}

fn ipv6() -> Fixture {
    let mut b = B::new();
    for (i, opc) in
        [op::SEND_ONLY, op::RDMA_WRITE_FIRST, op::ACKNOWLEDGE, CNP, op::RDMA_READ_REQUEST].into_iter().enumerate()
    {
        let mut r = full(opc, i as u32);
        r.ip = IpAddrs::V6(ip6(1), ip6(2));
        r.dscp = 26;
        r.ecn = i as u8 % 4;
        b.add(if opc == CNP { FrameClass::Cnp } else { FrameClass::Roce }, r.build());
    }
    // An extension header of `bytes` (its own next header first) inserted after the IPv6
    // header, which then names it with `next`.
    let with_ext = |mut f: Vec<u8>, next: u8, ext: &[u8]| {
        f[14 + 6] = next;
        let plen = u16::from_be_bytes([f[18], f[19]]) + ext.len() as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f.splice(54..54, ext.iter().copied());
        f
    };
    let v6 = |opc: u8, psn: u32| {
        let mut r = full(opc, psn);
        r.ip = IpAddrs::V6(ip6(1), ip6(2));
        r.build()
    };
    // A hop-by-hop options header (PadN) before UDP: followed, the RoCE frame is analysed.
    b.add(FrameClass::Roce, with_ext(v6(op::SEND_ONLY, 9), 0, &[17, 0, 1, 4, 0, 0, 0, 0]));
    // MLD, as in almost every Linux capture: hop-by-hop (router alert) then ICMPv6.
    let mut mld = ethernet([2, 0, 0, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 0x16], &[], 0x86DD, &[0u8; 40]);
    mld[14] = 0x60;
    mld[14 + 7] = 1;
    mld[14 + 8..14 + 24].copy_from_slice(&ip6(1));
    mld[14 + 24..14 + 40].copy_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16]);
    mld.extend_from_slice(&[143, 0, 0, 0, 0, 0, 0, 0]); // MLDv2 report, no records
    mld[18..20].copy_from_slice(&8u16.to_be_bytes());
    b.add(FrameClass::NonRoce, with_ext(mld, 0, &[58, 0, 5, 2, 0, 0, 1, 0]));
    // A routing header before UDP: not followed, counted apart.
    b.add(FrameClass::UnsupportedIpv6Ext, with_ext(v6(op::SEND_ONLY, 10), 43, &[17, 0, 0, 0, 0, 0, 0, 0]));
    Fixture {
        name: "ipv6.pcap",
        format: Format::Pcap(PcapOptions { nanosecond: true, ..Default::default() }),
        frames: b.frames,
    }
}

fn ipv4_options() -> Fixture {
    let mut b = B::new();
    for opts in [4u8, 8, 40] {
        let mut r = full(op::RDMA_WRITE_ONLY_WITH_IMMEDIATE, opts as u32);
        r.ip_options = opts;
        b.add(FrameClass::Roce, r.build());
    }
    Fixture { name: "ipv4_options.pcap", format: Format::Pcap(PcapOptions::default()), frames: b.frames }
}

fn erspan() -> Fixture {
    let mut b = B::new();
    let inner = |opc: u8, psn: u32| {
        let mut r = full(opc, psn);
        r.vlans = vec![Vlan::dot1q(3, 100)];
        r.build()
    };
    b.add(FrameClass::Roce, mirror(Encap::ErspanII, &inner(op::RDMA_WRITE_FIRST, 1), None));
    b.add(FrameClass::Roce, mirror(Encap::ErspanIII(false), &inner(op::RDMA_WRITE_MIDDLE, 2), None));
    b.add(FrameClass::Roce, mirror(Encap::ErspanIII(true), &inner(op::ACKNOWLEDGE, 3), None));
    b.add(FrameClass::Cnp, mirror(Encap::ErspanI, &inner(CNP, 4), None));
    b.add(FrameClass::Roce, mirror(Encap::GreTeb, &inner(op::SEND_ONLY, 5), None));
    b.add(FrameClass::Pfc, mirror(Encap::ErspanII, &pfc([2, 0, 0, 0, 7, 2], 8, [0, 0, 0, 99, 0, 0, 0, 0]), None));
    // Mirror sessions that truncate the copy to 96 bytes of the inner frame.
    let long = inner(op::RDMA_WRITE_ONLY, 6);
    b.add(FrameClass::Roce, mirror(Encap::ErspanII, &long, Some(96)));
    b.add(FrameClass::Roce, mirror(Encap::ErspanIII(false), &long, Some(96)));
    // A GRE-in-GRE inner frame is not followed.
    let nested = mirror(Encap::GreTeb, &inner(op::SEND_ONLY, 7), None);
    b.add(FrameClass::UnsupportedEncap, mirror(Encap::ErspanII, &nested, None));
    Fixture { name: "erspan.pcap", format: Format::Pcap(PcapOptions::default()), frames: b.frames }
}

/// Frames cut by a 128-byte and a 64-byte snap length.
fn snaplen() -> Fixture {
    let mut b = B::new();
    for (i, opc) in [op::RDMA_WRITE_FIRST, op::RDMA_WRITE_MIDDLE, op::RDMA_READ_RESPONSE_FIRST, op::ACKNOWLEDGE]
        .into_iter()
        .enumerate()
    {
        let f = full(opc, i as u32).payload(4096).build();
        b.add(FrameClass::Roce, f).data.truncate(128);
    }
    // 64 bytes: BTH present (ends at 54), RETH (needs 70) cut.
    let f = full(op::RDMA_WRITE_ONLY, 9).payload(4096).build();
    b.add(FrameClass::Roce, f).data.truncate(64);
    // 50 bytes: the BTH itself is cut.
    let f = full(op::RDMA_WRITE_ONLY, 10).payload(4096).build();
    b.add(FrameClass::TruncatedHeader, f).data.truncate(50);
    Fixture {
        name: "snaplen.pcap",
        format: Format::Pcap(PcapOptions { snaplen: 128, ..Default::default() }),
        frames: b.frames,
    }
}

fn malformed() -> Fixture {
    let mut b = B::new();
    let good = || full(op::SEND_ONLY, 1).build();
    // 14 bytes of Ethernet and 10 of IPv4: the IP header is cut.
    let f = good();
    b.add(FrameClass::TruncatedHeader, f[..24].to_vec());
    let mut f = good();
    f[14] = 0x44; // IHL 4
    b.add(FrameClass::BadIpHeader, f);
    let mut f = good();
    // IP total length beyond the frame: a copy cut short (as a truncating mirror session sends
    // them, with no original length), classified as usual and counted at 14 + 2000 bytes.
    f[16..18].copy_from_slice(&2000u16.to_be_bytes());
    b.add(FrameClass::Roce, f);
    let mut f = good();
    f[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&4u16.to_be_bytes()); // UDP length 4
    b.add(FrameClass::BadUdpLength, f);
    let mut f = good();
    f[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&1400u16.to_be_bytes()); // beyond IP payload
    b.add(FrameClass::BadUdpLength, f);
    // UDP 4791 with 8 bytes of payload: no room for a BTH.
    b.add(FrameClass::ShortBth, udp_ipv4(ip4(1), ip4(2), 1000, 4791, 8));
    // WRITE ONLY whose datagram ends right after the BTH: no RETH, no ICRC.
    let mut t = full(op::RDMA_WRITE_ONLY, 3);
    t.payload_len = 0;
    let tr = t.transport();
    let mut u = vec![0u8; 8 + 12];
    u[0..2].copy_from_slice(&1000u16.to_be_bytes());
    u[2..4].copy_from_slice(&4791u16.to_be_bytes());
    u[4..6].copy_from_slice(&20u16.to_be_bytes());
    u[8..20].copy_from_slice(&tr[..12]);
    b.add(FrameClass::ShortExtHeader, t.ip_packet(17, &u));
    // A non-first IPv4 fragment.
    let mut f = good();
    f[14 + 6..14 + 8].copy_from_slice(&(0x2000u16 | 185).to_be_bytes());
    b.add(FrameClass::Fragment, f);
    // GRE with the routing bit.
    let mut f = mirror(Encap::GreTeb, &good(), None);
    f[14 + 20] |= 0x40;
    b.add(FrameClass::UnsupportedEncap, f);
    // Ordinary traffic.
    b.add(FrameClass::NonRoce, udp_ipv4(ip4(1), ip4(2), 53, 53, 40));
    b.add(FrameClass::NonRoce, ethernet([2, 0, 0, 0, 0, 1], [0xff; 6], &[], 0x0806, &[0u8; 28]));
    let mut tcp = good();
    tcp[14 + 9] = 6;
    b.add(FrameClass::NonRoce, tcp);
    Fixture { name: "malformed.pcap", format: Format::Pcap(PcapOptions::default()), frames: b.frames }
}

fn roce_v1() -> Fixture {
    let mut b = B::new();
    for (i, opc) in [op::SEND_ONLY, op::RDMA_WRITE_ONLY, op::ACKNOWLEDGE].into_iter().enumerate() {
        b.add(FrameClass::Roce, full(opc, i as u32).build_v1());
    }
    Fixture { name: "roce_v1.pcap", format: Format::Pcap(PcapOptions::default()), frames: b.frames }
}

/// Two interfaces with different timestamp resolutions (µs and ns).
fn two_interfaces() -> Fixture {
    let mut b = B::new();
    for i in 0..6u32 {
        let mut r = full(op::RDMA_WRITE_ONLY, i);
        r.ip = IpAddrs::V4(ip4(1 + (i % 2) as u8), ip4(9));
        let rec = b.add(FrameClass::Roce, r.build());
        rec.interface = i % 2;
        // µs interface: keep the timestamp representable exactly.
        if i % 2 == 0 {
            rec.ts_ns = rec.ts_ns / 1000 * 1000;
        } else {
            rec.ts_ns += 123;
        }
    }
    b.add(FrameClass::Pfc, pfc([2, 0, 0, 0, 7, 3], 1, [5, 0, 0, 0, 0, 0, 0, 0]));
    let interfaces = vec![
        NgInterface { linktype: DataLink::ETHERNET, tsresol_pow10: 6 },
        NgInterface { linktype: DataLink::ETHERNET, tsresol_pow10: 9 },
    ];
    Fixture { name: "two_interfaces.pcapng", format: Format::PcapNg(interfaces), frames: b.frames }
}

/// Nanosecond timestamps, big-endian headers.
fn big_endian() -> Fixture {
    let mut b = B::new();
    for i in 0..4u32 {
        b.add(FrameClass::Roce, full(op::SEND_FIRST + i as u8 % 3, i).build()).ts_ns += 7;
    }
    Fixture {
        name: "nanosecond_be.pcap",
        format: Format::Pcap(PcapOptions { nanosecond: true, big_endian: true, ..Default::default() }),
        frames: b.frames,
    }
}

/// Linux cooked captures: SLL and SLL2 headers in place of Ethernet.
fn cooked(v2: bool) -> Fixture {
    let mut b = B::new();
    for (i, opc) in [op::RDMA_WRITE_FIRST, op::ACKNOWLEDGE, CNP].into_iter().enumerate() {
        let eth = full(opc, i as u32).build();
        let mut f = if v2 {
            let mut h = vec![0u8; 20];
            h[0..2].copy_from_slice(&eth[12..14]);
            h[4..8].copy_from_slice(&3u32.to_be_bytes());
            h[8..10].copy_from_slice(&1u16.to_be_bytes());
            h[11] = 6;
            h[12..18].copy_from_slice(&eth[6..12]);
            h
        } else {
            let mut h = vec![0u8; 16];
            h[2..4].copy_from_slice(&1u16.to_be_bytes());
            h[4..6].copy_from_slice(&6u16.to_be_bytes());
            h[6..12].copy_from_slice(&eth[6..12]);
            h[14..16].copy_from_slice(&eth[12..14]);
            h
        };
        f.extend_from_slice(&eth[14..]);
        b.add(if opc == CNP { FrameClass::Cnp } else { FrameClass::Roce }, f);
    }
    let linktype = if v2 { DataLink::LINUX_SLL2 } else { DataLink::LINUX_SLL };
    Fixture {
        name: if v2 { "sll2.pcap" } else { "sll.pcap" },
        format: Format::Pcap(PcapOptions { linktype, ..Default::default() }),
        frames: b.frames,
    }
}

/// The bundled example: a ring all-reduce slice with congestion (see `synth::scenario`).
pub fn example() -> Fixture {
    let records = cluster(&ScenarioOptions::default());
    let frames = records
        .into_iter()
        .map(|record| {
            let class = if record.data.get(14 + 4 + 20 + 8) == Some(&CNP) {
                FrameClass::Cnp
            } else if record.data.get(12..14) == Some(&[0x88, 0x08]) {
                FrameClass::Pfc
            } else if record.data.get(14 + 4 + 20 + 2..14 + 4 + 20 + 4) == Some(&4791u16.to_be_bytes()) {
                FrameClass::Roce
            } else {
                FrameClass::NonRoce
            };
            Frame { record, class }
        })
        .collect();
    Fixture {
        name: "example.pcap",
        format: Format::Pcap(PcapOptions { snaplen: 128, nanosecond: true, ..Default::default() }),
        frames,
    }
}

/// Every well-formed fixture capture.
pub fn all() -> Vec<Fixture> {
    vec![
        example(),
        opcodes(),
        pfc_frames(),
        vlans(),
        ipv6(),
        ipv4_options(),
        erspan(),
        snaplen(),
        malformed(),
        roce_v1(),
        two_interfaces(),
        big_endian(),
        cooked(false),
        cooked(true),
    ]
    .into_iter()
    .chain(crate::transport::all())
    .chain(crate::fabric::all())
    .chain(crate::vantage::all())
    .chain(crate::messages::all())
    .chain(crate::tuning::all())
    .collect()
}

/// Inputs that must be refused (or, for the truncated tail, reported as partial).
pub fn bad_inputs() -> Vec<BadInput> {
    let base = opcodes().bytes();
    let first = 24; // first record header
    let mut corrupt = base.clone();
    corrupt[first + 8..first + 12].copy_from_slice(&0x7FFF_FFF0u32.to_le_bytes());
    let mut inconsistent = base.clone();
    inconsistent[first + 12..first + 16].copy_from_slice(&10u32.to_le_bytes()); // orig < caplen
    let mut linktype = base.clone();
    linktype[20..24].copy_from_slice(&147u32.to_le_bytes());
    vec![
        BadInput {
            name: "not_a_capture.pcap",
            bytes: b"this is not a capture file\n".to_vec(),
            expect: &["byte offset 0", "not a pcap or pcapng"],
        },
        BadInput { name: "empty.pcap", bytes: Vec::new(), expect: &["byte offset 0", "empty"] },
        BadInput { name: "corrupt_length.pcap", bytes: corrupt, expect: &["byte offset 24", "corrupt record length"] },
        BadInput {
            name: "inconsistent_length.pcap",
            bytes: inconsistent,
            expect: &["byte offset 24", "exceeds original length"],
        },
        BadInput { name: "unknown_linktype.pcap", bytes: linktype, expect: &["unsupported link type 147"] },
    ]
}

/// The opcodes fixture with its last record cut in the middle: a partial report.
pub fn truncated_tail() -> (Vec<u8>, Fixture) {
    let f = opcodes();
    let bytes = f.bytes();
    let cut = bytes.len() - 30;
    (bytes[..cut].to_vec(), f)
}

/// Writes every fixture (and bad input) into `dir`; returns the paths written.
pub fn write_all(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for f in all() {
        let p = dir.join(f.name);
        std::fs::write(&p, f.bytes())?;
        written.push(p);
    }
    for b in bad_inputs() {
        let p = dir.join("bad").join(b.name);
        std::fs::create_dir_all(p.parent().expect("has parent"))?;
        std::fs::write(&p, &b.bytes)?;
        written.push(p);
    }
    for (name, text) in crate::fabric::topologies() {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        written.push(p);
    }
    let p = dir.join("bad").join("truncated_tail.pcap");
    std::fs::write(&p, truncated_tail().0)?;
    written.push(p);
    Ok(written)
}
