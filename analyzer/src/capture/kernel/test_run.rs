//! `BPF_PROG_TEST_RUN` on an XDP program (aya 0.14 has no wrapper): the kernel runs the
//! program on a frame we give it, optionally many times, and reports the return value and the
//! mean duration per run.

use std::os::fd::{AsRawFd, BorrowedFd};

use super::KernelError;

const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The `test` member of `union bpf_attr` (include/uapi/linux/bpf.h).
#[repr(C, align(8))]
#[derive(Default)]
struct TestAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// What a test run returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (XDP action).
    pub retval: u32,
    /// Mean nanoseconds per run, as measured by the kernel.
    pub duration_ns: u32,
}

/// Runs the program `prog` on `frame`, `repeat` times (0 or 1 = once); when `out` is given,
/// the frame as the program left it is copied there. The frame must be at least 14 bytes and
/// fit in a page with XDP headroom.
pub fn test_run(
    prog: BorrowedFd<'_>,
    frame: &[u8],
    repeat: u32,
    out: Option<&mut [u8]>,
) -> Result<TestRun, KernelError> {
    let (data_out, data_size_out) = match out {
        Some(o) => (o.as_mut_ptr() as u64, o.len() as u32),
        None => (0, 0),
    };
    let mut attr = TestAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        data_out,
        data_size_out,
        repeat,
        ..Default::default()
    };
    // SAFETY: data_in points at frame.len() readable bytes and data_out (if set) at
    // data_size_out writable bytes, both outliving the call.
    unsafe { super::sys_bpf(BPF_PROG_TEST_RUN, &mut attr) }.map_err(KernelError::TestRun)?;
    Ok(TestRun { retval: attr.retval, duration_ns: attr.duration })
}

/// `BPF_F_TEST_XDP_LIVE_FRAMES`: the results go where the program sends them.
const LIVE_FRAMES: u32 = 1 << 1;

/// Runs the program `prog` on `frame` `repeat` times in live-frames mode, as if received on
/// interface `ifindex` (of the calling thread's namespace): what it returns `XDP_TX` for is
/// transmitted there (a frame generator for benchmarks; the program may rewrite each copy).
pub fn live_frames(prog: BorrowedFd<'_>, frame: &[u8], repeat: u32, ifindex: u32) -> Result<(), KernelError> {
    // struct xdp_md: data, data_end (the frame's length, as the kernel checks), data_meta,
    // ingress_ifindex, rx_queue_index, egress_ifindex.
    let ctx: [u32; 6] = [0, frame.len() as u32, 0, ifindex, 0, 0];
    let mut attr = TestAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ctx_size_in: std::mem::size_of_val(&ctx) as u32,
        ctx_in: ctx.as_ptr() as u64,
        flags: LIVE_FRAMES,
        ..Default::default()
    };
    // SAFETY: data_in points at frame.len() readable bytes and ctx_in at ctx_size_in, both
    // outliving the call.
    unsafe { super::sys_bpf(BPF_PROG_TEST_RUN, &mut attr) }.map_err(KernelError::TestRun)?;
    Ok(())
}

/// Pins the calling thread to `cpu`, so that per-CPU map slots of a test run are known.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
