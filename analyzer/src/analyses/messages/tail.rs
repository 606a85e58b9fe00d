//! The tail explained. Each size class keeps its slowest completed messages ([`Slowest`], at
//! most [`KEEP`]); when a report is built, those slower than the class's threshold (its p99, or
//! `--tail-threshold`) are laid over what the other analyses saw in their time, each cause with
//! the time it overlapped:
//!
//! - `pause`: PFC/PAUSE intervals of its priority (its outer PCP, or `--dscp-priority` of its
//!   DSCP when untagged; any priority when neither tells), with a topology only the pauses of
//!   links on its path, else any seen here;
//! - `rate_cut`: its flow's DCQCN cuts (from a CNP's reaction to the rate's recovery);
//! - `retransmission`: a NAK or a retransmitted PSN of its span (from the first one on);
//!   `rnr`: an RNR NAK (from it on);
//! - `incast`: an incast episode at its destination;
//! - `queueing`: with several vantage points, the windows in which a hop its flow crossed ran
//!   above that hop's p90 latency for most of its frames ([`super::super::queueing`]);
//! - `capture_gap`: PSNs of its span this capture did not hold, not retransmitted (its whole
//!   time: when they went missing is not known);
//! - `unexplained`: none of these.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use analyzer_common::flow::FlowKey;

use super::super::keys::Addr;
use super::super::topology::Node;
use super::kept::{Msg, mark};

/// Slowest messages kept per size class. The tail of a class of up to 100 × this many
/// messages is explained whole; beyond, its slowest are (the report says how many).
pub const KEEP: usize = 4096;

/// A completed message kept for the tail.
#[derive(Debug, Clone)]
pub struct Kept {
    pub key: FlowKey,
    pub msg: Msg,
    pub end_ns: u64,
}

impl Kept {
    pub fn mct_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.msg.start_ns)
    }
}

/// The slowest messages of a class: a min-heap of (MCT, arrival) over their slots.
#[derive(Debug, Clone, Default)]
pub struct Slowest {
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slots: Vec<Kept>,
    arrivals: u64,
}

impl Slowest {
    pub fn offer(&mut self, k: Kept) {
        let mct = k.mct_ns();
        self.arrivals += 1;
        if self.slots.len() < KEEP {
            self.heap.push(Reverse((mct, self.arrivals, self.slots.len())));
            self.slots.push(k);
            return;
        }
        let Some(&Reverse((least, _, at))) = self.heap.peek() else { return };
        if mct > least {
            self.heap.pop();
            self.slots[at] = k;
            self.heap.push(Reverse((mct, self.arrivals, at)));
        }
    }

    /// Those at or above `threshold_ns`, slowest first (ties by arrival).
    pub fn at_least(&self, threshold_ns: u64) -> Vec<&Kept> {
        let mut v: Vec<(u64, u64, &Kept)> = self
            .heap
            .iter()
            .map(|Reverse((mct, seq, at))| (*mct, *seq, &self.slots[*at]))
            .filter(|(mct, _, _)| *mct >= threshold_ns)
            .collect();
        v.sort_unstable_by_key(|(mct, seq, _)| (Reverse(*mct), *seq));
        v.into_iter().map(|(_, _, k)| k).collect()
    }
}

/// The causes, in the order a report lists them.
pub const CAUSES: [&str; 8] =
    ["pause", "rate_cut", "retransmission", "rnr", "incast", "queueing", "capture_gap", "unexplained"];

/// A hop between two vantage points: its name, the windows it queued in, the flows that
/// crossed it.
#[derive(Debug, Clone)]
pub struct Queued<'a> {
    pub name: String,
    pub intervals: Vec<(u64, u64)>,
    pub flows: &'a rustc_hash::FxHashMap<FlowKey, u64>,
}

/// A pause timer's intervals, its sender's name and, with a topology, the link it paused
/// (the sender, and the peer it stopped: a flow from the peer to the sender crossed it).
#[derive(Debug, Clone)]
pub struct Paused {
    pub name: String,
    pub priority: u8,
    pub intervals: Vec<(u64, u64)>,
    pub link: Option<(Node, Node)>,
}

