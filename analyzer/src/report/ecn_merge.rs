//! `merge` of the CE/CNP pairs, the CNP pacing per QP and the pacing interval. Counts add up;
//! what needs the time between marks and CNPs is replayed when the reports are one capture cut
//! in time and carry their edges (`--edges`), as the ECN analysis would have run over the whole:
//! a mark waiting at the end of a report is answered by the next report's first CNP on the pair
//! within `--cnp-timeout`, or is unanswered; a mark with no CNP before it in its report is at the
//! distance of the report before's last CNP; the gap between a QP's last CNP in one report and
//! its first in the next is one more gap; the interval is inferred from every gap, and each
//! unanswered mark within it after a CNP is covered. Reports that overlap in time (several
//! points) or have no edges keep the sums and each QP's busiest report's pacing (`Merger`),
//! and the merge says so when any had a CE mark or a CNP (`ecn_not_stitched`).

use std::collections::BTreeMap;

use crate::analyses::ecn::{gap_stats, infer_interval, kept_distance, pending, split};
use crate::model::*;

/// One report's ECN sections and where it lies in time.
#[derive(Debug, Clone)]
pub struct Part {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Made with `--edges`.
    pub edges: bool,
    pub pairs: Vec<Pair>,
    pub pacing: Vec<CnpPacing>,
    pub interval: CnpInterval,
}

/// `--cnp-timeout` of the parts, as their pairs' edges carry it (`None`: no edge, or parts
/// that differ). A part without CE marks or CNPs has no pair to tell it and no say.
pub fn cnp_timeout(parts: &[Part]) -> Option<u64> {
    let mut t = parts
        .iter()
        .flat_map(|p| &p.pairs)
        .filter(|p| p.ce + p.cnp_back > 0)
        .map(|p| p.edge.as_ref().map(|e| e.timeout_ns));
    let first = t.next()??;
    t.all(|x| x == Some(first)).then_some(first)
}

/// The merged pairs (by their addresses' text: `merge` puts them in report order), pacing and
/// interval.
pub struct Merged {
    pub pairs: BTreeMap<(String, String), Pair>,
    pub pacing: Vec<CnpPacing>,
    pub interval: CnpInterval,
}

/// The reports replayed in time order; none when they cannot be (they overlap in time, or one
/// has no edges): the merge keeps the sums then, and says so. The counts were added once
/// already without overflow (`Merger::absorb`).
pub fn merge(mut parts: Vec<Part>) -> Option<Merged> {
    parts.sort_by_key(|p| (p.start_ns, p.end_ns));
    let in_series = parts.windows(2).all(|w| w[0].end_ns <= w[1].start_ns);
    if !in_series || !parts.iter().all(|p| p.edges) {
        return None;
    }
    let pacing = pacing(&parts);
    let interval = interval(&parts, &pacing);
    let end = parts.iter().map(|p| p.end_ns).max().unwrap_or(0);
    let mut pairs: BTreeMap<(String, String), Timing> = BTreeMap::new();
    for p in &parts {
        for x in &p.pairs {
            pairs.entry((x.a.clone(), x.b.clone())).or_insert_with(|| Timing::new(x)).add(x);
        }
    }
    let known = (interval.source != "none").then_some(interval.ns);
    let pairs = pairs.into_iter().map(|(k, t)| (k, t.finish(end, known))).collect();
    Some(Merged { pairs, pacing, interval })
}

/// One pair replayed over the reports in time order.
struct Timing {
    /// Its counts added.
    pair: Pair,
    timeout_ns: u64,
    /// Marks waiting for a CNP: (time, time since the CNP before).
    waiting: Vec<(u64, Option<u64>)>,
    last_cnp: Option<u64>,
    unanswered: u64,
    /// Distances of unanswered marks to the CNP before them (within `MAX_INTERVAL_NS`).
    after_cnp: Vec<u64>,
}

impl Timing {
    fn new(x: &Pair) -> Self {
        Timing {
            pair: Pair { data_packets: 0, ce: 0, cnp_back: 0, edge: None, ..x.clone() },
            timeout_ns: 0,
            waiting: Vec::new(),
            last_cnp: None,
            unanswered: 0,
            after_cnp: Vec::new(),
        }
    }

