//! The transport audit: findings about ECN marking, DSCP classes, CE → CNP feedback and the
//! PSN/NAK patterns of each flow, each with a severity, a stable code, a one-line message and
//! the flows concerned. Built from the engine's state whenever a report is.

use analyzer_common::flow::FlowKey;
use analyzer_common::psn::{aeth, count};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analyses::ecn::{FlowMarking, Interval};
use crate::model::{Finding, FindingCode, FlowRef, Severity, addr_bytes, addr_string, flow_ref};
use crate::pipeline::Pipeline;

fn finding(severity: Severity, code: FindingCode, message: String, flows: Vec<FlowRef>) -> Finding {
    Finding::new(severity, code, message, flows)
}

fn ns_text(ns: u64) -> String {
    humantime::format_duration(std::time::Duration::from_nanos(ns)).to_string()
}

fn dscps(v: impl Iterator<Item = u8>) -> String {
    let mut v: Vec<u8> = v.collect();
    v.sort_unstable();
    v.dedup();
    v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

/// Every finding, errors first, then by code and flows.
pub fn findings(run: &Pipeline) -> Vec<Finding> {
    let mut out = marking(run);
    out.extend(feedback(run));
    out.extend(transport(run));
    out.extend(super::dcqcn::findings(run));
    sort(&mut out);
    out
}

/// Findings in report order: errors first, then by code, flows and message.
pub fn sort(out: &mut [Finding]) {
    out.sort_by(|a, b| {
        (a.severity, a.code.name(), &a.flows, &a.message).cmp(&(b.severity, b.code.name(), &b.flows, &b.message))
    });
}

/// Findings in the order a run lists them: the audit's own ([`findings`], by [`sort`]), then
/// the vantage points', load balancing's, PFC's and the messages' in the order given (a run
/// appends each section's findings in turn: [`super::judged::judge`]). `merge` orders its
/// findings so.
pub fn in_run_order(out: &mut [Finding]) {
    let family = |c: FindingCode| match c {
        FindingCode::EcnThresholdLow | FindingCode::LossBetween => 1,
        FindingCode::SprayingWithoutOoo => 2,
        FindingCode::PfcBeforeEcn | FindingCode::PfcRateHigh => 3,
        FindingCode::RingStraggler | FindingCode::TailDominatedBy => 4,
        _ => 0,
    };
    out.sort_by(|a, b| {
        let (fa, fb) = (family(a.code), family(b.code));
        let own = || {
            (a.severity, a.code.name(), &a.flows, &a.message).cmp(&(b.severity, b.code.name(), &b.flows, &b.message))
        };
        fa.cmp(&fb).then_with(|| if fa == 0 { own() } else { std::cmp::Ordering::Equal })
    });
}

/// A finding over the flows whose marking `count` is not zero (of `each`'s); `message` gets the
/// total count and those flows.
fn over_flows<'a, I: Iterator<Item = (&'a FlowKey, &'a FlowMarking)>>(
    each: &impl Fn() -> I,
    count: impl Fn(&FlowMarking) -> u64,
    severity: Severity,
    code: FindingCode,
    message: impl FnOnce(u64, &[(&FlowKey, &FlowMarking)]) -> String,
) -> Option<Finding> {
    let hit: Vec<(&FlowKey, &FlowMarking)> = each().filter(|(_, m)| count(m) > 0).collect();
    if hit.is_empty() {
        return None;
    }
    let total = hit.iter().map(|(_, m)| count(m)).sum();
    Some(finding(severity, code, message(total, &hit), hit.iter().map(|(k, _)| flow_ref(k)).collect()))
}

/// ECN capability and DSCP of data and CNPs.
fn marking(run: &Pipeline) -> Vec<Finding> {
    let cfg = &run.analyses.config;
    marking_findings(&|| run.analyses.flows.markings(), cfg.roce_dscp, cfg.cnp_dscp)
}

