//! `merge` in time: each destination's incast episodes across the cuts between captures that
//! follow each other (`incast.edge`, offline with `--edges`). The part after a cut counted
//! the destination's senders afresh; one run met its first packets with the window and the
//! open episode the part before left. Both are replayed here with the analysis itself
//! (`analyses::incast`): the head of the part from the state the part before left (one run),
//! and from nothing (what the part's own report counted). One window after the part's first
//! packet every packet from before the cut has left the window, so the two counts are equal;
//! one window more and an episode falling below the minimum has closed or come back. By the
//! head's end (two windows) the two runs meet: both without an episode, and the part's later
//! episodes are one run's; or both with one, whose rest is the same in both, so the part's
//! episode continues one run's (its counts are one run's at the head's end plus what the part
//! counted after it). A part shorter than its head was replayed whole: one run's state at its
//! end comes from the replay. An episode counts the PFC/PAUSE frames in its span: each part
//! gives those of its head and those of its open episode from its start to its end.

use std::collections::BTreeMap;

use crate::analyses::incast::edge::{DestState, Event, OpenState, TallyState};
use crate::analyses::incast::{Addr, Incast as Analysis};
use crate::model::*;
use crate::report::assemble::incast::{episode, peak};

/// Why episodes at a cut cannot be one run's.
type Why = &'static str;

/// The incast sections of reports in series (`sections` in time order, each with its edge)
/// as one run gives them, with `link_speed` bit/s.
pub fn stitch(sections: &[&Incast], link_speed: u64) -> Result<Incast, Why> {
    let [first, ..] = sections else { return Err("no reports") };
    let (w, min) = (first.window_ns, first.min_senders);
    if sections.iter().any(|s| (s.window_ns, s.min_senders) != (w, min)) {
        return Err("the reports counted senders with other --incast-window or --incast-min-senders");
    }
    let mut edges = Vec::with_capacity(sections.len());
    for s in sections {
        let e = s.edge.as_ref().ok_or("a report has no incast edge (made without --edges)")?;
        if !e.complete {
            return Err("a report's first packets were more than its edge holds");
        }
        if e.unkept > 0 {
            return Err("a report did not keep every destination, episode or sender (past its bounds)");
        }
        edges.push(e);
    }
    // Each destination's sight in each report, the reports in time order.
    type Sight<'a> = (Vec<&'a Episode>, Option<&'a IncastEdgeDest>);
    let mut by_dst: BTreeMap<Addr, Vec<Sight>> = BTreeMap::new();
    let blank = vec![(Vec::new(), None); sections.len()];
    for (i, (s, edge)) in sections.iter().zip(&edges).enumerate() {
        for e in &s.episodes {
            let dst = addr_of(&e.dst).ok_or("an unparsable address")?;
            by_dst.entry(dst).or_insert_with(|| blank.clone())[i].0.push(e);
        }
        for d in &edge.dests {
            let dst = addr_of(&d.dst).ok_or("an unparsable address")?;
            by_dst.entry(dst).or_insert_with(|| blank.clone())[i].1 = Some(d);
        }
    }
    let mut episodes = Vec::new();
    for (dst, sights) in by_dst {
        let parts: Vec<Part> =
            sights.into_iter().zip(&edges).map(|((episodes, dest), edge)| Part { edge, episodes, dest }).collect();
        episodes.extend(Dest { dst, w, min, speed: link_speed, out: Vec::new(), tie: (0, 0) }.run(&parts)?);
    }
    Ok(Incast::new(w, min, episodes))
}

/// One report's sight of a destination: its edge, its episodes there (in order) and the
/// destination's head and state.
struct Part<'a> {
    edge: &'a IncastEdge,
    episodes: Vec<&'a Episode>,
    dest: Option<&'a IncastEdgeDest>,
}

