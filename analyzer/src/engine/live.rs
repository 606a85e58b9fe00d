//! Live accounting: successive kernel snapshots (cumulative per-CPU counters) into the same
//! engine state the offline path fills frame by frame.
//!
//! The kernel's u32 counters wrap; each poll adds the wrapping difference to the previous read
//! of the same (flow, CPU), which is exact as long as no counter advances by 2^32 between two
//! polls (over 400 s at 10 M packets/s for one flow on one CPU). A flow evicted from the kernel
//! map keeps its totals here; if it comes back, the kernel counts it from zero again.

use analyzer_common::FrameClass;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{ExtraKey, FlowCounters, UNTAGGED, counter, extra_kind};
use analyzer_common::psn::PsnState;
use rustc_hash::FxHashMap;

use super::pfc::PauseCounters;
use super::{DropReason, Engine, FlowStats};
use crate::capture::kernel::clock_ns;
use crate::capture::kernel::snapshot::KernelSnapshot;
use crate::report::model::{Naks, PsnJson, Responder};

/// Converts `bpf_ktime_get_ns` (CLOCK_MONOTONIC) to Unix ns.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Unix ns minus monotonic ns.
    pub offset: i128,
}

impl Clock {
    pub fn now() -> Self {
        let rt = clock_ns(libc::CLOCK_REALTIME);
        let mono = clock_ns(libc::CLOCK_MONOTONIC);
        Clock { offset: rt as i128 - mono as i128 }
    }
    pub fn wall(&self, mono_ns: u64) -> u64 {
        (mono_ns as i128 + self.offset).clamp(0, u64::MAX as i128) as u64
    }
}

/// What the previous polls saw, to turn cumulative counters into increments.
#[derive(Debug, Default)]
pub struct LiveAccount {
    prev: FxHashMap<FlowKey, Vec<FlowCounters>>,
    prev_extra: FxHashMap<ExtraKey, u64>,
    prev_psn: FxHashMap<FlowKey, PsnState>,
    /// Flows counted on more than one CPU within one poll ([`super::Visibility::several_cpus`]),
    /// and how many such flows were forgotten since (deleted from the kernel map).
    several_cpus: rustc_hash::FxHashSet<FlowKey>,
    several_cpus_gone: u64,
    pub source: u16,
}

/// Adds the counters of a PSN map value's progress since the previous read (its u64 counters
/// do not wrap; an entry deleted on eviction is forgotten and starts from zero).
fn add_psn(s: &mut PsnState, new: &PsnState, old: &PsnState) {
    let mut sum = *s;
    for (sum, d) in sum.count.iter_mut().zip(PsnJson::new(new.count).since(&old.count).values) {
        *sum += d;
    }
    for (sum, d) in sum.aeth.iter_mut().zip(Naks::new(new.aeth).since(&old.aeth).values) {
        *sum += d;
    }
    for (sum, d) in sum.responder.iter_mut().zip(Responder::new(new.responder).since(&old.responder).values) {
        *sum += d;
    }
    // The sequence state (expected PSNs, PMTU, pending READ) is the kernel's as of this read.
    *s = PsnState { count: sum.count, aeth: sum.aeth, responder: sum.responder, ..*new };
}

fn add_slot(s: &mut FlowStats, new: &FlowCounters, old: &FlowCounters, clock: &Clock, source: u16) {
    // A slot whose packet count went down was deleted and created again: count it afresh.
    let zero = FlowCounters::zeroed();
    let old = if new.packets < old.packets { &zero } else { old };
    let packets = new.packets - old.packets;
    if packets == 0 {
        return;
    }
    let (first, last) = (clock.wall(new.first_ns), clock.wall(new.last_ns));
    if s.packets == 0 {
        s.first_ns = first;
        s.last_ns = last;
    } else {
        s.first_ns = s.first_ns.min(first);
        s.last_ns = s.last_ns.max(last);
    }
    s.packets += packets;
    s.bytes += new.bytes - old.bytes;
    s.add_source_bytes(source, new.bytes - old.bytes);
    let d = |n: u32, o: u32| n.wrapping_sub(o) as u64;
    for i in 0..4 {
        s.ecn[i] += d(new.ecn[i], old.ecn[i]);
    }
    s.fecn += d(new.fecn, old.fecn);
    s.becn += d(new.becn, old.becn);
    s.ack_req += d(new.ack_req, old.ack_req);
    for i in 0..32 {
        let n = d(new.ops[i], old.ops[i]);
        if n > 0 {
            s.opcodes.add((new.transport << 5) | i as u8, n);
        }
    }
    let n = d(new.dscp_packets, old.dscp_packets);
    if n > 0 {
        s.dscp.add(new.dscp, n);
    }
    let n = d(new.pcp_packets, old.pcp_packets);
    if n > 0 {
        if new.pcp == UNTAGGED {
            s.untagged += n;
        } else {
            s.pcp.add(new.pcp, n);
        }
    }
}

