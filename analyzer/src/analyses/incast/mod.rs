//! Incast episodes. Data packets (SEND, RDMA WRITE, READ RESPONSE, atomics) are counted per
//! destination IP; at every moment the number of concurrent senders is the number of distinct
//! source IPs with a data packet to it within the last `--incast-window`. An episode starts when
//! that number reaches `--incast-min-senders` and ends at the moment it falls below, unless it
//! comes back within one window (episodes closer than one window merge).
//!
//! The count changes only when a packet arrives or when a sender's last packet leaves the
//! window (its time + window); both are processed in time order, so episode boundaries are
//! exact to the nanosecond of the timestamps.

pub mod edge;
pub(crate) mod kept;
mod resume;

use std::collections::VecDeque;

use analyzer_common::opcode;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

pub use super::keys::Addr;
use super::keys::{Interned, Place};
use kept::Kept;

/// Senders an episode lists, at most (its counts still cover every sender's data).
pub const MAX_EPISODE_SENDERS: usize = 4096;
/// Episodes kept per destination, at most; later ones are counted, not kept.
pub const MAX_EPISODES_PER_DEST: usize = 1024;
/// Senders listed over all closed episodes, at most (about 4.5 MB): a long flood of short
/// episodes to many destinations must not grow the agent; later episodes list fewer.
pub const MAX_LISTED_SENDERS: usize = 1 << 18;
/// Sources' places kept over all destinations before a destination frees its resting ones
/// (about 3 MB): below it a source that comes back finds its place, however many rest.
pub const PLACES_BUDGET: usize = 1 << 16;

/// An episode's counts and senders (or those of its pending part). A sender is listed by its
/// place in the destination's `slots`, a bit each: no hash of its 17-byte address per sender
/// newly listed (with 10 000 senders taking turns in episodes of thousands, the set of
/// addresses this was had been a tenth of the agent's CPU). A listed sender whose place is
/// freed keeps its address in `freed`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Tally {
    bytes: u64,
    ce: u64,
    cnp: u64,
    /// Bit `p`: the sender at place `p` is listed.
    places: Vec<u64>,
    /// Listed senders whose places were freed since (rare: only past [`PLACES_BUDGET`]).
    freed: Vec<Addr>,
    /// Senders listed: the bits set and `freed`.
    listed: usize,
    /// Senders past [`MAX_EPISODE_SENDERS`] were not listed.
    senders_capped: bool,
}

impl Tally {
    fn has(&self, p: u32) -> bool {
        self.places.get(p as usize / 64).is_some_and(|w| w >> (p % 64) & 1 != 0)
    }

    fn set(&mut self, p: u32) {
        let i = p as usize / 64;
        if i >= self.places.len() {
            self.places.resize(i + 1, 0);
        }
        self.places[i] |= 1 << (p % 64);
    }

    /// Lists the sender `addr` at place `p` (up to [`MAX_EPISODE_SENDERS`], in the order they
    /// come).
    fn add_sender(&mut self, p: u32, addr: Addr) {
        if self.has(p) {
            return;
        }
        if let Some(i) = self.freed.iter().position(|a| *a == addr) {
            // Listed before its place was freed: now listed at its new one.
            self.freed.swap_remove(i);
            self.set(p);
        } else if self.listed < MAX_EPISODE_SENDERS {
            self.set(p);
            self.listed += 1;
        } else {
            self.senders_capped = true;
        }
    }

    /// The place `p` of `addr` is freed for another source: a listed sender stays listed.
    fn release(&mut self, p: u32, addr: Addr) {
        if self.has(p) {
            self.places[p as usize / 64] &= !(1 << (p % 64));
            self.freed.push(addr);
        }
    }

