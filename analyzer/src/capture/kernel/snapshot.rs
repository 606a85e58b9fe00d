//! Reading the kernel maps. [`MapSource`] separates the map reader from the accounting (the
//! engine's live state) so that tests drive the accounting with a fake source, no kernel.

use std::os::fd::AsFd;

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{
    CmEvent, Event, ExtraKey, FlowEntry, MAP_COUNTERS, MAP_EVENTS, MAP_FLOW_EXTRA, MAP_FLOWS, MAP_PFC, MAP_TIMELINE,
    MAP_TIMELINES, MAX_TIMELINE_CPUS, PfcCounters, PfcKey, TIMELINE_CPU_BYTES, counter, event_kind,
};
use analyzer_common::record::Record;
use aya::maps::{MapData, PerCpuArray, RingBuf};

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
    /// Hands at most `max` pending timeline records to `f`; returns how many it read.
    fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record)) -> u64;
    /// From now on hand on every record read, none held back for order (the run ends).
    fn release_records(&mut self) {}
}

/// An event of the event ring buffer.
#[derive(Debug, Clone, Copy)]
pub enum KernelEvent<'a> {
    /// A PFC or PAUSE frame.
    Frame(&'a Event),
    /// A CM MAD.
    Cm(&'a CmEvent),
}

/// The maps of a loaded program. The hash maps are read with batch lookups on their fds.
pub struct AyaMaps {
    flows: MapData,
    extra: MapData,
    pfc: MapData,
    counters: PerCpuArray<MapData, u64>,
    events: RingBuf<MapData>,
    timeline: Timeline,
    cpus: usize,
}

/// The timeline rings: each CPU's ([`MAP_TIMELINES`]) and the shared one of the CPUs without
/// (all of them when the kernel refused per-CPU rings), read into [`InTimeOrder`].
struct Timeline {
    shared: RingBuf<MapData>,
    per_cpu: Vec<RingBuf<MapData>>,
    /// The array of the per-CPU rings, kept open: a program loaded later (the single-buffer
    /// one, at attach) refers to it by this fd.
    _outer: Option<CpuRings>,
    order: InTimeOrder,
}

/// A record is handed on once it is this much older than the agent's clock: the program
/// submits a record within microseconds of stamping it (it runs with preemption off), so by
/// then every ring holds every record stamped before it.
pub const HOLD_NS: u64 = 1_000_000;

/// Records of several rings, each in time order, handed on in time order: a record waits
/// until no ring can still deliver an older one (it is [`HOLD_NS`] old), or until the run ends.
#[derive(Debug, Default)]
pub struct InTimeOrder {
    /// Read and not handed on yet, in time order.
    held: std::collections::VecDeque<Record>,
    /// Read in this drain, not yet merged into `held`.
    pub read: Vec<Record>,
    /// Hand on everything: the run ends.
    pub released: bool,
}

impl InTimeOrder {
    /// Merges what was read into the held records and hands on, in time order, those stamped
    /// at or before `until` (all of them once released).
    pub fn hand_on(&mut self, until: u64, f: &mut dyn FnMut(&Record)) {
        // The held records and each ring's are in time order: a stable sort of these runs is a
        // merge (equal stamps keep held-then-ring order), also when a late record is older than
        // some held ones.
        self.held.extend(self.read.drain(..));
        self.held.make_contiguous().sort_by_key(|r| r.ts_ns);
        let until = if self.released { u64::MAX } else { until };
        while let Some(r) = self.held.front()
            && r.ts_ns <= until
        {
            f(r);
            self.held.pop_front();
        }
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }
}

impl Timeline {
    /// One shared ring only (records in ring order, nothing held): an object without
    /// per-CPU rings, or a kernel that refused them.
    fn shared(shared: RingBuf<MapData>) -> Self {
        Timeline { shared, per_cpu: Vec::new(), _outer: None, order: InTimeOrder::default() }
    }

    fn drain(&mut self, max: u64, f: &mut dyn FnMut(&Record)) -> u64 {
        if self.per_cpu.is_empty() {
            return drain_pod(&mut self.shared, max, f);
        }
        // Up to `max` from each ring; "more" (a full `max`) when any ring may hold more.
        let mut more = false;
        let read = &mut self.order.read;
        for ring in std::iter::once(&mut self.shared).chain(self.per_cpu.iter_mut()) {
            more |= drain_pod(ring, max, &mut |r: &Record| read.push(*r)) == max;
        }
        let n = read.len() as u64;
        let now = super::clock_ns(libc::CLOCK_MONOTONIC);
        self.order.hand_on(now.saturating_sub(HOLD_NS), f);
        if more { max } else { n.min(max.saturating_sub(1)) }
    }
}

/// The array of the CPUs' timeline rings.
type CpuRings = aya::maps::ArrayOfMaps<MapData, RingBuf<MapData>>;

/// Each online CPU's timeline ring put in place, held open and never read: what the kernel
/// benchmark gives an object of another release, whose other maps this build may not read.
pub struct TimelineRings {
    _outer: CpuRings,
    _rings: Vec<RingBuf<MapData>>,
}

impl TimelineRings {
    pub fn install(ebpf: &mut aya::Ebpf) -> Result<Self, KernelError> {
        let (outer, rings) = cpu_timelines(ebpf, true)?;
        Ok(TimelineRings { _outer: outer, _rings: rings })
    }
}

/// Puts a timeline ring at each online CPU's index of [`MAP_TIMELINES`] (below
/// [`MAX_TIMELINE_CPUS`]; none unless `create`); returns the array and the rings. A CPU brought
/// online later, or past the cap, writes to the shared ring; so does every CPU after one the
/// kernel refused a ring for (said on stderr: the records are all read, only the CPUs share a
/// ring again).
fn cpu_timelines(ebpf: &mut aya::Ebpf, create: bool) -> Result<(CpuRings, Vec<RingBuf<MapData>>), KernelError> {
    let online = aya::util::online_cpus().map_err(|(_, source)| KernelError::MapIo { map: "online CPUs", source })?;
    let mut outer = CpuRings::try_from(take(ebpf, MAP_TIMELINES)?).map_err(map_err(MAP_TIMELINES))?;
    let mut rings = Vec::new();
    for cpu in online.into_iter().filter(|c| create && *c < MAX_TIMELINE_CPUS) {
        let def = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32,
            0,
            0,
            TIMELINE_CPU_BYTES,
            0,
        );
        // Put in place last: a ring the program writes to is always one this side reads.
        let put = MapData::create(def, "timeline_cpu", None)
            .and_then(|data| RingBuf::try_from(aya::maps::Map::RingBuf(data)))
            .and_then(|ring| outer.set(cpu, &ring, 0).map(|()| ring));
        match put {
            Ok(ring) => rings.push(ring),
            Err(e) => {
                let e = super::load::error_chain(&e);
                tracing::warn!(
                    "no timeline ring of its own for CPU {cpu} and the CPUs after it (the shared one takes their records): {e}"
                );
                break;
            }
        }
    }
    Ok((outer, rings))
}

