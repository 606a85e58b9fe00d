//! Reading the CPUs' logs: the timeline records ([`analyzer_common::maps::MAP_TIMELINE_LOG`])
//! and the PFC/PAUSE/sighting events ([`analyzer_common::maps::MAP_EVENT_LOG`]), each CPU's
//! mapped into the agent's memory, with the shared ring of the CPUs without one, handed on
//! in time order ([`InTimeOrder`]).

use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use analyzer_common::maps::{Event, HEAD_STRIDE};
use analyzer_common::record::CompactRecord;
use aya::maps::MapData;

use super::KernelError;

/// What the logs hold: an item stamped with the kernel's clock.
pub trait Stamped: Copy {
    fn ts_ns(&self) -> u64;
}

impl Stamped for CompactRecord {
    fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
}

impl Stamped for Event {
    fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
}

/// An item is handed on once it is this much older than the agent's clock: the program
/// writes an item within microseconds of stamping it (it runs with preemption off), so by
/// then every log and the ring hold every item stamped before it.
pub const HOLD_NS: u64 = 1_000_000;

/// Items of several logs, each in time order, handed on in time order: an item waits until no
/// log can still deliver an older one (it is [`HOLD_NS`] old), or until the run ends.
#[derive(Debug)]
pub struct InTimeOrder<T> {
    /// Read and not handed on yet, in time order.
    held: Vec<T>,
    /// Read in this drain, not yet merged into `held`.
    pub read: Vec<T>,
    /// Hand on everything: the run ends.
    pub released: bool,
}

impl<T> Default for InTimeOrder<T> {
    fn default() -> Self {
        InTimeOrder { held: Default::default(), read: Vec::new(), released: false }
    }
}

impl<T: Stamped> InTimeOrder<T> {
    /// Merges what was read into the held records and hands on, in time order, those stamped
    /// at or before `until` (all of them once released), all at once (the taker may look
    /// ahead).
    pub fn hand_on(&mut self, until: u64, f: &mut dyn FnMut(&[T])) {
        // The held records and each log's are in time order: a stable sort of these runs is a
        // merge (equal stamps keep held-then-log order), also when a late record is older than
        // some held ones. Runs already in order (one CPU's records) are only checked.
        self.held.append(&mut self.read);
        if !self.held.is_sorted_by_key(|r| r.ts_ns()) {
            self.held.sort_by_key(|r| r.ts_ns());
        }
        let until = if self.released { u64::MAX } else { until };
        let due = self.held.partition_point(|r| r.ts_ns() <= until);
        f(&self.held[..due]);
        // What waits is at most HOLD_NS of items: a short move.
        self.held.drain(..due);
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// What one read of a CPU's log took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lap {
    /// Items the read went past (handed on or lost).
    pub read: u64,
    /// Items overwritten before they could be read.
    pub lost: u64,
}

/// Reads at most `max` items of one CPU's log of `slots` items into `out`, from `*tail` (the
/// next item this side has not read; advanced): `head` is the CPU's head (items it has
/// written), `slot(i)` the slot of item `i`. The writer advances the head after each item, and
/// writes item `i + slots` over item `i`: items more than `slots` behind the head are lost, and
/// so is any item the writer may have reached while they were copied (it may be writing item
/// `head` once the head reads `head`, so after the copy only items above `head − slots` are
/// whole).
///
/// Generic, not `dyn`: the copy of each item is inlined, not an indirect call per item.
#[inline]
pub fn read_log<T>(
    mut head: impl FnMut() -> u64,
    slot: impl Fn(u64) -> T,
    slots: u64,
    tail: &mut u64,
    max: u64,
    out: &mut Vec<T>,
) -> Lap {
    let h = head();
    let mut lost = 0;
    if h.wrapping_sub(*tail) > slots {
        lost = h - slots - *tail;
        *tail = h - slots;
    }
    let n = (h - *tail).min(max);
    let start = out.len();
    out.extend((*tail..*tail + n).map(slot));
    // The copies above are done before the head is read again.
    fence(Ordering::Acquire);
    let whole_from = (head() + 1).saturating_sub(slots);
    let torn = whole_from.saturating_sub(*tail).min(n);
    out.drain(start..start + torn as usize);
    *tail += n;
    Lap { read: n, lost: lost + torn }
}

/// A BPF array mapped into this process (read-only, or read-write for the flow table's tags,
/// which the agent retires).
pub(crate) struct Mapped {
    pub(crate) ptr: *const u8,
    len: usize,
}

// SAFETY: a shared read-only mapping, valid until dropped, usable from any thread.
unsafe impl Send for Mapped {}

impl Mapped {
    pub(crate) fn new(map: &MapData, name: &'static str, bytes: usize) -> Result<Self, KernelError> {
        Self::with(map, name, bytes, libc::PROT_READ)
    }

