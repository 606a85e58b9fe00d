//! A request flow's gaps replayed across a cut in time, as the messages analysis keeps them
//! (`analyses::messages::kept`): a PSN ahead of the flow's next one opens a gap; one behind it
//! fills the gap it lies in (late, RFC 5236's displacement) or, in none, was sent again (the
//! gaps holding it were lost); a NAK marks the gaps holding its PSN lost; an ACK covering a gap
//! tells it apart (delivered and missed by the capture, or lost).
//!
//! One run knows the gaps the part before a cut left open (`flows[].edge.gaps`) and where it
//! left the flow; the part after starts afresh. [`replay`] runs the part's first requests
//! (`flows[].edge.head` with their times, `head_ns`), its ACK flow's first ACKs
//! (`flows[].edge.acks`) and NAKs (the ACK flow's head) in time order twice, from one run's
//! state and from nothing, until the two agree (the same next PSN, the same open gaps). What
//! the two counted differently up to there is what one run counts otherwise than the part:
//! late arrivals (load balancing, `lb_stitch`) and PSNs the capture missed (`loss_stitch`).

use analyzer_common::opcode;
use analyzer_common::psn::{PSN_HALF, PSN_MASK, psn_diff};
use analyzer_common::wire::ext::AckType;

use super::psn_stitch::Part;
use super::rtt_karn::Untold;
use super::rtt_stitch::acks_of;
use crate::analyses::messages::kept::MAX_GAPS;
use crate::model::edge::FlowEdge;

/// A gap: its first PSN, how many, and whether it was lost (a NAK or a retransmission touched it).
type Gap = (u32, u32, bool);

/// A flow's gaps as the messages analysis keeps them, and the first PSN it saw (its span, as
/// the RTT analysis pairs a response by it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gaps {
    next: Option<u32>,
    gaps: Vec<Gap>,
    first: Option<u32>,
    /// The latest request in sequence was a READ: the next one ahead gives its span, no gap.
    after_read: bool,
}

impl Gaps {
    /// A part's gaps at its end, from its edge. A READ waiting for its span there was the
    /// flow's latest request in sequence: the next request ahead of it gives its span.
    pub fn at_end(e: &FlowEdge) -> Result<Gaps, Untold> {
        let gaps = e.gaps.iter().map(|g| (g[0], g[1], g[2] != 0)).collect();
        let after_read = e.end.read_pending != 0;
        let next = match after_read {
            true => (e.end.read_psn + 1) & PSN_MASK,
            false => e.end.expected,
        };
        Ok(Gaps { next: (e.end.started != 0).then_some(next), gaps, after_read, ..Gaps::default() })
    }

    fn holds(g: &Gap, psn: u32) -> bool {
        psn_diff(g.0, psn) < g.1
    }

    /// A request's PSN (`read`: a READ): its displacement when it arrived late; none, and
    /// false, for one sent again (no new payload).
    fn request(&mut self, psn: u32, read: bool) -> (Option<u32>, bool) {
        let late = self.take(psn, read);
        (late.flatten(), late.is_some())
    }

    /// [`Gaps::request`]: `None` for a PSN sent again, else its displacement if late.
    fn take(&mut self, psn: u32, read: bool) -> Option<Option<u32>> {
        self.first.get_or_insert(psn);
        let Some(next) = self.next else {
            (self.next, self.after_read) = (Some((psn + 1) & PSN_MASK), read);
            return Some(None);
        };
        let d = psn_diff(next, psn);
        if d >= PSN_HALF {
            let Some(i) = self.gaps.iter().position(|g| Self::holds(g, psn) && !g.2) else {
                // Sent again: the gaps holding it were lost.
                self.nak(psn);
                return None;
            };
            let g = self.gaps.remove(i);
            let k = psn_diff(g.0, psn);
            for part in [(g.0, k, false), ((psn + 1) & PSN_MASK, g.1 - k - 1, false)] {
                if part.1 > 0 {
                    self.gaps.push(part);
                }
            }
            return Some(Some(psn_diff(psn, next).saturating_sub(1)));
        }
        // After a READ, its responses took the PSNs up to this one.
        if d > 0 && !self.after_read {
            if self.gaps.len() == MAX_GAPS {
                self.gaps.remove(0);
            }
            self.gaps.push((next, d, false));
        }
        (self.next, self.after_read) = (Some((psn + 1) & PSN_MASK), read);
        Some(None)
    }

