//! `cargo xtask bench-kernel --only profile` (root, `perf`): where the XDP program's
//! nanoseconds go, by source line. The program runs one frame class in a loop of
//! `BPF_PROG_TEST_RUN` on CPU 0 while `perf record` samples that CPU; each sample in the
//! program's JIT image is mapped to its source line through the line info the kernel keeps
//! for it (`jited_line_info`: the image address of each `line_info` entry, whose file and line
//! are strings of the program's BTF), and samples elsewhere are named by their kernel symbol
//! (the clock's `read_tsc`, the test run's loop). A share of the samples is a share of the
//! frame's time; samples land on the instruction after a slow one (skid), so a line's share
//! says where to look, not a cycle count.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use analyzer::capture::kernel::load::{LoadOptions, load, program_fd};
use analyzer::capture::kernel::snapshot::AyaMaps;
use analyzer::capture::kernel::test_run::{pin_to_cpu, test_run};
use analyzer_common::maps::PROGRAM;
use anyhow::{Context, bail};

const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_BTF_GET_FD_BY_ID: libc::c_long = 19;

/// Offsets in `struct bpf_prog_info` (include/uapi/linux/bpf.h).
mod info {
    pub const NR_JITED_KSYMS: usize = 104;
    pub const NR_JITED_FUNC_LENS: usize = 108;
    pub const JITED_KSYMS: usize = 112;
    pub const JITED_FUNC_LENS: usize = 120;
    pub const BTF_ID: usize = 128;
    pub const NR_LINE_INFO: usize = 148;
    pub const LINE_INFO: usize = 152;
    pub const JITED_LINE_INFO: usize = 160;
    pub const NR_JITED_LINE_INFO: usize = 168;
    pub const LINE_INFO_REC_SIZE: usize = 172;
    pub const JITED_LINE_INFO_REC_SIZE: usize = 176;
    pub const SIZE: usize = 256;
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// `BPF_OBJ_GET_INFO_BY_FD` into `buf` (its pointers and counts set by the caller).
pub fn obj_info(fd: BorrowedFd<'_>, buf: &mut [u8]) -> anyhow::Result<()> {
    #[repr(C, align(8))]
    struct Attr {
        fd: u32,
        len: u32,
        info: u64,
    }
    let attr = Attr { fd: fd.as_raw_fd() as u32, len: buf.len() as u32, info: buf.as_mut_ptr() as u64 };
    // SAFETY: the attribute names `buf` and its length; every pointer inside `buf` names a
    // buffer of the count beside it, all outliving the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, BPF_OBJ_GET_INFO_BY_FD, &attr as *const Attr, size_of::<Attr>()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error()).context("BPF_OBJ_GET_INFO_BY_FD");
    }
    Ok(())
}

/// The program's image ranges and, for each line-info entry, its image address and source
/// line ("file:line").
struct JitLines {
    /// (start, length) of each function's image.
    funcs: Vec<(u64, u64)>,
    /// (address, source line), by address.
    lines: Vec<(u64, String)>,
}

