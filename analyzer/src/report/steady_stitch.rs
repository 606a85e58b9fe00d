//! `merge` of the messages' steadiness (goodput per rate window, overall, per request flow and
//! per host pair) of a capture cut in time, as one run over the whole gives it. Each report
//! made with `--edges` carries, per key, its first window and bytes (left out there: partial),
//! its full windows' rate buckets and the window still filling at its end (`messages.edge`).
//!
//! Walking the reports in time order, a window that spans a cut is one window of both parts'
//! bytes; a report's first window counts as a full one unless it is the whole's first; the
//! window still filling at the end of the last report is left out, as one run leaves it.
//!
//! A host pair's windows get a request flow's payload from the flow's second frame on (a flow
//! of one frame costs no pair): a flow seen before a cut has its first frame after the cut in
//! its pair's windows in one run, not in the later report's. The edge gives each flow's first
//! frame there; the stitch adds it to the pair's windows when it falls before or in the pair's
//! first window there, and counts it (`doubts`) when it falls later (its window's bytes are in
//! a rate bucket already).

use std::collections::{BTreeMap, BTreeSet};

use super::gap_replay::Payload;
use crate::analyses::messages::steady::{EARLY, Rates, steadiness};
use crate::analyses::stats::fine_bucket;
use crate::model::*;

/// Requests one run counts as new payload otherwise than their report (PSNs sent again after a
/// cut, late arrivals: `gap_replay`), by report (its start) and flow; and every report and flow
/// the replay told (the flow's payload there is one run's but for those).
#[derive(Debug, Default)]
pub struct Fixes {
    pub payload: BTreeMap<(u64, Order), Vec<Payload>>,
    pub told: BTreeSet<(u64, Order)>,
    /// Each flow's first data frame's time in each report, where its head lists it.
    pub first_data: BTreeMap<(u64, Order), u64>,
}

/// A key's windows in one report (the edge's `SteadyEnds`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ends {
    first: (u64, u64),
    counts: Vec<(u16, u64)>,
    open: Option<(u64, u64)>,
    /// The first full windows with their bytes (all of them when fewer than [`EARLY`]).
    early: Vec<(u64, u64)>,
}

impl Ends {
    fn of(e: &SteadyEnds) -> Ends {
        Ends {
            first: (e.first[0], e.first[1]),
            counts: e.counts.iter().map(|[b, n]| (*b as u16, *n)).collect(),
            open: e.open.map(|[w, b]| (w, b)),
            early: e.early.iter().map(|[w, b]| (*w, *b)).collect(),
        }
    }

    /// `delta` bytes more (or fewer) in full window `w` inside the report, as one run counts
    /// them: the window's rate bucket moves (a window left with none is no window; one the report
    /// had no payload in becomes one). False where `early` does not tell the window's bytes.
    fn fix_full(&mut self, w: u64, delta: i64, window_ns: u64) -> bool {
        let inside = self.open.is_some_and(|(o, _)| w > self.first.0 && w < o);
        let known = self.early.len() < EARLY || self.early.last().is_some_and(|l| w <= l.0);
        if !inside || !known {
            return false;
        }
        let at = self.early.partition_point(|e| e.0 < w);
        let old = self.early.get(at).filter(|e| e.0 == w).map_or(0, |e| e.1);
        let Some(new) = old.checked_add_signed(delta) else { return false };
        let bucket = |b: u64| fine_bucket(crate::analyses::messages::steady::rate(b, window_ns));
        if old > 0 {
            let Some(i) = self.counts.iter().position(|(b, n)| *b == bucket(old) && *n > 0) else { return false };
            self.counts[i].1 -= 1;
        }
        if new > 0 {
            self.counts.push((bucket(new), 1));
        }
        match (old, new) {
            (0, 0) => {}
            (0, _) => self.early.insert(at, (w, new)),
            (_, 0) => _ = self.early.remove(at),
            _ => self.early[at].1 = new,
        }
        true
    }

