//! Command-line interface (clap). Kept in the library so tests can check it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::analyses::config::{defaults, nanos};
use crate::capture::input::InputSpec;
use crate::capture::kernel::load::{AttachMode, FragsMode};

#[derive(Debug, Parser)]
#[command(
    name = "roce-analyzer",
    version,
    about = "RoCE v2 / PFC analyzer: live in the kernel with XDP (--iface) or offline on pcap/pcapng files (--pcap)",
    after_help = crate::exit::help(),
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub analyze: AnalyzeArgs,
    /// Print the man page (`man`) or a shell's completions (`complete-bash`, …) made from
    /// these definitions, and exit.
    #[arg(long, value_enum, value_name = "WHAT", exclusive = true)]
    pub generate: Option<Generate>,
}

/// What `--generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    Man,
    CompleteBash,
    CompleteZsh,
    CompleteFish,
    CompletePowershell,
    CompleteElvish,
}

/// Writes the man page or completions `what` asks for, from the same definitions as `--help`.
pub fn generate(what: Generate, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use clap_complete::Shell;
    let mut cmd = command();
    let shell = match what {
        Generate::Man => return clap_mangen::Man::new(cmd).render(out),
        Generate::CompleteBash => Shell::Bash,
        Generate::CompleteZsh => Shell::Zsh,
        Generate::CompleteFish => Shell::Fish,
        Generate::CompletePowershell => Shell::PowerShell,
        Generate::CompleteElvish => Shell::Elvish,
    };
    clap_complete::generate(shell, &mut cmd, "roce-analyzer", out);
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write every frame of a pcap/pcapng onto an interface (for testing the live path).
    Replay(ReplayArgs),
    /// Combine reports of several hosts or mirror ports into one fabric report.
    Merge(MergeArgs),
    /// Turn export lines into the rows --export-clickhouse inserts: one JSONEachRow file per
    /// table (deploy/clickhouse/schema.sql), to load exports collected earlier, or into a
    /// server the agents could not reach.
    ClickhouseRows(RowsArgs),
}

/// `clickhouse-rows`: export lines in, a JSONEachRow file per table out.
#[derive(Debug, clap::Args)]
pub struct RowsArgs {
    /// Export directories or .ndjson files (each read in its files' order).
    #[arg(required = true, value_name = "EXPORT")]
    pub exports: Vec<PathBuf>,
    /// The directory the table files go to (`flows.ndjson`, `pfc.ndjson`, …; created when
    /// missing, files replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Where and how a report is written: shared by the analysis and `merge`.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Write the JSON report (schema roce-analyzer/report/v1) to PATH, or to stdout for `-`
    /// (the human summary is then not printed).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// CI gate: fail (exit 4) when `PATH OP NUMBER` holds over the JSON report, e.g.
    /// `capture.classes.cnp>0` or `flows>=100` (a list compares by its length). Repeatable.
    /// A path the report does not have is a usage error.
    #[arg(long = "fail-on", value_name = "EXPR", value_parser = crate::report::gates::Gate::parse)]
    pub fail_on: Vec<crate::report::gates::Gate>,

    /// Write the congestion trees as Graphviz (dot) to PATH: pause edges with their paused
    /// time, roots and their congested egress marked.
    #[arg(long, value_name = "PATH")]
    pub dot: Option<PathBuf>,

    /// Write a self-contained HTML page to PATH: the congestion trees (SVG), ECMP bars, the
    /// incast timeline, the RTT distribution and the findings.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,

    /// Flows listed in the human summary and the live view.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,

    /// Do not print the human summary (nor the live view).
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Reports (JSON, schema roce-analyzer/report/v1; checkpoints too) to combine, or export
    /// lines (--export directories or .ndjson files: one report per host is rebuilt from them).
    #[arg(required = true, value_name = "REPORT.json|EXPORT")]
    pub reports: Vec<PathBuf>,
    /// The congestion trees, storms and deadlocks are recomputed over the joined pause
    /// intervals with these.
    #[command(flatten)]
    pub fabric: FabricArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What the congestion trees, storms and deadlocks need: shared by the analysis and `merge`.
#[derive(Debug, clap::Args)]
pub struct FabricArgs {
    /// The fabric's devices, hosts and links (TOML; see docs/analyses.md, Topology): names PFC senders and
    /// builds the congestion trees.
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,

    /// Reports, export files and the topology are read whole, each at most this many bytes (K,
    /// M, G suffixes): a file past it is refused, naming it. (A FIFO or a device is refused
    /// whatever its size.)
    #[arg(long, default_value = "4G", value_parser = byte_size)]
    pub input_max_bytes: u64,

    /// A continuous pause at least this long is a PFC storm.
    #[arg(long, default_value_t = defaults::PFC_STORM.into(), value_parser = positive_duration)]
    pub pfc_storm: humantime::Duration,

