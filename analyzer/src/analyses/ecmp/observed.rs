//! What several labelled captures (one per uplink) observed: each label's share of the bytes.

use std::collections::BTreeMap;

use super::measure::imbalance;
use crate::model::{EcmpObserved, Finding, FindingCode, InSeries, LabelShare, Severity};

/// The observed section over `by_label` (none with fewer than two labels), the labels `in_series`
/// with another left out of the uplinks, with an `uplink_imbalance` finding when the busiest
/// uplink carries over 1.5× the mean or one is idle (two uplinks at least).
pub fn observed(
    by_label: &BTreeMap<String, LabelShare>,
    multi_label_flows: u64,
    in_series: Vec<InSeries>,
    findings: &mut Vec<Finding>,
) -> Option<EcmpObserved> {
    if by_label.len() + in_series.len() < 2 {
        return None;
    }
    if by_label.len() < 2 {
        return Some(EcmpObserved {
            by_label: by_label.clone(),
            imbalance: 1.0,
            idle: Vec::new(),
            multi_label_flows,
            in_series,
        });
    }
    let bytes: Vec<u64> = by_label.values().map(|s| s.bytes).collect();
    let imbalance = imbalance(&bytes);
    let idle: Vec<String> = by_label.iter().filter(|(_, s)| s.bytes == 0).map(|(l, _)| l.clone()).collect();
    if imbalance > 1.5 || !idle.is_empty() {
        findings.push(Finding::new(
            Severity::Warning,
            FindingCode::UplinkImbalance,
            format!(
                "uplinks carry unequal shares: the busiest carries {imbalance:.2}× the mean{}",
                if idle.is_empty() { String::new() } else { format!("; idle: {}", idle.join(", ")) }
            ),
            Vec::new(),
        ));
    }
    Some(EcmpObserved { by_label: by_label.clone(), imbalance, idle, multi_label_flows, in_series })
}
