//! Which rows a table shows and in what order, one rule for the summary and the page: a
//! person comparing the two must see the same flows first.

use analyzer_common::psn::{aeth, count};

use crate::model::{DcqcnFlow, Flow, Pair, Report};

/// Flows by bytes, most first (then most packets).
pub fn by_bytes(r: &Report) -> Vec<&Flow> {
    let mut flows: Vec<&Flow> = r.flows.iter().collect();
    flows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.packets.cmp(&a.packets)));
    flows
}

/// NAKs of every kind a flow's responder sent.
pub fn naks(f: &Flow) -> u64 {
    f.naks.total()
}

/// What went wrong in a flow's transport: requests out of sequence or repeated, READ
/// responses out of sequence, and NAKs.
pub fn anomalies(f: &Flow) -> u64 {
    f.psn[count::OUT_OF_SEQUENCE] + f.psn[count::DUPLICATES] + f.psn[count::RESPONSE_OUT_OF_SEQUENCE] + naks(f)
}

/// The flows with requests, ACKs or RTT samples (the ones transport health is about), most
/// anomalies first, then most bytes.
pub fn by_anomalies(r: &Report) -> Vec<&Flow> {
    let mut flows: Vec<&Flow> = r
        .flows
        .iter()
        .filter(|f| f.psn[count::REQUESTS] + f.naks[aeth::ACK] + naks(f) > 0 || f.rtt_ns.is_some())
        .collect();
    flows.sort_by(|a, b| anomalies(b).cmp(&anomalies(a)).then(b.bytes.cmp(&a.bytes)));
    flows
}

/// Host pairs with CE marks or CNPs, most unanswered marks first, then most marks.
pub fn marked_pairs(r: &Report) -> Vec<&Pair> {
    let mut pairs: Vec<&Pair> = r.pairs.iter().filter(|p| p.ce > 0 || p.cnp_back > 0).collect();
    pairs.sort_by_key(|p| std::cmp::Reverse((p.ce_unanswered, p.ce, p.cnp_back)));
    pairs
}

/// Flows that received CNPs, most first.
pub fn by_cnps(d: &crate::model::Dcqcn) -> Vec<&DcqcnFlow> {
    let mut flows: Vec<&DcqcnFlow> = d.flows.iter().collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.stats.cnps));
    flows
}

/// Where a pause sender is: `device:port`, the device alone, or "-" when the topology does
/// not place it.
pub fn place(device: &Option<String>, port: &Option<String>) -> String {
    match (device, port) {
        (Some(d), Some(p)) => format!("{d}:{p}"),
        (Some(d), None) => d.clone(),
        _ => "-".into(),
    }
}

/// A flow's anomalies in words ("3 out of sequence · 2 NAK"), empty when there are none:
/// the flows table's last column.
pub fn anomaly_words(f: &Flow) -> String {
    let parts = [
        (f.psn[count::OUT_OF_SEQUENCE], "out of sequence"),
        (f.psn[count::PSN_SKIPPED], "PSNs skipped"),
        (f.psn[count::DUPLICATES], "duplicate"),
        (f.psn[count::RESPONSE_OUT_OF_SEQUENCE], "READ responses out of sequence"),
        (f.naks[aeth::PSN_SEQUENCE_ERROR], "sequence NAK"),
        (f.naks[aeth::RNR], "RNR NAK"),
        (naks(f) - f.naks[aeth::PSN_SEQUENCE_ERROR] - f.naks[aeth::RNR], "other NAK"),
        (f.rtt_ns.as_ref().map_or(0, |r| r.timeouts), "RTT timeouts"),
    ];
    let words: Vec<String> = parts.iter().filter(|(n, _)| *n > 0).map(|(n, w)| format!("{n} {w}")).collect();
    words.join(" · ")
}
