//! `merge` in time: a flow's PSN counters across the cuts between captures that follow each
//! other (`flows[].edge`, offline with `--edges`). Each capture's analysis started the flow
//! fresh; one analysis of the whole would have met the first frames of each later part with
//! the state the part before left. Both are replayed here with the state machine the analysis
//! runs (`analyzer_common::psn::account`): the head of each later part from that state, and
//! from a fresh one (what its own report counted). The difference is what the whole counts
//! beyond the sum of the parts — exactly, when both replays end in the state the part recorded
//! after its head, since from there on the two runs see the same frames from the same state.
//! When they do not (a run of repeated PSNs longer than the head), the flow is not stitched
//! and the report says so.
//!
//! A READ whose span was still open at a cut is settled by the MTU its READ RESPONSE showed
//! (a note of the reverse direction): the part before carries it when it had it
//! (`read_note`); when it had not, the READ RESPONSE FIRST after the cut gives it where the
//! heads of the flows back list it before the flow's first frame after the cut (their times),
//! else not stitched. Requests refused by an RNR NAK
//! before the cut and repeated after it are taken as the whole takes them (the part before
//! carries their PSNs, `rnr_psns`); a refusal after the cut that the part's own run left
//! untaken (its first request is never taken as a repeat) is taken with the head's repeat when
//! the heads of the flows back list its RNR NAK before it (their frames' times), else not
//! stitched.

use analyzer_common::flow::FlowKey;
use analyzer_common::psn::{self, PeerKey, PeerNotes, PsnSeq, PsnState};

use crate::engine::edges::summary_of;
use crate::model::edge::FlowEdge;

/// A flow as `merge` keys it: (IP version, source, destination, UDP source port, QP).
pub type FlowId = (u8, String, String, u16, u32);

/// One report's sight of a flow: the report's capture span, the flow's edge, if it has one,
/// and its RTT there (`rtt_merge`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    pub start_ns: u64,
    pub end_ns: u64,
    pub edge: Option<FlowEdge>,
    pub rtt: Option<crate::model::FlowRtt>,
    /// PSNs this part saw skipped that no ACK here showed delivered (`psn_skipped` −
    /// `capture_missed`): an ACK in a later part may (capture loss across a cut).
    pub open_skips: u64,
    /// The report it is from (its index in the merge).
    pub report: usize,
    /// Duplicate PSNs this part counted (a request repeated after a cut keeps its first time
    /// in one run: `rtt_stitch`).
    pub repeats: u64,
    /// Out-of-sequence arrivals (each opened a gap: `loss_stitch`).
    pub out_of_sequence: u64,
    /// NAKs other than RNR this flow carried (each marks a gap lost: `loss_stitch`).
    pub naks: u64,
    /// PSNs this part saw skipped (told apart or not).
    pub skipped: u64,
}

impl Part {
    /// The part of `parts` from report `report`.
    pub fn of(parts: &[Part], report: usize) -> Option<&Part> {
        parts.iter().find(|p| p.report == report)
    }

    /// The PSN of the flow's first request in this part (from its edge's head).
    pub fn first_request(&self) -> Option<u32> {
        let head = self.edge.iter().flat_map(|e| &e.head);
        head.map(|f| f.0).find(|f| analyzer_common::opcode::is_request(f[0] as u8)).map(|f| f[1])
    }

    /// [`Part::first_request`] with its time, when the head lists its frames' times.
    pub fn first_request_at(&self) -> Option<(u32, u64)> {
        let e = self.edge.as_ref().filter(|e| e.head_ns.len() == e.head.len())?;
        let i = e.head.iter().position(|f| analyzer_common::opcode::is_request(f.0[0] as u8))?;
        Some((e.head[i].0[1], e.head_ns[i]))
    }
}

/// A part's ACK flow head (`flows[].edge.acks`), when it has one.
pub fn acks_of(p: &Part) -> Option<&crate::model::edge::EdgeAcks> {
    p.edge.as_ref()?.acks.as_ref()
}

/// What the whole counts beyond the parts' sum: `add` minus `sub`, counter by counter (both
/// hold counters only; their sequence state is not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Correction {
    pub add: PsnState,
    pub sub: PsnState,
    /// No request after a cut can have arrived late into a gap one run had open there
    /// (`late_told`): each part's late arrivals (load balancing) are one run's.
    pub late_told: bool,
}