    /// A cycle of pauses all active together at least this long is a deadlock.
    #[arg(long, default_value_t = defaults::DEADLOCK_MIN.into(), value_parser = positive_duration)]
    pub deadlock_min: humantime::Duration,
}

impl FabricArgs {
    /// The parameters; reads the topology file.
    pub fn options(&self) -> Result<crate::report::merge::MergeOptions, crate::analyses::topology::TopologyError> {
        Ok(crate::report::merge::MergeOptions {
            topology: self
                .topology
                .as_deref()
                .map(|p| crate::analyses::topology::Topology::load(p, self.input_max_bytes))
                .transpose()?,
            pfc_storm_ns: nanos(*self.pfc_storm),
            deadlock_min_ns: nanos(*self.deadlock_min),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    /// A progress bar when stderr is a terminal and the input is large.
    Auto,
    Always,
    Never,
}

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (e.g. 500ms, 1s, 2m)"))
}

fn positive_std_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() { Err("must be more than zero".into()) } else { Ok(d) }
}

/// `LABEL=+DURATION` or `LABEL=-DURATION` as (label, signed nanoseconds).
fn clock_offset(s: &str) -> Result<(String, i64), String> {
    let (label, d) = s.split_once('=').ok_or("expected LABEL=±DURATION, e.g. spine1=+1.5ms")?;
    let (sign, d) = match d.as_bytes().first() {
        Some(b'+') => (1, &d[1..]),
        Some(b'-') => (-1, &d[1..]),
        _ => return Err(format!("{d:?}: give the sign, + or - (e.g. {label}=+{d})")),
    };
    let ns = i64::try_from(duration(d)?.as_nanos()).map_err(|_| "too large".to_string())?;
    if label.is_empty() {
        return Err("no label before '='".into());
    }
    Ok((label.to_string(), sign * ns))
}

/// A positive duration that shows as written (`100ms`) in `--help`'s defaults.
fn positive_duration(s: &str) -> Result<humantime::Duration, String> {
    positive_std_duration(s).map(Into::into)
}

#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Capture file (pcap or pcapng) to analyse, as FILE or LABEL=FILE; repeat it for several
    /// vantage points (e.g. one per uplink mirror). All go through one analysis.
    #[arg(short = 'r', long = "pcap", value_name = "[LABEL=]FILE", value_parser = InputSpec::parse, conflicts_with = "iface")]
    pub pcap: Vec<InputSpec>,

    /// Capture files given without --pcap (`roce-analyzer capture.pcap`): the same as --pcap.
    #[arg(value_name = "CAPTURE", value_parser = InputSpec::parse, conflicts_with = "iface")]
    pub captures: Vec<InputSpec>,

    /// Corrects the clock of the inputs labelled LABEL by ±DURATION (e.g. a=+1ms, b=-250us),
    /// so that vantage points' latencies compare: they need synchronised (PTP) capture clocks.
    #[arg(long = "clock-offset", value_name = "LABEL=±DURATION", value_parser = clock_offset, conflicts_with = "iface")]
    pub clock_offset: Vec<(String, i64)>,

    /// Offline, one input: read, classify, count and analyse it on one thread, using one
    /// core (by default the analyses run on a second thread; one thread is the default where
    /// the run may use one CPU only). Several inputs have a reader thread each in any case.
    #[arg(long, conflicts_with = "iface")]
    pub one_thread: bool,

    /// Analyse live: attach the XDP program to IFACE (a mirror/ERSPAN collector port, a tap, a
    /// soft-RoCE host). Needs CAP_BPF and CAP_NET_ADMIN.
    #[arg(short = 'i', long, value_name = "IFACE")]
    pub iface: Option<String>,

    /// Live: the input's label in the report and the export's rows (default: the interface);
    /// TIER:LINK names an uplink's collector for the fleet's ECMP query per tier.
    #[arg(long, value_name = "LABEL", requires = "iface", value_parser = crate::capture::input::parse_label)]
    pub label: Option<String>,

    /// XDP attach mode: native (driver), skb (generic), or auto (native, falling back to skb
    /// with a warning).
    #[arg(long, value_enum, default_value_t = AttachMode::Auto)]
    pub xdp_mode: AttachMode,

    /// The XDP program with multi-buffer support (`xdp.frags`, for jumbo frames a driver splits
    /// over several buffers: on), without it (off: for drivers that refuse multi-buffer
    /// programs), or the first the driver takes (auto). The report says which
    /// (`capture.sources[].xdp`).
    #[arg(long, value_enum, default_value_t = FragsMode::Auto)]
    pub xdp_frags: FragsMode,

    /// Live: how often the kernel maps are read.
    #[arg(long, default_value = "1s", value_parser = positive_std_duration)]
    pub interval: Duration,

    /// Live: stop after this long (otherwise at SIGINT or SIGTERM).
    #[arg(long, value_parser = positive_std_duration)]
    pub duration: Option<Duration>,

    /// Live: flows without a packet for this long are removed from the kernel map (their
    /// totals stay in the report).
    #[arg(long, default_value = "60s", value_parser = positive_std_duration)]
    pub idle_timeout: Duration,

    /// Flows kept (live: flows of the kernel flow table, default 65536; offline: unbounded
    /// unless given). Frames of flows beyond it are counted (`dropped.flow_map_full`), not
    /// analysed per flow; each analysis keeps state for at most as many keys. Bounds memory.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_flows: Option<u32>,

    /// Live: bytes of the kernel event ring buffer, which takes CM messages and the PFC/PAUSE
    /// events of CPUs without an event log of their own (a power of two, at least 4096).
    #[arg(long, default_value_t = analyzer_common::maps::DEFAULT_RINGBUF_BYTES, value_parser = ringbuf_bytes)]
    pub ringbuf_bytes: u32,

    /// Live: print the XDP program's own log lines (aya-log; only its rare paths log).
    #[arg(long)]
    pub kernel_log: bool,

    /// Live: serve Prometheus metrics on http://ADDR:PORT/metrics (frames by class, top flows
    /// bytes and packets plus an "other" bucket, CE, CNP, PFC per sender and priority, losses).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,

    /// Live: add the NIC's own counters to the report and the metrics (RDMA port
    /// hw_counters from sysfs — CNPs sent/handled, ECN-marked RoCE, out-of-sequence, duplicate
    /// requests, sequence-error NAKs, local ACK timeouts — and the driver's ethtool statistics,
    /// e.g. per-priority pause frames and durations). For hosts whose RNIC bypasses XDP.
    #[arg(long)]
    pub nic_counters: bool,

    /// Live: once the program is attached, run as this user (started as root). Whatever the
    /// user, the agent keeps only CAP_BPF and CAP_NET_ADMIN from then on, before it reads a
    /// frame or serves HTTP. The --json directory must be writable by the user.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,

    /// Live: flows with their own metrics series (the rest are summed in one bucket).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub metrics_top_flows: usize,

