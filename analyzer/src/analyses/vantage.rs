//! Vantage points, and the frames several of them saw (issue "real vantage points", 2).
//!
//! A vantage point is an input's label, and for a mirrored copy the label plus the copy's
//! origin (outer source address, and the ERSPAN session where there is one): one collector
//! that receives ERSPAN from many switches has many vantage points. A RoCE frame seen at
//! several points is one frame: its identity is `analyzer_common::vantage::FrameId`, and copies at other points within the match
//! window are folded into the first sighting. Repeats at a point it has already been seen at
//! are new frames (retransmissions), matched in time order.
//!
//! Frames are held here for the match window before the pipeline counts them, so that a
//! frame is counted once, at the time of its first copy, with the ECN of its last copy (the
//! one the receiver got: switches mark CE along the path); memory is bounded by the frames of
//! one window. What the copies say about the path — per ordered pair of points the frames
//! matched, their latency, CE marks added between, frames that never arrived — is kept here.

use std::collections::{BTreeMap, VecDeque};

use analyzer_common::flow::FlowKey;
use analyzer_common::vantage::FrameId;
use analyzer_common::{FrameClass, PacketSummary};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::stats::Samples;
pub use super::vantage_edge::Log;
use super::vantage_edge::at;
use crate::frames::FrameMeta;
// A point's bit in a set of points: beyond 64 points they share the last bit, as inputs do.
use crate::frames::source_bit as point_bit;

/// One vantage point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// The label, and `@origin` for mirrored copies.
    pub name: String,
    pub label: String,
    /// Outer source address of mirrored copies, with `/session N` for ERSPAN.
    pub origin: Option<String>,
    /// Frames seen at this point (copies included).
    pub frames: u64,
    /// Its first and last frame's time: the span it was capturing. Two captures rarely start
    /// and stop together, and a frame one point saw while another was not capturing is not
    /// a frame lost between them.
    pub first_ns: u64,
    pub last_ns: u64,
}

/// A frame held for the match window: what matching reads of its first copy (its summary is
/// kept beside it, offline only: [`Vantage::activate_live`]), the points that saw it and
/// where the copies came from.
#[derive(Debug, Clone)]
pub struct Held {
    pub meta: FrameMeta,
    /// Its identity ([`FrameId::of`]; zero for a frame without one: `identified` false).
    id: FrameId,
    /// Whether it has an identity (a RoCE or CNP frame).
    identified: bool,
    /// Whether its first copy was a mirrored one.
    encap: bool,
    /// The last copy's ECN.
    pub ecn: u8,
    /// Its flow's IP version and RoCE version (with the identity, its flow's key).
    ip_version: u8,
    roce_version: u8,
    /// Every copy after the first, as the capture counts it.
    pub copies: SmallVec<[Copy; 1]>,
    /// How many frames before it the held frame indexed under the same key before it came
    /// ([`Vantage::by_identity`]; 0: none): the frames of one key, newest first.
    older: u32,
    /// Points that saw it (bit per point); the first sighting's point and ECN (its time is
    /// the frame's), then (point, time, ECN) per later sighting.
    points: u64,
    first: (u16, u8),
    later: SmallVec<[(u16, u64, u8); 1]>,
}

// What the matching holds of each frame of a window (20 000 at 200 k frames/s).
const _: () = assert!(std::mem::size_of::<Held>() <= 136);

impl Held {
    /// Its flow's key ([`FlowKey::from_summary`] of its summary).
    fn flow(&self) -> FlowKey {
        let id = &self.id;
        FlowKey::new(id.src, id.dst, id.dst_qp, id.udp_sport, self.ip_version, self.roce_version)
    }
}

/// A copy folded into a first sighting: its input (per-input byte shares), length, and
/// whether it was a mirrored or cut copy (the capture's visibility counts).
#[derive(Debug, Clone, Copy)]
pub struct Copy {
    pub source: u16,
    pub frame_len: u32,
    pub encap: bool,
    pub cut: bool,
}

