//! Load balancing's late arrivals across cuts in time. A request that fills a gap its flow had
//! open is late (reordered, RFC 5236's displacement), one behind the flow's next PSN in no open
//! gap a retransmission (`analyses::messages::kept`). Across a cut one run knows the gaps the
//! part before left open (`flows[].edge.gaps`) and where it left the flow; the part after
//! starts afresh: a request filling a gap left before the cut is late in one run and not in the
//! part, and one the part counted late may be a retransmission in one run.
//!
//! [`stitch`] replays each part's first requests (`flows[].edge.head` with their times,
//! `head_ns`) and its ACK flow's first ACKs (an ACK covering a gap tells it apart: the PSNs were
//! delivered, or lost) twice, from where the part before left the flow and from nothing, until
//! the two states agree (the same next PSN, the same open gaps); the late arrivals of the two
//! replays up to there are what one run counts otherwise than the part. Where the reports
//! cannot tell the flow is `Untold` (the merge says `load_balancing_not_merged`): READs (their
//! responses take PSNs), a NAK on the ACK flow (it marks gaps lost at a time the reports do not
//! keep), a request and an ACK at the same time, states that do not agree within the head while
//! the part counted more requests behind its next PSN after it, or no head times (older reports).

use analyzer_common::opcode;
use analyzer_common::psn::{PSN_HALF, PSN_MASK, psn_diff};

use super::psn_stitch::Part;
use super::rtt_karn::{Untold, in_time_order};
use super::rtt_stitch::{FlowId, Pairing, acks_of};
use crate::analyses::messages::kept::MAX_GAPS;

/// What one run counts late beyond the parts, and what the parts counted late that one run
/// does not (displacements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Late {
    pub add: Vec<u32>,
    pub sub: Vec<u32>,
}

/// A gap: its first PSN, how many, and whether it was lost (a NAK or a retransmission touched it).
type Gap = (u32, u32, bool);

/// A flow's late-arrival state as the messages analysis keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct State {
    next: Option<u32>,
    gaps: Vec<Gap>,
}

impl State {
    fn holds(g: &Gap, psn: u32) -> bool {
        psn_diff(g.0, psn) < g.1
    }

    /// A request's PSN: its displacement when it arrived late.
    fn request(&mut self, psn: u32) -> Option<u32> {
        let Some(next) = self.next else {
            self.next = Some((psn + 1) & PSN_MASK);
            return None;
        };
        let d = psn_diff(next, psn);
        if d >= PSN_HALF {
            let Some(i) = self.gaps.iter().position(|g| Self::holds(g, psn) && !g.2) else {
                // Sent again: the gaps holding it were lost.
                self.gaps.iter_mut().filter(|g| Self::holds(g, psn)).for_each(|g| g.2 = true);
                return None;
            };
            let g = self.gaps.remove(i);
            let k = psn_diff(g.0, psn);
            for part in [(g.0, k, false), ((psn + 1) & PSN_MASK, g.1 - k - 1, false)] {
                if part.1 > 0 {
                    self.gaps.push(part);
                }
            }
            return Some(psn_diff(psn, next).saturating_sub(1));
        }
        if d > 0 {
            if self.gaps.len() == MAX_GAPS {
                self.gaps.remove(0);
            }
            self.gaps.push((next, d, false));
        }
        self.next = Some((psn + 1) & PSN_MASK);
        None
    }

    /// An ACK for `psn`: the gaps it covers are told apart.
    fn ack(&mut self, psn: u32) {
        self.gaps.retain(|g| psn_diff((g.0 + g.1 - 1) & PSN_MASK, psn) >= PSN_HALF);
    }

    /// The gaps a late arrival can fill, in order.
    fn open(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = self.gaps.iter().filter(|g| !g.2).map(|g| (g.0, g.1)).collect();
        v.sort_unstable();
        v
    }

