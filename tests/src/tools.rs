//! Running the binary and the external oracles from tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `roce-analyzer` binary of this build.
pub fn binary() -> PathBuf {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    p.pop();
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| p.join("target"));
    target.join(profile).join("roce-analyzer")
}

/// Runs `roce-analyzer` with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(binary()).args(args).output().expect("roce-analyzer runs")
}

/// Finds a tool on PATH; `None` when absent.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// True when the process runs as root (the privileged tests need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The path of a tool the tests cannot do without. Absence is a loud failure, never a skip:
/// `scripts/setup` installs it.
pub fn require(tool: &str) -> PathBuf {
    which(tool).unwrap_or_else(|| panic!("{tool} is not installed: run scripts/setup (as root) first"))
}