/// What the other analyses saw, as intervals to lay messages over.
pub struct Context<'a> {
    pub pauses: Vec<Paused>,
    /// A flow's path through the topology (none: no topology, or hosts it does not place;
    /// every pause seen here then counts).
    pub path: &'a dyn Fn(&FlowKey) -> Option<Vec<Node>>,
    /// A flow's DCQCN cuts.
    pub cuts: &'a dyn Fn(&FlowKey) -> Vec<(u64, u64)>,
    /// Incast episodes per destination (16-byte address, IP version).
    pub incast: BTreeMap<Addr, Vec<(u64, u64)>>,
    /// DSCP → priority for untagged frames (`--dscp-priority`).
    pub dscp_priority: &'a BTreeMap<u8, u8>,
    /// Hops between vantage points that queued.
    pub queued: Vec<Queued<'a>>,
}

/// Incast episodes `(destination, start, end)` per destination as the tail reads them (an
/// episode of no length lasts 1 ns).
pub fn incast_of(episodes: impl IntoIterator<Item = (Addr, u64, u64)>) -> BTreeMap<Addr, Vec<(u64, u64)>> {
    let mut out: BTreeMap<Addr, Vec<(u64, u64)>> = BTreeMap::new();
    for (dst, start, end) in episodes {
        out.entry(dst).or_default().push((start, end.max(start + 1)));
    }
    out
}

/// A message's causes: (cause index into [`CAUSES`], overlap), the pause source and the hop
/// that overlapped it most.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Explained {
    pub causes: Vec<(usize, u64)>,
    pub paused_by: Option<String>,
    pub queued_at: Option<String>,
}

/// The time intervals `iv` hold within `[s, e]`.
fn overlap(iv: &[(u64, u64)], s: u64, e: u64) -> u64 {
    iv.iter().map(|&(a, b)| b.min(e).saturating_sub(a.max(s))).sum()
}

/// Of `sources` (intervals and what they came from), the time their union overlaps `[s, e]`,
/// and the source that overlapped it most (the first of equals): a message's pauses, and the
/// hops that queued while it crossed them.
fn most<'a, N: Copy>(sources: impl Iterator<Item = (&'a [(u64, u64)], N)>, s: u64, e: u64) -> (u64, Option<N>) {
    let mut all = Vec::new();
    let mut best: Option<(u64, N)> = None;
    for (iv, n) in sources {
        let o = overlap(iv, s, e);
        if o > 0 {
            all.extend_from_slice(iv);
            if best.is_none_or(|(b, _)| o > b) {
                best = Some((o, n));
            }
        }
    }
    (overlap(&super::super::tree::union(all), s, e), best.map(|(_, n)| n))
}

