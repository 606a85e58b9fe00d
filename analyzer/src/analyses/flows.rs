//! What the per-flow analyses keep of each flow, in one table: a timeline record costs one
//! hash lookup for all of them instead of one each. With thousands of flows taking turns every
//! lookup is a cache miss, and those misses were most of the live agent's CPU.
//!
//! Each analysis keeps at most `cap` flows of its own (`--max-flows`), as before: a flow new to
//! an analysis at its cap gets nothing there, and its frame is counted in that analysis'
//! `state_full`. A flow is in the table when at least one analysis keeps it.
//!
//! Offline the engine has just found the frame's flow in its own table; its index there is a
//! hint that leads straight to the flow's entry here (kept per index while the table does not
//! grow), so the frame pays for one hash lookup in all, not two. Live the kernel's id of the
//! flow, which its record carries, is such an index: a record costs no hash at all.

use analyzer_common::flow::FlowKey;
use rustc_hash::FxHashSet;

use super::ecn::FlowMarking;
use super::rtt::RequestFlow;
use crate::engine::flows::key_hash as hash;

/// One flow's state in the ECN and RTT analyses.
#[derive(Debug, Default)]
pub struct PerFlow {
    /// Marking of its data packets and CNPs (ECN analysis).
    pub marking: Option<FlowMarking>,
    /// Its requests' PSN span and those waiting for an ACK (RTT analysis).
    pub(crate) request: Option<RequestFlow>,
    /// Whether the DCQCN analysis watches its rate (kept equal to it by
    /// [`super::Analyses::observe`]): the frames of the flows it does not watch, nearly all,
    /// skip its lookup.
    pub(crate) rate_watched: bool,
    /// What the incast analysis keeps of it.
    pub(crate) incast: super::incast::Kept,
}

/// A shortcut to a flow's entry in [`Flows::slot`], checked against the key before it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    None,
    /// A dense index of the flow: the engine's index offline, the kernel's flow id live (the
    /// entry's bucket is kept per index while the table does not grow; an index another flow
    /// had before is caught by the key check).
    Index(u32),
    /// Live: the bucket [`Flows::prefetch`] fetched a few records earlier.
    Bucket(u32),
}

/// Which analyses want a record's flow kept ([`Flows::slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wants {
    pub marking: bool,
    pub request: bool,
}

#[derive(Debug, Default)]
pub struct Flows {
    table: hashbrown::HashTable<(FlowKey, PerFlow)>,
    /// Per flow index ([`Hint::Index`]), the bucket of its entry here plus one (0: not known),
    /// valid while the table has `hinted_buckets` buckets (growing moves entries).
    hints: Vec<u32>,
    hinted_buckets: usize,
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

    /// The flow's request state, added (by `new`) within the cap.
    pub(crate) fn request(&mut self, new: impl FnOnce() -> RequestFlow) -> Option<&mut RequestFlow> {
        if self.flow.request.is_none() {
            if *self.requests >= self.cap {
                return None;
            }
            *self.requests += 1;
            self.flow.request = Some(new());
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
            Hint::Index(h) => self.noted(h),
            Hint::Bucket(b) => Some(b),
            Hint::None => None,
        };
        // A bucket that holds this key is its entry, whatever led to it (keys are unique).
        let found = guess.filter(|b| self.table.get_bucket(*b as usize).is_some_and(|(k, _)| k == key));
        let (bucket, created) = match found {
            Some(b) => (b as usize, false),
            None => {
                let room = (wants.marking && self.markings < self.cap) || (wants.request && self.requests < self.cap);
                let h = hash(key);
                let (bucket, created) = match self.table.find_bucket_index(h, |(k, _)| k == key) {
                    Some(b) => (b, false),
                    None if room => {
                        let e = self.table.insert_unique(h, (*key, PerFlow::default()), |(k, _)| hash(k));
                        (e.bucket_index(), true)
                    }
                    None => return None,
                };
                if let Hint::Index(h) = hint {
                    self.remember(h, bucket);
                }
                (bucket, created)
            }
        };
        let (_, flow) = self.table.get_bucket_mut(bucket).expect("a bucket just found");
        Some(Slot { created, flow, markings: &mut self.markings, requests: &mut self.requests, cap: self.cap })
    }

    /// Notes that the flow of index `hint` is in `bucket` (forgetting every hint when the table has
    /// grown since they were noted).
    fn remember(&mut self, hint: u32, bucket: usize) {
        if self.table.num_buckets() != self.hinted_buckets {
            self.hints.clear();
            self.hinted_buckets = self.table.num_buckets();
        }
        let h = hint as usize;
        if self.hints.len() <= h {
            self.hints.resize(h + 1, 0);
        }
        self.hints[h] = bucket as u32 + 1;
    }

    /// Asks the CPU to fetch the memory of the flow's entry, if it has one, without waiting
    /// for it: the live agent calls this a few records ahead of analysing them. (The probe
    /// reads only the table's control bytes, which stay cached; the first bucket whose tag
    /// matches is fetched, rarely another flow's.)
    ///
    /// Returns the bucket fetched, a guess for [`Flows::slot`] ([`Hint::Bucket`]): the record
    /// then costs one hash and probe, not two.
    #[inline]
    pub fn prefetch(&self, key: &FlowKey) -> Option<u32> {
        let i = self.table.find_bucket_index(hash(key), |_| true)?;
        self.prefetch_bucket(i);
        Some(i as u32)
    }

