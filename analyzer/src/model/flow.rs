//! `flows[]`: a flow's counters, PSN/NAK state and RTT, and the `FlowRef` every section names flows by.

use analyzer_common::psn;
use serde::{Deserialize, Serialize};

use super::count_map::CountMap;
use super::counters::{CounterNames, Counters};
use super::percentiles::Percentiles;

/// A flow named in a finding or an analysis.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowRef {
    pub src: String,
    pub dst: String,
    pub udp_sport: u16,
    pub dst_qp: u32,
}

/// How many flows of a finding the summary and the page name (the JSON lists them all, up to
/// `MAX_LISTED_FLOWS`).
pub const FLOWS_NAMED: usize = 3;

impl FlowRef {
    /// `src → dst QP 0x…` (and the UDP source port: two flows between the same QPs differ by
    /// it), as a person reads a flow.
    pub fn label(&self) -> String {
        format!("{} → {} QP {:#x} (sport {})", self.src, self.dst, self.dst_qp, self.udp_sport)
    }

    /// The first [`FLOWS_NAMED`] of `flows`, and how many more there are (with `omitted`, the
    /// ones a list left out): "a, b, c and 4 more".
    pub fn named(flows: &[FlowRef], omitted: u64) -> String {
        let mut s: Vec<String> = flows.iter().take(FLOWS_NAMED).map(FlowRef::label).collect();
        let more = (flows.len().saturating_sub(FLOWS_NAMED)) as u64 + omitted;
        if more > 0 {
            s.push(format!("{more} more"));
        }
        match s.len() {
            0 => String::new(),
            1 => s.remove(0),
            n => format!("{} and {}", s[..n - 1].join(", "), s[n - 1]),
        }
    }
}

/// PSN sequence of a flow's request stream and its READ RESPONSEs: `requests`,
/// `out_of_sequence`, `psn_skipped`, `duplicates`, `response_out_of_sequence` (READ RESPONSE
/// packets out of sequence within one response), named by `analyzer_common::psn::count`.
pub type PsnJson = Counters<PsnNames, { psn::count::COUNT }>;

/// What the responder's NIC would count for a flow's requests (`out_of_seq_request`,
/// `duplicate_request`), named by `analyzer_common::psn::responder`.
pub type Responder = Counters<ResponderNames, { psn::responder::COUNT }>;

impl Flow {
    /// The flow as findings and analyses name it.
    pub fn flow_ref(&self) -> FlowRef {
        FlowRef { src: self.src.clone(), dst: self.dst.clone(), udp_sport: self.udp_sport, dst_qp: self.dst_qp }
    }
}

/// `flows[].psn`: the observer's sequence counters, and the responder model's under
/// `responder`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowPsn {
    #[serde(flatten)]
    pub sequence: PsnJson,
    pub responder: Responder,
    /// Skipped PSNs that a later ACK covered with no NAK and no retransmission: delivered,
    /// missed by this capture (they are not loss).
    #[serde(default, skip_serializing_if = "super::skip::is_zero")]
    pub capture_missed: u64,
}

impl FlowPsn {
    /// Adds another flow's, or names the first counter whose sum would not fit 64 bits.
    pub fn checked_add(&mut self, o: &Self) -> Result<(), String> {
        let mut sum = *self;
        sum.sequence.checked_add(&o.sequence).map_err(str::to_string)?;
        sum.responder.checked_add(&o.responder).map_err(|n| format!("responder.{n}"))?;
        sum.capture_missed = sum.capture_missed.checked_add(o.capture_missed).ok_or("capture_missed")?;
        *self = sum;
        Ok(())
    }
}

impl std::ops::Index<usize> for FlowPsn {
    type Output = u64;
    /// The sequence counter at a `psn::count` index.
    fn index(&self, i: usize) -> &u64 {
        &self.sequence.values[i]
    }
}

/// AETHs carried by a flow, by syndrome (`acks`, the NAK kinds, `reserved`), named by
/// `analyzer_common::psn::aeth`.
pub type Naks = Counters<AethNames, { psn::aeth::COUNT }>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsnNames;
impl CounterNames for PsnNames {
    const NAMES: &'static [&'static str] = &psn::count::NAMES;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponderNames;
impl CounterNames for ResponderNames {
    const NAMES: &'static [&'static str] = &psn::responder::NAMES;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AethNames;
