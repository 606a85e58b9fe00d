//! Reading the CPUs' logs: the timeline records ([`analyzer_common::maps::MAP_TIMELINE_LOG`])
//! and the PFC/PAUSE/sighting events ([`analyzer_common::maps::MAP_EVENT_LOG`]), each CPU's
//! mapped into the agent's memory, with the shared ring of the CPUs without one, handed on
//! in time order ([`InTimeOrder`]).

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};

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

/// How often the keeper (the thread of each kind of log) copies what the CPUs wrote: far within the time a CPU
/// takes to lap its log (a 1 MiB log lasts 43 ms of 759 k frames/s; a CPU's event log of 4096
/// events lasts 41 ms at 100 k PFC frames/s).
pub const KEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(5);

/// The bytes the keeper holds for all CPUs' logs of one kind at most (as many items as the
/// logs themselves hold, when that is more): past it the logs lap, and their loss is counted.
pub const KEPT_BYTES: usize = 32 << 20;

/// The mapped logs and heads: read-only, read by the keeper and the drains.
struct Source {
    log: Mapped,
    heads: Mapped,
    slots: usize,
    cpus: usize,
}

// SAFETY: read-only shared mappings (see `Mapped`), valid while the `Source` lives.
unsafe impl Sync for Source {}

impl Source {
    /// CPU `cpu`'s head, as the program last stored it.
    fn head(&self, cpu: usize) -> u64 {
        // SAFETY: within the heads mapping (cpu < cpus, HEAD_STRIDE u64s each); the program
        // stores the u64 whole (an aligned 8-byte store).
        unsafe { (*(self.heads.ptr as *const AtomicU64).add(cpu * HEAD_STRIDE as usize)).load(Ordering::Acquire) }
    }

    fn slot<T>(&self, cpu: usize, i: u64) -> T {
        let at = cpu * self.slots + (i as usize & (self.slots - 1));
        // SAFETY: within the log mapping (cpu < cpus, `slots` items each); the program may be
        // writing it: `read_log` drops an item it may have torn.
        unsafe { std::ptr::read_volatile((self.log.ptr as *const T).add(at)) }
    }
}

/// What has been copied out of the logs and not yet taken by a drain.
struct Kept<T> {
    /// Per CPU: the next item not copied.
    tails: Vec<u64>,
    /// Per CPU: copied, in order.
    items: Vec<VecDeque<T>>,
    /// Items the logs overwrote before they were copied.
    lost: u64,
    /// Items a CPU's queue holds at most.
    cap: usize,
    /// One copy's items, before they join a queue (kept for its capacity).
    scratch: Vec<T>,
}

impl<T: Copy> Kept<T> {
    /// Copies what each CPU wrote since the last copy into its queue, while it has room (a
    /// full queue leaves its log to lap: that loss is counted when there is room again).
    fn copy(&mut self, src: &Source) {
        for cpu in 0..src.cpus {
            let room = self.cap.saturating_sub(self.items[cpu].len()) as u64;
            if room == 0 {
                continue;
            }
            let lap = read_log(
                || src.head(cpu),
                |i| src.slot::<T>(cpu, i),
                src.slots as u64,
                &mut self.tails[cpu],
                room,
                &mut self.scratch,
            );
            self.lost += lap.lost;
            self.items[cpu].extend(self.scratch.drain(..));
        }
    }
}

