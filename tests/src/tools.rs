//! Running the binary and the external oracles from tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
pub fn root() -> PathBuf {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    p.pop();
    p
}

/// The `roce-analyzer` binary of this build profile, built once per test process so that a
/// plain `cargo test` on a clean checkout never runs a stale or missing binary.
/// `ROCE_ANALYZER_BIN` names another one (the benchmarks use the release build).
pub fn binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("ROCE_ANALYZER_BIN") {
                return PathBuf::from(p);
            }
            let release = !cfg!(debug_assertions);
            let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            cmd.current_dir(root()).args(["build", "--quiet", "--package", "analyzer", "--bin", "roce-analyzer"]);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("cargo runs");
            assert!(status.success(), "building roce-analyzer failed");
            let target =
                std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
            let bin = target.join(if release { "release" } else { "debug" }).join("roce-analyzer");
            assert!(bin.is_file(), "{} was not built", bin.display());
            bin
        })
        .clone()
}

/// Runs `roce-analyzer` with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(binary()).args(args).output().expect("roce-analyzer runs")
}

/// Finds a tool on PATH; `None` when absent.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// The path of a tool the tests cannot do without. Absence is a loud failure, never a skip:
/// `scripts/setup` installs it.
pub fn require(tool: &str) -> PathBuf {
    which(tool).unwrap_or_else(|| panic!("{tool} is not installed: run scripts/setup (as root) first"))
}

/// True when the process runs as root (the privileged tests need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The tshark fields the differential test compares (and the benchmark extracts): addresses,
/// UDP source port, BTH, RETH DMA length, AETH syndrome, ECN/DSCP, GRH, MAC control.
pub const TSHARK_FIELDS: &[&str] = &[
    "frame.len",
    "eth.src",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "infiniband.grh.sgid",
    "infiniband.grh.dgid",
    "udp.srcport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "ip.dsfield.ecn",
    "ip.dsfield.dscp",
    "ipv6.tclass.ecn",
    "ipv6.tclass.dscp",
    "infiniband.grh.tclass",
    "macc.opcode",
    "macc.cbfc.enbv",
    "macc.cbfc.pause_time.c0",
    "macc.cbfc.pause_time.c1",
    "macc.cbfc.pause_time.c2",
    "macc.cbfc.pause_time.c3",
    "macc.cbfc.pause_time.c4",
    "macc.cbfc.pause_time.c5",
    "macc.cbfc.pause_time.c6",
    "macc.cbfc.pause_time.c7",
    "macc.pause_time",
];