impl CounterNames for AethNames {
    const NAMES: &'static [&'static str] = &psn::aeth::NAMES;
}

impl Naks {
    /// NAKs of every kind (everything but ACKs).
    pub fn total(&self) -> u64 {
        self.values[psn::aeth::ACK + 1..].iter().sum()
    }
}

/// RTT of one request flow (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRtt {
    #[serde(flatten)]
    pub percentiles: Percentiles,
    /// Requests with AckReq not acknowledged within `--rtt-timeout`.
    pub timeouts: u64,
    /// Requests still waiting at the end, less than the timeout before it.
    pub pending: u64,
}

impl FlowRtt {
    /// A flow's RTT from its samples' percentiles (none: no sample) and its undecided
    /// requests; none at all for a flow that had no request with AckReq (as a run reports it,
    /// and a merge).
    pub fn of(percentiles: Option<Percentiles>, timeouts: u64, pending: u64) -> Option<FlowRtt> {
        if percentiles.is_none() && timeouts == 0 && pending == 0 {
            return None;
        }
        Some(FlowRtt { percentiles: percentiles.unwrap_or_default(), timeouts, pending })
    }
}

/// RTT over all flows (ns), with the pairing's bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    #[serde(flatten)]
    pub percentiles: Percentiles,
    pub timeouts: u64,
    pub pending: u64,
    /// ACKs whose request flow could not be told apart from another (see the docs on pairing).
    pub ambiguous_acks: u64,
    /// ACKs of requests this vantage point did not see.
    pub unpaired_acks: u64,
    /// QP pairs (one per direction) learned from captured CM REQ/REP exchanges.
    #[serde(default)]
    pub cm_paired: u64,
    /// Requests dropped undecided because their flow already had the most requests waiting a
    /// flow keeps (a vantage point that does not see the ACKs).
    #[serde(default)]
    pub pending_evicted: u64,
    pub timeout_ns: u64,
    /// Every sample in log buckets, so that `merge` combines the percentiles of several
    /// reports (within `relative_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<RttHistogram>,
}

/// RTT samples in logarithmic buckets: bucket i holds [growth^i, growth^(i+1)) ns; a value read
/// back (its bucket's geometric middle) is within `relative_error` of every sample in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RttHistogram {
    pub growth: f64,
    pub relative_error: f64,
    /// [bucket index, samples], by index.
    pub buckets: Vec<[u64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub src: String,
    pub dst: String,
    pub ip_version: u8,
    pub udp_sport: u16,
    pub dst_qp: u32,
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub opcodes: CountMap,
    pub ecn: Ecn,
    pub dscp: CountMap,
    /// Frames by outer VLAN PCP; "untagged" counts frames without a tag.
    pub pcp: CountMap,
    pub fecn: u64,
    pub becn: u64,
    pub ack_req: u64,
    pub labels: Vec<String>,
    #[serde(default)]
    pub psn: FlowPsn,
    #[serde(default)]
    pub naks: Naks,
    /// Present on flows that sent requests with AckReq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ns: Option<FlowRtt>,
    /// Offline with `--edges`: the PSN state at the capture's two ends, for `merge` in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<super::edge::FlowEdge>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ecn {
    pub not_ect: u64,
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(i: u32) -> FlowRef {
        FlowRef { src: format!("10.0.0.{i}"), dst: "10.0.9.9".into(), udp_sport: 49152, dst_qp: 0x100 + i }
    }

    #[test]
    fn a_finding_names_three_flows_and_counts_the_rest() {
        assert_eq!(FlowRef::named(&[], 0), "");
        assert_eq!(FlowRef::named(&[flow(1)], 0), "10.0.0.1 → 10.0.9.9 QP 0x101 (sport 49152)");
        assert_eq!(
            FlowRef::named(&[flow(1), flow(2)], 0),
            "10.0.0.1 → 10.0.9.9 QP 0x101 (sport 49152) and 10.0.0.2 → 10.0.9.9 QP 0x102 (sport 49152)"
        );
        let five: Vec<FlowRef> = (1..=5).map(flow).collect();
        let s = FlowRef::named(&five, 10);
        assert!(s.starts_with("10.0.0.1 → 10.0.9.9 QP 0x101 (sport 49152), 10.0.0.2"), "{s}");
        assert!(s.ends_with("10.0.0.3 → 10.0.9.9 QP 0x103 (sport 49152) and 12 more"), "{s}");
    }
}
