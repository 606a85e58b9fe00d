//! A small synthetic cluster: the traffic pattern of a ring all-reduce over RoCE v2, for the
//! bundled example capture and the benchmark captures.
//!
//! Host i (10.0.0.i) writes messages to host i+1 over one RC QP pair: RDMA WRITE FIRST
//! (RETH) / MIDDLE / LAST (AckReq), answered by an ACK. Host 2 also reads from host 3 (READ
//! REQUEST, READ RESPONSE FIRST/MIDDLE/LAST). In the second half of the run the last ring
//! edge is congested: its data is CE-marked every fourth packet and the receiver sends a CNP
//! back for each mark, while the switch port in front of the receiver sends PFC XOFF/XON on
//! priority 3. Some ordinary UDP runs beside it. Everything is deterministic.

use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::{Aeth, Reth};

use super::frame::{Roce, Vlan, pfc, udp_ipv4};
use super::pcap::Record;

#[derive(Debug, Clone, Copy)]
pub struct ScenarioOptions {
    pub hosts: u8,
    /// Messages each host writes to the next.
    pub messages: u32,
    pub message_bytes: u32,
    pub pmtu: u32,
    /// Cut records to this many bytes, as a mirror collector's `-s 128` would.
    pub snaplen: Option<usize>,
    pub start_ns: u64,
    /// Gap between two frames of one sender (ns).
    pub gap_ns: u64,
}

impl Default for ScenarioOptions {
    fn default() -> Self {
        ScenarioOptions {
            hosts: 4,
            messages: 6,
            message_bytes: 32 * 1024,
            pmtu: 4096,
            snaplen: Some(128),
            // 2026-11-29T00:00:00Z
            start_ns: 1_795_910_400_000_000_000,
            gap_ns: 400,
        }
    }
}

/// The switch port MAC that sends PFC toward the congested receiver's sender.
pub const SWITCH_PORT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x07, 0xd1];

pub fn host_ip(i: u8) -> [u8; 4] {
    [10, 0, 0, i + 1]
}

fn qp(i: u8, peer: u8) -> u32 {
    0x100 + (i as u32) * 0x10 + peer as u32
}

fn sport(a: u32, b: u32) -> u16 {
    0xC000 | ((a ^ b) & 0x3FFF) as u16
}

struct Out {
    records: Vec<Record>,
    snaplen: Option<usize>,
}

impl Out {
    fn push(&mut self, ts: u64, frame: Vec<u8>) {
        let r = Record::new(ts, frame);
        self.records.push(match self.snaplen {
            Some(s) => r.snap(s),
            None => r,
        });
    }
}

fn base(src: u8, dst: u8, opcode: u8, psn: u32) -> Roce {
    let (qs, qd) = (qp(src, dst), qp(dst, src));
    let mut r = Roce::v4(host_ip(src), host_ip(dst), sport(qs, qd), opcode, qd, psn);
    r.vlans = vec![Vlan::dot1q(3, 100)];
    r
}

/// Generates the scenario's records, sorted by time.
pub fn cluster(o: &ScenarioOptions) -> Vec<Record> {
    let mut out = Out { records: Vec::new(), snaplen: o.snaplen };
    let pkts = o.message_bytes.div_ceil(o.pmtu).max(1);
    let n = o.hosts.max(2);
    let mut psn = vec![0u32; n as usize];
    let mut msn = vec![0u32; n as usize];
    let congested = n - 1;
    let mut t = o.start_ns;
    for m in 0..o.messages {
        let hot = m >= o.messages / 2;
        for h in 0..n {
            let dst = (h + 1) % n;
            let mut ts = t + h as u64 * 37;
            for p in 0..pkts {
                let opcode = match (pkts, p) {
                    (1, _) => op::RDMA_WRITE_ONLY,
                    (_, 0) => op::RDMA_WRITE_FIRST,
                    (_, p) if p == pkts - 1 => op::RDMA_WRITE_LAST,
                    _ => op::RDMA_WRITE_MIDDLE,
                };
                let mut r = base(h, dst, opcode, psn[h as usize] & 0xFF_FFFF);
                let len = if p == pkts - 1 { o.message_bytes - o.pmtu * (pkts - 1) } else { o.pmtu };
                r.payload_len = len as usize;
                r.ext.reth = Reth {
                    va: 0x7f00_0000_0000 + m as u64 * o.message_bytes as u64,
                    rkey: 0x1234,
                    dma_len: o.message_bytes,
                };
                r.bth.ack_req = p == pkts - 1;
                let marked = hot && h == congested && psn[h as usize] % 4 == 3;
                if marked {
                    r.ecn = 3;
                }
                out.push(ts, r.build());
                if marked {
                    // The receiver (notification point) answers the CE mark with a CNP.
                    let mut c = base(dst, h, CNP, 0);
                    c.dscp = 48;
                    c.ecn = 0;
                    c.bth.becn = true;
                    out.push(ts + 900, c.build());
                }
                psn[h as usize] += 1;
                ts += o.gap_ns;
            }
            msn[dst as usize] += 1;
            let mut ack = base(dst, h, op::ACKNOWLEDGE, (psn[h as usize] - 1) & 0xFF_FFFF);
            ack.ext.aeth = Aeth::ack(31, msn[dst as usize]);
            out.push(ts + 1_500, ack.build());
        }
        if hot {
            let q = if m % 2 == 0 { 0xFFFF } else { 0 };
            out.push(t + 2_000, pfc(SWITCH_PORT_MAC, 1 << 3, [0, 0, 0, q, 0, 0, 0, 0]));
        }
        // Host 1 reads 3 PMTUs from host 2.
        if n > 2 {
            let mut rq = base(1, 2, op::RDMA_READ_REQUEST, psn[1] & 0xFF_FFFF);
            rq.ext.reth = Reth { va: 0x5000, rkey: 0x77, dma_len: 3 * o.pmtu };
            rq.bth.ack_req = true;
            out.push(t + 3_000, rq.build());
            for (i, opc) in [op::RDMA_READ_RESPONSE_FIRST, op::RDMA_READ_RESPONSE_MIDDLE, op::RDMA_READ_RESPONSE_LAST]
                .into_iter()
                .enumerate()
            {
                let mut rr = base(2, 1, opc, (psn[1] + i as u32) & 0xFF_FFFF).payload(o.pmtu as usize);
                rr.ext.aeth = Aeth::ack(31, msn[2]);
                out.push(t + 4_000 + i as u64 * o.gap_ns, rr.build());
            }
            psn[1] += 3;
        }
        out.push(t + 5_000, udp_ipv4([10, 0, 0, 200], [10, 0, 0, 1], 40000 + m as u16, 8125, 48));
        t += (pkts as u64 + 8) * o.gap_ns * n as u64;
    }
    out.records.sort_by_key(|r| r.ts_ns);
    out.records
}
