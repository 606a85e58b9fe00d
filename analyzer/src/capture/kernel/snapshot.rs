//! Reading the kernel maps. [`MapSource`] separates the map reader from the accounting (the
//! engine's live state) so that tests drive the accounting with a fake source, no kernel.

use std::os::fd::AsFd;

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{
    CmEvent, Event, ExtraKey, FlowEntry, FlowId, KeyedRecord, MAP_COUNTERS, MAP_EVENT_HEADS, MAP_EVENT_LOG, MAP_EVENTS,
    MAP_FLOW_EXTRA, MAP_FLOW_IDS, MAP_PFC, MAP_PFC_SLOTS, MAP_TIMELINE, MAP_TIMELINE_HEADS, MAP_TIMELINE_LOG,
    PFC_SLOTS, PfcCounters, PfcKey, PfcSlot, counter, event_kind, ids_kind,
};
use analyzer_common::record::{CompactRecord, Record};
use aya::maps::{MapData, PerCpuArray, RingBuf};

use super::access::{drain_pod, io_err, key_bytes, map_err, per_cpu, per_cpu_hash, pod, stride, take};
use super::flow_ids::FlowIds;
use super::logs::CpuLogs;
use super::table::FlowTable;
use super::{KernelError, batch};

/// One read of every map: each flow's entry (one shared value, not per CPU), everything else
/// summed over CPUs.
#[derive(Debug, Clone, Default)]
pub struct KernelSnapshot {
    pub counters: Vec<u64>,
    pub flows: Vec<(FlowKey, FlowEntry)>,
    pub extra: Vec<(ExtraKey, u64)>,
    pub pfc: Vec<(PfcKey, PfcCounters)>,
}

impl KernelSnapshot {
    pub fn counter(&self, i: u32) -> u64 {
        self.counters.get(i as usize).copied().unwrap_or(0)
    }
}

/// A source of kernel counters.
pub trait MapSource {
    fn snapshot(&mut self) -> Result<KernelSnapshot, KernelError>;
    /// Deletes flows (and their extra entries) from the kernel maps.
    fn remove_flows(&mut self, keys: &[FlowKey]) -> Result<(), KernelError>;
    /// Hands at most `max` pending ring-buffer events to `f`; returns how many it read.
    fn drain_events(&mut self, max: u64, f: &mut dyn FnMut(KernelEvent)) -> u64;
    /// Hands at most `max` pending timeline records to `f`, each with its flow's index (the
    /// agent's dense index of the kernel's flow id, `FlowIds::index`; 0: none); returns how many it read.
    fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record, u32)) -> u64;
    /// From now on hand on every record and event read, none held back for order (the run
    /// ends).
    fn release_records(&mut self) {}
    /// Records the drains found overwritten in the CPUs' logs before they were read, so far
    /// (the kernel counts those the shared ring had no room for: `TIMELINE_FULL`).
    fn records_lost(&self) -> u64 {
        0
    }
    /// Events the drains found overwritten in the CPUs' event logs, so far (the kernel counts
    /// those the event ring had no room for: `RINGBUF_FULL`).
    fn events_lost(&self) -> u64 {
        0
    }
}

