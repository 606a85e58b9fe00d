//! A frame generator in the kernel, for loads past what a sender in user space reaches here
//! (`replay` sends one frame per system call; two of them give about 450 k frames/s on this
//! machine and take both cores). `BPF_PROG_TEST_RUN` in live-frames mode
//! (`BPF_F_TEST_XDP_LIVE_FRAMES`) runs a tiny XDP program on one frame many times and
//! transmits each result (`XDP_TX`) out of `va`, so the agent on `vb` receives them as from a
//! wire. The program rewrites each copy from a per-CPU counter `n`: flow `n % flows` (the
//! source address's last two bytes) and PSN `n / flows`, so every flow's PSNs go up by one
//! as a real sender's do. Paced from user space: a run of `rate / 100` frames every 10 ms.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use analyzer::capture::kernel::sys_bpf;
use anyhow::bail;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_PROG_TYPE_XDP: u32 = 6;
const XDP_TX: i32 = 3;

/// Where the program writes in the frame (Ethernet, IPv4 without options, UDP, BTH).
const SRC_IP_LOW: i16 = 14 + 14;
const PSN: i16 = 14 + 20 + 8 + 9;

/// One BPF instruction.
#[derive(Clone, Copy)]
#[repr(C)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: dst | (src << 4), off, imm }
}

/// The program: count, then write the flow and PSN of this copy; `XDP_TX`.
fn program(map_fd: i32, flows: i32) -> Vec<Insn> {
    let mut p = vec![
        insn(0xbf, 6, 1, 0, 0),      // r6 = ctx
        insn(0x18, 1, 1, 0, map_fd), // r1 = the counter map (ld_imm64, pseudo map fd)
        insn(0, 0, 0, 0, 0),
        insn(0x62, 10, 0, -4, 0),            // *(u32 *)(r10 - 4) = 0: the key
        insn(0xbf, 2, 10, 0, 0),             // r2 = r10
        insn(0x07, 2, 0, 0, -4),             // r2 += -4
        insn(0x85, 0, 0, 0, 1),              // call map_lookup_elem
        insn(0x15, 0, 0, 0, 0),              // if r0 == 0 goto out (offset set below)
        insn(0x79, 7, 0, 0, 0),              // r7 = *(u64 *)(r0 + 0): n
        insn(0xbf, 8, 7, 0, 0),              // r8 = r7
        insn(0x07, 8, 0, 0, 1),              // r8 += 1
        insn(0x7b, 0, 8, 0, 0),              // *(u64 *)(r0 + 0) = r8
        insn(0x61, 2, 6, 0, 0),              // r2 = ctx->data
        insn(0x61, 3, 6, 4, 0),              // r3 = ctx->data_end
        insn(0xbf, 4, 2, 0, 0),              // r4 = r2
        insn(0x07, 4, 0, 0, PSN as i32 + 3), // r4 += end of the PSN
        insn(0x2d, 4, 3, 0, 0),              // if r4 > r3 goto out (offset set below)
        insn(0xbf, 5, 7, 0, 0),              // r5 = n
        insn(0x97, 5, 0, 0, flows),          // r5 %= flows
        insn(0x6b, 2, 5, SRC_IP_LOW, 0),     // *(u16 *)(r2 + SRC_IP_LOW) = r5
        insn(0x37, 7, 0, 0, flows),          // r7 /= flows: the PSN
        insn(0xbf, 9, 7, 0, 0),              // r9 = r7
        insn(0x77, 9, 0, 0, 16),             // r9 >>= 16
        insn(0x73, 2, 9, PSN, 0),            // *(u8 *)(r2 + PSN) = r9
        insn(0xbf, 9, 7, 0, 0),
        insn(0x77, 9, 0, 0, 8),
        insn(0x73, 2, 9, PSN + 1, 0),
        insn(0x73, 2, 7, PSN + 2, 0),
    ];
    let out = p.len() as i16;
    // The two jumps to `out`: no counter, or a frame too short.
    for i in [7usize, 16] {
        p[i].off = out - i as i16 - 1;
    }
    p.push(insn(0xb7, 0, 0, 0, XDP_TX)); // r0 = XDP_TX
    p.push(insn(0x95, 0, 0, 0, 0)); // exit
    p
}

#[repr(C)]
#[derive(Default)]
struct MapAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C, align(8))]
#[derive(Default)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// The generator, loaded: the program and its counter.
pub struct Generator {
    prog: OwnedFd,
    _map: OwnedFd,
    frame: Vec<u8>,
}

impl Generator {
    /// Loads the program for `flows` flows (at most 65 536) over `frame` (an IPv4 RoCE v2
    /// frame without VLAN tags).
    pub fn load(frame: Vec<u8>, flows: u32) -> anyhow::Result<Generator> {
        if !(1..=65_536).contains(&flows) || frame.len() < PSN as usize + 3 {
            bail!("the generator takes 1..=65536 flows and a RoCE v2 frame over IPv4");
        }
        let mut m = MapAttr {
            map_type: BPF_MAP_TYPE_PERCPU_ARRAY,
            key_size: 4,
            value_size: 8,
            max_entries: 1,
            ..Default::default()
        };
        // SAFETY: MapAttr holds no pointers; the fd the kernel returned is ours.
        let map = unsafe { OwnedFd::from_raw_fd(sys_bpf(BPF_MAP_CREATE, &mut m)? as i32) };
        let insns = program(map.as_raw_fd(), flows as i32);
        let license = c"GPL";
        let mut log = vec![0u8; 1 << 16];
        let mut l = LoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            ..Default::default()
        };
        l.prog_name[..7].copy_from_slice(b"roce_tx");
        // SAFETY: the instructions, license and log outlive the call, of the lengths given.
        let prog = match unsafe { sys_bpf(BPF_PROG_LOAD, &mut l) } {
            // SAFETY: the fd the kernel returned is ours.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd as i32) },
            Err(e) => {
                let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                bail!("loading the generator: {e}: {}", String::from_utf8_lossy(&log[..end]));
            }
        };
        Ok(Generator { prog, _map: map, frame })
    }

    /// `count` frames out of interface `ifindex` (of this thread's namespace), as fast as the
    /// kernel runs them.
    pub fn send(&self, ifindex: u32, count: u32) -> anyhow::Result<()> {
        let prog = std::os::fd::AsFd::as_fd(&self.prog);
        analyzer::capture::kernel::test_run::live_frames(prog, &self.frame, count, ifindex)
            .map_err(|e| anyhow::anyhow!("live-frames test run: {e:#}"))
    }

    /// `rate` frames a second out of `ifindex` for `duration`, in runs every 10 ms (a late
    /// run catches up); the frames sent.
    pub fn paced(&self, ifindex: u32, rate: u64, duration: Duration) -> anyhow::Result<u64> {
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < duration {
            let due = (rate as f64 * start.elapsed().as_secs_f64()) as u64;
            if due > sent {
                let n = (due - sent).min(u32::MAX as u64) as u32;
                self.send(ifindex, n)?;
                sent += n as u64;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(sent)
    }
}