pub(crate) fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> KernelError {
    move |source| KernelError::Map { map, source }
}

fn io_err(map: &'static str) -> impl Fn(std::io::Error) -> KernelError {
    move |source| KernelError::MapIo { map, source }
}

pub(crate) fn take(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<aya::maps::Map, KernelError> {
    ebpf.take_map(name).ok_or(KernelError::MapLayout { map: name, what: "not in the object" })
}

fn per_cpu_hash(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<MapData, KernelError> {
    match take(ebpf, name)? {
        aya::maps::Map::PerCpuHashMap(d) => Ok(d),
        _ => Err(KernelError::MapLayout { map: name, what: "not a per-CPU hash map" }),
    }
}

/// Reads a `T` from the start of `b` (bytes the kernel copied out of a map).
fn pod<T: aya::Pod>(b: &[u8]) -> T {
    assert!(b.len() >= std::mem::size_of::<T>(), "short map element");
    // SAFETY: T is Pod (any bytes are a valid T) and `b` holds at least size_of::<T>() bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

/// Distance between two CPUs' values of one element: the size rounded up to 8.
fn stride<V>() -> usize {
    std::mem::size_of::<V>().div_ceil(8) * 8
}

fn per_cpu<V: aya::Pod>(b: &[u8], cpus: usize) -> Vec<V> {
    (0..cpus).map(|c| pod::<V>(&b[c * stride::<V>()..])).collect()
}

/// Hands at most `max` entries of a ring of `T`s to `f` (a short entry is read and skipped);
/// returns how many it read.
pub(crate) fn drain_pod<T: aya::Pod>(ring: &mut RingBuf<MapData>, max: u64, f: &mut dyn FnMut(&T)) -> u64 {
    let mut n = 0;
    while n < max
        && let Some(item) = ring.next()
    {
        if item.len() >= std::mem::size_of::<T>() {
            f(&pod::<T>(&item));
        }
        n += 1;
    }
    n
}

/// The bytes of a repr(C) key without padding.
fn key_bytes<K: aya::Pod>(k: &K) -> &[u8] {
    // SAFETY: K is Pod: plain bytes, no padding.
    unsafe { std::slice::from_raw_parts(k as *const K as *const u8, std::mem::size_of::<K>()) }
}

impl AyaMaps {
    /// CPUs with a timeline ring of their own (0: all share one).
    pub fn cpu_timelines(&self) -> usize {
        self.timeline.per_cpu.len()
    }

    pub fn new(ebpf: &mut aya::Ebpf) -> Result<Self, KernelError> {
        Self::with_timeline(ebpf, true)
    }

    /// The maps, with a timeline ring per online CPU when the program writes records
    /// (`timeline`; with `--no-timeline` none is created).
    pub fn with_timeline(ebpf: &mut aya::Ebpf, timeline: bool) -> Result<Self, KernelError> {
        let cpus = aya::util::nr_cpus().map_err(|(_, source)| KernelError::MapIo { map: "possible CPUs", source })?;
        Ok(AyaMaps {
            flows: match take(ebpf, MAP_FLOWS)? {
                aya::maps::Map::HashMap(d) => d,
                _ => return Err(KernelError::MapLayout { map: MAP_FLOWS, what: "not a hash map" }),
            },
            extra: per_cpu_hash(ebpf, MAP_FLOW_EXTRA)?,
            pfc: per_cpu_hash(ebpf, MAP_PFC)?,
            counters: PerCpuArray::try_from(take(ebpf, MAP_COUNTERS)?).map_err(map_err(MAP_COUNTERS))?,
            events: RingBuf::try_from(take(ebpf, MAP_EVENTS)?).map_err(map_err(MAP_EVENTS))?,
            timeline: {
                let (outer, per_cpu) = cpu_timelines(ebpf, timeline)?;
                let shared = RingBuf::try_from(take(ebpf, MAP_TIMELINE)?).map_err(map_err(MAP_TIMELINE))?;
                Timeline { per_cpu, _outer: Some(outer), ..Timeline::shared(shared) }
            },
            cpus,
        })
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
        batch::for_each(
            self.flows.fd().as_fd(),
            std::mem::size_of::<FlowKey>(),
            std::mem::size_of::<FlowEntry>(),
            |k, v| s.flows.push((pod(k), pod(v))),
        )
        .map_err(io_err(MAP_FLOWS))?;
        s.extra = self.extra_entries()?;
        let pfc_len = stride::<PfcCounters>() * cpus;
        batch::for_each(self.pfc.fd().as_fd(), std::mem::size_of::<PfcKey>(), pfc_len, |k, v| {
            let mut sum = PfcCounters::default();
            for c in per_cpu::<PfcCounters>(v, cpus).iter().filter(|c| c.frames > 0) {
                sum.first_ns = if sum.frames == 0 { c.first_ns } else { sum.first_ns.min(c.first_ns) };
                sum.frames += c.frames;
                sum.xoff += c.xoff;
                sum.xon += c.xon;
                sum.quanta += c.quanta;
                sum.last_ns = sum.last_ns.max(c.last_ns);
            }
            s.pfc.push((pod(k), sum));
        })
        .map_err(io_err(MAP_PFC))?;
        Ok(s)
    }

    fn remove_flows(&mut self, keys: &[FlowKey]) -> Result<(), KernelError> {
        if keys.is_empty() {
            return Ok(());
        }
        let gone: std::collections::HashSet<&FlowKey> = keys.iter().collect();
        for k in keys {
            batch::delete(self.flows.fd().as_fd(), key_bytes(k)).map_err(io_err(MAP_FLOWS))?;
        }
        for (k, _) in self.extra_entries()?.iter().filter(|(k, _)| gone.contains(&k.flow)) {
            batch::delete(self.extra.fd().as_fd(), key_bytes(k)).map_err(io_err(MAP_FLOW_EXTRA))?;
        }
        Ok(())
    }

    fn drain_events(&mut self, max: u64, f: &mut dyn FnMut(KernelEvent)) -> u64 {
        let mut n = 0;
        while n < max
            && let Some(item) = self.events.next()
        {
            // Both layouts have their kind at byte 8.
            match item.get(8) {
                Some(&event_kind::CM) if item.len() >= std::mem::size_of::<CmEvent>() => {
                    f(KernelEvent::Cm(&pod::<CmEvent>(&item)))
                }
                Some(_) if item.len() >= std::mem::size_of::<Event>() => f(KernelEvent::Frame(&pod::<Event>(&item))),
                _ => {}
            }
            n += 1;
        }
        n
    }

    fn drain_records(&mut self, max: u64, f: &mut dyn FnMut(&Record)) -> u64 {
        self.timeline.drain(max, f)
    }

    fn release_records(&mut self) {
        self.timeline.order.released = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ts_ns: u64, psn: u32) -> Record {
        Record { ts_ns, psn, ..Default::default() }
    }

    /// Two rings' records, each in order, come out in time order across drains; a record
    /// newer than the watermark waits, also when an older one arrives in a later drain.
    #[test]
    fn records_of_several_rings_are_handed_on_in_time_order() {
        let mut o = InTimeOrder::default();
        let mut out = Vec::new();
        // Drain 1: ring 0 has 10, 30, 50; ring 1 has 20, 60.
        o.read.extend([rec(10, 0), rec(30, 0), rec(50, 0), rec(20, 1), rec(60, 1)]);
        o.hand_on(40, &mut |r| out.push(r.ts_ns));
        assert_eq!(out, vec![10, 20, 30]);
        assert_eq!(o.held(), 2, "50 and 60 wait for the watermark");
        // Drain 2: ring 1 delivers 45 (stamped before 50, submitted late), ring 0 70.
        o.read.extend([rec(70, 0), rec(45, 1)]);
        o.hand_on(65, &mut |r| out.push(r.ts_ns));
        assert_eq!(out, vec![10, 20, 30, 45, 50, 60]);
        // The end: everything, in order.
        o.read.push(rec(80, 1));
        o.released = true;
        o.hand_on(0, &mut |r| out.push(r.ts_ns));
        assert_eq!(out, vec![10, 20, 30, 45, 50, 60, 70, 80]);
        assert_eq!(o.held(), 0);
    }

    /// Records with equal stamps keep their ring order (the sort is stable).
    #[test]
    fn equal_stamps_keep_their_order() {
        let mut o = InTimeOrder::default();
        o.read.extend([rec(5, 1), rec(5, 2), rec(5, 3)]);
        let mut out = Vec::new();
        o.hand_on(5, &mut |r| out.push(r.psn));
        assert_eq!(out, vec![1, 2, 3]);
    }
}