    /// A NAK for `psn` (or `psn` sent again): the gaps holding it were lost.
    fn nak(&mut self, psn: u32) {
        self.gaps.iter_mut().filter(|g| Self::holds(g, psn)).for_each(|g| g.2 = true);
    }

    /// An ACK for `psn`: the gaps it covers are told apart. Returns the PSNs told missed by
    /// the capture (delivered: no NAK, no retransmission).
    fn ack(&mut self, psn: u32) -> u64 {
        let mut missed = 0;
        self.gaps.retain(|g| {
            let covered = psn_diff((g.0 + g.1 - 1) & PSN_MASK, psn) < PSN_HALF;
            missed += u64::from(covered && !g.2) * u64::from(g.1);
            !covered
        });
        missed
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

    /// Whether a response for `psn` lies within the PSNs from `first` to the latest sent (as
    /// the RTT analysis pairs an ACK flow by PSN).
    fn within(&self, first: Option<u32>, psn: u32) -> bool {
        let Some(first) = first else { return false };
        let last = self.next.map_or(first, |n| n.wrapping_sub(1) & PSN_MASK);
        crate::analyses::rtt::within_span(first, last, psn)
    }

    /// Whether two replays agree from here on (lost gaps count for neither late arrivals nor
    /// PSNs missed).
    fn agrees(&self, other: &Gaps) -> bool {
        self.next == other.next && self.after_read == other.after_read && self.open() == other.open()
    }

    /// Whether a gap had to go for another (the bound both replays must stay under).
    fn full(&self) -> bool {
        self.gaps.len() >= MAX_GAPS
    }
}

/// What one part gives the replay: the flow's part (none: the report has its ACK flow only),
/// its ACK flow's part (none: no ACK there), and how the reports paired them.
pub struct After<'a> {
    pub part: Option<&'a Part>,
    pub acks: Option<&'a Part>,
    /// One run applies the part's ACKs to the flow from the start (it paired them before the
    /// cut, or the part paired every one).
    pub carried: bool,
    /// The part paired the ACK flow with the flow (`flows[].edge.rtt.ack_flow`).
    pub names: bool,
    /// ACKs at the start of the ACK flow's head the part did not pair with the flow.
    pub unpaired_first: usize,
}

impl<'a> After<'a> {
    /// A report's part of the flow and of its ACK flow; `named`: a report before paired them.
    pub fn new(part: Option<&'a Part>, acks: Option<&'a Part>, named: bool) -> Self {
        let head = acks.and_then(acks_of);
        let here = part.is_some_and(names);
        After {
            part,
            acks,
            carried: named || (here && head.is_some_and(|h| h.unpaired + h.ambiguous == 0)),
            names: here,
            unpaired_first: match (head, here) {
                (Some(h), true) => (h.unpaired + h.ambiguous) as usize,
                (Some(h), false) => h.head.len(),
                (None, _) => 0,
            },
        }
    }
}

/// Whether a report paired the flow of part `p` with its ACK flow.
pub fn names(p: &Part) -> bool {
    p.edge.as_ref().and_then(|e| e.rtt.as_ref()).is_some_and(|r| r.ack_flow.is_some())
}

/// One event of a part, in time order.
enum Event {
    /// A request's PSN, whether it is a READ, its payload.
    Request(u32, bool, u32),
    /// An ACK for a PSN, and whether the part paired it with the flow.
    Ack(u32, bool),
    /// A NAK other than RNR for a PSN.
    Nak(u32),
}

impl Event {
    fn kind(&self) -> u8 {
        match self {
            Event::Request(..) => 0,
            Event::Ack(..) => 1,
            Event::Nak(_) => 2,
        }
    }
}

/// What one run counts otherwise than a part: late arrivals' displacements it adds and takes
/// away, PSNs missed by the capture it adds and takes away, and new payload (goodput) it counts
/// otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counted {
    pub late_add: Vec<u32>,
    pub late_sub: Vec<u32>,
    pub missed_add: u64,
    pub missed_sub: u64,
    pub payload: Vec<Payload>,
}

/// A request one run counts as new payload where the part did not, or the other way round: its
/// time, the payload one run counts beyond the part's (negative: less), and whether it was the
/// part's first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    pub ts: u64,
    pub delta: i64,
    pub first: bool,
}