    /// `delta` bytes more (or fewer) in window `w`, as one run counts them: in the first window
    /// or the one still filling (a window of none left out: fewer windows); false where the
    /// window is a full one inside the report (its bytes are in a rate bucket) or not there.
    fn fix(e: &mut Option<Ends>, w: u64, delta: i64, window_ns: u64) -> bool {
        let Some(x) = e.as_mut() else { return false };
        match x.open {
            _ if x.first.0 == w => match x.first.1.checked_add_signed(delta) {
                Some(b) => x.first.1 = b,
                None => return false,
            },
            // The window before it fills at the end when it empties: told only if none is.
            Some((o, b)) if o == w => match b.checked_add_signed(delta) {
                Some(0) if x.counts.is_empty() => x.open = None,
                Some(b) if b > 0 => x.open = Some((o, b)),
                _ => return false,
            },
            _ => return x.fix_full(w, delta, window_ns),
        }
        if x.first.1 == 0 && x.open.is_none() {
            *e = None;
        }
        true
    }

    /// The same with `frames` (window, payload) added that one run counts and this report did
    /// not: before or in its first window (else none: a window inside it cannot be told).
    fn with(e: Option<Ends>, mut frames: Vec<(u64, u64)>, window_ns: u64) -> Option<Option<Ends>> {
        if frames.is_empty() {
            return Some(e);
        }
        frames.sort_unstable();
        let mut windows: Vec<(u64, u64)> = Vec::new();
        for (w, b) in frames {
            match windows.last_mut() {
                Some(l) if l.0 == w => l.1 += b,
                _ => windows.push((w, b)),
            }
        }
        let mut counts: Vec<(u16, u64)> = Vec::new();
        let open = match e {
            None if windows.len() > 1 => windows.pop(),
            None => None,
            Some(mut e) => {
                // Frames after the first window: in the one filling at the end, or a full one.
                while let Some(&(w, b)) = windows.last().filter(|l| l.0 > e.first.0) {
                    match e.open {
                        Some((o, ob)) if o == w => e.open = Some((o, ob + b)),
                        _ => {
                            if !e.fix_full(w, b as i64, window_ns) {
                                return None;
                            }
                        }
                    }
                    windows.pop();
                }
                let mut first = e.first;
                if windows.last().is_some_and(|l| l.0 == first.0) {
                    first.1 += windows.pop().map_or(0, |l| l.1);
                }
                if windows.is_empty() {
                    return Some(Some(Ends { first, ..e }));
                }
                counts = e.counts;
                match e.open {
                    // Its first window is now a full one after the frames'.
                    Some(open) => {
                        counts.push((fine_bucket(crate::analyses::messages::steady::rate(first.1, window_ns)), 1));
                        Some(open)
                    }
                    None => Some(first),
                }
            }
        };
        let first = windows.remove(0);
        for (_, b) in &windows {
            counts.push((fine_bucket(crate::analyses::messages::steady::rate(*b, window_ns)), 1));
        }
        Some(Some(Ends { first, counts, open, early: Vec::new() }))
    }
}

/// One key's windows over the reports in time order: the rates one run has.
fn join(list: &[Ends], window_ns: u64) -> Rates {
    let mut counts: Vec<(u16, u64)> = Vec::new();
    let full = |bytes: u64, counts: &mut Vec<(u16, u64)>| {
        counts.push((fine_bucket(crate::analyses::messages::steady::rate(bytes, window_ns)), 1));
    };
    // The window filling at the end of the reports so far, and whether it is the whole's first.
    let mut filling: Option<(u64, u64, bool)> = None;
    for e in list {
        let (w1, b1) = e.first;
        let single = e.open.is_none();
        if b1 == 0 && single {
            continue;
        }
        if b1 == 0 {
            // One run has no payload in the report's first window (all sent again): the
            // window filling before it is a full one, its own full windows and the one filling
            // at its end follow.
            if let Some((_, b, false)) = filling {
                full(b, &mut counts);
            }
            counts.extend(e.counts.iter().copied());
            filling = e.open.map(|(w, b)| (w, b, filling.is_none()));
            continue;
        }
        match filling {
            Some((w, b, first)) if w == w1 => {
                if single {
                    filling = Some((w, b + b1, first));
                    continue;
                }
                if !first {
                    full(b + b1, &mut counts);
                }
            }
            Some((_, b, first)) => {
                if !first {
                    full(b, &mut counts);
                }
                if single {
                    filling = Some((w1, b1, false));
                    continue;
                }
                full(b1, &mut counts);
            }
            None if single => {
                filling = Some((w1, b1, true));
                continue;
            }
            None => {}
        }
        counts.extend(e.counts.iter().copied());
        filling = e.open.map(|(w, b)| (w, b, false));
    }
    Rates::from_counts(counts)
}