/// Frames one ordered pair of points shares.
#[derive(Debug, Default)]
pub struct HopState {
    pub matched: u64,
    /// Matched frames not CE-marked at `from` and CE-marked at `to`.
    pub ce_marked: u64,
    pub latency: Samples,
    /// The latencies in time (the tail's `queueing`).
    pub windows: super::queueing::HopWindows,
    /// Frames matched per flow.
    pub flows: FxHashMap<FlowKey, u64>,
    /// From the first frame CE-marked between the points on: matched frames and those marked
    /// between, per point of time (where marking starts, and how it goes on).
    pub marking: Option<Box<super::marking::Series>>,
    /// `--edges`: the matched frames before the first mark, as a series (every one without
    /// marks): a capture that follows one with the mark counts them in the hop's series.
    pub before: Option<Box<super::marking::Series>>,
    /// Frames and marks by queueing delay, for the hop's marking profile.
    pub marks: super::marking_profile::LatencyMarks,
}

/// A hop as the report gives it: `missing` computed over the flows seen at both points.
#[derive(Debug)]
pub struct Hop<'a> {
    pub from: u16,
    pub to: u16,
    pub state: &'a HopState,
    pub missing: u64,
    /// Flows with frames missing, most first.
    pub worst: Vec<(FlowKey, u64)>,
    /// Frames of those flows `from` saw while `to` was not capturing (before its first frame
    /// or after its last): not counted missing.
    pub outside: u64,
}

#[derive(Debug)]
pub struct Vantage {
    pub window_ns: u64,
    /// The time resolution of a hop's marking series (`--rate-window`).
    pub point_ns: u64,
    /// Matching runs for runs with several inputs, or from the first mirrored copy on.
    active: bool,
    pub points: Vec<Point>,
    point_index: FxHashMap<PointKey, u16>,
    /// The point of the last frame offered (frames come in runs from one input and origin).
    last_point: Option<(PointKey, u16)>,
    held: VecDeque<Held>,
    /// The held frames' summaries, offline ([`Vantage::activate_live`]): the pipeline counts
    /// them when they leave. Live the kernel counted them: without them a held frame is 136
    /// bytes instead of 312, and the frames of one window on a mirror port (20 000 at 200 k
    /// frames/s) stream through fewer cache lines.
    summaries: VecDeque<PacketSummary>,
    /// Whether `summaries` are kept (offline; cleared by [`Vantage::activate_live`]).
    keep: bool,
    /// Sequence number of `held[0]`.
    front: u64,
    /// The newest held frame (its sequence number) by the key of its identity ([`id_key`]),
    /// older ones of the key through [`Held::older`]; a frame's identity is compared with the
    /// held one's. A 64-bit key and one lookup a frame: every mirrored copy looks here. A frame
    /// leaving the window does not: an entry whose frame has left is stale (below `front`), is
    /// taken over by the next frame of its key, and swept out with the others when they
    /// outnumber the held frames ([`Vantage::sweep`]). Four lookups of the 48-byte identity
    /// were ≈ 30 % of the time on a capture of mirrored copies; the removal at the window's end
    /// was a cache miss per frame, ≈ 18 % of a mirror port's agent (BENCHMARKS.md).
    by_identity: FxHashMap<u64, u64>,
    pub hops: BTreeMap<(u16, u16), HopState>,
    /// Per flow: frames counted by (the points that saw them, the points outside whose span
    /// they were: not yet capturing, or stopped).
    seen_by: FxHashMap<WordKey, SmallVec<[Sighted; 2]>>,
    /// Frames left after the last frame of some point that saw none of them, counted by (flow,
    /// points that saw them, points not yet started, points stopped so far): a stop is only
    /// known at the end, so they wait until each such point sees another frame (then it was
    /// capturing: [`Vantage::resumed`]) or the run ends (then it had stopped).
    after_last: FxHashMap<WordKey, SmallVec<[Waiting; 1]>>,
    /// The points of `after_last`'s entries, stopped so far.
    waiting: u64,
    /// Every point's bit.
    all_points: u64,
    /// Most frames held at once (the memory the matching needed).
    pub peak_held: usize,
    /// Copies folded into a first sighting.
    pub copies: u64,
    /// `--edges`: the frames at the run's two ends ([`Log`]).
    pub edges: Option<Box<Log>>,
}

