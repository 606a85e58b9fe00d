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
use crate::engine::FrameMeta;
// A point's bit in a set of points: beyond 64 points they share the last bit, as inputs do.
use crate::engine::flows::source_bit as point_bit;

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
}

/// A frame held for the match window: its first copy (with the last copy's ECN), the points
/// that saw it and where the copies came from.
#[derive(Debug, Clone)]
pub struct Held {
    pub meta: FrameMeta,
    pub summary: PacketSummary,
    /// Every copy after the first, as the capture counts it.
    pub copies: SmallVec<[Copy; 1]>,
    /// The key of its identity in `by_identity` ([`id_key`]), for a RoCE or CNP frame (its
    /// identity is its summary's, [`FrameId::of`]).
    key: Option<u64>,
    /// Points that saw it (bit per point) and (point, time, ECN) per sighting.
    points: u64,
    sightings: SmallVec<[(u16, u64, u8); 2]>,
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
    /// Frames matched per flow.
    pub flows: FxHashMap<FlowKey, u64>,
    /// From the first frame CE-marked between the points on: matched frames and those marked
    /// between, per point of time (where marking starts, and how it goes on).
    pub marking: Option<Box<super::dcqcn::Series>>,
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
    /// Sequence number of `held[0]`.
    front: u64,
    /// Held frames by the key of their identity ([`id_key`]), oldest first (sequence
    /// numbers); a frame's identity is compared with the held one's. A 64-bit key and one
    /// lookup a frame each way: every mirrored copy looks here and every held frame leaves,
    /// and the four lookups of the 48-byte identity were ≈ 30 % of the time on a capture of
    /// mirrored copies (BENCHMARKS.md).
    by_identity: FxHashMap<u64, SmallVec<[u64; 1]>>,
    pub hops: BTreeMap<(u16, u16), HopState>,
    /// Per flow: frames counted by the set of points that saw them.
    seen_by: FxHashMap<WordKey, SmallVec<[(u64, u64); 2]>>,
    /// Most frames held at once (the memory the matching needed).
    pub peak_held: usize,
    /// Copies folded into a first sighting.
    pub copies: u64,
}

/// A flow's key hashed as its five 8-byte words (the derived hash feeds its arrays byte by
/// byte with their lengths). With it the hash-map entries went from 14 % to 8 % of a mirror
/// port's agent (`perf record`, 195 k copies/s): `seen_by` takes one for every frame leaving
/// the window; the kernel table's hash of the key ([`analyzer_common::table::hash`]), tried
/// in its place, measured 21 %. Only the map's order depends on it, and nothing here reads
/// that order unsorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WordKey(FlowKey);

