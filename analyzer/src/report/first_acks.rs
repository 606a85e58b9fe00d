//! One run pairs an ACK flow with a request flow at the ACK flow's first response, by PSN
//! (`analyses::rtt`): the one request flow the other way between the two hosts whose PSNs span
//! it and that no ACK flow took before. Reports cut in time may see the two apart: a request
//! flow whose first requests came before a cut, an ACK flow whose first response came after it
//! (qp_mtus.pcap: a READ at the cut, its READ RESPONSEs after it). The part after leaves those
//! ACKs unpaired (or ambiguous, where another flow there spans them that one run had paired
//! already), and where the request flow carried no request with AckReq no report names the pair
//! (`flows[].edge.rtt.ack_flow` is a request flow's with RTT only).
//!
//! [`first_acks`] replays that pairing over every ACK flow of the reports, by its first ACK's
//! time, where the reports tell it: the candidates' first requests (with their times) and the
//! PSNs they reached, the pairs the reports named and when their first ACK came. Where a
//! candidate's span, its start or its pairing is not known at that time, it pairs nothing.

use std::collections::BTreeMap;

use analyzer_common::psn::{PSN_MASK, psn_diff, psn_later};

use super::psn_stitch::{FlowId, Part, acks_of};
use crate::analyses::rtt::READ_SLACK;
use crate::model::edge::HeadFrame;

/// A flow's first response: its time, its PSN, the start of its report.
type FirstAck = (u64, u32, u64);

/// The first response of a flow that one run pairs at (an ACK, a NAK or an RNR NAK) over its
/// parts in time order, as (time, PSN, the start of its part): `None` when not known (a part
/// before it without an edge or its head's times, or whose head ends before it), `Some(None)`
/// when it carried none.
fn first_ack(ps: &[Part]) -> Option<Option<FirstAck>> {
    use analyzer_common::wire::ext::AckType;
    for p in ps {
        let e = p.edge.as_ref().filter(|e| e.head_ns.len() == e.head.len())?;
        let pairs = |f: &HeadFrame| matches!(f.aeth(), Some(AckType::Ack | AckType::Nak | AckType::RnrNak));
        if let Some(i) = e.head.iter().position(pairs) {
            return Some(Some((e.head_ns[i], e.head[i].0[1] & PSN_MASK, p.start_ns)));
        }
        if !e.complete {
            return None;
        }
    }
    Some(None)
}

/// The flow's first request over its parts, as (PSN, time): `None` when not known (a part
/// before it without an edge or its head's times), `Some(None)` when it sent none.
fn first_request(ps: &[Part]) -> Option<Option<(u32, u64)>> {
    for p in ps {
        if p.first_request().is_some() {
            return p.first_request_at().map(Some);
        }
        p.edge.as_ref()?;
    }
    Some(None)
}

/// The latest PSN the flow reached over all its parts (the end of its span at any time).
fn reach(first: u32, ps: &[Part]) -> u32 {
    let ends = ps.iter().filter_map(|p| p.edge.as_ref()).filter(|e| e.end.started != 0);
    let last = ends.map(|e| e.end.expected.wrapping_sub(1) & PSN_MASK);
    last.fold(first, psn_later)
}

/// Whether a request flow that started at `first` (and reached `ps`'s PSNs by the end) spans an
/// ACK for `psn` whenever it is seen after its start: certainly (`Some(true)`), certainly not
/// (`Some(false)`), or not known (it depends on the PSNs reached by then).
fn spans(first: u32, ps: &[Part], psn: u32) -> Option<bool> {
    let d = psn_diff(first, psn);
    if d <= READ_SLACK {
        return Some(true);
    }
    (d > psn_diff(first, reach(first, ps)).saturating_add(READ_SLACK)).then_some(false)
}

