//! Reading the kernel maps. [`MapSource`] separates the map reader from the accounting (the
//! engine's live state) so that tests drive the accounting with a fake source, no kernel.

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{
    Event, ExtraKey, FlowCounters, MAP_COUNTERS, MAP_EVENTS, MAP_FLOW_EXTRA, MAP_FLOWS, MAP_PFC, PfcCounters, PfcKey,
    counter,
};
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap, RingBuf};

use super::KernelError;

/// One read of every map. Per-CPU values of flows are kept per CPU (their u32 counters wrap
/// independently); everything else is summed over CPUs.
#[derive(Debug, Clone, Default)]
pub struct KernelSnapshot {
    pub counters: Vec<u64>,
    pub flows: Vec<(FlowKey, Vec<FlowCounters>)>,
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
    /// Hands every pending ring-buffer event to `f`; returns how many there were.
    fn drain_events(&mut self, f: &mut dyn FnMut(&Event)) -> u64;
}

/// The maps of a loaded program.
pub struct AyaMaps {
    flows: PerCpuHashMap<MapData, FlowKey, FlowCounters>,
    extra: PerCpuHashMap<MapData, ExtraKey, u64>,
    pfc: PerCpuHashMap<MapData, PfcKey, PfcCounters>,
    counters: PerCpuArray<MapData, u64>,
    events: RingBuf<MapData>,
}

fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> KernelError {
    move |e| KernelError::Map { map, detail: e.to_string() }
}

fn take(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<aya::maps::Map, KernelError> {
    ebpf.take_map(name).ok_or(KernelError::Map { map: name, detail: "not in the object".into() })
}

impl AyaMaps {
    pub fn new(ebpf: &mut aya::Ebpf) -> Result<Self, KernelError> {
        Ok(AyaMaps {
            flows: PerCpuHashMap::try_from(take(ebpf, MAP_FLOWS)?).map_err(map_err(MAP_FLOWS))?,
            extra: PerCpuHashMap::try_from(take(ebpf, MAP_FLOW_EXTRA)?).map_err(map_err(MAP_FLOW_EXTRA))?,
            pfc: PerCpuHashMap::try_from(take(ebpf, MAP_PFC)?).map_err(map_err(MAP_PFC))?,
            counters: PerCpuArray::try_from(take(ebpf, MAP_COUNTERS)?).map_err(map_err(MAP_COUNTERS))?,
            events: RingBuf::try_from(take(ebpf, MAP_EVENTS)?).map_err(map_err(MAP_EVENTS))?,
        })
    }
}

impl MapSource for AyaMaps {
    fn snapshot(&mut self) -> Result<KernelSnapshot, KernelError> {
        let mut s = KernelSnapshot::default();
        for i in 0..counter::COUNT {
            let v = self.counters.get(&i, 0).map_err(map_err(MAP_COUNTERS))?;
            s.counters.push(v.iter().sum());
        }
        for item in self.flows.iter() {
            let (k, v) = item.map_err(map_err(MAP_FLOWS))?;
            s.flows.push((k, v.to_vec()));
        }
        for item in self.extra.iter() {
            let (k, v) = item.map_err(map_err(MAP_FLOW_EXTRA))?;
            s.extra.push((k, v.iter().sum()));
        }
        for item in self.pfc.iter() {
            let (k, v) = item.map_err(map_err(MAP_PFC))?;
            let mut sum = PfcCounters::default();
            for c in v.iter().filter(|c| c.frames > 0) {
                sum.first_ns = if sum.frames == 0 { c.first_ns } else { sum.first_ns.min(c.first_ns) };
                sum.frames += c.frames;
                sum.xoff += c.xoff;
                sum.xon += c.xon;
                sum.quanta += c.quanta;
                sum.last_ns = sum.last_ns.max(c.last_ns);
            }
            s.pfc.push((k, sum));
        }
        Ok(s)
    }

    fn remove_flows(&mut self, keys: &[FlowKey]) -> Result<(), KernelError> {
        if keys.is_empty() {
            return Ok(());
        }
        let gone: std::collections::HashSet<&FlowKey> = keys.iter().collect();
        let extra: Vec<ExtraKey> =
            self.extra.keys().filter_map(Result::ok).filter(|k| gone.contains(&k.flow)).collect();
        for k in keys {
            // A flow that vanished already is not an error.
            let _ = self.flows.remove(k);
        }
        for k in &extra {
            let _ = self.extra.remove(k);
        }
        Ok(())
    }

    fn drain_events(&mut self, f: &mut dyn FnMut(&Event)) -> u64 {
        let mut n = 0;
        while let Some(item) = self.events.next() {
            if item.len() >= std::mem::size_of::<Event>() {
                // SAFETY: the program writes whole `Event`s (repr(C), plain integers).
                let e: Event = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const Event) };
                f(&e);
            }
            n += 1;
        }
        n
    }
}
