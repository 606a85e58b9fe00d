//! Load balancing's late arrivals across cuts in time. A request that fills a gap its flow had
//! open is late (reordered, RFC 5236's displacement), one behind the flow's next PSN in no open
//! gap a retransmission (`analyses::messages::kept`). Across a cut one run knows the gaps the
//! part before left open (`flows[].edge.gaps`) and where it left the flow; the part after
//! starts afresh: a request filling a gap left before the cut is late in one run and not in the
//! part, and one the part counted late may be a retransmission in one run.
//!
//! [`stitch`] replays each part's first requests with its ACK flow's first ACKs and NAKs
//! ([`super::gap_replay`]) from where the part before left the flow and from nothing, until the
//! two states agree; the late arrivals of the two replays up to there are what one run counts
//! otherwise than the part. Where the reports cannot tell the flow is `Untold` (the merge says
//! `load_balancing_not_merged`): READs (their responses take PSNs), a request and a response at
//! the same time, states that do not agree within the heads while the part counted more
//! requests behind its next PSN after them, or no head times (older reports).

use super::gap_replay::{After, Gaps, Payload, names, replay};
use super::psn_stitch::Part;
use super::rtt_karn::Untold;
use super::rtt_stitch::{FlowId, Pairing};

/// What one run counts late beyond the parts, and what the parts counted late that one run
/// does not (displacements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Late {
    pub add: Vec<u32>,
    pub sub: Vec<u32>,
}

/// The late arrivals of flow `id` (its parts in time order) across its cuts, with its ACK flow
/// as the reports pair them; and the payload one run counts otherwise, by report (a request
/// the part took for new that one run took for sent again, or the other way round).
pub fn of(pairing: &Pairing, id: &FlowId) -> Result<(Late, Vec<(usize, Payload)>), Untold> {
    let ps = pairing.parts.get(id).ok_or(Untold)?;
    let ack = pairing.ack_of(id, ps, true).ok_or(Untold)?;
    // One run pairs the ACK flow at its first response within the flow's PSNs, where it can.
    let inferred = pairing.by_psn(id, &ack).then(|| ps.iter().find_map(Part::first_request)).flatten();
    let (first, rest) = ps.split_first().ok_or(Untold)?;
    let mut named = names(first);
    let mut after = Vec::new();
    // A first part that paired none of the responses one run pairs from the ACK flow's first
    // on (no report named them): replayed from nothing too.
    let fresh = (!named && pairing.at_first_ack(id)).then(|| {
        named = true;
        after.push(After::new(Some(first), Part::of(ack.parts, first.report), true));
        Part { edge: Some(crate::engine::edges::edge(None, Default::default())), ..first.clone() }
    });
    for p in rest {
        after.push(After::new(Some(p), Part::of(ack.parts, p.report), named));
        named |= names(p);
    }
    let mut payload = Vec::new();
    let late = replay_parts(fresh.as_ref().unwrap_or(first), &after, inferred, &mut payload)?;
    Ok((late, payload))
}

/// The flow's parts in time order: the first as it ended, each later one as [`After`] (with
/// its part of the flow); `inferred`: no report paired its ACK flow, one run pairs it at the
/// first ACK within its PSNs from this one.
pub fn stitch(first: &Part, rest: &[After], inferred: Option<u32>) -> Result<Late, Untold> {
    replay_parts(first, rest, inferred, &mut Vec::new())
}