/// A flow's key hashed as its five 8-byte words ([`FlowKey::hash_words`], as
/// the engine's flow table hashes it; the derived hash feeds its arrays byte by byte with their
/// lengths). With it the hash-map entries went from 14 % to 8 % of a mirror
/// port's agent (`perf record`, 195 k copies/s): `seen_by` takes one for every frame leaving
/// the window; the kernel table's hash of the key ([`analyzer_common::table::hash`]), tried
/// in its place, measured 21 %. Only the map's order depends on it, and nothing here reads
/// that order unsorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WordKey(FlowKey);

impl std::hash::Hash for WordKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash_words(state);
    }
}

/// Frames seen: (points that saw them, points outside whose span they were, frames).
pub type Sighted = (u64, u64, u64);

/// Frames waiting on stopped points: (points that saw them, points not yet started, points
/// stopped so far, frames).
type Waiting = (u64, u64, u64, u64);

/// Index entries beyond twice the held frames before a sweep ([`Vantage::sweep`]).
const SWEEP_SLACK: usize = 4096;

/// A vantage point's key: input, mirror origin, ERSPAN session + 1.
type PointKey = (u16, [u8; 16], u16);

/// The key of a frame identity in [`Vantage`]'s index: its words mixed by multiplication
/// (the index hashes it once more, with one multiplication).
fn id_key(id: &FrameId) -> u64 {
    (0..6).fold(0u64, |h, i| (h ^ id.word(i)).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29))
}

impl Vantage {
    pub fn new(window_ns: u64, point_ns: u64) -> Self {
        Vantage {
            window_ns,
            point_ns: point_ns.max(1),
            active: false,
            points: Vec::new(),
            point_index: FxHashMap::default(),
            last_point: None,
            held: VecDeque::new(),
            summaries: VecDeque::new(),
            keep: true,
            front: 0,
            by_identity: FxHashMap::default(),
            hops: BTreeMap::new(),
            seen_by: FxHashMap::default(),
            after_last: FxHashMap::default(),
            waiting: 0,
            all_points: 0,
            peak_held: 0,
            copies: 0,
            edges: None,
        }
    }

    /// Whether frames go through the match window (several inputs, or mirrored copies).
    pub fn active(&self) -> bool {
        self.active
    }

    pub fn activate(&mut self) {
        self.active = true;
    }

    /// Live: matching runs, and held frames are let go uncounted (the kernel counted them),
    /// so their summaries are not kept.
    pub fn activate_live(&mut self) {
        self.active = true;
        self.keep = false;
    }

    /// The point of a frame from input `source` labelled `label`.
    fn point(&mut self, source: u16, label: &str, s: &PacketSummary) -> u16 {
        let origin = if s.encap != 0 { s.origin_ip } else { [0; 16] };
        let session = if s.encap != 0 { s.origin_session } else { 0 };
        let key = (source, origin, session);
        if let Some((k, p)) = self.last_point
            && k == key
        {
            return p;
        }
        if let Some(&p) = self.point_index.get(&key) {
            self.last_point = Some((key, p));
            return p;
        }
        let origin = (s.encap != 0).then(|| {
            let v4 = s.origin_ip[4..].iter().all(|b| *b == 0);
            let addr = crate::model::addr::addr_string(if v4 { 4 } else { 6 }, &s.origin_ip);
            if session != 0 { format!("{addr}/session {}", session - 1) } else { addr }
        });
        let name = match &origin {
            Some(o) => format!("{label}@{o}"),
            None => label.to_string(),
        };
        // Two inputs of one label (one capture cut in files) are one point.
        if let Some(i) = self.points.iter().position(|p| p.name == name) {
            self.point_index.insert(key, i as u16);
            return i as u16;
        }
        self.points.push(Point { name, label: label.into(), origin, frames: 0, first_ns: 0, last_ns: 0 });
        let i = (self.points.len() - 1) as u16;
        self.all_points |= point_bit(i);
        self.point_index.insert(key, i);
        i
    }

