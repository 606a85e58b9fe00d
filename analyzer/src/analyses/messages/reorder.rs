//! Reordering per request flow, as RFC 5236's reorder density counts it: a request arriving
//! late (a PSN of a gap, first seen after later PSNs, not a retransmission) with its
//! displacement (how many later PSNs came before it). Packet spraying and adaptive routing
//! reorder a flow across paths; a receiver that places out of order delivers it all, one that
//! does not answers with PSN-sequence NAKs (go-back-N). Late arrivals are rare, so this costs
//! nothing on the way of a frame in order.

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

/// A flow's late arrivals by displacement (displacement, arrivals), in the order first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reorder {
    pub late: u64,
    pub density: SmallVec<[(u32, u64); 4]>,
}

impl Reorder {
    /// The displacements, ascending, with their arrivals.
    pub fn sorted(&self) -> BTreeMap<u32, u64> {
        self.density.iter().copied().collect()
    }
}

/// Every request flow's reordering, and the reorder density over all of them.
#[derive(Debug, Clone, Default)]
pub struct Reordering {
    pub flows: FxHashMap<FlowKey, Reorder>,
    /// Late arrivals by displacement, over every flow (RFC 5236's reorder density, in counts).
    pub density: BTreeMap<u32, u64>,
}

impl Reordering {
    /// A request of flow `key` arrived late, `displacement` later PSNs before it.
    #[cold]
    pub fn late(&mut self, key: FlowKey, displacement: u32) {
        let f = self.flows.entry(key).or_default();
        f.late += 1;
        match f.density.iter_mut().find(|(d, _)| *d == displacement) {
            Some((_, n)) => *n += 1,
            None => f.density.push((displacement, 1)),
        }
        *self.density.entry(displacement).or_default() += 1;
    }

    /// Flows folded away live: their own counts go (the density keeps their arrivals).
    pub fn forget(&mut self, gone: &FxHashSet<FlowKey>) {
        self.flows.retain(|k, _| !gone.contains(k));
    }
}

/// The p50 and the largest displacement of a density (displacement → arrivals), if any.
pub fn p50_max(density: &BTreeMap<u32, u64>) -> Option<(u32, u32)> {
    let total: u64 = density.values().sum();
    let max = *density.keys().next_back()?;
    let mut seen = 0;
    let p50 = density.iter().find_map(|(d, n)| {
        seen += n;
        (seen * 2 >= total).then_some(*d)
    })?;
    Some((p50, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(qp: u32) -> FlowKey {
        FlowKey::new([0; 16], [0; 16], qp, 49152, 4, 2)
    }

    /// Two flows: one with three arrivals 1 late and one 4 late, one with one 2 late; by hand
    /// the density over all is {1: 3, 2: 1, 4: 1}: p50 1 (3 of 5), max 4.
    #[test]
    fn density_per_flow_and_over_all() {
        let mut r = Reordering::default();
        for d in [1, 4, 1, 1] {
            r.late(key(1), d);
        }
        r.late(key(2), 2);
        assert_eq!(r.flows[&key(1)].late, 4);
        assert_eq!(r.flows[&key(1)].sorted(), BTreeMap::from([(1, 3), (4, 1)]));
        assert_eq!(r.density, BTreeMap::from([(1, 3), (2, 1), (4, 1)]));
        assert_eq!(p50_max(&r.density), Some((1, 4)));
        assert_eq!(p50_max(&r.flows[&key(2)].sorted()), Some((2, 2)));
        assert_eq!(p50_max(&BTreeMap::new()), None);
        // Half and half: the lower median.
        assert_eq!(p50_max(&BTreeMap::from([(1, 1), (3, 1)])), Some((1, 3)));
        r.forget(&[key(1)].into_iter().collect());
        assert_eq!((r.flows.len(), r.density.values().sum::<u64>()), (1, 5));
    }
}