    /// The places listed, in order: the set bits, word by word (a tally over thousands of
    /// places has few set in a pending part, which is absorbed each time the count comes back
    /// to the minimum; testing every bit was over a third of the agent's CPU at 50 k frames/s).
    fn listed_places(&self) -> impl Iterator<Item = u32> + '_ {
        self.places.iter().enumerate().flat_map(|(i, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let b = rest.trailing_zeros();
                    rest &= rest - 1;
                    (i * 64) as u32 + b
                })
            })
        })
    }

    /// Adds the pending part `o` of the same destination (whose places are `slots`, its live
    /// sources found by `index`).
    fn absorb(&mut self, o: Tally, slots: &[Sender], index: &FxHashMap<Addr, u32>) {
        self.bytes += o.bytes;
        self.ce += o.ce;
        self.cnp += o.cnp;
        self.senders_capped |= o.senders_capped;
        for p in o.listed_places() {
            self.add_sender(p, slots[p as usize].addr);
        }
        for a in o.freed {
            let at_place = index.get(&a).is_some_and(|&p| self.has(p));
            if at_place || self.freed.contains(&a) {
                continue;
            }
            if self.listed < MAX_EPISODE_SENDERS {
                self.freed.push(a);
                self.listed += 1;
            } else {
                self.senders_capped = true;
            }
        }
    }

    /// The senders listed, their places' addresses and then the freed ones (each once).
    fn addresses(&self, slots: &[Sender]) -> Vec<Addr> {
        self.listed_places().map(|p| slots[p as usize].addr).chain(self.freed.iter().copied()).collect()
    }
}

/// An episode, open or closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    pub start_ns: u64,
    pub end_ns: u64,
    pub peak_senders: u32,
    pub peak_window_bytes: u64,
    tally: Tally,
    /// A closed episode's senders, sorted (its set is then dropped: 17 bytes a sender).
    listed: Option<Box<[Addr]>>,
}

impl Episode {
    pub fn bytes(&self) -> u64 {
        self.tally.bytes
    }
    pub fn ce(&self) -> u64 {
        self.tally.ce
    }
    pub fn cnp(&self) -> u64 {
        self.tally.cnp
    }
    /// Whether the episode had more senders than it lists ([`MAX_EPISODE_SENDERS`]).
    pub fn senders_capped(&self) -> bool {
        self.tally.senders_capped
    }
    /// The senders, in address order: the list made when the episode closed (every episode
    /// [`Incast::episodes`] gives is closed, an open one as it would close).
    pub fn senders(&self) -> Vec<Addr> {
        self.listed.as_deref().map(<[Addr]>::to_vec).unwrap_or_default()
    }

    /// On closing: the senders (their places in `slots`) as a sorted list, within `room`
    /// senders listed over all episodes (beyond it the episode says its list is capped).
    fn close(&mut self, room: &mut usize, slots: &[Sender]) {
        if self.tally.listed > *room {
            self.tally.senders_capped = true;
        }
        // The lowest `room` addresses, sorted (once the budget is spent, none: nothing to sort).
        let mut v: Vec<Addr> = if *room == 0 { Vec::new() } else { self.tally.addresses(slots) };
        // The list replaces the places (they name `slots` as they are now).
        (self.tally.places, self.tally.freed) = (Vec::new(), Vec::new());
        if v.len() > *room {
            v.select_nth_unstable(*room);
            v.truncate(*room);
        }
        v.sort_unstable();
        *room -= v.len();
        self.listed = Some(v.into_boxed_slice());
    }
}

#[derive(Debug, Clone, Default)]
struct Open {
    ep: Option<Episode>,
    /// The moment the count fell below the minimum, while the episode may still come back.
    below_since: Option<u64>,
    /// What arrived since then: part of the episode only if it comes back.
    pending: Tally,
}

/// A source of packets to a destination ([`Dest::slots`]).
#[derive(Debug, Clone, Copy)]
struct Sender {
    addr: Addr,
    /// Its packets in the window (0: resting).
    count: u32,
    /// False once its place is freed for another source.
    live: bool,
}

#[derive(Debug, Clone, Default)]
struct Dest {
    /// Counts the episodes opened: a flow's sender needs listing once per episode. (While the
    /// count is below the minimum, frames count toward `open.pending`, which is absorbed into
    /// the same episode's tally if it comes back, or dropped with the episode: a flow listed in
    /// the episode needs nothing more either way.)
    tally_gen: u64,
    /// Data packets within the window: (time, the source's place in `slots`, bytes).
    window: VecDeque<(u64, u32, u32)>,
    /// The sources seen, each at its place; a flow keeps its source's place ([`Kept`]), so a
    /// packet counts in and out of the window without a hash lookup (two per packet were a
    /// quarter of the agent's CPU with 10 000 flows taking turns). A source whose count falls
    /// to 0 keeps its place (most come back) while all destinations hold fewer than
    /// [`PLACES_BUDGET`] places or its own resting ones are fewer than twice its counted ones
    /// (plus 64); past both, a new source frees them first ([`Dest::place_of`]).
    slots: Vec<Sender>,
    /// Place of each live source in `slots`.
    index: FxHashMap<Addr, u32>,
    /// Freed places, for new sources.
    free: Vec<u32>,
    /// Sources with packets in the window: the live slots above 0.
    senders: u32,
    window_bytes: u64,
    open: Open,
    done: Vec<Episode>,
    /// Episodes past [`MAX_EPISODES_PER_DEST`], counted only.
    dropped: u64,
}

