//! What the flows' UDP source ports allow at all: ECMP hashes the 5-tuple, so flows between
//! one host pair spread over paths only by their source ports; and how the bytes concentrate.

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;

use super::entropy_bits;
use crate::report::model::{Finding, FindingCode, HostPair, Severity, addr_string, flow_ref};

/// Source-port spread and host pairs of a set of flows.
pub struct Spread {
    pub distinct_sports: u64,
    pub sport_entropy_bits: f64,
    pub host_pairs: Vec<HostPair>,
}

/// The spread of `flows` (key, bytes), with the findings `few_source_ports` and
/// `elephant_flows`.
pub fn spread(flows: &[(FlowKey, u64)], findings: &mut Vec<Finding>) -> Spread {
    let mut sports: BTreeMap<u16, u64> = BTreeMap::new();
    type Pair = (u8, [u8; 16], [u8; 16]);
    let mut pairs: BTreeMap<Pair, (u64, BTreeSet<u16>)> = BTreeMap::new();
    for (k, _) in flows {
        *sports.entry(k.udp_sport).or_default() += 1;
        let e = pairs.entry((k.ip_version, k.src, k.dst)).or_default();
        e.0 += 1;
        e.1.insert(k.udp_sport);
    }
    let host_pairs: Vec<HostPair> = pairs
        .iter()
        .map(|((v, a, b), (n, s))| HostPair {
            a: addr_string(*v, a),
            b: addr_string(*v, b),
            flows: *n,
            distinct_sports: s.len() as u64,
        })
        .collect();
    // Flows of one host pair can only spread over paths by their UDP source ports: those that
    // share a port with another flow of their pair share its path.
    let shared_flows: u64 = host_pairs.iter().filter(|p| p.flows >= 2).map(|p| p.flows).sum();
    let mut per_port: BTreeMap<(u8, [u8; 16], [u8; 16], u16), u64> = BTreeMap::new();
    for (k, _) in flows {
        *per_port.entry((k.ip_version, k.src, k.dst, k.udp_sport)).or_default() += 1;
    }
    let colliding: u64 = per_port.values().filter(|n| **n >= 2).sum();
    if colliding >= 2 && colliding * 2 >= shared_flows {
        findings.push(Finding::new(
            Severity::Warning,
            FindingCode::FewSourcePorts,
            format!(
                "{colliding} of the {shared_flows} flows between host pairs with several flows share a UDP source port with another flow of their pair: ECMP hashes the 5-tuple, so they share its path; NICs vary the source port per QP, so more QPs per connection (or QP-aware hashing) spread them"
            ),
            Vec::new(),
        ));
    }
    elephants(flows, findings);
    Spread {
        distinct_sports: sports.len() as u64,
        sport_entropy_bits: entropy_bits(sports.values().copied()),
        host_pairs,
    }
}

/// `elephant_flows`: at least four flows, and a fifth of them or fewer carry 80% of the bytes.
fn elephants(flows: &[(FlowKey, u64)], findings: &mut Vec<Finding>) {
    let n = flows.len() as u64;
    let total: u64 = flows.iter().map(|(_, b)| b).sum();
    if n < 4 || total == 0 {
        return;
    }
    let mut by_bytes: Vec<&(FlowKey, u64)> = flows.iter().collect();
    by_bytes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (mut acc, mut k) = (0, 0);
    while acc * 10 < total * 8 {
        acc += by_bytes[k].1;
        k += 1;
    }
    if (k as u64) * 5 <= n {
        findings.push(Finding::new(
            Severity::Warning,
            FindingCode::ElephantFlows,
            format!(
                "{k} of {n} flows carry {:.0}% of the bytes: where a few elephants hash onto one path, that path is congested while others idle; more QPs per connection or QP-aware hashing spread them",
                acc as f64 * 100.0 / total as f64
            ),
            by_bytes[..k].iter().map(|(f, _)| flow_ref(f)).collect(),
        ));
    }
}