    /// Live: after this long without RoCE on an interface whose NIC has an RDMA device, say
    /// that hardware RoCE bypasses the kernel.
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub rdma_grace: Duration,

    /// Live: write the report to the --json file this often while running (atomically, saying
    /// it is a checkpoint), so that a killed agent leaves its last state; the final report
    /// replaces it.
    #[arg(long, default_value = "60s", value_parser = positive_std_duration)]
    pub checkpoint: Duration,

    /// Live: do not write a timeline record per RoCE/CNP frame. Saves the XDP program a ring
    /// buffer write per frame (see BENCHMARKS.md); RTT, CE → CNP timing, CNP pacing and incast
    /// then have no input and the report says so.
    #[arg(long)]
    pub no_timeline: bool,

    #[command(flatten)]
    pub analysis: AnalysisArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Continuous export: NDJSON lines (schema roce-analyzer/export/v1) into directory PATH
    /// (files roce-analyzer-NNNNNN.ndjson, rotated) or to stdout for `-`. Live, every
    /// --interval: a line per flow that changed (deltas and totals), per PFC sender and
    /// priority that paused, per event that ended (storm, incast episode, deadlock, loss
    /// between vantage points), per finding raised, and an interval line with the totals.
    /// Offline: the same lines once, for the whole capture. `merge` reads them back.
    #[arg(long, value_name = "PATH")]
    pub export: Option<PathBuf>,

    /// Offline: give each flow its PSN state at the capture's two ends (`flows[].edge`), so that
    /// `merge` of captures cut in time (rotated files, a ring buffer's parts) counts its PSN
    /// anomalies across each cut as one run over the whole would.
    #[arg(long, conflicts_with = "iface")]
    pub edges: bool,

    /// Export: start a new file before one would grow past this many bytes (K, M, G suffixes).
    #[arg(long, default_value = "64M", value_parser = byte_size)]
    pub export_max_bytes: u64,

    /// Export: files kept in the directory (the oldest are deleted).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub export_keep: u32,

    /// Insert the export's lines into ClickHouse: URL is its HTTP interface
    /// (`http://clickhouse:8123/`). One batch per interval, a table per kind of line
    /// (deploy/clickhouse/schema.sql: flows, pfc, events, findings, hops, messages, intervals),
    /// each row naming the agent (host, label, interface). The agent never waits on the server:
    /// rows wait in --export-buffer while it is away (retried with backoff), and what the buffer
    /// cannot hold is dropped and counted (`export.dropped`). Credentials come from
    /// ROCE_ANALYZER_CLICKHOUSE_USER and ROCE_ANALYZER_CLICKHOUSE_PASSWORD only (never a flag or
    /// the URL, which process lists show).
    #[arg(long, value_name = "URL")]
    pub export_clickhouse: Option<String>,

    /// ClickHouse: the database of the tables.
    #[arg(long, default_value = "roce", value_name = "NAME")]
    pub clickhouse_database: String,

    /// ClickHouse: put before every table name (`roce_` gives `roce_flows`).
    #[arg(long, default_value = "", value_name = "PREFIX")]
    pub clickhouse_table_prefix: String,

    /// ClickHouse: bytes of rows that may wait for the server, at most (K, M, G suffixes): the
    /// agent's memory bound while the server is away.
    #[arg(long, default_value = "64M", value_parser = byte_size)]
    pub export_buffer: u64,

    /// ClickHouse: how long the run's end waits for the last rows to be inserted (the rest
    /// are counted as dropped).
    #[arg(long, default_value = "10s")]
    pub export_wait: humantime::Duration,

    /// Write the frames behind each finding, incast episode, PFC storm and deadlock to a pcapng
    /// file in this directory (created if missing), linked from the report (`evidence`): the
    /// flows named with their ACKs, NAKs and CNPs (or the PFC frames), from the first trouble
    /// they showed to their last frame, plus `--evidence-margin`. Offline the capture is read
    /// once (frames are spooled to an unnamed temporary file in DIR); live, the XDP program
    /// copies the frames of flows a finding names into a ring for `--evidence-time` after the
    /// finding opens.
    #[arg(long, value_name = "DIR")]
    pub evidence: Option<PathBuf>,

    /// Evidence: bytes of each frame kept, 64 to 65535 (default: whole frames, which Wireshark
    /// dissects without calling a cut RoCE frame malformed; a smaller snap length keeps the
    /// headers and records each frame's whole length). Live and offline keep the same bytes.
    #[arg(long, default_value_t = 65535, value_parser = clap::value_parser!(u32).range(64..=65535))]
    pub evidence_snaplen: u32,

    /// Evidence: frames per file, at most (the rest are counted as `left_out`).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub evidence_max: u64,

    /// Evidence: frames this long before a finding's span and after it are taken too.
    #[arg(long, default_value = "1ms")]
    pub evidence_margin: humantime::Duration,

    /// Evidence, live: how long the kernel copies a finding's flows after it opens.
    #[arg(long, default_value = "2s", value_parser = positive_duration)]
    pub evidence_time: humantime::Duration,

    /// Progress bar on stderr (offline).
    #[arg(long, value_enum, default_value_t = Progress::Auto)]
    pub progress: Progress,
}

/// The flags that only mean something on a live interface (their ids).
pub const LIVE_ONLY: &[&str] = &[
    "xdp_mode",
    "xdp_frags",
    "interval",
    "duration",
    "idle_timeout",
    "ringbuf_bytes",
    "kernel_log",
    "metrics",
    "nic_counters",
    "metrics_top_flows",
    "rdma_grace",
    "no_timeline",
    "user",
    "checkpoint",
];

/// The command line, every flag also read from the environment as `ROCE_ANALYZER_<FLAG>`
/// (`--max-flows` is `ROCE_ANALYZER_MAX_FLOWS`; a subcommand's flags too), which `--help`
/// shows beside each flag: how a systemd unit or a DaemonSet configures the agent. The command
/// line wins over the environment.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    with_env_note(with_help(with_env(Cli::command())))
}

