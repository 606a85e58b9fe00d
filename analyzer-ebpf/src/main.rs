#![no_std]
#![no_main]

use analyzer_common::{FrameBytes, FrameClass, PacketSummary, classify, classify::MAX_HEADER_OFFSET};
use aya_ebpf::{
    bindings::xdp_action,
    macros::{map, xdp},
    maps::PerCpuArray,
    programs::XdpContext,
};

#[map]
static CLASS_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(FrameClass::COUNT as u32, 0);

#[map]
static SCRATCH: PerCpuArray<PacketSummary> = PerCpuArray::with_max_entries(1, 0);

#[map]
static WIDEN: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

struct Packet {
    start: usize,
    end: usize,
    /// Per-CPU slot that `widen` round-trips offsets through (map memory is not tracked by
    /// the verifier, so the value read back is an unknown scalar, then bounded by the mask).
    slot: *mut u64,
}

impl FrameBytes for Packet {
    #[inline(always)]
    fn read<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        if self.start + offset + N > self.end {
            return None;
        }
        // SAFETY: bounds checked against data_end just above.
        Some(unsafe { core::ptr::read_unaligned((self.start + offset) as *const [u8; N]) })
    }

    #[inline(always)]
    fn widen(&self, offset: usize) -> usize {
        // SAFETY: `slot` points at this CPU's WIDEN entry.
        unsafe {
            core::ptr::write_volatile(self.slot, offset as u64);
            (core::ptr::read_volatile(self.slot) as usize) & (MAX_HEADER_OFFSET - 1)
        }
    }
}

#[xdp]
pub fn roce_analyzer(ctx: XdpContext) -> u32 {
    let _ = try_roce_analyzer(&ctx);
    xdp_action::XDP_PASS
}

#[inline(always)]
fn try_roce_analyzer(ctx: &XdpContext) -> Result<(), ()> {
    let slot = WIDEN.get_ptr_mut(0).ok_or(())?;
    let pkt = Packet { start: ctx.data(), end: ctx.data_end(), slot };
    // data_end - data is pointer arithmetic on pkt_end, which the verifier refuses.
    // SAFETY: helper taking the program's own context.
    let len = unsafe { aya_ebpf::helpers::generated::bpf_xdp_get_buff_len(ctx.ctx) } as u32;
    let out = SCRATCH.get_ptr_mut(0).ok_or(())?;
    // SAFETY: per-CPU scratch slot, used by this program invocation only.
    let class = classify(&pkt, len, unsafe { &mut *out });
    if let Some(c) = CLASS_COUNTS.get_ptr_mut(class as u32) {
        // SAFETY: per-CPU slot.
        unsafe { *c += 1 };
    }
    Ok(())
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
