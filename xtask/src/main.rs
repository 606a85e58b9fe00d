//! `cargo xtask <task>`: what cargo alone cannot do.
//!
//! * `fixtures` — write the fixture captures into `tests/data/`.
//! * `test` — the full test run: machine set-up (`scripts/setup`), then every test.

mod fixtures;
mod test;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Fixtures => fixtures::run(),
        Task::Test { no_setup } => test::run(no_setup),
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
