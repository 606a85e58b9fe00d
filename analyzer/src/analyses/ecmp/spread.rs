//! What the flows' UDP source ports allow at all: ECMP hashes the 5-tuple, so flows between
//! one host pair spread over paths only by their source ports; and how the bytes concentrate.

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;

use super::measure::entropy_bits;
use crate::model::{Finding, FindingCode, HostPair, Severity, addr_string, flow_ref};

/// A host pair: its flows and their distinct UDP source ports (addresses as bytes; the
/// report's strings are made only where they are written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairSpread {
    pub ip_version: u8,
    pub a: [u8; 16],
    pub b: [u8; 16],
    pub flows: u64,
    pub distinct_sports: u64,
}

impl PairSpread {
    pub fn json(&self) -> HostPair {
        HostPair {
            a: addr_string(self.ip_version, &self.a),
            b: addr_string(self.ip_version, &self.b),
            flows: self.flows,
            distinct_sports: self.distinct_sports,
        }
    }
}

/// Source-port spread and host pairs of a set of flows.
pub struct Spread {
    pub distinct_sports: u64,
    pub sport_entropy_bits: f64,
    /// In (version, a, b) order; empty unless asked for.
    pub pairs: Vec<PairSpread>,
}

/// Flows sorted by (version, source, destination, source port): host pairs are its runs.
/// Borrowed keys, 8 bytes a flow (a sorted copy of those fields was 40).
pub type Sorted<'a> = Vec<&'a FlowKey>;

/// The fields flows are sorted by ([`Sorted`]).
fn order(k: &FlowKey) -> (u8, [u8; 16], [u8; 16], u16) {
    (k.ip_version, k.src, k.dst, k.udp_sport)
}

pub fn sorted<'a>(keys: impl Iterator<Item = &'a FlowKey>) -> Sorted<'a> {
    let mut v: Sorted = keys.collect();
    v.sort_unstable_by_key(|k| order(k));
    v
}

/// The host pairs of sorted flows, one at a time, with the flows among them that share their
/// (pair, source port) with another.
pub fn pairs<'a>(sorted: &'a [&FlowKey]) -> impl Iterator<Item = (PairSpread, u64)> + 'a {
    let mut i = 0;
    let pair = |k: &FlowKey| (k.ip_version, k.src, k.dst);
    std::iter::from_fn(move || {
        let (v, a, b) = pair(sorted.get(i)?);
        let (mut j, mut distinct, mut colliding) = (i, 0, 0);
        while j < sorted.len() && pair(sorted[j]) == (v, a, b) {
            let mut k = j;
            while k < sorted.len() && order(sorted[k]) == order(sorted[j]) {
                k += 1;
            }
            if k - j >= 2 {
                colliding += (k - j) as u64;
            }
            distinct += 1;
            j = k;
        }
        let p = PairSpread { ip_version: v, a, b, flows: (j - i) as u64, distinct_sports: distinct };
        i = j;
        Some((p, colliding))
    })
}

/// The spread of `flows` (key, bytes), with the findings `few_source_ports` and
/// `elephant_flows`; `list_pairs` keeps the host pairs. Counted over the flows sorted by
/// (host pair, source port): 40 bytes a flow for the sort, no map per pair.
pub fn spread(flows: &[(&FlowKey, u64)], list_pairs: bool, findings: &mut Vec<Finding>) -> Spread {
    let sorted = sorted(flows.iter().map(|(k, _)| *k));
    let mut sports: BTreeMap<u16, u64> = BTreeMap::new();
    for f in &sorted {
        *sports.entry(f.udp_sport).or_default() += 1;
    }
    let (mut listed, mut colliding, mut shared_flows) = (Vec::new(), 0, 0);
    for (p, c) in pairs(&sorted) {
        colliding += c;
        // Flows of one host pair can only spread over paths by their UDP source ports: those
        // that share a port with another flow of their pair share its path.
        if p.flows >= 2 {
            shared_flows += p.flows;
        }
        if list_pairs {
            listed.push(p);
        }
    }
    drop(sorted);
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
        pairs: listed,
    }
}

/// `elephant_flows`: at least four flows, and a fifth of them or fewer carry 80% of the bytes.
fn elephants(flows: &[(&FlowKey, u64)], findings: &mut Vec<Finding>) {
    let n = flows.len() as u64;
    let total: u64 = flows.iter().map(|(_, b)| b).sum();
    if n < 4 || total == 0 {
        return;
    }
    let mut by_bytes: Vec<&(&FlowKey, u64)> = flows.iter().collect();
    by_bytes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
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