/// Request flow → the ACK flow one run pairs it with at that ACK flow's first ACK, for the
/// ACK flows no report paired (`claimed`: each ACK flow's request flows as the reports named
/// them) that the reports tell.
pub fn first_acks(
    parts: &BTreeMap<FlowId, Vec<Part>>,
    claimed: &BTreeMap<FlowId, Vec<&FlowId>>,
) -> BTreeMap<FlowId, FlowId> {
    // Every ACK flow by its first ACK's time; `None`: its first ACK is not known.
    let mut acks: Vec<(Option<FirstAck>, &FlowId)> = Vec::new();
    for (id, ps) in parts {
        match first_ack(ps) {
            Some(None) => {}
            Some(Some(at)) => acks.push((Some(at), id)),
            None => acks.push((None, id)),
        }
    }
    acks.sort_by_key(|(at, _)| at.map(|a| a.0));
    // Request flows paired (by the reports or here), from when (`None`: not known). A pair the
    // reports named was made at the ACK flow's first response when the request flow had started
    // before it; else at a later response, which the reports do not place.
    let mut paired: BTreeMap<&FlowId, Option<u64>> = BTreeMap::new();
    for (at, id) in &acks {
        for r in claimed.get(*id).into_iter().flatten() {
            let started =
                |t: u64| parts.get(*r).and_then(|ps| first_request(ps)).flatten().is_some_and(|(_, t0)| t0 < t);
            paired.insert(r, at.map(|a| a.0).filter(|t| started(*t)));
        }
    }
    // The first report in time: there a report's pairing is one run's (it saw all before).
    let first = parts.values().flatten().map(|p| p.start_ns).min();
    let mut out = BTreeMap::new();
    for (i, (at, id)) in acks.iter().enumerate() {
        let Some((ts, psn, start)) = *at else { continue };
        if claimed.contains_key(*id) || Some(start) == first {
            continue;
        }
        // An ACK flow before it between the same hosts that no report named, whose ACKs its
        // reports all paired (with a request flow without RTT, not named): it took a flow not
        // known.
        let unnamed = acks[..i].iter().any(|(a, b)| {
            let hosts = b.0 == id.0 && b.1 == id.1 && b.2 == id.2;
            let all_paired = parts[*b].iter().filter_map(acks_of).all(|a| a.unpaired + a.ambiguous == 0);
            hosts && !claimed.contains_key(*b) && !out.values().any(|v| v == *b) && (a.is_none() || all_paired)
        });
        if unnamed {
            continue;
        }
        if let Some(r) = candidate(parts, &paired, id, ts, psn) {
            paired.insert(r, Some(ts));
            out.insert(r.clone(), (*id).clone());
        }
    }
    out
}

