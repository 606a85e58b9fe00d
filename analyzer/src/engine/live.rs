//! Live accounting: successive kernel snapshots (cumulative counters) into the same engine
//! state the offline path fills frame by frame.
//!
//! The kernel's u32 counters wrap; each poll adds the wrapping difference to the previous read
//! of the same flow, which is exact as long as no counter advances by 2^32 between two polls
//! (over 400 s at 10 M packets/s for one flow). A flow evicted from the kernel map keeps its
//! totals here; if it comes back, the kernel counts it from zero again.

use analyzer_common::FrameClass;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{ENTRY_PSN_COUNTERS, ExtraKey, FlowEntry, OP_SLOTS, UNTAGGED, counter, extra_kind};
use analyzer_common::psn::PsnState;
use rustc_hash::FxHashMap;

use super::pfc::PauseCounters;
use super::{DropReason, Engine, FlowStats};
use crate::capture::kernel::clock_ns;
use crate::capture::kernel::snapshot::KernelSnapshot;

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
    /// The last read of each flow slot, in ([`FlowEntry`] id, key) order: the order of the
    /// kernel table's slots, in which each snapshot comes, so that a poll walks both lists
    /// side by side ([`LiveAccount::apply`]). A hash map of the flows' keys took a cache miss
    /// a flow every poll (≈ 7 % of the agent's samples with 10 000 flows at 200 k frames/s).
    prev: Vec<Prev>,
    /// The list the next poll's reads go into (its memory kept from poll to poll).
    next: Vec<Prev>,
    prev_extra: FxHashMap<ExtraKey, u64>,
    /// Flows handled on more than one CPU ([`super::Visibility::several_cpus`]), and how many
    /// such flows were forgotten since (deleted from the kernel map).
    several_cpus: rustc_hash::FxHashSet<FlowKey>,
    several_cpus_gone: u64,
    pub source: u16,
}

/// A flow slot's last read.
#[derive(Debug, Clone, Copy)]
struct Prev {
    id: u32,
    key: FlowKey,
    entry: FlowEntry,
}

/// A flow slot's place in [`LiveAccount::prev`]'s order.
fn order(id: u32, key: &FlowKey) -> (u32, &FlowKey) {
    (id, key)
}

/// Adds a flow entry's PSN progress since the previous read: the wrapping counts it keeps (the
/// other PSN/AETH counters arrive through the extra map), and its sequence state.
fn add_psn(s: &mut PsnState, new: &FlowEntry, old: &FlowEntry) {
    for ((counter, n), o) in ENTRY_PSN_COUNTERS.iter().zip(new.psn_counts).zip(old.psn_counts) {
        s.add(*counter, n.wrapping_sub(o) as u64);
    }
    // The sequence state (expected PSNs, PMTU, pending READ) is the kernel's as of this read.
    s.seq = new.seq;
}