/// Whether the parts follow each other in time without overlapping (a capture cut in time),
/// after sorting them by start.
pub fn in_series(parts: &mut [Part]) -> bool {
    parts.sort_by_key(|p| (p.start_ns, p.end_ns));
    follow(parts)
}

/// Whether parts already in time order follow each other without overlapping.
pub fn follow(parts: &[Part]) -> bool {
    parts.windows(2).all(|w| w[0].end_ns <= w[1].start_ns)
}

/// The correction for a flow seen in `parts` (in series, [`in_series`]), or `None` when some
/// part has no edge or a head's state did not settle.
/// `back(report, psn)`: what the flows back from the flow's responder to its requester listed
/// in their heads in that report of the request at `psn`.
pub fn stitch(key: &FlowKey, parts: &[Part], back: &dyn Fn(usize, u32) -> Back) -> Option<Correction> {
    let (first, rest) = parts.split_first()?;
    let first = first.edge.as_ref()?;
    let (mut state, mut read_note) = (first.end, first.read_note);
    let mut rnr = first.rnr_psns.clone();
    let mut c = Correction { add: PsnState::zeroed(), sub: PsnState::zeroed(), late_told: true };
    let (mut gaps, mut before) = (false, first);
    for p in rest {
        let e = p.edge.as_ref()?;
        gaps |= before.gaps.iter().any(|g| g[2] == 0);
        c.late_told &= late_told(&state, p, &mut gaps);
        before = e;
        // A refusal this part saw and its own run did not take (its first request is never
        // taken as a repeat): one run takes it with the head's repeat when it came before it.
        let refused = refused_first(e, &rnr, &|psn| back(p.report, psn).rnr)?;
        let alone = replay(key, e, PsnSeq::default(), None, &[]);
        if alone.seq != e.after_head {
            return None;
        }
        let before = match state.read_pending {
            0 => None,
            _ if read_note >= psn::MIN_MTU => Some((state.read_psn, read_note)),
            _ => Some((state.read_psn, read_after(e, &back(p.report, state.read_psn))?)),
        };
        let whole = replay(key, e, state, before, &[rnr.as_slice(), &refused].concat());
        rnr.retain(|p| !e.head.iter().any(|f| f.0[1] == *p));
        rnr.extend(e.rnr_psns.iter().filter(|p| !refused.contains(p)));
        state = match (e.complete, whole.seq == alone.seq) {
            (true, _) => whole.seq,
            (false, true) => e.end,
            (false, false) => return None,
        };
        // The note this part knew of the READ the state now waits for (its own READ's; a
        // READ from before the cut keeps the note known before).
        if state.read_psn == e.end.read_psn && e.end.read_pending != 0 {
            read_note = e.read_note;
        }
        add_counts(&mut c.add, &whole);
        add_counts(&mut c.sub, &alone);
    }
    Some(c)
}

/// What the heads of the flows back from a flow's responder list of one of its requests, in
/// one report: the times of the RNR NAKs naming it, and the READ RESPONSEs FIRST answering it
/// (a READ), each as (time, its payload: the path MTU).
#[derive(Debug, Clone, Default)]
pub struct Back {
    pub rnr: Vec<u64>,
    pub reads: Vec<(u64, u32)>,
}

/// The MTU a READ open at the cut takes in one run from its READ RESPONSE after the cut (`b`):
/// one run resolves the READ's span at the flow's next request, with the MTU a READ RESPONSE
/// FIRST showed before it. Told where such responses came before the part's first frame of
/// the flow (`e`'s head, with its times) and agree; else `None` (not told).
fn read_after(e: &FlowEdge, b: &Back) -> Option<u32> {
    let first = *e.head_ns.first().filter(|_| e.head_ns.len() == e.head.len())?;
    let mut before = b.reads.iter().filter(|(ts, _)| *ts < first).map(|(_, mtu)| *mtu);
    let mtu = before.next().filter(|m| *m >= psn::MIN_MTU)?;
    before.all(|m| m == mtu).then_some(mtu)
}