    /// Takes one frame (in time order); frames whose window has closed are then due.
    pub fn offer(&mut self, meta: FrameMeta, s: &PacketSummary, label: &str) {
        let point = self.point(meta.source, label, s);
        let p = &mut self.points[point as usize];
        if p.frames == 0 {
            p.first_ns = meta.ts_ns;
        }
        p.frames += 1;
        p.last_ns = meta.ts_ns;
        let bit = point_bit(point);
        if self.waiting & bit != 0 {
            self.resumed(bit);
        }
        let id = matches!(s.class(), FrameClass::Roce | FrameClass::Cnp).then(|| FrameId::of(s));
        let key = id.as_ref().map(id_key);
        let seq = self.front + self.held.len() as u64;
        let mut older = 0;
        if let (Some(id), Some(key)) = (id, key) {
            let front = self.front;
            // One lookup: the newest held frame of this key (a stale entry is none).
            let newest = self.by_identity.entry(key).or_insert(seq);
            let mut q = (*newest != seq && *newest >= front).then_some(*newest);
            older = q.map_or(0, |q| u32::try_from(seq - q).unwrap_or(0));
            // Within one input only mirrored copies match each other (as the XDP program
            // matches them live); across inputs every frame does. The oldest that may.
            let mut found = None;
            while let Some(at) = q {
                let h = &self.held[(at - front) as usize];
                let comparable = h.meta.source != meta.source || (h.encap && s.encap != 0);
                if comparable
                    && h.id == id
                    && h.points & bit == 0
                    && meta.ts_ns.saturating_sub(h.meta.ts_ns) <= self.window_ns
                {
                    found = Some(at);
                }
                q = (h.older != 0).then(|| at - h.older as u64).filter(|&o| o >= front);
            }
            if found.is_none() {
                *newest = seq;
            }
            if let Some(seq) = found {
                self.fold_copy(seq, meta, s, point);
                if let Some(e) = &mut self.edges {
                    e.head(self.window_ns, [meta.ts_ns, key, at(point, s.encap != 0), 0]);
                }
                return;
            }
        }
        if self.keep {
            self.summaries.push_back(*s);
        }
        self.held.push_back(Held {
            meta,
            id: id.unwrap_or_default(),
            encap: s.encap != 0,
            ecn: s.ecn & 3,
            ip_version: s.ip_version,
            roce_version: s.roce_version,
            copies: SmallVec::new(),
            identified: key.is_some(),
            older,
            points: bit,
            first: (point, s.ecn & 3),
            later: SmallVec::new(),
        });
        self.peak_held = self.peak_held.max(self.held.len());
        if let Some(e) = &mut self.edges {
            let id = key.unwrap_or(0);
            e.head(self.window_ns, [meta.ts_ns, id, at(point, s.encap != 0), 1]);
        }
        if self.by_identity.len() > 2 * self.held.len() + SWEEP_SLACK {
            self.sweep();
        }
    }

    /// A copy of the held frame `seq`, seen at `point`: its hops from every point that saw
    /// the frame before (matched, CE marked between, latency), and the copy kept with it.
    #[inline]
    fn fold_copy(&mut self, seq: u64, meta: FrameMeta, s: &PacketSummary, point: u16) {
        let bit = point_bit(point);
        let keep_before = self.edges.is_some();
        let h = &mut self.held[(seq - self.front) as usize];
        self.copies += 1;
        let ecn = s.ecn & 3;
        let flow = h.flow();
        let w = meta.ts_ns / self.point_ns;
        let first = (h.first.0, h.meta.ts_ns, h.first.1);
        for &(q, tq, ecn_q) in std::iter::once(&first).chain(&h.later) {
            let hop = self.hops.entry((q, point)).or_default();
            hop.matched += 1;
            let marked = ecn_q != 3 && ecn == 3;
            hop.ce_marked += marked as u64;
            if marked && hop.marking.is_none() {
                hop.marking = Some(Box::new(super::marking::Series::new(w)));
            }
            if let Some(m) = &mut hop.marking {
                m.add(w, 0, marked);
            } else if keep_before {
                hop.before.get_or_insert_with(|| Box::new(super::marking::Series::new(w))).add(w, 0, false);
            }
            hop.latency.push(meta.ts_ns.saturating_sub(tq));
            hop.windows.add(w, meta.ts_ns.saturating_sub(tq));
            hop.marks.add(meta.ts_ns as i64 - tq as i64, marked);
            *hop.flows.entry(flow).or_default() += 1;
        }
        h.later.push((point, meta.ts_ns, ecn));
        h.points |= bit;
        h.ecn = ecn;
        h.copies.push(Copy { source: meta.source, frame_len: s.frame_len, encap: s.encap != 0, cut: s.cut != 0 });
    }

