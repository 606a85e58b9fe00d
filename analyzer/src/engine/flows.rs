//! Per-flow counters, keyed by (src IP, dst IP, UDP source port, destination QP).

use analyzer_common::PacketSummary;
use analyzer_common::flow::FlowKey;
use analyzer_common::psn::PsnState;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::FrameMeta;

/// A small map of value → count, kept as a short vector: a flow sees few distinct opcodes,
/// DSCPs or PCPs, and a linear scan of a handful beats hashing. Up to three live in the flow
/// itself, no allocation (a flow's memory is what bounds a run of many flows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(SmallVec<[(u8, u64); 3]>);

impl Counts {
    #[inline]
    pub fn add(&mut self, key: u8, n: u64) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, c)) => *c += n,
            None => self.0.push((key, n)),
        }
    }
    /// Entries sorted by key.
    pub fn sorted(&self) -> Vec<(u8, u64)> {
        let mut v = self.0.to_vec();
        v.sort_unstable();
        v
    }
    pub fn get(&self, key: u8) -> u64 {
        self.0.iter().find(|(k, _)| *k == key).map_or(0, |(_, c)| *c)
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
    pub dscp: Counts,
    /// Frames by outer PCP (tagged frames only); `untagged` counts the rest.
    pub pcp: Counts,
    pub untagged: u64,
    pub fecn: u64,
    pub becn: u64,
    pub ack_req: u64,
    /// Bit i set: the flow was seen in source i (sources beyond 64 fold into bit 63).
    pub sources: u64,
    /// Bytes per source (capture file or interface), for the per-label shares of ECMP.
    pub source_bytes: SmallVec<[(u16, u64); 1]>,
    /// PSN sequence and AETH counters (offline: the state machine itself; live: the counters
    /// accumulated from the kernel's PSN map).
    pub psn: PsnState,
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
        self.sources |= source_bit(meta.source);
        self.add_source_bytes(meta.source, s.frame_len as u64);
    }

    pub fn add_source_bytes(&mut self, source: u16, bytes: u64) {
        match self.source_bytes.iter_mut().find(|(s, _)| *s == source) {
            Some((_, b)) => *b += bytes,
            None => self.source_bytes.push((source, bytes)),
        }
    }
}

/// The bit of input `source` in [`FlowStats::sources`] (inputs beyond 64 share bit 63); the
/// vantage points' sets use the same folding.
pub fn source_bit(source: u16) -> u64 {
    1u64 << source.min(63)
}

/// All flows; insertion order is kept so that per-flow work is deterministic.
#[derive(Debug, Default)]
pub struct FlowTable {
    index: FxHashMap<FlowKey, u32>,
    pub keys: Vec<FlowKey>,
    pub stats: Vec<FlowStats>,
}

impl FlowTable {
    /// The flow's counters; `None` for a new flow when the table holds `max` flows already.
    pub fn get_or_insert_within(&mut self, key: FlowKey, max: usize) -> Option<&mut FlowStats> {
        if self.keys.len() >= max && !self.index.contains_key(&key) {
            return None;
        }
        Some(self.get_or_insert(key))
    }

    pub fn get_or_insert(&mut self, key: FlowKey) -> &mut FlowStats {
        let i = *self.index.entry(key).or_insert_with(|| {
            self.keys.push(key);
            self.stats.push(FlowStats::default());
            (self.keys.len() - 1) as u32
        });
        &mut self.stats[i as usize]
    }

    pub fn get(&self, key: &FlowKey) -> Option<&FlowStats> {
        self.index.get(key).map(|&i| &self.stats[i as usize])
    }

    pub fn get_mut(&mut self, key: &FlowKey) -> Option<&mut FlowStats> {
        self.index.get(key).map(|&i| &mut self.stats[i as usize])
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
        let (keys, stats) = (std::mem::take(&mut self.keys), std::mem::take(&mut self.stats));
        self.index.clear();
        for (k, s) in keys.into_iter().zip(stats).filter(|(k, _)| !gone.contains(k)) {
            self.index.insert(k, self.keys.len() as u32);
            self.keys.push(k);
            self.stats.push(s);
        }
        self.index.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.stats.shrink_to_fit();
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