    /// [`Flows::prefetch`] for a flow with an index ([`Hint::Index`]): the bucket noted for the
    /// index, without a hash (the hash's bucket when none is noted); the hint to take it with.
    #[inline]
    pub fn prefetch_index(&self, key: &FlowKey, index: u32) -> Hint {
        match self.noted(index) {
            Some(b) => self.prefetch_bucket(b as usize),
            None => {
                self.prefetch(key);
            }
        }
        Hint::Index(index)
    }

    /// The bucket noted for flow index `index`, while the table has not grown since.
    #[inline]
    fn noted(&self, index: u32) -> Option<u32> {
        self.hints
            .get(index as usize)
            .copied()
            .filter(|_| self.table.num_buckets() == self.hinted_buckets)
            .and_then(|b| b.checked_sub(1))
    }

    #[inline]
    fn prefetch_bucket(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(e) = self.table.get_bucket(i) {
            // Every cache line the entry touches: it lies at any 8-byte boundary, so its 168
            // bytes span up to four lines (three prefetches from its start missed the last).
            let start = e as *const (FlowKey, PerFlow) as usize;
            let end = start + size_of::<(FlowKey, PerFlow)>() - 1;
            for line in (start & !63..=end).step_by(64) {
                // SAFETY: a prefetch is a hint: it never faults (the line holds part of `e`).
                unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(line as *const i8) };
            }
        }
    }

    pub fn get(&self, key: &FlowKey) -> Option<&PerFlow> {
        self.table.find(hash(key), |(k, _)| k == key).map(|(_, f)| f)
    }

    pub(crate) fn get_mut(&mut self, key: &FlowKey) -> Option<&mut PerFlow> {
        self.table.find_mut(hash(key), |(k, _)| k == key).map(|(_, f)| f)
    }

    pub(crate) fn request_mut(&mut self, key: &FlowKey) -> Option<&mut RequestFlow> {
        self.get_mut(key)?.request.as_mut()
    }

    /// Every flow with a marking.
    pub fn markings(&self) -> impl Iterator<Item = (&FlowKey, &FlowMarking)> {
        self.table.iter().filter_map(|(k, f)| Some((k, f.marking.as_ref()?)))
    }

    pub(crate) fn requests(&self) -> impl Iterator<Item = (&FlowKey, &RequestFlow)> {
        self.table.iter().filter_map(|(k, f)| Some((k, f.request.as_ref()?)))
    }

    /// Drops the flows in `gone` (folded away live), and the buckets noted for indexes.
    pub fn forget(&mut self, gone: &FxHashSet<FlowKey>) {
        self.table.retain(|(k, _)| !gone.contains(k));
        self.markings = self.table.iter().filter(|(_, f)| f.marking.is_some()).count();
        self.requests = self.table.iter().filter(|(_, f)| f.request.is_some()).count();
        self.hints.clear();
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
        assert!(s.request(RequestFlow::default).is_some());
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

    /// The bucket a prefetch found (live, a few records before the record is analysed) leads
    /// to the flow's entry; a stale one (the table grew since, or the bucket is another
    /// flow's, or empty) falls back to the lookup, never to another flow's state.
    #[test]
    fn prefetched_buckets_lead_to_the_flows_own_entry() {
        let mut f = Flows::new(usize::MAX);
        let marking = Wants { marking: true, request: false };
        let key = |i: u32| FlowKey { dst_qp: i, ip_version: 4, ..Default::default() };
        let add = |f: &mut Flows, i: u32, hint: Hint, n: u64| {
            f.slot(&key(i), marking, hint).unwrap().marking().unwrap().data += n;
        };
        add(&mut f, 1, Hint::None, 1);
        add(&mut f, 2, Hint::None, 1);
        let (b1, b2) = (f.prefetch(&key(1)).unwrap(), f.prefetch(&key(2)).unwrap());
        add(&mut f, 1, Hint::Bucket(b1), 10);
        add(&mut f, 1, Hint::Bucket(b2), 100);
        add(&mut f, 2, Hint::Bucket(u32::MAX), 1000);
        // The table grows many times: the buckets noted before move.
        for i in 100..3000 {
            add(&mut f, i, Hint::None, 1);
        }
        add(&mut f, 1, Hint::Bucket(b1), 10_000);
        add(&mut f, 2, Hint::Bucket(b2), 10_000);
        let data = |i: u32| f.get(&key(i)).and_then(|p| p.marking).map(|m| m.data);
        assert_eq!((data(1), data(2)), (Some(10_111), Some(11_001)));
        assert_eq!((f.markings().count(), data(100), data(2999)), (2902, Some(1), Some(1)));
    }

    /// Live, the kernel's flow id is the index: a prefetch by an index noted before leads to
    /// the flow's entry, and an index another flow had (an id given back and taken again) finds
    /// the new flow by its key and is noted for it, never the old flow's state.
    #[test]
    fn flow_ids_as_indexes_lead_to_the_flows_own_entry() {
        let mut f = Flows::new(usize::MAX);
        let marking = Wants { marking: true, request: false };
        let key = |i: u32| FlowKey { dst_qp: i, ip_version: 4, ..Default::default() };
        let add = |f: &mut Flows, i: u32, id: u32| {
            let hint = f.prefetch_index(&key(i), id);
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
