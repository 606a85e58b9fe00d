//! RTT across a cut where the part after sends requests again that waited at the cut. One run
//! keeps a waiting request's first time when it is sent again (Karn); the part after, which
//! never saw the first, waited from the repeat. So the merge replays the part's first requests
//! with AckReq (`flows[].edge.rtt.requests`) and its ACK flow's first ACKs twice, as the RTT
//! analysis does: from the requests waiting at the cut (one run) and from nothing (the part
//! alone), event by event in time order, until the two queues hold the same requests (past
//! that the two runs decide alike), and settles what one run decided otherwise than the part.
//!
//! Where the replays cannot be exact the part is left as it counted (`Untold`): the heads end
//! before the queues meet, a request and an ACK at the same time (their order is not known),
//! or an ACK that stops at a request older than the timeout while it covers a later one (a
//! request without AckReq, not in the head, may have let the old one go before it).

use std::collections::{BTreeMap, VecDeque};

use analyzer_common::psn::{PSN_HALF, psn_diff};

/// A request waiting across a cut: its PSN, its time, and what its report counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    pub psn: u32,
    pub ts: u64,
    pub counted: Counted,
    /// The report that counted it.
    pub report: usize,
}

/// What a report counted for a request, or what one run decides: a sample, a timeout, pending
/// at the end, or nothing (a request sent again that one run never waited for, Karn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Sample(u64),
    Timeout,
    Pending,
    Nothing,
}

impl Counted {
    /// Waiting at `end_ns`: pending, or a timeout when older than `timeout_ns`.
    pub fn at_end(ts: u64, end_ns: u64, timeout_ns: u64) -> Counted {
        if end_ns.saturating_sub(ts) > timeout_ns { Counted::Timeout } else { Counted::Pending }
    }
}

/// Why a flow cannot be stitched (the reports do not tell).
#[derive(Debug, PartialEq, Eq)]
pub struct Untold;

/// A request in a replay's queue: its PSN, its time, its index in the part's head (`None`: it
/// waited at the cut).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    psn: u32,
    ts: u64,
    id: Option<usize>,
}

/// One replay: its queue, what it decided of each request, in order.
#[derive(Default)]
struct Replay {
    queue: VecDeque<Entry>,
    decided: Vec<(Entry, Counted)>,
    /// The part's requests this replay waited for (not held by an earlier one).
    pushed: Vec<usize>,
}

impl Replay {
    /// A request with AckReq: the requests older than the timeout go first (as at any request),
    /// then it waits unless its PSN waits already.
    fn request(&mut self, e: Entry, timeout_ns: u64) {
        while let Some(f) = self.queue.front().copied().filter(|f| e.ts.saturating_sub(f.ts) > timeout_ns) {
            self.queue.pop_front();
            self.decided.push((f, Counted::Timeout));
        }
        if !self.queue.iter().any(|w| w.psn == e.psn) {
            self.queue.push_back(e);
            self.pushed.extend(e.id);
        }
    }

    /// An ACK at `ts` for `psn`: the requests it covers from the oldest.
    fn ack(&mut self, ts: u64, psn: u32, timeout_ns: u64) -> Result<(), Untold> {
        let covered = |w: &Entry| psn_diff(w.psn, psn) < PSN_HALF;
        while let Some(f) = self.queue.front().copied() {
            if !covered(&f) {
                let stale = ts.saturating_sub(f.ts) > timeout_ns;
                if stale && self.queue.iter().any(covered) {
                    return Err(Untold);
                }
                return Ok(());
            }
            self.queue.pop_front();
            let rtt = ts.saturating_sub(f.ts);
            self.decided.push((f, if rtt <= timeout_ns { Counted::Sample(rtt) } else { Counted::Timeout }));
        }
        Ok(())
    }
}

/// An event of the part, in time order.
#[derive(Debug, Clone, Copy)]
enum Event {
    Request(usize, u32),
    /// An ACK for a PSN, and whether the part alone paired it with this flow.
    Ack(u32, bool),
}

/// What the part after a cut gives the replays.
pub struct PartHeads<'a> {
    /// Its report.
    pub report: usize,
    /// Its first AckReq requests `[psn, time]`, and whether there were more.
    pub requests: &'a [[u64; 2]],
    pub requests_cut: bool,
    /// Its ACK flow's first ACKs `[time, psn]`, whether they are all, and how many of the
    /// first the part could not pair with this flow (all of them: it never did).
    pub acks: &'a [[u64; 2]],
    pub acks_complete: bool,
    pub unpaired_first: usize,
    /// One run applies the ACKs to this flow (it was paired before the cut, or by them).
    pub carried: bool,
    /// The part's end and its requests still waiting there `[psn, time]`.
    pub end_ns: u64,
    pub waiting: &'a [[u64; 2]],
}

/// What the replay left: the requests one run still waits for after the part, when the two
/// replays did not meet within it (`None`: they met; the part's own waiting requests follow).
pub type Left = Option<VecDeque<Waiting>>;