/// The heading a flag is listed under in the help, by purpose. Headings come in the order of
/// their first flag's declaration: input, live, analyses and thresholds, outputs, fleet.
fn heading(long: &str) -> &'static str {
    const INPUT: &[&str] =
        &["pcap", "clock-offset", "one-thread", "filter", "match-window", "progress", "input-max-bytes"];
    const LIVE: &[&str] = &[
        "iface",
        "label",
        "xdp-mode",
        "xdp-frags",
        "interval",
        "duration",
        "idle-timeout",
        "max-flows",
        "ringbuf-bytes",
        "kernel-log",
        "nic-counters",
        "user",
        "rdma-grace",
        "no-timeline",
        "metrics",
        "metrics-top-flows",
        "checkpoint",
    ];
    const OUTPUT: &[&str] = &[
        "json",
        "fail-on",
        "dot",
        "html",
        "top",
        "quiet",
        "evidence",
        "evidence-snaplen",
        "evidence-max",
        "evidence-margin",
        "evidence-time",
        "generate",
    ];
    const FLEET: &[&str] = &[
        "export",
        "edges",
        "export-max-bytes",
        "export-keep",
        "export-clickhouse",
        "clickhouse-database",
        "clickhouse-table-prefix",
        "export-buffer",
        "export-wait",
    ];
    match long {
        l if INPUT.contains(&l) => "Input",
        l if LIVE.contains(&l) => "Live (--iface)",
        l if OUTPUT.contains(&l) => "Outputs",
        l if FLEET.contains(&l) => "Fleet",
        _ => "Analyses and thresholds",
    }
}

/// The first clause of a flag's help, for `-h` (up to its first full stop, or a colon,
/// semicolon or parenthesis past a few words); `--help` keeps the whole text.
fn first_sentence(text: &str) -> &str {
    let mut from = 0;
    let mut end = text.len();
    while let Some(i) = text[from..].find(". ").map(|i| i + from) {
        let word = text[..i].rsplit(' ').next().unwrap_or_default();
        if !matches!(word, "e.g" | "i.e" | "(e.g" | "(i.e" | "etc") {
            end = i;
            break;
        }
        from = i + 2;
    }
    // The first colon, semicolon or parenthesis past a few words (every match, not only the
    // first of each: "Offline, one input: read …" goes on to its parenthesis).
    let clause =
        [": ", "; ", " ("].iter().flat_map(|p| text[..end].match_indices(p).map(|(i, _)| i)).filter(|i| *i >= 20).min();
    let short = &text[..clause.unwrap_or(end)];
    // A clause cut inside parentheses would leave one open: the sentence then.
    if short.matches('(').count() == short.matches(')').count() { short } else { &text[..end] }
}

/// Flags grouped by purpose under headings; `-h` gives each flag's first sentence, `--help`
/// the whole text.
fn with_help(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let a = match a.get_long() {
            Some(long) if !matches!(long, "help" | "version") => a.clone().help_heading(heading(long)),
            _ => a,
        };
        // `-h` names each variable once at its end, not on every line; `--help` on each flag.
        let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
        match (a.get_help().map(|h| h.to_string()), env) {
            (Some(full), Some(env)) => {
                let short = first_sentence(&full).to_string();
                a.hide_env(true).help(short).long_help(format!("{full} [env: {env}=]"))
            }
            (Some(full), None) if first_sentence(&full).len() < full.len() => {
                let short = first_sentence(&full).to_string();
                a.help(short).long_help(full)
            }
            _ => a,
        }
    })
    .mut_subcommands(with_help)
}

/// The help's closing text with the note that every flag has a variable.
fn with_env_note(cmd: clap::Command) -> clap::Command {
    const NOTE: &str = "Every flag can also be given as ROCE_ANALYZER_<FLAG> in the environment (--help names each).";
    let after = cmd.get_after_help().map_or(NOTE.to_string(), |a| format!("{a}\n\n{NOTE}"));
    cmd.after_help(after).mut_subcommands(with_env_note)
}

/// The environment variable of a flag.
pub fn env_name(long: &str) -> String {
    format!("ROCE_ANALYZER_{}", long.to_uppercase().replace('-', "_"))
}

/// Each flag with its variable; a switch's variable takes 1/0, true/false, yes/no, on/off.
fn with_env(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| match a.get_long().map(env_name) {
        Some(name) if !matches!(a.get_id().as_str(), "help" | "version" | "generate") => {
            let switch = matches!(a.get_action(), clap::ArgAction::SetTrue);
            let a = a.env(name);
            if switch { a.value_parser(clap::builder::BoolishValueParser::new()) } else { a }
        }
        _ => a,
    })
    .mut_subcommands(with_env)
}

/// The variables of the environment that stand for flags an error names ("--iface" when
/// `ROCE_ANALYZER_IFACE` is set): an error a person did not type on the command line names
/// where it came from.
pub fn env_behind(cmd: &clap::Command, error: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut visit = |c: &clap::Command| {
        for a in c.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            let name = env_name(long);
            let named = error.contains(&format!("--{long} ")) || error.contains(&format!("--{long}'"));
            if named && std::env::var_os(&name).is_some() && !out.contains(&name) {
                out.push(name);
            }
        }
    };
    visit(cmd);
    cmd.get_subcommands().for_each(visit);
    out
}

/// Parses the command line. A live-only flag given with `--pcap` is a usage error (it would do
/// nothing), as clap's own errors are.
pub fn parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    if matches.subcommand().is_none() && (matches.contains_id("pcap") || matches.contains_id("captures")) {
        for id in LIVE_ONLY {
            if matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                let flag = format!("--{}", id.replace('_', "-"));
                return Err(cmd.error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("{flag} applies to a live interface (--iface), not to --pcap"),
                ));
            }
        }
    }
    let mut cli = Cli::from_arg_matches(&matches)?;
    let captures = std::mem::take(&mut cli.analyze.captures);
    cli.analyze.pcap.extend(captures);
    Ok(cli)
}