    /// Drops the index entries of frames that left the window: one pass over the index when
    /// they outnumber the held frames, instead of a lookup for every frame that leaves.
    fn sweep(&mut self) {
        let front = self.front;
        self.by_identity.retain(|_, seq| *seq >= front);
    }

    /// Offline: the oldest held frame and its summary (with the last copy's ECN) if its window
    /// closed before `now` (or, `now` = None, any).
    pub fn due_kept(&mut self, now: Option<u64>) -> Option<(Held, PacketSummary)> {
        let h = self.due(now)?;
        let mut s = self.summaries.pop_front().expect("summaries are kept offline");
        s.ecn = h.ecn;
        Some((h, s))
    }

    /// The oldest held frame if its window closed before `now` (or, `now` = None, any).
    pub fn due(&mut self, now: Option<u64>) -> Option<Held> {
        let h = self.held.front()?;
        if let Some(now) = now
            && now.saturating_sub(h.meta.ts_ns) <= self.window_ns
        {
            return None;
        }
        let h = self.held.pop_front()?;
        self.front += 1;
        if now.is_none()
            && let Some(e) = &mut self.edges
        {
            let id = if h.identified { id_key(&h.id) } else { 0 };
            e.ended.push([h.meta.ts_ns, id, h.points, at(h.first.0, h.encap)]);
        }
        if h.identified {
            self.count_seen(WordKey(h.flow()), h.points, h.meta.ts_ns);
        }
        Some(h)
    }

    /// Counts a frame leaving the window by the points that saw it, and those that did not
    /// and were not capturing at its time: not started (final: frames come in time order), or
    /// stopped so far (known only when they see another frame, or at the end). A point not
    /// known yet is not capturing.
    fn count_seen(&mut self, flow: WordKey, points: u64, ts_ns: u64) {
        let (mut before, mut after) = (!self.all_points, 0);
        let mut unseen = self.all_points & !points;
        while unseen != 0 {
            let bit = unseen & unseen.wrapping_neg();
            unseen &= !bit;
            let p = &self.points[bit.trailing_zeros() as usize];
            if p.frames == 0 || p.first_ns > ts_ns {
                before |= bit;
            } else if p.last_ns < ts_ns {
                after |= bit;
            }
        }
        if after != 0 {
            self.wait(flow, (points, before, after, 1));
        } else {
            self.count_final(flow, points, before, 1);
        }
    }

    fn count_final(&mut self, flow: WordKey, points: u64, outside: u64, n: u64) {
        let sets = self.seen_by.entry(flow).or_default();
        match sets.iter_mut().find(|(m, o, _)| *m == points && *o == outside) {
            Some((_, _, c)) => *c += n,
            None => sets.push((points, outside, n)),
        }
    }

    /// A point seen stopped saw another frame: it was capturing when the frames waiting on it
    /// left, which were then lost on the way to it or not on its path.
    #[cold]
    fn resumed(&mut self, bit: u64) {
        let entries: Vec<_> = self.after_last.drain().collect();
        self.waiting = 0;
        for (flow, list) in entries {
            for (points, before, after, n) in list {
                let after = after & !bit;
                if after == 0 {
                    self.count_final(flow, points, before, n);
                } else {
                    self.wait(flow, (points, before, after, n));
                }
            }
        }
    }

    fn wait(&mut self, flow: WordKey, (points, before, after, n): Waiting) {
        let list = self.after_last.entry(flow).or_default();
        match list.iter_mut().find(|w| (w.0, w.1, w.2) == (points, before, after)) {
            Some(w) => w.3 += n,
            None => list.push((points, before, after, n)),
        }
        self.waiting |= after;
    }

    /// Per flow, the frames by the points that saw them and the points outside their span
    /// (0 for none); the waiting ones as the run ends (their points had stopped).
    fn sightings(&self) -> FxHashMap<WordKey, Vec<Sighted>> {
        let mut all: FxHashMap<WordKey, Vec<Sighted>> = FxHashMap::default();
        for (k, sets) in &self.seen_by {
            all.entry(*k).or_default().extend(sets.iter().copied());
        }
        for (k, list) in &self.after_last {
            all.entry(*k).or_default().extend(list.iter().map(|&(m, before, after, n)| (m, before | after, n)));
        }
        all
    }

