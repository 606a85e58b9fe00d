//! The live path: the XDP program on an interface → its maps, polled every interval → the
//! same engine the offline path fills → the same report.
//!
//! [`run`] loads and attaches the program ([`crate::capture::kernel`]), then [`drive`]s the
//! [`LiveLoop`] (drains of the kernel's rings, polls of its maps: `run_loop`) and after each
//! poll one tick of its [`Outputs`] (metrics, evidence, export, checkpoint, live view, in that
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
        outputs.metrics = Some((crate::metrics_server::MetricsServer::start(addr).await?, *top));
    }
    say_attached(&opts.iface, attached.mode, attached.frags, attached.fallback.as_deref());
    outputs.mode = attached.mode;
    outputs.view = opts.view_top.map(|top| (Default::default(), top));
    outputs.checkpoint =
        opts.checkpoint.clone().map(|(path, every)| Checkpoint { path, every, last: Instant::now(), failed: false });
    let mut run = Pipeline::new(opts.config.clone());
    run.engine.timeline = opts.load.timeline;
    let source = run.engine.add_source("live", &opts.iface, &opts.iface);
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

#[cfg(test)]
mod tests {
    use super::*;

    use analyzer_common::flow::FlowKey;
    use analyzer_common::maps::{FlowEntry, counter};
    use analyzer_common::record::{Record, flag};

    use crate::capture::kernel::snapshot::KernelSnapshot;

    /// A kernel without a kernel: the snapshot the next poll reads, records and events waiting
    /// in the rings, and the flows the loop asked to delete.
    #[derive(Default)]
    struct FakeMaps {
        snapshot: KernelSnapshot,
        records: Vec<Record>,
        removed: Vec<FlowKey>,
        /// Records and events the logs lost, as a drain finds them.
        records_lost: u64,
        events_lost: u64,
    }