/// Replays the part on the requests waiting at the cut (`before`); settles what one run decided
/// otherwise through `settle(report, counted, decided)` (the report that counted it).
pub fn replay(
    before: &VecDeque<Waiting>,
    p: &PartHeads,
    timeout_ns: u64,
    settle: &mut dyn FnMut(usize, Counted, Counted),
) -> Result<Left, Untold> {
    let events = events(p)?;
    let mut counted: BTreeMap<usize, Counted> = BTreeMap::new();
    let (mut one, mut alone) = (Replay::default(), Replay::default());
    one.queue.extend(before.iter().map(|w| Entry { psn: w.psn, ts: w.ts, id: None }));
    // The replays meet where their queues hold the same requests past the last ACK one run
    // applies and the part alone did not (the part never paired the flow: not before its end).
    let skipped = |ev: &Event| p.carried && matches!(ev, Event::Ack(_, false));
    let last_skipped = events.iter().rposition(|(_, ev)| skipped(ev));
    let mut met = before.is_empty() && last_skipped.is_none();
    for (n, (ts, ev)) in events.iter().enumerate() {
        match *ev {
            Event::Request(i, psn) => {
                let e = Entry { psn, ts: *ts, id: Some(i) };
                one.request(e, timeout_ns);
                alone.request(e, timeout_ns);
            }
            Event::Ack(psn, paired_alone) => {
                if !p.carried && !one.queue.is_empty() {
                    return Err(Untold);
                }
                if p.carried {
                    one.ack(*ts, psn, timeout_ns)?;
                }
                if paired_alone {
                    alone.ack(*ts, psn, timeout_ns)?;
                }
            }
        }
        if one.queue == alone.queue && last_skipped.is_none_or(|l| n >= l) {
            met = true;
            break;
        }
    }
    let complete = !p.requests_cut && p.acks_complete;
    if !met && !complete {
        return Err(Untold);
    }
    for (e, c) in &alone.decided {
        counted.insert(e.id.expect("the part alone waits for its own requests"), *c);
    }
    if !met {
        // The part's end: what it still waited for it counted pending or timed out then.
        let left: Vec<[u64; 2]> = alone.queue.iter().map(|e| [e.psn as u64, e.ts]).collect();
        if left != p.waiting {
            return Err(Untold);
        }
        for e in &alone.queue {
            let late = p.end_ns.saturating_sub(e.ts) > timeout_ns;
            counted.insert(e.id.expect("own"), if late { Counted::Timeout } else { Counted::Pending });
        }
    }
    // What the reports counted for a request: one before the cut as its report did, one of
    // this part as the part alone decided it.
    let counted_of = |e: &Entry| match e.id {
        None => before.iter().find(|w| w.psn == e.psn && w.ts == e.ts).map(|w| (w.report, w.counted)),
        Some(i) => counted.get(&i).map(|c| (p.report, *c)),
    };
    for (e, now) in &one.decided {
        let (report, c) = counted_of(e).ok_or(Untold)?;
        settle(report, c, *now);
    }
    // Requests the part waited for that one run held (sent again): one run never counted them.
    for i in alone.pushed.iter().filter(|i| !one.pushed.contains(i)) {
        settle(p.report, counted.get(i).copied().ok_or(Untold)?, Counted::Nothing);
    }
    if met {
        return Ok(None);
    }
    let left = one.queue.iter().map(|e| {
        let (report, counted) = counted_of(e).ok_or(Untold)?;
        Ok(Waiting { psn: e.psn, ts: e.ts, counted, report })
    });
    Ok(Some(left.collect::<Result<_, Untold>>()?))
}

/// The part's requests and ACKs in time order, those known (up to the first head cut short);
/// a request and an ACK at the same time cannot be ordered.
fn events(p: &PartHeads) -> Result<Vec<(u64, Event)>, Untold> {
    let last = |h: &[[u64; 2]], at: usize| h.last().map_or(0, |e| e[at]);
    let mut horizon = u64::MAX;
    if p.requests_cut {
        horizon = horizon.min(last(p.requests, 1));
    }
    if !p.acks_complete {
        horizon = horizon.min(last(p.acks, 0));
    }
    let requests = p.requests.iter().enumerate().map(|(i, [psn, ts])| (*ts, Event::Request(i, *psn as u32)));
    let acks = p.acks.iter().enumerate().map(|(i, [ts, psn])| (*ts, Event::Ack(*psn as u32, i >= p.unpaired_first)));
    let mut all: Vec<(u64, Event)> = requests.chain(acks).filter(|(ts, _)| *ts < horizon).collect();
    in_time_order(&mut all, |e| matches!(e, Event::Ack(..)))?;
    Ok(all)
}

