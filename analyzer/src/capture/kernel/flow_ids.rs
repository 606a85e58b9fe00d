//! What the flow ids of the kernel's timeline records stand for. The XDP program writes a
//! [`CompactRecord`] per frame, naming its flow by the id of the flow's slot in its table
//! ([`analyzer_common::table`]), announced with the key ([`analyzer_common::maps::FlowId`]);
//! this side expands each record with the key before the analyses see it.
//!
//! The kernel's ids are slot indices plus one, spread over the whole table (eight slots a
//! bucket, four buckets a key: 10 000 flows use ids up to about 75 000). So this side gives
//! each id it learns a dense index of its own (indices of retired flows taken again first):
//! the only array by kernel id holds 4-byte indices; the keys, and the analyses' hints by
//! flow index ([`crate::analyses::flows::Hint::Index`]), are arrays by dense index, as small
//! as the flows are many. A record costs no hash, and two array reads that are fetched ahead.
//!
//! Three ways an id is learnt: its announcement (read before the records are handed on, and
//! written before any record carries the id), the flow table (each poll's snapshot holds every
//! entry's id: an announcement the full ring refused is made up there), and for a record the
//! kernel wrote whole ([`KeyedRecord`]: no entry or no id) an id of this side's own
//! ([`AGENT_IDS`]), dropped once the record is handed on.

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{AGENT_IDS, FlowEntry, KeyedRecord};
use analyzer_common::record::{CompactRecord, Record};
use rustc_hash::FxHashMap;

/// A dense index's flow: the kernel's id and the key.
#[derive(Debug, Clone, Copy)]
struct Known {
    id: u32,
    key: FlowKey,
}

#[derive(Debug, Default)]
pub struct FlowIds {
    /// By kernel id: its dense index plus one (0: not known, or given back).
    dense: Vec<u32>,
    /// By dense index: the flow (None: given back, the index free).
    known: Vec<Option<Known>>,
    /// Dense indices given back, taken before `known` grows.
    free: Vec<u32>,
    /// The whole records' keys by this side's id, until they are handed on.
    keyed: FxHashMap<u32, FlowKey>,
    next_keyed: u32,
    /// Ids of flows removed from the kernel, to give back at the next poll (a record of the
    /// flow may still wait to be handed on until then).
    retiring: Vec<u32>,
    /// Records whose id named no flow known here (counted with the records lost).
    pub unknown: u64,
}

impl FlowIds {
    /// The key the kernel announced for `id` (on the flow-id ring, or in the flow's entry); an
    /// id of 0 (none) is ignored.
    pub fn learn(&mut self, id: u32, key: FlowKey) {
        if id == 0 || id >= AGENT_IDS {
            return;
        }
        let i = id as usize;
        if self.dense.len() <= i {
            self.dense.resize(i + 1, 0);
        }
        let known = Some(Known { id, key });
        match self.dense[i] {
            0 => {
                let d = match self.free.pop() {
                    Some(d) => {
                        self.known[d as usize] = known;
                        d
                    }
                    None => {
                        self.known.push(known);
                        (self.known.len() - 1) as u32
                    }
                };
                self.dense[i] = d + 1;
            }
            d => self.known[d as usize - 1] = known,
        }
    }

    /// The flow table as a poll read it: every entry with an id names its key (this makes up
    /// for announcements the ring had no room for).
    pub fn learn_entries(&mut self, flows: &[(FlowKey, FlowEntry)]) {
        for (k, e) in flows {
            self.learn(e.counters.id, *k);
        }
    }

    /// A record the kernel wrote whole, under an id of this side's own until handed on.
    pub fn keyed(&mut self, k: &KeyedRecord) -> CompactRecord {
        let id = AGENT_IDS | (self.next_keyed & !AGENT_IDS);
        self.next_keyed = self.next_keyed.wrapping_add(1);
        self.keyed.insert(id, k.record.flow());
        CompactRecord::of(&k.record, id)
    }

    /// The index the analyses may keep `c`'s flow by ([`crate::analyses::flows::Hint::Index`]):
    /// its dense index plus one (a flow's while it lives), 0 for a record under this side's own
    /// id (one a record) or an id not known.
    #[inline]
    pub fn index(&self, c: &CompactRecord) -> u32 {
        if c.flow & AGENT_IDS != 0 { 0 } else { self.dense.get(c.flow as usize).copied().unwrap_or(0) }
    }