impl LiveAccount {
    pub fn new(source: u16) -> Self {
        LiveAccount { source, ..Default::default() }
    }

    /// Folds one snapshot into `engine`.
    pub fn apply(&mut self, engine: &mut Engine, snap: &KernelSnapshot, clock: &Clock) {
        for (i, c) in engine.classes.iter_mut().enumerate() {
            *c = snap.counter(i as u32);
        }
        engine.frames = engine.classes.iter().sum();
        for (reason, index) in [
            (DropReason::FlowMapFull, counter::FLOW_MAP_FULL),
            (DropReason::ExtraMapFull, counter::EXTRA_MAP_FULL),
            (DropReason::PfcMapFull, counter::PFC_MAP_FULL),
            (DropReason::RingbufFull, counter::RINGBUF_FULL),
            (DropReason::PsnMapFull, counter::PSN_MAP_FULL),
            (DropReason::TimelineFull, counter::TIMELINE_FULL),
        ] {
            engine.dropped.insert(reason, snap.counter(index));
        }
        engine.visibility.ext_cut = snap.counter(counter::EXT_CUT);
        engine.visibility.encapsulated = snap.counter(counter::ENCAPSULATED);
        engine.visibility.cut_copies = snap.counter(counter::CUT_COPIES);
        engine.visibility.bth_cut = snap.counter(counter::BTH_CUT);
        engine.visibility.matched_copies = snap.counter(counter::MATCHED_COPIES);
        engine.filtered = snap.counter(counter::FILTERED);

        let bit = super::flows::source_bit(self.source);
        for (key, slots) in &snap.flows {
            let prev = self.prev.entry(*key).or_default();
            prev.resize(slots.len(), FlowCounters::zeroed());
            let stats = engine.flows.get_or_insert(*key);
            let mut cpus = 0;
            for (new, old) in slots.iter().zip(prev.iter()) {
                cpus += usize::from(new.packets != old.packets);
                add_slot(stats, new, old, clock, self.source);
            }
            if cpus > 1 {
                self.several_cpus.insert(*key);
            }
            if stats.packets > 0 {
                stats.sources |= bit;
            }
            prev.copy_from_slice(slots);
        }
        engine.visibility.several_cpus = self.several_cpus.len() as u64 + self.several_cpus_gone;
        for (key, st) in &snap.psn {
            let old = self.prev_psn.insert(*key, *st).unwrap_or_default();
            add_psn(&mut engine.flows.get_or_insert(*key).psn, st, &old);
        }
        for (key, total) in &snap.extra {
            let old = self.prev_extra.insert(*key, *total).unwrap_or(0);
            let n = if *total >= old { total - old } else { *total };
            if n == 0 {
                continue;
            }
            let stats = engine.flows.get_or_insert(key.flow);
            match key.kind {
                extra_kind::OPCODE => stats.opcodes.add(key.value, n),
                extra_kind::DSCP => stats.dscp.add(key.value, n),
                extra_kind::ECN_MOVED => {
                    // Mirrored copies whose ECN differed from the copy counted: the flow's
                    // ECN is its last copy's (the increments were counted, in order, before).
                    let (from, to) = ((key.value >> 2 & 3) as usize, (key.value & 3) as usize);
                    stats.ecn[from] = stats.ecn[from].wrapping_sub(n);
                    stats.ecn[to] = stats.ecn[to].wrapping_add(n);
                }
                _ if key.value == UNTAGGED => stats.untagged += n,
                _ => stats.pcp.add(key.value, n),
            }
        }

        let t = &mut engine.pfc;
        t.pfc.clear();
        t.pause.clear();
        t.pfc_frames = snap.counter(FrameClass::Pfc as u32);
        t.pause_frames = snap.counter(FrameClass::Pause as u32);
        for (k, c) in &snap.pfc {
            let v = PauseCounters {
                frames: c.frames,
                xoff: c.xoff,
                xon: c.xon,
                quanta: c.quanta,
                first_ns: clock.wall(c.first_ns),
                last_ns: clock.wall(c.last_ns),
            };
            if k.priority == analyzer_common::maps::PAUSE_PRIORITY {
                t.pause.insert(k.mac, v);
            } else {
                t.pfc.insert((k.mac, k.priority), v);
            }
        }

        let firsts = engine.flows.iter().map(|(_, s)| s).filter(|s| s.packets > 0).map(|s| (s.first_ns, s.last_ns));
        let pfc = engine.pfc.pfc.values().chain(engine.pfc.pause.values()).map(|c| (c.first_ns, c.last_ns));
        for (f, l) in firsts.chain(pfc) {
            engine.first_ns = Some(engine.first_ns.map_or(f, |x| x.min(f)));
            engine.last_ns = Some(engine.last_ns.map_or(l, |x| x.max(l)));
        }
    }

