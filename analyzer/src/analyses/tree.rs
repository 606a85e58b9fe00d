//! Congestion trees and deadlocks from the PFC pause intervals and the topology.
//!
//! A PFC frame from port MAC m of device D pauses the link peer of that port: the edge "D
//! pauses E" on that priority is active while the peer is paused (the sender's pause timer,
//! [`super::pause`]). Per priority, the active edges form the tree: roots pause others while
//! nobody pauses them. For each root, the likely congested egress is its port toward the
//! destination that received the most data bytes among the flows crossing the root while the
//! tree lived. Flows whose path (a shortest path of the topology; ties broken by name, since a
//! capture does not say which ECMP member a flow took) has a hop u → v while v pauses u are
//! paused: contributors when they go to a congested host, victims otherwise (head-of-line
//! blocking). A deadlock is a strongly connected part of a priority's active pause graph that
//! lasts at least `--deadlock-min` ([`super::deadlock`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use analyzer_common::flow::FlowKey;

use super::deadlock::{self, Edge, MAX_LISTED_DEADLOCKS};
use super::pause::{ALL_PRIORITIES, Pause};
use super::topology::{End, Node, Topology};
use crate::model::{CongestionTrees, FlowRef, PauseEdge, Root, Tree, cap_flows, flow_ref, mac_string};

/// A flow as the congestion trees see it: where it went, how much, when, on which priorities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpan {
    pub key: FlowKey,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// VLAN priorities the flow's frames carried, a bit each.
    pub pcps: u8,
    /// Some frames carried no VLAN tag (they may be on any priority).
    pub untagged: bool,
    /// The vantage points that saw it, (label, mirror origin): with a topology's `[[vantage]]`
    /// ties, the links it crossed.
    pub seen_at: Vec<(String, Option<String>)>,
}

/// Paused intervals [start, end).
pub type Intervals = Vec<(u64, u64)>;
/// A pause edge (priority, from, to) with its intervals.
type EdgeRef<'a> = (&'a (u8, Node, Node), &'a Intervals);

/// Union of sorted interval lists.
pub fn union(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Intersection of two sorted, disjoint interval lists.
pub fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let s = a[i].0.max(b[j].0);
        let e = a[i].1.min(b[j].1);
        if s < e {
            out.push((s, e));
        }
        if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
    }
    out
}

fn overlaps(v: &[(u64, u64)], s: u64, e: u64) -> bool {
    v.iter().any(|&(a, b)| a <= e && s < b)
}

fn ip_of(k: &FlowKey, src: bool) -> IpAddr {
    let b = if src { k.src } else { k.dst };
    if k.ip_version == 4 { IpAddr::from([b[0], b[1], b[2], b[3]]) } else { IpAddr::from(b) }
}

/// A flow placed in the topology.
struct Placed<'a> {
    key: &'a FlowKey,
    stats: &'a FlowSpan,
    dst: usize,
    path: Vec<Node>,
}

impl Placed<'_> {
    /// Whether the flow can be on `priority`: its VLAN PCP, or any priority when untagged.
    fn on(&self, priority: u8) -> bool {
        priority == ALL_PRIORITIES || self.stats.untagged || self.stats.pcps & (1 << priority) != 0
    }
    fn active(&self, s: u64, e: u64) -> bool {
        self.stats.first_ns <= e && s <= self.stats.last_ns
    }
}

/// Pause edges (priority, from, to) with their paused intervals (sorted, disjoint).
type Edges = BTreeMap<(u8, Node, Node), Vec<(u64, u64)>>;