    pub(crate) fn writable(map: &MapData, name: &'static str, bytes: usize) -> Result<Self, KernelError> {
        Self::with(map, name, bytes, libc::PROT_READ | libc::PROT_WRITE)
    }

    fn with(map: &MapData, name: &'static str, bytes: usize, prot: libc::c_int) -> Result<Self, KernelError> {
        let page = 4096;
        let len = bytes.div_ceil(page) * page;
        // SAFETY: maps the map's value area (BPF_F_MMAPABLE); checked below.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, map.fd().as_fd().as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(KernelError::MapIo { map: name, source: std::io::Error::last_os_error() });
        }
        Ok(Mapped { ptr: ptr as *const u8, len })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The CPUs' logs of one kind (`slots` items of `T` each) and their heads, mapped, and how
/// far this side has read each.
pub(crate) struct CpuLogs<T> {
    log: Mapped,
    heads: Mapped,
    slots: usize,
    /// Per CPU with a log: the next item not read.
    tails: Vec<u64>,
    _maps: (MapData, MapData),
    /// Read, to be handed on in time order.
    pub(crate) order: InTimeOrder<T>,
    /// Items the logs overwrote before this side read them.
    pub(crate) lost: u64,
}

impl<T: Stamped> CpuLogs<T> {
    /// The log array `log` (`slots` items a CPU) and its heads, taken from `ebpf`; None when
    /// the loader gave no CPU a log (it sizes the array by them: [`super::load::log_cpus`]).
    pub(crate) fn new(
        ebpf: &mut aya::Ebpf,
        (log_name, heads_name): (&'static str, &'static str),
        slots: u32,
    ) -> Result<Option<Self>, KernelError> {
        let array = |ebpf: &mut aya::Ebpf, name: &'static str| match super::access::take(ebpf, name)? {
            aya::maps::Map::Array(d) => Ok(d),
            _ => Err(KernelError::MapLayout { map: name, what: "not an array" }),
        };
        let log = array(ebpf, log_name)?;
        let heads = array(ebpf, heads_name)?;
        let info = log.info().map_err(super::access::map_err(log_name))?;
        let cpus = (info.max_entries() / slots) as usize;
        if cpus == 0 {
            return Ok(None);
        }
        let slots = slots as usize;
        Ok(Some(CpuLogs {
            log: Mapped::new(&log, log_name, cpus * slots * std::mem::size_of::<T>())?,
            heads: Mapped::new(&heads, heads_name, cpus * HEAD_STRIDE as usize * 8)?,
            slots,
            tails: vec![0; cpus],
            _maps: (log, heads),
            order: InTimeOrder::default(),
            lost: 0,
        }))
    }

    /// CPUs with a log.
    pub(crate) fn cpus(&self) -> usize {
        self.tails.len()
    }

    /// CPU `cpu`'s head, as the program last stored it.
    fn head(&self, cpu: usize) -> u64 {
        // SAFETY: within the heads mapping (cpu < tails.len(), HEAD_STRIDE u64s each); the
        // program stores the u64 whole (an aligned 8-byte store).
        unsafe { (*(self.heads.ptr as *const AtomicU64).add(cpu * HEAD_STRIDE as usize)).load(Ordering::Acquire) }
    }

