//! The live path: the XDP program on an interface → its maps, polled every interval → the
//! same engine the offline path fills → the same report.
//!
//! [`run`] loads and attaches the program ([`crate::capture::kernel`]), then [`drive`]s the
//! [`LiveLoop`] (drains of the kernel's rings, polls of its maps: `run_loop`) and after each
//! poll one tick of its outputs (metrics, evidence, export, checkpoint, live view, in that
//! order: `outputs`). [`LiveOptions`] (`options`) are built from the command line in
//! [`crate::cli`].

mod options;
mod outputs;
mod run_loop;

use std::ops::ControlFlow;
use std::time::Instant;

use crate::capture::kernel::KernelError;
use crate::capture::kernel::clock_ns;
use crate::capture::kernel::evidence::EvidenceMaps;
use crate::capture::kernel::load::{attach, load};
use crate::capture::kernel::snapshot::AyaMaps;
use crate::capture::nic::NicBaseline;
use crate::engine::live::Clock;
use crate::pipeline::Pipeline;
use crate::report::evidence::live::LiveEvidence;
use crate::report::export::Exporter;

pub use options::LiveOptions;
pub use outputs::view_wanted;
use outputs::{Bypass, Checkpoint, EVIDENCE_DRAIN, Outputs, roce_frames};
pub use run_loop::{DRAIN_BATCH, DRAIN_TIME, EVENT_DRAIN, FINAL_DRAIN, LiveLoop, Pace, drive};

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Metrics(#[from] crate::metrics_server::MetricsError),
    #[error("starting the async runtime or its signal handlers")]
    Runtime(#[from] std::io::Error),
    #[error("dropping privileges after attaching")]
    Privilege(#[from] crate::privilege::PrivilegeError),
}

/// RDMA devices of a hardware NIC behind a network interface (e.g. mlx5_0 for a ConnectX
/// port), from `SYSFS/class/net/IFACE/device/infiniband`. Soft-RoCE (rxe) devices have no
/// such parent device: their RoCE goes through the kernel, and XDP sees it.
pub fn rdma_devices(sysfs: &std::path::Path, iface: &str) -> Vec<String> {
    let dir = sysfs.join("class/net").join(iface).join("device/infiniband");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The index of interface `name`, or 0 when there is none.
fn interface_index(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else { return 0 };
    // SAFETY: c is a valid NUL-terminated string.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// How a live run ended: with the run's final totals, and why it stopped early when it did
/// (the interface went away): the caller writes the report and fails.
#[derive(Debug)]
pub struct Outcome {
    pub run: Pipeline,
    pub failed: Option<String>,
    /// `--evidence`: the files cut, to be linked into the report.
    pub evidence: Option<crate::report::evidence::live::Closed>,
    /// The kernel's counters at the last poll.
    pub counters: Vec<u64>,
}

/// Runs until `--duration`, SIGINT or SIGTERM (or the interface goes away), feeding
/// `exporter` and the other outputs of `opts` on every tick; returns the run with the final
/// totals.
pub fn run(opts: &LiveOptions, exporter: Option<&mut Exporter>) -> Result<Outcome, LiveError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        // Before anything is attached: a SIGINT/SIGTERM from now on ends the run with a report.
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = async {
            tokio::select! {
                _ = sigint.recv() => {}
                _ = sigterm.recv() => {}
            }
        };
        let mut started = start(opts, exporter).await?;
        let (live, outputs) = (&mut started.live, &mut started.outputs);
        let pace = Pace { interval: opts.interval, drain: EVENT_DRAIN, duration: opts.duration };
        let ifindex = interface_index(&opts.iface);
        let source = live.source();
        let logger = &mut started.logger;
        let broken = drive(live, pace, stop, |live, flush_only| {
            if let Some(l) = logger.as_mut() {
                l.flush();
            }
            outputs.drained(&live.run, &live.clock, source);
            if flush_only {
                return ControlFlow::Continue(());
            }
            // An interface that was deleted (or replaced) sees nothing more: stop, with a report.
            if interface_index(&opts.iface) != ifindex {
                return ControlFlow::Break(format!(
                    "interface {} disappeared during the run (deleted or replaced); the report covers the time before",
                    crate::report::render::text::escape(&opts.iface)
                ));
            }
            outputs.tick(&mut live.run, &live.clock)
        })
        .await?;
        Ok(started.finish(broken))
    })
}

/// A run attached and ready: its loop, its outputs, the kernel's log and the loaded program
/// (dropped at the end, which detaches it).
struct Started<'x> {
    ebpf: aya::Ebpf,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    live: LiveLoop<AyaMaps>,
    outputs: Outputs<'x>,
    start_wall: u64,
}