/// Whether no request of part `p` can have arrived late (in one run, filling a gap it had open:
/// a late arrival of load balancing) otherwise than in the part's own run, `state` being one
/// run's at the cut and `gaps` whether one run may have a gap open there (updated). A first
/// request ahead of one run's next PSN opens a gap at the cut. With a gap open, a request the part counted behind its
/// own next PSN (a duplicate) may have filled it in one run: late there, a retransmission here.
fn late_told(state: &PsnSeq, p: &Part, gaps: &mut bool) -> bool {
    let Some(first) = p.first_request() else { return true };
    if state.started != 0 {
        if state.read_pending != 0 {
            return false;
        }
        let d = psn::psn_diff(state.expected, first);
        if d >= psn::PSN_HALF {
            // Repeated at the cut: duplicates in one run until its next PSN; told when it had no
            // gap to fill and the part opened none of its own meanwhile (then both go in step).
            return !*gaps && p.out_of_sequence == 0;
        }
        *gaps |= d > 0;
    }
    !*gaps || p.repeats == 0
}

/// The PSNs of `e`'s head that an RNR NAK in its part refused before the head repeated them,
/// which the part's own run left untaken (its first request is never taken as a repeat) and one
/// run takes with the repeat; none (not told) where that NAK's time is not known (not in the
/// heads of the flows back, or several), or it came after the repeat. `at`: the RNR NAKs'
/// times for a PSN.
fn refused_first(e: &FlowEdge, carried: &[u32], at: &dyn Fn(u32) -> Vec<u64>) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for (i, f) in e.head.iter().enumerate() {
        let psn = f.0[1];
        if !e.rnr_psns.contains(&psn) || carried.contains(&psn) || out.contains(&psn) {
            continue;
        }
        let naks = at(psn);
        let (Some(ts), [nak]) = (e.head_ns.get(i).filter(|_| e.head_ns.len() == e.head.len()), naks.as_slice()) else {
            return None;
        };
        if nak >= ts {
            return None;
        }
        out.push(psn);
    }
    Some(out)
}

/// The head of `e` accounted from state `from`, with the MTU note of a READ at a PSN that
/// `from` waits for and the RNR NAK notes of requests refused before.
fn replay(key: &FlowKey, e: &FlowEdge, from: PsnSeq, read: Option<(u32, u32)>, rnr: &[u32]) -> PsnState {
    let mut st = PsnState { seq: from, ..PsnState::zeroed() };
    let mut notes = Notes { list: Vec::new(), default_pmtu: e.default_pmtu };
    for &psn in rnr {
        notes.put(&PeerKey { requester: key.src, responder: key.dst, psn }, psn::NOTE_RNR);
    }
    if let Some((psn, mtu)) = read {
        notes.put(&PeerKey { requester: key.src, responder: key.dst, psn }, mtu);
    }
    for f in &e.head {
        psn::account(&mut st, &summary_of(f, key.src, key.dst), &mut notes);
    }
    st
}

fn add_counts(into: &mut PsnState, from: &PsnState) {
    let pairs = into.count.iter_mut().zip(from.count).chain(into.aeth.iter_mut().zip(from.aeth));
    for (a, b) in pairs.chain(into.responder.iter_mut().zip(from.responder)) {
        *a = a.saturating_add(b);
    }
}

/// The notes a head leaves itself (a head is a flow's own frames: the reverse direction's
/// notes are not known here).
struct Notes {
    list: Vec<(PeerKey, u32)>,
    default_pmtu: u32,
}

