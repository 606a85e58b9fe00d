//! `merge` of the marking sections (data frames and CE marks over time per class and priority).
//! One run counts every data frame from its first CE mark on. A report's own series start at its
//! first mark; with `--edges` it carries the frames before that mark too (`marking.edge`). The
//! merge counts each report's series, and its frames before its mark when the whole's first mark
//! came before the report began: those frames are all after it. A series' points are aligned to
//! their width in absolute time, so every report's points nest into the whole's width (the
//! smallest that holds the union in [`SERIES_POINTS`] points, as one run's halving ends with).
//!
//! Where a report's frames before its mark straddle the whole's first mark (reports that
//! overlap in time), or a report has no edge, or the rate windows differ, the merge cannot
//! tell the points apart and says so (`marking_not_merged`).

use std::collections::BTreeMap;

use crate::analyses::marking::{SERIES_POINTS, point};
use crate::model::*;

/// One report's marking and where it lies in time.
#[derive(Debug, Clone)]
pub struct Part {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Whether the report was made with `--edges` (without, its frames before its first mark
    /// are unknown).
    pub edges: bool,
    pub marking: Option<Marking>,
}

/// The merged section (none when no report had a mark), and whether it is one run's.
pub fn merge(parts: &[Part]) -> (Option<Marking>, bool) {
    if let [one] = parts {
        let m = one.marking.clone().filter(|m| !m.classes.is_empty());
        return (m.map(|m| Marking { edge: None, ..m }), true);
    }
    // The whole's first mark; a report without edge but with marks had one, at a time unknown.
    let first = parts.iter().filter_map(|p| p.marking.as_ref()?.edge.as_ref()?.first_mark_ns).min();
    let holder = parts.iter().find(|p| first.is_some() && mark_of(p) == first);
    let mut exact = true;
    let mut classes: BTreeMap<u8, Vec<&MarkingSeries>> = BTreeMap::new();
    let mut prios: BTreeMap<Option<u8>, Vec<&MarkingSeries>> = BTreeMap::new();
    let mut any_mark = false;
    for p in parts {
        let Some(m) = &p.marking else {
            exact &= p.edges;
            continue;
        };
        any_mark |= !m.classes.is_empty();
        add(&mut classes, &mut prios, &m.classes, &m.priorities);
        let Some(e) = &m.edge else {
            exact = false;
            continue;
        };
        let Some(t) = first else { continue };
        // Every frame before its mark is after the whole's first (it began after it, or after
        // the report that holds it); or none is (they are before its own mark, the first, or
        // it ended before); else the reports overlap and its points cannot be told apart.
        let after_holder = holder.is_some_and(|h| !std::ptr::eq(h, p) && p.start_ns >= h.end_ns);
        if p.start_ns > t || after_holder {
            add(&mut classes, &mut prios, &e.classes, &e.priorities);
        } else if !(e.first_mark_ns == Some(t) || (e.first_mark_ns.is_none() && p.end_ns < t)) {
            exact &= e.classes.is_empty();
        }
    }
    if !any_mark {
        return (None, true);
    }
    let mut joined = |list: &[&MarkingSeries]| {
        let (s, ok) = join(list);
        exact &= ok;
        s
    };
    let classes: Vec<MarkingClass> =
        classes.iter().map(|(dscp, l)| MarkingClass { dscp: *dscp, series: joined(l) }).collect();
    let priorities: Vec<MarkingPriority> =
        prios.iter().map(|(pcp, l)| MarkingPriority { pcp: *pcp, series: joined(l) }).collect();
    (Some(Marking { classes, priorities: in_report_order(priorities), edge: None }), exact)
}

fn mark_of(p: &Part) -> Option<u64> {
    p.marking.as_ref()?.edge.as_ref()?.first_mark_ns
}

fn add<'a>(
    classes: &mut BTreeMap<u8, Vec<&'a MarkingSeries>>,
    prios: &mut BTreeMap<Option<u8>, Vec<&'a MarkingSeries>>,
    c: &'a [MarkingClass],
    p: &'a [MarkingPriority],
) {
    for c in c {
        classes.entry(c.dscp).or_default().push(&c.series);
    }
    for p in p {
        prios.entry(p.pcp).or_default().push(&p.series);
    }
}

/// A report lists the priorities by PCP, untagged (null) last.
fn in_report_order(mut p: Vec<MarkingPriority>) -> Vec<MarkingPriority> {
    p.sort_by_key(|p| p.pcp.map_or(8, u16::from));
    p
}