impl AnalyzeArgs {
    /// The flows kept: `--max-flows`, live by default the kernel map's default size.
    pub fn flow_limit(&self) -> Option<u32> {
        self.max_flows.or(self.iface.is_some().then_some(analyzer_common::maps::DEFAULT_MAX_FLOWS))
    }

    /// The analyses' parameters with the flow limit; reads the topology file.
    pub fn config(&self) -> Result<crate::analyses::Config, crate::analyses::topology::TopologyError> {
        let mut c = self.analysis.config()?;
        c.max_keys = self.flow_limit().map_or(usize::MAX, |n| n as usize);
        Ok(c)
    }
}

/// Parameters of the analyses, offline and live.
#[derive(Debug, clap::Args)]
pub struct AnalysisArgs {
    /// PMTU (bytes) of every QP that has not shown its own in a FIRST/MIDDLE payload. Without
    /// it each QP's PMTU is learned: from those payloads, its peer's READ RESPONSEs, or the PSN
    /// after a READ (which must be where the READ ends at a legal MTU, 256 to 4096).
    /// One of the InfiniBand MTUs: 256, 512, 1024, 2048 or 4096.
    #[arg(long, value_parser = pmtu)]
    pub pmtu: Option<u32>,

    /// A request with AckReq not acknowledged within this is counted as an RTT timeout.
    #[arg(long, default_value_t = defaults::RTT_TIMEOUT.into(), value_parser = positive_duration)]
    pub rtt_timeout: humantime::Duration,

    /// DSCP expected on RoCE data packets (the lossless class).
    #[arg(long, default_value_t = defaults::ROCE_DSCP, value_parser = clap::value_parser!(u8).range(0..64))]
    pub roce_dscp: u8,

    /// DSCP expected on CNPs.
    #[arg(long, default_value_t = defaults::CNP_DSCP, value_parser = clap::value_parser!(u8).range(0..64))]
    pub cnp_dscp: u8,

    /// A CE-marked packet with no CNP back within this is "unanswered" (audit).
    #[arg(long, default_value_t = defaults::CNP_TIMEOUT.into(), value_parser = positive_duration)]
    pub cnp_timeout: humantime::Duration,

    /// The notification point's CNP pacing interval (at most one CNP per flow per interval): a
    /// CE mark within it after a CNP is covered, not unanswered. Without it, inferred from the
    /// smallest CNP gap of a QP with at least 3 CNPs.
    #[arg(long, value_parser = positive_duration)]
    pub cnp_interval: Option<humantime::Duration>,

    #[command(flatten)]
    pub fabric: FabricArgs,

    /// Link speed for pause quanta (512 bit times each) and incast rates: 25G, 100G, 200G,
    /// 400G or 800G.
    #[arg(long, default_value_t = LinkSpeed(defaults::LINK_SPEED_BPS), value_parser = link_speed)]
    pub link_speed: LinkSpeed,

    /// Analyse only the frames that match (live: decided in the XDP program; offline: by the
    /// same code): `KEY=VALUE[|VALUE…]` terms separated by `,` or spaces, all of which must
    /// hold. Keys: src, dst, host (either end), origin (a mirror copy's outer source) take
    /// ADDRESS[/LEN], IPv4 or IPv6; qp N or 0xN; dscp and pcp (alias prio) N or N-M; vlan N or
    /// none (untagged). E.g. `src=10.0.0.0/24|10.0.1.0/24,dscp=26`. PFC and PAUSE frames always
    /// pass. What is left out is counted (`capture.filter.frames_out`), not analysed.
    #[arg(long, value_name = "EXPR", value_parser = crate::frames::filter::FilterSpec::parse)]
    pub filter: Option<crate::frames::filter::FilterSpec>,

    /// Vantage points: copies of one frame seen at several points (labelled inputs, mirror
    /// origins) are matched within this window; memory holds the frames of one window.
    #[arg(long, default_value_t = defaults::MATCH_WINDOW.into(), value_parser = positive_duration)]
    pub match_window: humantime::Duration,

    /// Trajectory sampling: keep 1 in N frames for the export (`1/1024`), chosen by a hash of
    /// the frame's identity, so that every collector keeps the same frames; `merge` over the
    /// collectors' exports (or a join in ClickHouse) gives the hops between them: frames lost,
    /// CE-marked between, latency, and the collectors' clock offset.
    #[arg(long, value_name = "1/N", value_parser = one_in)]
    pub trajectory_sample: Option<u64>,

    /// DCQCN: a flow's sending rate is measured in bytes per this window.
    #[arg(long, default_value_t = defaults::RATE_WINDOW.into(), value_parser = positive_duration)]
    pub rate_window: humantime::Duration,

    /// Messages: the upper bounds of the size classes, ascending (default 4K,64K,1M: ≤ 4 KiB,
    /// ≤ 64 KiB, ≤ 1 MiB and larger).
    #[arg(long, value_name = "BYTES,…", value_parser = message_classes)]
    pub message_classes: Option<MessageClasses>,

    /// Messages: explain every message slower than this (default: each size class's p99).
    #[arg(long, value_parser = positive_duration)]
    pub tail_threshold: Option<humantime::Duration>,

    /// Rings: an edge whose goodput runs this many times below the ring's median edge holds
    /// the ring back (`ring_straggler`).
    #[arg(long, default_value_t = defaults::STRAGGLER_RATIO, value_parser = straggler_ratio)]
    pub straggler_ratio: f64,

    /// ECN before PFC: CE marks on a priority's data within this before a pause onset count as
    /// ECN acting first.
    #[arg(long, default_value_t = defaults::ECN_LEAD.into(), value_parser = positive_duration)]
    pub ecn_lead: humantime::Duration,