    fn add(&mut self, x: &Pair) {
        let sum = &mut self.pair;
        sum.data_packets = sum.data_packets.saturating_add(x.data_packets);
        sum.ce = sum.ce.saturating_add(x.ce);
        sum.cnp_back = sum.cnp_back.saturating_add(x.cnp_back);
        let Some(e) = &x.edge else { return };
        self.timeout_ns = e.timeout_ns;
        if let Some(c) = e.first_cnp_ns {
            // The first CNP takes every mark before it: answered within the timeout.
            for (t, since) in std::mem::take(&mut self.waiting) {
                if c.saturating_sub(t) > self.timeout_ns {
                    self.unanswered(since);
                }
            }
        }
        let before = self.last_cnp;
        let since = |t: u64, s: Option<u64>| s.or_else(|| before.map(|l| t.saturating_sub(l)));
        self.unanswered = self.unanswered.saturating_add(e.unanswered);
        self.after_cnp.extend(&e.after_cnp_ns);
        // Unanswered marks before this report's first CNP: counted above, distance from here.
        for t in &e.first_ns {
            self.after_cnp.extend(kept_distance(since(*t, None)));
        }
        self.waiting.extend(e.waiting.iter().map(|(t, s)| (*t, since(*t, *s))));
        self.last_cnp = e.last_cnp_ns.or(self.last_cnp);
    }

    fn unanswered(&mut self, since: Option<u64>) {
        self.unanswered += 1;
        self.after_cnp.extend(kept_distance(since));
    }

    /// The pair at the whole's end, by the analysis' rules ([`split`], [`pending`]).
    fn finish(self, end: u64, interval: Option<u64>) -> Pair {
        let waiting = self.waiting.iter();
        let (ce_unanswered, ce_covered) =
            split(self.unanswered, &self.after_cnp, waiting.clone(), end, self.timeout_ns, interval);
        let ce_pending = pending(waiting, end, self.timeout_ns);
        Pair { ce_unanswered, ce_covered, ce_pending, ..self.pair }
    }
}

/// A QP's CNPs so far: counts added, every gap, the latest CNP.
type QpCnps = (CnpPacing, Vec<u64>, Option<u64>);

/// Every QP's CNPs over the reports in time order: the gaps of each and the one across each cut.
fn pacing(parts: &[Part]) -> Vec<CnpPacing> {
    let mut qps: BTreeMap<(String, u32), QpCnps> = BTreeMap::new();
    for c in parts.iter().flat_map(|p| &p.pacing) {
        let (sum, gaps, last) = qps
            .entry((c.dst.clone(), c.dst_qp))
            .or_insert_with(|| (CnpPacing { cnps: 0, edge: None, ..c.clone() }, Vec::new(), None));
        sum.cnps = sum.cnps.saturating_add(c.cnps);
        if let Some(e) = &c.edge {
            gaps.extend(last.map(|l| e.first_ns.saturating_sub(l)));
            gaps.extend(&e.gaps_ns);
            *last = Some(e.last_ns);
        }
    }
    let mut out: Vec<CnpPacing> = qps
        .into_values()
        .map(|(mut c, mut gaps, _)| {
            (c.min_gap_ns, c.median_gap_ns) = gap_stats(&mut gaps);
            c
        })
        .collect();
    // As a report lists them: by address bytes (and version), then QP.
    out.sort_by_key(|c| (addr_bytes(&c.dst).unwrap_or_default(), c.dst.contains(':'), c.dst_qp));
    out
}

/// The interval one run would use: given, or the smallest gap of a QP with enough CNPs.
fn interval(parts: &[Part], pacing: &[CnpPacing]) -> CnpInterval {
    if let Some(given) = parts.iter().find(|p| p.interval.source == "given") {
        return given.interval.clone();
    }
    // A QP with the CNPs to count has gaps: its `min_gap_ns` is the smallest of them.
    infer_interval(pacing.iter().map(|c| (c.cnps, Some(c.min_gap_ns))))
        .map_or_else(CnpInterval::default, |ns| CnpInterval { ns, source: "inferred".into() })
}

/// One report's view of a PFC sender's onsets (`pfc.senders[].ecn_lead`), with its start.
pub type LeadPart = (u64, Option<EcnLead>);