    /// The whole record of `c` and its flow's index ([`FlowIds::index`]); None (counted in
    /// `unknown`) when its id names no known flow.
    #[inline]
    pub fn expand(&mut self, c: &CompactRecord) -> Option<(Record, u32)> {
        let (key, index) = if c.flow & AGENT_IDS != 0 {
            (self.keyed.remove(&c.flow), 0)
        } else {
            let index = self.index(c);
            (index.checked_sub(1).and_then(|d| self.known[d as usize]).map(|k| k.key), index)
        };
        match key {
            Some(k) => Some((c.expand(&k), index)),
            None => {
                self.unknown += 1;
                None
            }
        }
    }

    /// Hands each record of `cs` on whole, with its flow's index ([`FlowIds::index`]); those
    /// whose id names no known flow are counted in `unknown`. The memory of the records a few
    /// places ahead is fetched meanwhile (with thousands of flows taking turns each read is a
    /// cache miss): their dense indices further ahead, their keys nearer.
    pub fn expand_all(&mut self, cs: &[CompactRecord], f: &mut dyn FnMut(&Record, u32)) {
        const KEYS_AHEAD: usize = 8;
        const INDICES_AHEAD: usize = 2 * KEYS_AHEAD;
        for (i, c) in cs.iter().enumerate() {
            if let Some(next) = cs.get(i + INDICES_AHEAD) {
                prefetch(self.dense.get(next.flow as usize));
            }
            if let Some(next) = cs.get(i + KEYS_AHEAD) {
                prefetch(self.index(next).checked_sub(1).and_then(|d| self.known.get(d as usize)));
            }
            if let Some((r, index)) = self.expand(c) {
                f(&r, index);
            }
        }
    }

    /// The ids of flows removed from the kernel (by key), to give back at the next poll;
    /// returned (a key held in two slots has both ids).
    pub fn retire(&mut self, gone: &std::collections::HashSet<&FlowKey>) -> Vec<u32> {
        let from = self.retiring.len();
        for k in self.known.iter().flatten() {
            if gone.contains(&k.key) {
                self.retiring.push(k.id);
            }
        }
        self.retiring[from..].to_vec()
    }

    /// The ids retired at the previous poll, forgotten here (their dense indices free for the
    /// next ids learnt): the caller lets the kernel give them to new flows.
    pub fn take_retired(&mut self) -> Vec<u32> {
        let ids = std::mem::take(&mut self.retiring);
        for &id in &ids {
            if let Some(d) = self.dense.get_mut(id as usize)
                && *d != 0
            {
                self.known[*d as usize - 1] = None;
                self.free.push(*d - 1);
                *d = 0;
            }
        }
        ids
    }
}