/// The series of several reports in one: the whole's width is the smallest power-of-two
/// multiple of the widest part that holds every point in [`SERIES_POINTS`]; each part's point
/// lands in the one whole point holding it. False when a part's points do not nest (another
/// rate window).
pub fn join(list: &[&MarkingSeries]) -> (MarkingSeries, bool) {
    let list: Vec<&MarkingSeries> = list.iter().copied().filter(|s| !s.frames.is_empty() && s.point_ns > 0).collect();
    let Some(widest) = list.iter().map(|s| s.point_ns).max() else {
        return (MarkingSeries::default(), true);
    };
    let start = list.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let last = list.iter().map(|s| s.start_ns + (s.frames.len() as u64 - 1) * s.point_ns).max().unwrap_or(0);
    let mut width = widest;
    while point(start, last, width) >= SERIES_POINTS as u64 {
        width *= 2;
    }
    let first = start / width;
    let points = point(start, last, width) as usize + 1;
    let mut out =
        MarkingSeries { start_ns: first * width, point_ns: width, frames: vec![0; points], ce: vec![0; points] };
    let mut nested = true;
    for s in &list {
        nested &= width % s.point_ns == 0 && s.start_ns % s.point_ns == 0;
        for (i, (n, ce)) in s.frames.iter().zip(&s.ce).enumerate() {
            let at = point(start, s.start_ns + i as u64 * s.point_ns, width) as usize;
            out.frames[at] += n;
            out.ce[at] += ce;
        }
    }
    (out, nested)
}

/// The note of a merge whose marking is not one run's.
pub fn note() -> Note {
    Note::new(
        NoteCode::MarkingNotMerged,
        "marking: the series over time count each report's frames from its own first CE mark on; frames \
         before it that one run would count (after an earlier report's mark) are missing where a report \
         has no edge (analyse the parts with --edges) or overlaps the first mark in time",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::marking::Series;

    fn json(s: &Series) -> MarkingSeries {
        crate::report::assemble::dcqcn::series_json(s, 1000)
    }

    /// A run over `frames` (window, ce) from the first mark on, and the same cut at `cut`.
    fn run(frames: &[(u64, bool)]) -> (Option<Series>, Option<Series>, Option<u64>) {
        let (mut marked, mut before, mut first) = (None::<Series>, None::<Series>, None);
        for &(w, ce) in frames {
            if first.is_none() && ce {
                first = Some(w * 1000);
            }
            let s = if first.is_some() { &mut marked } else { &mut before };
            s.get_or_insert_with(|| Series::new(w)).add(w, 100, ce);
        }
        (marked, before, first)
    }

    fn part(frames: &[(u64, bool)]) -> Part {
        let (marked, before, first) = run(frames);
        let classes = |s: &Option<Series>| s.iter().map(|s| MarkingClass { dscp: 26, series: json(s) }).collect();
        let edge = MarkingEdge { first_mark_ns: first, classes: classes(&before), priorities: Vec::new() };
        Part {
            start_ns: frames[0].0 * 1000,
            end_ns: frames.last().unwrap().0 * 1000,
            edges: true,
            marking: Some(Marking { classes: classes(&marked), priorities: Vec::new(), edge: Some(edge) }),
        }
    }

    #[test]
    fn parts_cut_in_time_merge_into_the_whole_series() {
        // 700 windows, a mark at window 90 and every 50th after: the whole halves twice.
        let frames: Vec<(u64, bool)> = (7..707).map(|w| (w, w >= 90 && w % 50 == 40)).collect();
        let whole = json(&run(&frames).0.unwrap());
        assert_eq!(whole.point_ns, 4000);
        for cuts in [vec![50], vec![83, 84], vec![200, 450], vec![600]] {
            let mut bounds = vec![0];
            bounds.extend(&cuts);
            bounds.push(frames.len());
            let parts: Vec<Part> = bounds.windows(2).map(|b| part(&frames[b[0]..b[1]])).collect();
            let (m, exact) = merge(&parts);
            assert!(exact, "{cuts:?}");
            assert_eq!(m.unwrap().classes[0].series, whole, "cut at {cuts:?}");
        }
    }

    #[test]
    fn a_part_without_edge_is_said() {
        let frames: Vec<(u64, bool)> = (0..100).map(|w| (w, w == 10)).collect();
        let mut later = part(&frames[50..]);
        later.marking.as_mut().unwrap().edge = None;
        let (m, exact) = merge(&[part(&frames[..50]), later]);
        assert!(!exact);
        assert_eq!(m.unwrap().classes[0].series.frames.iter().sum::<u64>(), 40, "the mark's part only");
        // No mark anywhere: no section.
        let quiet: Vec<(u64, bool)> = (0..10).map(|w| (w, false)).collect();
        assert_eq!(merge(&[part(&quiet[..5]), part(&quiet[5..])]), (None, true));
    }
}
