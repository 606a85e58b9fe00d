//! The live agent's capacity: timeline records through [`LiveLoop::drain_for`] with every
//! analysis on, as the agent drains them. The kernel's logs are recorded from two loads and
//! replayed by a map source without a kernel: the bench capture's cluster (16 hosts writing
//! 64 KiB messages to the next, their ACKs, CNPs and PFC; what `cargo xtask bench` analyses
//! offline), classified by the same classifier the XDP program runs, and 10 000 flows taking
//! turns. Each drain finds what 10 ms of 500 k records/s leave (5 000), as the agent's drain
//! tick does at that rate.
//!
//! Two measures per case: wall time (`…/wall`) and the process's CPU time over all its
//! threads (`…/cpu`), so criterion's throughput is records per second and records per
//! CPU-second. Run `cargo bench -p tests --bench live_drain`, and under `taskset -c 0` for the
//! same on one core. (The whole agent under load: `cargo xtask bench-kernel --only soak`.)

use std::time::Duration;

use analyzer::capture::kernel::KernelError;
use analyzer::capture::kernel::snapshot::{KernelEvent, KernelSnapshot, MapSource};
use analyzer::engine::live::Clock;
use analyzer::live::LiveLoop;
use analyzer::pipeline::Pipeline;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::counter;
use analyzer_common::record::Record;
use analyzer_common::{FrameClass, PacketSummary};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rustc_hash::FxHashMap;
use tests::synth::records::round_robin;

/// Records one drain tick finds: 10 ms at 500 k records/s.
const TICK: usize = 5_000;
/// Drain ticks per measured step.
const TICKS: usize = 20;

/// The kernel's logs of a load, replayed lap after lap (each lap later by the load's span, so
/// time goes forward), `TICK` records made available per drain.
struct Logs {
    /// Each record with its flow's dense index, as the agent's flow ids give it.
    records: Vec<(Record, u32)>,
    pos: usize,
    /// Records the next drains may take.
    available: usize,
    lap: u64,
    span: u64,
    snapshot: KernelSnapshot,
}

impl Logs {
    fn new(records: Vec<Record>) -> Self {
        let mut ids: FxHashMap<FlowKey, u32> = FxHashMap::default();
        let records: Vec<(Record, u32)> = records
            .into_iter()
            .map(|r| {
                let next = ids.len() as u32 + 1;
                (r, *ids.entry(r.flow()).or_insert(next))
            })
            .collect();
        let span = records.last().map_or(0, |r| r.0.ts_ns) - records.first().map_or(0, |r| r.0.ts_ns) + 1_000;
        let snapshot = KernelSnapshot { counters: vec![0; counter::COUNT as usize], ..Default::default() };
        Logs { records, pos: 0, available: 0, lap: 0, span, snapshot }
    }
}

impl MapSource for Logs {
    fn snapshot(&mut self) -> Result<KernelSnapshot, KernelError> {
        Ok(self.snapshot.clone())
    }
    fn remove_flows(&mut self, _keys: &[FlowKey]) -> Result<(), KernelError> {
        Ok(())
    }
    fn drain_events(&mut self, _max: u64, _f: &mut dyn FnMut(KernelEvent)) -> u64 {
        0
    }
    fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record, u32)) -> u64 {
        let n = (max as usize).min(self.available);
        for _ in 0..n {
            if self.pos == self.records.len() {
                (self.pos, self.lap) = (0, self.lap + 1);
            }
            let (mut r, index) = self.records[self.pos];
            r.ts_ns += self.lap * self.span;
            f(&r, index);
            self.pos += 1;
        }
        self.available -= n;
        n as u64
    }
}

/// The bench capture's cluster, classified as the XDP program classifies it: its RoCE and CNP
/// frames as the timeline records the kernel logs.
fn cluster_records() -> Vec<Record> {
    use tests::synth::scenario::{ScenarioOptions, cluster};
    let mut o = ScenarioOptions { hosts: 16, message_bytes: 64 * 1024, ..Default::default() };
    o.messages = 200_000 / (16 * 17) + 1;
    let mut s = PacketSummary::zeroed();
    cluster(&o)
        .iter()
        .filter_map(|f| {
            let class = analyzer_common::classify::classify(&f.data[..], f.orig_len, &mut s);
            matches!(class, FrameClass::Roce | FrameClass::Cnp).then(|| Record::from_summary(f.ts_ns, &s))
        })
        .collect()
}

/// 10 000 flows taking turns ([`round_robin`]), 2 µs apart on average (500 k records/s).
fn round_robin_records() -> Vec<Record> {
    (0..200_000).map(|n| round_robin(n, 2_000)).collect()
}

/// The agent's loop over `records`, warmed by one lap.
fn agent(records: Vec<Record>) -> LiveLoop<Logs> {
    let mut run = Pipeline::default();
    let source = run.engine.add_source("live", "bench0", "bench0");
    let lap = records.len();
    let mut live = LiveLoop::new(Logs::new(records), run, source, Clock { offset: 0 }, Duration::from_secs(3600));
    live.maps_mut().available = lap;
    live.drain_for(Duration::from_secs(3600));
    live
}

/// `TICKS` drain ticks of `TICK` records each.
fn step(live: &mut LiveLoop<Logs>) {
    for _ in 0..TICKS {
        live.maps_mut().available = TICK;
        live.drain_for(Duration::from_secs(3600));
    }
}

/// CPU time of the whole process (all its threads).
fn process_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A load's records.
type Load = fn() -> Vec<Record>;

fn live_drain(c: &mut Criterion) {
    let mut g = c.benchmark_group("live_drain");
    g.throughput(Throughput::Elements((TICK * TICKS) as u64));
    let loads: [(&str, Load); 2] = [("cluster", cluster_records), ("10k_flows", round_robin_records)];
    for (load, records) in loads {
        let mut live = agent(records());
        g.bench_function(format!("{load}/wall"), |b| b.iter(|| step(&mut live)));
        g.bench_function(format!("{load}/cpu"), |b| {
            b.iter_custom(|iters| {
                let start = process_cpu();
                for _ in 0..iters {
                    step(&mut live);
                }
                process_cpu() - start
            })
        });
        assert!(live.run.analyses.flows.markings().count() > 0, "{load}: the analyses saw the flows");
    }
    g.finish();
}

criterion_group!(benches, live_drain);
criterion_main!(benches);
