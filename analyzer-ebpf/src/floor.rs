//! Lower bounds for `cargo xtask bench-kernel --only stages`, built only into its variants
//! (`--cfg roce_stages="clock"`, `"bare"` or `"bare_noclock"`), never into the object the agent
//! loads: what
//! issue 12's bulk budget (≤ +50 ns a frame over XDP_PASS) leaves for the program's own work
//! on this machine.
//!
//! - `clock`: the precise clock read once and stored, nothing else — what a frame pays for
//!   the nanosecond time the timeline, RTT, incast and DCQCN's rate windows need.
//! - `bare`: the least a bulk frame could be made to cost with this program's flow table and
//!   log and still be counted and checked in sequence with its time: an untagged IPv4 RoCE v2 frame
//! read at fixed offsets (none of
//!   the shared classifier's generality: no VLAN, options, tunnels, extended headers, classes),
//!   its flow found or inserted in the same table, packets, bytes and last time counted, its
//!   PSN compared with the one expected, the precise clock, and a 32-byte record in this
//!   CPU's log. Any frame of another shape passes uncounted.
//! - `bare_noclock`: the same without the clock (its time a constant): what a bulk frame
//!   counted and checked in sequence would cost if it had no time of its own.
use analyzer_common::flow::FlowKey;
use analyzer_common::table;
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::programs::XdpContext;

use crate::flow_table::{find_flow, insert_flow};
use crate::logs::{TIMELINE_CPUS, TIMELINE_HEADS, TIMELINE_LOG, log_done, log_slot, timeline_slots};
use crate::scratch::{SCRATCH, Word};

/// The precise clock, stored in this CPU's scratch word.
#[cfg(roce_stages = "clock")]
#[inline(always)]
pub fn run(_ctx: &XdpContext) -> Result<(), ()> {
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(())?;
    // SAFETY: helper without arguments; this CPU's scratch.
    unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!((*scratch).widen), bpf_ktime_get_ns()) };
    Ok(())
}

/// Ethernet, IPv4 without options, UDP and BTH.
#[cfg(any(roce_stages = "bare", roce_stages = "bare_noclock"))]
const HEADERS: usize = 14 + 20 + 8 + 12;

/// A bulk frame at its least (see the module's doc).
#[cfg(any(roce_stages = "bare", roce_stages = "bare_noclock"))]
#[inline(always)]
pub fn run(ctx: &XdpContext) -> Result<(), ()> {
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(())?;
    // SAFETY: this CPU's scratch word (see Word).
    let word = Word(unsafe { core::ptr::addr_of_mut!((*scratch).widen) });
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + HEADERS > end {
        return Ok(());
    }
    let at = |o: usize| start + o;
    // SAFETY: every read lies in the HEADERS bytes checked against data_end above.
    let (ethertype, version_ihl, protocol, dport, total, src, dst, bth) = unsafe {
        (
            core::ptr::read_unaligned(at(12) as *const u16),
            *(at(14) as *const u8),
            *(at(23) as *const u8),
            core::ptr::read_unaligned(at(36) as *const u16),
            core::ptr::read_unaligned(at(16) as *const u16),
            core::ptr::read_unaligned(at(26) as *const [u8; 4]),
            core::ptr::read_unaligned(at(30) as *const [u8; 4]),
            core::ptr::read_unaligned(at(42) as *const [u32; 3]),
        )
    };
    if ethertype != 0x0800u16.to_be() || version_ihl != 0x45 || protocol != 17 || dport != 4791u16.to_be() {
        return Ok(());
    }
    let opcode = bth[0] & 0xff;
    let dst_qp = u32::from_be(bth[1]) & 0x00ff_ffff;
    let psn = u32::from_be(bth[2]) & 0x00ff_ffff;
    let mut key = FlowKey {
        src: [0; 16],
        dst: [0; 16],
        dst_qp,
        // SAFETY: the UDP source port, inside the checked headers.
        udp_sport: unsafe { core::ptr::read_unaligned(at(34) as *const u16) }.swap_bytes(),
        ip_version: 4,
        _pad: 0,
    };
    key.src[..4].copy_from_slice(&src);
    key.dst[..4].copy_from_slice(&dst);
    let now = match crate::stages::CLOCK {
        // SAFETY: helper without arguments.
        true => unsafe { bpf_ktime_get_ns() },
        false => 1,
    };
    let h = table::hash(&key);
    let entry = match find_flow(&key, h, word) {
        Some(e) => e,
        None => insert_flow(&key, h).ok_or(())?,
    };
    // SAFETY: the flow's slot (shared, as in the full program).
    let id = unsafe {
        let c = &mut (*entry).counters;
        c.packets = c.packets.wrapping_add(1);
        c.bytes += 14 + u16::from_be(total) as u64;
        c.last_ns = now;
        // Out of sequence: counted (in the duplicates' slot; a bound, not an analysis).
        let seq = &mut (*entry).seq;
        if psn != seq.expected {
            (*entry).psn_counts[2] = (*entry).psn_counts[2].wrapping_add(1);
        }
        seq.expected = (psn + 1) & 0x00ff_ffff;
        c.id
    };
    if let Some((slot, head, h)) = log_slot(&TIMELINE_LOG, &TIMELINE_HEADS, &TIMELINE_CPUS, timeline_slots()) {
        let w = slot as *mut u64;
        // SAFETY: a slot of this CPU's part of the log: its four words.
        unsafe {
            core::ptr::write_volatile(w, now);
            core::ptr::write_volatile(w.add(1), id as u64 | (14 + u16::from_be(total) as u64) << 32);
            core::ptr::write_volatile(w.add(2), psn as u64 | (opcode as u64) << 32);
            core::ptr::write_volatile(w.add(3), 0);
            log_done(head, h);
        }
    }
    Ok(())
}