#[derive(Debug, Default)]
pub struct Incast {
    window_ns: u64,
    min_senders: u32,
    /// Destinations in the order first seen, and where each is (a flow keeps its
    /// destination's place: [`Incast::observe_kept`]). Never removed.
    dests: Interned<Addr, Dest>,
    /// Destinations kept, at most.
    cap: usize,
    /// Data packets to destinations beyond `cap`.
    pub state_full: u64,
    /// Senders closed episodes may still list ([`MAX_LISTED_SENDERS`] at first).
    listed_room: usize,
    /// Sources' places held over all destinations, and how many before one frees its
    /// resting ones ([`PLACES_BUDGET`]).
    places: usize,
    places_budget: usize,
    /// `--edges`: each destination's first events ([`edge`]).
    pub edges: Option<edge::Edges>,
}

impl Dest {
    /// Moves time to `t`: senders whose last packet left the window by then drop out, and an
    /// episode below the minimum for a whole window closes.
    fn advance(&mut self, t: u64, w: u64, min: u32, room: &mut usize) {
        while let Some(&(ts, place, len)) = self.window.front() {
            if ts + w > t {
                break;
            }
            self.window.pop_front();
            self.window_bytes -= len as u64;
            let before = self.senders;
            let c = &mut self.slots[place as usize].count;
            *c -= 1;
            if *c == 0 {
                self.senders -= 1;
            }
            if before >= min && self.senders < min && self.open.ep.is_some() {
                self.open.below_since = Some(ts + w);
            }
            self.close_if_over(ts + w, w, room);
        }
        self.close_if_over(t, w, room);
    }

    /// The place of `src` in `slots` (given, when `hint` still holds it; else found or
    /// made), with its resting places freed first when they pile up; `places` counts the
    /// places of all destinations.
    fn place_of(&mut self, src: Addr, hint: &mut Place, places: &mut usize, budget: usize) -> u32 {
        if let Some(p) = hint.get()
            && self.slots.get(p as usize).is_some_and(|s| s.live && s.addr == src)
        {
            return p;
        }
        if *places >= budget && self.index.len() >= 2 * self.senders as usize + 64 {
            let open = &mut self.open;
            for (p, s) in self.slots.iter_mut().enumerate() {
                if s.live && s.count == 0 {
                    s.live = false;
                    self.index.remove(&s.addr);
                    if let Some(ep) = &mut open.ep {
                        ep.tally.release(p as u32, s.addr);
                    }
                    open.pending.release(p as u32, s.addr);
                    self.free.push(p as u32);
                    *places -= 1;
                }
            }
        }
        let p = match self.index.get(&src) {
            Some(&p) => p,
            None => {
                let slot = Sender { addr: src, count: 0, live: true };
                let p = match self.free.pop() {
                    Some(p) => {
                        self.slots[p as usize] = slot;
                        p
                    }
                    None => {
                        self.slots.push(slot);
                        self.slots.len() as u32 - 1
                    }
                };
                self.index.insert(src, p);
                *places += 1;
                p
            }
        };
        hint.set(p);
        p
    }

    /// Counts a packet of the source at `place` in the window; returns the sources in it.
    fn count_in(&mut self, place: u32) -> u32 {
        let c = &mut self.slots[place as usize].count;
        if *c == 0 {
            self.senders += 1;
        }
        *c += 1;
        self.senders
    }

