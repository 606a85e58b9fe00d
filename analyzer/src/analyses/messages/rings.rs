//! Rings among the host pairs that carry data: NCCL's ring all-reduce sends from each rank to
//! the next, so its hosts form a directed cycle in which each sends to one other and receives
//! from one other. The pairs' graph is cut into strongly connected groups; a group of three or
//! more hosts in which every host has one successor and one predecessor is a ring. Other
//! groups (all-to-all, trees, two rings over the same hosts) are counted, not interpreted.

use crate::model::{Ring, RingEdge, Rings};

use super::super::deadlock::strongly_connected;
use super::super::keys::Addr;

/// A host pair as the rings see it: its goodput p50 and MCT p99.
#[derive(Debug, Clone)]
pub struct Edge {
    pub src: Addr,
    pub dst: Addr,
    pub messages: u64,
    pub goodput_p50: Option<u64>,
    pub mct_p99: Option<u64>,
}

pub const RECOGNISED: &str = "rings: groups of three or more hosts in which each host sends data to exactly one \
    other and receives from exactly one other (NCCL ring all-reduce); trees and all-to-all are not recognised";

/// The rings of `edges`, named by `name`.
pub fn find(edges: &[Edge], name: &dyn Fn(&Addr) -> String) -> Rings {
    let mut hosts: Vec<Addr> = edges.iter().flat_map(|e| [e.src, e.dst]).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let at = |a: &Addr| hosts.binary_search(a).expect("every host listed");
    let mut adj = vec![Vec::new(); hosts.len()];
    for (i, e) in edges.iter().enumerate() {
        if e.src != e.dst {
            adj[at(&e.src)].push((at(&e.dst), i));
        }
    }
    let plain: Vec<Vec<usize>> = adj.iter().map(|v| v.iter().map(|(d, _)| *d).collect()).collect();
    let mut out = Rings { recognised: RECOGNISED.into(), ..Default::default() };
    for group in strongly_connected(&plain) {
        if group.len() < 2 {
            continue;
        }
        let inside = |n: usize| group.contains(&n);
        let outs = |n: usize| adj[n].iter().filter(|(d, _)| inside(*d)).collect::<Vec<_>>();
        let ins = |n: usize| group.iter().filter(|m| adj[**m].iter().any(|(d, _)| *d == n)).count();
        let ring = group.len() >= 3 && group.iter().all(|n| outs(*n).len() == 1 && ins(*n) == 1);
        if !ring {
            out.other_groups += 1;
            continue;
        }
        // In order from the smallest address.
        let start = *group.iter().min().expect("not empty");
        let (mut order, mut ring_edges, mut n) = (Vec::new(), Vec::new(), start);
        loop {
            order.push(n);
            let (next, i) = *outs(n)[0];
            ring_edges.push(&edges[i]);
            n = next;
            if n == start {
                break;
            }
        }
        out.rings.push(ring_of(&order.iter().map(|n| name(&hosts[*n])).collect::<Vec<_>>(), &ring_edges, name));
    }
    out.rings.sort_by(|a, b| a.hosts.cmp(&b.hosts));
    out
}

fn ring_of(hosts: &[String], edges: &[&Edge], name: &dyn Fn(&Addr) -> String) -> Ring {
    let mut rates: Vec<u64> = edges.iter().filter_map(|e| e.goodput_p50).collect();
    let median = super::super::stats::median(&mut rates);
    let slowest = edges.iter().filter(|e| e.goodput_p50.is_some()).min_by_key(|e| e.goodput_p50);
    let (straggler, ratio) = match slowest {
        Some(e) => {
            let g = e.goodput_p50.unwrap_or(0);
            (format!("{} → {}", name(&e.src), name(&e.dst)), if g == 0 { 0.0 } else { median as f64 / g as f64 })
        }
        None => (String::new(), 0.0),
    };
    Ring {
        hosts: hosts.to_vec(),
        edges: edges
            .iter()
            .map(|e| RingEdge {
                src: name(&e.src),
                dst: name(&e.dst),
                messages: e.messages,
                goodput_bps_p50: e.goodput_p50,
                mct_ns_p99: e.mct_p99,
            })
            .collect(),
        straggler,
        straggler_ratio: ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(i: u8) -> Addr {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&[10, 0, 0, i]);
        (b, 4)
    }

    fn e(s: u8, d: u8, g: u64) -> Edge {
        Edge { src: a(s), dst: a(d), messages: 10, goodput_p50: Some(g), mct_p99: Some(1000) }
    }

    #[test]
    fn a_ring_of_four_with_a_slow_edge_and_an_all_to_all() {
        let name = |x: &Addr| format!("h{}", x.0[3]);
        // 1 → 2 → 3 → 4 → 1 at 40, 40, 10, 40 Gbit/s; 7, 8, 9 all-to-all.
        let mut edges = vec![e(1, 2, 40), e(2, 3, 40), e(3, 4, 10), e(4, 1, 40)];
        for (s, d) in [(7, 8), (8, 7), (7, 9), (9, 7), (8, 9), (9, 8)] {
            edges.push(e(s, d, 5));
        }
        let r = find(&edges, &name);
        assert_eq!(r.rings.len(), 1);
        assert_eq!(r.other_groups, 1);
        let ring = &r.rings[0];
        assert_eq!(ring.hosts, vec!["h1", "h2", "h3", "h4"]);
        assert_eq!(ring.straggler, "h3 → h4");
        // Median of 10, 40, 40, 40 (nearest rank) is 40: the straggler runs 4× below it.
        assert_eq!(ring.straggler_ratio, 4.0);
    }
}
