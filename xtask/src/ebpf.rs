//! `cargo xtask ebpf`: builds the XDP object from analyzer-ebpf (as aya-build does) and
//! refreshes the committed copy with the hash of the sources it came from, so that machines
//! without nightly + rust-src + bpf-linker can still build roce-analyzer.
//!
//! `--check` (run by `cargo xtask test`) fails when the committed object is stale: its
//! recorded source hash differs from the sources, its bytes differ from its recorded hash, or
//! a fresh build from source differs from it in any program, map or data section (debug info
//! and BTF, which carry build paths, are left out of the comparison).

#[path = "../../analyzer/build/ebpf_object.rs"]
mod ebpf_object;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use object::{Object, ObjectSection};

/// `cargo +nightly SUBCOMMAND` on the eBPF crate for the BPF target, as aya-build builds it.
fn nightly_cargo(subcommand: &str, target_dir: &str, extra: &[&str]) -> anyhow::Result<()> {
    nightly_cargo_cfg(subcommand, target_dir, extra, None)
}

/// [`nightly_cargo`] with `--cfg CFG` for the program (a benchmark variant).
fn nightly_cargo_cfg(subcommand: &str, target_dir: &str, extra: &[&str], cfg: Option<&str>) -> anyhow::Result<()> {
    if let Some(why) = ebpf_object::toolchain_missing() {
        bail!("cannot build the XDP object: {why} (run scripts/setup)");
    }
    let root = crate::root();
    let mut flags = ["--cfg=bpf_target_arch=\"x86_64\"", "-Cdebuginfo=2", "-Clink-arg=--btf"].join("\x1f");
    if let Some(cfg) = cfg {
        flags.push_str(&format!("\x1f--cfg={cfg}"));
    }
    let status = Command::new("rustup")
        .current_dir(&root)
        .args(["run", "nightly", "cargo", subcommand, "--package", "analyzer-ebpf", "--bins", "--release"])
        .args(["--target", "bpfel-unknown-none", "-Z", "build-std=core", "--target-dir"])
        .arg(root.join(target_dir))
        .args(extra)
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .context("running cargo +nightly")?;
    if !status.success() {
        bail!("cargo {subcommand} of analyzer-ebpf failed");
    }
    Ok(())
}

/// Builds a variant of the object with fewer accounting stages (`roce_stages` = `stages`:
/// "classify", "flow", "noclock", or the lower bounds of `analyzer-ebpf/src/floor.rs`:
/// "clock", "bare", "bare_noclock") for the kernel benchmark; returns the object's bytes, or
/// why it cannot be built here.
pub fn build_stage_variant(stages: &str) -> anyhow::Result<Vec<u8>> {
    let dir = format!("target/ebpf-stages-{stages}");
    nightly_cargo_cfg("build", &dir, &[], Some(&format!("roce_stages=\"{stages}\"")))?;
    let path = crate::root().join(dir).join("bpfel-unknown-none/release/roce-analyzer");
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}

/// Builds the object from source exactly as aya-build does; returns its path.
pub fn build() -> anyhow::Result<PathBuf> {
    nightly_cargo("build", "target/ebpf", &[])?;
    Ok(crate::root().join("target/ebpf/bpfel-unknown-none/release/roce-analyzer"))
}

/// Clippy over the XDP program, for its target, with warnings as errors (the workspace's lints).
pub fn clippy() -> anyhow::Result<()> {
    nightly_cargo("clippy", "target/ebpf-clippy", &["--", "-D", "warnings"])
}

/// The sections that make up the program: code, relocations, maps, read-only data.
fn program_sections(bytes: &[u8]) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let file = object::File::parse(bytes)?;
    let mut v = Vec::new();
    for s in file.sections() {
        let name = s.name()?.to_string();
        let skip = name.is_empty()
            || name.contains("debug")
            || name.contains("BTF")
            || matches!(name.as_str(), ".symtab" | ".strtab");
        if !skip {
            v.push((name, s.data()?.to_vec()));
        }
    }
    v.sort();
    Ok(v)
}

pub fn run(check: bool, lint: bool) -> anyhow::Result<()> {
    if lint {
        return clippy();
    }
    let root = crate::root();
    let committed = root.join(ebpf_object::OBJECT);
    let sources = ebpf_object::sources_hash(&root)?;
    if check {
        let (rec_sources, rec_object) = ebpf_object::read_record(&root)?;
        if rec_sources != sources {
            bail!(
                "{} is stale: recorded sources {rec_sources}, sources now {sources}; run `cargo xtask ebpf` and commit",
                ebpf_object::OBJECT
            );
        }
        if ebpf_object::file_hash(&committed)? != rec_object {
            bail!("{} does not match its recorded hash; run `cargo xtask ebpf`", ebpf_object::OBJECT);
        }
        let fresh = build()?;
        let (a, b) = (program_sections(&std::fs::read(&committed)?)?, program_sections(&std::fs::read(&fresh)?)?);
        if a != b {
            let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, d)| format!("{n}:{}", d.len())).collect::<Vec<_>>();
            bail!(
                "a build from source differs from the committed object ({:?} vs {:?}); run `cargo xtask ebpf`",
                names(&a),
                names(&b)
            );
        }
        println!("xtask ebpf: committed object matches the sources ({sources})");
        return Ok(());
    }
    let fresh = build()?;
    std::fs::create_dir_all(committed.parent().expect("has a parent"))?;
    std::fs::copy(&fresh, &committed)?;
    let object = ebpf_object::file_hash(&committed)?;
    std::fs::write(root.join(ebpf_object::RECORD), ebpf_object::record_text(&sources, &object))?;
    println!("xtask ebpf: wrote {} (sources {sources})", ebpf_object::OBJECT);
    Ok(())
}
