//! roce-analyzer's XDP program: classifies every frame with the shared classifier of
//! `analyzer_common` and accounts it in per-CPU maps (frame classes, per-flow counters, PFC per
//! sender and priority, losses), with a ring buffer of the frames the analyses need at packet
//! resolution. It always returns XDP_PASS and never writes to the frame.
#![no_std]
#![no_main]
// The flow table claims a slot with a compare-and-swap, which core exposes on this target only
// as an intrinsic.
#![feature(core_intrinsics)]
#![allow(internal_features)]
// Map keys are passed by reference so that the 40-byte key is not copied again.
#![allow(clippy::needless_borrows_for_generic_args)]
// The benchmark's lower-bound variants (`floor`) leave the accounting unused.
#![cfg_attr(
    any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock"),
    allow(dead_code, unused_imports)
)]

mod counters;
mod evidence;
mod extra;
mod flow_table;
mod frame;
mod logs;
mod notes;
mod pfc;
mod psn;
mod scratch;
mod sightings;
mod stages;

use aya_ebpf::bindings::xdp_action;
use aya_ebpf::macros::xdp;
use aya_ebpf::programs::XdpContext;

#[cfg(any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock"))]
mod floor;

/// What a frame runs: the accounting, or in the benchmark's lower-bound variants the
/// `floor` they measure.
#[cfg(any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock"))]
use floor::run;

#[cfg(not(any(roce_stages = "clock", roce_stages = "bare", roce_stages = "bare_noclock")))]
use frame::try_roce_analyzer as run;

/// Multi-buffer aware (`xdp.frags`): mirror ports run jumbo MTUs for 4096-byte RoCE payloads,
/// and drivers refuse native XDP above one page per frame otherwise. The headers are in the
/// first buffer, which is all `data..data_end` covers; the length is the whole frame's
/// (`bpf_xdp_get_buff_len`).
// Inlined into the entry the macro wraps it in: no BPF-to-BPF call per frame.
#[xdp(frags)]
#[inline(always)]
pub fn roce_analyzer(ctx: XdpContext) -> u32 {
    let _ = run(&ctx);
    xdp_action::XDP_PASS
}

/// The same program without `xdp.frags`, for drivers that refuse multi-buffer programs (the
/// agent attaches it when the multi-buffer one is refused, or with `--xdp-frags off`). Such a
/// driver keeps frames in one buffer, so nothing is lost by it.
#[xdp]
#[inline(always)]
pub fn roce_analyzer_single(ctx: XdpContext) -> u32 {
    let _ = run(&ctx);
    xdp_action::XDP_PASS
}

/// The benchmark baseline: the cheapest possible XDP program.
#[xdp(frags)]
pub fn xdp_pass_baseline(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_PASS
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