    /// A new episode's tally: the `count` sources with packets in the window listed, in the
    /// order of their places (up to [`MAX_EPISODE_SENDERS`]). They are the places of the
    /// window's packets (a place with packets in the window is live: only resting places are
    /// freed), found there rather than among every place the destination has seen (unless
    /// the window holds more packets than there are places).
    fn sources_tally(&self, count: u32) -> Tally {
        let mut t = Tally { senders_capped: count as usize > MAX_EPISODE_SENDERS, ..Default::default() };
        let places: Vec<u32> = if self.window.len() <= self.slots.len() {
            let mut v: Vec<u32> = self.window.iter().map(|&(_, p, _)| p).collect();
            v.sort_unstable();
            v.dedup();
            v
        } else {
            let live = self.slots.iter().enumerate().filter(|(_, s)| s.live && s.count > 0);
            live.map(|(p, _)| p as u32).collect()
        };
        for p in places.into_iter().take(MAX_EPISODE_SENDERS) {
            t.set(p);
            t.listed += 1;
        }
        t
    }

    fn close_if_over(&mut self, t: u64, w: u64, room: &mut usize) {
        if let Some(b) = self.open.below_since
            && t >= b + w
        {
            let mut ep = self.open.ep.take().expect("below_since implies an episode");
            ep.end_ns = b;
            if self.done.len() < MAX_EPISODES_PER_DEST {
                ep.close(room, &self.slots);
                self.done.push(ep);
            } else {
                self.dropped += 1;
            }
            self.open = Open::default();
        }
    }

    fn tally(&mut self) -> Option<&mut Tally> {
        match (&mut self.open.ep, self.open.below_since) {
            (Some(_), Some(_)) => Some(&mut self.open.pending),
            (Some(ep), None) => Some(&mut ep.tally),
            _ => None,
        }
    }
}

impl Incast {
    pub fn new(window_ns: u64, min_senders: u32, cap: usize) -> Self {
        Incast {
            window_ns: window_ns.max(1),
            min_senders: min_senders.max(1),
            cap,
            listed_room: MAX_LISTED_SENDERS,
            places_budget: PLACES_BUDGET,
            ..Default::default()
        }
    }

    pub fn observe(&mut self, r: &Record) {
        self.observe_kept(r, None);
    }

    /// [`Incast::observe`], with what the record's flow keeps ([`Kept`], filled as it goes),
    /// which saves lookups.
    pub fn observe_kept(&mut self, r: &Record, mut kept: Option<&mut Kept>) {
        let (w, min) = (self.window_ns, self.min_senders);
        if let Some(e) = &mut self.edges
            && (r.is_cnp() || opcode::is_data(r.opcode))
        {
            e.note(r, w);
        }
        if r.is_cnp() {
            // A CNP sent back by a destination during its episode.
            if let Some(d) = self.dests.get_mut(&(r.src_ip, r.ip_version)) {
                d.advance(r.ts_ns, w, min, &mut self.listed_room);
                if let Some(t) = d.tally() {
                    t.cnp += 1;
                }
            }
            return;
        }
        if !opcode::is_data(r.opcode) {
            return;
        }
        let src = (r.src_ip, r.ip_version);
        let (mut unkept, mut unkept_sender) = (Place::default(), Place::default());
        let (place, sender) = match kept.as_deref_mut() {
            Some(k) => (&mut k.dest, &mut k.sender),
            None => (&mut unkept, &mut unkept_sender),
        };
        let key = (r.dst_ip, r.ip_version);
        let Some(d) = self.dests.place_mut(key, place, self.cap, &mut self.state_full) else { return };
        d.advance(r.ts_ns, w, min, &mut self.listed_room);
        let at = d.place_of(src, sender, &mut self.places, self.places_budget);
        d.window.push_back((r.ts_ns, at, r.frame_len));
        d.window_bytes += r.frame_len as u64;
        let count = d.count_in(at);
        if count >= min {
            if d.open.ep.is_none() {
                d.tally_gen += 1;
                d.open.ep = Some(Episode {
                    start_ns: r.ts_ns,
                    end_ns: r.ts_ns,
                    peak_senders: 0,
                    peak_window_bytes: 0,
                    tally: d.sources_tally(count),
                    listed: None,
                });
            }
            let pending = std::mem::take(&mut d.open.pending);
            d.open.below_since = None;
            let ep = d.open.ep.as_mut().expect("just opened");
            ep.tally.absorb(pending, &d.slots, &d.index);
            ep.peak_senders = ep.peak_senders.max(count);
            ep.peak_window_bytes = ep.peak_window_bytes.max(d.window_bytes);
        }
        let generation = d.tally_gen;
        if let Some(t) = d.tally() {
            t.bytes += r.frame_len as u64;
            t.ce += r.ce() as u64;
            // A flow listed in this tally already (its sender is in the set, or the set was
            // full) needs no lookup.
            match kept {
                Some(k) if k.listed == generation + 1 => {}
                Some(k) => {
                    t.add_sender(at, src);
                    k.listed = generation + 1;
                }
                None => t.add_sender(at, src),
            }
        }
    }

