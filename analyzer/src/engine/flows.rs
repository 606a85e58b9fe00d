//! Per-flow counters, keyed by (src IP, dst IP, UDP source port, destination QP).

use analyzer_common::PacketSummary;
use analyzer_common::flow::FlowKey;
use analyzer_common::psn::PsnState;
use smallvec::SmallVec;

use crate::frames::FrameMeta;
use crate::model::chunked::Chunked;
use crate::model::key_hash;

/// A small map of value → count: a flow sees few distinct opcodes, DSCPs or PCPs, and a
/// linear scan of a handful beats hashing. `N` live in the flow itself (no allocation: a
/// flow's memory is what bounds a run of many flows), more spill to the heap: three opcodes
/// (a message's FIRST, MIDDLE, LAST) in 40 bytes, one DSCP or PCP in 24.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts<const N: usize = 3> {
    keys: [u8; N],
    n: u8,
    vals: [u64; N],
    // 8 bytes in every flow where a Vec would take 24; allocated by the rare flow with more.
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<(u8, u64)>>>,
}

/// A flow's DSCPs or PCPs: nearly always one.
pub type OneCount = Counts<1>;

impl<const N: usize> Default for Counts<N> {
    fn default() -> Self {
        Counts { keys: [0; N], n: 0, vals: [0; N], more: None }
    }
}

impl<const N: usize> Counts<N> {
    #[inline]
    pub fn add(&mut self, key: u8, n: u64) {
        let inline = self.n as usize;
        if let Some(i) = self.keys[..inline].iter().position(|k| *k == key) {
            self.vals[i] += n;
            return;
        }
        if inline < N {
            self.keys[inline] = key;
            self.vals[inline] = n;
            self.n += 1;
            return;
        }
        let more = self.more.get_or_insert_with(Default::default);
        match more.iter_mut().find(|(k, _)| *k == key) {
            Some((_, c)) => *c += n,
            None => more.push((key, n)),
        }
    }

    fn entries(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        let inline = self.keys[..self.n as usize].iter().copied().zip(self.vals);
        inline.chain(self.more.iter().flat_map(|m| m.iter().copied()))
    }

    /// The same counts added in key order: two sets of counts compare equal this way whatever
    /// order their values came in (the kernel's and the host's of one flow).
    pub fn in_order(&self) -> Self {
        let mut n = Self::default();
        for (k, v) in self.sorted() {
            n.add(k, v);
        }
        n
    }

    /// Entries sorted by key.
    pub fn sorted(&self) -> Vec<(u8, u64)> {
        let mut v: Vec<(u8, u64)> = self.entries().collect();
        v.sort_unstable();
        v
    }

    pub fn get(&self, key: u8) -> u64 {
        self.entries().find(|(k, _)| *k == key).map_or(0, |(_, c)| c)
    }
}

/// Counters of one flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub packets: u64,
    /// Sum of original frame lengths.
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub opcodes: Counts,
    /// Not-ECT, ECT(1)... indexed by the ECN codepoint: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    pub ecn: [u64; 4],
    pub dscp: OneCount,
    /// Frames by outer PCP (tagged frames only); `untagged` counts the rest.
    pub pcp: OneCount,
    pub untagged: u64,
    pub fecn: u64,
    pub becn: u64,
    pub ack_req: u64,
    /// Bit i set: the flow was seen in source i (sources beyond 64 fold into bit 63).
    pub sources: u64,
    /// Bytes per source (capture file or interface), for the per-label shares of ECMP.
    pub source_bytes: SmallVec<[(u16, u64); 1]>,
    /// PSN sequence and AETH counters (offline: the state machine itself; live: the counters
    /// accumulated from the flow's kernel entry and extra map).
    pub psn: PsnState,
    /// The first frame that showed trouble: CE-marked, a CNP, a NAK, or out of sequence or
    /// repeated in its PSN stream (0: none yet). Offline with `--evidence` only
    /// ([`super::Engine::first_events`]); evidence files start there.
    pub first_event_ns: u64,
}

impl FlowStats {
    /// Accounts one frame's counters (its PSN state is the engine's to account, with the path's
    /// PMTU: `analyzer_common::psn::account`).
    #[inline]
    pub fn observe(&mut self, meta: FrameMeta, s: &PacketSummary) {
        if self.packets == 0 {
            self.first_ns = meta.ts_ns;
            self.last_ns = meta.ts_ns;
        } else {
            self.first_ns = self.first_ns.min(meta.ts_ns);
            self.last_ns = self.last_ns.max(meta.ts_ns);
        }
        self.packets += 1;
        self.bytes += s.frame_len as u64;
        self.opcodes.add(s.opcode, 1);
        self.ecn[(s.ecn & 3) as usize] += 1;
        self.dscp.add(s.dscp, 1);
        if s.vlan_tags > 0 {
            self.pcp.add(s.pcp, 1);
        } else {
            self.untagged += 1;
        }
        self.fecn += s.fecn as u64;
        self.becn += s.becn as u64;
        self.ack_req += s.ack_req as u64;
        self.sources |= crate::frames::source_bit(meta.source);
        self.add_source_bytes(meta.source, s.frame_len as u64);
    }

