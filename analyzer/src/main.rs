//! `roce-analyzer`: a thin binary over the `analyzer` library.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use analyzer::cli::{AnalyzeArgs, Command, MergeArgs, OutputArgs, Progress, ReplayArgs};
use analyzer::exit;
use analyzer::model::{OutputFailure, Report};
use analyzer::pipeline::Pipeline;
use analyzer::report::assemble::Lists;
use analyzer::report::render::text::escape;
use analyzer::report::render::{dot, html, human};
use analyzer::report::{RunKind, export, write};
use anyhow::Context;

fn main() -> ExitCode {
    let cli = match analyzer::cli::parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(exit::OK);
        }
        Err(e) => {
            usage_error(&e);
            return ExitCode::from(exit::USAGE);
        }
    };
    if let Some(what) = cli.generate {
        return match analyzer::cli::generate(what, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::from(exit::OK),
            Err(e) => {
                eprintln!("roce-analyzer: error: --generate: {e}");
                ExitCode::from(exit::ERROR)
            }
        };
    }
    let result = match cli.command {
        Some(Command::Replay(r)) => replay(r),
        Some(Command::Merge(m)) => merge(m),
        Some(Command::ClickhouseRows(r)) => clickhouse_rows(r),
        None => analyze(cli.analyze),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader of our output went away (`roce-analyzer … | head`): nothing to say.
        Err(e) if broken_pipe(&e) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("roce-analyzer: error: {}", escape(&format!("{e:#}")));
            ExitCode::from(exit::ERROR)
        }
    }
}

/// Checks before any work that every output can be written (and clears what killed runs left),
/// opening the directories they will be written in.
fn prepare_outputs(out: &OutputArgs) -> anyhow::Result<write::Prepared> {
    let prepare = |p: &Option<std::path::PathBuf>, what: &str| -> anyhow::Result<Option<write::Target>> {
        let Some(p) = p else { return Ok(None) };
        let (target, removed) = write::Target::prepare(p).with_context(|| format!("the {what} cannot be written"))?;
        if removed > 0 {
            eprintln!(
                "roce-analyzer: removed {removed} temporary file(s) beside {} that killed runs left",
                escape(&p.display().to_string())
            );
        }
        Ok(Some(target))
    };
    Ok(write::Prepared {
        json: prepare(&out.json, "JSON report")?,
        html: prepare(&out.html, "HTML page")?,
        dot: prepare(&out.dot, "Graphviz file")?,
    })
}

/// `--evidence`, its directory opened and an earlier run's files there moved aside.
fn prepare_evidence(args: &AnalyzeArgs) -> anyhow::Result<Option<analyzer::report::evidence::Options>> {
    let Some(mut o) = args.evidence() else { return Ok(None) };
    let p = analyzer::report::evidence::prepare(&o.dir).context("--evidence")?;
    if let Some(aside) = &p.aside {
        eprintln!(
            "roce-analyzer: moved {} evidence file(s) of an earlier run to {}",
            p.moved,
            escape(&aside.display().to_string())
        );
    }
    (o.dir, o.handle) = (p.dir, Some(p.handle));
    Ok(Some(o))
}

/// A usage error, each line escaped as the summary is (a value may hold an escape sequence),
/// saying which environment variables stood for the flags it names.
fn usage_error(e: &clap::Error) {
    let text = e.render().to_string();
    let mut err = String::new();
    for line in text.lines() {
        err.push_str(&escape(line));
        err.push('\n');
    }
    for name in analyzer::cli::env_behind(&analyzer::cli::command(), &text) {
        err.push_str(&format!("note: {name} is set in the environment and stands for its flag\n"));
    }
    eprint!("{err}");
}