impl std::hash::Hash for WordKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let k = &self.0;
        let half = |a: &[u8; 16], i: usize| u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        state.write_u64(half(&k.src, 0));
        state.write_u64(half(&k.src, 8));
        state.write_u64(half(&k.dst, 0));
        state.write_u64(half(&k.dst, 8));
        state.write_u64(k.dst_qp as u64 | (k.udp_sport as u64) << 32 | (k.ip_version as u64) << 48);
    }
}

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
            front: 0,
            by_identity: FxHashMap::default(),
            hops: BTreeMap::new(),
            seen_by: FxHashMap::default(),
            peak_held: 0,
            copies: 0,
        }
    }

    /// Whether frames go through the match window (several inputs, or mirrored copies).
    pub fn active(&self) -> bool {
        self.active
    }

    pub fn activate(&mut self) {
        self.active = true;
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
            let addr = crate::report::model::addr::addr_string(if v4 { 4 } else { 6 }, &s.origin_ip);
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
        self.points.push(Point { name, label: label.into(), origin, frames: 0 });
        let i = (self.points.len() - 1) as u16;
        self.point_index.insert(key, i);
        i
    }

    /// Takes one frame (in time order); frames whose window has closed are then due.
    pub fn offer(&mut self, meta: FrameMeta, s: &PacketSummary, label: &str) {
        let point = self.point(meta.source, label, s);
        self.points[point as usize].frames += 1;
        let bit = point_bit(point);
        let id = matches!(s.class(), FrameClass::Roce | FrameClass::Cnp).then(|| FrameId::of(s));
        let key = id.as_ref().map(id_key);
        let seq = self.front + self.held.len() as u64;
        if let (Some(id), Some(key)) = (id, key) {
            // One lookup: the held frames of this key, or a place for this one.
            let seqs = match self.by_identity.entry(key) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(SmallVec::from_slice(&[seq]));
                    None
                }
                std::collections::hash_map::Entry::Occupied(o) => Some(o.into_mut()),
            };
            let window = self.window_ns;
            let front = self.front;
            let held = &self.held;
            // Within one input only mirrored copies match each other (as the XDP program
            // matches them live); across inputs every frame does.
            let found = seqs.as_ref().and_then(|seqs| {
                seqs.iter().copied().find(|&q| {
                    let h = &held[(q - front) as usize];
                    let comparable = h.meta.source != meta.source || (h.summary.encap != 0 && s.encap != 0);
                    comparable
                        && FrameId::of(&h.summary) == id
                        && h.points & bit == 0
                        && meta.ts_ns.saturating_sub(h.meta.ts_ns) <= window
                })
            });
            if found.is_none()
                && let Some(seqs) = seqs
            {
                seqs.push(seq);
            }
            if let Some(seq) = found {
                let h = &mut self.held[(seq - front) as usize];
                self.copies += 1;
                let ecn = s.ecn & 3;
                let flow = FlowKey::from_summary(&h.summary);
                let w = meta.ts_ns / self.point_ns;
                for &(q, tq, ecn_q) in &h.sightings {
                    let hop = self.hops.entry((q, point)).or_default();
                    hop.matched += 1;
                    let marked = ecn_q != 3 && ecn == 3;
                    hop.ce_marked += marked as u64;
                    if marked && hop.marking.is_none() {
                        hop.marking = Some(Box::new(super::dcqcn::Series::new(w)));
                    }
                    if let Some(m) = &mut hop.marking {
                        m.add(w, 0, marked);
                    }
                    hop.latency.push(meta.ts_ns.saturating_sub(tq));
                    *hop.flows.entry(flow).or_default() += 1;
                }
                h.sightings.push((point, meta.ts_ns, ecn));
                h.points |= bit;
                h.summary.ecn = ecn;
                h.copies.push(Copy {
                    source: meta.source,
                    frame_len: s.frame_len,
                    encap: s.encap != 0,
                    cut: s.cut != 0,
                });
                return;
            }
        }
        self.held.push_back(Held {
            meta,
            summary: *s,
            copies: SmallVec::new(),
            key,
            points: bit,
            sightings: SmallVec::from_slice(&[(point, meta.ts_ns, s.ecn & 3)]),
        });
        self.peak_held = self.peak_held.max(self.held.len());
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
        let seq = self.front;
        self.front += 1;
        if let Some(key) = h.key {
            if let std::collections::hash_map::Entry::Occupied(mut o) = self.by_identity.entry(key) {
                o.get_mut().retain(|s| *s != seq);
                if o.get().is_empty() {
                    o.remove();
                }
            }
            let sets = self.seen_by.entry(WordKey(FlowKey::from_summary(&h.summary))).or_default();
            match sets.iter_mut().find(|(m, _)| *m == h.points) {
                Some((_, n)) => *n += 1,
                None => sets.push((h.points, 1)),
            }
        }
        Some(h)
    }

    /// The points that saw a flow (with a mirror origin only: inputs' labels are the
    /// engine's).
    pub fn points_of(&self, k: &FlowKey) -> impl Iterator<Item = &Point> {
        let mask = self.seen_by.get(&WordKey(*k)).map_or(0, |sets| sets.iter().fold(0, |u, (m, _)| u | m));
        self.points
            .iter()
            .enumerate()
            .filter(move |(i, p)| p.origin.is_some() && mask & point_bit(*i as u16) != 0)
            .map(|(_, p)| p)
    }

    /// The hops, with the frames of flows seen at both points that `from` saw and `to` never
    /// did, and the flows that lost most.
    pub fn hop_list(&self) -> Vec<Hop<'_>> {
        self.hops
            .iter()
            .map(|(&(from, to), state)| {
                let (a, b) = (point_bit(from), point_bit(to));
                let mut worst: Vec<(FlowKey, u64)> = self
                    .seen_by
                    .iter()
                    .filter_map(|(k, sets)| {
                        let union = sets.iter().fold(0, |u, (m, _)| u | m);
                        if union & a == 0 || union & b == 0 {
                            return None;
                        }
                        let lost: u64 = sets.iter().filter(|(m, _)| m & a != 0 && m & b == 0).map(|(_, n)| n).sum();
                        (lost > 0).then_some((k.0, lost))
                    })
                    .collect();
                worst.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                let missing = worst.iter().map(|(_, n)| n).sum();
                Hop { from, to, state, missing, worst }
            })
            .collect()
    }
}