/// Asks the CPU to fetch the line of `v` (if any) without waiting for it.
#[inline]
fn prefetch<T>(v: Option<&T>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = v {
        // SAFETY: a prefetch is a hint: it never faults (the line holds part of `v`).
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(v as *const T as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer_common::maps::ids_kind;

    fn key(qp: u32) -> FlowKey {
        FlowKey { dst_qp: qp, ip_version: 4, ..Default::default() }
    }

    fn rec(flow: u32, psn: u32) -> CompactRecord {
        CompactRecord { ts_ns: 1, flow, psn, ..Default::default() }
    }

    /// An id learnt from its announcement or from the flow table expands to its key; an id never
    /// learnt is counted, not guessed.
    #[test]
    fn ids_expand_to_the_keys_announced_or_read_from_the_map() {
        let mut ids = FlowIds::default();
        ids.learn(3, key(0x30));
        let mut e = FlowEntry::zeroed();
        e.counters.id = 5;
        ids.learn_entries(&[(key(0x50), e), (key(0x60), FlowEntry::zeroed())]);
        assert_eq!(ids.expand(&rec(3, 7)).map(|(r, _)| (r.dst_qp, r.psn)), Some((0x30, 7)));
        assert_eq!(ids.expand(&rec(5, 8)).map(|(r, _)| r.dst_qp), Some(0x50));
        assert_eq!((ids.expand(&rec(4, 0)), ids.expand(&rec(0, 0)), ids.unknown), (None, None, 2));
    }

    /// A whole record gets an id of this side's own, which expands once.
    #[test]
    fn a_whole_record_expands_once_under_its_own_id() {
        let mut ids = FlowIds::default();
        let mut k = KeyedRecord { kind: ids_kind::RECORD, ..Default::default() };
        k.record.dst_qp = 0x77;
        k.record.ip_version = 6;
        k.record.psn = 9;
        let (a, b) = (ids.keyed(&k), ids.keyed(&k));
        assert!(a.flow & AGENT_IDS != 0 && a.flow != b.flow);
        assert_eq!(ids.expand(&a), Some((k.record, 0)));
        assert_eq!(ids.expand(&b), Some((k.record, 0)));
        assert_eq!((ids.expand(&a), ids.unknown), (None, 1), "once only");
    }

    /// A removed flow's id is given back one poll later, and forgotten then (not before: a
    /// record of it may still wait); a flow that kept its id is untouched.
    #[test]
    fn a_removed_flows_id_is_given_back_a_poll_later() {
        let mut ids = FlowIds::default();
        ids.learn(1, key(1));
        ids.learn(2, key(2));
        let gone = key(1);
        assert_eq!(ids.retire(&[&gone].into_iter().collect()), vec![1]);
        assert!(ids.expand(&rec(1, 0)).is_some(), "still known until given back");
        assert_eq!(ids.take_retired(), vec![1]);
        assert_eq!(ids.expand(&rec(1, 0)), None);
        assert!(ids.expand(&rec(2, 0)).is_some());
        assert_eq!(ids.take_retired(), Vec::<u32>::new());
    }

    /// A drain's records come out in order, whole, each with its flow's index: dense, in the
    /// order the ids were learnt (not the kernel's sparse id), 0 for a record under this side's
    /// own id; one of an unknown id is counted, not handed on (also when its id lies beyond
    /// every id learnt).
    #[test]
    fn a_drain_is_handed_on_in_order_with_each_flows_dense_index() {
        let mut ids = FlowIds::default();
        ids.learn(70_001, key(0x10));
        ids.learn(30, key(0x20));
        let mut k = KeyedRecord { kind: ids_kind::RECORD, ..Default::default() };
        k.record.dst_qp = 0x99;
        k.record.ip_version = 4;
        let whole = ids.keyed(&k);
        let drain: Vec<CompactRecord> =
            [rec(30, 1), rec(9, 2), whole, rec(70_001, 3), rec(1 << 20, 4), rec(30, 5)].into_iter().collect();
        let mut out = Vec::new();
        ids.expand_all(&drain, &mut |r, index| out.push((r.dst_qp, r.psn, index)));
        assert_eq!(out, vec![(0x20, 1, 2), (0x99, 0, 0), (0x10, 3, 1), (0x20, 5, 2)]);
        assert_eq!(ids.unknown, 2);
    }

    /// A flow given back frees its dense index for the next id learnt, so the indices stay as
    /// many as the flows alive, whatever the kernel's ids; an id learnt again (its entry read
    /// after its announcement) keeps its index, and takes the key it is learnt with.
    #[test]
    fn dense_indices_are_reused_after_a_flow_is_given_back() {
        let mut ids = FlowIds::default();
        ids.learn(50_000, key(1));
        ids.learn(9, key(2));
        ids.learn(9, key(3));
        assert_eq!((ids.index(&rec(50_000, 0)), ids.index(&rec(9, 0))), (1, 2));
        assert_eq!(ids.expand(&rec(9, 0)).map(|(r, i)| (r.dst_qp, i)), Some((3, 2)));
        let gone = key(1);
        assert_eq!(ids.retire(&[&gone].into_iter().collect()), vec![50_000]);
        assert_eq!(ids.index(&rec(50_000, 0)), 1, "kept until given back");
        assert_eq!(ids.take_retired(), vec![50_000]);
        assert_eq!(ids.index(&rec(50_000, 0)), 0);
        ids.learn(74_000, key(4));
        assert_eq!(ids.index(&rec(74_000, 0)), 1, "the freed index, not a third");
        assert_eq!(ids.expand(&rec(74_000, 0)).map(|(r, i)| (r.dst_qp, i)), Some((4, 1)));
        assert_eq!((ids.known.len(), ids.unknown), (2, 0));
    }
}