/// Whether `e` comes from writing to a pipe whose reader has closed it.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn analyze(mut args: AnalyzeArgs) -> anyhow::Result<u8> {
    let stdout = Some(Path::new("-"));
    if let Some(why) = args.usage_error() {
        eprintln!("roce-analyzer: error: {why}");
        return Ok(exit::USAGE);
    }
    // Export lines on standard output: nothing else goes there.
    args.output.quiet |= args.export.as_deref() == stdout;
    let to = prepare_outputs(&args.output)?;
    let evidence = prepare_evidence(&args)?;
    let kind = if args.iface.is_some() { RunKind::Live } else { RunKind::Offline };
    let mut exporter = exporter(&args, kind)?;
    let mut spool = match &evidence {
        Some(o) if kind == RunKind::Offline => {
            Some(analyzer::report::evidence::spool::Spool::create(&o.dir, o.snaplen).context("--evidence")?)
        }
        _ => None,
    };
    let (run, failed, live_evidence) = match &args.iface {
        Some(iface) => {
            let o = live(&args, iface, &mut exporter, evidence.clone(), to.json.as_ref())?;
            let ring_full =
                o.counters.get(analyzer_common::maps::counter::EVIDENCE_FULL as usize).copied().unwrap_or(0);
            (o.run, o.failed, o.evidence.map(|e| (e, ring_full)))
        }
        None => (offline(&args, spool.as_mut())?, None, None),
    };
    let mut failures = Vec::new();
    let export_stats = exporter.as_mut().map(|x| finish_export(x, &run, kind, &args, &mut failures));
    // Without a summary, HTML page or gate to feed, the report's flow lists are streamed from
    // the run into the JSON file instead of being held (memory per flow, BENCHMARKS.md).
    let out = &args.output;
    let streamed = out.html.is_none() && out.fail_on.is_empty() && (out.quiet || out.json.as_deref() == stdout);
    let mut report = Report::assemble_with(&run, kind, if streamed { Lists::Streamed } else { Lists::Held });
    if let (Some(o), Some(spool)) = (evidence, spool)
        && let Err(e) = analyzer::report::evidence::cut_offline(&mut report, &run, spool, o)
    {
        fail(&mut failures, "--evidence", &anyhow::Error::new(e));
    }
    if let Some((e, ring_full)) = live_evidence {
        report.evidence = Some(e.finish(&mut report, ring_full));
    }
    if let Some(e) = report.evidence.as_ref().filter(|e| !e.errors.is_empty()) {
        let more = if e.errors.len() > 1 { format!(" (and {} more)", e.errors.len() - 1) } else { String::new() };
        fail(&mut failures, "--evidence", &anyhow::anyhow!("{}{more}", e.errors[0]));
    }
    if let Some(x) = export_stats.as_ref().filter(|x| x.dropped > 0) {
        report.visibility.push(export_note(x));
    }
    report.export = export_stats;
    report.output_failures = failures;
    let code = if streamed {
        emit(&mut report, Some(&run), &[], out, &to)?
    } else {
        let rtt = run.analyses.rtt.all_samples();
        emit(&mut report, None, &rtt, out, &to)?
    };
    match failed {
        // The report is written; the run still failed.
        Some(why) => {
            eprintln!("roce-analyzer: error: {why}");
            Ok(exit::ERROR)
        }
        None => Ok(code),
    }
}

fn clickhouse_rows(r: analyzer::cli::RowsArgs) -> anyhow::Result<u8> {
    let w = export::clickhouse::write_rows(&r.exports, &r.out)?;
    let counts: Vec<String> = w.rows.iter().map(|(t, n)| format!("{} {n}", t.name())).collect();
    eprintln!("roce-analyzer: rows written to {}: {}", escape(&r.out.display().to_string()), counts.join(", "));
    if w.unfinished > 0 {
        eprintln!("roce-analyzer: {} line(s) of intervals that never closed (a killed agent) left out", w.unfinished);
    }
    Ok(exit::OK)
}

fn merge(m: MergeArgs) -> anyhow::Result<u8> {
    if let Some(why) = m.usage_error() {
        eprintln!("roce-analyzer: error: {why}");
        return Ok(exit::USAGE);
    }
    let to = prepare_outputs(&m.output)?;
    let mut reports = Vec::new();
    for p in &m.reports {
        reports.extend(analyzer::report::merge::read_any(p, m.fabric.input_max_bytes)?);
    }
    emit(&mut analyzer::report::merge::merge(reports, &m.fabric.options()?)?, None, &[], &m.output, &to)
}