fn add_slot(s: &mut FlowStats, new_entry: &FlowEntry, old_entry: &FlowEntry, clock: &Clock, source: u16) {
    let (new, old) = (&new_entry.counters, &old_entry.counters);
    let d = |n: u32, o: u32| n.wrapping_sub(o) as u64;
    // Every counter is added on its own, even when the packet count did not move: a read
    // while the kernel updates the entry can see one counter of a frame and not another,
    // and what it missed comes with the next read. (The times too: a first time not written
    // yet is 0.)
    if new.first_ns != 0 && new.last_ns != old.last_ns {
        let (first, last) = (clock.wall(new.first_ns), clock.wall(new.last_ns));
        if s.packets == 0 {
            s.first_ns = first;
            s.last_ns = last;
        } else {
            s.first_ns = s.first_ns.min(first);
            s.last_ns = s.last_ns.max(last);
        }
    }
    s.packets += d(new.packets, old.packets);
    let bytes = new.bytes.wrapping_sub(old.bytes);
    s.bytes += bytes;
    s.add_source_bytes(source, bytes);
    s.ecn[0] += d(new_entry.not_ect, old_entry.not_ect);
    for i in 0..3 {
        s.ecn[i + 1] += d(new.ecn[i], old.ecn[i]);
    }
    s.fecn += d(new.fecn, old.fecn);
    s.becn += d(new.becn, old.becn);
    s.ack_req += d(new.ack_req, old.ack_req);
    // A slot keeps its opcode once claimed; one claimed since the previous read was 0 there.
    for i in 0..(new.op_used as usize).min(OP_SLOTS) {
        let n = d(new.op_counts[i], old.op_counts[i]);
        if n > 0 {
            s.opcodes.add(new.op_codes[i], n);
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
        global_counters(engine, snap);
        self.apply_flows(engine, snap, clock);
        self.apply_extra(engine, snap);
        apply_pfc(engine, snap, clock);
        let firsts = engine.flows.iter().map(|(_, s)| s).filter(|s| s.packets > 0).map(|s| (s.first_ns, s.last_ns));
        let pfc = engine.pfc.pfc.values().chain(engine.pfc.pause.values()).map(|c| (c.first_ns, c.last_ns));
        for (f, l) in firsts.chain(pfc) {
            engine.first_ns = Some(engine.first_ns.map_or(f, |x| x.min(f)));
            engine.last_ns = Some(engine.last_ns.map_or(l, |x| x.max(l)));
        }
    }

    /// Each flow's increments since its slot's last read, walking the snapshot and the
    /// previous reads side by side in the table's slot order.
    fn apply_flows(&mut self, engine: &mut Engine, snap: &KernelSnapshot, clock: &Clock) {
        let bit = crate::frames::source_bit(self.source);
        // The snapshot in slot order (the kernel's comes so; a test's may not).
        let mut flows: Vec<&(FlowKey, FlowEntry)> = snap.flows.iter().collect();
        let by_slot = |a: &&(FlowKey, FlowEntry), b: &&(FlowKey, FlowEntry)| {
            order(a.1.counters.id, &a.0).cmp(&order(b.1.counters.id, &b.0))
        };
        if !flows.is_sorted_by(|a, b| by_slot(a, b).is_le()) {
            flows.sort_by(by_slot);
        }
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        let mut previous = self.prev.iter().peekable();
        for f in flows {
            let (key, new) = (&f.0, &f.1);
            let at = order(new.counters.id, key);
            // Slots read before and not now stay (until forgotten), as a flow's read did.
            while let Some(p) = previous.next_if(|p| order(p.id, &p.key) < at) {
                next.push(*p);
            }
            let old = previous.next_if(|p| order(p.id, &p.key) == at).map_or(FlowEntry::zeroed(), |p| p.entry);
            next.push(Prev { id: new.counters.id, key: *key, entry: *new });
            let stats = engine.flows.get_or_insert(*key);
            add_slot(stats, new, &old, clock, self.source);
            add_psn(&mut stats.psn, new, &old);
            if new.counters.cpu_moves > 0 {
                self.several_cpus.insert(*key);
            }
            if stats.packets > 0 {
                stats.sources |= bit;
            }
        }
        next.extend(previous.copied());
        self.next = std::mem::replace(&mut self.prev, next);
        engine.visibility.several_cpus = self.several_cpus.len() as u64 + self.several_cpus_gone;
    }

    /// The extra map's counts (rare opcodes, DSCPs, PCPs, PSN anomalies, ECN restated) since
    /// the last read.
    fn apply_extra(&mut self, engine: &mut Engine, snap: &KernelSnapshot) {
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
                extra_kind::PSN => stats.psn.add(key.value, n),
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
    }

    /// Flows of `snap` with no packet since `before_mono_ns`.
    pub fn idle(snap: &KernelSnapshot, before_mono_ns: u64) -> Vec<FlowKey> {
        snap.flows.iter().filter(|(_, e)| e.counters.last_ns < before_mono_ns).map(|(k, _)| *k).collect()
    }

    /// Forgets the previous reads of flows deleted from the kernel.
    pub fn forget(&mut self, keys: &[FlowKey]) {
        for k in keys {
            self.several_cpus_gone += u64::from(self.several_cpus.remove(k));
        }
        let gone: rustc_hash::FxHashSet<&FlowKey> = keys.iter().collect();
        if !gone.is_empty() {
            self.prev.retain(|p| !gone.contains(&p.key));
        }
        self.prev_extra.retain(|e, _| !gone.contains(&e.flow));
    }
}

/// The kernel's global counters: frames by class, drops, what the vantage point could not see.
fn global_counters(engine: &mut Engine, snap: &KernelSnapshot) {
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
    engine.visibility.sightings_evicted = snap.counter(counter::SIGHTINGS_EVICTED);
    engine.filtered = snap.counter(counter::FILTERED);
}

/// The PFC/PAUSE counters per sender and priority, their times on the wall clock.
fn apply_pfc(engine: &mut Engine, snap: &KernelSnapshot, clock: &Clock) {
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

    fn slot(packets: u64, ops0: u32, dscp: u8) -> FlowEntry {
        let mut e = FlowEntry::zeroed();
        let c = &mut e.counters;
        c.packets = packets as u32;
        c.bytes = packets * 100;
        c.first_ns = 10;
        c.last_ns = 10 + packets;
        c.op_codes[0] = 0x0A;
        c.op_counts[0] = ops0;
        c.op_used = 1;
        c.ecn[1] = ops0;
        c.dscp = dscp;
        c.dscp_packets = ops0;
        c.pcp = UNTAGGED;
        c.pcp_packets = ops0;
        e
    }

    #[test]
    fn wrapping_u32_counters_accumulate_across_polls() {
        let (mut e, mut acc, clock, mut snap) = start(1_000);
        // The u32 counters are about to wrap.
        snap.flows = vec![(key(1), slot(10, u32::MAX - 4, 26))];
        acc.apply(&mut e, &snap, &clock);
        snap.flows = vec![(key(1), slot(20, 5, 26))];
        acc.apply(&mut e, &snap, &clock);
        let s = e.flows.get(&key(1)).unwrap();
        assert_eq!(s.packets, 20);
        assert_eq!(s.bytes, 2000);
        // (u32::MAX - 4) + 10 (wrapped: -4..5)
        assert_eq!(s.opcodes.get(0x0A), u32::MAX as u64 - 4 + 10);
        assert_eq!(s.ecn[2], s.opcodes.get(0x0A));
        assert_eq!(s.dscp.get(26), s.opcodes.get(0x0A));
        assert_eq!(s.untagged, s.opcodes.get(0x0A));
        assert_eq!((s.first_ns, s.last_ns), (1_010, 1_030));
    }

    /// A flow whose entry counts packets handled on another CPU than its previous one is named
    /// once, also across polls and after it is forgotten; one that stayed on its CPU is not.
    #[test]
    fn flows_handled_on_several_cpus_are_noted() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        let moved = |packets, moves| {
            let mut s = slot(packets, packets as u32, 26);
            s.counters.cpu_moves = moves;
            s
        };
        snap.flows = vec![(key(1), moved(5, 1)), (key(2), moved(4, 0))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.visibility.several_cpus, 1, "flow 1 moved");
        snap.flows = vec![(key(1), moved(9, 3)), (key(2), moved(6, 0))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.visibility.several_cpus, 1, "flow 1 once, flow 2 stayed");
        snap.flows = vec![(key(1), moved(9, 3)), (key(2), moved(12, 1))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.visibility.several_cpus, 2, "flow 2 moved");
        assert_eq!(e.flows.get(&key(2)).unwrap().packets, 12, "counted all the same");
        // Deleted from the kernel map and forgotten: still counted, no longer held.
        acc.forget(&[key(1)]);
        snap.flows = vec![(key(2), moved(12, 1))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!((e.visibility.several_cpus, acc.several_cpus.len()), (2, 1));
    }

    /// Each slot is followed on its own: a key held in two slots at once (two CPUs inserted
    /// the flow in the same instant) counts both, each from its own previous read, and a slot
    /// missing from one read (a snapshot out of slot order, as a test's) keeps its last read.
    #[test]
    fn each_slot_is_counted_from_its_own_last_read() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        let at = |id, packets| {
            let mut s = slot(packets, packets as u32, 26);
            s.counters.id = id;
            s
        };
        snap.flows = vec![(key(1), at(7, 2)), (key(1), at(3, 5)), (key(2), at(9, 1))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.flows.get(&key(1)).unwrap().packets, 7);
        snap.flows = vec![(key(1), at(3, 6)), (key(1), at(7, 4))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.flows.get(&key(1)).unwrap().packets, 10, "1 more in slot 3, 2 in slot 7");
        snap.flows = vec![(key(2), at(9, 3)), (key(1), at(7, 4)), (key(1), at(3, 6))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.flows.get(&key(1)).unwrap().packets, 10);
        assert_eq!(e.flows.get(&key(2)).unwrap().packets, 3, "from its read two polls before");
    }

    /// A read that saw a frame's packet count and not yet its ECN count (the kernel was
    /// updating the entry) only delays the ECN count to the next read: no count is derived
    /// from the others.
    #[test]
    fn a_torn_read_only_delays_a_count() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        let torn = slot(1, 0, 26);
        snap.flows = vec![(key(4), torn)];
        acc.apply(&mut e, &snap, &clock);
        let mut whole = torn;
        whole.counters.ecn[2] = 1;
        snap.flows = vec![(key(4), whole)];
        acc.apply(&mut e, &snap, &clock);
        let s = e.flows.get(&key(4)).unwrap();
        assert_eq!((s.packets, s.ecn), (1, [0, 0, 0, 1]), "one CE packet");
    }

    #[test]
    fn evicted_flows_keep_their_totals_and_restart_from_zero() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        snap.flows = vec![(key(2), slot(5, 5, 26))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(LiveAccount::idle(&snap, 100), vec![key(2)]);
        assert!(LiveAccount::idle(&snap, 15).is_empty());
        acc.forget(&[key(2)]);
        snap.flows = vec![(key(2), slot(2, 2, 26))];
        acc.apply(&mut e, &snap, &clock);
        assert_eq!(e.flows.get(&key(2)).unwrap().packets, 7);
        assert_eq!(e.flows.get(&key(2)).unwrap().opcodes.get(0x0A), 7);
    }

    #[test]
    fn extra_values_and_classes() {
        let (mut e, mut acc, clock, mut snap) = start(0);
        snap.counters[FrameClass::Roce as usize] = 9;
        snap.counters[counter::FLOW_MAP_FULL as usize] = 2;
        snap.flows = vec![(key(3), slot(9, 7, 26))];
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