    /// Pause frames per million data frames of a priority above which PFC triggers too often
    /// (`pfc_rate_high`; 10 is 0.001 %).
    #[arg(long, default_value_t = defaults::PFC_RATE_MAX, value_parser = pfc_rate_max)]
    pub pfc_rate_max: f64,

    /// A hop between two vantage points whose fitted ECN marking threshold (Kmin) lies below
    /// this queue marks too early (`ecn_threshold_low`): bytes, `150000`, `64K` (default 150 KB
    /// at 400 Gbit/s scaled to `--link-speed`: 37.5 KB at 100 Gbit/s).
    #[arg(long, value_name = "BYTES", value_parser = class_bound)]
    pub kmin_min: Option<u64>,

    /// The priority of untagged frames by DSCP, for the tail's pauses and ECN before PFC:
    /// `26=3,48=6`.
    #[arg(long, value_name = "DSCP=PRIORITY,…", value_parser = dscp_priority)]
    pub dscp_priority: Option<DscpPriority>,

    /// DCQCN: a CNP's effect is looked for within this after it (the lowest rate, the
    /// recovery).
    #[arg(long, default_value_t = defaults::DCQCN_HORIZON.into(), value_parser = positive_duration)]
    pub dcqcn_horizon: humantime::Duration,

    /// DCQCN: a flow whose median recovery after a CNP takes longer is `slow_recovery`.
    #[arg(long, default_value_t = defaults::DCQCN_SLOW_RECOVERY.into(), value_parser = positive_duration)]
    pub dcqcn_slow_recovery: humantime::Duration,

    /// Incast: senders to one destination are counted over this sliding window.
    #[arg(long, default_value_t = defaults::INCAST_WINDOW.into(), value_parser = positive_duration)]
    pub incast_window: humantime::Duration,

    /// Incast: an episode starts at this many concurrent senders.
    #[arg(long, default_value_t = defaults::INCAST_MIN_SENDERS, value_parser = clap::value_parser!(u32).range(2..))]
    pub incast_min_senders: u32,

    /// ECMP prediction, one per tier (repeat in path order): `HASH:FANOUT[:SEED[:SHIFT]]` with
    /// HASH crc32, crc32c, xor16 or toeplitz; e.g. `--ecmp-tier crc32:4 --ecmp-tier crc32:8:7`.
    #[arg(long = "ecmp-tier", value_name = "HASH:FANOUT[:SEED[:SHIFT]]", value_parser = crate::analyses::ecmp::Tier::parse)]
    pub ecmp_tiers: Vec<crate::analyses::ecmp::Tier>,
}

/// A link speed in bit/s, written as `100G`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSpeed(pub u64);

impl std::fmt::Display for LinkSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}G", self.0 / 1_000_000_000)
    }
}

fn link_speed(s: &str) -> Result<LinkSpeed, String> {
    match s.to_ascii_uppercase().as_str() {
        "25G" => Ok(LinkSpeed(25_000_000_000)),
        "100G" => Ok(LinkSpeed(100_000_000_000)),
        "200G" => Ok(LinkSpeed(200_000_000_000)),
        "400G" => Ok(LinkSpeed(400_000_000_000)),
        "800G" => Ok(LinkSpeed(800_000_000_000)),
        _ => Err(format!("{s:?}: one of 25G, 100G, 200G, 400G, 800G")),
    }
}

impl AnalyzeArgs {
    /// `--evidence` and its bounds, when given.
    pub fn evidence(&self) -> Option<crate::report::evidence::Options> {
        self.evidence.as_ref().map(|dir| crate::report::evidence::Options {
            dir: dir.clone(),
            snaplen: self.evidence_snaplen,
            max_frames: self.evidence_max,
            margin_ns: nanos(*self.evidence_margin),
            handle: None,
        })
    }
}

impl AnalyzeArgs {
    /// What a live run on `iface` is asked to do, from these arguments.
    pub fn live_options(
        &self,
        iface: &str,
        evidence: Option<crate::report::evidence::Options>,
        json: Option<&crate::report::write::Target>,
    ) -> Result<crate::live::LiveOptions, crate::analyses::topology::TopologyError> {
        let config = self.config()?;
        let load = crate::capture::kernel::load::LoadOptions {
            max_flows: self.flow_limit().unwrap_or(analyzer_common::maps::DEFAULT_MAX_FLOWS),
            ringbuf_bytes: self.ringbuf_bytes,
            kernel_log: self.kernel_log,
            timeline: !self.no_timeline,
            pmtu: config.pmtu,
            match_window_ns: config.match_window_ns,
            filter: config.filter.as_ref().map(|f| f.filter),
            evidence_snaplen: if evidence.is_some() { self.evidence_snaplen } else { 0 },
        };
        let json_to_stdout = self.output.json.as_deref() == Some(std::path::Path::new("-"));
        Ok(crate::live::LiveOptions {
            iface: iface.to_string(),
            label: self.label.clone().unwrap_or_else(|| iface.to_string()),
            mode: self.xdp_mode,
            frags: self.xdp_frags,
            interval: self.interval,
            duration: self.duration,
            idle_timeout: self.idle_timeout,
            load,
            config,
            rdma_grace: self.rdma_grace,
            metrics: self.metrics.clone().map(|a| (a, self.metrics_top_flows)),
            nic_counters: self.nic_counters,
            user: self.user.clone(),
            evidence: evidence.map(|o| (o, self.evidence_time.as_nanos() as u64)),
            // Checkpoints go to the --json file (not to standard output).
            checkpoint: json.filter(|_| !json_to_stdout).map(|t| (t.clone(), self.checkpoint)),
            view_top: crate::live::view_wanted(self.output.quiet, json_to_stdout).then_some(self.output.top),
        })
    }
}

