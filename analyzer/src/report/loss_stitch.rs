//! The capture's own loss across cuts in time. A request flow's PSNs skipped before a cut and
//! not told apart there are told by an ACK after it: the responder acknowledges PSN p only
//! once every PSN up to p arrived, so a gap an ACK covers with no NAK and no retransmission was
//! delivered, and the capture missed it (`flows[].psn.capture_missed`, `capture.loss`). With
//! `--edges` each part lists its open gaps (`flows[].edge.gaps`) and the ACK flow its first ACKs
//! (`flows[].edge.acks`); [`stitch`] replays those ACKs on the gaps carried across each cut, as
//! the messages analysis does.
//!
//! Where the parts cannot tell, the flow stays as its parts counted it and the merge says so
//! (`capture_loss_not_stitched`): a NAK on the ACK flow after the cut (it marks a gap lost, in
//! an order the reports do not keep), a retransmission or late arrival after the cut (a PSN of a
//! gap sent again), more gaps than the analysis keeps, an ACK flow the reports cannot pair or
//! whose first ACKs end before covering the gaps.

use std::collections::BTreeMap;

use analyzer_common::psn::{PSN_HALF, PsnSeq, psn_diff};

use super::psn_stitch::Part;
use super::rtt_stitch::{FlowId, Pairing, Span, acks_of, in_series};
use crate::analyses::messages::kept::MAX_GAPS;

/// Per request flow with gaps open at a cut: the PSNs one run counts missed by the capture
/// beyond its parts' count (`Some`), or `None` when the parts cannot tell.
pub type Told = BTreeMap<FlowId, Option<u64>>;

/// The flows with gaps open at a cut (`parts` by flow, `spans` by report) and what the ACKs
/// after it tell of them.
pub fn stitch(pairing: &Pairing, spans: &[Span]) -> Told {
    let order = in_series(spans);
    let last = order.as_ref().and_then(|o| o.last().copied());
    let mut told = Told::new();
    for (id, ps) in pairing.parts {
        let open = |p: &Part| p.edge.as_ref().is_some_and(|e| e.gaps.iter().any(|g| g[2] == 0));
        if !ps.iter().any(|p| Some(p.report) != last && open(p)) && ps.len() < 2 {
            continue;
        }
        let t = match &order {
            Some(order) => replay(order, ps, pairing.ack_of(id, ps, true).filter(|a| !a.inferred).map(|a| a.parts)),
            None => Err(Untold),
        };
        match t {
            Ok(Some(n)) => told.insert(id.clone(), Some(n)),
            Ok(None) => None,
            Err(Untold) => told.insert(id.clone(), None),
        };
    }
    told
}

/// The gap one run opens at a cut: the PSNs from where the part before left the flow
/// (`before`) to the first request after the cut (`after`), if it skipped any. Told only by an
/// ACK at or past that request (an earlier one may precede the gap's opening).
fn cut_gap(before: &PsnSeq, after: &Part) -> Result<Option<[u32; 3]>, Untold> {
    let Some(first) = after.first_request() else { return Ok(None) };
    let d = psn_diff(before.expected, first);
    match (before.started, before.read_pending, d) {
        (0, _, _) | (_, _, 0) => Ok(None),
        // A READ's responses take PSNs the request flow does not send.
        (_, 1.., _) => Err(Untold),
        (_, _, d) if d < PSN_HALF => Ok(Some([before.expected, d, CUT])),
        _ => Ok(None),
    }
}

/// The third field of a gap opened at a cut (neither delivered nor lost yet, as `0`).
const CUT: u32 = 2;

/// Why a flow cannot be told (the parts do not keep it).
struct Untold;

/// A gap `[first, n, lost]` covered by an ACK for `psn` (a gap opened at a cut by one at or
/// past the request after it).
fn covered(g: &[u32; 3], psn: u32) -> bool {
    let last = g[0].wrapping_add(g[1] - u32::from(g[2] != CUT)) & 0x00FF_FFFF;
    psn_diff(last, psn) < PSN_HALF
}