/// A part replayed: one run's state after it (when the replays did not meet), whether they
/// met, what one run counts otherwise, the requests the part alone took as behind its next
/// PSN, whether every event of the part was replayed (its requests, ACKs and NAKs all in the
/// heads), and whether a replay had a gap open before they met (what responses tell).
#[derive(Debug)]
pub struct Replayed {
    pub one: Gaps,
    pub met: bool,
    pub counted: Counted,
    pub behind: u64,
    pub whole: bool,
    pub gapped: bool,
}

/// Part `a` replayed from one run's state `from` and from nothing. `paired`: one run applies
/// the ACK flow's responses to the flow (set here when `inferred`, the flow's first PSN, makes
/// one run pair them by PSN).
pub fn replay(from: Gaps, a: &After, paired: &mut bool, inferred: Option<u32>) -> Result<Replayed, Untold> {
    let (events, known, whole) = events(a)?;
    let mut run = Run { one: from, paired: *paired, ..Run::default() };
    // The replays meet where they agree past the last response one run may apply and the part
    // alone did not (it paired none: not before its end), where the part opened gaps (past the
    // meeting both runs open the same, which only responses tell apart).
    let skips = |e: &Event| matches!(e, Event::Ack(_, false)) || (matches!(e, Event::Nak(_)) && !a.names);
    let gaps = a.part.is_some_and(|p| p.out_of_sequence > 0 || p.skipped > 0);
    let applies = (a.carried || inferred.is_some()) && gaps;
    let last_skipped = events.iter().rposition(|(_, e)| skips(e)).filter(|_| applies);
    // (Or where neither has a gap and the part opens no more: its out-of-sequence arrivals, a
    // gap's opening each, are all behind.)
    let oos = a.part.map_or(0, |p| p.out_of_sequence);
    let past = |run: &Run, done: usize| {
        let closed = run.opened >= oos && run.one.gaps.is_empty() && run.alone.gaps.is_empty();
        last_skipped.is_none_or(|l| done > l) || closed
    };
    let (mut met, mut gapped, mut i) = (run.one.agrees(&run.alone) && past(&run, 0), false, 0);
    while i < events.len() && !met {
        gapped |= !run.one.open().is_empty() || !run.alone.open().is_empty();
        let ts = events[i].0;
        let tied = events[i..].iter().take_while(|e| e.0 == ts).count();
        let mixed = events[i..i + tied].windows(2).any(|w| w[0].1.kind() != w[1].1.kind());
        let step = |run: &mut Run, e: &Event| run.step(e, (ts, known), a.names, inferred);
        match (mixed, tied) {
            (false, _) => step(&mut run, &events[i].1)?,
            // A request and a response (or an ACK and a NAK) at one time: the reports do not
            // keep their order; told when both orders come to the same.
            (true, 2) => {
                let (mut x, mut y) = (run.clone(), run.clone());
                for (run, order) in [(&mut x, [i, i + 1]), (&mut y, [i + 1, i])] {
                    for k in order {
                        step(run, &events[k].1)?;
                    }
                }
                if x != y {
                    return Err(Untold);
                }
                run = x;
                i += 1;
            }
            (true, _) => return Err(Untold),
        }
        i += 1;
        met = run.one.agrees(&run.alone) && past(&run, i);
    }
    gapped |= !met && (!run.one.open().is_empty() || !run.alone.open().is_empty());
    *paired = run.paired;
    Ok(Replayed { one: run.one, met, counted: run.counted, behind: run.behind, whole, gapped })
}

/// The two replays of a part: one run's and the part's own, and what they counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Run {
    one: Gaps,
    alone: Gaps,
    /// One run applies the ACK flow's responses to the flow; the part does.
    paired: bool,
    alone_paired: bool,
    counted: Counted,
    behind: u64,
    /// Gaps the part alone opened (requests ahead of its next PSN, not after a READ).
    opened: u64,
}