pub fn build(pause: &Pause, topo: Option<&Topology>, flows: &[FlowSpan], deadlock_min_ns: u64) -> CongestionTrees {
    let mut out = CongestionTrees::default();
    let (edges, mut unresolved_roots) = pause_edges(pause, topo, &mut out.unresolved);
    let fabric = Fabric { topo, edges: &edges, placed: place(topo, flows) };
    let priorities: BTreeSet<u8> = edges.keys().map(|(p, _, _)| *p).chain(unresolved_roots.keys().copied()).collect();
    for p in priorities {
        let es: Vec<EdgeRef> = edges.iter().filter(|((q, _, _), _)| *q == p).collect();
        let unresolved = unresolved_roots.remove(&p).unwrap_or_default();
        let (start, end) = span(pause, p, &es, &unresolved);
        let (mut roots, congested) = fabric.roots(p, &es, start, end);
        roots.extend(unresolved.iter().map(|mac| Root {
            device: mac.clone(),
            congested_port: None,
            congested_host: None,
        }));
        let (mut contributors, mut victims) = fabric.paused_flows(p, &congested);
        let flows_omitted = cap_flows(&mut contributors) + cap_flows(&mut victims);
        let edges_json = es
            .iter()
            .map(|((_, f, t), iv)| PauseEdge {
                from: fabric.name(*f),
                to: fabric.name(*t),
                priority: p,
                first_ns: iv.first().map_or(0, |x| x.0),
                paused_ns: iv.iter().map(|(s, e)| e - s).sum(),
            })
            .collect();
        out.trees.push(Tree {
            priority: p,
            roots,
            edges: edges_json,
            contributors,
            victims,
            start_ns: start,
            end_ns: end,
            flows_omitted,
        });
        let room = MAX_LISTED_DEADLOCKS.saturating_sub(out.deadlocks.len());
        let pause_graph: Vec<Edge> =
            es.iter().map(|((_, f, t), iv)| Edge { from: *f, to: *t, intervals: iv }).collect();
        let (found, omitted) = deadlock::find(p, &pause_graph, deadlock_min_ns, &|n| fabric.name(n), room);
        out.deadlocks.extend(found);
        out.deadlocks_omitted += omitted;
    }
    out
}

/// The pause edges the topology resolves (a sender's port and the peer it pauses), and per
/// priority the senders it cannot place (also listed, sorted, in `unresolved`).
fn pause_edges(
    pause: &Pause,
    topo: Option<&Topology>,
    unresolved: &mut Vec<String>,
) -> (Edges, BTreeMap<u8, BTreeSet<String>>) {
    let mut edges: Edges = BTreeMap::new();
    let mut unresolved_roots: BTreeMap<u8, BTreeSet<String>> = BTreeMap::new();
    for ((mac, prio), timer) in &pause.timers {
        let iv = timer.all_intervals();
        if iv.is_empty() {
            continue;
        }
        let from = topo.and_then(|t| t.owner(mac).map(|e| (t, e.clone())));
        let resolved = from.and_then(|(t, e)| t.peer(&e).map(|p| (e.node(), p.node())));
        match resolved {
            Some((f, to)) => edges.entry((*prio, f, to)).or_default().extend(iv),
            None => {
                unresolved.push(mac_string(mac));
                unresolved_roots.entry(*prio).or_default().insert(mac_string(mac));
            }
        }
    }
    unresolved.sort();
    unresolved.dedup();
    for v in edges.values_mut() {
        *v = union(std::mem::take(v));
    }
    (edges, unresolved_roots)
}

/// The flows whose two hosts the topology knows, with their path.
fn place<'a>(topo: Option<&Topology>, flows: &'a [FlowSpan]) -> Vec<Placed<'a>> {
    let Some(t) = topo else { return Vec::new() };
    flows
        .iter()
        .filter_map(|stats| {
            let key = &stats.key;
            let src = t.host_of_ip(ip_of(key, true))?;
            let dst = t.host_of_ip(ip_of(key, false))?;
            let links = t.links_seen(&stats.seen_at);
            let path = if links.is_empty() {
                t.path(Node::Host(src), Node::Host(dst))?
            } else {
                t.path_via(Node::Host(src), Node::Host(dst), &links)?
            };
            Some(Placed { key, stats, dst, path })
        })
        .collect()
}

/// When priority `p`'s tree lived: its edges' span, or (no resolved edge) its unplaced
/// senders' pause span.
fn span(pause: &Pause, p: u8, es: &[EdgeRef], unresolved: &BTreeSet<String>) -> (u64, u64) {
    let all: Vec<(u64, u64)> = union(es.iter().flat_map(|(_, v)| v.iter().copied()).collect());
    match (all.first(), all.last()) {
        (Some(f), Some(l)) => (f.0, l.1),
        _ => {
            let t: Vec<(u64, u64)> = pause
                .timers
                .iter()
                .filter(|((m, q), _)| *q == p && unresolved.contains(&mac_string(m)))
                .flat_map(|(_, t)| t.all_intervals())
                .collect();
            (t.iter().map(|x| x.0).min().unwrap_or(0), t.iter().map(|x| x.1).max().unwrap_or(0))
        }
    }
}

