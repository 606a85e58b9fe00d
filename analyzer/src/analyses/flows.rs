//! What the per-flow analyses keep of each flow, in one table: a timeline record costs one
//! lookup for all of them instead of one each. With thousands of flows taking turns every
//! lookup is a cache miss, and those misses were most of the live agent's CPU.
//!
//! Each analysis keeps at most `cap` flows of its own (`--max-flows`), as before: a flow new to
//! an analysis at its cap gets nothing there, and its frame is counted in that analysis'
//! `state_full`. A flow is in the table when at least one analysis keeps it.
//!
//! The entries lie in an array, each on its own cache lines, and never move: a flow's slot is
//! noted per index (offline the engine's index of the frame's flow, live the agent's dense index
//! of the flow id its record carries), so that a record with an index costs no hash at all, and its
//! entry can be fetched ahead of it ([`Flows::prefetch_index`]) without a probe of the key
//! map, whose memory would be one more miss to wait for. Slots freed by [`Flows::forget`] are
//! taken again by new flows; a noted slot is always checked against the record's key.

use analyzer_common::flow::FlowKey;
use rustc_hash::FxHashSet;

use super::ecn::kept::FlowMarking;
use super::incast::kept::Kept;
use super::keys::Place;
use super::messages::kept::MsgFlow;
use super::rtt::kept::RequestFlow;
use crate::model::chunked::Chunked;
use crate::model::key_hash;

/// One flow's state in the ECN and RTT analyses. The fields a data record uses come first (its
/// entry's first cache lines), the RTT analysis' requests last.
#[derive(Debug, Default)]
#[repr(C)]
pub struct PerFlow {
    /// Marking of its data packets and CNPs (ECN analysis).
    pub marking: Option<FlowMarking>,
    /// What the incast analysis keeps of it.
    pub(crate) incast: Kept,
    /// Whether the DCQCN analysis watches its rate (kept equal to it by
    /// [`super::Analyses::observe`]): the frames of the flows it does not watch, nearly all,
    /// skip its lookup.
    pub(crate) rate_watched: bool,
    /// Its requests' PSN span and those waiting for an ACK (RTT analysis).
    pub(crate) request: Option<RequestFlow>,
    /// Its messages (messages analysis), boxed: only request flows have them.
    pub(crate) messages: Option<Box<MsgFlow>>,
}

/// A shortcut to a flow's entry in [`Flows::slot`], checked against the key before it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    None,
    /// A dense index of the flow: the engine's index offline, the agent's dense index of the
    /// kernel's flow id live (its slot is noted per index; an index another flow had before is caught by the key check).
    Index(u32),
    /// Live: the slot [`Flows::prefetch`] fetched a few records earlier.
    Slot(u32),
}

/// Which analyses want a record's flow kept ([`Flows::slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wants {
    pub marking: bool,
    pub request: bool,
}

/// A flow's key and state, on cache lines of its own (no line shared with the next flow's).
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Entry {
    key: FlowKey,
    /// False for a slot freed by [`Flows::forget`] (its key is stale).
    live: bool,
    flow: PerFlow,
}

/// The bytes of an entry that a data record or a CNP uses (all but the RTT analysis'
/// requests), on its first two lines: only those are fetched ahead for such a record.
const HOT_BYTES: usize = core::mem::offset_of!(Entry, flow) + core::mem::offset_of!(PerFlow, request);
const _: () = assert!(HOT_BYTES <= 128, "a data record's part of a flow's entry spans more than two lines");

impl Entry {
    #[inline]
    fn holds(&self, key: &FlowKey) -> bool {
        self.live && self.key == *key
    }
}

#[derive(Debug, Default)]
pub struct Flows {
    /// By slot, in chunks: entries never move, and 200 000 flows take room for no more than
    /// a chunk beyond them (a vector doubling to 262 144 entries held a quarter more, and both
    /// its old and new arrays while it grew).
    entries: Chunked<Entry>,
    /// The slot of every flow in the table, found by its key where the entry keeps it (4
    /// bytes a flow; a map with a second copy of each key took 60).
    by_key: hashbrown::HashTable<u32>,
    /// Slots freed by [`Flows::forget`], taken before the array grows.
    free: Vec<u32>,
    /// Per flow index ([`Hint::Index`]), the slot of its entry (none: not known).
    hints: Vec<Place>,
    /// Flows with a marking, with a request state.
    markings: usize,
    requests: usize,
    cap: usize,
}

/// A flow's entry with the room each analysis has left: the analyses add their state through
/// `Slot::marking` and `Slot::request`, which count toward the caps.
pub struct Slot<'a> {
    /// Whether the entry was added by this lookup.
    pub created: bool,
    /// Its place in the table (what the RTT analysis keeps of a host pair's flows).
    pub index: u32,
    pub(crate) flow: &'a mut PerFlow,
    markings: &'a mut usize,
    requests: &'a mut usize,
    cap: usize,
}

