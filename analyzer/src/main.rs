//! `roce-analyzer`: a thin binary over the `analyzer` library.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use analyzer::cli::{AnalyzeArgs, Cli, Progress};
use analyzer::engine::Engine;
use analyzer::exit;
use analyzer::report::{Report, RunKind, human, write};
use anyhow::Context;
use clap::Parser;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli.analyze) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("roce-analyzer: error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}

fn run(args: AnalyzeArgs) -> anyhow::Result<u8> {
    if args.pcap.is_empty() {
        eprintln!("roce-analyzer: error: nothing to analyse: give --pcap FILE (see --help)");
        return Ok(exit::USAGE);
    }
    let mut engine = Engine::new();
    let bar = progress_bar(&args);
    let truncations = analyzer::offline::analyze_files(&mut engine, &args.pcap, |path, bytes| {
        if let Some(b) = &bar {
            b.set_message(path.display().to_string());
            b.set_position(bytes);
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let truncations = truncations?;
    for t in &truncations {
        eprintln!("roce-analyzer: warning: {t}; the report is partial");
    }
    let report = Report::from_engine(&engine, RunKind::Offline);
    let to_stdout = args.json.as_deref() == Some(Path::new("-"));
    if let Some(path) = &args.json {
        let text = write::to_json(&report)?;
        write::write_atomic(path, &text).with_context(|| "writing the JSON report")?;
    }
    if !args.quiet && !to_stdout {
        print!("{}", human::render(&report, args.top));
    }
    Ok(if report.capture.partial { exit::PARTIAL } else { exit::OK })
}

/// A byte-based progress bar over all inputs, when wanted.
fn progress_bar(args: &AnalyzeArgs) -> Option<indicatif::ProgressBar> {
    let total: u64 = args.pcap.iter().filter_map(|i| std::fs::metadata(&i.path).ok()).map(|m| m.len()).sum();
    let show = match args.progress {
        Progress::Never => false,
        Progress::Always => true,
        Progress::Auto => std::io::stderr().is_terminal() && total > 8 << 20,
    };
    if !show {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(bar)
}
