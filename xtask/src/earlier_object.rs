//! What an object of an earlier build needs from its loader to run as its agent ran it, for the
//! kernel benchmark's `--compare`: objects before the per-CPU timeline logs wrote each CPU's
//! records to a ring its agent put at the CPU's index of an array of rings ("TIMELINES");
//! without them every record goes to the shared ring, which is not what those agents measured.

use aya::maps::{ArrayOfMaps, MapData, RingBuf};

/// The array of rings those objects declare, and the size of each CPU's ring.
const MAP_TIMELINES: &str = "TIMELINES";
const CPU_RING_BYTES: u32 = 2 << 20;

/// Each online CPU's timeline ring put in place, held open and never read.
pub struct TimelineRings {
    _outer: ArrayOfMaps<MapData, RingBuf<MapData>>,
    _rings: Vec<RingBuf<MapData>>,
}

impl TimelineRings {
    /// The rings of an object that declares them; None for one that does not.
    pub fn install(ebpf: &mut aya::Ebpf) -> anyhow::Result<Option<Self>> {
        let Some(map) = ebpf.take_map(MAP_TIMELINES) else { return Ok(None) };
        let mut outer = ArrayOfMaps::<MapData, RingBuf<MapData>>::try_from(map)?;
        let online = aya::util::online_cpus().map_err(|(path, e)| anyhow::anyhow!("{path}: {e}"))?;
        let mut rings = Vec::new();
        for cpu in online {
            let def = aya_obj::Map::new_from_params(
                aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32,
                0,
                0,
                CPU_RING_BYTES,
                0,
            );
            let ring = RingBuf::try_from(aya::maps::Map::RingBuf(MapData::create(def, "timeline_cpu", None)?))?;
            outer.set(cpu, &ring, 0)?;
            rings.push(ring);
        }
        Ok(Some(TimelineRings { _outer: outer, _rings: rings }))
    }
}