/// The marking findings of the flows `each` gives, against the expected DSCPs of RoCE data and
/// CNPs (a run's flows, or `merge`'s merged ones).
pub fn marking_findings<'a, I: Iterator<Item = (&'a FlowKey, &'a FlowMarking)>>(
    each: &impl Fn() -> I,
    roce_dscp: u8,
    cnp_dscp: u8,
) -> Vec<Finding> {
    [
        over_flows(each, |m| m.data_not_ect, Severity::Error, FindingCode::NotEct, |n, hit| {
            format!(
                "{n} RoCE data packets in {} flows are Not-ECT: switches cannot CE-mark them, so DCQCN cannot react to congestion",
                hit.len()
            )
        }),
        over_flows(each, |m| m.data_other_dscp, Severity::Warning, FindingCode::RoceDscp, |n, hit| {
            format!(
                "{n} RoCE data packets in {} flows carry DSCP {} instead of {}: they may miss the lossless (PFC) queue",
                hit.len(),
                dscps(hit.iter().filter_map(|(_, m)| m.seen_data_dscp)),
                roce_dscp
            )
        }),
        over_flows(each, |m| m.cnp_other_dscp, Severity::Warning, FindingCode::CnpDscp, |n, hit| {
            format!(
                "{n} CNPs in {} flows carry DSCP {} instead of {}: CNPs should ride a high-priority class so they are not delayed behind the congestion they report",
                hit.len(),
                dscps(hit.iter().filter_map(|(_, m)| m.seen_cnp_dscp)),
                cnp_dscp
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Whether a finding is of the marking family ([`marking_findings`]).
pub fn is_marking(code: FindingCode) -> bool {
    matches!(code, FindingCode::NotEct | FindingCode::RoceDscp | FindingCode::CnpDscp)
}

/// What the CE/CNP findings read of a direction of an IP pair: its marks, the CNPs back, the
/// marks no CNP answered and those a CNP's pacing covered (a run's from its ECN analysis,
/// `merge`'s from the merged pairs).
#[derive(Debug, Clone)]
pub struct PairFacts {
    pub a: String,
    pub b: String,
    pub ce: u64,
    pub cnp_back: u64,
    pub unanswered: u64,
    pub covered: u64,
}

/// A flow as the CE/CNP findings name it: whether it carried data, whether CNPs.
pub type Carrier = (FlowRef, bool, bool);

/// CE marks and the CNPs that answer them, per direction of an IP pair.
fn feedback(run: &Pipeline) -> Vec<Finding> {
    let e = &run.analyses.ecn;
    let end = run.engine.last_ns.unwrap_or(0);
    let interval = e.interval();
    let pairs: Vec<PairFacts> = e
        .pairs()
        .map(|(((a, v), (b, _)), p)| {
            let (unanswered, covered) = p.split(end, e.timeout_ns, interval);
            let (a, b) = (addr_string(*v, a), addr_string(*v, b));
            PairFacts { a, b, ce: p.ce, cnp_back: p.cnp_back, unanswered, covered }
        })
        .collect();
    // Only the flows between the hosts a finding names (a fabric of many pairs has few with
    // CE/CNP trouble): no name is made for the others.
    let carriers = |wanted: &[(&str, &str)]| {
        let hosts: FxHashSet<([u8; 16], [u8; 16])> =
            wanted.iter().filter_map(|(s, d)| Some((addr_bytes(s)?, addr_bytes(d)?))).collect();
        let named = run.analyses.flows.markings().filter(|(k, _)| hosts.contains(&(k.src, k.dst)));
        named.map(|(k, m)| (flow_ref(k), m.data > 0, m.cnps > 0)).collect()
    };
    feedback_findings(&pairs, interval, e.timeout_ns, carriers)
}

/// The CE/CNP findings of `pairs`, with the pacing `interval` and `--cnp-timeout`; `carriers`
/// gives the flows with data or CNPs from source to destination of the host pairs it is given
/// (those a finding names; asked once, only when there are any).
pub fn feedback_findings(
    pairs: &[PairFacts],
    interval: Interval,
    timeout_ns: u64,
    carriers: impl FnOnce(&[(&str, &str)]) -> Vec<Carrier>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut wanted: Vec<(&str, &str)> = Vec::new();
    for p in pairs {
        if p.unanswered > 0 {
            wanted.push((&p.a, &p.b));
        }
        if p.cnp_back > 0 && p.ce == 0 {
            wanted.push((&p.b, &p.a));
        }
    }
    let flows: Vec<Carrier> = if wanted.is_empty() { Vec::new() } else { carriers(&wanted) };
    let named = |src: &str, dst: &str, cnp: bool| -> Vec<FlowRef> {
        let of = flows.iter().filter(|(f, _, _)| f.src == src && f.dst == dst);
        of.filter(|(_, data, cnps)| if cnp { *cnps } else { *data }).map(|(f, _, _)| f.clone()).collect()
    };
    for p in pairs {
        let (sa, sb) = (&p.a, &p.b);
        if p.unanswered > 0 {
            let paced = match interval {
                Interval::Unknown => " (too few CNPs to tell their pacing interval: give --cnp-interval)".to_string(),
                i => format!(
                    "; {} within the CNP pacing interval ({}, {}) after a CNP",
                    if p.covered > 0 { format!("{} more came, covered by it,", p.covered) } else { "none came".into() },
                    ns_text(i.ns().unwrap_or(0)),
                    if matches!(i, Interval::Given(_)) { "given" } else { "inferred from the CNP gaps" }
                ),
            };
            out.push(finding(
                Severity::Error,
                FindingCode::CeWithoutCnp,
                format!(
                    "{sa} → {sb}: {} of {} CE-marked packets got no CNP back within {} and none just before{paced}: the notification point (the receiving NIC) does not send CNPs, or they are lost",
                    p.unanswered,
                    p.ce,
                    ns_text(timeout_ns)
                ),
                named(sa, sb, false),
            ));
        }
        if p.cnp_back > 0 && p.ce == 0 {
            out.push(finding(
                Severity::Info,
                FindingCode::CnpWithoutCe,
                format!(
                    "{sb} → {sa}: {} CNPs with no CE mark seen from {sa} to {sb}: some NICs send CNPs on NAKs, or the marks were on packets this vantage point did not see; not an error by itself",
                    p.cnp_back
                ),
                named(sb, sa, true),
            ));
        }
    }
    out
}

/// Whether a finding is of the CE/CNP family ([`feedback_findings`]).
pub fn is_feedback(code: FindingCode) -> bool {
    matches!(code, FindingCode::CeWithoutCnp | FindingCode::CnpWithoutCe)
}

/// AETHs by kind ([`aeth`] index) per (source, destination) address pair, over all flows.
pub(super) type HostAeth = FxHashMap<([u8; 16], [u8; 16]), [u64; aeth::COUNT]>;

pub(super) fn host_aeth(run: &Pipeline) -> HostAeth {
    let mut m: HostAeth = FxHashMap::default();
    // (Flows without an AETH add nothing: most flows of a large capture carry requests.)
    for (k, s) in run.engine.flows.iter().filter(|(_, s)| s.psn.aeth.iter().any(|n| *n > 0)) {
        let e = m.entry((k.src, k.dst)).or_default();
        for (t, v) in e.iter_mut().zip(s.psn.aeth) {
            *t += v;
        }
    }
    m
}

/// AETHs of one kind travelling back to the sender of `k`: on the paired ACK flow when the
/// pairing is known, else on every flow from `k`'s destination to its source.
pub(super) fn reverse_aeth(run: &Pipeline, hosts: &HostAeth, k: &FlowKey, kind: usize) -> u64 {
    match run.analyses.rtt.peer(k) {
        Some(peer) => run.engine.flows.get(&peer).map_or(0, |s| s.psn.aeth[kind]),
        None => hosts.get(&(k.dst, k.src)).map_or(0, |a| a[kind]),
    }
}

/// What the transport findings read of one flow: its PSN counters and AETHs, the NAKs of each
/// kind its receiver sent back, the skipped PSNs the ACKs showed the capture missed, its RTT
/// timeouts. A run reads them from its engine, `merge` from the merged flows, so that a report
/// merged from a capture cut in time gets one run's findings ([`transport_findings`]).
#[derive(Debug, Clone)]
pub struct FlowFacts {
    pub flow: FlowRef,
    pub count: [u64; count::COUNT],
    pub aeth: [u64; aeth::COUNT],
    /// PSN-sequence-error and RNR NAKs from the receiver (on the paired ACK flow, else on every
    /// flow back).
    pub naks_back: u64,
    pub rnrs_back: u64,
    pub missed: u64,
    pub rtt_timeouts: u64,
}

/// PSN and NAK patterns per flow.
fn transport(run: &Pipeline) -> Vec<Finding> {
    let hosts = host_aeth(run);
    let end = run.engine.last_ns.unwrap_or(0);
    let facts = run.engine.flows.iter().map(|(k, s)| FlowFacts {
        flow: flow_ref(k),
        count: s.psn.count,
        aeth: s.psn.aeth,
        naks_back: reverse_aeth(run, &hosts, k, aeth::PSN_SEQUENCE_ERROR),
        rnrs_back: reverse_aeth(run, &hosts, k, aeth::RNR),
        missed: run.analyses.messages.capture_missed.get(k).copied().unwrap_or(0),
        rtt_timeouts: run.analyses.rtt.outcome(&run.analyses.flows, k, end).0,
    });
    transport_findings(facts, run.analyses.config.rtt_timeout_ns)
}

/// The transport findings of every flow (`rtt_timeout_ns`: the timeout its RTT was judged by).
pub fn transport_findings(facts: impl Iterator<Item = FlowFacts>, rtt_timeout_ns: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in facts {
        let one = || vec![f.flow.clone()];
        sequence(&mut out, &f.count, (f.naks_back, f.rnrs_back, f.missed), &one);
        nak_kinds(&mut out, &f.count, &f.aeth, &one);
        if f.rtt_timeouts > 0 {
            out.push(finding(
                Severity::Warning,
                FindingCode::RttTimeout,
                format!("{} requests with AckReq not acknowledged within {}", f.rtt_timeouts, ns_text(rtt_timeout_ns)),
                one(),
            ));
        }
    }
    out
}

/// Whether a finding is of the transport family ([`transport_findings`]).
pub fn is_transport(code: FindingCode) -> bool {
    use FindingCode::*;
    matches!(
        code,
        GoBackN | Reordering | PsnGap | RnrRetry | Retransmission | ReadResponseGap | RnrNak | NakError | RttTimeout
    )
}

/// The one finding a flow's PSN sequence gives, if any: go-back-N (duplicates after
/// sequence NAKs), reordering, a gap (of the PSNs skipped, those no ACK showed delivered:
/// `missed` were, and the capture lost them), RNR retries, retransmissions; `naks` and `rnrs`
/// are the receiver's NAKs of each kind.
fn sequence(
    out: &mut Vec<Finding>,
    c: &[u64; count::COUNT],
    (naks, rnrs, missed): (u64, u64, u64),
    one: &dyn Fn() -> Vec<FlowRef>,
) {
    if c[count::DUPLICATES] > 0 && naks > 0 {
        out.push(finding(
            Severity::Warning,
            FindingCode::GoBackN,
            format!(
                "{} duplicate PSNs after {naks} PSN-sequence-error NAKs from the receiver: go-back-N retransmission after loss ({} out-of-sequence arrivals skipping {} PSNs)",
                c[count::DUPLICATES], c[count::OUT_OF_SEQUENCE], c[count::PSN_SKIPPED]
            ),
            one(),
        ));
    } else if c[count::OUT_OF_SEQUENCE] > 0 && c[count::DUPLICATES] > 0 {
        out.push(finding(
            Severity::Warning,
            FindingCode::Reordering,
            format!(
                "{} out-of-sequence and {} duplicate PSNs with no PSN-sequence NAK: packets are reordered in the fabric (adaptive routing or packet spraying)",
                c[count::OUT_OF_SEQUENCE], c[count::DUPLICATES]
            ),
            one(),
        ));
    } else if c[count::OUT_OF_SEQUENCE] > 0 && c[count::PSN_SKIPPED] > missed {
        out.push(finding(
            Severity::Warning,
            FindingCode::PsnGap,
            format!(
                "{} out-of-sequence arrivals skipping {} PSNs{}, no retransmission seen and no ACK covering them: loss before this vantage point, or the capture dropped packets",
                c[count::OUT_OF_SEQUENCE],
                c[count::PSN_SKIPPED] - missed,
                if missed > 0 { format!(" (and {missed} more the ACKs show delivered)") } else { String::new() }
            ),
            one(),
        ));
    } else if c[count::DUPLICATES] > 0 && rnrs > 0 {
        out.push(finding(
            Severity::Warning,
            FindingCode::RnrRetry,
            format!("{} duplicate PSNs: retries after {rnrs} RNR NAKs from the receiver", c[count::DUPLICATES]),
            one(),
        ));
    } else if c[count::DUPLICATES] > 0 {
        out.push(finding(
            Severity::Warning,
            FindingCode::Retransmission,
            format!(
                "{} duplicate PSNs with no gap seen here: retransmissions after a loss past this vantage point or an ACK timeout",
                c[count::DUPLICATES]
            ),
            one(),
        ));
    }
}

/// READ RESPONSE gaps, RNR NAKs and the NAKs that end a QP.
fn nak_kinds(out: &mut Vec<Finding>, c: &[u64; count::COUNT], a: &[u64; aeth::COUNT], one: &dyn Fn() -> Vec<FlowRef>) {
    if c[count::RESPONSE_OUT_OF_SEQUENCE] > 0 {
        out.push(finding(
            Severity::Warning,
            FindingCode::ReadResponseGap,
            format!("{} READ RESPONSE packets out of sequence within a response", c[count::RESPONSE_OUT_OF_SEQUENCE]),
            one(),
        ));
    }
    if a[aeth::RNR] > 0 {
        out.push(finding(
            Severity::Warning,
            FindingCode::RnrNak,
            format!(
                "{} RNR NAKs: the receiver had no receive WQE posted (receiver not ready); the sender backs off by the RNR timer",
                a[aeth::RNR]
            ),
            one(),
        ));
    }
    let fatal = [
        (aeth::INVALID_REQUEST, "invalid request"),
        (aeth::REMOTE_ACCESS, "remote access error"),
        (aeth::REMOTE_OPERATIONAL, "remote operational error"),
        (aeth::INVALID_RD_REQUEST, "invalid RD request"),
    ];
    let parts: Vec<String> =
        fatal.iter().filter(|(i, _)| a[*i] > 0).map(|(i, name)| format!("{} {name}", a[*i])).collect();
    if !parts.is_empty() {
        out.push(finding(
            Severity::Error,
            FindingCode::NakError,
            format!("NAKs that move the QP to the error state: {}", parts.join(", ")),
            one(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(severity: Severity, code: FindingCode, message: &str) -> Finding {
        Finding::new(severity, code, message.into(), Vec::new())
    }

    /// The audit's own findings by severity and code first; then each section's in the order
    /// given, sections in the order a run appends them (vantage, load balancing, PFC, messages).
    #[test]
    fn a_merge_lists_findings_in_a_run_s_order() {
        let mut v = vec![
            f(Severity::Warning, FindingCode::TailDominatedBy, "tail"),
            f(Severity::Warning, FindingCode::PfcRateHigh, "rate 3"),
            f(Severity::Warning, FindingCode::PfcBeforeEcn, "onsets"),
            f(Severity::Info, FindingCode::CnpWithoutCe, "cnp"),
            f(Severity::Warning, FindingCode::PfcRateHigh, "rate 1"),
            f(Severity::Warning, FindingCode::SprayingWithoutOoo, "spray"),
            f(Severity::Error, FindingCode::NotEct, "not ect"),
            f(Severity::Warning, FindingCode::LossBetween, "hop"),
        ];
        in_run_order(&mut v);
        let order: Vec<&str> = v.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(order, ["not ect", "cnp", "hop", "spray", "rate 3", "onsets", "rate 1", "tail"]);
    }
}