/// Loads and attaches the program, drops privileges, starts the metrics server and says how
/// the program is attached.
async fn start<'x>(opts: &LiveOptions, exporter: Option<&'x mut Exporter>) -> Result<Started<'x>, LiveError> {
    let mut ebpf = load(opts.load, &[analyzer_common::maps::PROGRAM])?;
    // The program's log lines (aya-log) go through the `log` crate; they are read on the
    // event-drain tick and once more at the end.
    let logger = match opts.load.kernel_log {
        true => Some(aya_log::EbpfLogger::init(&mut ebpf).map_err(KernelError::Log)?),
        false => None,
    };
    let devices = rdma_devices(std::path::Path::new("/sys"), &opts.iface);
    let mut outputs = Outputs::new(&opts.iface, exporter, Bypass { devices, grace: opts.rdma_grace, said: false });
    if let Some((o, time_ns)) = &opts.evidence {
        outputs.evidence = Some(LiveEvidence::new(EvidenceMaps::new(&mut ebpf)?, o.clone(), *time_ns));
    }
    // Before the program is attached (and privilege dropped): the maps, with the CPUs' logs
    // mapped.
    let maps = AyaMaps::new(&mut ebpf)?;
    let attached = attach(&mut ebpf, &opts.iface, opts.mode, opts.frags)?;
    // Least privilege before a frame is read or a request served.
    crate::privilege::drop_to(opts.user.as_deref())?;
    if let Some((addr, top)) = &opts.metrics {
        let server = crate::metrics_server::MetricsServer::start(addr)?;
        eprintln!("roce-analyzer: metrics on http://{}/metrics", server.local_addr());
        outputs.metrics = Some((server, *top));
    }
    say_attached(&opts.iface, attached.mode, attached.frags, attached.fallback.as_deref());
    outputs.mode = attached.mode;
    outputs.view = opts.view_top.map(|top| (Default::default(), top));
    outputs.checkpoint =
        opts.checkpoint.clone().map(|(path, every)| Checkpoint { path, every, last: Instant::now(), failed: false });
    let mut run = Pipeline::new(opts.config.clone());
    run.engine.timeline = opts.load.timeline;
    let source = run.engine.add_source("live", &opts.iface, &opts.label);
    run.engine.sources[source as usize].xdp =
        Some(crate::model::XdpJson { mode: attached.mode.into(), frags: attached.frags, fallback: attached.fallback });
    let live = LiveLoop::new(maps, run, source, Clock::now(), opts.idle_timeout);
    outputs.nic = opts.nic_counters.then(|| NicBaseline::read(std::path::Path::new("/sys"), &opts.iface));
    let start_wall = live.clock.wall(clock_ns(libc::CLOCK_MONOTONIC));
    outputs.started = Instant::now();
    Ok(Started { ebpf, logger, live, outputs, start_wall })
}

/// How the program was attached, and why not as asked when it fell back.
fn say_attached(iface: &str, mode: &str, frags: bool, fallback: Option<&str>) {
    let shown = crate::report::render::text::escape(iface);
    let program = if frags { "multi-buffer" } else { "single-buffer" };
    if let Some(why) = fallback {
        let cost = if mode == "skb" { ", which sees frames later and costs more CPU" } else { "" };
        eprintln!(
            "roce-analyzer: warning: on {shown}: {}; using {mode} XDP with the {program} program{cost}",
            crate::report::render::text::escape(why)
        );
    }
    eprintln!("roce-analyzer: attached to {shown} ({mode} XDP, {program} program); stop with Ctrl-C");
}

impl Started<'_> {
    /// The end of the run: last NIC counters, log lines and evidence copies, the run's span.
    fn finish(mut self, broken: Option<String>) -> Outcome {
        let (live, outputs) = (&mut self.live, &mut self.outputs);
        if let Some(n) = &outputs.nic {
            live.run.engine.nic = Some(n.since());
        }
        if let Some(l) = &mut self.logger {
            l.flush();
        }
        let end_wall = live.clock.wall(clock_ns(libc::CLOCK_MONOTONIC));
        let source = live.source();
        if let Some(ev) = &mut outputs.evidence {
            let until = Instant::now() + FINAL_DRAIN;
            while ev.drain(EVIDENCE_DRAIN, &live.run, &live.clock, source) > 0 && Instant::now() < until {}
        }
        let counters = live.counters.clone();
        let devices = std::mem::take(&mut outputs.bypass.devices);
        let evidence = outputs.evidence.take().map(LiveEvidence::close);
        let mut run = self.live.into_pipeline();
        if roce_frames(&run.engine) == 0 && !devices.is_empty() {
            run.engine.visibility.rdma_devices = devices;
        }
        run.engine.first_ns.get_or_insert(self.start_wall);
        run.engine.last_ns.get_or_insert(end_wall);
        // Dropping `ebpf` closes the bpf_link: the program leaves the interface.
        drop(self.ebpf);
        Outcome { run, failed: broken, evidence, counters }
    }
}