    /// Whether `psn` would fill an open gap.
    fn fills(&self, psn: u32) -> bool {
        self.gaps.iter().any(|g| Self::holds(g, psn) && !g.2)
    }
}

/// What one part gives the replay: the part, its ACK flow's part (none: no ACK there), and
/// whether one run applies those ACKs to the flow (it paired them before the cut, or the part
/// paired every one).
pub struct After<'a> {
    pub part: &'a Part,
    pub acks: Option<&'a Part>,
    pub carried: bool,
    /// ACKs at the start of the ACK flow's head the part did not pair with the flow.
    pub unpaired_first: usize,
}

/// One event of a part, in time order.
enum Event {
    Request(u32),
    /// An ACK for a PSN, and whether the part paired it with the flow.
    Ack(u32, bool),
}

/// The late arrivals of flow `id` (its parts in time order) across its cuts, with its ACK flow
/// as the reports pair them.
pub fn of(pairing: &Pairing, id: &FlowId) -> Result<Late, Untold> {
    let ps = pairing.parts.get(id).ok_or(Untold)?;
    let ack = pairing.ack_of(id, ps, true).ok_or(Untold)?;
    // An ACK flow no report paired: one run pairs it at its first ACK within the flow's PSNs.
    let inferred = ack.inferred.then(|| ps.iter().find_map(Part::first_request)).flatten();
    let names = |p: &Part| p.edge.as_ref().and_then(|e| e.rtt.as_ref()).is_some_and(|r| r.ack_flow.is_some());
    let (first, rest) = ps.split_first().ok_or(Untold)?;
    let mut named = names(first);
    let mut after = Vec::new();
    for p in rest {
        let a = Part::of(ack.parts, p.report);
        let head = a.and_then(acks_of);
        let here = names(p);
        after.push(After {
            part: p,
            acks: a,
            carried: named || (here && head.is_some_and(|h| h.unpaired + h.ambiguous == 0)),
            unpaired_first: match (head, here) {
                (Some(h), true) => (h.unpaired + h.ambiguous) as usize,
                (Some(h), false) => h.head.len(),
                (None, _) => 0,
            },
        });
        named |= here;
    }
    stitch(first, &after, inferred)
}

/// The flow's parts in time order: the first as it ended, each later one as [`After`];
/// `inferred`: no report paired its ACK flow, one run pairs it at the first ACK within its PSNs
/// from this one.
pub fn stitch(first: &Part, rest: &[After], inferred: Option<u32>) -> Result<Late, Untold> {
    let e = first.edge.as_ref().ok_or(Untold)?;
    let mut state = end_state(e)?;
    let mut late = Late::default();
    let mut paired = false;
    for (n, a) in rest.iter().enumerate() {
        let e = a.part.edge.as_ref().ok_or(Untold)?;
        paired |= a.carried;
        let (one, met) = replay(state, a, (&mut paired, inferred), &mut late)?;
        // Where one run leaves the flow for the next cut: the part's own end once the replays
        // met; else what the replay saw, when it saw everything.
        let whole = e.complete
            && a.acks.is_none_or(|p| p.edge.as_ref().and_then(|x| x.acks.as_ref()).is_none_or(|x| x.complete));
        state = match (met, whole) {
            (true, _) => end_state(e)?,
            (false, true) => one,
            (false, false) if n + 1 == rest.len() => one,
            (false, false) => return Err(Untold),
        };
    }
    Ok(late)
}

/// A part's state at its end, from its edge (a READ waiting for its span: not known).
fn end_state(e: &crate::model::edge::FlowEdge) -> Result<State, Untold> {
    if e.end.read_pending != 0 {
        return Err(Untold);
    }
    let gaps = e.gaps.iter().map(|g| (g[0], g[1], g[2] != 0)).collect();
    Ok(State { next: (e.end.started != 0).then_some(e.end.expected), gaps })
}