impl Run {
    /// One event at `ts` (`known`: the time up to which every response is known); `names`: the
    /// part paired the ACK flow; `inferred`: the flow's first PSN, when one run pairs its ACK
    /// flow by PSN.
    fn step(&mut self, e: &Event, (ts, known): (u64, u64), names: bool, inferred: Option<u32>) -> Result<(), Untold> {
        if self.one.full() || self.alone.full() {
            return Err(Untold);
        }
        match *e {
            Event::Request(psn, read, payload) => {
                // Responses past the heads may have told a gap one replay has and the other not.
                if ts > known && self.one.fills(psn) != self.alone.fills(psn) {
                    return Err(Untold);
                }
                self.behind += u64::from(self.alone.next.is_some_and(|n| psn_diff(n, psn) >= PSN_HALF));
                let ahead = self.alone.next.is_some_and(|n| (1..PSN_HALF).contains(&psn_diff(n, psn)));
                self.opened += u64::from(ahead && !self.alone.after_read);
                let first = self.alone.next.is_none();
                let (late_one, new_one) = self.one.request(psn, read);
                let (late_alone, new_alone) = self.alone.request(psn, read);
                self.counted.late_add.extend(late_one);
                self.counted.late_sub.extend(late_alone);
                if new_one != new_alone {
                    let delta = i64::from(payload) * if new_one { 1 } else { -1 };
                    self.counted.payload.push(Payload { ts, delta, first });
                }
            }
            Event::Ack(psn, paired_alone) => {
                self.paired |= self.one.within(inferred, psn);
                // A part that paired a NAK before pairs every later ACK.
                if (paired_alone && !self.paired) || (self.alone_paired && !paired_alone) {
                    return Err(Untold);
                }
                if self.paired {
                    self.counted.missed_add += self.one.ack(psn);
                }
                if paired_alone {
                    self.alone_paired = true;
                    self.counted.missed_sub += self.alone.ack(psn);
                }
            }
            Event::Nak(psn) => {
                self.paired |= self.one.within(inferred, psn);
                // The part pairs a NAK as an ACK: once paired, or by its PSNs.
                self.alone_paired |= names && self.alone.within(self.alone.first, psn);
                if self.alone_paired && !self.paired {
                    return Err(Untold);
                }
                if self.paired {
                    self.one.nak(psn);
                }
                if self.alone_paired {
                    self.alone.nak(psn);
                }
            }
        }
        Ok(())
    }
}

/// A part's events in time order, the time up to which every response is known, and whether
/// every event is listed.
type Events = (Vec<(u64, Event)>, u64, bool);

/// The part's head requests and its ACK flow's first ACKs and NAKs in time order; the time up
/// to which every response is known; whether every event of the part is listed.
fn events(a: &After) -> Result<Events, Untold> {
    let mut all: Vec<(u64, Event)> = Vec::new();
    let mut whole = true;
    if let Some(e) = a.part.map(|p| p.edge.as_ref().ok_or(Untold)).transpose()? {
        if e.head_ns.len() != e.head.len() {
            return Err(Untold);
        }
        for (f, ts) in e.head.iter().zip(&e.head_ns) {
            let o = f.0[0] as u8;
            if opcode::is_reliable_request(o) {
                let read = o & 0x1F == opcode::op::RDMA_READ_REQUEST;
                all.push((*ts, Event::Request(f.0[1] & PSN_MASK, read, f.0[2])));
            }
        }
        whole &= e.complete;
    }
    let mut known = u64::MAX;
    if let Some(p) = a.acks {
        if let Some(h) = acks_of(p) {
            for (i, [ts, psn]) in h.head.iter().enumerate() {
                all.push((*ts, Event::Ack(*psn as u32 & PSN_MASK, i >= a.unpaired_first)));
            }
            if !h.complete {
                known = h.head.last().map_or(0, |[ts, _]| *ts);
            }
            whole &= h.complete;
        }
        known = known.min(naks(p, &mut all)?);
        whole &= known == u64::MAX;
    }
    // Each kind in its head's order; events of several kinds at one time are told apart by
    // the replay.
    all.sort_by_key(|(ts, _)| *ts);
    Ok((all, known, whole))
}