impl PeerNotes for Notes {
    fn get(&self, key: &PeerKey) -> Option<u32> {
        self.list.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
    fn put(&mut self, key: &PeerKey, note: u32) {
        self.list.push((*key, note));
    }
    fn take_rnr(&mut self, key: &PeerKey) -> bool {
        let at = self.list.iter().rposition(|(k, v)| k == key && *v == psn::NOTE_RNR);
        at.map(|i| self.list.remove(i)).is_some()
    }
    fn default_pmtu(&self) -> u32 {
        self.default_pmtu
    }
}

/// The note of a merge with flows not stitched.
pub fn note(flows: u64) -> crate::model::Note {
    crate::model::Note::new(
        crate::model::NoteCode::PsnNotStitched,
        format!(
            "{flows} flows appear in reports that follow each other in time without their PSN state at the \
             cut (reports made without --edges, or a flow whose first frames after a cut repeat more PSNs than \
             the edge holds): their PSN counters are the reports' sums, so an out-of-sequence or repeated PSN \
             across a cut is not counted. Analyse the parts with --edges, or the whole capture in one run"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::edges::Heads;
    use analyzer_common::PacketSummary;
    use analyzer_common::psn::count;

    const SEND_ONLY: u8 = 0x04;

    fn key() -> FlowKey {
        let mut k = FlowKey::default();
        k.src[..4].copy_from_slice(&[10, 0, 0, 1]);
        k.dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        k.ip_version = 4;
        k
    }

    /// Runs `psns` (SEND ONLY requests) through the state machine as a report's run does, and
    /// gives its counters and edge.
    fn run(psns: &[u32], start_ns: u64) -> (PsnState, Part) {
        let frames: Vec<(u8, u32, u32, u64)> = psns.iter().map(|p| (SEND_ONLY, *p, 0, 0)).collect();
        run_frames(&frames, start_ns)
    }

    /// [`run`] with requests `(opcode, psn, RETH DMA length, time)`.
    fn run_frames(frames: &[(u8, u32, u32, u64)], start_ns: u64) -> (PsnState, Part) {
        let k = key();
        let mut st = PsnState::zeroed();
        let mut heads = Heads::default();
        let mut notes = Notes { list: Vec::new(), default_pmtu: 0 };
        for &(opcode, p, dma, ts) in frames {
            let mut s = PacketSummary::zeroed();
            (s.opcode, s.psn, s.reth_dma_len, s.src_ip, s.dst_ip) = (opcode, p, dma, k.src, k.dst);
            s.ext = analyzer_common::opcode::headers(opcode);
            psn::account(&mut st, &s, &mut notes);
            heads.observe(0, ts, &s, &st.seq);
        }
        let edge = crate::engine::edges::edge(heads.get(0), st.seq);
        let (repeats, out_of_sequence) = (st.count[count::DUPLICATES], st.count[count::OUT_OF_SEQUENCE]);
        let edge = Some(edge);
        (st, Part { start_ns, end_ns: start_ns + 1, edge, rtt: None, repeats, out_of_sequence, ..Part::default() })
    }

    /// Late arrivals across a cut, by hand: in sequence, a gap at the cut with nothing behind
    /// it after, or a repeat at the cut going on in sequence are told; a request after a gap at
    /// the cut that the part counted behind its own next PSN (3 after 5: late in one run), or
    /// after a repeat at the cut a gap of the part's own (1, 3, 2: 2 late in the part, a
    /// duplicate in one run), are not.
    #[test]
    fn late_arrivals_across_a_cut_are_told_or_not() {
        let told_with = |a: &[u32], b: &[u32], gaps: Vec<[u32; 3]>| {
            let mut parts = [run(a, 0).1, run(b, 10).1];
            parts[0].edge.as_mut().unwrap().gaps = gaps;
            stitch(&key(), &parts, &|_, _| Back::default()).map(|c| c.late_told)
        };
        let told = |a: &[u32], b: &[u32]| told_with(a, b, Vec::new());
        assert_eq!(told(&[0, 1, 2], &[3, 4, 5]), Some(true));
        assert_eq!(told(&[0, 1, 2], &[5, 6]), Some(true));
        assert_eq!(told(&[0, 1, 2], &[5, 3, 6]), Some(false));
        assert_eq!(told(&[0, 1, 2], &[1, 2, 3]), Some(true));
        assert_eq!(told(&[0, 1, 2], &[1, 3, 2]), Some(false));
        // The part before left PSN 3 skipped, not told apart (its edge's gaps): 3 after the cut
        // is late in one run; with the gap lost (a NAK or a retransmission), a retransmission.
        assert_eq!(told_with(&[0, 1, 2, 4], &[2, 3], vec![[3, 1, 0]]), Some(false));
        assert_eq!(told_with(&[0, 1, 2, 4], &[2, 3], vec![[3, 1, 1]]), Some(true));
        // A duplicate after the cut with no gap open: a retransmission in both runs.
        assert_eq!(told(&[0, 1, 2], &[3, 4, 3]), Some(true));
    }

    /// The whole's counters from the parts' sum and the correction.
    fn stitched(psns: &[u32], cuts: &[usize]) -> Option<[u64; count::COUNT]> {
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(psns.len());
        let runs: Vec<(PsnState, Part)> =
            bounds.windows(2).enumerate().map(|(i, w)| run(&psns[w[0]..w[1]], 10 * i as u64)).collect();
        let parts: Vec<Part> = runs.iter().map(|(_, p)| p.clone()).collect();
        let c = stitch(&key(), &parts, &|_, _| Back::default())?;
        let mut sum = [0u64; count::COUNT];
        for (i, s) in sum.iter_mut().enumerate() {
            let parts: u64 = runs.iter().map(|(st, _)| st.count[i]).sum();
            *s = parts + c.add.count[i] - c.sub.count[i];
        }
        Some(sum)
    }

    #[test]
    fn a_gap_or_a_repeat_at_the_cut_is_counted_as_in_the_whole() {
        // In order; a gap of 5 PSNs at the cut; a repeat at the cut that the sender resumes
        // from (go-back-N); in order again, cut in three.
        let cases: [(&[u32], &[usize]); 4] = [
            (&[1, 2, 3, 4, 5, 6], &[3]),
            (&[1, 2, 3, 9, 10, 11], &[3]),
            (&[1, 2, 3, 4, 2, 3, 4, 5, 6], &[4]),
            (&[7, 8, 9, 10, 11, 12, 13], &[2, 5]),
        ];
        for (psns, cuts) in cases {
            let (whole, _) = run(psns, 0);
            assert_eq!(stitched(psns, cuts), Some(whole.count), "{psns:?} cut at {cuts:?}");
        }
    }

    #[test]
    fn repeats_that_outlast_the_head_are_not_stitched() {
        // The part after the cut repeats 12 PSNs already seen: past the head the whole still
        // counts duplicates its run alone does not.
        let mut psns: Vec<u32> = (1..=20).collect();
        psns.extend(5..=20);
        let (whole, _) = run(&psns, 0);
        assert_eq!(stitched(&psns, &[20]), None);
        // A short repeat settles within the head.
        let mut short: Vec<u32> = (1..=20).collect();
        short.extend(18..=30);
        let (whole_short, _) = run(&short, 0);
        assert_eq!(stitched(&short, &[20]), Some(whole_short.count));
        assert!(whole.count[count::DUPLICATES] > 8);
    }

    /// spray.pcap cut in 3, both ways a head outlasts its first 8 frames. A go-back-N under way
    /// at the cut (0..=2 before it; 4, 5, 3, 6, 7 and 3..=7 again after): the repeats of 6 and
    /// 7 come past the 8th frame, and the head holds them. A sprayed flow whose responder waits
    /// at the cut for a request it NAKed (4): the part after, alone, opens episodes of its own
    /// and waits for 24 to its end; the head holds every frame the part's responder waits
    /// through (one run counts no episode after the cut).
    #[test]
    fn a_head_goes_on_while_a_retransmission_or_a_nak_episode_does() {
        let gbn: &[u32] = &[0, 1, 2, 4, 5, 3, 6, 7, 3, 4, 5, 6, 7];
        let (whole, _) = run(gbn, 0);
        assert_eq!(stitched(gbn, &[3]), Some(whole.count));
        assert_eq!(run(&gbn[3..], 10).1.edge.unwrap().head.len(), 10);
        let mut sprayed: Vec<u32> = vec![0, 1, 2, 4, 3, 5, 6];
        sprayed.extend([22, 24, 23, 25, 26, 28, 27, 29, 30, 32, 31, 33, 34, 36, 35, 37]);
        // The responder's out-of-sequence requests (one per episode), as the merge gives them.
        let responder = |psns: &[u32]| {
            let (a, b) = (run(&psns[..7], 0), run(&psns[7..], 10));
            let c = stitch(&key(), &[a.1, b.1], &|_, _| Back::default())?;
            Some(a.0.responder[0] + b.0.responder[0] + c.add.responder[0] - c.sub.responder[0])
        };
        let (whole, _) = run(&sprayed, 0);
        // One run: 4 before 3 opens an episode, 3 closes it, 5 opens one that never ends (4 is
        // not sent again). The part after alone opens two more (24 before 23, then 25).
        assert_eq!(whole.responder, [2, 0]);
        assert_eq!(run(&sprayed[7..], 10).0.responder, [2, 0]);
        assert_eq!((stitched(&sprayed, &[7]), responder(&sprayed)), (Some(whole.count), Some(2)));
        let e = run(&sprayed[7..], 10).1.edge.unwrap();
        assert!(e.complete && e.head.len() == 16);
        // A responder that never settles: the head ends at its bound, and the cut is not told.
        let mut long = sprayed.clone();
        long.extend(38..120);
        assert_eq!(run(&long[7..], 10).1.edge.unwrap().head.len(), crate::model::edge::HEAD_MAX);
        assert_eq!(responder(&long), None);
    }

    /// qp_mtus.pcap cut in 2, by hand: a READ of 2048 bytes at PSN 300 ends the part before the
    /// cut, its span unknown there (no READ RESPONSE yet). After the cut its READ RESPONSE
    /// FIRST (41 us) shows a 1024-byte MTU, so one run gives the READ 300 and 301 when the SEND
    /// at 304 follows (45 us): 302 and 303 skipped, one out-of-sequence request. Not told where
    /// the response came after the SEND, or two disagree.
    #[test]
    fn a_read_open_at_the_cut_takes_the_mtu_its_response_showed_after_it() {
        let read = [(0x0C, 300, 2048, 40_000)];
        let send = [(SEND_ONLY, 304, 0, 45_000)];
        let (a, b) = (run_frames(&read, 0), run_frames(&send, 41_000));
        let with = |reads: Vec<(u64, u32)>| {
            let back = |_, psn| Back { reads: if psn == 300 { reads.clone() } else { Vec::new() }, rnr: Vec::new() };
            stitch(&key(), &[a.1.clone(), b.1.clone()], &back)
        };
        let c = with(vec![(41_000, 1024)]).expect("told");
        let sum = |i: usize| a.0.count[i] + b.0.count[i] + c.add.count[i] - c.sub.count[i];
        assert_eq!((sum(count::OUT_OF_SEQUENCE), sum(count::PSN_SKIPPED)), (1, 2));
        assert!(with(vec![]).is_none());
        assert!(with(vec![(46_000, 1024)]).is_none(), "after the SEND");
        assert!(with(vec![(41_000, 1024), (42_000, 4096)]).is_none(), "two MTUs");
    }

    /// rnr.pcap cut in 2, by hand: PSN 7 refused by an RNR NAK at 105 µs after the cut and sent
    /// again at 200 µs, the part's first request (its own run never takes a note with it). One
    /// run takes the refusal with the repeat: told where the NAK's time is known and before it.
    #[test]
    fn a_refusal_after_the_cut_is_taken_with_its_repeat_when_it_came_first() {
        let mut e = crate::engine::edges::edge(None, Default::default());
        e.head = vec![crate::model::edge::HeadFrame([0x04, 7, 0, 0, 0, 0])];
        e.head_ns = vec![200_000];
        e.rnr_psns = vec![7];
        let told = |carried: &[u32], naks: Vec<u64>| refused_first(&e, carried, &|_| naks.clone());
        assert_eq!(told(&[], vec![105_000]), Some(vec![7]));
        assert_eq!(told(&[7], vec![105_000]), Some(vec![]), "a refusal before the cut, carried");
        assert_eq!(told(&[], vec![]), None, "its time not in the heads of the flows back");
        assert_eq!(told(&[], vec![250_000]), None, "after the repeat");
        assert_eq!(told(&[], vec![100_000, 150_000]), None, "several");
    }

    #[test]
    fn parts_that_overlap_are_not_in_series() {
        let p = |s, e| Part { start_ns: s, end_ns: e, ..Part::default() };
        assert!(in_series(&mut [p(10, 20), p(0, 10)]));
        assert!(!in_series(&mut [p(0, 15), p(10, 20)]));
    }
}