impl Slot<'_> {
    /// The flow's marking, added within the cap; None at the cap (count it in `full`).
    pub fn marking(&mut self) -> Option<&mut FlowMarking> {
        if self.flow.marking.is_none() {
            if *self.markings >= self.cap {
                return None;
            }
            *self.markings += 1;
        }
        Some(self.flow.marking.get_or_insert_with(Default::default))
    }

    /// The flow's request state, added (by `new`, given the entry's [`Slot::index`]) within the
    /// cap.
    pub(crate) fn request(&mut self, new: impl FnOnce(u32) -> RequestFlow) -> Option<&mut RequestFlow> {
        if self.flow.request.is_none() {
            if *self.requests >= self.cap {
                return None;
            }
            *self.requests += 1;
            self.flow.request = Some(new(self.index));
        }
        self.flow.request.as_mut()
    }
}

impl Flows {
    pub fn new(cap: usize) -> Self {
        Flows { cap, ..Default::default() }
    }

    /// The flow's entry, when an analysis that wants it has room or keeps it already (one
    /// lookup, none with a valid hint); None when every analysis that wants it is at its cap.
    pub fn slot(&mut self, key: &FlowKey, wants: Wants, hint: Hint) -> Option<Slot<'_>> {
        let guess = match hint {
            Hint::Index(i) => self.noted(i),
            Hint::Slot(s) => Some(s),
            Hint::None => None,
        };
        // A slot that holds this key is its entry, whatever led to it (keys are unique).
        let found = guess.filter(|s| self.entries.get_checked(*s as usize).is_some_and(|e| e.holds(key)));
        let (slot, created) = match found {
            Some(s) => (s, false),
            None => {
                let room = (wants.marking && self.markings < self.cap) || (wants.request && self.requests < self.cap);
                let (slot, created) = match self.find(key) {
                    Some(s) => (s, false),
                    None if room => (self.add(key), true),
                    None => return None,
                };
                if let Hint::Index(i) = hint {
                    self.remember(i, slot);
                }
                (slot, created)
            }
        };
        let flow = &mut self.entries.get_mut(slot as usize).flow;
        Some(Slot {
            created,
            index: slot,
            flow,
            markings: &mut self.markings,
            requests: &mut self.requests,
            cap: self.cap,
        })
    }

    /// A new flow's entry: a freed slot, or a new one at the end.
    fn add(&mut self, key: &FlowKey) -> u32 {
        let entry = Entry { key: *key, live: true, flow: PerFlow::default() };
        let slot = match self.free.pop() {
            Some(s) => {
                *self.entries.get_mut(s as usize) = entry;
                s
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        let entries = &self.entries;
        self.by_key.insert_unique(key_hash(key), slot, |&s| key_hash(&entries.get(s as usize).key));
        slot
    }

    /// The slot of the flow of `key`, when it has one.
    #[inline]
    fn find(&self, key: &FlowKey) -> Option<u32> {
        let entries = &self.entries;
        self.by_key.find(key_hash(key), |&s| entries.get(s as usize).holds(key)).copied()
    }

    /// Notes that the flow of index `index` is in `slot`.
    fn remember(&mut self, index: u32, slot: u32) {
        let i = index as usize;
        if self.hints.len() <= i {
            self.hints.resize(i + 1, Place::default());
        }
        self.hints[i].set(slot);
    }

    /// Asks the CPU to fetch the memory of the flow's entry, if it has one, without waiting
    /// for it: the live agent calls this a few records ahead of analysing them.
    ///
    /// Returns the slot fetched, for [`Flows::slot`] ([`Hint::Slot`]): the record then costs
    /// one lookup of its key, not two. `requests`: the record needs the flow's request state
    /// too (the entry's third line), not only its marking and incast places.
    #[inline]
    pub fn prefetch(&self, key: &FlowKey, requests: bool) -> Option<u32> {
        let s = self.find(key)?;
        self.prefetch_slot(s, requests);
        Some(s)
    }

    /// [`Flows::prefetch`] for a flow with an index ([`Hint::Index`]): the slot noted for the
    /// index, without a lookup of the key (by the key when none is noted); the hint to take it
    /// with.
    #[inline]
    pub fn prefetch_index(&self, key: &FlowKey, index: u32, requests: bool) -> Hint {
        match self.noted(index) {
            Some(s) => self.prefetch_slot(s, requests),
            None => {
                self.prefetch(key, requests);
            }
        }
        Hint::Index(index)
    }

    /// The slot noted for flow index `index`.
    #[inline]
    fn noted(&self, index: u32) -> Option<u32> {
        self.hints.get(index as usize).and_then(|p| p.get())
    }

    #[inline]
    fn prefetch_slot(&self, s: u32, requests: bool) {
        #[cfg(target_arch = "x86_64")]
        if let Some(e) = self.entries.get_checked(s as usize) {
            let start = e as *const Entry as usize;
            let len = if requests { size_of::<Entry>() } else { HOT_BYTES };
            // The entry is aligned to its first line: the lines of its first `len` bytes.
            for line in (start..start + len).step_by(64) {
                // SAFETY: a prefetch is a hint: it never faults (the line holds part of `e`).
                unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(line as *const i8) };
            }
        }
    }

    fn entry(&self, key: &FlowKey) -> Option<&Entry> {
        self.find(key).map(|s| self.entries.get(s as usize))
    }

    /// The flow in slot `index` ([`Slot::index`]), when one is there.
    pub(crate) fn at(&self, index: u32) -> Option<(&FlowKey, &PerFlow)> {
        self.entries.get_checked(index as usize).filter(|e| e.live).map(|e| (&e.key, &e.flow))
    }

    pub fn get(&self, key: &FlowKey) -> Option<&PerFlow> {
        self.entry(key).map(|e| &e.flow)
    }

    pub(crate) fn get_mut(&mut self, key: &FlowKey) -> Option<&mut PerFlow> {
        self.find(key).map(|s| &mut self.entries.get_mut(s as usize).flow)
    }

    pub(crate) fn request_mut(&mut self, key: &FlowKey) -> Option<&mut RequestFlow> {
        self.get_mut(key)?.request.as_mut()
    }

    fn live(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.live)
    }

    /// Every flow with a marking.
    pub fn markings(&self) -> impl Iterator<Item = (&FlowKey, &FlowMarking)> {
        self.live().filter_map(|e| Some((&e.key, e.flow.marking.as_ref()?)))
    }

    /// Every request flow's messages.
    pub(crate) fn messages(&self) -> impl Iterator<Item = (&FlowKey, &MsgFlow)> {
        self.live().filter_map(|e| Some((&e.key, e.flow.messages.as_deref()?)))
    }

    pub(crate) fn requests(&self) -> impl Iterator<Item = (&FlowKey, &RequestFlow)> {
        self.live().filter_map(|e| Some((&e.key, e.flow.request.as_ref()?)))
    }

    /// Drops the flows in `gone` (folded away live): their slots are free for new flows.
    pub fn forget(&mut self, gone: &FxHashSet<FlowKey>) {
        for k in gone {
            let entries = &self.entries;
            let Ok(found) = self.by_key.find_entry(key_hash(k), |&s| entries.get(s as usize).holds(k)) else {
                continue;
            };
            let (s, _) = found.remove();
            let e = self.entries.get_mut(s as usize);
            self.markings -= e.flow.marking.is_some() as usize;
            self.requests -= e.flow.request.is_some() as usize;
            *e = Entry::default();
            self.free.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> FlowKey {
        FlowKey { dst_qp: i as u32, ip_version: 4, ..Default::default() }
    }

    #[test]
    fn each_analysis_keeps_at_most_its_cap() {
        let mut f = Flows::new(2);
        let both = Wants { marking: true, request: true };
        let marking = Wants { marking: true, request: false };
        for i in 0..2 {
            let mut s = f.slot(&key(i), marking, Hint::None).unwrap();
            assert!(s.marking().is_some());
        }
        // Markings are full; a third flow is still kept for its requests.
        let mut s = f.slot(&key(2), both, Hint::None).unwrap();
        assert!(s.marking().is_none(), "third marking past the cap");
        assert!(s.request(|_| RequestFlow::default()).is_some());
        assert!(f.slot(&key(3), marking, Hint::None).is_none(), "no analysis has room: not added");
        assert_eq!(f.markings().count(), 2);
        assert_eq!(f.requests().count(), 1);
        // A kept flow keeps being found at the cap.
        assert!(f.slot(&key(0), marking, Hint::None).unwrap().marking().is_some());
        let gone: FxHashSet<FlowKey> = [key(0)].into_iter().collect();
        f.forget(&gone);
        assert!(f.slot(&key(3), marking, Hint::None).unwrap().marking().is_some(), "room again after a fold");
    }

    /// Hints (the engine's flow indexes, offline) lead to the flow's own entry, also after the
    /// table grew and moved entries, and a hint of another flow is not taken for this one.
    #[test]
    fn hints_lead_to_the_flows_own_entry() {
        let mut f = Flows::new(usize::MAX);
        let marking = Wants { marking: true, request: false };
        let key = |i: u32| FlowKey { dst_qp: i, ip_version: 4, ..Default::default() };
        // Flow i has engine index i; each frame adds 1 to its data count. Flows arrive one by
        // one (the table grows many times) and the earlier ones keep coming back.
        for n in 0..2000u32 {
            for i in (0..=n).step_by(97) {
                f.slot(&key(i), marking, Hint::Index(i)).unwrap().marking().unwrap().data += 1;
            }
            f.slot(&key(n), marking, Hint::Index(n)).unwrap().marking().unwrap().data += 1;
        }
        for i in 0..2000u32 {
            let want = 1 + (i..2000).filter(|n| i % 97 == 0 && *n >= i).count() as u64;
            assert_eq!(f.get(&key(i)).and_then(|p| p.marking).map(|m| m.data), Some(want), "flow {i}");
        }
        // A wrong hint (flow 5's index for flow 6) finds flow 6 by its key.
        f.slot(&key(6), marking, Hint::Index(5)).unwrap().marking().unwrap().data += 100;
        assert_eq!(f.get(&key(6)).and_then(|p| p.marking).map(|m| m.data), Some(101));
        assert_eq!(f.get(&key(5)).and_then(|p| p.marking).map(|m| m.data), Some(1));
    }

    /// The slot a prefetch found (live, a few records before the record is analysed) leads to
    /// the flow's entry; a stale one (another flow's, out of range, or freed and taken by
    /// another flow since) falls back to the lookup, never to another flow's state.
    #[test]
    fn prefetched_slots_lead_to_the_flows_own_entry() {
        let mut f = Flows::new(usize::MAX);
        let marking = Wants { marking: true, request: false };
        let key = |i: u32| FlowKey { dst_qp: i, ip_version: 4, ..Default::default() };
        let add = |f: &mut Flows, i: u32, hint: Hint, n: u64| {
            f.slot(&key(i), marking, hint).unwrap().marking().unwrap().data += n;
        };
        add(&mut f, 1, Hint::None, 1);
        add(&mut f, 2, Hint::None, 1);
        let (b1, b2) = (f.prefetch(&key(1), false).unwrap(), f.prefetch(&key(2), true).unwrap());
        add(&mut f, 1, Hint::Slot(b1), 10);
        add(&mut f, 1, Hint::Slot(b2), 100);
        add(&mut f, 2, Hint::Slot(u32::MAX), 1000);
        // The table grows many times: the slots noted before stay.
        for i in 100..3000 {
            add(&mut f, i, Hint::None, 1);
        }
        add(&mut f, 1, Hint::Slot(b1), 10_000);
        add(&mut f, 2, Hint::Slot(b2), 10_000);
        let data = |f: &Flows, i: u32| f.get(&key(i)).and_then(|p| p.marking).map(|m| m.data);
        assert_eq!((data(&f, 1), data(&f, 2)), (Some(10_111), Some(11_001)));
        assert_eq!((f.markings().count(), data(&f, 100), data(&f, 2999)), (2902, Some(1), Some(1)));
        // Flow 1 folded away: flow 5000 takes its slot; the slot noted for flow 1 now leads
        // flow 1 (back again) to an entry of its own, never to flow 5000's.
        f.forget(&[key(1)].into_iter().collect());
        assert_eq!((data(&f, 1), f.markings().count()), (None, 2901));
        add(&mut f, 5000, Hint::None, 1);
        assert_eq!(f.prefetch(&key(5000), false), Some(b1), "a freed slot is taken again");
        add(&mut f, 1, Hint::Slot(b1), 7);
        add(&mut f, 5000, Hint::Slot(b1), 20);
        assert_eq!((data(&f, 1), data(&f, 5000), f.markings().count()), (Some(7), Some(21), 2903));
    }

    /// Live, the agent's dense index of the kernel's flow id is the index: a prefetch by an index noted before leads to
    /// the flow's entry, and an index another flow had (an id given back and taken again) finds
    /// the new flow by its key and is noted for it, never the old flow's state.
    #[test]
    fn flow_ids_as_indexes_lead_to_the_flows_own_entry() {
        let mut f = Flows::new(usize::MAX);
        let marking = Wants { marking: true, request: false };
        let key = |i: u32| FlowKey { dst_qp: i, ip_version: 4, ..Default::default() };
        let add = |f: &mut Flows, i: u32, id: u32| {
            let hint = f.prefetch_index(&key(i), id, i.is_multiple_of(2));
            assert_eq!(hint, Hint::Index(id));
            f.slot(&key(i), marking, hint).unwrap().marking().unwrap().data += 1;
        };
        for i in 1..=100 {
            add(&mut f, i, i);
        }
        for i in 1..=100 {
            add(&mut f, i, i);
        }
        // Id 7 given back, taken by flow 1007.
        add(&mut f, 1007, 7);
        add(&mut f, 1007, 7);
        add(&mut f, 7, 107);
        let data = |i: u32| f.get(&key(i)).and_then(|p| p.marking).map(|m| m.data);
        assert_eq!((data(1), data(7), data(1007), data(100)), (Some(2), Some(3), Some(2), Some(2)));
    }
}
