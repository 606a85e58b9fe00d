//! PFC deadlocks: the strongly connected parts of a priority's active pause graph that stay
//! active for at least `--deadlock-min`.
//!
//! Enumerating every simple cycle of the pause graph grows without bound: a fabric-wide storm
//! over a full mesh of ten switches has over a million of them. What an operator needs is the
//! part of the fabric that waits on itself: the devices that pause each other in a circle,
//! directly or round any number of hops. So the pause graph is swept through time (its edges
//! change only where an interval starts or ends); between two such moments its strongly
//! connected parts of two devices or more are found in time linear in the graph (Tarjan); a part
//! that shares a device with one of the moment before continues that deadlock (its devices and
//! links are the union over its life). A deadlock lasting `--deadlock-min` is reported with its
//! devices, its links, its start and duration, and one cycle through it as the example (the
//! shortest back to its smallest device). Memory is what one moment's graph needs and the
//! deadlocks open at that moment; at most [`MAX_LISTED_DEADLOCKS`] are listed, the rest counted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::topology::Node;
use crate::model::Deadlock;

/// Deadlocks listed in a report at most (over all priorities); the rest are counted in
/// `congestion_tree.deadlocks_omitted`.
pub const MAX_LISTED_DEADLOCKS: usize = 1000;

/// A pause edge of one priority: who pauses whom, and when ([start, end) intervals, sorted).
pub struct Edge<'a> {
    pub from: Node,
    pub to: Node,
    pub intervals: &'a [(u64, u64)],
}

/// A deadlock while it lasts: its devices and links so far (dense indices), its start, and the
/// example cycle of its first moment.
struct Open {
    nodes: BTreeSet<usize>,
    links: BTreeSet<usize>,
    start: u64,
    example: Vec<usize>,
}

/// The deadlocks of priority `p` lasting at least `min_ns`, named by `name`; at most `room`
/// listed, the others counted (the second value).
pub fn find(
    p: u8,
    edges: &[Edge<'_>],
    min_ns: u64,
    name: &dyn Fn(Node) -> String,
    room: usize,
) -> (Vec<Deadlock>, u64) {
    let mut nodes: Vec<Node> = edges.iter().flat_map(|e| [e.from, e.to]).collect();
    nodes.sort();
    nodes.dedup();
    let index = |n: Node| nodes.binary_search(&n).expect("every end is a node");
    let ends: Vec<(usize, usize)> = edges.iter().map(|e| (index(e.from), index(e.to))).collect();
    // Moments where the graph changes: an edge's interval starts (+) or ends (-).
    let mut moments: BTreeMap<u64, Vec<(usize, bool)>> = BTreeMap::new();
    for (i, e) in edges.iter().enumerate() {
        for &(s, t) in e.intervals.iter().filter(|(s, t)| s < t) {
            moments.entry(s).or_default().push((i, true));
            moments.entry(t).or_default().push((i, false));
        }
    }
    let mut active = vec![0u32; edges.len()];
    let mut open: Vec<Open> = Vec::new();
    let mut found = Found { p, min_ns, room, listed: Vec::new(), omitted: 0 };
    for (&at, changes) in &moments {
        for &(i, starts) in changes {
            active[i] = if starts { active[i] + 1 } else { active[i].saturating_sub(1) };
        }
        let parts = strong_parts(nodes.len(), &ends, &active);
        open = carry(open, parts, &ends, &active, at, &mut found, &|v| name(nodes[v]));
    }
    // Every interval ends (start < end), so at the last moment no edge is active and every
    // deadlock has closed.
    debug_assert!(open.is_empty());
    (found.listed, found.omitted)
}

/// The deadlocks found so far, within the room to list them.
struct Found {
    p: u8,
    min_ns: u64,
    room: usize,
    listed: Vec<Deadlock>,
    omitted: u64,
}

impl Found {
    /// A deadlock that ended at `end`: listed (or counted) when it lasted long enough.
    fn close(&mut self, o: Open, end: u64, name: &dyn Fn(usize) -> String, ends: &[(usize, usize)]) {
        let duration_ns = end.saturating_sub(o.start);
        if duration_ns < self.min_ns {
            return;
        }
        if self.listed.len() >= self.room {
            self.omitted += 1;
            return;
        }
        self.listed.push(Deadlock {
            priority: self.p,
            cycle: o.example.iter().map(|&v| name(v)).collect(),
            start_ns: o.start,
            duration_ns,
            devices: o.nodes.iter().map(|&v| name(v)).collect(),
            links: o.links.iter().map(|&e| [name(ends[e].0), name(ends[e].1)]).collect(),
            evidence: None,
        });
    }
}

/// The deadlocks open after the moment `at`: each part continues the open deadlocks it shares
/// a device with (merged into one), or starts one; an open deadlock no part continues ends.
fn carry(
    open: Vec<Open>,
    parts: Vec<Vec<usize>>,
    ends: &[(usize, usize)],
    active: &[u32],
    at: u64,
    found: &mut Found,
    name: &dyn Fn(usize) -> String,
) -> Vec<Open> {
    let mut owner: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, o) in open.iter().enumerate() {
        owner.extend(o.nodes.iter().map(|&v| (v, i)));
    }
    let mut open: Vec<Option<Open>> = open.into_iter().map(Some).collect();
    // Each active link inside a part, in one pass over the links.
    let mut part_of: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, part) in parts.iter().enumerate() {
        part_of.extend(part.iter().map(|&v| (v, i)));
    }
    let mut part_links: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); parts.len()];
    for (e, &(a, b)) in ends.iter().enumerate() {
        if active[e] > 0
            && let (Some(&pa), Some(&pb)) = (part_of.get(&a), part_of.get(&b))
            && pa == pb
        {
            part_links[pa].insert(e);
        }
    }
    let mut next = Vec::new();
    for (part, links) in parts.into_iter().zip(part_links) {
        let set: BTreeSet<usize> = part.iter().copied().collect();
        let before: BTreeSet<usize> = part.iter().filter_map(|v| owner.get(v).copied()).collect();
        let mut merged: Option<Open> = None;
        for i in before {
            let Some(o) = open[i].take() else { continue };
            merged = Some(match merged {
                None => o,
                Some(mut m) => {
                    m.start = m.start.min(o.start);
                    m.nodes.extend(o.nodes);
                    m.links.extend(o.links);
                    m
                }
            });
        }
        let mut d = merged.unwrap_or_else(|| Open {
            nodes: BTreeSet::new(),
            links: BTreeSet::new(),
            start: at,
            example: example_cycle(&set, ends, &links),
        });
        d.nodes.extend(set);
        d.links.extend(links);
        next.push(d);
    }
    for o in open.into_iter().flatten() {
        found.close(o, at, name, ends);
    }
    next
}