/// A part's requests and ACKs (`is_ack`), each head in its order, sorted by time (stable: each
/// head keeps its order); `Untold` when a request and an ACK share a time (the reports do not
/// keep which came first).
pub fn in_time_order<E>(all: &mut [(u64, E)], is_ack: impl Fn(&E) -> bool) -> Result<(), Untold> {
    all.sort_by_key(|(ts, e)| (*ts, is_ack(e)));
    match all.windows(2).any(|w| w[0].0 == w[1].0 && is_ack(&w[0].1) != is_ack(&w[1].1)) {
        true => Err(Untold),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1000;

    fn heads<'a>(requests: &'a [[u64; 2]], acks: &'a [[u64; 2]], waiting: &'a [[u64; 2]]) -> PartHeads<'a> {
        PartHeads {
            report: 1,
            requests,
            requests_cut: false,
            acks,
            acks_complete: true,
            unpaired_first: 0,
            carried: true,
            end_ns: 20_000,
            waiting,
        }
    }

    fn run(before: &[(u32, u64, Counted)], p: &PartHeads) -> Result<(Vec<(Counted, Counted)>, Left), Untold> {
        let before: VecDeque<Waiting> = before
            .iter()
            .map(|(psn, ts, counted)| Waiting { psn: *psn, ts: *ts, counted: *counted, report: 0 })
            .collect();
        let mut settled = Vec::new();
        let left = replay(&before, p, T, &mut |_, c, d| settled.push((c, d)))?;
        Ok((settled, left))
    }

    /// Go-back-N across a cut: 103 waits (sent at 9 800, pending at the cut). After it 109
    /// (10 100) and, sent again, 109 (10 300); the ACK for 109 at 10 500 covers both. The part
    /// alone timed 109 from 10 100 (400); one run too, and 103 gets 700: by hand, 103's
    /// pending becomes a sample of 700, 109's sample stays.
    #[test]
    fn a_request_waiting_at_the_cut_is_answered_after_go_back_n() {
        let p = heads(&[[109, 10_100], [109, 10_300]], &[[10_500, 109]], &[]);
        let (settled, left) = run(&[(103, 9_800, Counted::Pending)], &p).unwrap();
        assert_eq!(
            settled,
            vec![(Counted::Pending, Counted::Sample(700)), (Counted::Sample(400), Counted::Sample(400))]
        );
        assert_eq!(left, None);
    }

    /// The request refused at the cut (7, sent at 9 600) sent again at 10 100 and ACKed at
    /// 10 400: the part alone has a sample of 300, one run (Karn: the first time) of 800 and
    /// no second request.
    #[test]
    fn a_repeat_keeps_the_first_time() {
        let p = heads(&[[7, 10_100]], &[[10_400, 7]], &[]);
        let (settled, _) = run(&[(7, 9_600, Counted::Pending)], &p).unwrap();
        assert_eq!(settled, vec![(Counted::Pending, Counted::Sample(800)), (Counted::Sample(300), Counted::Nothing)]);
        // Sent again after its timeout (at 10 700): one run let the first go as a timeout at
        // the repeat and times the repeat, as the part did (the queues meet there: its sample
        // of 200 stays the part's).
        let p = heads(&[[7, 10_700]], &[[10_900, 7]], &[]);
        let (settled, _) = run(&[(7, 9_600, Counted::Pending)], &p).unwrap();
        assert_eq!(settled, vec![(Counted::Pending, Counted::Timeout)]);
    }

    /// Heads that cannot tell: a request and an ACK at the same time; heads cut short before
    /// the queues meet; an ACK that stops at a stale request while covering a later one.
    #[test]
    fn what_the_heads_cannot_tell() {
        let before = [(7, 9_600, Counted::Pending)];
        assert!(run(&before, &heads(&[[7, 10_100]], &[[10_100, 7]], &[])).is_err());
        let mut p = heads(&[[7, 10_100], [8, 10_200]], &[], &[]);
        p.acks_complete = false;
        assert!(run(&before, &p).is_err());
        // 9 waited at the cut (9 000), 3 sent at 9 900; the ACK for 5 at 10 200 covers 3 but
        // stops at 9, older than the timeout: a request not listed may have let 9 go first.
        let p = heads(&[[3, 9_900]], &[[10_200, 5]], &[]);
        assert!(run(&[(9, 9_000, Counted::Pending)], &p).is_err());
        // Complete heads that never meet: what one run still waits for goes on to the next
        // cut, counted as the part counted it at its end.
        let p = heads(&[[7, 10_100], [8, 10_200]], &[], &[[7, 10_100], [8, 10_200]]);
        let (settled, left) = run(&before, &p).unwrap();
        // The part counted its 7 a timeout at its end (20 000); one run never had it.
        assert_eq!(settled, vec![(Counted::Timeout, Counted::Nothing)]);
        let left: Vec<_> = left.unwrap().iter().map(|w| (w.psn, w.ts, w.counted)).collect();
        assert_eq!(left, vec![(7, 9_600, Counted::Pending), (8, 10_200, Counted::Timeout)]);
    }
}