impl AnalysisArgs {
    /// The analyses' parameters; reads the topology file.
    pub fn config(&self) -> Result<crate::analyses::Config, crate::analyses::topology::TopologyError> {
        let fabric = self.fabric.options()?;
        Ok(crate::analyses::Config {
            pmtu: self.pmtu.unwrap_or(defaults::PMTU),
            rtt_timeout_ns: nanos(*self.rtt_timeout),
            roce_dscp: self.roce_dscp,
            cnp_dscp: self.cnp_dscp,
            cnp_timeout_ns: nanos(*self.cnp_timeout),
            cnp_interval_ns: self.cnp_interval.map(|d| nanos(*d)),
            link_speed_bps: self.link_speed.0,
            pfc_storm_ns: fabric.pfc_storm_ns,
            deadlock_min_ns: fabric.deadlock_min_ns,
            incast_window_ns: nanos(*self.incast_window),
            incast_min_senders: self.incast_min_senders,
            ecmp_tiers: self.ecmp_tiers.clone(),
            topology: fabric.topology,
            max_keys: usize::MAX,
            match_window_ns: nanos(*self.match_window),
            trajectory_one_in: self.trajectory_sample.unwrap_or(0),
            filter: self.filter.clone(),
            rate_window_ns: nanos(*self.rate_window),
            dcqcn_horizon_ns: nanos(*self.dcqcn_horizon),
            dcqcn_slow_recovery_ns: nanos(*self.dcqcn_slow_recovery),
            message_classes: self
                .message_classes
                .as_ref()
                .map_or_else(|| crate::analyses::messages::dist::DEFAULT_CLASSES.to_vec(), |c| c.0.clone()),
            tail_threshold_ns: self.tail_threshold.map(|d| nanos(*d)),
            straggler_ratio: self.straggler_ratio,
            dscp_priority: self.dscp_priority.as_ref().map(|d| d.0.clone()).unwrap_or_default(),
            ecn_lead_ns: nanos(*self.ecn_lead),
            pfc_rate_max: self.pfc_rate_max,
            kmin_min_bytes: self.kmin_min,
        })
    }
}

/// `--message-classes`: byte counts, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageClasses(pub Vec<u64>);

fn message_classes(s: &str) -> Result<MessageClasses, String> {
    let v = s.split(',').map(|p| class_bound(p.trim())).collect::<Result<Vec<u64>, String>>()?;
    if v.is_empty() || v.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!("{s:?}: byte counts in ascending order, e.g. 4K,64K,1M"));
    }
    Ok(MessageClasses(v))
}

/// A class bound: a byte count (`4096`, `64K`, `1M`; any size, unlike `byte_size`'s buffers).
fn class_bound(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&s[..s.len() - 1], 10),
        Some(b'M') => (&s[..s.len() - 1], 20),
        Some(b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{s:?}: a byte count, e.g. 4096, 64K, 1M"))?;
    n.checked_shl(shift).filter(|b| b >> shift == n && *b > 0).ok_or_else(|| format!("{s:?}: not a size"))
}

fn pfc_rate_max(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!("{s:?}: pause frames per million data frames, e.g. 10")),
    }
}

fn straggler_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 1.0 => Ok(r),
        _ => Err(format!("{s:?}: a ratio above 1, e.g. 1.5")),
    }
}

/// `--dscp-priority`: DSCP → priority pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DscpPriority(pub std::collections::BTreeMap<u8, u8>);

fn dscp_priority(s: &str) -> Result<DscpPriority, String> {
    let mut m = std::collections::BTreeMap::new();
    for part in s.split(',') {
        let bad = || format!("{part:?}: DSCP=PRIORITY with DSCP 0-63 and priority 0-7, e.g. 26=3");
        let (d, p) = part.trim().split_once('=').ok_or_else(bad)?;
        let d: u8 = d.trim().parse().ok().filter(|d| *d < 64).ok_or_else(bad)?;
        let p: u8 = p.trim().parse().ok().filter(|p| *p < 8).ok_or_else(bad)?;
        m.insert(d, p);
    }
    Ok(DscpPriority(m))
}

/// A byte count: `4096`, `64K`, `64M`, `1G` (powers of 1024).
/// A path MTU as RoCE has them (the InfiniBand MTUs): 1500 or 9000 are Ethernet MTUs, not a
/// QP's.
fn pmtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(n),
        _ => Err(format!("{s:?}: a RoCE path MTU is 256, 512, 1024, 2048 or 4096 bytes (the Ethernet MTU is not)")),
    }
}

/// `1/N` (or `N`): a sampling rate, N from 1 to 2^32.
fn one_in(s: &str) -> Result<u64, String> {
    let n = s.trim().strip_prefix("1/").unwrap_or(s.trim());
    match n.parse::<u64>() {
        Ok(n) if (1..=1 << 32).contains(&n) => Ok(n),
        _ => Err(format!("{s:?}: 1/N with N from 1 to 4294967296, e.g. 1/1024")),
    }
}

fn byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&t[..t.len() - 1], 10),
        Some(b'M') => (&t[..t.len() - 1], 20),
        Some(b'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{s:?}: a byte count, e.g. 4096, 64K, 64M, 1G"))?;
    let bytes = n.checked_shl(shift).filter(|b| b >> shift == n).ok_or_else(|| format!("{s:?}: too large"))?;
    if bytes < 1024 {
        return Err(format!("{s:?}: at least 1K"));
    }
    Ok(bytes)
}

fn ringbuf_bytes(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if n < 4096 || !n.is_power_of_two() {
        return Err("must be a power of two of at least 4096".into());
    }
    Ok(n)
}

/// Replay pacing: as fast as possible, or the capture's own pacing scaled by a factor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    Max,
    Factor(f64),
}