    impl MapSource for FakeMaps {
        fn snapshot(&mut self) -> Result<KernelSnapshot, KernelError> {
            Ok(self.snapshot.clone())
        }
        fn remove_flows(&mut self, keys: &[FlowKey]) -> Result<(), KernelError> {
            self.removed.extend_from_slice(keys);
            self.snapshot.flows.retain(|(k, _)| !keys.contains(k));
            Ok(())
        }
        fn drain_events(&mut self, _max: u64, _f: &mut dyn FnMut(KernelEvent)) -> u64 {
            0
        }
        fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record, u32)) -> u64 {
            let n = (self.records.len() as u64).min(max);
            for r in self.records.drain(..n as usize) {
                f(&r, 0);
            }
            n
        }
        fn records_lost(&self) -> u64 {
            self.records_lost
        }
        fn events_lost(&self) -> u64 {
            self.events_lost
        }
    }

    use crate::engine::live::tests::key;
    use crate::model::Report;
    use crate::report::RunKind;

    fn slot(packets: u64, last_ns: u64) -> FlowEntry {
        let mut e = FlowEntry::zeroed();
        let c = &mut e.counters;
        c.packets = packets as u32;
        c.bytes = packets * 1000;
        c.first_ns = 1;
        c.last_ns = last_ns;
        e
    }

    fn record(src: u8, dst: u8, qp: u32, opcode: u8, psn: u32, ts: u64, flags: u8) -> Record {
        let mut r = Record { ts_ns: ts, psn, opcode, flags, ip_version: 4, dst_qp: qp, ..Default::default() };
        r.src_ip[..4].copy_from_slice(&[10, 0, 0, src]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 0, dst]);
        r
    }

    fn live() -> LiveLoop<FakeMaps> {
        let maps = FakeMaps {
            snapshot: KernelSnapshot { counters: vec![0; counter::COUNT as usize], ..Default::default() },
            ..Default::default()
        };
        let mut run = Pipeline::default();
        let source = run.engine.add_source("live", "veth0", "veth0");
        LiveLoop::new(maps, run, source, Clock { offset: 0 }, Duration::from_secs(60))
    }

    const S: u64 = 1_000_000_000;

    /// A kernel whose timeline never empties: every drain finds `max` fresh records (random
    /// flows, opcodes, PSNs, flags), as a flood faster than the agent would.
    struct FloodMaps {
        seed: u64,
        records: u64,
        snapshot: KernelSnapshot,
    }

    impl FloodMaps {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.seed ^= self.seed >> 12;
            self.seed ^= self.seed << 25;
            self.seed ^= self.seed >> 27;
            self.seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    impl MapSource for FloodMaps {
        fn snapshot(&mut self) -> Result<KernelSnapshot, KernelError> {
            self.snapshot.counters[analyzer_common::FrameClass::Roce as usize] = self.records;
            Ok(self.snapshot.clone())
        }
        fn remove_flows(&mut self, _keys: &[FlowKey]) -> Result<(), KernelError> {
            Ok(())
        }
        fn drain_events(&mut self, _max: u64, _f: &mut dyn FnMut(KernelEvent)) -> u64 {
            0
        }
        fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record, u32)) -> u64 {
            for _ in 0..max {
                let x = self.next();
                let ops = [0x0A, 0x06, 0x07, 0x08, 0x0C, 0x10, 0x11, 0x81, 0x64];
                let mut r = record(
                    (x & 7) as u8,
                    ((x >> 3) & 7) as u8,
                    ((x >> 6) & 0xF) as u32,
                    ops[((x >> 10) % ops.len() as u64) as usize],
                    ((x >> 16) & 0xFF_FFFF) as u32,
                    self.records * 100,
                    (x >> 40) as u8 & (flag::ACK_REQ | flag::AETH),
                );
                r.ecn = (x >> 48) as u8 & 3;
                r.aeth_syndrome = (x >> 56) as u8;
                r.frame_len = 64 + (x >> 50) as u32 % 4000;
                self.records += 1;
                f(&r, 0);
            }
            max
        }
    }

    #[test]
    fn a_flood_it_cannot_keep_up_with_never_stalls_the_loop() {
        let maps = FloodMaps {
            seed: 0x9E37_79B9_7F4A_7C15,
            records: 0,
            snapshot: KernelSnapshot { counters: vec![0; counter::COUNT as usize], ..Default::default() },
        };
        let mut run = Pipeline::default();
        let source = run.engine.add_source("live", "veth0", "veth0");
        let mut live = LiveLoop::new(maps, run, source, Clock { offset: 0 }, Duration::from_secs(60));
        let pace = Pace {
            interval: Duration::from_millis(50),
            drain: Duration::from_millis(10),
            duration: Some(Duration::from_millis(400)),
        };
        let mut ticks = Vec::new();
        let started = Instant::now();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(drive(&mut live, pace, std::future::pending(), |live, flush_only| {
            if !flush_only {
                ticks.push(live.run.engine.class_count(analyzer_common::FrameClass::Roce));
            }
            ControlFlow::Continue(())
        }))
        .unwrap();
        let took = started.elapsed();
        // The deadline held although the ring never emptied: each drain yields after
        // DRAIN_TIME, and the final one after FINAL_DRAIN (generous bounds: a loaded machine).
        assert!(took < Duration::from_millis(400) + FINAL_DRAIN + Duration::from_secs(3), "ran {took:?}");
        // The polls went on during the flood, and saw the counters advance.
        assert!(ticks.len() >= 3, "{} ticks", ticks.len());
        assert!(ticks.windows(2).all(|w| w[0] <= w[1]) && ticks.last() > ticks.first(), "{ticks:?}");
        // What the last drain could not take is counted, not lost silently.
        let undrained = live.run.engine.dropped.get(&crate::engine::DropReason::Undrained).copied().unwrap_or(0);
        assert!(undrained > 0, "the flood outlasts the final drain");
        let r = Report::assemble(&live.run, RunKind::Live);
        assert_eq!(r.capture.dropped["undrained"], undrained);
    }

    /// Churn for hours: every round brings new flows and the old ones go idle. The kernel
    /// lets them go; the agent keeps the newest idle ones with their own totals and folds the
    /// oldest into one aggregate, forgetting their analysis state, so its flows stay bounded
    /// and nothing is lost from the totals.
    #[test]
    fn churn_folds_the_oldest_idle_flows_and_keeps_every_packet() {
        let mut l = live();
        l.idle = Duration::from_secs(1);
        l.keep_idle = 150;
        let mut sent = 0;
        for round in 0..10u32 {
            let t = round as u64 * 10 * S;
            l.maps.snapshot.flows = (0..100).map(|i| (key(round * 100 + i), slot(3 + i as u64 % 5, t))).collect();
            sent += (0..100).map(|i| 3 + i as u64 % 5).sum::<u64>();
            for i in 0..100 {
                let mut r = record(1, 0, round * 100 + i, 0x04, 7, t, flag::ACK_REQ);
                r.src_ip = key(0).src;
                r.dst_ip = [0; 16];
                l.maps.records.push(r);
            }
            l.poll(t + S / 2, true).unwrap();
            let (engine, folded) = (&l.run.engine, l.run.engine.folded);
            let idle = engine.flows.len().saturating_sub(100);
            assert!(idle <= 150, "round {round}: {idle} idle flows kept");
            assert_eq!(folded.flows as usize + engine.flows.len(), (round as usize + 1) * 100, "every flow once");
            let kept: u64 = engine.flows.iter().map(|(_, s)| s.packets).sum();
            assert_eq!(kept + folded.packets, sent, "round {round}: no packet lost");
            let a = &l.run.analyses;
            let requests = a.rtt.request_flows(&a.flows).filter(|k| engine.flows.get(k).is_none()).count();
            assert_eq!(requests, 0, "round {round}: the folded flows' RTT state is forgotten too");
            assert!(a.rtt.request_flows(&a.flows).count() >= 100, "the kept flows' is not");
        }
        // The newest flows kept their own totals; the oldest are the aggregate.
        assert!(l.run.engine.flows.get(&key(999)).is_some() && l.run.engine.flows.get(&key(0)).is_none());
        let r = Report::assemble(&l.run, RunKind::Live);
        let f = r.capture.flows_folded.expect("flows_folded");
        assert!(r.visibility.iter().any(|n| n.code == crate::model::NoteCode::FlowsFolded));
        assert_eq!(f.flows + r.flows.len() as u64, 1000);
        assert_eq!(f.packets + r.flows.iter().map(|x| x.packets).sum::<u64>(), sent);
    }

    #[test]
    fn polls_add_interval_deltas_not_totals() {
        let mut l = live();
        l.maps.snapshot.flows = vec![(key(1), slot(15, S))];
        l.poll(2 * S, true).unwrap();
        l.maps.snapshot.flows = vec![(key(1), slot(30, 2 * S))];
        l.poll(3 * S, true).unwrap();
        l.poll(4 * S, true).unwrap();
        let f = l.run.engine.flows.get(&key(1)).unwrap();
        assert_eq!((f.packets, f.bytes), (30, 30_000), "15, then 15 more, then nothing new");
    }

    #[test]
    fn idle_flows_are_evicted_and_keep_their_totals() {
        let mut l = live();
        l.maps.snapshot.flows = vec![(key(1), slot(4, S)), (key(2), slot(6, 100 * S))];
        l.poll(100 * S, true).unwrap();
        assert_eq!(l.maps.removed, vec![key(1)], "idle for 99 s > 60 s; key 2 is fresh");
        // The kernel counts the evicted flow from zero when it comes back.
        l.maps.snapshot.flows.push((key(1), slot(3, 101 * S)));
        l.poll(101 * S, false).unwrap();
        assert_eq!(l.run.engine.flows.get(&key(1)).unwrap().packets, 7);
        assert_eq!(l.run.engine.flows.get(&key(2)).unwrap().packets, 6);
        assert_eq!(l.maps.removed.len(), 1, "the last poll evicts nothing");
    }

    #[test]
    fn ring_records_reach_the_analyses_on_drain_and_on_poll() {
        let mut l = live();
        l.maps.records.push(record(1, 2, 0x21, 0x0A, 7, 1_000, flag::ACK_REQ));
        assert_eq!(l.drain(DRAIN_BATCH), (1, false));
        assert_eq!(l.drain(DRAIN_BATCH), (0, false), "drained once");
        l.maps.records.push(record(2, 1, 0x11, 0x11, 7, 4_000, flag::AETH));
        l.poll(S, true).unwrap();
        let rtt = &l.run.analyses.rtt.flows[&record(1, 2, 0x21, 0, 0, 0, 0).flow()];
        assert_eq!(rtt.samples.values(), vec![3_000]);
    }

    #[test]
    fn kernel_losses_are_counted() {
        let mut l = live();
        for (i, n) in [(counter::FLOW_MAP_FULL, 3), (counter::RINGBUF_FULL, 5), (counter::TIMELINE_FULL, 7)] {
            l.maps.snapshot.counters[i as usize] = n;
        }
        l.poll(S, true).unwrap();
        let d = &l.run.engine.dropped;
        assert_eq!((d[&DropReason::FlowMapFull], d[&DropReason::RingbufFull], d[&DropReason::TimelineFull]), (3, 5, 7));
        let r = Report::assemble(&l.run, RunKind::Live);
        assert_eq!((r.capture.dropped["flow_map_full"], r.capture.dropped["timeline_full"]), (3, 7));
    }

    /// Records and events a CPU's logs overwrote are found by the drains, the last ones of a run
    /// too (after its last snapshot), and counted with those the shared rings refused.
    #[test]
    fn records_the_logs_lost_are_counted_to_the_last_drain() {
        let mut l = live();
        l.maps.snapshot.counters[counter::TIMELINE_FULL as usize] = 7;
        l.maps.snapshot.counters[counter::RINGBUF_FULL as usize] = 1;
        (l.maps.records_lost, l.maps.events_lost) = (2, 3);
        l.poll(S, true).unwrap();
        let d = |l: &LiveLoop<FakeMaps>| {
            (l.run.engine.dropped[&DropReason::TimelineFull], l.run.engine.dropped[&DropReason::RingbufFull])
        };
        assert_eq!(d(&l), (9, 4));
        l.maps.records_lost = 5;
        l.poll(2 * S, false).unwrap();
        (l.maps.records_lost, l.maps.events_lost) = (11, 6);
        l.finish(Duration::from_millis(10));
        assert_eq!(d(&l), (18, 7), "the final drain's finds too");
        let r = Report::assemble(&l.run, RunKind::Live);
        assert_eq!((r.capture.dropped["timeline_full"], r.capture.dropped["ringbuf_full"]), (18, 7));
    }

    #[test]
    fn hardware_rnic_is_found_and_its_blindness_stated() {
        let sys = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("class/net/eth0/device/infiniband/mlx5_0")).unwrap();
        std::fs::create_dir_all(sys.path().join("class/net/veth0")).unwrap();
        assert_eq!(rdma_devices(sys.path(), "eth0"), vec!["mlx5_0".to_string()]);
        assert!(rdma_devices(sys.path(), "veth0").is_empty());
        assert!(rdma_devices(sys.path(), "missing0").is_empty());

        let mut run = Pipeline::default();
        run.engine.add_source("live", "eth0", "eth0");
        run.engine.visibility.rdma_devices = vec!["mlx5_0".into()];
        let r = Report::assemble(&run, RunKind::Live);
        let note = r.visibility.iter().find(|n| n.code == crate::model::NoteCode::HardwareRoceBypass).expect("note");
        assert!(
            note.message.contains("mlx5_0") && note.message.contains("bypass")
                || note.message.contains("without the kernel")
        );
        assert!(!r.visibility.iter().any(|n| n.code == crate::model::NoteCode::NoRoce), "one note, not two");
    }
}