impl JitLines {
    fn of(fd: BorrowedFd<'_>) -> anyhow::Result<JitLines> {
        let mut first = vec![0u8; info::SIZE];
        obj_info(fd, &mut first)?;
        let (nk, nl) = (get_u32(&first, info::NR_JITED_KSYMS), get_u32(&first, info::NR_JITED_FUNC_LENS));
        let nli = get_u32(&first, info::NR_LINE_INFO);
        let njl = get_u32(&first, info::NR_JITED_LINE_INFO);
        let (li_size, jl_size) =
            (get_u32(&first, info::LINE_INFO_REC_SIZE), get_u32(&first, info::JITED_LINE_INFO_REC_SIZE));
        if njl == 0 || nli != njl || li_size < 16 || jl_size < 8 {
            bail!("the kernel gives no JIT line info for the program (line info {nli}, JIT line info {njl})");
        }
        let mut ksyms = vec![0u64; nk as usize];
        let mut lens = vec![0u32; nl as usize];
        let mut li = vec![0u8; (nli * li_size) as usize];
        let mut jl = vec![0u8; (njl * jl_size) as usize];
        let mut req = vec![0u8; info::SIZE];
        put_u32(&mut req, info::NR_JITED_KSYMS, nk);
        put_u32(&mut req, info::NR_JITED_FUNC_LENS, nl);
        put_u64(&mut req, info::JITED_KSYMS, ksyms.as_mut_ptr() as u64);
        put_u64(&mut req, info::JITED_FUNC_LENS, lens.as_mut_ptr() as u64);
        put_u32(&mut req, info::NR_LINE_INFO, nli);
        put_u64(&mut req, info::LINE_INFO, li.as_mut_ptr() as u64);
        put_u64(&mut req, info::JITED_LINE_INFO, jl.as_mut_ptr() as u64);
        put_u32(&mut req, info::NR_JITED_LINE_INFO, njl);
        put_u32(&mut req, info::LINE_INFO_REC_SIZE, li_size);
        put_u32(&mut req, info::JITED_LINE_INFO_REC_SIZE, jl_size);
        obj_info(fd, &mut req)?;
        let strings = btf_strings(get_u32(&req, info::BTF_ID))?;
        let text = |off: u32| -> &str {
            let s = strings.get(off as usize..).unwrap_or_default();
            std::str::from_utf8(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]).unwrap_or("?")
        };
        let mut lines: Vec<(u64, String)> = (0..nli as usize)
            .map(|i| {
                let r = &li[i * li_size as usize..];
                let (file, line_col) = (get_u32(r, 4), get_u32(r, 12));
                let file = text(file).rsplit('/').next().unwrap_or("?");
                let addr = u64::from_ne_bytes(jl[i * jl_size as usize..][..8].try_into().expect("eight bytes"));
                (addr, format!("{file}:{}", line_col >> 10))
            })
            .collect();
        lines.sort_by_key(|(a, _)| *a);
        if ksyms.iter().all(|&k| k == 0) {
            bail!("the kernel hides the program's image addresses (kptr_restrict, bpf_jit_harden?)");
        }
        let funcs = ksyms.iter().zip(&lens).map(|(&k, &l)| (k, l as u64)).collect();
        Ok(JitLines { funcs, lines })
    }

    /// The source line of image address `ip`, if it is in the program.
    fn line(&self, ip: u64) -> Option<&str> {
        if !self.funcs.iter().any(|&(k, l)| (k..k + l).contains(&ip)) {
            return None;
        }
        let i = self.lines.partition_point(|(a, _)| *a <= ip);
        Some(self.lines.get(i.checked_sub(1)?).map_or("?", |(_, l)| l.as_str()))
    }
}

/// The string section of BTF object `id` (the program's, whose line info names files in it).
fn btf_strings(id: u32) -> anyhow::Result<Vec<u8>> {
    let attr = [id, 0, 0, 0];
    // SAFETY: a bpf_attr prefix holding the BTF id.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_BTF_GET_FD_BY_ID, attr.as_ptr(), size_of_val(&attr)) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("BPF_BTF_GET_FD_BY_ID");
    }
    // SAFETY: a new descriptor that this function owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // struct bpf_btf_info: btf (u64), btf_size (u32), id, name (u64), name_len, kernel_btf.
    let mut head = [0u8; 32];
    obj_info(fd.as_fd(), &mut head)?;
    let size = get_u32(&head, 8);
    let mut btf = vec![0u8; size as usize];
    put_u64(&mut head, 0, btf.as_mut_ptr() as u64);
    obj_info(fd.as_fd(), &mut head)?;
    // struct btf_header: magic (u16), version, flags, hdr_len (u32), type_off, type_len,
    // str_off, str_len.
    if btf.len() < 24 || u16::from_ne_bytes([btf[0], btf[1]]) != 0xeb9f {
        bail!("BTF {id}: not BTF");
    }
    let (hdr, str_off, str_len) = (get_u32(&btf, 4), get_u32(&btf, 16), get_u32(&btf, 20));
    let start = (hdr + str_off) as usize;
    btf.get(start..start + str_len as usize).map(<[u8]>::to_vec).with_context(|| format!("BTF {id}: strings"))
}