/// The one request flow from ACK flow `id`'s destination to its source that one run pairs with
/// it at its first ACK (`ts`, `psn`), when the reports tell.
fn candidate<'a>(
    parts: &'a BTreeMap<FlowId, Vec<Part>>,
    paired: &BTreeMap<&FlowId, Option<u64>>,
    id: &FlowId,
    ts: u64,
    psn: u32,
) -> Option<&'a FlowId> {
    let mut found = None;
    for (r, ps) in parts.iter().filter(|(r, _)| r.0 == id.0 && r.1 == id.2 && r.2 == id.1) {
        let Some((first, t0)) = first_request(ps)? else { continue };
        if t0 > ts {
            continue;
        }
        match paired.get(r) {
            Some(Some(t)) if *t < ts => continue,
            Some(_) => return None,
            None => {}
        }
        // (At one time the reports do not tell which came first.)
        if t0 == ts {
            return None;
        }
        if !spans(first, ps, psn)? {
            continue;
        }
        if found.replace(r).is_some() {
            return None;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edge::FlowEdge;

    const SEND_ONLY: u32 = 0x04;
    const ACKNOWLEDGE: u32 = 0x11;

    fn id(from: &str, to: &str, qp: u32) -> FlowId {
        (4, from.into(), to.into(), 1, qp)
    }

    /// A part of report `report` (starting at `start`) whose head is `frames` as (opcode, PSN,
    /// AETH syndrome, time).
    fn part(report: usize, start: u64, frames: &[(u32, u32, u32, u64)]) -> Part {
        let mut e: FlowEdge = crate::engine::edges::edge(None, Default::default());
        e.head = frames.iter().map(|(o, psn, syn, _)| HeadFrame([*o, *psn, 0, 0, *syn, 0])).collect();
        e.head_ns = frames.iter().map(|f| f.3).collect();
        if let Some(last) = frames.iter().filter(|f| f.0 == SEND_ONLY).map(|f| f.1).next_back() {
            (e.end.started, e.end.expected) = (1, last + 1);
        }
        Part { edge: Some(e), report, start_ns: start, end_ns: start + 999, ..Part::default() }
    }

    /// qp_mtus.pcap cut in 2, by hand: flow 1 was paired with the ACKs to QP 11 in the first
    /// report (its first ACK at 10). In the second (from 1 000), flow 2 starts at PSN 300 (40)
    /// and the responses to QP 12 come at 41 for PSN 300: one run pairs them (flow 1 had its
    /// ACK flow). Flow 3 starts at 400 (60), the NAK to QP 13 for 402 comes at 64: flow 2 spans
    /// 402 too (within a READ's slack) but had its ACK flow from 41, so one run pairs flow 3.
    #[test]
    fn one_run_pairs_at_the_first_response_where_the_reports_tell() {
        let (a, b) = ("10.0.0.1", "10.0.0.2");
        let mut parts = BTreeMap::new();
        parts.insert(id(a, b, 1), vec![part(0, 0, &[(SEND_ONLY, 100, 0, 5)])]);
        parts.insert(id(b, a, 11), vec![part(0, 0, &[(ACKNOWLEDGE, 100, 0x1F, 10)])]);
        parts.insert(id(a, b, 2), vec![part(1, 1_000, &[(SEND_ONLY, 300, 0, 1_040)])]);
        parts.insert(id(b, a, 12), vec![part(1, 1_000, &[(ACKNOWLEDGE, 300, 0x1F, 1_041)])]);
        parts.insert(id(a, b, 3), vec![part(1, 1_000, &[(SEND_ONLY, 400, 0, 1_060)])]);
        parts.insert(id(b, a, 13), vec![part(1, 1_000, &[(ACKNOWLEDGE, 402, 0x60, 1_064)])]);
        let one = id(a, b, 1);
        let claimed: BTreeMap<FlowId, Vec<&FlowId>> = [(id(b, a, 11), vec![&one])].into();
        let pairs = first_acks(&parts, &claimed);
        assert_eq!(pairs, [(id(a, b, 2), id(b, a, 12)), (id(a, b, 3), id(b, a, 13))].into());
        // Flow 1 not named by its report (no request with AckReq): the ACKs to QP 11 took a
        // flow the reports do not name, which might have been flow 2 or 3: neither is told.
        assert_eq!(first_acks(&parts, &BTreeMap::new()), BTreeMap::new());
        // Flow 1 started after the first response to QP 11 (12 against 10): the reports do not
        // say at which later response one run paired them, so whether it was free at 1 041 is
        // not told (it spans 300 within a READ's slack).
        parts.insert(id(a, b, 1), vec![part(0, 0, &[(SEND_ONLY, 100, 0, 12)])]);
        assert_eq!(first_acks(&parts, &claimed).get(&id(a, b, 2)), None);
        parts.insert(id(a, b, 1), vec![part(0, 0, &[(SEND_ONLY, 100, 0, 5)])]);
        // The response at the very time of flow 2's first request: which came first is not told.
        parts.insert(id(b, a, 12), vec![part(1, 1_000, &[(ACKNOWLEDGE, 300, 0x1F, 1_040)])]);
        assert_eq!(first_acks(&parts, &claimed).get(&id(a, b, 2)), None);
        // In the first report, the report's own pairing is one run's: left as it is.
        parts.insert(id(a, b, 2), vec![part(0, 0, &[(SEND_ONLY, 300, 0, 40)])]);
        parts.insert(id(b, a, 12), vec![part(0, 0, &[(ACKNOWLEDGE, 300, 0x1F, 41)])]);
        assert_eq!(first_acks(&parts, &claimed).get(&id(a, b, 2)), None);
    }
}