/// ECN before PFC of a sender of `priority` several reports of one capture cut in time saw:
/// its onsets are the starts of its merged paused intervals (a pause across a cut is one), each
/// judged as its report judged it — but where the window before it (and a run of marks)
/// reaches back past its report's start into an earlier report (`first_start`: the
/// earliest report's), whose marks that report did not see: those are judged again over the
/// marks the reports carried near their ends ([`super::lead_stitch`], `marks`: the reports in
/// time order, none when they overlap). None when some report has no edge, the intervals are
/// not complete, an onset is not known, or the marks before one are not.
pub fn lead(
    parts: &[LeadPart],
    intervals: &[[u64; 2]],
    first_start: u64,
    marks: Option<&[super::lead_stitch::Sight]>,
    priority: u8,
) -> Option<EcnLead> {
    let mut known: BTreeMap<u64, (u64, Option<u64>)> = BTreeMap::new();
    let mut base: Option<&EcnLead> = None;
    for (start, l) in parts {
        let l = l.as_ref()?;
        base.get_or_insert(l);
        for (t, lead) in l.edge.as_ref()? {
            known.insert(*t, (*start, *lead));
        }
    }
    let base = base?;
    let reach = base.window_ns + crate::analyses::ecn_lead::RUN_GAP_NS;
    let mut leads = Vec::new();
    for [t, _] in intervals {
        let (start, lead) = known.get(t)?;
        if *start > first_start && t.saturating_sub(*start) < reach {
            // Marks only on the flows through the paused link (a topology): not carried.
            let marks = marks.filter(|_| base.link.is_none())?;
            let own = lead.map(|l| t - l);
            let first = super::lead_stitch::first_mark(marks, *start, *t, base.window_ns, priority, own)?;
            leads.extend(first.map(|m| t - m));
            continue;
        }
        leads.extend(*lead);
    }
    Some(EcnLead {
        onsets: intervals.len() as u64,
        preceded: leads.len() as u64,
        lead_ns_p50: (!leads.is_empty()).then(|| crate::analyses::stats::median(&mut leads)),
        edge: None,
        ..base.clone()
    })
}

/// The note of a merge that could not judge some PFC senders' onsets.
pub fn lead_note(senders: u64) -> Note {
    Note::new(
        NoteCode::EcnLeadNotMerged,
        format!(
            "pfc.senders[].ecn_lead: {senders} senders paused in several reports whose onsets could not be judged \
             as one run (an onset within the ECN-lead window of its report's start, whose marks before it another \
             report held; reports without edges, or with incomplete pause intervals): null"
        ),
    )
}