    /// Flows of `snap` with no packet on any CPU since `before_mono_ns`.
    pub fn idle(snap: &KernelSnapshot, before_mono_ns: u64) -> Vec<FlowKey> {
        snap.flows
            .iter()
            .filter(|(_, slots)| slots.iter().map(|c| c.last_ns).max().unwrap_or(0) < before_mono_ns)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Forgets the previous reads of flows deleted from the kernel.
    pub fn forget(&mut self, keys: &[FlowKey]) {
        for k in keys {
            self.prev.remove(k);
            self.prev_psn.remove(k);
            self.several_cpus_gone += u64::from(self.several_cpus.remove(k));
        }
        let gone: rustc_hash::FxHashSet<&FlowKey> = keys.iter().collect();
        self.prev_extra.retain(|e, _| !gone.contains(&e.flow));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::Engine;

    /// A flow from 10.0.0.1 to QP `qp` (the live loop's tests use it too).
    pub(crate) fn key(qp: u32) -> FlowKey {
        FlowKey {
            src: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst_qp: qp,
            ip_version: 4,
            ..Default::default()
        }
    }

    /// An engine, its live account, a clock `offset` ns ahead of monotonic, an empty snapshot.
    fn start(offset: i128) -> (Engine, LiveAccount, Clock, KernelSnapshot) {
        let snap = KernelSnapshot { counters: vec![0; counter::COUNT as usize], ..Default::default() };
        (Engine::new(), LiveAccount::new(0), Clock { offset }, snap)
    }

    fn slot(packets: u64, ops0: u32, dscp: u8) -> FlowCounters {
        let mut c = FlowCounters::zeroed();
        c.packets = packets;
        c.bytes = packets * 100;
        c.first_ns = 10;
        c.last_ns = 10 + packets;
        c.ops[0x0A] = ops0;
        c.ecn[2] = ops0;
        c.dscp = dscp;
        c.dscp_packets = ops0;
        c.pcp = UNTAGGED;
        c.pcp_packets = ops0;
        c
    }

    #[test]
    fn wrapping_u32_counters_accumulate_across_polls() {
        let (mut e, mut acc, clock, mut snap) = start(1_000);
        // Two CPUs; the first one's u32 counters are about to wrap.
        snap.flows = vec![(key(1), vec![slot(10, u32::MAX - 4, 26), slot(3, 3, 26)])];
        acc.apply(&mut e, &snap, &clock);
        snap.flows = vec![(key(1), vec![slot(20, 5, 26), slot(3, 3, 26)])];
        acc.apply(&mut e, &snap, &clock);
        let s = e.flows.get(&key(1)).unwrap();
        assert_eq!(s.packets, 23);
        assert_eq!(s.bytes, 2300);
        // (u32::MAX - 4) + 10 (wrapped: -4..5) + 3
        assert_eq!(s.opcodes.get(0x0A), u32::MAX as u64 - 4 + 10 + 3);
        assert_eq!(s.ecn[2], s.opcodes.get(0x0A));
        assert_eq!(s.dscp.get(26), s.opcodes.get(0x0A));
        assert_eq!(s.untagged, s.opcodes.get(0x0A));
        assert_eq!((s.first_ns, s.last_ns), (1_010, 1_030));
    }

    /// A flow whose counters grew on two CPUs between two polls is named once; one that moved
    /// from one CPU to another between polls, or grew on one CPU only, is not.
    #[test]
    fn flows_counted_on_several_cpus_in_one_poll_are_noted() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        let idle = FlowCounters::zeroed();
        snap.flows = vec![(key(1), vec![slot(5, 5, 26), slot(3, 3, 26)]), (key(2), vec![slot(4, 4, 26), idle])];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.visibility.several_cpus, 1, "flow 1 grew on both CPUs");
        // Flow 2 moves to CPU 1 (CPU 0 unchanged); flow 1 grows on CPU 0 only.
        snap.flows =
            vec![(key(1), vec![slot(9, 9, 26), slot(3, 3, 26)]), (key(2), vec![slot(4, 4, 26), slot(6, 6, 26)])];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.visibility.several_cpus, 1, "flow 1 once, flow 2 moved");
        snap.flows =
            vec![(key(1), vec![slot(9, 9, 26), slot(3, 3, 26)]), (key(2), vec![slot(5, 5, 26), slot(7, 7, 26)])];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.visibility.several_cpus, 2, "flow 2 grew on both CPUs");
        assert_eq!(e.flows.get(&key(2)).unwrap().packets, 12, "counted all the same");
        // Deleted from the kernel map and forgotten: still counted, no longer held.
        acc.forget(&[key(1)]);
        snap.flows = vec![(key(2), vec![slot(5, 5, 26), slot(7, 7, 26)])];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!((e.visibility.several_cpus, acc.several_cpus.len()), (2, 1));
    }

    #[test]
    fn evicted_flows_keep_their_totals_and_restart_from_zero() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        snap.flows = vec![(key(2), vec![slot(5, 5, 26)])];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(LiveAccount::idle(&snap, 100), vec![key(2)]);
        assert!(LiveAccount::idle(&snap, 15).is_empty());
        acc.forget(&[key(2)]);
        snap.flows = vec![(key(2), vec![slot(2, 2, 26)])];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.flows.get(&key(2)).unwrap().packets, 7);
        assert_eq!(e.flows.get(&key(2)).unwrap().opcodes.get(0x0A), 7);
    }

    #[test]
    fn extra_values_and_classes() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        snap.counters[FrameClass::Roce as usize] = 9;
        snap.counters[counter::FLOW_MAP_FULL as usize] = 2;
        snap.flows = vec![(key(3), vec![slot(9, 7, 26)])];
        snap.extra = vec![
            (ExtraKey { flow: key(3), kind: extra_kind::OPCODE, value: 0x81, _pad: [0; 6] }, 2),
            (ExtraKey { flow: key(3), kind: extra_kind::DSCP, value: 48, _pad: [0; 6] }, 2),
            (ExtraKey { flow: key(3), kind: extra_kind::PCP, value: 3, _pad: [0; 6] }, 2),
        ];
        acc.apply(&mut e, &snap, &clock);
        acc.apply(&mut e, &snap, &clock);
        let s = e.flows.get(&key(3)).unwrap();
        assert_eq!((s.opcodes.get(0x81), s.dscp.get(48), s.pcp.get(3)), (2, 2, 2));
        assert_eq!((e.frames, e.dropped[&DropReason::FlowMapFull]), (9, 2));
    }
}