impl<'a> Part<'a> {
    fn open(&self) -> Option<&'a IncastOpen> {
        self.dest.and_then(|d| d.open.as_ref())
    }

    /// The PFC/PAUSE frames of the head (of the part, when it ends before its head's end) in
    /// `[from, to)`.
    fn pauses(&self, from: u64, to: u64) -> u64 {
        self.edge.pauses.iter().filter(|&&t| t >= from && t < to).count() as u64
    }
}

/// One run's state at the end of the part before, and the PFC/PAUSE frames its open episode
/// counted in the parts before: up to the moment it fell below the minimum (all, when it had
/// not), and the times of those after it (in its span only if it comes back).
struct Carry {
    state: DestState,
    pfc: u64,
    after: Vec<u64>,
}

impl Carry {
    /// The frames before this part of the carried episode when it ends at `end`.
    fn frames(&self, end: u64) -> u64 {
        self.pfc + self.after.iter().filter(|&&t| t <= end).count() as u64
    }
}

/// A destination's episodes over the parts.
struct Dest {
    dst: Addr,
    w: u64,
    min: u32,
    speed: u64,
    out: Vec<Episode>,
    /// The parts' latest time so far and their PFC/PAUSE frames at it: a part beginning at
    /// that time (a cut between frames of one timestamp) counts them in an episode it begins.
    tie: (u64, u64),
}

