//! The capture's own loss across cuts in time. A request flow's PSNs skipped before a cut and
//! not told apart there are told by an ACK after it: the responder acknowledges PSN p only
//! once every PSN up to p arrived, so a gap an ACK covers with no NAK and no retransmission was
//! delivered, and the capture missed it (`flows[].psn.capture_missed`, `capture.loss`). With
//! `--edges` each part lists its open gaps (`flows[].edge.gaps`), its first requests with their
//! times, and the ACK flow its first ACKs and NAKs; [`stitch`] replays each report after the
//! flow's first on one run's gaps and on the part's own ([`super::gap_replay`]): a NAK or a
//! retransmission marks a gap lost, a late arrival fills it, a request after a cut that was
//! sent before it opens none. What one run counts missed otherwise than the parts is added and
//! taken away.
//!
//! Where the parts cannot tell, the flow stays as its parts counted it and the merge says so
//! (`capture_loss_not_stitched`): replays that do not meet within the heads (more requests,
//! ACKs or NAKs than they list), a request and a response at one time, a READ, more gaps than
//! the analysis keeps, an ACK flow the reports cannot pair while a gap is open.

use std::collections::BTreeMap;

use super::gap_replay::{After, Gaps, Payload, names, replay};
use super::psn_stitch::Part;
use super::rtt_karn::Untold;
use super::rtt_stitch::{FlowId, Pairing, Span, in_series};

/// PSNs one run counts missed by the capture beyond its parts' count, and below it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Missed {
    pub add: u64,
    pub sub: u64,
}

/// A flow walked over the reports after its first part: what one run counts missed by the
/// capture otherwise than its parts, the requests whose new payload it counts otherwise (by
/// report), and the reports walked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walk {
    pub missed: Missed,
    pub payload: Vec<(usize, Payload)>,
    pub reports: Vec<usize>,
}

/// Per request flow across a cut (or with gaps open at one): its [`Walk`], or `None` when the
/// parts cannot tell.
pub type Told = BTreeMap<FlowId, Option<Walk>>;

/// The flows across cuts or with gaps open at one (`parts` by flow, `spans` by report) and what
/// the reports after tell of them.
pub fn stitch(pairing: &Pairing, spans: &[Span]) -> Told {
    let order = in_series(spans);
    let last = order.as_ref().and_then(|o| o.last().copied());
    let mut told = Told::new();
    for (id, ps) in pairing.parts {
        let open = |p: &Part| p.edge.as_ref().is_some_and(|e| e.gaps.iter().any(|g| g[2] == 0));
        if !ps.iter().any(|p| Some(p.report) != last && open(p)) && ps.len() < 2 {
            continue;
        }
        let t = order.as_deref().ok_or(Untold).and_then(|o| flow(pairing, id, ps, o));
        told.insert(id.clone(), t.ok());
    }
    told
}