    /// The points that saw a flow (with a mirror origin only: inputs' labels are the
    /// engine's).
    pub fn points_of(&self, k: &FlowKey) -> impl Iterator<Item = &Point> {
        let k = WordKey(*k);
        let mask = self.seen_by.get(&k).map_or(0, |sets| sets.iter().fold(0, |u, (m, _, _)| u | m))
            | self.after_last.get(&k).map_or(0, |list| list.iter().fold(0, |u, w| u | w.0));
        self.points
            .iter()
            .enumerate()
            .filter(move |(i, p)| p.origin.is_some() && mask & point_bit(*i as u16) != 0)
            .map(|(_, p)| p)
    }

    /// The hops, with the frames of flows seen at both points that `from` saw and `to` never
    /// did while it was capturing, the flows that lost most, and the frames `to` could not
    /// see because it was not capturing.
    pub fn hop_list(&self) -> Vec<Hop<'_>> {
        let sightings = self.sightings();
        self.hops
            .iter()
            .map(|(&(from, to), state)| {
                let flows = sightings.iter().map(|(k, sets)| (k.0, sets.as_slice()));
                let (outside, worst) = losses(flows, from, to);
                let missing = worst.iter().map(|(_, n)| n).sum();
                Hop { from, to, state, missing, worst, outside }
            })
            .collect()
    }

    /// `--edges`: keep what `merge` of captures cut in time needs ([`Log`]).
    pub fn keep_edges(&mut self) {
        self.edges.get_or_insert_with(Default::default);
    }

    /// Per flow, in key order, the frames counted by (points that saw them, points not yet
    /// capturing, points stopped, frames): the sightings `hop_list` reads, without joining the last two.
    pub fn sighting_sets(&self) -> Vec<(FlowKey, Vec<[u64; 4]>)> {
        let mut all: BTreeMap<FlowKey, Vec<[u64; 4]>> = BTreeMap::new();
        for (k, sets) in &self.seen_by {
            all.entry(k.0).or_default().extend(sets.iter().map(|&(m, before, n)| [m, before, 0, n]));
        }
        for (k, list) in &self.after_last {
            all.entry(k.0).or_default().extend(list.iter().map(|&(m, before, after, n)| [m, before, after, n]));
        }
        all.into_iter().collect()
    }
}