/// The exporter of `--export` and `--export-clickhouse`, when either is given.
fn exporter(args: &AnalyzeArgs, kind: RunKind) -> anyhow::Result<Option<export::Exporter>> {
    if args.export.is_none() && args.export_clickhouse.is_none() {
        return Ok(None);
    }
    let sink = match &args.export {
        Some(path) => {
            let rotation = export::Rotation { max_bytes: args.export_max_bytes, keep: args.export_keep as usize };
            export::Sink::open(path, rotation).context("--export")?
        }
        None => export::Sink::nowhere(),
    };
    let start = (kind == RunKind::Live).then(wall_ns);
    let mut x = export::Exporter::new(sink, export::host_name(), kind, start);
    if let Some(url) = &args.export_clickhouse {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let opts = export::clickhouse::SenderOptions {
            url: url.clone(),
            database: args.clickhouse_database.clone(),
            prefix: args.clickhouse_table_prefix.clone(),
            user: env("ROCE_ANALYZER_CLICKHOUSE_USER"),
            password: env("ROCE_ANALYZER_CLICKHOUSE_PASSWORD"),
            buffer_bytes: usize::try_from(args.export_buffer).unwrap_or(usize::MAX),
            timeout: std::time::Duration::from_secs(10),
        };
        x = x.with_clickhouse(export::clickhouse::Sender::start(opts)?);
    }
    Ok(Some(x))
}

/// The run's last export lines, the ClickHouse sender's end, and what they wrote and gave up.
fn finish_export(
    x: &mut export::Exporter,
    run: &Pipeline,
    kind: RunKind,
    args: &AnalyzeArgs,
    failures: &mut Vec<OutputFailure>,
) -> analyzer::model::ExportStats {
    let end = if kind == RunKind::Live { wall_ns() } else { run.engine.last_ns.unwrap_or(0) };
    match x.export(run, end, true) {
        Err(e) => fail(failures, "--export", &anyhow::Error::new(e)),
        // Failed earlier in a live run (said then), recovered since: listed, not said again.
        Ok(_) => {
            let earlier = x.sink().failed.clone();
            failures.extend(earlier.map(|error| OutputFailure { output: "--export".into(), error }));
        }
    }
    if let Some(ch) = x.finish_clickhouse(*args.export_wait)
        && ch.counts.dropped > 0
    {
        let first = ch.first_error.unwrap_or_default();
        let e = anyhow::anyhow!("{} row(s) dropped; first error: {first}", ch.counts.dropped);
        fail(failures, "--export-clickhouse", &e);
    }
    x.stats()
}

/// The note that export lines were given up, by sink.
fn export_note(x: &analyzer::model::ExportStats) -> analyzer::model::Note {
    let ch = x.clickhouse.as_ref().map_or(0, |c| c.dropped);
    analyzer::model::Note::new(
        analyzer::model::NoteCode::ExportDropped,
        format!(
            "{} export line(s) given up ({} by the files: a full disk or a removed directory, none cut; {ch} by \
             --export-clickhouse: a full --export-buffer or the server away at the end): the store misses them, this \
             report does not",
            x.dropped,
            x.dropped - ch
        ),
    )
}

/// An output that failed while the others went on: said once on standard error, with its
/// causes, and added to the list the report carries (`output_failures`).
fn fail(list: &mut Vec<OutputFailure>, output: &str, e: &anyhow::Error) {
    let error = format!("{e:#}");
    eprintln!("roce-analyzer: error: {output}: {}", escape(&error));
    list.push(OutputFailure { output: output.into(), error });
}

/// Writes the report (HTML, Graphviz, JSON, human summary, in that order: a failing file output
/// does not stop the others and is listed in the ones after it) and applies the gates; returns
/// the exit code (3 when an output failed). `rtt_ns` are the RTT samples behind the report (for
/// the HTML histogram). With `streamed_from`, the report was assembled without its growing
/// lists ([`Lists::Streamed`]) and the JSON writes them from that run.
fn emit(
    report: &mut Report,
    streamed_from: Option<&Pipeline>,
    rtt_ns: &[u64],
    out: &OutputArgs,
    to: &write::Prepared,
) -> anyhow::Result<u8> {
    let to_stdout = out.json.as_deref() == Some(Path::new("-"));
    if let Some(target) = &to.html {
        let dir = out.html.as_deref().and_then(Path::parent).filter(|d| !d.as_os_str().is_empty());
        let evidence = report
            .evidence
            .as_ref()
            .map(|e| analyzer::report::render::page::relative(dir.unwrap_or(Path::new(".")), Path::new(&e.dir)));
        let text = html::render(report, &analyzer::report::render::page::Page { top: out.top, rtt_ns, evidence });
        if let Err(e) = write::write_atomic(target, text.as_bytes()) {
            fail(&mut report.output_failures, "--html", &anyhow::Error::new(e));
        }
    }
    if let Some(target) = &to.dot {
        let text = dot::dot(&report.congestion_tree);
        if let Err(e) = write::write_atomic(target, text.as_bytes()) {
            fail(&mut report.output_failures, "--dot", &anyhow::Error::new(e));
        }
    }
    if let Some(target) = &to.json {
        match streamed_from {
            Some(run) => write::write_json_streamed(target, report, run),
            None => write::write_json(target, report),
        }
        .or_else(|e| {
            if to_stdout {
                Err(anyhow::Error::new(e))
            } else {
                fail(&mut report.output_failures, "--json", &anyhow::Error::new(e));
                Ok(())
            }
        })
        .context("writing the JSON report")?;
    }
    if !out.quiet && !to_stdout {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(human::render(report, out.top).as_bytes())
            .and_then(|_| stdout.flush())
            .context("printing the summary")?;
    }
    if !out.fail_on.is_empty() {
        let value = serde_json::to_value(&*report).context("the report as JSON")?;
        let mut tripped = false;
        for gate in &out.fail_on {
            match gate.check(&value) {
                Ok(Some(v)) => {
                    tripped = true;
                    eprintln!("roce-analyzer: gate tripped: {gate} (value {v})");
                }
                Ok(None) => {}
                Err(e) => {
                    eprintln!("roce-analyzer: error: {e}");
                    return Ok(exit::USAGE);
                }
            }
        }
        if tripped {
            return Ok(exit::GATE);
        }
    }
    Ok(if report.capture.partial || !report.output_failures.is_empty() { exit::PARTIAL } else { exit::OK })
}