fn steady_json(r: &Rates) -> Option<Steady> {
    steadiness(r).map(|s| Steady {
        windows: s.windows,
        p5_bps: s.p5,
        p50_bps: s.p50,
        p95_bps: s.p95,
        fluctuation: s.fluctuation,
    })
}

/// One run's steadiness from reports that follow each other in time (`parts`: each report's
/// span and section), each with its edge and the same window; none otherwise. `fixes`: the
/// requests one run counts as new payload otherwise than their report. The count is of flows'
/// first frames one run gives their pairs, and of such requests, that the stitch could not
/// place. `first_done`: each flow's first completion in one run (it places the flow's host pair,
/// whose windows get the flow's payload from then on).
pub fn stitch(
    parts: &[(u64, u64, &Messages)],
    fixes: &Fixes,
    first_done: &BTreeMap<Order, u64>,
) -> Option<(Steadiness, u64)> {
    let mut sorted: Vec<&(u64, u64, &Messages)> = parts.iter().collect();
    sorted.sort_by_key(|(s, e, _)| (*s, *e));
    if sorted.len() < 2 || sorted.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    let window_ns = sorted[0].2.steadiness.window_ns;
    let edges: Vec<&MessagesEdge> = sorted
        .iter()
        .map(|(_, _, m)| m.edge.as_ref().filter(|_| m.steadiness.window_ns == window_ns))
        .collect::<Option<_>>()?;
    let mut k = Keys { window_ns, unplaced: 0, ..Keys::default() };
    for (i, e) in edges.iter().enumerate() {
        k.report(i, e, sorted[i].0, (fixes, first_done), edges.len())?;
    }
    let Keys { flows, pairs, mut owed, overall, mut unplaced, .. } = k;
    let mut pair_list = Vec::new();
    for (key, (src, dst, mut list)) in pairs {
        let mut owed_here = owed.remove(&key).unwrap_or_default();
        for (i, e) in list.iter_mut().enumerate() {
            let frames = owed_here.remove(&i).unwrap_or_default();
            let n = frames.len() as u64;
            match Ends::with(e.take(), frames, window_ns) {
                Some(with) => *e = with,
                None => unplaced += n,
            }
        }
        let list: Vec<Ends> = list.into_iter().flatten().collect();
        if let Some(steady) = steady_json(&join(&list, window_ns)) {
            pair_list.push(SteadyPair { src, dst, steady });
        }
    }
    // Every pair one run gives first frames is listed above: nothing is left.
    unplaced += owed.values().flat_map(|m| m.values()).map(|v| v.len() as u64).sum::<u64>();
    let overall: Vec<Ends> = overall.into_iter().flatten().collect();
    let steadiness = Steadiness {
        window_ns,
        overall: steady_json(&join(&overall, window_ns)),
        flows: flows
            .into_values()
            .filter_map(|(flow, list)| {
                let list: Vec<Ends> = list.into_iter().flatten().collect();
                Some(SteadyFlow { flow, steady: steady_json(&join(&list, window_ns))? })
            })
            .collect(),
        pairs: pair_list,
    };
    Some((steadiness, unplaced))
}

/// The payload fixes and each flow's first completion in one run ([`stitch`]).
type Fixed<'a> = (&'a Fixes, &'a BTreeMap<Order, u64>);

/// Every key's windows report by report, as one run counts them.
#[derive(Default)]
struct Keys {
    window_ns: u64,
    flows: BTreeMap<Order, (FlowRef, Vec<Option<Ends>>)>,
    pairs: BTreeMap<(Addr, Addr), PairSights>,
    /// Per pair and report: the first frames one run gives the pair there.
    owed: BTreeMap<(Addr, Addr), Owed>,
    overall: Vec<Option<Ends>>,
    /// Flows one run met before (a frame, or its pair placed).
    seen: BTreeSet<Order>,
    /// Flows a report before listed (a message of theirs may complete after the cut).
    before: BTreeSet<Order>,
    unplaced: u64,
}

