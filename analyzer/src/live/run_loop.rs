//! The live loop: drains of the kernel's rings and polls of its maps into the run's pipeline, on
//! their own clocks ([`drive`]), generic over where the kernel state comes from ([`LiveLoop`]).

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use analyzer_common::flow::FlowKey;

use crate::capture::kernel::KernelError;
use crate::capture::kernel::clock_ns;
use crate::capture::kernel::snapshot::{KernelEvent, MapSource};
use crate::engine::DropReason;
use crate::engine::live::{Clock, LiveAccount};
use crate::frames::FrameMeta;
use crate::pipeline::{Lookahead, Pipeline};

/// The live loop's clocks: how often the maps are read and the rings drained, and when to
/// stop.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub interval: Duration,
    pub drain: Duration,
    pub duration: Option<Duration>,
}

/// Runs the loop until `pace.duration`, `stop`, or `on_tick` breaks (with the reason, which
/// `drive` returns): a drain every `pace.drain` (and right away while the rings hold more, each
/// for at most [`DRAIN_TIME`]), a poll every `pace.interval` followed by `on_tick(live, false)`
/// (`on_tick(live, true)` after each drain, for the kernel's log lines), and at the end a last
/// poll and [`LiveLoop::finish`]. The signals, the deadline and the tick are polled before the
/// drains (`biased`), so none waits on the input rate.
pub async fn drive<M: MapSource>(
    live: &mut LiveLoop<M>,
    pace: Pace,
    stop: impl std::future::Future<Output = ()>,
    mut on_tick: impl FnMut(&mut LiveLoop<M>, bool) -> ControlFlow<String>,
) -> Result<Option<String>, KernelError> {
    let deadline = pace.duration.map(|d| tokio::time::Instant::now() + d);
    let mut tick = tokio::time::interval(pace.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // The ring buffer is drained far more often than the maps are read: the program does not
    // wake the agent per event (that would cost every event a wakeup), so the ring must be
    // emptied before it fills. Reading an empty ring costs no syscall.
    let mut drain = tokio::time::interval(pace.drain);
    drain.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let until_end = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop, until_end);
    let mut backlog = false;
    let mut broken: Option<String> = None;
    loop {
        let end = broken.is_some()
            || tokio::select! {
                biased;
                _ = &mut stop => true,
                _ = &mut until_end => true,
                _ = tick.tick() => false,
                _ = drain.tick() => {
                    backlog = live.drain_for(DRAIN_TIME);
                    if let ControlFlow::Break(why) = on_tick(live, true) {
                        broken = Some(why);
                    }
                    continue;
                }
                _ = std::future::ready(()), if backlog => {
                    backlog = live.drain_for(DRAIN_TIME);
                    tokio::task::yield_now().await;
                    continue;
                }
            };
        backlog = live.poll(clock_ns(libc::CLOCK_MONOTONIC), !end)?;
        if end {
            live.finish(FINAL_DRAIN);
            return Ok(broken);
        }
        if let ControlFlow::Break(why) = on_tick(live, false) {
            broken = Some(why);
        }
    }
}

/// How often the event ring buffer is emptied.
pub const EVENT_DRAIN: Duration = Duration::from_millis(10);
/// How long one drain may run before the loop's other work gets its turn.
pub const DRAIN_TIME: Duration = Duration::from_millis(5);
/// Records and events read per ring per step of a drain (the time is checked between steps).
pub const DRAIN_BATCH: u64 = 1024;
/// How long the last drain may take when the run ends; what is left is counted `undrained`.
pub const FINAL_DRAIN: Duration = Duration::from_secs(1);
/// Entries the final count of what is left reads at most (more than both rings hold).
pub(crate) const UNDRAINED_MAX: u64 = 1 << 20;

/// The live loop's work, generic over where the kernel state comes from: the XDP program's
/// maps ([`crate::capture::kernel::snapshot::AyaMaps`]) in production, a fake in tests, so the accounting, the drains and the
/// eviction are tested without a kernel.
pub struct LiveLoop<M: MapSource> {
    maps: M,
    pub run: Pipeline,
    acc: LiveAccount,
    pub clock: Clock,
    idle: Duration,
    /// Idle flows (evicted from the kernel) kept with their own totals, at most.
    pub keep_idle: usize,
    /// The kernel's global counters at the last poll.
    pub counters: Vec<u64>,
}

impl<M: MapSource> LiveLoop<M> {
    pub fn new(maps: M, run: Pipeline, source: u16, clock: Clock, idle: Duration) -> Self {
        let keep_idle = run.engine.max_flows.min(usize::MAX / 2);
        LiveLoop { maps, run, acc: LiveAccount::new(source), clock, idle, keep_idle, counters: Vec::new() }
    }