fn offline(
    args: &AnalyzeArgs,
    spool: Option<&mut analyzer::report::evidence::spool::Spool>,
) -> anyhow::Result<Pipeline> {
    let mut run = Pipeline::new(args.config()?);
    run.engine.first_events = spool.is_some();
    if args.edges {
        run.keep_edges();
    }
    let bar = progress_bar(args);
    let mut inputs = args.pcap.clone();
    if inputs.iter().any(|i| i.path.as_os_str() == "-") {
        analyzer::offline::finish_on_first_interrupt();
    }
    // Every label names an input (AnalyzeArgs::usage_error, before any work).
    for (label, ns) in &args.clock_offset {
        for i in inputs.iter_mut().filter(|i| &i.label == label) {
            i.clock_offset_ns = *ns;
        }
    }
    // A reader thread only adds its hand-over where the run may use one CPU (affinity, quota).
    let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let threads =
        if args.one_thread || one_cpu { analyzer::offline::Threads::One } else { analyzer::offline::Threads::Split };
    let truncations = analyzer::offline::analyze_files_spooled(&mut run, &inputs, threads, spool, |path, bytes| {
        if let Some(b) = &bar {
            b.set_message(path.display().to_string());
            b.set_position(bytes);
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    for t in &truncations? {
        eprintln!("roce-analyzer: warning: {}; the report is partial", escape(&t.to_string()));
    }
    if run.engine.implausible_timestamps > 0 {
        eprintln!(
            "roce-analyzer: warning: {} frames carry timestamps more than a year from the rest; they are left out of the capture's span",
            run.engine.implausible_timestamps
        );
    }
    Ok(run)
}

/// Now, in Unix nanoseconds.
fn wall_ns() -> u64 {
    analyzer::capture::kernel::clock_ns(libc::CLOCK_REALTIME)
}

fn live(
    args: &AnalyzeArgs,
    iface: &str,
    exporter: &mut Option<export::Exporter>,
    evidence: Option<analyzer::report::evidence::Options>,
    json: Option<&write::Target>,
) -> anyhow::Result<analyzer::live::Outcome> {
    if args.kernel_log {
        // aya-log hands the program's lines to the `log` crate; print them on stderr.
        // Only the program's own lines (target roce_analyzer), and warnings from the rest.
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn,roce_analyzer=trace"))
            .try_init();
    }
    let opts = args.live_options(iface, evidence, json)?;
    analyzer::live::run(&opts, exporter.as_mut()).with_context(|| format!("live capture on {iface}"))
}

fn replay(r: ReplayArgs) -> anyhow::Result<u8> {
    let s = analyzer::replay::replay(&r.file, &r.iface, r.speed, r.loops)?;
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    eprintln!(
        "replay: sent {} frames ({} bytes) to {} in {:.3} s ({:.0} frames/s); failed {}{}",
        s.sent,
        s.bytes,
        r.iface,
        secs,
        s.sent as f64 / secs,
        s.failed,
        s.first_error.map(|e| format!(" (first: {e})")).unwrap_or_default()
    );
    Ok(if s.failed > 0 { exit::ERROR } else { exit::OK })
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