impl Keys {
    /// Report `i` (of `n`, starting at `start`) and its edge `e`, with the payload one run
    /// counts otherwise there.
    fn report(&mut self, i: usize, e: &MessagesEdge, start: u64, fixed: Fixed, n: usize) -> Option<()> {
        let (fixes, first_done) = fixed;
        for p in &e.pairs {
            let key = (addr_of(&p.src)?, addr_of(&p.dst)?);
            let entry = self.pairs.entry(key).or_insert_with(|| (p.src.clone(), p.dst.clone(), vec![None; n]));
            entry.2[i] = p.ends.as_ref().map(Ends::of);
        }
        let mut overall = e.overall.as_ref().map(Ends::of);
        for f in &e.flows {
            let key = flow_order(&flow_ref_key(&f.flow)?);
            let pair = (addr_of(&f.flow.src)?, addr_of(&f.flow.dst)?);
            let mut ends = f.ends.as_ref().map(Ends::of);
            let fix = fixes.payload.get(&(start, key)).map(Vec::as_slice).unwrap_or_default();
            // One run met the flow before (a frame, or its pair placed), or placed its pair at a
            // completion after the cut the report did not see (a message held at the cut) before
            // its first frame here: that frame went to its pair's windows, with the payload one
            // run counts for it. In the frame's window the order is not told.
            let done = first_done.get(&key).filter(|t| **t >= start);
            let (at, w0) = (fixes.first_data.get(&(start, key)), f.first_frame.map(|[w, _]| w * self.window_ns));
            // (By the window alone only for a flow a report before listed: one whose first frame
            // is here completes after it.)
            let before = self.before.contains(&key);
            let placed_here = match (done, at, w0) {
                (Some(t), Some(at), _) if t != at => t < at,
                (Some(t), None, Some(w0)) if before && *t < w0 => true,
                (Some(t), _, Some(w0)) if before && *t < w0.saturating_add(self.window_ns) && !f.first_paired => {
                    self.unplaced += 1;
                    false
                }
                _ => false,
            };
            let owes = (self.seen.contains(&key) || placed_here) && !f.first_paired;
            if let (true, Some([w, payload])) = (owes, f.first_frame) {
                let delta: i64 = fix.iter().filter(|x| x.first).map(|x| x.delta).sum();
                match payload.checked_add_signed(delta) {
                    Some(0) => {}
                    Some(b) => {
                        // A pair no report placed (each saw one frame of its flows) has windows in one run.
                        let names = || (f.flow.src.clone(), f.flow.dst.clone(), vec![None; n]);
                        self.pairs.entry(pair).or_insert_with(names);
                        self.owed.entry(pair).or_default().entry(i).or_default().push((w, b))
                    }
                    None => self.unplaced += 1,
                }
            }
            for x in fix {
                let w = x.ts / self.window_ns.max(1);
                let pair_ends = self.pairs.get_mut(&pair).map(|p| &mut p.2[i]);
                let in_pair = !(owes && x.first);
                let n = self.window_ns;
                let placed = Ends::fix(&mut ends, w, x.delta, n)
                    && Ends::fix(&mut overall, w, x.delta, n)
                    && (!in_pair || pair_ends.is_some_and(|p| Ends::fix(p, w, x.delta, n)));
                self.unplaced += u64::from(!placed);
            }
            self.flows.entry(key).or_insert_with(|| (f.flow.clone(), Vec::new())).1.push(ends);
            if f.first_frame.is_some() || f.placed {
                self.seen.insert(key);
            }
            self.before.insert(key);
        }
        // Payload to fix for flows this report did not list: not placed.
        let here: BTreeSet<Order> = e.flows.iter().filter_map(|f| Some(flow_order(&flow_ref_key(&f.flow)?))).collect();
        let all =
            (start, (0, [0; 16], [0; 16], 0, 0))..=(start, (u8::MAX, [u8::MAX; 16], [u8::MAX; 16], u16::MAX, u32::MAX));
        let missing = fixes.payload.range(all).filter(|((_, k), _)| !here.contains(k));
        self.unplaced += missing.map(|(_, v)| v.len() as u64).sum::<u64>();
        self.overall.push(overall);
        Some(())
    }
}