/// The strongly connected parts of two nodes or more of the graph of the active edges.
fn strong_parts(n: usize, ends: &[(usize, usize)], active: &[u32]) -> Vec<Vec<usize>> {
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, &(a, b)) in ends.iter().enumerate() {
        if active[e] > 0 && a != b {
            adj[a].push(b);
        }
    }
    strongly_connected(&adj)
}

/// The strongly connected parts of two nodes or more of a graph given by each node's
/// successors, each sorted (Tarjan's algorithm, without recursion: any ring length, in time
/// linear in the graph). `cargo xtask layers` finds file circles with it too.
pub fn strongly_connected(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adj.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut parts, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != usize::MAX || adj[root].is_empty() {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on[root] = true;
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if let Some(&w) = adj[v].get(*k) {
                *k += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut part = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    part.push(w);
                    if w == v {
                        break;
                    }
                }
                if part.len() >= 2 {
                    part.sort_unstable();
                    parts.push(part);
                }
            }
        }
    }
    parts
}

/// A cycle through a strongly connected part: from its smallest node, the shortest way back to
/// it over the part's links (breadth first), in order.
fn example_cycle(part: &BTreeSet<usize>, ends: &[(usize, usize)], links: &BTreeSet<usize>) -> Vec<usize> {
    let Some(&start) = part.iter().next() else { return Vec::new() };
    let mut adj: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &e in links {
        adj.entry(ends[e].0).or_default().push(ends[e].1);
    }
    let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for &w in adj.get(&v).into_iter().flatten() {
            if prev.contains_key(&w) {
                continue;
            }
            prev.insert(w, v);
            if w == start {
                break 'search;
            }
            queue.push_back(w);
        }
    }
    let mut cycle = Vec::new();
    let mut at = start;
    while let Some(&p) = prev.get(&at) {
        cycle.push(p);
        at = p;
        if at == start {
            break;
        }
    }
    cycle.reverse();
    cycle
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn dev(i: usize) -> Node {
        Node::Device(i)
    }

    fn name(n: Node) -> String {
        match n {
            Node::Device(i) => format!("sw{i}"),
            Node::Host(i) => format!("h{i}"),
        }
    }

    /// Edges a → b for each pair, all paused over `iv`.
    fn edges<'a>(pairs: &[(usize, usize)], iv: &'a [(u64, u64)]) -> Vec<Edge<'a>> {
        pairs.iter().map(|&(a, b)| Edge { from: dev(a), to: dev(b), intervals: iv }).collect()
    }

    fn ring(n: usize) -> Vec<(usize, usize)> {
        (0..n).map(|i| (i, (i + 1) % n)).collect()
    }

    #[test]
    fn a_ring_is_one_deadlock_for_the_time_all_its_links_are_paused() {
        // sw0 → sw1 from 0 to 30 ms, sw1 → sw2 from 5 to 40, sw2 → sw0 from 10 to 25 (and again
        // 50 to 70, when sw1 → sw2 is quiet): all three together from 10 to 25 ms.
        let (a, b, c) = ([(0, 30 * MS)], [(5 * MS, 40 * MS)], [(10 * MS, 25 * MS), (50 * MS, 70 * MS)]);
        let es = vec![
            Edge { from: dev(0), to: dev(1), intervals: &a },
            Edge { from: dev(1), to: dev(2), intervals: &b },
            Edge { from: dev(2), to: dev(0), intervals: &c },
        ];
        let (d, omitted) = find(3, &es, 10 * MS, &name, MAX_LISTED_DEADLOCKS);
        assert_eq!(omitted, 0);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].priority, d[0].start_ns, d[0].duration_ns), (3, 10 * MS, 15 * MS));
        assert_eq!(d[0].cycle, ["sw0", "sw1", "sw2"]);
        assert_eq!(d[0].devices, ["sw0", "sw1", "sw2"]);
        assert_eq!(d[0].links.len(), 3);
        // Shorter than --deadlock-min: none.
        assert!(find(3, &es, 16 * MS, &name, MAX_LISTED_DEADLOCKS).0.is_empty());
    }

    #[test]
    fn a_full_mesh_paused_both_ways_is_one_deadlock_not_a_million_cycles() {
        let n = 10;
        let pairs: Vec<(usize, usize)> =
            (0..n).flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b))).collect();
        let iv = [(0, 20 * MS)];
        let (d, omitted) = find(0, &edges(&pairs, &iv), 10 * MS, &name, MAX_LISTED_DEADLOCKS);
        assert_eq!((d.len(), omitted), (1, 0));
        assert_eq!(d[0].devices.len(), 10);
        assert_eq!(d[0].links.len(), 90);
        assert_eq!(d[0].duration_ns, 20 * MS);
        // The shortest cycle back to the smallest device: two devices pausing each other.
        assert_eq!(d[0].cycle, ["sw0", "sw1"]);
    }

    #[test]
    fn rings_of_any_length_are_found() {
        for n in [2, 64, 65, 1000] {
            let iv = [(0, 20 * MS)];
            let (d, _) = find(0, &edges(&ring(n), &iv), 10 * MS, &name, MAX_LISTED_DEADLOCKS);
            assert_eq!(d.len(), 1, "ring of {n}");
            assert_eq!(d[0].cycle.len(), n, "ring of {n}");
            assert_eq!(d[0].devices.len(), n);
        }
        // A chain is no deadlock.
        let iv = [(0, 20 * MS)];
        let chain: Vec<(usize, usize)> = (0..10).map(|i| (i, i + 1)).collect();
        assert!(find(0, &edges(&chain, &iv), 0, &name, MAX_LISTED_DEADLOCKS).0.is_empty());
    }

    #[test]
    fn a_deadlock_that_grows_keeps_its_start_and_disjoint_ones_are_apart() {
        // sw0 ⇄ sw1 from 0 to 40 ms; sw1 ⇄ sw2 joins from 10 to 40; sw5 ⇄ sw6 alone, 0 to 15.
        let (long, late, short) = ([(0, 40 * MS)], [(10 * MS, 40 * MS)], [(0, 15 * MS)]);
        let es = vec![
            Edge { from: dev(0), to: dev(1), intervals: &long },
            Edge { from: dev(1), to: dev(0), intervals: &long },
            Edge { from: dev(1), to: dev(2), intervals: &late },
            Edge { from: dev(2), to: dev(1), intervals: &late },
            Edge { from: dev(5), to: dev(6), intervals: &short },
            Edge { from: dev(6), to: dev(5), intervals: &short },
        ];
        let (mut d, _) = find(1, &es, 10 * MS, &name, MAX_LISTED_DEADLOCKS);
        d.sort_by_key(|x| x.devices.clone());
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            (d[0].devices.clone(), d[0].start_ns, d[0].duration_ns),
            (vec!["sw0".into(), "sw1".into(), "sw2".into()], 0, 40 * MS)
        );
        assert_eq!(
            (d[1].devices.clone(), d[1].start_ns, d[1].duration_ns),
            (vec!["sw5".into(), "sw6".into()], 0, 15 * MS)
        );
    }

    #[test]
    fn past_the_room_deadlocks_are_counted_not_listed() {
        let pairs: Vec<(usize, usize)> = (0..1500).flat_map(|i| [(2 * i, 2 * i + 1), (2 * i + 1, 2 * i)]).collect();
        let iv = [(0, 20 * MS)];
        let (d, omitted) = find(0, &edges(&pairs, &iv), 10 * MS, &name, 1000);
        assert_eq!((d.len(), omitted), (1000, 500));
    }
}
