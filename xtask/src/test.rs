//! `cargo xtask test`: the whole test run on a fresh machine. Set-up (scripts/setup), format,
//! lint and doc checks, the committed XDP object must match its sources, the fuzz targets must
//! build, then every test of the workspace; ends with one line `summary: N passed, M failed`
//! over all test binaries.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

fn step(name: &str, cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask test: {name}: {cmd:?}");
    let status = cmd.current_dir(crate::root()).status().with_context(|| format!("running {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    Ok(())
}

/// Runs `cargo test`, echoing its output, and adds up its `test result:` lines.
fn cargo_test(args: &[&str]) -> anyhow::Result<(u64, u64, bool)> {
    eprintln!("xtask test: cargo test {}", args.join(" "));
    let mut child = Command::new("cargo")
        .current_dir(crate::root())
        .arg("test")
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .context("running cargo test")?;
    let (mut passed, mut failed) = (0, 0);
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |word: &str| {
                rest.split(';')
                    .find_map(|p| p.trim().strip_suffix(word)?.trim().rsplit(' ').next()?.parse::<u64>().ok())
            };
            passed += count(" passed").unwrap_or(0);
            failed += count(" failed").unwrap_or(0);
        }
    }
    let ok = child.wait()?.success();
    Ok((passed, failed, ok))
}

pub fn run(no_setup: bool) -> anyhow::Result<()> {
    if !no_setup {
        step("set-up", Command::new("bash").arg("scripts/setup"))?;
    }
    step("format", Command::new("cargo").args(["fmt", "--all", "--", "--check"]))?;
    step(
        "lint",
        Command::new("cargo").args([
            "clippy",
            "--quiet",
            "--workspace",
            "--exclude",
            "analyzer-ebpf",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    step("lint (XDP program)", Command::new("cargo").args(["xtask", "ebpf", "--clippy"]))?;
    step(
        "docs",
        Command::new("cargo")
            .args([
                "doc",
                "--quiet",
                "--no-deps",
                "-p",
                "analyzer-common",
                "-p",
                "analyzer",
                "-p",
                "tests",
                "-p",
                "xtask",
            ])
            .env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    step("layers: imports go down the data flow", Command::new("cargo").args(["xtask", "layers"]))?;
    step("committed XDP object matches the sources", Command::new("cargo").args(["xtask", "ebpf", "--check"]))?;
    step("fuzz targets build", Command::new("cargo").args(["build", "--quiet", "--manifest-path", "fuzz/Cargo.toml"]))?;
    let (passed, failed, ok) = cargo_test(&["--workspace", "--exclude", "analyzer-ebpf", "--no-fail-fast"])?;
    println!("summary: {passed} passed, {failed} failed");
    if !ok || failed > 0 {
        bail!("tests failed");
    }
    if passed == 0 {
        bail!("no test ran");
    }
    Ok(())
}