/// The reports in `order`: each one's ACKs on the gaps carried into it, then its own open gaps
/// carried on. Returns the PSNs told missed by the capture.
/// (`acks`: the ACK flow's parts, `None` when the reports cannot pair it: untold if a gap
/// crosses a cut.)
fn replay(order: &[usize], req: &[Part], acks: Option<&[Part]>) -> Result<Option<u64>, Untold> {
    let (mut gaps, mut paired, mut told): (Vec<[u32; 3]>, bool, u64) = (Vec::new(), false, 0);
    let (mut before, mut carried): (Option<PsnSeq>, bool) = (None, false);
    for &j in order {
        let (r, a) = (Part::of(req, j), acks.and_then(|acks| Part::of(acks, j)));
        if r.as_ref().is_some_and(|p| p.edge.is_none()) || a.as_ref().is_some_and(|p| p.edge.is_none()) {
            return Err(Untold);
        }
        if let (Some(b), Some(r)) = (&before, r)
            && let Some(g) = cut_gap(b, r)?
        {
            gaps.push(g);
        }
        carried |= gaps.iter().any(|g| g[2] != 1);
        if acks.is_none() && !gaps.is_empty() {
            return Err(Untold);
        }
        let names = r.as_ref().and_then(|p| p.edge.as_ref()?.rtt.as_ref()?.ack_flow.as_ref()).is_some();
        if !gaps.is_empty() {
            if let Some(r) = r {
                let head = r.edge.iter().flat_map(|e| &e.head);
                let touches = head.clone().any(|f| gaps.iter().any(|g| psn_diff(g[0], f.0[1]) < g[1]));
                if r.repeats > 0 || touches || gaps.len() as u64 + r.out_of_sequence > MAX_GAPS as u64 {
                    return Err(Untold);
                }
            }
            if let Some(a) = a {
                let heads = acks_of(a);
                let carried = paired || (names && heads.is_some_and(|h| h.unpaired == 0));
                if a.naks > 0 || !carried {
                    return Err(Untold);
                }
                for [_, psn] in heads.iter().flat_map(|h| &h.head) {
                    gaps.retain(|g| {
                        let hit = covered(g, *psn as u32);
                        told += u64::from(hit && g[2] != 1) * g[1] as u64;
                        !hit
                    });
                }
                if heads.is_some_and(|h| !h.complete) && !gaps.is_empty() {
                    return Err(Untold);
                }
            }
        }
        paired |= names;
        if let Some(e) = r.as_ref().and_then(|p| p.edge.as_ref()) {
            gaps.extend(e.gaps.iter().copied());
            before = Some(e.end);
        }
    }
    Ok(carried.then_some(told))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FlowRef;
    use crate::model::edge::{EdgeAcks, EdgeRtt, FlowEdge};

    fn part(report: usize, e: FlowEdge) -> Part {
        Part { edge: Some(e), report, ..crate::report::psn_stitch::Part::default() }
    }

    fn req(gaps: &[[u32; 3]], head: &[u32]) -> FlowEdge {
        let ack_flow = Some(FlowRef { src: "10.0.0.2".into(), dst: "10.0.0.1".into(), udp_sport: 2, dst_qp: 9 });
        let head = head.iter().map(|p| crate::model::edge::HeadFrame([0x0A, *p, 0, 0, 0, 0])).collect();
        FlowEdge {
            gaps: gaps.to_vec(),
            head,
            rtt: Some(EdgeRtt { ack_flow, ..Default::default() }),
            ..crate::engine::edges::edge(None, Default::default())
        }
    }

    fn acks(psns: &[u32], complete: bool) -> FlowEdge {
        let head = psns.iter().map(|p| [0, *p as u64]).collect();
        let acks = Some(EdgeAcks { head, complete, unpaired: psns.len() as u64, ambiguous: 0 });
        FlowEdge { acks, ..crate::engine::edges::edge(None, Default::default()) }
    }

    fn flows(first: FlowEdge, second: FlowEdge, ack: FlowEdge) -> BTreeMap<FlowId, Vec<Part>> {
        let mut m = BTreeMap::new();
        m.insert((4, "10.0.0.1".into(), "10.0.0.2".into(), 1, 7), vec![part(0, first), part(1, second)]);
        m.insert((4, "10.0.0.2".into(), "10.0.0.1".into(), 2, 9), vec![part(1, ack)]);
        m
    }

    fn spans() -> Vec<Span> {
        vec![Span { start_ns: 0, end_ns: 10, timeout_ns: 1 }, Span { start_ns: 20, end_ns: 30, timeout_ns: 1 }]
    }

    /// The first part skipped PSNs 5..=6 (delivered: its capture missed them) and 9 (a NAK
    /// there marked it lost), and nothing after the cut told them apart. The second part's
    /// ACKs: PSN 8 covers 5..=6 (2 missed), PSN 12 covers 9 (lost, not the capture's).
    #[test]
    fn acks_after_a_cut_tell_the_gaps_before_it() {
        let key = (4, "10.0.0.1".to_string(), "10.0.0.2".to_string(), 1, 7);
        let m = flows(req(&[[5, 2, 0], [9, 1, 1]], &[]), req(&[], &[13, 14]), acks(&[8, 12], true));
        assert_eq!(stitch(&Pairing::of(&m), &spans())[&key], Some(2));
        // An ACK head that ends before covering them (more ACKs came): untold.
        let m = flows(req(&[[5, 2, 0]], &[]), req(&[], &[13]), acks(&[4], false));
        assert_eq!(stitch(&Pairing::of(&m), &spans())[&key], None);
        // A PSN of the gap sent again after the cut: untold (a retransmission marks it lost).
        let m = flows(req(&[[5, 2, 0]], &[]), req(&[], &[6, 13]), acks(&[8], true));
        assert_eq!(stitch(&Pairing::of(&m), &spans())[&key], None);
        // No ACK after the cut covers it: told, nothing missed (still open, as in one run).
        let m = flows(req(&[[5, 2, 0]], &[]), req(&[], &[13]), acks(&[4], true));
        assert_eq!(stitch(&Pairing::of(&m), &spans())[&key], Some(0));
    }
}
