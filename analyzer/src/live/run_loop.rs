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
/// maps ([`AyaMaps`]) in production, a fake in tests, so the accounting, the drains and the
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
