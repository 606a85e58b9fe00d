//! ns per timeline record through the analyses as the live agent feeds them (the lookahead of
//! [`Lookahead`]), with 10 000 flows taking turns: the agent's per-record cost without the
//! replay's noise (issue 12's agent budget; `cargo xtask bench-kernel --only veth` measures the
//! whole agent). Records named by their kernel flow id (as the agent takes them) and by key
//! alone (as before flow ids) are both timed, in the same run. Run: `cargo bench -p tests
//! --bench analyses`.

use analyzer::capture::kernel::flow_ids::FlowIds;
use analyzer::pipeline::{Lookahead, Pipeline};
use analyzer_common::record::CompactRecord;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tests::synth::records::{FLOWS, round_robin as record};

/// Records per measured step.
const STEP: u64 = 20_000;

/// How the records reach the analyses.
#[derive(Clone, Copy)]
enum Naming {
    /// As the agent hands them on: the kernel's compact record, naming flow `i` by its id
    /// `i + 1`, expanded with the key the agent keeps for the id ([`FlowIds`]), and the id as
    /// the flow's index.
    Id,
    /// Whole records, found by their key alone (the agent before flow ids): the baseline of
    /// the same run.
    Key,
}

/// The analyses and what the agent knows of the flows' ids.
struct Agent {
    run: Pipeline,
    ids: FlowIds,
}

/// Records `n..n + count` through a lookahead, as one drain of the live agent.
fn analyse(a: &mut Agent, n: &mut u64, gap: u64, count: u64, naming: Naming) {
    let mut ahead = Lookahead::default();
    let Agent { run, ids } = a;
    match naming {
        Naming::Id => {
            let drained: Vec<CompactRecord> =
                (*n..*n + count).map(|i| CompactRecord::of(&record(i, gap), (i % FLOWS as u64) as u32 + 1)).collect();
            ids.expand_all(&drained, &mut |r, id| ahead.push(run, *r, id));
        }
        Naming::Key => (*n..*n + count).for_each(|i| ahead.push(run, record(i, gap), 0)),
    }
    *n += count;
    ahead.finish(run);
}

/// The analyses with every flow known (the steady state of a long run), and the next record.
fn warmed(gap: u64, naming: Naming) -> (Agent, u64) {
    let mut a = Agent { run: Pipeline::default(), ids: FlowIds::default() };
    for i in 0..FLOWS as u64 {
        a.ids.learn(i as u32 + 1, record(i, gap).flow());
    }
    let mut n = 0;
    analyse(&mut a, &mut n, gap, 3 * FLOWS as u64, naming);
    (a, n)
}

/// At 200 k records/s the 100 µs incast window holds about 20 senders: one long episode. At
/// 50 k it holds about 5, around the minimum of 4: episodes stop and come back all the time.
fn live_records(c: &mut Criterion) {
    let mut g = c.benchmark_group("analyses");
    g.throughput(Throughput::Elements(STEP));
    for (name, gap) in [("write_only_10k_flows_200k_per_s", 5_000), ("write_only_10k_flows_50k_per_s", 20_000)] {
        for (naming, how) in [(Naming::Id, "by_id"), (Naming::Key, "by_key")] {
            let (mut a, mut n) = warmed(gap, naming);
            g.bench_function(format!("{name}_{how}"), |b| b.iter(|| analyse(&mut a, &mut n, gap, STEP, naming)));
            assert_eq!(a.run.analyses.flows.markings().count(), FLOWS as usize, "every flow in the analyses");
        }
    }
    g.finish();
}

/// Records per drain of the live agent at 200 k records/s (a drain every 10 ms).
const DRAIN: u64 = 2_000;
/// More than the last-level cache (32 MiB here), written between drains.
const EVICT_BYTES: usize = 64 << 20;

/// The same at 200 k records/s, with the caches emptied between drains as the live agent finds
/// them: between two of its drains the replay, the kernel's receive path and other tenants of
/// the machine have run, so its analyses' state comes from memory. Only the drains are timed.
fn cold_records(c: &mut Criterion) {
    let mut g = c.benchmark_group("analyses_cold");
    g.throughput(Throughput::Elements(DRAIN));
    let gap = 5_000;
    let (mut a, mut n) = warmed(gap, Naming::Id);
    let mut evict = vec![0u8; EVICT_BYTES];
    g.bench_function("write_only_10k_flows_200k_per_s_drains_of_2000", |b| {
        b.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            for i in 0..iters {
                for chunk in evict.chunks_mut(64) {
                    chunk[0] = chunk[0].wrapping_add(i as u8 | 1);
                }
                std::hint::black_box(&evict);
                let t = std::time::Instant::now();
                analyse(&mut a, &mut n, gap, DRAIN, Naming::Id);
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

/// One poll of the live agent's accounting ([`LiveAccount::apply`]) over a snapshot of 10 000
/// flows, each a packet further than at the poll before, as the kernel table gives it (its
/// slots in order, spread over a table of 74 904); with the caches emptied between polls, as a
/// poll a second after the last finds them. Per flow.
fn live_poll(c: &mut Criterion) {
    use analyzer::capture::kernel::snapshot::KernelSnapshot;
    use analyzer::engine::Engine;
    use analyzer::engine::live::{Clock, LiveAccount};
    use analyzer_common::flow::FlowKey;
    use analyzer_common::maps::{FlowEntry, counter};

    let mut g = c.benchmark_group("live_poll");
    g.throughput(Throughput::Elements(FLOWS as u64));
    let flows: Vec<(FlowKey, FlowEntry)> = (0..FLOWS)
        .map(|i| {
            let r = record(i as u64, 5_000);
            let key = r.flow();
            let mut e = FlowEntry::zeroed();
            (e.counters.id, e.counters.first_ns, e.counters.dscp) = (i * 7 + 1, 1_000, 26);
            (key, e)
        })
        .collect();
    let mut snap = KernelSnapshot { counters: vec![0; counter::COUNT as usize], flows, ..Default::default() };
    let (mut engine, mut account, clock) = (Engine::new(), LiveAccount::new(0), Clock { offset: 0 });
    let mut evict = vec![0u8; EVICT_BYTES];
    g.bench_function("apply_10k_flows", |b| {
        b.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            for i in 0..iters {
                for (_, e) in &mut snap.flows {
                    let c = &mut e.counters;
                    (c.packets, c.bytes, c.last_ns, c.dscp_packets) =
                        (c.packets + 1, c.bytes + 138, c.last_ns + 1_000, c.dscp_packets + 1);
                }
                for chunk in evict.chunks_mut(64) {
                    chunk[0] = chunk[0].wrapping_add(i as u8 | 1);
                }
                std::hint::black_box(&evict);
                let t = std::time::Instant::now();
                account.apply(&mut engine, &snap, &clock);
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(benches, live_records, cold_records, live_poll);
criterion_main!(benches);