    pub fn add_source_bytes(&mut self, source: u16, bytes: u64) {
        match self.source_bytes.iter_mut().find(|(s, _)| *s == source) {
            Some((_, b)) => *b += bytes,
            None => self.source_bytes.push((source, bytes)),
        }
    }
}

/// All flows; insertion order is kept so that per-flow work is deterministic. The index holds
/// each flow's position only (4 bytes, its key compared where it is kept), not a second copy
/// of the 40-byte key.
#[derive(Debug, Default)]
pub struct FlowTable {
    index: hashbrown::HashTable<u32>,
    keys: Chunked<FlowKey>,
    stats: Chunked<FlowStats>,
}

impl FlowTable {
    fn position(&self, key: &FlowKey) -> Option<usize> {
        let keys = &self.keys;
        self.index.find(key_hash(key), |&i| keys.get(i as usize) == key).map(|&i| i as usize)
    }

    /// The flow's index (its place, stable until [`FlowTable`] folds or compacts), added when
    /// new; `None` for a new flow when the table holds `max` flows already.
    pub fn index_within(&mut self, key: FlowKey, max: usize) -> Option<usize> {
        match self.position(&key) {
            Some(i) => Some(i),
            None if self.keys.len() >= max => None,
            None => Some(self.insert_new(key)),
        }
    }

    fn insert_new(&mut self, key: FlowKey) -> usize {
        let i = self.keys.len();
        self.keys.push(key);
        self.stats.push(FlowStats::default());
        let keys = &self.keys;
        self.index.insert_unique(key_hash(&key), i as u32, |&j| key_hash(keys.get(j as usize)));
        i
    }

    pub fn get_or_insert(&mut self, key: FlowKey) -> &mut FlowStats {
        let i = self.index_within(key, usize::MAX).expect("no limit");
        self.stats.get_mut(i)
    }

    pub fn get(&self, key: &FlowKey) -> Option<&FlowStats> {
        self.position(key).map(|i| self.stats.get(i))
    }

    pub fn get_mut(&mut self, key: &FlowKey) -> Option<&mut FlowStats> {
        self.position(key).map(|i| self.stats.get_mut(i))
    }

    /// The `i`-th flow in insertion order.
    pub fn at(&self, i: usize) -> (&FlowKey, &FlowStats) {
        (self.keys.get(i), self.stats.get(i))
    }

    /// The counters of the flow at `i` ([`FlowTable::index_within`]).
    pub fn at_index_mut(&mut self, i: usize) -> &mut FlowStats {
        self.stats.get_mut(i)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&FlowKey, &FlowStats)> {
        self.keys.iter().zip(self.stats.iter())
    }

    /// Removes the flows `gone` holds (the others keep their order).
    pub fn remove(&mut self, gone: &rustc_hash::FxHashSet<FlowKey>) {
        let keep: Vec<bool> = self.keys.iter().map(|k| !gone.contains(k)).collect();
        self.keys.retain_in_place(&keep);
        self.stats.retain_in_place(&keep);
        self.index.clear();
        let all = &self.keys;
        for i in 0..all.len() {
            self.index.insert_unique(key_hash(all.get(i)), i as u32, |&j| key_hash(all.get(j as usize)));
        }
        self.index.shrink_to_fit(|&j| key_hash(all.get(j as usize)));
    }
}

/// Flows folded into one aggregate to bound memory (live: idle flows the kernel no longer
/// holds, oldest first, past `--max-flows` of them): their count and totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Folded {
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values past the ones held inline spill to the heap and count alike, for one inline
    /// (DSCP, PCP) and three (opcodes).
    #[test]
    fn counts_spill_past_their_inline_values() {
        let mut one = OneCount::default();
        let mut three = Counts::<3>::default();
        for k in [26u8, 48, 26, 0, 48, 26] {
            one.add(k, 1);
            three.add(k, 2);
        }
        assert_eq!(one.sorted(), [(0, 1), (26, 3), (48, 2)]);
        assert_eq!(three.sorted(), [(0, 2), (26, 6), (48, 4)]);
        assert_eq!((one.get(26), one.get(7), three.get(0)), (3, 0, 2));
        assert!(one.more.is_some() && three.more.is_none());
    }
}