impl Dest {
    fn run(mut self, parts: &[Part]) -> Result<Vec<Episode>, Why> {
        let mut carry: Option<Carry> = None;
        for (i, p) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            carry = match carry.take() {
                None => self.own(p, &p.episodes, last)?,
                Some(c) => self.resumed(p, c, last)?,
            };
            let (t, n) = self.tie;
            let end = p.edge.end_ns;
            self.tie = (end, p.edge.pauses_at_end + if end == t { n } else { 0 });
        }
        Ok(self.out)
    }

    /// The frames of the parts before at the start of an episode beginning at `start`.
    fn tied(&self, start: u64) -> u64 {
        if start == self.tie.0 { self.tie.1 } else { 0 }
    }

    /// The part's episodes as its report gives them (one run's: nothing carried into it),
    /// but for the one open at its end when a part follows; one run's state at its end.
    fn own(&mut self, p: &Part, episodes: &[&Episode], last: bool) -> Result<Option<Carry>, Why> {
        let open = p.open();
        for e in episodes {
            if last || open.is_none_or(|o| o.start_ns != e.start_ns) {
                let pfc_frames = e.pfc_frames + self.tied(e.start_ns);
                self.out.push(Episode { pfc_frames, ..(*e).clone() });
            }
        }
        let Some(d) = p.dest else { return Ok(None) };
        let state = state_of(d)?;
        let (pfc, after) =
            open.map_or((0, Vec::new()), |o| (o.pfc_frames + self.tied(o.start_ns), o.pfc_after.clone()));
        Ok((!state.is_empty()).then_some(Carry { state, pfc, after }))
    }

    /// The part after a cut: its head replayed from one run's state and from nothing.
    fn resumed(&mut self, p: &Part, c: Carry, last: bool) -> Result<Option<Carry>, Why> {
        let (mut one, mut alone) =
            (Analysis::new(self.w, self.min, usize::MAX), Analysis::new(self.w, self.min, usize::MAX));
        one.resume(self.dst, &c.state);
        for e in p.dest.iter().flat_map(|d| &d.head) {
            let r = event_of(e)?.record(self.dst);
            one.observe(&r);
            alone.observe(&r);
        }
        // The head holds every packet of a part that ends before it.
        let whole = p.edge.end_ns < p.edge.until_ns;
        let at = if whole { p.edge.end_ns } else { p.edge.until_ns };
        one.advance_to(at);
        alone.advance_to(at);
        let resumed = c.state.open.as_ref().map(|o| o.start_ns);
        // The frames before this part of an episode from `start` to `end`.
        let tie = self.tie;
        let before = |start: u64, end: u64| match Some(start) == resumed {
            true => c.frames(end),
            false if start == tie.0 => tie.1,
            false => 0,
        };
        let pfc = |start: u64, end: u64| before(start, end) + p.pauses(start, end + 1);
        for e in one.closed(&self.dst) {
            self.out.push(episode(self.dst, e, (self.w, self.speed), pfc(e.start_ns, e.end_ns)));
        }
        let state_at = |a: &Analysis| a.states(at).into_iter().find(|(d, _)| *d == self.dst).map(|(_, s)| s);
        let (s1, s0) = (state_at(&one).unwrap_or_default(), state_at(&alone).unwrap_or_default());
        if whole {
            if last && let Some(o) = &s1.open {
                let e = one.episodes().into_iter().find(|(d, e)| *d == self.dst && e.start_ns == o.start_ns);
                let (_, e) = e.expect("an open episode is listed");
                self.out.push(episode(self.dst, &e, (self.w, self.speed), pfc(e.start_ns, e.end_ns)));
            }
            // Up to the moment one run's open episode fell below the minimum, and after it.
            let (mut frames, mut after) = (0, Vec::new());
            if let Some(o) = &s1.open {
                let below = o.below_since.unwrap_or(u64::MAX);
                let here = p.edge.pauses.iter().copied().filter(|&t| t >= o.start_ns && t <= p.edge.end_ns);
                let prior = c.after.iter().copied().filter(|_| Some(o.start_ns) == resumed);
                after = prior.chain(here).filter(|&t| t > below).collect();
                frames = pfc(o.start_ns, p.edge.end_ns) - after.len() as u64;
            }
            return Ok((!s1.is_empty()).then_some(Carry { state: s1, pfc: frames, after }));
        }
        // The part's own run closed these in its head: one run's are those above.
        let head = alone.closed(&self.dst);
        let k = head.len();
        if p.episodes.len() < k || p.episodes[..k].iter().zip(head).any(|(e, h)| e.start_ns != h.start_ns) {
            return Err("a report's episodes are not those its edge gives");
        }
        match (&s1.open, &s0.open) {
            (None, None) => self.own(p, &p.episodes[k..], last),
            (Some(a), Some(b)) if (a.below_since, &a.pending) == (b.below_since, &b.pending) => {
                let e0 = p.episodes.get(k).filter(|e| e.start_ns == b.start_ns);
                let e0 = e0.ok_or("a report's episodes are not those its edge gives")?;
                // Its frames before the part's own episode began (it came back: all carried, and
                // those of the parts before at its start when it began in this part).
                let before = before(a.start_ns, u64::MAX) + p.pauses(a.start_ns, b.start_ns);
                match p.open().filter(|o| !last && o.start_ns == b.start_ns) {
                    Some(o) => {
                        // Still open at the part's end (its last episode): one run's goes on.
                        let mut state = state_of(p.dest.expect("an open episode has a destination"))?;
                        let end = state.open.take().expect("the part's open episode");
                        state.open = Some(continued(a, b, &end));
                        Ok(Some(Carry { state, pfc: before + o.pfc_frames, after: o.pfc_after.clone() }))
                    }
                    None => {
                        let e = self.joined(a, b, e0, before)?;
                        self.out.push(e);
                        self.own(p, &p.episodes[k + 1..], last)
                    }
                }
            }
            _ => Err("an episode at a cut had not settled two windows after it"),
        }
    }

    /// The part's episode `e0` (`b` in its own run at the head's end) as one run's (`a` there):
    /// one run's counts at the head's end and what the part counted after it.
    fn joined(&self, a: &OpenState, b: &OpenState, e0: &Episode, pfc_before: u64) -> Result<Episode, Why> {
        let mut senders: Vec<Addr> = a.tally.senders.clone();
        for s in &e0.senders {
            senders.push(addr_of(s).ok_or("an unparsable address")?);
        }
        senders.sort_unstable();
        senders.dedup();
        let (gbps, ratio) = peak(a.peak_window_bytes, self.w, self.speed);
        let (peak_gbps, peak_link_ratio) =
            if gbps > e0.peak_gbps { (gbps, ratio) } else { (e0.peak_gbps, e0.peak_link_ratio) };
        Ok(Episode {
            dst: e0.dst.clone(),
            start_ns: a.start_ns,
            end_ns: e0.end_ns,
            peak_senders: a.peak_senders.max(e0.peak_senders),
            senders: senders.iter().map(|s| addr_string(s.1, &s.0)).collect(),
            bytes: more(a.tally.bytes, b.tally.bytes, e0.bytes),
            peak_gbps,
            peak_link_ratio,
            ce_packets: more(a.tally.ce, b.tally.ce, e0.ce_packets),
            cnp_packets: more(a.tally.cnp, b.tally.cnp, e0.cnp_packets),
            pfc_frames: pfc_before + e0.pfc_frames,
            evidence: None,
        })
    }
}