/// The note of a merge that could not replay the CE/CNP timing.
pub fn note() -> Note {
    Note::new(
        NoteCode::EcnNotStitched,
        "pairs, cnp_pacing: the reports overlap in time (several points) or carry no edges (analyse with \
         --edges): CE marks answered, unanswered, covered and pending are each report's added, a mark waiting \
         at the end of one report is not answered by the next one's CNP, and each QP's pacing is that of the \
         report with the most CNPs",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(ce: u64, cnps: u64, edge: PairEdge) -> Pair {
        let (a, b) = ("10.0.0.1".to_string(), "10.0.0.2".to_string());
        Pair {
            a,
            b,
            data_packets: ce,
            ce,
            cnp_back: cnps,
            ce_unanswered: 0,
            ce_covered: 0,
            ce_pending: 0,
            edge: Some(edge),
        }
    }

    fn edge(
        unanswered: u64,
        first_ns: Vec<u64>,
        waiting: Vec<(u64, Option<u64>)>,
        cnps: Option<(u64, u64)>,
    ) -> PairEdge {
        PairEdge {
            timeout_ns: 1_000,
            unanswered,
            after_cnp_ns: Vec::new(),
            first_ns,
            waiting,
            first_cnp_ns: cnps.map(|c| c.0),
            last_cnp_ns: cnps.map(|c| c.1),
        }
    }

    fn part(start_ns: u64, end_ns: u64, p: Pair) -> Part {
        let interval = CnpInterval { ns: 80, source: "given".into() };
        Part { start_ns, end_ns, edges: true, pairs: vec![p], pacing: Vec::new(), interval }
    }

    fn key() -> (String, String) {
        ("10.0.0.1".to_string(), "10.0.0.2".to_string())
    }

    /// By hand, timeout 1000 ns, interval 80 ns given. Part 1 [0, 2000]: CNPs at 500 and 1990,
    /// a mark at 1995 waiting at its end (5 after the CNP). Part 2 [2050, 9000]: CNPs at 3500
    /// and 4900; a mark at 2060 with no CNP before it here, unanswered at 3500; one at 4950
    /// (50 after 4900) unanswered; one at 8500 waiting at the end. One run: 1995 unanswered at
    /// 3500 (1505 later), 5 after a CNP: covered; 2060 is 70 after the CNP at 1990 (part 1's):
    /// covered; 4950 covered; 8500 pending (500 before the end).
    #[test]
    fn marks_across_a_cut_are_judged_as_one_run() {
        let one = part(0, 2000, pair(1, 2, edge(0, Vec::new(), vec![(1995, Some(5))], Some((500, 1990)))));
        let mut two_edge = edge(2, vec![2060], vec![(8500, Some(3600))], Some((3500, 4900)));
        two_edge.after_cnp_ns = vec![50];
        let two = part(2050, 9000, pair(3, 2, two_edge));
        let m = merge(vec![two.clone(), one.clone()]).unwrap();
        let p = &m.pairs[&key()];
        assert_eq!((p.ce, p.cnp_back, p.ce_unanswered, p.ce_covered, p.ce_pending), (4, 4, 0, 3, 1));
        // A part with no CNP: 1995 waits on and expires at the whole's end (3100), still 5
        // after its CNP; 3050 is 1060 after the CNP at 1990 and pending.
        let quiet = part(3000, 3100, pair(1, 0, edge(0, Vec::new(), vec![(3050, None)], None)));
        let m = merge(vec![one, quiet]).unwrap();
        let p = &m.pairs[&key()];
        assert_eq!((p.ce_unanswered, p.ce_covered, p.ce_pending), (0, 1, 1));
        // Reports that overlap in time cannot be replayed.
        assert!(merge(vec![two.clone(), two]).is_none());
    }

    fn onsets(each: Vec<(u64, Option<u64>)>) -> Option<EcnLead> {
        let preceded = each.iter().filter(|e| e.1.is_some()).count() as u64;
        let onsets = each.len() as u64;
        Some(EcnLead { onsets, preceded, window_ns: 100, lead_ns_p50: None, link: None, edge: Some(each) })
    }

    /// By hand, window 100 ns (+ a run gap of 1000). Part 1 from 0: onsets at 500 (a mark 40
    /// before) and 1900, paused until 2200; part 2 from 2000 sees that pause go on from 2000
    /// (one interval in one run: no onset) and onsets at 5000 (lead 10) and 9000 (none). One
    /// run: 4 onsets (500, 1900, 5000, 9000), 2 preceded, median lead of 40 and 10: 10.
    #[test]
    fn onsets_across_a_cut_are_judged_as_one_run() {
        let one = (0, onsets(vec![(500, Some(40)), (1900, None)]));
        let two = (2000, onsets(vec![(2000, None), (5000, Some(10)), (9000, None)]));
        let intervals = [[500, 600], [1900, 2200], [5000, 5100], [9000, 9100]];
        let l = lead(&[one.clone(), two.clone()], &intervals, 0, None, 3).unwrap();
        assert_eq!((l.onsets, l.preceded, l.lead_ns_p50, l.edge), (4, 2, Some(10), None));
        // An onset of part 2 within the window and a run gap of its start: its marks before
        // may be part 1's; without their marks it cannot be judged.
        let early = (2000, onsets(vec![(2500, Some(10))]));
        let three = [[500, 600], [1900, 2200], [2500, 2600]];
        assert_eq!(lead(&[one.clone(), early.clone()], &three, 0, None, 3), None);
        // With them: part 1's marks ran 1000..1100 (priority 3), part 2's from 2490 (1390
        // later: another run); the window of the onset at 2500 starts at 2400: its first mark is
        // 2490 as part 2 found (part 1's run ended before the window). Had part 2's run begun at
        // 2050 (within a run's gap: joined with part 1's), the window's start: 2400, a lead of
        // 100 (the median of 40 and 100: 40).
        let m1 = MarksEdge { head: vec![[3, 450, 460]], tail: vec![[3, 1000, 1100]] };
        let m2 = MarksEdge { head: vec![[3, 2490, 2495]], tail: vec![[3, 2490, 2495]] };
        let sights: [super::super::lead_stitch::Sight; 2] = [(0, Some(&m1)), (2000, Some(&m2))];
        let l = lead(&[one.clone(), early.clone()], &three, 0, Some(&sights), 3).unwrap();
        assert_eq!((l.onsets, l.preceded, l.lead_ns_p50), (3, 2, Some(10)));
        let m2 = MarksEdge { head: vec![[3, 2050, 2495]], tail: vec![[3, 2050, 2495]] };
        let sights: [super::super::lead_stitch::Sight; 2] = [(0, Some(&m1)), (2000, Some(&m2))];
        let l = lead(&[one.clone(), early], &three, 0, Some(&sights), 3).unwrap();
        assert_eq!((l.preceded, l.lead_ns_p50), (2, Some(40)));
        // A report without edges cannot be judged.
        let bare = (2000, Some(EcnLead { edge: None, ..onsets(vec![(5000, None)]).unwrap() }));
        assert_eq!(lead(&[one, bare], &[[500, 600], [1900, 2200], [5000, 5100]], 0, None, 3), None);
    }
}
