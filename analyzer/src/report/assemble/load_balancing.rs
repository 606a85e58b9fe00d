//! The `load_balancing` section: which request flows were sprayed over several paths, the
//! reordering it brought, and `spraying_without_ooo` when receivers answered it with NAKs.
//! A flow sprayed over several uplinks reorders by design: its `reordering` finding becomes
//! information when its receiver placed it out of order (no NAK).

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;
use analyzer_common::psn::{aeth, count};

use super::audit::{host_aeth, reverse_aeth};
use crate::analyses::messages::reorder::p50_max;
use crate::model::*;
use crate::pipeline::Pipeline;

/// The section (none without request flows of two requests or more); findings go to `audit`.
pub fn section(run: &Pipeline, ecmp: &Ecmp, audit: &mut Vec<Finding>) -> Option<LoadBalancing> {
    let uplinks: BTreeSet<&str> = ecmp.observed.iter().flat_map(|o| o.by_label.keys().map(String::as_str)).collect();
    let basis = if uplinks.len() >= 2 { LbBasis::Uplinks } else { LbBasis::Reordering };
    let reorder = &run.analyses.messages.reorder;
    let hosts = host_aeth(run);
    let (mut flows, mut packets) = (0, 0);
    let mut sprayed: Vec<(FlowKey, SprayedFlow)> = Vec::new();
    for (k, s) in run.engine.flows.iter() {
        let requests = s.psn.count[count::REQUESTS];
        if requests < 2 {
            continue;
        }
        flows += 1;
        packets += requests;
        let late = reorder.flows.get(k);
        let paths = (basis == LbBasis::Uplinks).then(|| {
            let labels: BTreeSet<&str> = s
                .source_bytes
                .iter()
                .filter_map(|(src, _)| run.engine.sources.get(*src as usize).map(|x| x.label.as_str()))
                .filter(|l| uplinks.contains(l))
                .collect();
            labels.len() as u32
        });
        let spread = match paths {
            Some(n) => n >= 2,
            None => late.is_some_and(|r| r.late > 0),
        };
        if spread {
            let (p50, max) = late.and_then(|r| p50_max(&r.sorted())).unzip();
            sprayed.push((
                *k,
                SprayedFlow {
                    flow: flow_ref(k),
                    uplinks: paths,
                    requests,
                    reordered: late.map_or(0, |r| r.late),
                    displacement_p50: p50,
                    displacement_max: max,
                    psn_sequence_naks: reverse_aeth(run, &hosts, k, aeth::PSN_SEQUENCE_ERROR),
                },
            ));
        }
    }
    if flows == 0 {
        return None;
    }
    findings(&sprayed, audit);
    sprayed.sort_by(|a, b| b.1.reordered.cmp(&a.1.reordered).then(a.0.cmp(&b.0)));
    let sprayed_flows = sprayed.len() as u64;
    let listed: Vec<SprayedFlow> = sprayed.into_iter().take(SPRAYED_LISTED).map(|(_, f)| f).collect();
    Some(LoadBalancing {
        mode: LbMode::of(sprayed_flows, flows),
        basis,
        uplinks: uplinks.iter().map(|l| l.to_string()).collect(),
        flows,
        sprayed_flows,
        reorder: stats(packets, &reorder.density),
        sprayed_omitted: sprayed_flows - listed.len() as u64,
        sprayed: listed,
    })
}

/// The reorder statistics of `packets` requests with late arrivals by displacement.
pub fn stats(packets: u64, density: &BTreeMap<u32, u64>) -> ReorderStats {
    let reordered: u64 = density.values().sum();
    let (p50, max) = p50_max(density).unzip();
    ReorderStats {
        packets,
        reordered,
        ratio: if packets > 0 { reordered as f64 / packets as f64 } else { 0.0 },
        displacement_p50: p50,
        displacement_max: max,
        density: density.iter().map(|(d, n)| DensityBin { displacement: *d, packets: *n }).collect(),
    }
}

/// `spraying_without_ooo` over the sprayed flows whose receivers sent PSN-sequence NAKs; the
/// `reordering` finding of a flow sprayed over uplinks without NAKs is information, not a
/// warning; the `go_back_n` finding of a reordered flow says the NAKs may answer reordering.
/// `sprayed` in the order a run meets the flows (`merge` of reports in series gives the merged
/// section's, by their first frame).
pub fn findings(sprayed: &[(FlowKey, SprayedFlow)], audit: &mut Vec<Finding>) {
    let naked: Vec<&SprayedFlow> = sprayed.iter().map(|(_, f)| f).filter(|f| f.psn_sequence_naks > 0).collect();
    if !naked.is_empty() {
        let naks: u64 = naked.iter().map(|f| f.psn_sequence_naks).sum();
        audit.push(Finding::new(
            Severity::Warning,
            FindingCode::SprayingWithoutOoo,
            format!(
                "{} of {} sprayed flows got {naks} PSN-sequence NAKs: the fabric sprays their packets over several paths, and their receivers do not place out of order, so every reordering becomes a go-back-N retransmission. Enable out-of-order placement on the receiving RNICs (with adaptive routing), or hash these flows per flow (or per flowlet) instead of spraying them.",
                naked.len(),
                sprayed.len()
            ),
            naked.iter().map(|f| f.flow.clone()).collect(),
        ));
    }
    for (_, f) in sprayed.iter().filter(|(_, f)| f.reordered > 0) {
        let own = |x: &&mut Finding| x.flows == [f.flow.clone()];
        if f.psn_sequence_naks == 0 {
            // Only uplinks show that the fabric sprays by design; reordering seen at one point
            // stays a warning (a path that reorders may be at fault).
            if f.uplinks.is_none() {
                continue;
            }
            if let Some(x) = audit.iter_mut().filter(|x| x.code == FindingCode::Reordering).find(own) {
                x.severity = Severity::Info;
                x.message.push_str(
                    "; the flow is sprayed over several paths and its receiver placed it out of order (no NAK): not loss",
                );
            }
        } else if let Some(x) = audit.iter_mut().filter(|x| x.code == FindingCode::GoBackN).find(own) {
            x.message.push_str(
                "; the flow is sprayed and its packets arrived reordered: the NAKs may answer the reordering, not loss (spraying_without_ooo)",
            );
        }
    }
}