fn speed(s: &str) -> Result<Speed, String> {
    if s == "max" {
        return Ok(Speed::Max);
    }
    match s.parse::<f64>() {
        Ok(f) if f > 0.0 && f.is_finite() => Ok(Speed::Factor(f)),
        _ => Err(format!("{s:?}: use max or a factor above 0 (1.0 = original pacing)")),
    }
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The capture (Ethernet link type).
    pub file: PathBuf,
    /// Interface to write the frames to.
    #[arg(short, long)]
    pub iface: String,
    /// max, or a factor applied to the capture's pacing (1.0 = as captured, 2 = twice as fast).
    #[arg(long, default_value = "max", value_parser = speed)]
    pub speed: Speed,
    /// Times to send the whole capture.
    #[arg(long = "loop", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub loops: u32,
}

/// The first output that is one of the inputs (the same file, through any path or link), as
/// "`--json out.pcap` is the input `out.pcap`": writing it would destroy the evidence it was
/// made from. An output that does not exist yet is no input.
pub fn output_is_input(outputs: &[(&str, &std::path::Path)], inputs: &[&std::path::Path]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let inputs: Vec<((u64, u64), &std::path::Path)> = inputs.iter().filter_map(|p| Some((id(p)?, *p))).collect();
    for (flag, out) in outputs {
        let Some(o) = id(out) else { continue };
        if let Some((_, input)) = inputs.iter().find(|(i, _)| *i == o) {
            return Some(format!(
                "{flag} {} is the input {}: an output may not overwrite what it was made from",
                crate::report::render::text::escape(&out.display().to_string()),
                crate::report::render::text::escape(&input.display().to_string())
            ));
        }
    }
    None
}

/// The first input given twice (the same file or directory, through any path or link): `merge`
/// would count every report or line twice without a word. (A capture given twice to the
/// analysis is two vantage points whose copies count once.)
pub fn input_given_twice(flag: &str, inputs: &[&std::path::Path]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<((u64, u64), &std::path::Path)> = Vec::new();
    for p in inputs {
        let Ok(m) = std::fs::metadata(p) else { continue };
        let id = (m.dev(), m.ino());
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            return Some(format!(
                "{flag} {} is {} again: an input given twice would be counted twice",
                crate::report::render::text::escape(&p.display().to_string()),
                crate::report::render::text::escape(&first.display().to_string())
            ));
        }
        seen.push((id, p));
    }
    None
}

impl OutputArgs {
    /// A `--fail-on` gate whose path no report has (found before any work).
    pub fn gate_error(&self) -> Option<String> {
        self.fail_on.iter().find_map(|g| g.possible().err())
    }

    /// The report's outputs that are files (not standard output): flag, what it holds, path.
    pub fn files(&self) -> Vec<(&'static str, &'static str, &std::path::Path)> {
        let outputs = [
            ("--json", "JSON report", &self.json),
            ("--html", "HTML page", &self.html),
            ("--dot", "Graphviz file", &self.dot),
        ];
        outputs
            .into_iter()
            .filter_map(|(flag, what, p)| Some((flag, what, p.as_deref().filter(|p| *p != std::path::Path::new("-"))?)))
            .collect()
    }
}

impl AnalyzeArgs {
    /// A usage error found before any work: nothing to analyse, two outputs on standard output,
    /// an output that is one of the inputs, or a `--clock-offset` whose label no input has.
    pub fn usage_error(&self) -> Option<String> {
        let stdout = Some(std::path::Path::new("-"));
        if let Some(why) = self.output.gate_error() {
            return Some(why);
        }
        if self.export.as_deref() == stdout && self.output.json.as_deref() == stdout {
            return Some("--export - and --json - both want standard output; give one a file".into());
        }
        if self.iface.is_none() && self.pcap.is_empty() {
            return Some("nothing to analyse: give --pcap FILE or --iface IFACE (see --help)".into());
        }
        let mut outputs: Vec<(&str, &std::path::Path)> =
            self.output.files().into_iter().map(|(f, _, p)| (f, p)).collect();
        if let Some(e) = self.export.as_deref().filter(|p| *p != std::path::Path::new("-")) {
            outputs.push(("--export", e));
        }
        let mut inputs: Vec<&std::path::Path> = self.pcap.iter().map(|i| i.path.as_path()).collect();
        inputs.extend(self.analysis.fabric.topology.as_deref());
        if let Some(why) = output_is_input(&outputs, &inputs) {
            return Some(why);
        }
        if self.iface.is_none() {
            for (label, _) in &self.clock_offset {
                if !self.pcap.iter().any(|i| &i.label == label) {
                    return Some(format!(
                        "--clock-offset {}=…: no --pcap input is labelled {:?}",
                        crate::report::render::text::escape(label),
                        label
                    ));
                }
            }
        }
        None
    }
}

impl MergeArgs {
    /// An output that is one of the reports or exports merged, or the topology.
    pub fn usage_error(&self) -> Option<String> {
        if let Some(why) = self.output.gate_error() {
            return Some(why);
        }
        let mut inputs: Vec<&std::path::Path> = self.reports.iter().map(PathBuf::as_path).collect();
        if let Some(why) = input_given_twice("merge:", &inputs) {
            return Some(why);
        }
        inputs.extend(self.fabric.topology.as_deref());
        let outputs: Vec<(&str, &std::path::Path)> = self.output.files().into_iter().map(|(f, _, p)| (f, p)).collect();
        output_is_input(&outputs, &inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn short_help_is_the_first_clause() {
        let cases = [
            ("Live: stop after this long (otherwise at SIGINT). More.", "Live: stop after this long"),
            (
                "Offline, one input: read it here, on one core (by default: not). More",
                "Offline, one input: read it here, on one core",
            ),
            (
                "Write the frames behind each finding to a file: the flows. More",
                "Write the frames behind each finding to a file",
            ),
            (
                "Flows kept (live: the kernel's table, default 65536; offline: all). More",
                "Flows kept (live: the kernel's table, default 65536; offline: all)",
            ),
            ("Match (e.g. a=1). Then", "Match (e.g. a=1)"),
            ("One line", "One line"),
        ];
        for (text, short) in cases {
            assert_eq!(first_sentence(text), short);
        }
    }
}