/// Over the flows seen at both points of the hop `from` → `to` (by their sightings): the frames
/// `to` could not see because it was not capturing, and per flow those `from` saw and `to`
/// never did while it was (flows that lost none left out), most first. One run's hops and
/// `merge`'s of captures cut in time both count them here.
pub fn losses<'a, K: Ord>(flows: impl Iterator<Item = (K, &'a [Sighted])>, from: u16, to: u16) -> (u64, Vec<(K, u64)>) {
    let (a, b) = (point_bit(from), point_bit(to));
    let mut outside = 0;
    let mut worst: Vec<(K, u64)> = Vec::new();
    for (k, sets) in flows {
        let union = sets.iter().fold(0, |u, (m, _, _)| u | m);
        if union & a == 0 || union & b == 0 {
            continue;
        }
        let (mut lost, mut out) = (0, 0);
        for &(_, o, n) in sets.iter().filter(|(m, _, _)| m & a != 0 && m & b == 0) {
            *if o & b != 0 { &mut out } else { &mut lost } += n;
        }
        outside += out;
        if lost > 0 {
            worst.push((k, lost));
        }
    }
    worst.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    (outside, worst)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use analyzer_common::summary::encap;

    /// A WRITE MIDDLE of PSN `psn` mirrored by switch `origin` (ERSPAN II), with ECN `ecn`.
    pub(crate) fn copy(psn: u32, origin: u8, ecn: u8) -> PacketSummary {
        let mut s = PacketSummary::zeroed();
        s.class = FrameClass::Roce as u8;
        (s.roce_version, s.ip_version, s.encap) = (2, 4, encap::ERSPAN_II);
        s.src_ip[..4].copy_from_slice(&[10, 0, 0, 1]);
        s.dst_ip[..4].copy_from_slice(&[10, 0, 0, 2]);
        s.origin_ip[..4].copy_from_slice(&[192, 0, 2, origin]);
        (s.dst_qp, s.udp_sport, s.opcode, s.psn, s.ecn) = (0x11, 49152, 0x07, psn, ecn);
        s
    }

    fn offer(v: &mut Vantage, ts_ns: u64, s: &PacketSummary) {
        v.offer(FrameMeta { ts_ns, source: 0 }, s, "port");
    }

    /// A frame resent while its first transmission is held is a second frame of the same
    /// identity: a copy from another switch matches the oldest one that switch has not sent,
    /// the next copy the resend.
    #[test]
    fn copies_match_the_oldest_held_frame_of_their_identity() {
        let mut v = Vantage::new(1_000, 10);
        offer(&mut v, 100, &copy(5, 1, 2));
        offer(&mut v, 110, &copy(5, 1, 2));
        offer(&mut v, 150, &copy(5, 2, 3));
        offer(&mut v, 170, &copy(5, 2, 2));
        assert_eq!(v.copies, 2);
        let hop = &v.hops[&(0, 1)];
        assert_eq!((hop.matched, hop.ce_marked), (2, 1));
        assert_eq!(hop.latency.values(), [50, 60]);
        let held: Vec<_> = std::iter::from_fn(|| v.due(None)).map(|h| (h.meta.ts_ns, h.points, h.ecn)).collect();
        assert_eq!(held, [(100, 0b11, 3), (110, 0b11, 2)]);
        assert_eq!(v.hop_list()[0].missing, 0);
    }

    /// Frames that left the window leave their index entries behind: taken over by the next
    /// frame of their identity, and swept when they outnumber the held frames, so that the
    /// index stays within twice the window's frames and matching goes on.
    #[test]
    fn index_entries_of_frames_gone_are_taken_over_and_swept() {
        let mut v = Vantage::new(100, 10);
        let mut most = 0;
        for psn in 0..20_000u32 {
            let ts = 1_000 + psn as u64 * 30;
            offer(&mut v, ts, &copy(psn, 1, 0));
            while v.due(Some(ts)).is_some() {}
            most = most.max(v.by_identity.len());
        }
        assert!(most <= 2 * v.peak_held + SWEEP_SLACK + 1, "index of {most} entries for {} held", v.peak_held);
        // PSN 3 again, long after: a new frame (its entry stale or swept), and its copy matches it.
        offer(&mut v, 10_000_000, &copy(3, 1, 0));
        offer(&mut v, 10_000_040, &copy(3, 2, 0));
        // A copy of PSN 19 999 long after its frame left (its entry stale): a frame of its own.
        offer(&mut v, 10_000_050, &copy(19_999, 2, 0));
        assert_eq!(v.copies, 1);
        assert_eq!(v.hops[&(0, 1)].matched, 1);
    }

    /// A hop counts missing only frames its second point could have seen: those before the
    /// point's first frame or after its last are outside the span; a point idle for a while
    /// and seen again was capturing, so what it did not see meanwhile is missing.
    #[test]
    fn only_frames_within_both_spans_are_missing() {
        let mut v = Vantage::new(100, 10);
        // Switch 1 sees PSN 0..30 every µs; switch 2 from PSN 5 (5 µs + 50 ns) to PSN 9, idle
        // for PSN 10..14 (missing: it is seen again), then PSN 15..19, and stops.
        for psn in 0..30u32 {
            let t = 1_000 * psn as u64;
            offer(&mut v, t, &copy(psn, 1, 0));
            if (5..10).contains(&psn) || (15..20).contains(&psn) {
                offer(&mut v, t + 50, &copy(psn, 2, 0));
            }
            while v.due(Some(t + 50)).is_some() {}
        }
        while v.due(None).is_some() {}
        let hop = v.hop_list().into_iter().find(|h| (h.from, h.to) == (0, 1)).unwrap();
        assert_eq!((hop.state.matched, hop.missing, hop.outside), (10, 5, 5 + 10));
        assert_eq!((v.points[1].first_ns, v.points[1].last_ns), (5_050, 19_050));
    }
}
