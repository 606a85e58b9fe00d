//! `--edges`: the incast analysis' state per destination taken at a report's end and taken up
//! again by `merge` ([`super::edge`]).

use super::edge::{DestState, Edges, OpenState, TallyState};
use super::{Addr, Dest, Episode, Incast, Open, Tally};
use crate::analyses::keys::Place;

impl Incast {
    /// `--edges`: keep each destination's head.
    pub fn keep_edges(&mut self) {
        self.edges = Some(Edges::default());
    }

    /// Every destination's state at `at` (no record after it: its window is moved on to then),
    /// those with anything to carry, in address order (one with an empty window and no open
    /// episode has nothing to carry later either: it is not copied).
    pub fn states(&self, at: u64) -> Vec<(Addr, DestState)> {
        let mut out: Vec<(Addr, DestState)> = self
            .dests
            .iter()
            .filter(|(_, d)| !d.window.is_empty() || d.open.ep.is_some())
            .filter_map(|(a, d)| {
                let mut d = d.clone();
                d.advance(at, self.window_ns, self.min_senders, &mut self.listed_room.clone());
                Some((*a, d.state())).filter(|(_, s)| !s.is_empty())
            })
            .collect();
        out.sort_unstable_by_key(|(a, _)| *a);
        out
    }

    /// Takes up destination `dst` from `state` (a fresh analysis: `merge` replays a head from it).
    pub fn resume(&mut self, dst: Addr, state: &DestState) {
        let mut hint = Place::default();
        let Some(d) = self.dests.place_mut(dst, &mut hint, usize::MAX, &mut self.state_full) else { return };
        let (places, budget) = (&mut self.places, self.places_budget);
        for &(ts, src, len) in &state.window {
            let at = d.place_of(src, &mut Default::default(), places, budget);
            d.window.push_back((ts, at, len));
            d.window_bytes += len as u64;
            d.count_in(at);
        }
        if let Some(o) = &state.open {
            let mut tally = |t: &TallyState| {
                let mut out =
                    Tally { bytes: t.bytes, ce: t.ce, cnp: t.cnp, senders_capped: t.capped, ..Default::default() };
                for &a in &t.senders {
                    let p = d.place_of(a, &mut Default::default(), places, budget);
                    out.add_sender(p, a);
                }
                out
            };
            let (t, pending) = (tally(&o.tally), tally(&o.pending));
            d.tally_gen += 1;
            d.open = Open {
                ep: Some(Episode {
                    start_ns: o.start_ns,
                    end_ns: o.start_ns,
                    peak_senders: o.peak_senders,
                    peak_window_bytes: o.peak_window_bytes,
                    tally: t,
                    listed: None,
                }),
                below_since: o.below_since,
                pending,
            };
        }
    }

    /// Moves every destination's time to `t` (no record before it is still to come).
    pub fn advance_to(&mut self, t: u64) {
        let (w, min) = (self.window_ns, self.min_senders);
        for d in self.dests.values_mut() {
            d.advance(t, w, min, &mut self.listed_room);
        }
    }

    /// The episodes `dst` closed (and kept), in order.
    pub fn closed(&self, dst: &Addr) -> &[Episode] {
        self.dests.get(dst).map(|d| d.done.as_slice()).unwrap_or_default()
    }
}

impl Dest {
    fn state(&self) -> DestState {
        let tally = |t: &Tally| {
            let mut senders = t.addresses(&self.slots);
            senders.sort_unstable();
            TallyState { bytes: t.bytes, ce: t.ce, cnp: t.cnp, senders, capped: t.senders_capped }
        };
        DestState {
            window: self.window.iter().map(|&(ts, p, len)| (ts, self.slots[p as usize].addr, len)).collect(),
            open: self.open.ep.as_ref().map(|e| OpenState {
                start_ns: e.start_ns,
                peak_senders: e.peak_senders,
                peak_window_bytes: e.peak_window_bytes,
                tally: tally(&e.tally),
                below_since: self.open.below_since,
                pending: tally(&self.open.pending),
            }),
        }
    }
}
