//! `cargo xtask bench`: the offline engine over a generated capture of ≥ 1 M frames, against
//! `tshark -T fields` extracting the same fields from the same file, in the same run; and peak
//! memory at two capture sizes (bounded by flows, not frames). Prints a Markdown table for
//! BENCHMARKS.md. roce-analyzer reads and classifies a capture on a second thread: the table
//! gives wall time and CPU time (user + system, all threads), and `--one-thread` runs what one
//! core does.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use tests::synth::pcap::{PcapOptions, write_pcap};
use tests::synth::scenario::{ScenarioOptions, cluster};

struct Run {
    seconds: f64,
    /// User and system time of all the child's threads.
    cpu_seconds: f64,
    max_rss_kib: i64,
}

/// Runs `cmd` to completion, measuring wall time, the child's CPU time and peak RSS (wait4).
fn measure(cmd: &mut Command) -> anyhow::Result<Run> {
    let start = Instant::now();
    let child = cmd.stdout(Stdio::null()).spawn().with_context(|| format!("spawning {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter for wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child, with valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    if r != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{cmd:?} failed (status {status})");
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Run { seconds, cpu_seconds: secs(usage.ru_utime) + secs(usage.ru_stime), max_rss_kib: usage.ru_maxrss })
}

/// Writes a capture of at least `frames` frames (16 hosts in a ring, 64 KiB messages at
/// PMTU 4096: at least 16 × 17 frames per message round). Runs in its own process (see
/// [`generate`]) so that the measured children do not inherit its memory.
pub fn write_capture(path: &Path, frames: usize) -> anyhow::Result<usize> {
    let mut o = ScenarioOptions { hosts: 16, message_bytes: 64 * 1024, ..Default::default() };
    o.messages = (frames / (16 * 17) + 1) as u32;
    let recs = cluster(&o);
    let w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    write_pcap(w, PcapOptions { nanosecond: true, snaplen: 128, ..Default::default() }, &recs)?;
    Ok(recs.len())
}

/// Runs `cargo xtask bench-capture PATH N` as a child process; returns the frames written.
fn generate(path: &Path, frames: usize) -> anyhow::Result<usize> {
    let out = Command::new(std::env::current_exe()?).arg("bench-capture").arg(path).arg(frames.to_string()).output()?;
    if !out.status.success() {
        bail!("generating {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

/// Builds and returns the release `roce-analyzer`.
pub fn analyzer_binary() -> anyhow::Result<PathBuf> {
    let status = Command::new("cargo")
        .current_dir(crate::root())
        .args(["build", "--release", "--quiet", "--package", "analyzer", "--bin", "roce-analyzer"])
        .status()?;
    if !status.success() {
        bail!("building roce-analyzer failed");
    }
    Ok(crate::root().join("target/release/roce-analyzer"))
}

pub fn run(frames: usize, repeat: usize) -> anyhow::Result<()> {
    let bin = analyzer_binary()?;
    let dir = tempfile::tempdir()?;
    let big = dir.path().join("bench.pcap");
    let small = dir.path().join("bench-quarter.pcap");
    let n = generate(&big, frames)?;
    let n4 = generate(&small, frames / 4)?;
    let size = std::fs::metadata(&big)?.len();
    eprintln!("xtask bench: {n} frames ({:.1} MB) and {n4} frames", size as f64 / 1e6);

    let ours = |file: &Path, extra: &[&str]| -> anyhow::Result<Run> {
        let mut best: Option<Run> = None;
        for _ in 0..repeat {
            let r =
                measure(Command::new(&bin).arg("-q").arg("-r").arg(file).args(["--json", "/dev/null"]).args(extra))?;
            if best.as_ref().is_none_or(|b| r.seconds < b.seconds) {
                best = Some(r);
            }
        }
        Ok(best.expect("repeat ≥ 1"))
    };
    let a = ours(&big, &[])?;
    let a4 = ours(&small, &[])?;
    let one = ours(&big, &["--one-thread"])?;
    let mut t = Command::new("tshark");
    t.args(["-n", "-r"]).arg(&big).args(["-T", "fields"]);
    for f in tests::tools::TSHARK_FIELDS {
        t.args(["-e", f]);
    }
    let ts = measure(&mut t)?;

    let fps = |r: &Run, n: usize| n as f64 / r.seconds;
    let cps = |r: &Run, n: usize| n as f64 / r.cpu_seconds;
    println!("| measurement | frames | seconds | frames/s | CPU seconds | frames per CPU-second | peak RSS (MiB) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let row = |what: &str, r: &Run, n: usize| {
        println!(
            "| {what} | {n} | {:.3} | {:.3} M | {:.3} | {:.3} M | {:.1} |",
            r.seconds,
            fps(r, n) / 1e6,
            r.cpu_seconds,
            cps(r, n) / 1e6,
            r.max_rss_kib as f64 / 1024.0
        )
    };
    row(&format!("roce-analyzer (best of {repeat})"), &a, n);
    row("roce-analyzer, quarter capture", &a4, n4);
    row(&format!("roce-analyzer --one-thread (best of {repeat})"), &one, n);
    row(&format!("tshark -T fields ({} fields)", tests::tools::TSHARK_FIELDS.len()), &ts, n);
    println!(
        "\nspeed-up over tshark in this run: {:.0}× in wall time, {:.0}× in CPU time",
        ts.seconds / a.seconds,
        ts.cpu_seconds / a.cpu_seconds
    );
    println!("with --one-thread (one core): {:.0}×", ts.seconds / one.seconds);
    Ok(())
}
