//! ECN before PFC across cuts in time: a pause onset just after a cut asks for the CE marks in
//! the `--ecn-lead` window before it, which reach into the report before the cut. Each report
//! made with `--edges` carries its runs of marks near its ends (`pfc.edge.marks`: each
//! priority's first run, and the runs that end within the window and a run's gap of its end),
//! so the merge lays the runs of the reports before an onset end to end, joins a run at the end
//! of one report with the first of the next where one run joins them (marks at most
//! [`RUN_GAP_NS`] apart), and asks them as the analysis asks its own runs
//! (`analyses::ecn_lead`): the first run that ends in the window gives the first mark, or the
//! window's start when the run began before it.

use crate::analyses::ecn_lead::{RUN_GAP_NS, counts};
use crate::model::MarksEdge;

/// A report in time order: its start and its marks edge (none: not known).
pub type Sight<'a> = (u64, Option<&'a MarksEdge>);

/// One priority's runs of `m` (`tail`: those near its end, else its first).
fn runs_of(m: &MarksEdge, p: usize, tail: bool) -> impl Iterator<Item = (u64, u64)> + '_ {
    let list = if tail { &m.tail } else { &m.head };
    list.iter().filter(move |r| r[0] == p as u64).map(|r| (r[1], r[2]))
}

/// Whether a run starting at `first` joins the run `last` before it.
fn joins(last: (u64, u64), first: u64) -> bool {
    first >= last.0 && first.saturating_sub(last.1) <= RUN_GAP_NS
}

/// Priority `p`'s runs of the reports before the one starting at `start` (`reports` in time
/// order), as one run over them holds them near that start; none when a report's marks are not
/// known.
fn runs_before(reports: &[Sight], start: u64, p: usize) -> Option<Vec<(u64, u64)>> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (_, m) in reports.iter().take_while(|(s, _)| *s < start) {
        let m = (*m)?;
        let mut tail: Vec<(u64, u64)> = runs_of(m, p, true).collect();
        if let (Some(h), Some(last)) = (runs_of(m, p, false).next(), runs.last_mut())
            && joins(*last, h.0)
        {
            // Its first run continues the last one before it.
            last.1 = last.1.max(h.1);
            if tail.first().is_some_and(|t| t.0 == h.0) {
                last.1 = last.1.max(tail.remove(0).1);
            }
        }
        runs.extend(tail);
    }
    Some(runs)
}

/// The first CE mark one run finds in `[t − window, t)` for an onset of `priority` at `t` in the
/// report starting at `start`, which found `own` (its own first mark there) over its own runs;
/// `None` when the reports do not tell.
pub fn first_mark(
    reports: &[Sight],
    start: u64,
    t: u64,
    window: u64,
    priority: u8,
    own: Option<u64>,
) -> Option<Option<u64>> {
    let from = t.saturating_sub(window);
    let here = reports.iter().find(|(s, _)| *s == start)?.1?;
    let mut first = own;
    for p in (0..9).filter(|p| counts(priority, *p)) {
        let runs = runs_before(reports, start, p)?;
        let found = match runs.iter().find(|r| r.1 >= from) {
            Some(r) => Some(r.0.max(from)),
            // The last run before joins this report's first, which reaches into the window.
            None => runs
                .last()
                .zip(runs_of(here, p, false).next())
                .filter(|(l, h)| joins(**l, h.0) && h.1 >= from)
                .map(|(l, _)| l.0.max(from)),
        };
        first = match (first, found) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Some(first.filter(|m| *m < t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(head: &[[u64; 3]], tail: &[[u64; 3]]) -> MarksEdge {
        MarksEdge { head: head.to_vec(), tail: tail.to_vec() }
    }

    /// Priority 3, window 1 000 ns, a cut at 10 000. Before it marks ran 8 500..8 600 and
    /// 9 800..9 990; after it from 10 500 (within a run's gap of 9 990: one run, 9 800..10 700).
    /// By hand: an onset at 10 300 has its first mark at 9 800 (the window starts at 9 300); at
    /// 10 900 the window starts at 9 900, inside the joined run: 9 900 (the report after the cut
    /// alone found 10 500); an onset of priority 5 finds none; an 802.3x PAUSE any priority.
    #[test]
    fn an_onset_after_a_cut_finds_the_marks_before_it() {
        let before = edge(&[[3, 8_500, 8_600]], &[[3, 9_800, 9_990]]);
        let after = edge(&[[3, 10_500, 10_700]], &[[3, 10_500, 10_700]]);
        let reports: Vec<Sight> = vec![(0, Some(&before)), (10_000, Some(&after))];
        assert_eq!(first_mark(&reports, 10_000, 10_300, 1_000, 3, None), Some(Some(9_800)));
        assert_eq!(first_mark(&reports, 10_000, 10_900, 1_000, 3, Some(10_500)), Some(Some(9_900)));
        assert_eq!(first_mark(&reports, 10_000, 10_900, 1_000, 5, None), Some(None));
        assert_eq!(first_mark(&reports, 10_000, 10_300, 1_000, 8, None), Some(Some(9_800)));
        // Not joined (10 995 is more than a run's gap after 9 990): the report's own mark.
        let late = edge(&[[3, 10_995, 11_000]], &[[3, 10_995, 11_000]]);
        let reports: Vec<Sight> = vec![(0, Some(&before)), (10_000, Some(&late))];
        assert_eq!(first_mark(&reports, 10_000, 11_100, 1_000, 3, Some(10_995)), Some(Some(10_995)));
        // A report before without its marks: not told.
        let reports: Vec<Sight> = vec![(0, None), (10_000, Some(&after))];
        assert_eq!(first_mark(&reports, 10_000, 10_300, 1_000, 3, None), None);
    }

    /// Three reports, the middle one short: its run joins the ones on both sides, and an onset
    /// in the third finds the run that began in the first.
    #[test]
    fn runs_join_across_two_cuts() {
        let first = edge(&[[3, 100, 200]], &[[3, 900, 1_000]]);
        let middle = edge(&[[3, 1_500, 2_400]], &[[3, 1_500, 2_400]]);
        let last = edge(&[[3, 3_000, 3_100]], &[[3, 3_000, 3_100]]);
        let reports: Vec<Sight> = vec![(0, Some(&first)), (1_200, Some(&middle)), (2_500, Some(&last))];
        assert_eq!(runs_before(&reports, 2_500, 3), Some(vec![(900, 2_400)]));
        assert_eq!(first_mark(&reports, 2_500, 3_050, 2_000, 3, Some(3_000)), Some(Some(1_050)));
    }
}