/// Profiles the program on each frame: `frames` as bench-kernel measures them (name, bytes).
pub fn run(frames: &[(&str, Vec<u8>)], seconds: u64) -> anyhow::Result<()> {
    println!("\n### Where the program's time goes, by source line (perf samples of CPU 0, {seconds} s a frame)\n");
    if Command::new("perf").arg("--version").stdout(Stdio::null()).status().map_or(true, |s| !s.success()) {
        // Loud, not silent: the table is missing and says why.
        println!("**not measured**: `perf` is not installed (Debian: apt-get install linux-perf)");
        return Ok(());
    }
    pin_to_cpu(0)?;
    let dir = tempfile::tempdir()?;
    for (name, frame) in frames {
        let mut ebpf = load(LoadOptions::default(), &[PROGRAM])?;
        let _maps = AyaMaps::new(&mut ebpf)?;
        let fd = program_fd(&ebpf, PROGRAM)?;
        let lines = JitLines::of(fd)?;
        let data = dir.path().join("perf.data");
        // Sampling slows the runs down (each sample interrupts one): the shares are of the
        // time the program ran, the ns those of runs without sampling, measured first.
        let plain = test_run(fd, frame, 1_000_000, None)?.duration_ns as f64;
        let s = sampled(fd, frame, &data, Duration::from_secs(seconds))?;
        report(name, &lines, &s, plain);
    }
    Ok(())
}

/// What [`sampled`] saw.
struct Sampled {
    /// Each sample's (address, symbol).
    samples: Vec<(u64, String)>,
    runs: u64,
    /// ns a run while sampled.
    ns: f64,
}

/// Runs the program on `frame` for `time` under `perf record` of this CPU.
fn sampled(fd: BorrowedFd<'_>, frame: &[u8], data: &Path, time: Duration) -> anyhow::Result<Sampled> {
    let mut perf = Command::new("perf")
        .args(["record", "-q", "-F", "10000", "-C", "0", "-o"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting perf record")?;
    // perf needs a moment to open its events.
    std::thread::sleep(Duration::from_millis(500));
    let (start, mut runs, mut total_ns) = (Instant::now(), 0u64, 0u64);
    while start.elapsed() < time {
        total_ns += test_run(fd, frame, 100_000, None)?.duration_ns as u64 * 100_000;
        runs += 100_000;
    }
    // SAFETY: a signal to the child this process started.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    perf.wait()?;
    let out = Command::new("perf").args(["script", "-F", "ip,sym", "-i"]).arg(data).output()?;
    if !out.status.success() {
        bail!("perf script: {}", String::from_utf8_lossy(&out.stderr));
    }
    let samples = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let ip = u64::from_str_radix(w.next()?, 16).ok()?;
            Some((ip, w.next().unwrap_or("[unknown]").to_string()))
        })
        .collect();
    Ok(Sampled { samples, runs, ns: total_ns as f64 / runs.max(1) as f64 })
}

/// The table of one frame: the program's lines and the kernel's functions, by share of the
/// samples taken while it ran (the idle CPU's and perf's own left out).
fn report(name: &str, lines: &JitLines, sampled: &Sampled, ns: f64) {
    let Sampled { samples, runs, ns: sampled_ns } = sampled;
    let mut by: HashMap<String, u64> = HashMap::new();
    let mut in_program = 0u64;
    let mut counted = 0u64;
    for (ip, sym) in samples {
        let key = match lines.line(*ip) {
            Some(l) => {
                in_program += 1;
                format!("program {l}")
            }
            None if sym.contains("safe_halt") || sym.starts_with("perf") => continue,
            None => format!("kernel {sym}"),
        };
        counted += 1;
        *by.entry(key).or_default() += 1;
    }
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let share = |n: u64| n as f64 * 100.0 / counted.max(1) as f64;
    println!(
        "**{name}**: {ns:.0} ns a run ({sampled_ns:.0} while sampled: {runs} runs, {counted} samples, {:.1} % in the program's image)\n",
        share(in_program)
    );
    println!("| where | share of samples | ≈ ns a run |");
    println!("|---|---:|---:|");
    for (key, n) in rows.iter().take(20) {
        println!("| {key} | {:.1} % | {:.1} |", share(*n), share(*n) * ns / 100.0);
    }
    println!();
}
