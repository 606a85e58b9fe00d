//! Timeline records as the XDP program logs them, for the benches of the agent's side.

use analyzer_common::opcode::op;
use analyzer_common::record::Record;

/// Flows of [`round_robin`], as in `cargo xtask flows-capture`.
pub const FLOWS: u32 = 10_000;

/// Record `n` of [`FLOWS`] flows taking turns, one RDMA WRITE ONLY each from its own source to
/// one destination, `gap` ns on average after the one before, with a jitter of up to one gap
/// (as a replay's pacing has; still in time order).
pub fn round_robin(n: u64, gap: u64) -> Record {
    let i = (n % FLOWS as u64) as u32;
    let jitter = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40 & 0xFFFF;
    let mut r = Record {
        ts_ns: 1_000_000_000 + gap * n + gap * jitter / 0x1_0000,
        frame_len: 138,
        dst_qp: 0x100 + i,
        psn: (n / FLOWS as u64) as u32 + i,
        udp_sport: 0xC000 | (i as u16 & 0x3FFF),
        opcode: op::RDMA_WRITE_ONLY,
        ecn: 2,
        dscp: 26,
        ip_version: 4,
        ..Default::default()
    };
    r.src_ip[..4].copy_from_slice(&[10, 1 + (i >> 16) as u8, (i >> 8) as u8, i as u8]);
    r.dst_ip[..4].copy_from_slice(&[10, 2, 0, 1]);
    r
}
