#![allow(dead_code)] // build.rs and xtask each use part of it
//! Which sources the XDP object is built from, their hash, and whether the eBPF toolchain is
//! present. Shared by analyzer's build.rs and `cargo xtask ebpf` (included with `#[path]`).

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The committed object, for builds without the eBPF toolchain.
pub const OBJECT: &str = "analyzer-ebpf/prebuilt/roce-analyzer.bpf.o";
/// `sources <sha256>` and `object <sha256>` lines describing the committed object.
pub const RECORD: &str = "analyzer-ebpf/prebuilt/roce-analyzer.bpf.o.sha256";
/// What the object is built from (relative to the workspace root).
pub const SOURCES: &[&str] =
    &["analyzer-ebpf/Cargo.toml", "analyzer-ebpf/src", "analyzer-common/Cargo.toml", "analyzer-common/src"];

fn files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let p = root.join(rel);
    if p.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(&p)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            files(root, &rel.join(e.file_name()), out)?;
        }
    } else {
        out.push(rel.to_path_buf());
    }
    Ok(())
}

/// SHA-256 over every source file's relative path, length and bytes, in path order.
pub fn sources_hash(root: &Path) -> io::Result<String> {
    let mut list = Vec::new();
    for s in SOURCES {
        files(root, Path::new(s), &mut list)?;
    }
    let mut h = Sha256::new();
    for rel in list {
        let bytes = std::fs::read(root.join(&rel))?;
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(hex(&h.finalize()))
}

pub fn file_hash(path: &Path) -> io::Result<String> {
    Ok(hex(&Sha256::digest(std::fs::read(path)?)))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The recorded (sources, object) hashes of the committed object.
pub fn read_record(root: &Path) -> io::Result<(String, String)> {
    let text = std::fs::read_to_string(root.join(RECORD))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::to_string))
            .ok_or_else(|| io::Error::other(format!("{RECORD}: no `{name}` line")))
    };
    Ok((field("sources")?, field("object")?))
}

pub fn record_text(sources: &str, object: &str) -> String {
    format!("sources {sources}\nobject {object}\n")
}

/// `None` when nightly with rust-src and bpf-linker are present; otherwise what is missing.
pub fn toolchain_missing() -> Option<String> {
    let sysroot = Command::new("rustup").args(["run", "nightly", "rustc", "--print", "sysroot"]).output();
    let sysroot = match sysroot {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => return Some("no nightly toolchain (rustup run nightly rustc)".into()),
    };
    if !sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        return Some("nightly has no rust-src component".into());
    }
    match Command::new("bpf-linker").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("bpf-linker is not installed".into()),
    }
}
