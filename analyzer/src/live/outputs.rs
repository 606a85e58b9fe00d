//! Everything a live run feeds while it goes on, from one tick after each poll, always in this
//! order: the NIC's counters into the run, the Prometheus metrics, the evidence the kernel is
//! asked to copy, the export lines, the checkpoint, the live view, and the one-time notice that
//! hardware RoCE bypasses the kernel. One output failing does not stop the others: each says so
//! once.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use analyzer_common::FrameClass;

use crate::capture::kernel::clock_ns;
use crate::capture::kernel::evidence::EvidenceMaps;
use crate::capture::nic::NicBaseline;
use crate::engine::Engine;
use crate::engine::live::Clock;
use crate::metrics_server::MetricsServer;
use crate::model::Report;
use crate::model::error_chain as chain;
use crate::model::{Note, NoteCode};
use crate::pipeline::Pipeline;
use crate::report::assemble::Lists;
use crate::report::evidence::live::LiveEvidence;
use crate::report::export::Exporter;
use crate::report::render::live_view::LiveView;
use crate::report::render::metrics;
use crate::report::render::text::escape;
use crate::report::{RunKind, write};

/// The metrics' finding counts are re-evaluated every this many polls (they walk every flow).
const FINDINGS_EVERY: u64 = 10;

/// Evidence copies cut per drain, at most.
pub const EVIDENCE_DRAIN: u64 = 4096;

/// RoCE and CNP frames counted so far.
pub fn roce_frames(e: &Engine) -> u64 {
    e.class_count(FrameClass::Roce) + e.class_count(FrameClass::Cnp)
}

/// The outputs of one live run and what each remembers between ticks.
pub struct Outputs<'x> {
    pub iface: String,
    pub started: Instant,
    pub nic: Option<NicBaseline>,
    pub metrics: Option<(MetricsServer, usize)>,
    pub evidence: Option<LiveEvidence<EvidenceMaps>>,
    pub exporter: Option<&'x mut Exporter>,
    pub checkpoint: Option<Checkpoint>,
    /// The live view and its flow count.
    pub view: Option<(LiveView, usize)>,
    /// How the program is attached, for the view's header.
    pub mode: &'static str,
    pub bypass: Bypass,
    ticks: u64,
    findings: metrics::FindingCounts,
    export_failed: bool,
}

/// `--json FILE` while the run goes on: a checkpoint there every `every`.
pub struct Checkpoint {
    pub path: write::Target,
    pub every: Duration,
    pub last: Instant,
    pub failed: bool,
}

/// The notice that RoCE is not seen because the NIC's RDMA devices bypass the kernel.
pub struct Bypass {
    /// RDMA devices behind the interface (none: never said).
    pub devices: Vec<String>,
    pub grace: Duration,
    pub said: bool,
}

impl<'x> Outputs<'x> {
    pub fn new(iface: &str, exporter: Option<&'x mut Exporter>, bypass: Bypass) -> Self {
        Outputs {
            iface: iface.to_string(),
            started: Instant::now(),
            nic: None,
            metrics: None,
            evidence: None,
            exporter,
            checkpoint: None,
            view: None,
            mode: "",
            bypass,
            ticks: 0,
            findings: metrics::FindingCounts::default(),
            export_failed: false,
        }
    }

    /// After each drain: the kernel's evidence copies into their files.
    pub fn drained(&mut self, run: &Pipeline, clock: &Clock, source: u16) {
        if let Some(ev) = &mut self.evidence {
            ev.drain(EVIDENCE_DRAIN, run, clock, source);
        }
    }

    /// After each poll, every output in its fixed order; Break with the reason when the run
    /// cannot go on (the kernel refused the evidence request).
    pub fn tick(&mut self, run: &mut Pipeline, clock: &Clock) -> ControlFlow<String> {
        if let Some(n) = &self.nic {
            run.engine.nic = Some(n.since());
        }
        // Findings walk every flow: re-evaluated every FINDINGS_EVERY polls.
        let findings_due = self.ticks.is_multiple_of(FINDINGS_EVERY);
        self.ticks += 1;
        if let Some((server, top)) = &self.metrics {
            if findings_due {
                self.findings = metrics::finding_counts(run);
            }
            let mut input = metrics::Input::of_run(run, *top, self.findings);
            input.export = self.exporter.as_ref().map(|x| x.stats());
            server.publish(metrics::open_metrics(&input));
        }
        if let Some(ev) = self.evidence.as_mut().filter(|_| findings_due)
            && let Err(e) = ev.open(run, clock, clock_ns(libc::CLOCK_MONOTONIC))
        {
            return ControlFlow::Break(format!("asking the kernel for evidence: {e:#}"));
        }
        self.export(run);
        self.checkpoint(run);
        self.show(run);
        self.bypass(run);
        ControlFlow::Continue(())
    }

    /// The export lines of this interval. A full disk must not stop the capture: said once, and
    /// the final export retries.
    fn export(&mut self, run: &Pipeline) {
        let Some(x) = self.exporter.as_mut() else { return };
        if let Err(e) = x.export(run, clock_ns(libc::CLOCK_REALTIME), false) {
            if !self.export_failed {
                eprintln!("roce-analyzer: warning: writing export lines: {}", escape(&chain(&e)));
            }
            self.export_failed = true;
        }
    }

    fn checkpoint(&mut self, run: &Pipeline) {
        let Some(c) = self.checkpoint.as_mut().filter(|c| c.last.elapsed() >= c.every) else { return };
        c.last = Instant::now();
        if let Err(e) = write_checkpoint(run, &c.path) {
            if !c.failed {
                eprintln!("roce-analyzer: warning: writing a checkpoint: {}", chain(&e));
            }
            c.failed = true;
        }
    }

    fn show(&mut self, run: &Pipeline) {
        let Some((view, top)) = self.view.as_mut() else { return };
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\x1b[H\x1b[2J{}", view.render(run, &self.iface, self.mode, self.started.elapsed(), *top));
        let _ = out.flush();
    }

    fn bypass(&mut self, run: &Pipeline) {
        let b = &mut self.bypass;
        if !b.said && !b.devices.is_empty() && self.started.elapsed() >= b.grace && roce_frames(&run.engine) == 0 {
            b.said = true;
            eprintln!(
                "roce-analyzer: warning: no RoCE frame after {:?} on {}, whose NIC has RDMA device(s) {}: \
                 hardware RoCE bypasses the kernel, so XDP here cannot see it. Capture on a switch mirror/ERSPAN \
                 port or with the NIC's offloaded sniffer instead.",
                b.grace,
                escape(&self.iface),
                b.devices.join(", ")
            );
        }
    }
}

/// Whether the live view goes to standard output: a terminal that nothing else writes to.
pub fn view_wanted(quiet: bool, json_to_stdout: bool) -> bool {
    !quiet && !json_to_stdout && std::io::stdout().is_terminal()
}

/// The report so far, written atomically where the final one will go, saying it is a
/// checkpoint.
fn write_checkpoint(run: &Pipeline, path: &write::Target) -> Result<(), write::WriteError> {
    let mut report = Report::assemble_with(run, RunKind::Live, Lists::Streamed);
    report.visibility.push(Note::new(
        NoteCode::Checkpoint,
        format!(
            "a checkpoint written while the run went on (every --checkpoint), up to {} ns: if the agent was \
             stopped without its final report (SIGKILL, a crash), this is its last state",
            report.capture.end_ns
        ),
    ));
    write::write_json_streamed(path, &report, run)
}