/// An event of the event ring buffer.
#[derive(Debug, Clone, Copy)]
pub enum KernelEvent<'a> {
    /// A PFC or PAUSE frame.
    Frame(&'a Event),
    /// A CM MAD.
    Cm(&'a CmEvent),
}

/// The maps of a loaded program. The flow table and the logs are mapped into this process;
/// the hash maps are read with batch lookups on their fds.
pub struct AyaMaps {
    flows: FlowTable,
    extra: MapData,
    pfc: MapData,
    pfc_slots: PerCpuArray<MapData, PfcSlot>,
    counters: PerCpuArray<MapData, u64>,
    /// CM events, and the frame events of CPUs without a log.
    events: RingBuf<MapData>,
    event_logs: Option<CpuLogs<Event>>,
    /// The records of CPUs without a log.
    timeline: RingBuf<MapData>,
    record_logs: Option<CpuLogs<CompactRecord>>,
    /// The flows' ids with their keys, and the records the kernel wrote whole.
    flow_ids: RingBuf<MapData>,
    /// What the records' ids stand for.
    ids: FlowIds,
    cpus: usize,
}

impl AyaMaps {
    /// CPUs with a timeline log of their own (0: all share the ring).
    pub fn cpu_timelines(&self) -> usize {
        self.record_logs.as_ref().map_or(0, |l| l.cpus())
    }

    /// Whether the logs' keepers copy what the CPUs write between drains (they do from the
    /// start); off, a log laps while no drain runs: for tests and benchmarks of the logs alone.
    pub fn keep_logs(&self, on: bool) {
        self.record_logs.iter().for_each(|l| l.keep(on));
        self.event_logs.iter().for_each(|l| l.keep(on));
    }

    /// Records each CPU's timeline log holds (0 without logs).
    pub fn timeline_slots(&self) -> usize {
        self.record_logs.as_ref().map_or(0, |l| l.slots())
    }

    /// The maps of a program [`super::load::load`]ed (which decided the CPUs with a timeline
    /// log: none with `--no-timeline`).
    pub fn new(ebpf: &mut aya::Ebpf) -> Result<Self, KernelError> {
        let cpus = aya::util::nr_cpus().map_err(|(_, source)| KernelError::MapIo { map: "possible CPUs", source })?;
        Ok(AyaMaps {
            flows: FlowTable::new(ebpf)?,
            extra: per_cpu_hash(ebpf, MAP_FLOW_EXTRA)?,
            pfc: per_cpu_hash(ebpf, MAP_PFC)?,
            pfc_slots: PerCpuArray::try_from(take(ebpf, MAP_PFC_SLOTS)?).map_err(map_err(MAP_PFC_SLOTS))?,
            counters: PerCpuArray::try_from(take(ebpf, MAP_COUNTERS)?).map_err(map_err(MAP_COUNTERS))?,
            events: RingBuf::try_from(take(ebpf, MAP_EVENTS)?).map_err(map_err(MAP_EVENTS))?,
            event_logs: CpuLogs::new(ebpf, (MAP_EVENT_LOG, MAP_EVENT_HEADS))?,
            timeline: RingBuf::try_from(take(ebpf, MAP_TIMELINE)?).map_err(map_err(MAP_TIMELINE))?,
            record_logs: CpuLogs::new(ebpf, (MAP_TIMELINE_LOG, MAP_TIMELINE_HEADS))?,
            flow_ids: RingBuf::try_from(take(ebpf, MAP_FLOW_IDS)?).map_err(map_err(MAP_FLOW_IDS))?,
            ids: FlowIds::default(),
            cpus,
        })
    }

    /// Reads the flow-id ring: announcements into `ids`, whole records into `read` (under ids
    /// of this side's own).
    fn read_flow_ids(ring: &mut RingBuf<MapData>, ids: &mut FlowIds, read: &mut Vec<CompactRecord>) {
        while let Some(item) = ring.next() {
            match item.first() {
                Some(&ids_kind::FLOW) if item.len() >= std::mem::size_of::<FlowId>() => {
                    let a = pod::<FlowId>(&item);
                    ids.learn(a.id, a.key);
                }
                Some(&ids_kind::RECORD) if item.len() >= std::mem::size_of::<KeyedRecord>() => {
                    read.push(ids.keyed(&pod::<KeyedRecord>(&item)));
                }
                _ => {}
            }
        }
    }

    fn extra_entries(&self) -> Result<Vec<(ExtraKey, u64)>, KernelError> {
        let cpus = self.cpus;
        let mut v = Vec::new();
        batch::for_each(self.extra.fd().as_fd(), std::mem::size_of::<ExtraKey>(), 8 * cpus, |k, val| {
            v.push((pod(k), per_cpu::<u64>(val, cpus).iter().sum()))
        })
        .map_err(io_err(MAP_FLOW_EXTRA))?;
        Ok(v)
    }
}

impl MapSource for AyaMaps {
    fn snapshot(&mut self) -> Result<KernelSnapshot, KernelError> {
        let cpus = self.cpus;
        let mut s = KernelSnapshot::default();
        for i in 0..counter::COUNT {
            let v = self.counters.get(&i, 0).map_err(map_err(MAP_COUNTERS))?;
            s.counters.push(v.iter().sum());
        }
        // The CPUs' logs count their items in their heads (what they overwrote is found by the
        // drains: `records_lost`, `events_lost`).
        s.counters[counter::RECORDS as usize] += self.record_logs.as_ref().map_or(0, |l| l.written());
        s.counters[counter::EVENTS as usize] += self.event_logs.as_ref().map_or(0, |l| l.written());
        self.flows.live(|k, e| s.flows.push((k, e)));
        self.ids.learn_entries(&s.flows);
        // The ids of the flows removed at the previous poll: no record of theirs waits now.
        for id in self.ids.take_retired() {
            self.flows.kill(id);
        }
        s.extra = self.extra_entries()?;
        // A (sender, priority) may be in a slot on one CPU and in the hash map on another:
        // summed by key.
        let mut pfc = std::collections::BTreeMap::<PfcKey, PfcCounters>::new();
        for i in 0..PFC_SLOTS {
            let v = self.pfc_slots.get(&i, 0).map_err(map_err(MAP_PFC_SLOTS))?;
            for slot in v.iter().filter(|s| s.key != 0) {
                pfc.entry(PfcKey::from_word(slot.key)).or_default().merge(&slot.counters);
            }
        }
        let pfc_len = stride::<PfcCounters>() * cpus;
        batch::for_each(self.pfc.fd().as_fd(), std::mem::size_of::<PfcKey>(), pfc_len, |k, v| {
            let sum = pfc.entry(pod(k)).or_default();
            for c in per_cpu::<PfcCounters>(v, cpus) {
                sum.merge(&c);
            }
        })
        .map_err(io_err(MAP_PFC))?;
        s.pfc = pfc.into_iter().collect();
        Ok(s)
    }

    fn remove_flows(&mut self, keys: &[FlowKey]) -> Result<(), KernelError> {
        if keys.is_empty() {
            return Ok(());
        }
        let gone: std::collections::HashSet<&FlowKey> = keys.iter().collect();
        for id in self.ids.retire(&gone) {
            self.flows.retire(id);
        }
        for (k, _) in self.extra_entries()?.iter().filter(|(k, _)| gone.contains(&k.flow)) {
            batch::delete(self.extra.fd().as_fd(), key_bytes(k)).map_err(io_err(MAP_FLOW_EXTRA))?;
        }
        Ok(())
    }

    fn drain_events(&mut self, max: u64, f: &mut dyn FnMut(KernelEvent)) -> u64 {
        let AyaMaps { events, event_logs, .. } = self;
        let mut logs = event_logs.as_mut();
        let (mut n, mut cm) = (0, 0);
        while n < max
            && let Some(item) = events.next()
        {
            // Both layouts have their kind at byte 8.
            match item.get(8) {
                Some(&event_kind::CM) if item.len() >= std::mem::size_of::<CmEvent>() => {
                    f(KernelEvent::Cm(&pod::<CmEvent>(&item)));
                    cm += 1;
                }
                // A frame event of a CPU without a log: in time order with the logs' events.
                Some(_) if item.len() >= std::mem::size_of::<Event>() => match logs.as_mut() {
                    Some(l) => l.order.read.push(pod::<Event>(&item)),
                    None => f(KernelEvent::Frame(&pod::<Event>(&item))),
                },
                _ => {}
            }
            n += 1;
        }
        match logs {
            Some(logs) => logs.drain(max, n, cm, &mut |es| es.iter().for_each(|e| f(KernelEvent::Frame(e)))),
            None => n,
        }
    }

    /// The records of the logs and the shared ring, expanded with their flows' keys (the
    /// flow-id ring is read after them, so every id they carry has been announced by then).
    fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record, u32)) -> u64 {
        let AyaMaps { timeline, flow_ids, ids, record_logs, .. } = self;
        let Some(logs) = record_logs.as_mut() else {
            let mut read = Vec::new();
            let n = drain_pod(timeline, max, &mut |r: &CompactRecord| read.push(*r));
            let ring = read.len();
            Self::read_flow_ids(flow_ids, ids, &mut read);
            // The ring's records are in time order; whole ones go among them by their times.
            if read.len() > ring {
                read.sort_by_key(|r| r.ts_ns);
            }
            ids.expand_all(&read, f);
            let whole = (read.len() - ring) as u64;
            return if n == max { max } else { (n + whole).min(max.saturating_sub(1)) };
        };
        let read = &mut logs.order.read;
        let n = drain_pod(timeline, max, &mut |r: &CompactRecord| read.push(*r));
        let more = logs.read_logs(max, n);
        Self::read_flow_ids(flow_ids, ids, &mut logs.order.read);
        logs.hand_on_read(max, more, 0, &mut |cs| ids.expand_all(cs, f))
    }

    fn release_records(&mut self) {
        if let Some(l) = self.record_logs.as_mut() {
            l.order.released = true;
        }
        if let Some(l) = self.event_logs.as_mut() {
            l.order.released = true;
        }
    }

    /// Also the records whose id named no flow known here.
    fn records_lost(&self) -> u64 {
        self.record_logs.as_ref().map_or(0, |l| l.lost()) + self.ids.unknown
    }

    fn events_lost(&self) -> u64 {
        self.event_logs.as_ref().map_or(0, |l| l.lost())
    }
}