/// The episode `o` open at a part's end (`b` in its own run at the head's end) as one run's
/// (`a` there).
fn continued(a: &OpenState, b: &OpenState, o: &OpenState) -> OpenState {
    let mut senders = a.tally.senders.clone();
    senders.extend(&o.tally.senders);
    senders.sort_unstable();
    senders.dedup();
    OpenState {
        start_ns: a.start_ns,
        peak_senders: a.peak_senders.max(o.peak_senders),
        peak_window_bytes: a.peak_window_bytes.max(o.peak_window_bytes),
        tally: TallyState {
            bytes: more(a.tally.bytes, b.tally.bytes, o.tally.bytes),
            ce: more(a.tally.ce, b.tally.ce, o.tally.ce),
            cnp: more(a.tally.cnp, b.tally.cnp, o.tally.cnp),
            senders,
            capped: a.tally.capped || o.tally.capped,
        },
        below_since: o.below_since,
        pending: o.pending.clone(),
    }
}

/// A count of one run at the head's end (`one`) with what the part's own run counted after it
/// (`after` at the end, `alone` at the head's end).
fn more(one: u64, alone: u64, after: u64) -> u64 {
    one + after.saturating_sub(alone)
}

/// A head event of a report.
fn event_of(e: &IncastHeadEvent) -> Result<Event, Why> {
    let src = match &e.1 {
        Some(s) => Some(addr_of(s).ok_or("an unparsable address")?),
        None => None,
    };
    Ok(Event { ts_ns: e.0, src, len: e.2, ce: e.3 != 0 })
}

