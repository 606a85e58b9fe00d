//! Command-line interface (clap). Kept in the library so tests can check it.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::capture::input::InputSpec;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  the analysis ran and the report is complete
  1  error (unreadable or malformed input, I/O, privileges); the message names file and offset
  2  usage error
  3  report written, but partial: an input ended inside a record";

#[derive(Debug, Parser)]
#[command(
    name = "roce-analyzer",
    version,
    about = "RoCE v2 / PFC analyzer: offline pcap/pcapng analysis (and, with --iface, live XDP capture)",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub analyze: AnalyzeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    /// A progress bar when stderr is a terminal and the input is large.
    Auto,
    Always,
    Never,
}

#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Capture file (pcap or pcapng) to analyse, as FILE or LABEL=FILE; repeat it for several
    /// vantage points (e.g. one per uplink mirror). All go through one analysis.
    #[arg(short = 'r', long = "pcap", value_name = "[LABEL=]FILE", value_parser = InputSpec::parse)]
    pub pcap: Vec<InputSpec>,

    /// Write the JSON report (schema roce-analyzer/report/v1) to PATH, or to stdout for `-`
    /// (the human summary is then not printed).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Flows listed in the human summary.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,

    /// Do not print the human summary.
    #[arg(short, long)]
    pub quiet: bool,

    /// Progress bar on stderr.
    #[arg(long, value_enum, default_value_t = Progress::Auto)]
    pub progress: Progress,
}