    /// Where the kernel state comes from (a bench's recorded logs, say).
    pub fn maps_mut(&mut self) -> &mut M {
        &mut self.maps
    }

    /// The input index of the interface (the run's one source).
    pub fn source(&self) -> u16 {
        self.acc.source
    }

    /// Hands at most `max` ring-buffer events and `max` timeline records to the analyses;
    /// returns how many were read and whether either ring may hold more.
    pub fn drain(&mut self, max: u64) -> (u64, bool) {
        let (run, clock, source) = (&mut self.run, &self.clock, self.acc.source);
        let events = self.maps.drain_events(max, &mut |e| match e {
            KernelEvent::Frame(e) => run.observe_event(FrameMeta { ts_ns: clock.wall(e.ts_ns), source }, e),
            KernelEvent::Cm(c) => run.observe_cm(&c.src_ip, &c.dst_ip, &c.mad),
        });
        let mut ahead = Lookahead::default();
        let records = self.maps.drain_records(max, &mut |r, index| {
            let mut r = *r;
            r.ts_ns = clock.wall(r.ts_ns);
            ahead.push(run, r, index);
        });
        ahead.finish(run);
        self.count_lost_records();
        (events + records, events == max || records == max)
    }

    /// `timeline_full` and `ringbuf_full`: the records and events the shared rings had no room
    /// for (the kernel's counts at the last poll) and those the CPUs' logs overwrote (found by
    /// the drains, the last ones too).
    fn count_lost_records(&mut self) {
        use analyzer_common::maps::counter;
        let ring = |i: u32| self.counters.get(i as usize).copied().unwrap_or(0);
        let records = ring(counter::TIMELINE_FULL) + self.maps.records_lost();
        let events = ring(counter::RINGBUF_FULL) + self.maps.events_lost();
        self.run.engine.dropped.insert(DropReason::TimelineFull, records);
        self.run.engine.dropped.insert(DropReason::RingbufFull, events);
    }

    /// Drains in steps of [`DRAIN_BATCH`] for at most `budget`; true when the rings may hold
    /// more (the caller comes back after its other work).
    pub fn drain_for(&mut self, budget: Duration) -> bool {
        let until = Instant::now() + budget;
        loop {
            let (_, more) = self.drain(DRAIN_BATCH);
            if !more {
                return false;
            }
            if Instant::now() >= until {
                return true;
            }
        }
    }

    /// One poll at `now_mono_ns`: snapshot, account, drain (for at most [`DRAIN_TIME`]), and
    /// (unless this is the last one) evict flows idle for longer than the idle timeout. True
    /// when the rings may hold more.
    pub fn poll(&mut self, now_mono_ns: u64, evict: bool) -> Result<bool, KernelError> {
        let snap = self.maps.snapshot()?;
        self.acc.apply(&mut self.run.engine, &snap, &self.clock);
        self.counters.clone_from(&snap.counters);
        self.count_lost_records();
        let more = self.drain_for(DRAIN_TIME);
        if evict {
            let gone = LiveAccount::idle(&snap, now_mono_ns.saturating_sub(self.idle.as_nanos() as u64));
            if !gone.is_empty() {
                self.maps.remove_flows(&gone)?;
                self.acc.forget(&gone);
            }
            // Flows the kernel let go keep their totals here, up to as many idle ones as the
            // kernel holds flows; past that the oldest fold into one aggregate (churn over
            // months must not grow the agent). The sets are built only when that is due (the
            // evicted flows are among the snapshot's).
            let active_count = snap.flows.len() - gone.len();
            if self.run.engine.flows.len().saturating_sub(active_count) > self.keep_idle {
                let gone: rustc_hash::FxHashSet<FlowKey> = gone.into_iter().collect();
                let active: rustc_hash::FxHashSet<FlowKey> =
                    snap.flows.iter().map(|(k, _)| *k).filter(|k| !gone.contains(k)).collect();
                let folded = self.run.engine.fold_idle(self.keep_idle, &active);
                if !folded.is_empty() {
                    self.run.analyses.forget(&folded);
                }
            }
        }
        Ok(more)
    }

    /// The end of a run: drains for at most `budget`, then counts what is left in the rings
    /// as `undrained` (read and dropped, not analysed).
    pub fn finish(&mut self, budget: Duration) {
        self.maps.release_records();
        if self.drain_for(budget) {
            let left = self.maps.drain_events(UNDRAINED_MAX, &mut |_| {})
                + self.maps.drain_records(UNDRAINED_MAX, &mut |_, _| {});
            self.run.engine.count_drop(DropReason::Undrained, left);
        }
        self.run.settle_sightings();
    }

    pub fn into_pipeline(self) -> Pipeline {
        self.run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    use crate::capture::kernel::snapshot::{KernelEvent, MapSource};
    use crate::live::rdma_devices;

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