/// A destination's state at the end of a report.
fn state_of(d: &IncastEdgeDest) -> Result<DestState, Why> {
    let addr = |s: &str| addr_of(s).ok_or("an unparsable address");
    let tally = |t: &IncastTally| -> Result<TallyState, Why> {
        let senders = t.senders.iter().map(|s| addr(s)).collect::<Result<_, _>>()?;
        Ok(TallyState { bytes: t.bytes, ce: t.ce, cnp: t.cnp, senders, capped: t.capped })
    };
    let window = d.window.iter().map(|w| Ok((w.0, addr(&w.1)?, w.2))).collect::<Result<_, Why>>()?;
    let open = match &d.open {
        Some(o) => Some(OpenState {
            start_ns: o.start_ns,
            peak_senders: o.peak_senders,
            peak_window_bytes: o.peak_window_bytes,
            tally: tally(&o.tally)?,
            below_since: o.below_since,
            pending: tally(&o.pending)?,
        }),
        None => None,
    };
    Ok(DestState { window, open })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::assemble::incast::section;

    const L: u32 = 1000;
    const SPEED: u64 = 100_000_000_000;

    fn ip(n: u8) -> String {
        format!("10.0.0.{n}")
    }

    fn head(events: &[(u64, u8)]) -> Vec<IncastHeadEvent> {
        events.iter().map(|&(t, s)| IncastHeadEvent(t, Some(ip(s)), L, 0)).collect()
    }

    fn part(until: u64, end: u64, episodes: Vec<Episode>, dest: IncastEdgeDest) -> Incast {
        let edge = IncastEdge {
            until_ns: until,
            end_ns: end,
            complete: true,
            unkept: 0,
            pauses: vec![],
            pauses_at_end: 0,
            dests: vec![dest],
        };
        Incast { window_ns: 100, min_senders: 3, episodes, edge: Some(edge) }
    }

    fn ep(start: u64, end: u64, peak: u32, senders: &[u8], bytes: u64, window_bytes: u64) -> Episode {
        let (peak_gbps, peak_link_ratio) = peak_of(window_bytes);
        Episode {
            dst: ip(9),
            start_ns: start,
            end_ns: end,
            peak_senders: peak,
            senders: senders.iter().map(|s| ip(*s)).collect(),
            bytes,
            peak_gbps,
            peak_link_ratio,
            ce_packets: 0,
            cnp_packets: 0,
            pfc_frames: 0,
            evidence: None,
        }
    }

    fn peak_of(window_bytes: u64) -> (f64, f64) {
        peak(window_bytes, 100, SPEED)
    }

    /// Window 100 ns, at least 3 senders. Part A: 1 and 2 at 0 and 10, 1 again at 50 (two
    /// senders: no episode). Part B: 3 at 60, 4 at 70, 5 alone at 1000 (two: none either).
    /// One run: at 60 the window holds 1, 2 and 3: an episode from 60; 4 makes it 4 senders
    /// and 5 packets (0..70) the window's peak; 2 leaves at 110, 1 at 150 (3 and 4 left): it ends
    /// at 150. Its data: the packets at 60 and 70.
    #[test]
    fn an_episode_neither_part_saw_is_one_runs() {
        let a_window: Vec<IncastWindowed> =
            [(0, 1), (10, 2), (50, 1)].iter().map(|&(t, s)| IncastWindowed(t, ip(s), L)).collect();
        let a = part(
            200,
            50,
            vec![],
            IncastEdgeDest { dst: ip(9), head: head(&[(0, 1), (10, 2), (50, 1)]), window: a_window, open: None },
        );
        let b_dest = IncastEdgeDest {
            dst: ip(9),
            head: head(&[(60, 3), (70, 4)]),
            window: vec![IncastWindowed(1000, ip(5), L)],
            open: None,
        };
        let b = part(260, 1000, vec![], b_dest);
        let merged = stitch(&[&a, &b], SPEED).unwrap();
        assert_eq!(merged.episodes, vec![ep(60, 150, 4, &[1, 2, 3, 4], 2 * L as u64, 5 * L as u64)]);
    }

    /// Part A: 1, 2, 3 at 0, 10, 20: an episode from 20 (its data the packet at 20), open at
    /// A's end (20); A's report closes it at 100 as if nothing followed. Part B: 4, 5, 6 at 30,
    /// 40, 50; 7, 8, 9 at 200, 210, 220; 10 alone at 1000. B alone: an episode from 50 (6 in
    /// at 50 makes three), below from 130 (4 leaves), back at 220 before 230, below again at
    /// 300 (7 leaves): 50..300, data 50, then 200, 210 (waiting) and 220: 4 packets, peak 3.
    /// One run: the episode from 20 goes on: 4, 5, 6 make 6 senders and 6 packets in the
    /// window at 50; below from 130 as B; so 20..300, 7 packets (20, 30, 40, 50, 200, 210, 220).
    #[test]
    fn an_episode_across_the_cut_goes_on_as_one_runs() {
        let tally = |bytes: u64, senders: &[u8]| IncastTally {
            bytes,
            ce: 0,
            cnp: 0,
            senders: senders.iter().map(|s| ip(*s)).collect(),
            capped: false,
        };
        let open = IncastOpen {
            start_ns: 20,
            peak_senders: 3,
            peak_window_bytes: 3 * L as u64,
            tally: tally(L as u64, &[1, 2, 3]),
            below_since: None,
            pending: tally(0, &[]),
            pfc_frames: 0,
            pfc_after: vec![],
        };
        let a_dest = IncastEdgeDest {
            dst: ip(9),
            head: head(&[(0, 1), (10, 2), (20, 3)]),
            window: [(0, 1), (10, 2), (20, 3)].iter().map(|&(t, s)| IncastWindowed(t, ip(s), L)).collect(),
            open: Some(open),
        };
        let a = part(200, 20, vec![ep(20, 100, 3, &[1, 2, 3], L as u64, 3 * L as u64)], a_dest);
        let b_dest = IncastEdgeDest {
            dst: ip(9),
            head: head(&[(30, 4), (40, 5), (50, 6), (200, 7), (210, 8), (220, 9)]),
            window: vec![IncastWindowed(1000, ip(10), L)],
            open: None,
        };
        let b = part(230, 1000, vec![ep(50, 300, 3, &[4, 5, 6, 7, 8, 9], 4 * L as u64, 3 * L as u64)], b_dest);
        let merged = stitch(&[&a, &b], SPEED).unwrap();
        let one = ep(20, 300, 6, &[1, 2, 3, 4, 5, 6, 7, 8, 9], 7 * L as u64, 6 * L as u64);
        assert_eq!(merged.episodes, vec![one]);
        // Other settings, or a part without its edge: not stitched, and why.
        let mut other = b.clone();
        other.window_ns = 50;
        assert!(stitch(&[&a, &other], SPEED).unwrap_err().contains("--incast-window"));
        other = Incast { edge: None, ..b.clone() };
        assert!(stitch(&[&a, &other], SPEED).unwrap_err().contains("--edges"));
    }

    proptest::proptest! {
        /// Any run of data packets (some CE-marked, some with a PFC frame), CNPs and gaps to
        /// two destinations, under several windows and minimums, cut in two or three anywhere: the parts' sections stitched are the
        /// whole's, episode for episode (analysed with the analysis and assembled as a run
        /// assembles them).
        #[test]
        fn a_run_cut_anywhere_stitches_back(
            events in proptest::collection::vec((0u8..7, 0u8..2, 0u64..70, 0u8..8), 1..300),
            cuts in proptest::collection::vec(0usize..300, 1..3),
            w in proptest::sample::select(vec![30u64, 100, 400]),
            min in 2u32..5,
        ) {
            let mut t = 0;
            let timed: Vec<(u64, u8, u8, u8)> = events.iter().map(|&(s, d, gap, k)| { t += gap; (t, s, d, k) }).collect();
            let analyse = |evs: &[(u64, u8, u8, u8)], edges: bool| {
                let mut a = Analysis::new(w, min, usize::MAX);
                if edges {
                    a.keep_edges();
                }
                let mut pauses = Vec::new();
                for &(t, s, d, k) in evs {
                    let dst = ([10, 0, 1, d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 4);
                    let src = ([10, 0, 0, s, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 4);
                    let cnp = k == 7;
                    a.observe(&Event { ts_ns: t, src: (!cnp).then_some(src), len: 100 + k as u32, ce: k % 3 == 0 }.record(dst));
                    if k == 5 {
                        pauses.push(t);
                    }
                }
                section(&a, &pauses, evs.last().map_or(0, |e| e.0), SPEED)
            };
            let whole = analyse(&timed, false);
            let mut at: Vec<usize> = cuts.iter().map(|c| c % timed.len()).filter(|&c| c > 0).collect();
            at.sort_unstable();
            at.dedup();
            let mut bounds = vec![0];
            bounds.extend(at);
            bounds.push(timed.len());
            let parts: Vec<Incast> = bounds.windows(2).map(|w| analyse(&timed[w[0]..w[1]], true)).collect();
            let merged = stitch(&parts.iter().collect::<Vec<_>>(), SPEED).unwrap();
            proptest::prop_assert_eq!(merged.episodes, whole.episodes);
        }
    }
}
