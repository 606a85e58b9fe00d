//! `cargo xtask test`: set-up, then every test of the workspace.

use std::process::Command;

use anyhow::{Context, bail};

fn step(name: &str, cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask test: {name}: {cmd:?}");
    let status = cmd.current_dir(crate::root()).status().with_context(|| format!("running {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    Ok(())
}

pub fn run(no_setup: bool) -> anyhow::Result<()> {
    if !no_setup {
        step("set-up", Command::new("bash").arg("scripts/setup"))?;
    }
    // The binary must exist for the integration tests that run it.
    step("build", Command::new("cargo").args(["build", "--workspace", "--bins"]))?;
    step("tests", Command::new("cargo").args(["test", "--workspace", "--no-fail-fast"]))?;
    Ok(())
}