/// Flow `id` (its parts `ps`, in time order) over the reports in `order` from its first part on.
fn flow(pairing: &Pairing, id: &FlowId, ps: &[Part], order: &[usize]) -> Result<Walk, Untold> {
    let ack = pairing.ack_of(id, ps, true);
    let acks = ack.as_ref().map_or(&[][..], |a| a.parts);
    // One run pairs the ACK flow at its first response within the flow's PSNs, where it can.
    let inferred = ack.as_ref().filter(|a| pairing.by_psn(id, a)).and_then(|_| ps.iter().find_map(Part::first_request));
    let first = ps.first().ok_or(Untold)?;
    let mut state = Gaps::at_end(first.edge.as_ref().ok_or(Untold)?)?;
    let (mut named, mut paired, mut walk) = (names(first), false, Walk::default());
    let at = order.iter().position(|j| *j == first.report).ok_or(Untold)?;
    for &j in &order[at + 1..] {
        let (part, acks_here) = (Part::of(ps, j), Part::of(acks, j));
        if part.is_none() && acks_here.is_none() {
            continue;
        }
        let a = After::new(part, acks_here, named);
        paired |= a.carried;
        let r = replay(state, &a, &mut paired, inferred)?;
        // Responses the reports could not pair would have told the gaps open in a replay.
        if ack.is_none() && r.gapped {
            return Err(Untold);
        }
        walk.missed.add += r.counted.missed_add;
        walk.missed.sub += r.counted.missed_sub;
        walk.payload.extend(r.counted.payload.iter().map(|p| (j, *p)));
        walk.reports.push(j);
        // Where one run leaves the flow: the part's own end once the replays met; else what
        // the replay saw, when it saw every request and response of the report.
        state = match (r.met, r.whole, part) {
            (true, _, Some(p)) => Gaps::at_end(p.edge.as_ref().ok_or(Untold)?)?,
            (true, _, None) | (false, true, _) => r.one,
            (false, false, _) => return Err(Untold),
        };
        named |= a.names;
    }
    Ok(walk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FlowRef;
    use crate::model::edge::{EdgeAcks, EdgeRtt, FlowEdge, HeadFrame};

    const KEY: (u8, &str, &str, u16, u32) = (4, "10.0.0.1", "10.0.0.2", 1, 7);

    fn key() -> FlowId {
        (KEY.0, KEY.1.into(), KEY.2.into(), KEY.3, KEY.4)
    }

    /// The request flow's part in `report`: WRITE ONLY requests `psns` 10 ns apart from `t0`,
    /// ending at `next` with `gaps` open, paired with the ACK flow.
    fn req(report: usize, psns: &[u32], t0: u64, next: u32, gaps: &[[u32; 3]]) -> Part {
        let ack_flow = Some(FlowRef { src: "10.0.0.2".into(), dst: "10.0.0.1".into(), udp_sport: 2, dst_qp: 9 });
        let mut e = FlowEdge {
            gaps: gaps.to_vec(),
            head: psns.iter().map(|p| HeadFrame([0x0A, *p, 1024, 0, 0, 0])).collect(),
            head_ns: (0..psns.len() as u64).map(|i| t0 + 10 * i).collect(),
            rtt: Some(EdgeRtt { ack_flow, ..Default::default() }),
            ..crate::engine::edges::edge(None, Default::default())
        };
        (e.end.started, e.end.expected) = (1, next);
        Part { edge: Some(e), report, ..Part::default() }
    }

    /// The ACK flow's part in `report`: ACKs `[time, psn]` (all of them: `complete`) and NAKs
    /// `[time, psn]` in its head.
    fn acks(report: usize, acks: &[[u64; 2]], complete: bool, naks: &[[u64; 2]]) -> Part {
        let mut head: Vec<(u64, HeadFrame)> =
            acks.iter().map(|[t, p]| (*t, HeadFrame([0x11, *p as u32, 0, 0, 0x1F, 0]))).collect();
        head.extend(naks.iter().map(|[t, p]| (*t, HeadFrame([0x11, *p as u32, 0, 0, 0x60, 0]))));
        head.sort_by_key(|h| h.0);
        let e = FlowEdge {
            acks: Some(EdgeAcks { head: acks.to_vec(), complete, unpaired: 0, ambiguous: 0 }),
            head_ns: head.iter().map(|h| h.0).collect(),
            head: head.into_iter().map(|h| h.1).collect(),
            ..crate::engine::edges::edge(None, Default::default())
        };
        Part { edge: Some(e), report, naks: naks.len() as u64, ..Part::default() }
    }

    fn told(parts: Vec<Part>, ack_parts: Vec<Part>) -> Option<Missed> {
        walk(parts, ack_parts).map(|w| w.missed)
    }

    fn walk(parts: Vec<Part>, ack_parts: Vec<Part>) -> Option<Walk> {
        let mut m = BTreeMap::new();
        m.insert(key(), parts);
        m.insert((4, "10.0.0.2".into(), "10.0.0.1".into(), 2, 9), ack_parts);
        let spans: Vec<Span> =
            (0..3).map(|i| Span { start_ns: 1000 * i, end_ns: 1000 * i + 999, timeout_ns: 1 }).collect();
        stitch(&Pairing::of(&m), &spans)[&key()].clone()
    }

    fn missed(add: u64, sub: u64) -> Option<Missed> {
        Some(Missed { add, sub })
    }

    /// The first part skipped PSNs 5..=6 (delivered: its capture missed them) and 9 (a NAK
    /// there marked it lost), and nothing after the cut told them apart. The second part's
    /// ACKs: PSN 8 covers 5..=6 (2 missed), PSN 12 covers 9 (lost, not the capture's).
    #[test]
    fn acks_after_a_cut_tell_the_gaps_before_it() {
        let first = || req(0, &[4, 7, 8, 10, 11, 12], 0, 13, &[[5, 2, 0], [9, 1, 1]]);
        let second = req(1, &[13, 14], 1000, 15, &[]);
        assert_eq!(
            told(vec![first(), second.clone()], vec![acks(1, &[[1020, 8], [1030, 12]], true, &[])]),
            missed(2, 0)
        );
        // An ACK head that ends before covering them (more ACKs came): not told.
        assert_eq!(told(vec![first(), second.clone()], vec![acks(1, &[[1020, 4]], false, &[])]), None);
        // No ACK after the cut covers them: nothing missed (still open, as in one run).
        assert_eq!(told(vec![first(), second], vec![acks(1, &[[1020, 4]], true, &[])]), missed(0, 0));
    }

    /// Go-back-N across two cuts (gobackn.pcap cut in 3, by hand): 104 skipped before the
    /// first cut; after it 107 108 109 and a NAK for 104 at the time of 107 (either order comes
    /// to the same), 104 105 sent again; after the second cut the ACK for 109 covers 104: lost
    /// (the NAK), not missed by the capture.
    #[test]
    fn a_nak_after_a_cut_marks_the_gap_lost() {
        let parts = |again: &[u32]| {
            let after: Vec<u32> = [107, 108, 109].iter().chain(again).copied().collect();
            vec![
                req(0, &[100, 101, 102, 103, 105, 106], 0, 107, &[[104, 1, 0]]),
                req(1, &after, 1000, 110, &[]),
                req(2, &[106, 107, 108, 109], 2000, 110, &[]),
            ]
        };
        let nak = acks(1, &[], true, &[[1000, 104]]);
        let ack = || acks(2, &[[2050, 109]], true, &[]);
        assert_eq!(told(parts(&[104, 105]), vec![nak.clone(), ack()]), missed(0, 0));
        // After the second cut 106 to 109 are sent again: new payload in that part alone, none
        // in one run (its first request the first).
        let w = walk(parts(&[104, 105]), vec![nak.clone(), ack()]).unwrap();
        let payload: Vec<(usize, u64, i64, bool)> =
            w.payload.iter().map(|(r, p)| (*r, p.ts, p.delta, p.first)).collect();
        assert_eq!(
            payload,
            [(2, 2000, -1024, true), (2, 2010, -1024, false), (2, 2020, -1024, false), (2, 2030, -1024, false)]
        );
        assert_eq!(w.reports, [1, 2]);
        // Without 104 sent again: lost by the NAK; without the NAK too, missed by the capture.
        assert_eq!(told(parts(&[]), vec![nak.clone(), ack()]), missed(0, 0));
        assert_eq!(told(parts(&[]), vec![acks(1, &[], true, &[]), ack()]), missed(1, 0));
        // The head holds a NAK for 108 and the part counted two: the other may have named
        // 104, after the head: not told.
        let beyond = Part { naks: 2, ..acks(1, &[], true, &[[1000, 108]]) };
        assert_eq!(told(parts(&[]), vec![beyond, ack()]), None);
    }

    /// The part after a cut counted missed what one run saw before it: 9 and 11 after the cut
    /// were sent before it too (retransmissions in one run); the part alone skipped 10, which
    /// its ACK for 11 told missed.
    #[test]
    fn what_the_part_counted_missed_one_run_saw_before_the_cut() {
        let parts = vec![req(0, &[8, 9, 10, 11], 0, 12, &[]), req(1, &[9, 11], 1000, 12, &[[10, 1, 0]])];
        assert_eq!(told(parts, vec![acks(1, &[[1050, 11]], true, &[])]), missed(0, 1));
    }
}