/// The NAKs (other than RNR) of an ACK flow's head added to `all`; the time up to which they
/// are all known (the head's last frame when the part counted more).
fn naks(p: &Part, all: &mut Vec<(u64, Event)>) -> Result<u64, Untold> {
    if p.naks == 0 {
        return Ok(u64::MAX);
    }
    let e = p.edge.as_ref().ok_or(Untold)?;
    if e.head_ns.len() != e.head.len() {
        return Err(Untold);
    }
    let mut n = 0;
    for (f, ts) in e.head.iter().zip(&e.head_ns) {
        if f.aeth() == Some(AckType::Nak) {
            all.push((*ts, Event::Nak(f.0[1] & PSN_MASK)));
            n += 1;
        }
    }
    Ok(if n >= p.naks { u64::MAX } else { e.head_ns.last().copied().unwrap_or(0) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edge::{EdgeAcks, HeadFrame};

    #[test]
    fn a_read_s_span_opens_no_gap_and_a_skip_after_it_does() {
        let mut g = Gaps::default();
        for (psn, read) in [(10, true), (14, false), (20, false)] {
            assert_eq!(g.request(psn, read), (None, true));
        }
        assert_eq!(g.open(), [(15, 5)]);
        // 17 fills it late, behind 20 (displaced by psn_diff(17, 21) − 1 = 3); 14 again adds
        // no payload.
        assert_eq!((g.request(17, false), g.request(14, false)), ((Some(3), true), (None, false)));
        assert_eq!(g.open(), [(15, 2), (18, 2)]);
        // A READ at 10 open at the end of a part (its span not known there): the next request
        // after the cut, at 14, gives its span and opens no gap; a skip after it does.
        let mut e = crate::engine::edges::edge(None, Default::default());
        (e.end.started, e.end.expected, e.end.read_pending, e.end.read_psn) = (1, 12, 3, 10);
        let mut g = Gaps::at_end(&e).unwrap();
        for psn in [14, 20] {
            assert_eq!(g.request(psn, false), (None, true));
        }
        assert_eq!(g.open(), [(15, 5)]);
    }

    #[test]
    fn an_ack_tells_a_gap_missed_unless_a_nak_or_a_repeat_marked_it_lost() {
        let gaps = || Gaps { next: Some(12), gaps: vec![(5, 2, false), (9, 1, false)], ..Gaps::default() };
        assert_eq!(gaps().ack(10), 3);
        let mut g = gaps();
        g.nak(6);
        assert_eq!((g.open(), g.ack(10)), (vec![(9, 1)], 1));
        // 9 sent again after 5..=6 were lost: 9 fills its gap late (never sent before).
        let mut g = gaps();
        g.nak(5);
        assert_eq!((g.request(5, false), g.request(9, false)), ((None, false), (Some(2), true)));
        assert_eq!(g.ack(11), 0);
    }

    /// The part: `psns` at `times`; its ACK flow: ACKs `[time, psn]`.
    fn part(psns: &[u32], times: &[u64], acks: &[[u64; 2]]) -> (Part, Part) {
        let mut e = crate::engine::edges::edge(None, Default::default());
        e.head = psns.iter().map(|p| HeadFrame([0x0A, *p, 0, 0, 0, 0])).collect();
        e.head_ns = times.to_vec();
        let mut a = crate::engine::edges::edge(None, Default::default());
        a.acks = Some(EdgeAcks { head: acks.to_vec(), complete: true, unpaired: 0, ambiguous: 0 });
        (Part { edge: Some(e), ..Part::default() }, Part { edge: Some(a), ..Part::default() })
    }

    /// One run left 5 open and 7 next. A request and an ACK at one time: 7 and the ACK for 7
    /// (either order: the ACK covers 5, missed), replayed both ways and told; 5 and the ACK for
    /// 5 (5 late then the ACK covers nothing, or the ACK tells 5 missed and 5 is sent again):
    /// not told.
    #[test]
    fn events_at_one_time_are_replayed_both_ways() {
        let from = || Gaps { next: Some(7), gaps: vec![(5, 1, false)], ..Gaps::default() };
        let (p, a) = part(&[7, 8], &[100, 110], &[[100, 7]]);
        let after = After { part: Some(&p), acks: Some(&a), carried: true, names: true, unpaired_first: 0 };
        let r = replay(from(), &after, &mut true, None).unwrap();
        assert_eq!((r.met, r.counted.missed_add, r.counted.missed_sub), (true, 1, 0));
        let (p, a) = part(&[5, 7], &[100, 110], &[[100, 5]]);
        let after = After { part: Some(&p), acks: Some(&a), ..after };
        assert!(replay(from(), &after, &mut true, None).is_err());
    }
}