/// Part `a` replayed from one run's state `from` and from nothing; its late arrivals added to
/// `late`. Returns one run's state after the replay, and whether the two met.
fn replay(
    from: State,
    a: &After,
    (paired, inferred): (&mut bool, Option<u32>),
    late: &mut Late,
) -> Result<(State, bool), Untold> {
    let e = a.part.edge.as_ref().ok_or(Untold)?;
    if e.head_ns.len() != e.head.len() || a.acks.is_some_and(|p| p.naks > 0) {
        return Err(Untold);
    }
    let (events, acks_to) = events(a)?;
    let (mut one, mut alone) = (from, State::default());
    let (mut add, mut sub, mut behind) = (Vec::new(), Vec::new(), 0u64);
    let mut met = one.open() == alone.open() && one.next == alone.next;
    for (ts, ev) in &events {
        if met {
            break;
        }
        match *ev {
            Event::Request(psn) => {
                // ACKs past the ACK head may have told a gap one replay has and the other not.
                if *ts > acks_to && one.fills(psn) != alone.fills(psn) {
                    return Err(Untold);
                }
                behind += u64::from(alone.next.is_some_and(|n| psn_diff(n, psn) >= PSN_HALF));
                add.extend(one.request(psn));
                sub.extend(alone.request(psn));
            }
            Event::Ack(psn, paired_alone) => {
                // As the RTT analysis pairs by PSN: within the flow's PSNs so far.
                let within = |first: u32| {
                    let last = one.next.map_or(first, |n| n.wrapping_sub(1) & PSN_MASK);
                    crate::analyses::rtt::within_span(first, last, psn)
                };
                *paired |= inferred.is_some_and(within);
                if *paired {
                    one.ack(psn);
                } else if paired_alone {
                    return Err(Untold);
                }
                if paired_alone {
                    alone.ack(psn);
                }
            }
        }
        met = one.open() == alone.open() && one.next == alone.next;
    }
    // Past the head: the part counted no more request behind its next PSN, or it is not told.
    if !met && !e.complete && a.part.repeats != behind {
        return Err(Untold);
    }
    late.add.extend(add);
    late.sub.extend(sub);
    Ok((one, met))
}

/// The part's head requests and its ACK flow's first ACKs in time order, and the time up to
/// which the ACKs are all known.
fn events(a: &After) -> Result<(Vec<(u64, Event)>, u64), Untold> {
    let e = a.part.edge.as_ref().ok_or(Untold)?;
    let mut all: Vec<(u64, Event)> = Vec::new();
    for (f, ts) in e.head.iter().zip(&e.head_ns) {
        let o = f.0[0] as u8;
        if o & 0x1F == opcode::op::RDMA_READ_REQUEST {
            return Err(Untold);
        }
        if opcode::is_reliable_request(o) {
            all.push((*ts, Event::Request(f.0[1] & PSN_MASK)));
        }
    }
    let acks = a.acks.and_then(|p| p.edge.as_ref()?.acks.as_ref());
    let mut known = u64::MAX;
    if let Some(h) = acks {
        for (i, [ts, psn]) in h.head.iter().enumerate() {
            all.push((*ts, Event::Ack(*psn as u32 & PSN_MASK, i >= a.unpaired_first)));
        }
        if !h.complete {
            known = h.head.last().map_or(0, |[ts, _]| *ts);
        }
    }
    in_time_order(&mut all, |e| matches!(e, Event::Ack(..)))?;
    Ok((all, known))
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
        After { part: p, acks: None, carried: true, unpaired_first: 0 }
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

    /// What the reports cannot tell: a READ, a NAK on the ACK flow, no head times, a part whose
    /// head ends before the replays meet and which counted more repeats after it.
    #[test]
    fn what_the_reports_cannot_tell() {
        let before = part(0, &[500, 501, 503], 0, 504, &[[502, 1, 0]]);
        let mut read = part(1, &[502], 100, 503, &[]);
        read.edge.as_mut().unwrap().head[0].0[0] = 0x0C;
        assert!(stitch(&before, &[after(&read)], None).is_err());
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
