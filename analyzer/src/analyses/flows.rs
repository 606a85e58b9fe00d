//! What the per-flow analyses keep of each flow, in one table: a timeline record costs one
//! hash lookup for all of them instead of one each. With thousands of flows taking turns every
//! lookup is a cache miss, and those misses were most of the live agent's CPU.
//!
//! Each analysis keeps at most `cap` flows of its own (`--max-flows`), as before: a flow new to
//! an analysis at its cap gets nothing there, and its frame is counted in that analysis'
//! `state_full`. A flow is in the table when at least one analysis keeps it.

use analyzer_common::flow::FlowKey;
use rustc_hash::{FxHashMap, FxHashSet};

use super::ecn::FlowMarking;
use super::rtt::RequestFlow;

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

/// Which analyses want a record's flow kept ([`Flows::slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wants {
    pub marking: bool,
    pub request: bool,
}

#[derive(Debug, Default)]
pub struct Flows {
    map: FxHashMap<FlowKey, PerFlow>,
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
    /// lookup); None when every analysis that wants it is at its cap.
    pub fn slot(&mut self, key: FlowKey, wants: Wants) -> Option<Slot<'_>> {
        let room = (wants.marking && self.markings < self.cap) || (wants.request && self.requests < self.cap);
        let (flow, created) = if room {
            match self.map.entry(key) {
                std::collections::hash_map::Entry::Occupied(o) => (o.into_mut(), false),
                std::collections::hash_map::Entry::Vacant(v) => (v.insert(PerFlow::default()), true),
            }
        } else {
            (self.map.get_mut(&key)?, false)
        };
        Some(Slot { created, flow, markings: &mut self.markings, requests: &mut self.requests, cap: self.cap })
    }

    pub fn get(&self, key: &FlowKey) -> Option<&PerFlow> {
        self.map.get(key)
    }

    pub(crate) fn get_mut(&mut self, key: &FlowKey) -> Option<&mut PerFlow> {
        self.map.get_mut(key)
    }

    pub(crate) fn request_mut(&mut self, key: &FlowKey) -> Option<&mut RequestFlow> {
        self.map.get_mut(key)?.request.as_mut()
    }

    /// Every flow with a marking.
    pub fn markings(&self) -> impl Iterator<Item = (&FlowKey, &FlowMarking)> {
        self.map.iter().filter_map(|(k, f)| Some((k, f.marking.as_ref()?)))
    }

    pub(crate) fn requests(&self) -> impl Iterator<Item = (&FlowKey, &RequestFlow)> {
        self.map.iter().filter_map(|(k, f)| Some((k, f.request.as_ref()?)))
    }

    /// Drops the flows in `gone` (folded away live).
    pub fn forget(&mut self, gone: &FxHashSet<FlowKey>) {
        self.map.retain(|k, _| !gone.contains(k));
        self.markings = self.map.values().filter(|f| f.marking.is_some()).count();
        self.requests = self.map.values().filter(|f| f.request.is_some()).count();
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
            let mut s = f.slot(key(i), marking).unwrap();
            assert!(s.marking().is_some());
        }
        // Markings are full; a third flow is still kept for its requests.
        let mut s = f.slot(key(2), both).unwrap();
        assert!(s.marking().is_none(), "third marking past the cap");
        assert!(s.request(RequestFlow::default).is_some());
        assert!(f.slot(key(3), marking).is_none(), "no analysis has room: not added");
        assert_eq!(f.markings().count(), 2);
        assert_eq!(f.requests().count(), 1);
        // A kept flow keeps being found at the cap.
        assert!(f.slot(key(0), marking).unwrap().marking().is_some());
        let gone: FxHashSet<FlowKey> = [key(0)].into_iter().collect();
        f.forget(&gone);
        assert!(f.slot(key(3), marking).unwrap().marking().is_some(), "room again after a fold");
    }
}