    /// Every episode, by destination then start. An episode still open ends where its count
    /// would fall below the minimum if no more data came (read-only: live reports are built
    /// while the run goes on).
    pub fn episodes(&self) -> Vec<(Addr, Episode)> {
        let (w, min) = (self.window_ns, self.min_senders);
        let mut out = Vec::new();
        let mut dests: Vec<(&Addr, &Dest)> = self.dests.iter().collect();
        dests.sort_unstable_by_key(|(a, _)| **a);
        for (addr, d) in dests {
            out.extend(d.done.iter().map(|e| (*addr, e.clone())));
            if d.open.ep.is_some() {
                let mut d = d.clone();
                let kept = d.done.len();
                d.advance(u64::MAX - w, w, min, &mut self.listed_room.clone());
                if d.done.len() > kept {
                    out.extend(d.done.last().map(|e| (*addr, e.clone())));
                }
            }
        }
        out
    }

    /// How many episodes [`Incast::episodes`] lists, without building them.
    pub fn episode_count(&self) -> u64 {
        let open = |d: &Dest| (d.open.ep.is_some() && d.done.len() < MAX_EPISODES_PER_DEST) as u64;
        self.dests.iter().map(|(_, d)| d).map(|d| d.done.len() as u64 + open(d)).sum()
    }

    /// Episodes (kept, or open) that list fewer senders than they had.
    pub fn episodes_with_senders_capped(&self) -> u64 {
        let open = |d: &Dest| d.open.ep.as_ref().is_some_and(|e| e.tally.senders_capped) as u64;
        self.dests
            .iter()
            .map(|(_, d)| d)
            .map(|d| d.done.iter().filter(|e| e.tally.senders_capped).count() as u64 + open(d))
            .sum()
    }