/// What every tree of one build looks at: the topology, all pause edges, the placed flows.
struct Fabric<'a> {
    topo: Option<&'a Topology>,
    edges: &'a Edges,
    placed: Vec<Placed<'a>>,
}

impl Fabric<'_> {
    fn name(&self, n: Node) -> String {
        self.topo.map_or_else(String::new, |t| t.name(n).to_string())
    }

    /// Roots of priority `p` (they pause others and are not paused while doing so), each with
    /// its likely congested egress; and the congested hosts.
    fn roots(&self, p: u8, es: &[EdgeRef], start: u64, end: u64) -> (Vec<Root>, BTreeSet<usize>) {
        let mut roots = Vec::new();
        let froms: BTreeSet<Node> = es.iter().map(|((_, f, _), _)| *f).collect();
        let mut congested: BTreeSet<usize> = BTreeSet::new();
        for r in froms {
            let out_iv: Vec<(u64, u64)> =
                union(es.iter().filter(|((_, f, _), _)| *f == r).flat_map(|(_, v)| v.iter().copied()).collect());
            let in_iv: Vec<(u64, u64)> =
                union(es.iter().filter(|((_, _, t), _)| *t == r).flat_map(|(_, v)| v.iter().copied()).collect());
            if !intersect(&out_iv, &in_iv).is_empty() {
                continue;
            }
            let mut bytes: BTreeMap<usize, u64> = BTreeMap::new();
            for f in self.placed.iter().filter(|f| f.on(p) && f.active(start, end) && f.path.contains(&r)) {
                *bytes.entry(f.dst).or_default() += f.stats.bytes;
            }
            let host = bytes.iter().max_by_key(|(h, b)| (**b, std::cmp::Reverse(**h))).map(|(h, _)| *h);
            if let Some(h) = host {
                congested.insert(h);
            }
            let t = self.topo.expect("edges need a topology");
            roots.push(Root {
                device: self.name(r),
                congested_port: match (r, host) {
                    (Node::Device(d), Some(h)) => t.port_toward(d, Node::Host(h)),
                    _ => None,
                },
                congested_host: host.map(|h| t.hosts[h].name.clone()),
            });
        }
        (roots, congested)
    }

    /// Flows on priority `p` with a hop u → v while v pauses u: contributors when they go to a
    /// congested host, victims otherwise (both sorted).
    fn paused_flows(&self, p: u8, congested: &BTreeSet<usize>) -> (Vec<FlowRef>, Vec<FlowRef>) {
        let (mut contributors, mut victims): (Vec<FlowRef>, Vec<FlowRef>) = (Vec::new(), Vec::new());
        for f in self.placed.iter().filter(|f| f.on(p)) {
            let paused = f.path.windows(2).any(|w| {
                self.edges.get(&(p, w[1], w[0])).is_some_and(|iv| overlaps(iv, f.stats.first_ns, f.stats.last_ns))
            });
            if paused {
                if congested.contains(&f.dst) {
                    contributors.push(flow_ref(f.key))
                } else {
                    victims.push(flow_ref(f.key))
                }
            }
        }
        contributors.sort();
        victims.sort();
        (contributors, victims)
    }
}

/// The name a topology gives a MAC: (device or host, port).
pub fn owner_names(topo: Option<&Topology>, mac: &[u8; 6]) -> (Option<String>, Option<String>) {
    match topo.and_then(|t| t.owner(mac).map(|e| (t, e))) {
        Some((t, End::Port(d, port))) => (Some(t.devices[*d].name.clone()), Some(port.clone())),
        Some((t, End::Host(h))) => (Some(t.hosts[*h].name.clone()), None),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_algebra() {
        assert_eq!(union(vec![(5, 7), (0, 2), (1, 3), (7, 8)]), vec![(0, 3), (5, 8)]);
        assert_eq!(intersect(&[(0, 10), (20, 30)], &[(5, 25)]), vec![(5, 10), (20, 25)]);
        assert!(intersect(&[(0, 1)], &[(1, 2)]).is_empty());
    }
}