    fn slot(&self, cpu: usize, i: u64) -> T {
        let at = cpu * self.slots + (i as usize & (self.slots - 1));
        // SAFETY: within the log mapping (cpu < tails.len(), `slots` items each); the program
        // may be writing it: `read_log` drops an item it may have torn.
        unsafe { std::ptr::read_volatile((self.log.ptr as *const T).add(at)) }
    }

    /// Items the CPUs wrote to their logs (their heads).
    pub(crate) fn written(&self) -> u64 {
        (0..self.cpus()).map(|c| self.head(c)).sum()
    }

    /// Reads at most `max` items of each log into `order.read`; true when any may hold more.
    fn read(&mut self, max: u64) -> bool {
        let (mut more, slots) = (false, self.slots as u64);
        // Out of `self` while the closures below borrow it.
        let mut read = std::mem::take(&mut self.order.read);
        for cpu in 0..self.cpus() {
            let mut tail = self.tails[cpu];
            let lap = read_log(|| self.head(cpu), |i| self.slot(cpu, i), slots, &mut tail, max, &mut read);
            self.tails[cpu] = tail;
            self.lost += lap.lost;
            more |= lap.read == max;
        }
        self.order.read = read;
        more
    }

    /// One drain, after the shared ring's: it read `ring_read` items (at most `max`), handed
    /// `handed` of them on itself and put the others in `order.read`. Reads each log, hands
    /// on in time order what is [`HOLD_NS`] old (everything once released); returns the items
    /// read, or `max` when the ring or a log may hold more.
    pub(crate) fn drain(&mut self, max: u64, ring_read: u64, handed: u64, f: &mut dyn FnMut(&[T])) -> u64 {
        let more = self.read_logs(max, ring_read);
        self.hand_on_read(max, more, handed, f)
    }

    /// The first half of [`CpuLogs::drain`]: reads each log; true when the ring or a log may
    /// hold more.
    pub(crate) fn read_logs(&mut self, max: u64, ring_read: u64) -> bool {
        self.read(max) || ring_read == max
    }

