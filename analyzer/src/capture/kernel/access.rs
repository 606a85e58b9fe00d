//! Reading the XDP program's maps: taking one from the loaded object, its errors, the plain bytes
//! of its keys and values (per CPU), draining a ring of plain records.

use aya::maps::{MapData, RingBuf};

use super::KernelError;

pub(crate) fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> KernelError {
    move |source| KernelError::Map { map, source }
}

pub(crate) fn io_err(map: &'static str) -> impl Fn(std::io::Error) -> KernelError {
    move |source| KernelError::MapIo { map, source }
}

pub(crate) fn take(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<aya::maps::Map, KernelError> {
    ebpf.take_map(name).ok_or(KernelError::MapLayout { map: name, what: "not in the object" })
}

pub(crate) fn per_cpu_hash(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<MapData, KernelError> {
    match take(ebpf, name)? {
        aya::maps::Map::PerCpuHashMap(d) => Ok(d),
        _ => Err(KernelError::MapLayout { map: name, what: "not a per-CPU hash map" }),
    }
}

/// Reads a `T` from the start of `b` (bytes the kernel copied out of a map).
pub(crate) fn pod<T: aya::Pod>(b: &[u8]) -> T {
    assert!(b.len() >= std::mem::size_of::<T>(), "short map element");
    // SAFETY: T is Pod (any bytes are a valid T) and `b` holds at least size_of::<T>() bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

/// Distance between two CPUs' values of one element: the size rounded up to 8.
pub(crate) fn stride<V>() -> usize {
    std::mem::size_of::<V>().div_ceil(8) * 8
}

pub(crate) fn per_cpu<V: aya::Pod>(b: &[u8], cpus: usize) -> Vec<V> {
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
pub(crate) fn key_bytes<K: aya::Pod>(k: &K) -> &[u8] {
    // SAFETY: K is Pod: plain bytes, no padding.
    unsafe { std::slice::from_raw_parts(k as *const K as *const u8, std::mem::size_of::<K>()) }
}