/// [`stitch`], with the payload one run counts otherwise added to `payload` by report.
fn replay_parts(
    first: &Part,
    rest: &[After],
    inferred: Option<u32>,
    payload: &mut Vec<(usize, Payload)>,
) -> Result<Late, Untold> {
    let mut state = Gaps::at_end(first.edge.as_ref().ok_or(Untold)?)?;
    let mut late = Late::default();
    let mut paired = false;
    for (n, a) in rest.iter().enumerate() {
        let p = a.part.ok_or(Untold)?;
        let e = p.edge.as_ref().ok_or(Untold)?;
        paired |= a.carried;
        let r = replay(state, a, &mut paired, inferred)?;
        // Past the head: the part counted no more request behind its next PSN, or it is not told.
        if !r.met && !e.complete && p.repeats != r.behind {
            return Err(Untold);
        }
        late.add.extend(r.counted.late_add);
        late.sub.extend(r.counted.late_sub);
        payload.extend(r.counted.payload.iter().map(|x| (p.report, *x)));
        // Where one run leaves the flow for the next cut: the part's own end once the replays
        // met; else what the replay saw, when it saw everything.
        state = match (r.met, r.whole) {
            (true, _) => Gaps::at_end(e)?,
            (false, true) => r.one,
            (false, false) if n + 1 == rest.len() => r.one,
            (false, false) => return Err(Untold),
        };
    }
    Ok(late)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edge::{EdgeAcks, HeadFrame};

    const SEND_ONLY: u32 = 0x04;

    /// A part of SEND ONLY requests `psns` at 10 ns apart from `t0`, ending at `next` with
    /// `gaps` open.
    fn part(report: usize, psns: &[u32], t0: u64, next: u32, gaps: &[[u32; 3]]) -> Part {
        let mut e = crate::engine::edges::edge(None, Default::default());
        e.head = psns.iter().map(|p| HeadFrame([SEND_ONLY, *p, 0, 0, 0, 0])).collect();
        e.head_ns = (0..psns.len() as u64).map(|i| t0 + 10 * i).collect();
        e.end.started = 1;
        e.end.expected = next;
        e.gaps = gaps.to_vec();
        Part { edge: Some(e), report, ..Part::default() }
    }

    fn after(p: &Part) -> After<'_> {
        After { part: Some(p), acks: None, carried: true, names: true, unpaired_first: 0 }
    }

    /// reorder.pcap cut in 3, by hand: 500 501 503 | 502 504 505. The part before left 502
    /// open and 504 next; 502 after the cut is late in one run, displaced by 1 (503 came
    /// before it); the part alone took 502 as its first and counted nothing late.
    #[test]
    fn a_gap_left_before_the_cut_is_filled_after_it() {
        let before = part(0, &[500, 501, 503], 0, 504, &[[502, 1, 0]]);
        let next = part(1, &[502, 504, 505], 100, 506, &[[503, 1, 0]]);
        assert_eq!(stitch(&before, &[after(&next)], None), Ok(Late { add: vec![1], sub: vec![] }));
        // An ACK for 503 before 502 came told the gap apart: 502 is a retransmission.
        let mut ack_flow = part(1, &[], 0, 0, &[]);
        ack_flow.edge.as_mut().unwrap().acks =
            Some(EdgeAcks { head: vec![[95, 503]], complete: true, unpaired: 0, ambiguous: 0 });
        let a = After { acks: Some(&ack_flow), ..after(&next) };
        assert_eq!(stitch(&before, &[a], None), Ok(Late::default()));
    }

    /// The same cut with an ACK flow no report paired: one run pairs it at the ACK for 503 (the
    /// flow's PSNs so far run from 500 to 503), which tells the gap at 502 apart before 502
    /// comes: a retransmission, nothing late. Not inferred, the ACK is left alone.
    #[test]
    fn an_ack_flow_one_run_pairs_by_psn() {
        let before = part(0, &[500, 501, 503], 0, 504, &[[502, 1, 0]]);
        let next = part(1, &[502, 504, 505], 100, 506, &[[503, 1, 0]]);
        let mut ack_flow = part(1, &[], 0, 0, &[]);
        let head = EdgeAcks { head: vec![[95, 503]], complete: true, unpaired: 1, ambiguous: 0 };
        ack_flow.edge.as_mut().unwrap().acks = Some(head);
        let a = || After { acks: Some(&ack_flow), carried: false, unpaired_first: 1, ..after(&next) };
        assert_eq!(stitch(&before, &[a()], Some(500)), Ok(Late::default()));
        assert_eq!(stitch(&before, &[a()], None), Ok(Late { add: vec![1], sub: vec![] }));
    }

    /// psn_wrap.pcap cut in 3, by hand: ... 16777214 | 1 16777215 2. One run: 1 opens a gap of
    /// 16777215 and 0, then 16777215 fills it, 2 later PSNs before it (1 and, counted by
    /// RFC 5236, none more: displacement psn_diff(16777215, 2) − 1 = 2); the part alone took 1
    /// first and 16777215 as a retransmission.
    #[test]
    fn a_late_arrival_across_the_wrap() {
        let before = part(0, &[16_777_214], 0, 16_777_215, &[]);
        let next = part(1, &[1, 16_777_215, 2], 100, 3, &[]);
        assert_eq!(stitch(&before, &[after(&next)], None), Ok(Late { add: vec![2], sub: vec![] }));
    }

    /// The part alone counts late what one run counts a retransmission: 9 after the cut, then
    /// 11, then 10 (late in the part), but one run had seen 10 before the cut.
    #[test]
    fn a_late_arrival_of_the_part_is_a_retransmission_in_one_run() {
        let before = part(0, &[8, 9, 10, 11], 0, 12, &[]);
        let next = part(1, &[9, 11, 10, 12], 100, 13, &[]);
        // 10 after 11 in the part alone: psn_diff(10, 12) − 1 = 1.
        assert_eq!(stitch(&before, &[after(&next)], None), Ok(Late { add: vec![], sub: vec![1] }));
    }

    /// A READ after the cut: its responses take the PSNs up to the next request (no gap), and
    /// 502 fills the gap the part before left, late behind 504 and the READ's span (displaced
    /// by psn_diff(502, 510) − 1 = 7); the part alone took it for a retransmission. With a NAK
    /// for 502 first (the ACK flow's head), the gap was lost: 502 is sent again in one run too.
    #[test]
    fn a_read_and_a_nak_after_the_cut() {
        let before = part(0, &[500, 501, 503], 0, 504, &[[502, 1, 0]]);
        let mut next = part(1, &[504, 509, 502], 100, 510, &[]);
        next.edge.as_mut().unwrap().head[0].0[0] = 0x0C;
        assert_eq!(stitch(&before, &[after(&next)], None), Ok(Late { add: vec![7], sub: vec![] }));
        let mut nak = part(1, &[], 0, 0, &[]);
        let e = nak.edge.as_mut().unwrap();
        (e.head, e.head_ns, nak.naks) = (vec![HeadFrame([0x11, 502, 0, 0, 0x60, 0])], vec![105], 1);
        assert_eq!(stitch(&before, &[After { acks: Some(&nak), ..after(&next) }], None), Ok(Late::default()));
    }

    /// qp_mtus.pcap cut in 2, by hand: a flow's one part (400 401 403 404, then 402 403 404
    /// after a NAK for 402 at 64) whose report could not pair the NAK (another flow between the
    /// hosts spanned it there), which one run pairs from the ACK flow's first response. The
    /// part alone took 402 for a late arrival (2 PSNs past it: psn_diff(402, 405) − 1); one run
    /// marked its gap lost at the NAK, and 402 is sent again. Replayed from nothing, with every
    /// response applied in one run and none in the part.
    #[test]
    fn a_part_that_could_not_pair_a_nak_one_run_pairs() {
        // (Nothing before it: a fresh state.)
        let mut start = part(0, &[], 0, 0, &[]);
        start.edge.as_mut().unwrap().end.started = 0;
        let mut only = part(0, &[400, 401, 403, 404, 402, 403, 404], 60, 405, &[]);
        only.out_of_sequence = 1;
        let mut nak = part(0, &[], 0, 0, &[]);
        let e = nak.edge.as_mut().unwrap();
        (e.head, e.head_ns, nak.naks) = (vec![HeadFrame([0x11, 402, 0, 0, 0x60, 0])], vec![95], 1);
        let a = |carried| After { acks: Some(&nak), carried, names: false, unpaired_first: 0, ..after(&only) };
        assert_eq!(stitch(&start, &[a(true)], None), Ok(Late { add: vec![], sub: vec![2] }));
        // The part's own run: nothing to correct.
        assert_eq!(stitch(&start, &[a(false)], None), Ok(Late::default()));
    }

    /// What the reports cannot tell: a NAK the ACK flow's head does not hold, no head times, a
    /// part whose head ends before the replays meet and which counted more repeats after it.
    #[test]
    fn what_the_reports_cannot_tell() {
        let before = part(0, &[500, 501, 503], 0, 504, &[[502, 1, 0]]);
        let next = part(1, &[502, 504, 505], 100, 506, &[]);
        let nak = Part { naks: 1, ..part(1, &[], 0, 0, &[]) };
        assert!(stitch(&before, &[After { acks: Some(&nak), ..after(&next) }], None).is_err());
        let mut bare = next.clone();
        bare.edge.as_mut().unwrap().head_ns.clear();
        assert!(stitch(&before, &[after(&bare)], None).is_err());
        let mut long = part(1, &[502, 506, 507], 100, 600, &[]);
        (long.edge.as_mut().unwrap().complete, long.repeats) = (false, 3);
        assert!(stitch(&before, &[after(&long)], None).is_err());
    }
}