    /// The second half of [`CpuLogs::drain`], after [`CpuLogs::read_logs`] said `more`.
    pub(crate) fn hand_on_read(&mut self, max: u64, more: bool, handed: u64, f: &mut dyn FnMut(&[T])) -> u64 {
        let read = handed + self.order.read.len() as u64;
        let now = super::clock_ns(libc::CLOCK_MONOTONIC);
        self.order.hand_on(now.saturating_sub(HOLD_NS), f);
        if more { max } else { read.min(max.saturating_sub(1)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ts_ns: u64, psn: u32) -> CompactRecord {
        CompactRecord { ts_ns, psn, ..Default::default() }
    }

    /// Two logs' records, each in order, come out in time order across drains; a record
    /// newer than the watermark waits, also when an older one arrives in a later drain.
    #[test]
    fn records_of_several_logs_are_handed_on_in_time_order() {
        let mut o = InTimeOrder::default();
        let mut out = Vec::new();
        // Drain 1: log 0 has 10, 30, 50; log 1 has 20, 60.
        o.read.extend([rec(10, 0), rec(30, 0), rec(50, 0), rec(20, 1), rec(60, 1)]);
        o.hand_on(40, &mut |rs| out.extend(rs.iter().map(|r| r.ts_ns)));
        assert_eq!(out, vec![10, 20, 30]);
        assert_eq!(o.held(), 2, "50 and 60 wait for the watermark");
        // Drain 2: log 1 delivers 45 (stamped before 50, written late), log 0 70.
        o.read.extend([rec(70, 0), rec(45, 1)]);
        o.hand_on(65, &mut |rs| out.extend(rs.iter().map(|r| r.ts_ns)));
        assert_eq!(out, vec![10, 20, 30, 45, 50, 60]);
        // The end: everything, in order.
        o.read.push(rec(80, 1));
        o.released = true;
        o.hand_on(0, &mut |rs| out.extend(rs.iter().map(|r| r.ts_ns)));
        assert_eq!(out, vec![10, 20, 30, 45, 50, 60, 70, 80]);
        assert_eq!(o.held(), 0);
    }

    /// Records with equal stamps keep their log order (the sort is stable).
    #[test]
    fn equal_stamps_keep_their_order() {
        let mut o = InTimeOrder::default();
        o.read.extend([rec(5, 1), rec(5, 2), rec(5, 3)]);
        let mut out = Vec::new();
        o.hand_on(5, &mut |rs| out.extend(rs.iter().map(|r| r.psn)));
        assert_eq!(out, vec![1, 2, 3]);
    }

    /// A log of 8 slots written as the program writes it: record `i` (PSN `i`) at slot `i % 8`.
    struct Log {
        slots: Vec<CompactRecord>,
        head: u64,
    }

    impl Log {
        fn new() -> Self {
            Log { slots: vec![CompactRecord::default(); 8], head: 0 }
        }
        fn write(&mut self, n: u64) {
            for _ in 0..n {
                self.slots[(self.head % 8) as usize] = rec(self.head, self.head as u32);
                self.head += 1;
            }
        }
    }

    fn psns(v: &[CompactRecord]) -> Vec<u32> {
        v.iter().map(|r| r.psn).collect()
    }

    /// Reads in steps of at most `max`, and a lap: records written past the slots before they
    /// were read are counted, never handed on, and the read goes on from the oldest whole one.
    #[test]
    fn a_log_is_read_in_order_and_what_it_overwrote_is_counted() {
        let mut log = Log::new();
        let (mut tail, mut out) = (0, Vec::new());
        log.write(5);
        let lap = read_log(|| log.head, |i| log.slots[(i % 8) as usize], 8, &mut tail, 3, &mut out);
        assert_eq!((lap, psns(&out)), (Lap { read: 3, lost: 0 }, vec![0, 1, 2]));
        let lap = read_log(|| log.head, |i| log.slots[(i % 8) as usize], 8, &mut tail, 100, &mut out);
        assert_eq!((lap, psns(&out)), (Lap { read: 2, lost: 0 }, vec![0, 1, 2, 3, 4]));
        // 13 more: records 5..18 written into 8 slots; 5..10 are gone, and 10, in the slot
        // the writer's next record goes to, cannot be told from one it is writing.
        log.write(13);
        out.clear();
        let lap = read_log(|| log.head, |i| log.slots[(i % 8) as usize], 8, &mut tail, 100, &mut out);
        assert_eq!(lap, Lap { read: 8, lost: 6 });
        assert_eq!(psns(&out), (11..18).collect::<Vec<_>>());
        assert_eq!(tail, 18);
        let lap = read_log(|| log.head, |i| log.slots[(i % 8) as usize], 8, &mut tail, 100, &mut out);
        assert_eq!(lap, Lap::default(), "nothing new");
    }

    /// The writer moves on while the records are copied: those it may have overwritten (up to
    /// the slot of the head read after the copy) are dropped and counted, the rest kept.
    #[test]
    fn records_the_writer_reached_during_the_copy_are_dropped_and_counted() {
        let slots: Vec<CompactRecord> = (0..8).map(|i| rec(i, i as u32)).collect();
        // The head reads 8 before the copy (records 0..8 all there), 11 after it: the writer
        // has written 8, 9, 10 over 0, 1, 2 and may be writing 11 over 3.
        let mut heads = [8u64, 11].into_iter();
        let (mut tail, mut out) = (0, Vec::new());
        let lap = read_log(|| heads.next().unwrap(), |i| slots[(i % 8) as usize], 8, &mut tail, 100, &mut out);
        assert_eq!(lap, Lap { read: 8, lost: 4 });
        assert_eq!(psns(&out), vec![4, 5, 6, 7]);
        assert_eq!(tail, 8, "the next read starts after the copied ones (8..11 are whole then)");
        // The writer lapped the whole copy: nothing of it is kept.
        let mut heads = [16u64, 30].into_iter();
        let (mut tail, mut out) = (8, Vec::new());
        let lap = read_log(|| heads.next().unwrap(), |i| slots[(i % 8) as usize], 8, &mut tail, 100, &mut out);
        assert_eq!((lap, out.len()), (Lap { read: 8, lost: 8 }, 0));
    }
}