/// What `k` overlapped ([`Explained`]).
pub fn explain(k: &Kept, cx: &Context) -> Explained {
    let (s, e) = (k.msg.start_ns, k.end_ns);
    let m = &k.msg;
    let mut out = Vec::new();
    // Pause: the union of the pauses of its priority (on its path).
    let priority = if m.pcp < 8 { Some(m.pcp) } else { cx.dscp_priority.get(&(m.dscp & 63)).copied() };
    let path = (cx.path)(&k.key);
    let all_priorities = super::super::pause::ALL_PRIORITIES;
    let ours = |pz: &&Paused| {
        let on_path = match (&path, pz.link) {
            (Some(path), Some(link)) => super::super::topology::crosses(path, link),
            _ => true,
        };
        (pz.priority == all_priorities || priority.is_none_or(|q| q == pz.priority)) && on_path
    };
    let (paused, by) = most(cx.pauses.iter().filter(ours).map(|pz| (pz.intervals.as_slice(), pz)), s, e);
    if paused > 0 {
        out.push((0, paused));
    }
    let paused_by = by.map(|pz| match pz.priority {
        p if p == all_priorities => format!("802.3x PAUSE from {}", pz.name),
        p => format!("priority {p} from {}", pz.name),
    });
    let cut = overlap(&super::super::tree::union((cx.cuts)(&k.key)), s, e);
    if cut > 0 {
        out.push((1, cut));
    }
    if m.marks & (mark::RETRANSMITTED | mark::NAK) != 0 {
        out.push((2, e.saturating_sub(m.retx_ns().unwrap_or(s))));
    }
    if m.marks & mark::RNR != 0 {
        out.push((3, e.saturating_sub(m.rnr_ns().unwrap_or(s))));
    }
    if let Some(iv) = cx.incast.get(&(k.key.dst, k.key.ip_version)) {
        let o = overlap(iv, s, e);
        if o > 0 {
            out.push((4, o));
        }
    }
    // Queueing: the hops its flow crossed, while they queued.
    let crossed = cx.queued.iter().filter(|q| q.flows.contains_key(&k.key));
    let (queued, at) = most(crossed.map(|q| (q.intervals.as_slice(), q)), s, e);
    if queued > 0 {
        out.push((5, queued));
    }
    if m.marks & mark::GAP != 0 && m.marks & (mark::RETRANSMITTED | mark::NAK) == 0 {
        out.push((6, e - s));
    }
    if out.is_empty() {
        out.push((7, 0));
    }
    Explained { causes: out, paused_by, queued_at: at.map(|q| q.name.clone()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(mct: u64, seq: u32) -> Kept {
        let msg = Msg::sent(super::super::kept::Kind::Send, seq, 1000, 1, 3, 26);
        Kept { key: FlowKey::default(), msg, end_ns: 1000 + mct }
    }

    #[test]
    fn keeps_the_slowest() {
        let mut s = Slowest::default();
        for i in 0..(KEEP as u64 + 100) {
            s.offer(kept(i, i as u32));
        }
        let top = s.at_least(0);
        assert_eq!(top.len(), KEEP);
        assert_eq!((top[0].mct_ns(), top[KEEP - 1].mct_ns()), (KEEP as u64 + 99, 100));
        assert_eq!(s.at_least(KEEP as u64 + 98).len(), 2);
    }

    #[test]
    fn overlaps_by_hand() {
        let none = |_: &FlowKey| Vec::new();
        let no_path = |_: &FlowKey| None;
        let map = BTreeMap::new();
        let paused = |name: &str, priority, intervals| Paused { name: name.into(), priority, intervals, link: None };
        let mut cx = Context {
            // Priority 3 paused 1500..2500 from sw1 and 1800..2200 from sw2 (one union: 1000 ns
            // inside the message's 1000..3000), priority 5 (not its) 1000..3000.
            pauses: vec![
                paused("sw1", 3, vec![(1500, 2500)]),
                paused("sw2", 3, vec![(1800, 2200)]),
                paused("sw3", 5, vec![(1000, 3000)]),
            ],
            path: &no_path,
            cuts: &none,
            incast: BTreeMap::new(),
            dscp_priority: &map,
            queued: Vec::new(),
        };
        let k = kept(2000, 1);
        let x = explain(&k, &cx);
        assert_eq!(x.causes, vec![(0, 1000)]);
        assert_eq!(x.paused_by.as_deref(), Some("priority 3 from sw1"));
        cx.pauses.clear();
        let mut m = k.clone();
        m.msg.note_retx(2500, mark::NAK);
        m.msg.marks |= mark::GAP;
        assert_eq!(explain(&m, &cx).causes, vec![(2, 500)], "a gap that was retransmitted is loss, not the capture");
        assert_eq!(explain(&k, &cx).causes, vec![(7, 0)]);
        // Queueing on a hop its flow crossed (1500..2200 and 2100..2600 on two hops: 1100 ns
        // together), none from a hop it did not cross.
        let crossed: rustc_hash::FxHashMap<FlowKey, u64> = [(FlowKey::default(), 3)].into_iter().collect();
        let other = rustc_hash::FxHashMap::default();
        let hop = |name: &str, intervals, flows| Queued { name: name.into(), intervals, flows };
        cx.queued = vec![
            hop("leaf→spine", vec![(1500, 2200)], &crossed),
            hop("spine→leaf", vec![(2100, 2600)], &crossed),
            hop("elsewhere", vec![(1000, 3000)], &other),
        ];
        let x = explain(&k, &cx);
        assert_eq!(x.causes, vec![(5, 1100)]);
        assert_eq!(x.queued_at.as_deref(), Some("leaf→spine"));
    }
}