/// The thread that copies the logs every [`KEEP_EVERY`] ([`CpuLogs`]), stopped when dropped.
struct Keeper {
    stop: Arc<AtomicBool>,
    /// Copies nothing while set ([`CpuLogs::keep`]).
    paused: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The CPUs' logs of one kind (`slots` items of `T` each) and their heads, mapped, and how far
/// this side has read each. A thread of its own (the keeper) copies what the CPUs write into
/// queues every [`KEEP_EVERY`], and the drains take from those queues: while the agent's loop
/// is busy elsewhere (a checkpoint of 10 000 flows takes half a second) the logs do not lap,
/// up to [`KEPT_BYTES`] more.
pub(crate) struct CpuLogs<T> {
    src: Arc<Source>,
    kept: Arc<Mutex<Kept<T>>>,
    keeper: Keeper,
    _maps: (MapData, MapData),
    /// Read, to be handed on in time order.
    pub(crate) order: InTimeOrder<T>,
    /// What the last read makes safe to hand on: items stamped at or before it (see
    /// [`CpuLogs::read`]).
    until: u64,
}

impl<T: Stamped + Send + 'static> CpuLogs<T> {
    /// The log array `log` and its heads, taken from `ebpf`, with its keeper started; None
    /// when the loader gave no CPU a log. The loader sizes both by the CPUs with a log
    /// ([`super::load::log_cpus`], a head every [`HEAD_STRIDE`]) and the log's items a CPU (a
    /// power of two): both are read back from the maps, so this side reads the logs as they
    /// were made.
    pub(crate) fn new(
        ebpf: &mut aya::Ebpf,
        (log_name, heads_name): (&'static str, &'static str),
    ) -> Result<Option<Self>, KernelError> {
        let array = |ebpf: &mut aya::Ebpf, name: &'static str| match super::access::take(ebpf, name)? {
            aya::maps::Map::Array(d) => Ok(d),
            _ => Err(KernelError::MapLayout { map: name, what: "not an array" }),
        };
        let log = array(ebpf, log_name)?;
        let heads = array(ebpf, heads_name)?;
        let entries = |d: &MapData, name| d.info().map(|i| i.max_entries()).map_err(super::access::map_err(name));
        let cpus = (entries(&heads, heads_name)? / HEAD_STRIDE) as usize;
        if cpus == 0 {
            return Ok(None);
        }
        let items = entries(&log, log_name)? as usize;
        let slots = items / cpus;
        if !slots.is_power_of_two() || slots * cpus != items {
            return Err(KernelError::MapLayout { map: log_name, what: "not a power-of-two log per CPU with a head" });
        }
        let src = Arc::new(Source {
            log: Mapped::new(&log, log_name, cpus * slots * std::mem::size_of::<T>())?,
            heads: Mapped::new(&heads, heads_name, cpus * HEAD_STRIDE as usize * 8)?,
            slots,
            cpus,
        });
        let cap = (KEPT_BYTES / cpus / std::mem::size_of::<T>()).max(slots);
        let kept = Arc::new(Mutex::new(Kept {
            tails: vec![0; cpus],
            items: (0..cpus).map(|_| VecDeque::new()).collect(),
            lost: 0,
            cap,
            scratch: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let thread = {
            let (src, kept, stop, paused) = (src.clone(), kept.clone(), stop.clone(), paused.clone());
            std::thread::Builder::new()
                .name(format!("keep {log_name}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::park_timeout(KEEP_EVERY);
                        if paused.load(Ordering::Relaxed) {
                            continue;
                        }
                        if let Ok(mut k) = kept.lock() {
                            k.copy(&src);
                        }
                    }
                })
                .map_err(|source| KernelError::MapIo { map: log_name, source })?
        };
        Ok(Some(CpuLogs {
            src,
            kept,
            keeper: Keeper { stop, paused, thread: Some(thread) },
            _maps: (log, heads),
            order: InTimeOrder::default(),
            until: 0,
        }))
    }

    /// CPUs with a log.
    pub(crate) fn cpus(&self) -> usize {
        self.src.cpus
    }

    /// Items a CPU's log holds.
    pub(crate) fn slots(&self) -> usize {
        self.src.slots
    }

    /// Items the CPUs wrote to their logs (their heads).
    pub(crate) fn written(&self) -> u64 {
        (0..self.cpus()).map(|c| self.src.head(c)).sum()
    }

    /// Whether the keeper copies the logs (it does from the start): off, only the drains read
    /// them, and a log laps while none runs (for tests and benchmarks of the logs alone).
    pub(crate) fn keep(&self, on: bool) {
        self.keeper.paused.store(!on, Ordering::Relaxed);
    }

    /// Items the logs overwrote before this side copied them.
    pub(crate) fn lost(&self) -> u64 {
        self.kept.lock().map_or(0, |k| k.lost)
    }

    /// Copies what the logs hold now, then moves at most `max` items of each CPU's queue into
    /// `order.read`; true when any may hold more. Sets what may be handed on: items stamped
    /// [`HOLD_NS`] before the copy began (the clock is read before it: an item stamped then
    /// is in its log by the copy, however long the copy or a preemption of this thread takes)
    /// and older than every item a queue still holds past `max` (those come in a later drain:
    /// a CPU's backlog must not be overtaken by another CPU's newer items).
    fn read(&mut self, max: u64) -> bool {
        let began = super::clock_ns(libc::CLOCK_MONOTONIC);
        let Ok(mut kept) = self.kept.lock() else { return false };
        kept.copy(&self.src);
        let mut more = false;
        let mut left = u64::MAX;
        for q in &mut kept.items {
            let n = q.len().min(max as usize);
            self.order.read.extend(q.drain(..n));
            more |= n as u64 == max;
            if let Some(first) = q.front() {
                left = left.min(first.ts_ns());
            }
            // What a stall made it hold is given back once it is taken.
            if q.is_empty() && q.capacity() > self.src.slots {
                q.shrink_to(self.src.slots / 8);
            }
        }
        self.until = began.saturating_sub(HOLD_NS).min(left.saturating_sub(1));
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
        self.order.hand_on(self.until, f);
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