type Addr = ([u8; 16], u8);

/// A host pair's source and destination, and its windows in each report (none: not there).
type PairSights = (String, String, Vec<Option<Ends>>);

/// Per report, the first frames (window, payload) one run gives a host pair there.
type Owed = BTreeMap<usize, Vec<(u64, u64)>>;

/// A flow in the analysis' order ([`flow_order`]).
pub type Order = crate::model::addr::FlowOrder;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::messages::steady::Windows;

    const W: u64 = 1000;

    fn ends(w: &Windows) -> Option<Ends> {
        w.ends().map(|e| Ends { first: e.first, counts: e.counts, open: e.open, early: e.early })
    }

    /// One key's frames as (window, bytes): several per window, some windows without any.
    fn frames() -> Vec<(u64, u64)> {
        (0..40u64).map(|i| (i / 3 + (i / 10) * 2, 100 + (i % 7) * 50)).collect()
    }

    /// The windows of `f`, as the analysis keeps them with `--edges`.
    fn run(f: &[(u64, u64)]) -> Windows {
        let mut w = Windows::with_early();
        f.iter().for_each(|(i, b)| w.add(*i, *b, W));
        w
    }

    /// One key's (window, bytes) frames, and the same cut at every place: the parts' windows
    /// joined give the whole's rates, a window the cut splits counted once with both parts'
    /// bytes.
    #[test]
    fn windows_cut_anywhere_join_into_the_whole() {
        let frames = frames();
        let whole = run(&frames).rates.counts();
        assert!(whole.iter().map(|(_, n)| n).sum::<u64>() > 10);
        for a in 1..frames.len() {
            for b in a..frames.len() {
                let parts: Vec<Ends> =
                    [&frames[..a], &frames[a..b], &frames[b..]].iter().filter_map(|f| ends(&run(f))).collect();
                assert_eq!(join(&parts, W).counts(), whole, "cut at {a} and {b}");
            }
        }
    }

    /// Frames after a cut sent again (PSNs the part before sent): one run counts none of their
    /// payload, the part after counted it. Taken out of the part's windows — its first, the one
    /// filling at its end, or a full one its early windows list — the parts join into one run's
    /// rates. Without the early windows one inside the part is not told.
    #[test]
    fn payload_sent_again_after_a_cut_is_taken_out_as_one_run() {
        let frames = frames();
        let (mut told, mut untold) = (0, 0);
        for a in 1..frames.len() - 1 {
            for k in 1..=4.min(frames.len() - a) {
                let kept: Vec<(u64, u64)> = frames[..a].iter().chain(&frames[a + k..]).copied().collect();
                let whole = run(&kept).rates.counts();
                let mut after = ends(&run(&frames[a..]));
                let mut bare = after.clone().map(|e| Ends { early: Vec::new(), ..e });
                untold += u64::from(!frames[a..a + k].iter().all(|(w, b)| Ends::fix(&mut bare, *w, -(*b as i64), W)));
                assert!(frames[a..a + k].iter().all(|(w, b)| Ends::fix(&mut after, *w, -(*b as i64), W)), "cut at {a}");
                let parts: Vec<Ends> = [ends(&run(&frames[..a])), after].into_iter().flatten().collect();
                assert_eq!(join(&parts, W).counts(), whole, "cut at {a}, {k} frames sent again");
                told += 1;
            }
        }
        assert!(told > 100 && untold > 20, "told {told}, untold without the early windows {untold}");
    }

    #[test]
    fn a_fix_lands_in_the_first_window_or_the_one_filling() {
        let full = vec![(fine_bucket(steady_rate(700)), 1)];
        let e = || Some(Ends { first: (10, 500), counts: full.clone(), open: Some((12, 300)), early: Vec::new() });
        let mut x = e();
        assert!(Ends::fix(&mut x, 10, -200, W) && Ends::fix(&mut x, 12, 100, W));
        assert_eq!(x.as_ref().map(|x| (x.first, x.open)), Some(((10, 300), Some((12, 400)))));
        for (w, d) in [(11, -100), (10, -600), (12, -300), (13, 100)] {
            assert!(!Ends::fix(&mut e(), w, d, W), "window {w}, {d} bytes");
        }
        // A part of one window whose payload was all sent again: no windows.
        let mut one = Some(Ends { first: (4, 300), counts: Vec::new(), open: None, early: Vec::new() });
        assert!(Ends::fix(&mut one, 4, -300, W) && one.is_none());
        // The full window 11 of 700 bytes, listed: its bucket moves, or it goes with its payload.
        let listed = || e().map(|x| Ends { early: vec![(11, 700)], ..x });
        let mut x = listed();
        assert!(Ends::fix(&mut x, 11, -100, W));
        assert_eq!(x.as_ref().map(|x| (x.counts.clone(), x.early.clone())).unwrap(), {
            (vec![(fine_bucket(steady_rate(700)), 0), (fine_bucket(steady_rate(600)), 1)], vec![(11, 600)])
        });
        let mut gone = listed();
        assert!(Ends::fix(&mut gone, 11, -700, W));
        assert_eq!(gone.map(|x| (Rates::from_counts(x.counts).len(), x.early)), Some((0, Vec::new())));
        assert!(!Ends::fix(&mut listed(), 11, -800, W), "more than the window had");
    }

    /// A pair's windows without a flow's first frame after a cut get it: before the part's
    /// first window (a window of its own), in it, or in a later one the part's edge tells.
    #[test]
    fn first_frames_one_run_counts_are_added_where_the_edge_tells_their_window() {
        let e = Ends {
            first: (10, 500),
            counts: vec![(fine_bucket(steady_rate(700)), 1)],
            open: Some((12, 300)),
            early: vec![(11, 700)],
        };
        let before = Ends::with(Some(e.clone()), vec![(8, 200)], W).unwrap().unwrap();
        assert_eq!(before.first, (8, 200));
        assert_eq!(before.open, Some((12, 300)));
        let mut counts = before.counts.clone();
        counts.sort_unstable();
        let mut expect = vec![(fine_bucket(steady_rate(700)), 1), (fine_bucket(steady_rate(500)), 1)];
        expect.sort_unstable();
        assert_eq!(counts, expect, "the first window is a full one now");
        let within = Ends::with(Some(e.clone()), vec![(10, 200)], W).unwrap().unwrap();
        assert_eq!(within.first, (10, 700));
        // Inside the part: in its listed full window (its bucket moves) or the one filling.
        let inside = Ends::with(Some(e.clone()), vec![(11, 200), (12, 50)], W).unwrap().unwrap();
        assert_eq!((inside.first, inside.open), ((10, 500), Some((12, 350))));
        assert_eq!(Rates::from_counts(inside.counts).counts(), vec![(fine_bucket(steady_rate(900)), 1)]);
        // Every other window from 11 listed: 12, between two, had no payload there, and has now.
        let early: Vec<(u64, u64)> = (0..EARLY as u64).map(|i| (11 + 2 * i, 700)).collect();
        let sparse =
            Ends { open: Some((60, 300)), counts: vec![(fine_bucket(steady_rate(700)), EARLY as u64)], early, ..e };
        let new = Ends::with(Some(sparse.clone()), vec![(12, 200)], W).unwrap().unwrap();
        assert_eq!(Rates::from_counts(new.counts).len(), EARLY as u64 + 1);
        let past = sparse;
        assert_eq!(Ends::with(Some(past), vec![(50, 200)], W), None, "past the listed windows: not told");
        let alone = Ends::with(None, vec![(3, 100), (5, 100), (3, 50)], W).unwrap().unwrap();
        assert_eq!((alone.first, alone.open), ((3, 150), Some((5, 100))));
    }

    fn steady_rate(bytes: u64) -> u64 {
        crate::analyses::messages::steady::rate(bytes, W)
    }
}