    /// Episodes counted but not kept (past [`MAX_EPISODES_PER_DEST`] at a destination).
    pub fn episodes_dropped(&self) -> u64 {
        let open_past_cap = |d: &Dest| (d.open.ep.is_some() && d.done.len() >= MAX_EPISODES_PER_DEST) as u64;
        self.dests.iter().map(|(_, d)| d).map(|d| d.dropped + open_past_cap(d)).sum()
    }

    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    pub fn min_senders(&self) -> u32 {
        self.min_senders
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episodes_and_their_senders_are_capped_and_say_so() {
        let mut i = Incast::new(100, 2, usize::MAX);
        // MAX_EPISODES_PER_DEST + 5 episodes at one destination, 1000 ns apart: each two senders.
        for e in 0..(MAX_EPISODES_PER_DEST as u64 + 5) {
            let t = e * 1000;
            i.observe(&data(1, 9, t, false));
            i.observe(&data(2, 9, t + 1, false));
        }
        let eps = i.episodes();
        assert_eq!(eps.len(), MAX_EPISODES_PER_DEST);
        // Four closed past the cap, and the last one, still open, would be the fifth.
        assert_eq!(i.episodes_dropped(), 5);
        // One episode with more senders than it lists.
        let mut j = Incast::new(1_000_000, 2, usize::MAX);
        for s in 0..(MAX_EPISODE_SENDERS as u32 + 10) {
            let mut r = data(0, 9, s as u64, false);
            r.src_ip[..4].copy_from_slice(&(0x0a00_0000u32 + s).to_be_bytes());
            j.observe(&r);
        }
        let eps = j.episodes();
        assert_eq!(eps[0].1.senders().len(), MAX_EPISODE_SENDERS);
        assert!(eps[0].1.senders_capped());
        assert_eq!(eps[0].1.bytes(), (MAX_EPISODE_SENDERS as u64 + 10 - 1) * 1000, "all senders' bytes from the start");
        assert_eq!(j.episodes_with_senders_capped(), 1);
    }

    /// Over all closed episodes at most a budget of senders is listed: a flood of short
    /// episodes with many senders stays bounded, and the episodes past the budget say so.
    #[test]
    fn listed_senders_have_a_global_budget() {
        let mut i = Incast::new(100, 2, usize::MAX);
        i.listed_room = 10;
        for e in 0..3u64 {
            for s in 0..6u32 {
                let mut r = data(0, 9, e * 10_000 + s as u64, false);
                r.src_ip[..4].copy_from_slice(&(0x0a00_0000u32 + s).to_be_bytes());
                i.observe(&r);
            }
        }
        i.observe(&data(1, 8, 100_000, false)); // time moves on: the third episode closes
        let eps = i.episodes();
        let listed: Vec<usize> = eps.iter().map(|(_, e)| e.senders().len()).collect();
        assert_eq!(listed, vec![6, 4, 0]);
        let second: Vec<u8> = eps[1].1.senders().iter().map(|(a, _)| a[3]).collect();
        assert_eq!(second, vec![0, 1, 2, 3], "the budget keeps the lowest addresses, in order");
        let capped: Vec<bool> = eps.iter().map(|(_, e)| e.senders_capped()).collect();
        assert_eq!(capped, vec![false, true, true]);
        assert!(eps.iter().all(|(_, e)| e.peak_senders == 6), "the counts cover every sender");
    }

    /// Resting sources keep their places while all destinations hold fewer than the budget
    /// (a source that comes back finds its place), and are freed past it.
    #[test]
    fn resting_places_are_freed_past_the_budget() {
        let places = |budget: usize| {
            let mut i = Incast::new(100, 3, usize::MAX);
            i.places_budget = budget;
            let mut most = 0;
            // 1000 sources one after another, 1000 ns apart: one in the window at a time.
            for s in 0..1000u32 {
                let mut r = data(0, 9, s as u64 * 1000, false);
                r.src_ip[..4].copy_from_slice(&(0x0a00_0000u32 + s).to_be_bytes());
                i.observe(&r);
                most = most.max(i.places);
            }
            (i.places, most)
        };
        assert_eq!(places(PLACES_BUDGET), (1000, 1000), "within the budget every place is kept");
        let (now, most) = places(300);
        assert!(most <= 301 && now <= 301, "past it the resting ones are freed: {now}, {most} at most");
    }

    /// An episode lists each of its senders once, also when their places are freed for
    /// others while it is open and they come back at new places (a sender listed at a freed
    /// place keeps its address): the same episode as with every place kept.
    #[test]
    fn senders_whose_places_are_freed_stay_listed_once() {
        let run = |budget: usize| {
            let mut i = Incast::new(1000, 2, usize::MAX);
            i.places_budget = budget;
            // 500 sources one after another, 100 ns apart (10 in the window: one episode),
            // three rounds; the second also with other flows of the same sources.
            for round in 0..3u64 {
                for s in 0..500u32 {
                    let mut r = data(0, 9, (round * 500 + s as u64) * 100, false);
                    r.src_ip[..4].copy_from_slice(&(0x0a00_0000u32 + s).to_be_bytes());
                    i.observe(&r);
                    if round == 1 {
                        r.dst_qp = 7;
                        i.observe(&r);
                    }
                }
            }
            i.observe(&data(1, 8, 10_000_000, false)); // time moves on: the episode closes
            (i.episodes(), i.places)
        };
        let (kept, _) = run(PLACES_BUDGET);
        let (freed, places) = run(50);
        assert!(places < 200, "places were freed: {places} held at the end");
        assert_eq!(kept.len(), 1);
        let senders = kept[0].1.senders();
        assert_eq!(senders.len(), 500, "every source listed once");
        assert!(!kept[0].1.senders_capped());
        assert_eq!(freed.len(), 1);
        assert_eq!(freed[0].1.senders(), senders, "the same senders with places freed and reused");
        assert_eq!(
            (freed[0].1.bytes(), freed[0].1.peak_senders, freed[0].1.start_ns, freed[0].1.end_ns),
            (kept[0].1.bytes(), kept[0].1.peak_senders, kept[0].1.start_ns, kept[0].1.end_ns)
        );
    }

    /// The places listed are the set bits, in order, across word boundaries.
    #[test]
    fn listed_places_are_the_set_bits_in_order() {
        let mut t = Tally::default();
        for p in [200, 0, 63, 64, 127, 5] {
            t.set(p);
        }
        assert_eq!(t.listed_places().collect::<Vec<_>>(), vec![0, 5, 63, 64, 127, 200]);
        assert_eq!(Tally::default().listed_places().count(), 0);
    }

    /// A new episode lists the senders with packets in the window, in the order of their
    /// places, whether they are found from the window's packets (fewer than the places) or
    /// among the places (a window with more packets than the destination has sources).
    #[test]
    fn a_new_episode_lists_the_senders_in_the_window() {
        let senders = |i: &Incast| {
            let d = i.dests.get(&([10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 4)).unwrap();
            let t = d.open.ep.as_ref().unwrap().tally.clone();
            (t.listed, t.addresses(&d.slots).iter().map(|a| a.0[3]).collect::<Vec<_>>())
        };
        // Sources 1..=6 send once long ago (they rest), then 5, 3, 5, 3, 5, 2 within a window.
        let mut few = Incast::new(100, 3, usize::MAX);
        for s in 1..=6 {
            few.observe(&data(s, 9, s as u64 * 1000, false));
        }
        for (k, s) in [5, 3, 5, 3, 5, 2].into_iter().enumerate() {
            few.observe(&data(s, 9, 10_000 + k as u64, false));
        }
        assert_eq!(senders(&few), (3, vec![2, 3, 5]), "the window's senders, by place; resting ones not");
        // Two sources, many packets each in the window: found among the places.
        let mut many = Incast::new(1000, 2, usize::MAX);
        for k in 0..10u64 {
            many.observe(&data(7, 9, k, false));
        }
        many.observe(&data(4, 9, 10, false));
        assert_eq!(senders(&many), (2, vec![7, 4]));
    }

    fn data(src: u8, dst: u8, ts: u64, ce: bool) -> Record {
        let mut r = Record {
            ts_ns: ts,
            opcode: 0x0A,
            frame_len: 1000,
            ip_version: 4,
            ecn: if ce { 3 } else { 2 },
            ..Default::default()
        };
        r.src_ip[..4].copy_from_slice(&[10, 0, 0, src]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 0, dst]);
        r
    }

    #[test]
    fn an_episode_that_comes_back_within_a_window_goes_on() {
        let mut i = Incast::new(100, 3, usize::MAX);
        for (src, t) in [(1, 0), (2, 10), (3, 20)] {
            i.observe(&data(src, 9, t, false)); // three senders at 20: the episode starts
        }
        // 1 leaves at 100 (two left: below from 100), 2 at 110; 4 at 110 and 5 at 115 bring it
        // back to three (3, 4, 5) before 100 + window: one episode, 4's packet included.
        i.observe(&data(4, 9, 110, false));
        i.observe(&data(5, 9, 115, true));
        let mut cnp = data(9, 1, 116, false);
        cnp.opcode = CNP_OP;
        i.observe(&cnp);
        // With no more data, 3 leaves at 120: the episode ends there.
        let eps = i.episodes();
        assert_eq!(eps.len(), 1);
        let e = &eps[0].1;
        assert_eq!((e.start_ns, e.end_ns, e.peak_senders, e.bytes()), (20, 120, 3, 3000));
        assert_eq!((e.ce(), e.cnp(), e.senders().len()), (1, 1, 5));
        assert_eq!(e.peak_window_bytes, 3000, "3, 4 and 5 within (15, 115]");
    }

    const CNP_OP: u8 = analyzer_common::opcode::CNP;

    #[test]
    fn separate_episodes_more_than_a_window_apart() {
        let mut i = Incast::new(100, 2, usize::MAX);
        for (s, t) in [(1, 0), (2, 10), (1, 1000), (2, 1010), (3, 1020)] {
            i.observe(&data(s, 9, t, false));
        }
        let eps: Vec<(u64, u64, u32, u64)> =
            i.episodes().into_iter().map(|(_, e)| (e.start_ns, e.end_ns, e.peak_senders, e.bytes())).collect();
        // First: 10 .. 100 (sender 1 leaves at 100). Second: 1010 .. 1110 (1 leaves at 1100:
        // still 2 and 3; 2 leaves at 1110: one left).
        assert_eq!(eps, vec![(10, 100, 2, 1000), (1010, 1110, 3, 2000)]);
    }

    proptest::proptest! {
        /// What a flow keeps ([`Kept`]) only saves lookups: episodes (times, peaks, bytes,
        /// senders, caps) equal those found without it, over flapping senders to two
        /// destinations (episodes open, fall below, come back, close).
        #[test]
        fn what_flows_keep_changes_no_episode(
            frames in proptest::collection::vec((0u8..12, 0u8..2, 1u64..40, proptest::bool::ANY), 1..400),
            min in 2u32..5,
        ) {
            let (mut plain, mut kept) = (Incast::new(100, min, usize::MAX), Incast::new(100, min, usize::MAX));
            let mut flows: FxHashMap<(u8, u8), Kept> = FxHashMap::default();
            let mut t = 0;
            for (src, dst, gap, ce) in frames {
                t += gap;
                let r = data(src, 20 + dst, t, ce);
                plain.observe(&r);
                kept.observe_kept(&r, Some(flows.entry((src, dst)).or_default()));
            }
            let view = |i: &Incast| -> Vec<_> {
                i.episodes()
                    .into_iter()
                    .map(|(a, e)| (a, e.start_ns, e.end_ns, e.peak_senders, e.bytes(), e.ce(), e.senders(), e.senders_capped()))
                    .collect()
            };
            proptest::prop_assert_eq!(view(&plain), view(&kept));
        }

        /// A destination's sender count is the distinct sources of the packets in its window,
        /// each source's count its packets there, and the sources resting at 0 stay bounded
        /// (hundreds of senders taking turns: entries rest, and are dropped when they pile up,
        /// also under flows that keep a place freed since).
        #[test]
        fn sender_counts_follow_the_window(
            frames in proptest::collection::vec((0u16..400, 0u8..2, 1u64..30), 1..1500),
        ) {
            let mut i = Incast::new(100, 3, usize::MAX);
            // No budget of places: every destination frees its resting ones when they pile up.
            i.places_budget = 0;
            // Every other source's flow keeps its places, as the flows table does.
            let mut kept: FxHashMap<(u16, u8), Kept> = FxHashMap::default();
            let mut peak: FxHashMap<Addr, u32> = FxHashMap::default();
            let mut t = 0;
            for (src, dst, gap) in frames {
                t += gap;
                let mut r = data(0, 20 + dst, t, false);
                r.src_ip[..4].copy_from_slice(&(0x0a00_0000u32 + src as u32).to_be_bytes());
                i.observe_kept(&r, (src % 2 == 0).then(|| kept.entry((src, dst)).or_default()));
                let mut places = 0;
                for (a, d) in i.dests.iter() {
                    let mut in_window: FxHashMap<Addr, u32> = FxHashMap::default();
                    for (_, p, _) in &d.window {
                        let s = d.slots[*p as usize];
                        proptest::prop_assert!(s.live, "a packet in the window at a freed place");
                        *in_window.entry(s.addr).or_default() += 1;
                    }
                    proptest::prop_assert_eq!(d.senders as usize, in_window.len());
                    let counted: FxHashMap<Addr, u32> =
                        d.slots.iter().filter(|s| s.live && s.count > 0).map(|s| (s.addr, s.count)).collect();
                    proptest::prop_assert_eq!(&counted, &in_window);
                    let live = d.slots.iter().filter(|s| s.live).count();
                    places += live;
                    proptest::prop_assert_eq!(live, d.index.len(), "the index holds the live places");
                    // Places are freed when a new source comes (a flow keeping its place looks
                    // nothing up): bounded by the most senders the destination has had.
                    let most = peak.entry(*a).or_default();
                    *most = (*most).max(d.senders);
                    proptest::prop_assert!(d.index.len() <= 2 * *most as usize + 65, "{} entries, {} senders at most", d.index.len(), *most);
                    proptest::prop_assert_eq!(d.slots.len(), live + d.free.len(), "every place live or free");
                }
                proptest::prop_assert_eq!(places, i.places, "places counted over all destinations");
            }
        }
    }
}
