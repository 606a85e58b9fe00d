//! `cargo xtask <task>`: what cargo alone cannot do.
//!
//! * `fixtures` — write the fixture captures into `tests/data/`.
//! * `test` — the full test run: machine set-up (`scripts/setup`), then every test.
//! * `bench` — offline throughput over ≥ 1 M frames against tshark, and peak memory.
//! * `layers` — check that the analyzer's imports go down the data flow.
//! * `ebpf` — rebuild the committed XDP object from source (`--check`: verify it is current).

mod bench;
mod bench_kernel;
mod bench_stats;
mod earlier_object;
mod ebpf;
mod fixtures;
mod layers;
mod profile;
mod soak;
mod test;
mod xdp_gen;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Write the fixture captures into tests/data/.
    Fixtures,
    /// Set up the machine (scripts/setup) and run every test: unit, property, integration,
    /// the tshark differential and the privileged kernel tests.
    Test {
        /// Skip scripts/setup (the tools must already be installed).
        #[arg(long)]
        no_setup: bool,
    },
    /// Offline throughput over a generated capture against tshark, and peak memory.
    Bench {
        /// Frames in the generated capture.
        #[arg(long, default_value_t = 1_000_000)]
        frames: usize,
        /// Runs of roce-analyzer (the best is reported).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// Check that the analyzer's imports go one way, down the data flow (docs/ARCHITECTURE.md).
    Layers,
    /// Rebuild the committed XDP object from analyzer-ebpf (for builds without the eBPF
    /// toolchain); with --check, fail if the committed one does not match the sources.
    Ebpf {
        #[arg(long)]
        check: bool,
        /// Run clippy over the XDP program (for the BPF target) instead.
        #[arg(long, conflicts_with = "check")]
        clippy: bool,
    },
    /// (root) The XDP program per frame against XDP_PASS, replay over veth, agent CPU.
    BenchKernel {
        /// BPF_PROG_TEST_RUN repetitions per measurement.
        #[arg(long, default_value_t = 1_000_000)]
        repeat: u32,
        /// Seconds of replay for the veth measurements.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Runs of each agent-CPU configuration (medians reported; the agents take turns).
        #[arg(long, default_value_t = 3)]
        agent_runs: u32,
        /// Also measure this build of the XDP object in the same run (e.g. an earlier
        /// release's `analyzer-ebpf/prebuilt/roce-analyzer.bpf.o`), for a before/after ratio.
        #[arg(long, value_name = "OBJECT")]
        compare: Option<std::path::PathBuf>,
        /// Also measure this build of the agent's binary (e.g. the previous release's) in the
        /// agent-CPU runs and, with the program it embeds, on the realistic traffic of the same
        /// measurement.
        #[arg(long, value_name = "BINARY")]
        compare_agent: Option<std::path::PathBuf>,
        /// Only these parts (default: all).
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<bench_kernel::Part>,
    },
    /// The live agent's RSS over a long flood with flow churn (root; BENCHMARKS.md).
    LiveRss {
        /// Seconds of flood.
        #[arg(long, default_value_t = 120)]
        seconds: u64,
    },
    /// (Used by `bench`.) Write a generated capture of at least N frames to PATH.
    #[command(hide = true)]
    BenchCapture { path: std::path::PathBuf, frames: usize },
    /// (Used by `bench-kernel`.) Write the 10 000-flow capture of the agent-CPU measurement,
    /// repeated LOOPS times with advancing timestamps.
    #[command(hide = true)]
    FlowsCapture {
        path: std::path::PathBuf,
        loops: u32,
        /// Distinct flows (each a source address, QP and UDP port of its own).
        #[arg(long, default_value_t = 10_000)]
        flows: u32,
        /// Each frame in an ERSPAN II copy (what a mirror collector port receives).
        #[arg(long)]
        mirrored: bool,
    },
    /// (For BENCHMARKS.md.) Write the same FRAMES frames as seen at two vantage points,
    /// DIR/leaf.pcap and DIR/spine.pcap.
    #[command(hide = true)]
    VantageCapture { dir: std::path::PathBuf, frames: u32 },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Fixtures => fixtures::run(),
        Task::Test { no_setup } => test::run(no_setup),
        Task::Ebpf { check, clippy } => ebpf::run(check, clippy),
        Task::Layers => layers::run(),
        Task::BenchKernel { repeat, seconds, agent_runs, compare, compare_agent, only } => {
            bench_kernel::run(repeat, seconds, agent_runs, compare.as_deref(), compare_agent.as_deref(), &only)
        }
        Task::Bench { frames, repeat } => bench::run(frames, repeat.max(1)),
        Task::LiveRss { seconds } => bench_kernel::live_rss(seconds),
        Task::BenchCapture { path, frames } => bench::write_capture(&path, frames).map(|n| println!("{n}")),
        Task::FlowsCapture { path, loops, flows, mirrored } => {
            bench_kernel::flows_capture(&path, flows, loops, mirrored)
        }
        Task::VantageCapture { dir, frames } => bench_kernel::vantage_capture(&dir, frames),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root.
pub fn root() -> std::path::PathBuf {
    let mut p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    p.pop();
    p
}
