//! `merge` of the vantage sections of captures cut in time (issue 43 §3): one run's points,
//! hops and losses from the reports' `vantage.edge`.
//!
//! What adds: each point's frames and span, each hop's matched frames, CE marks and latency
//! samples, its flows (a union), its frames and marks by latency (the marking profile is fitted
//! again), and its series of matched frames from the first mark on (each later report's matched
//! frames before its own first mark are in its edge). What one run decides across a cut is
//! replayed from the edges:
//! - The match window straddles the cut: the frames one report held at its end were held, in one
//!   run, beside the next report's first frames. Replaying the next report's head on them gives
//!   one run's `peak_held`, and finds the copies one run would have folded into a frame of the
//!   report before. Such copies count twice in the reports (flows, PSNs, everything): the merge
//!   then gives no vantage section and says how many.
//! - A frame's points outside their capture span (before their first frame, after their last)
//!   are counted per report; a point that captured before the report (or after it) in another
//!   one was capturing in one run: the frame was lost between, not outside.
//!
//! It needs every report's edge (`--edges`), one match window, and every report's frames through
//! the matching (a report whose matching started at its first mirrored copy, after one that
//! matched, counted some frames unmatched that one run matched).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer_common::flow::FlowKey;

use crate::analyses::marking_profile::LatencyMarks;
use crate::analyses::stats::Samples;
use crate::analyses::vantage::{Sighted, losses};
use crate::analyses::vantage_edge::MIRRORED;
use crate::frames::source_bit as bit;
use crate::model::*;
use crate::report::assemble::vantage::{FLOWS_NAMED, loss_between, marking_profile};

/// One report's sight: its span, its frames analysed, and its vantage section.
#[derive(Debug, Clone)]
pub struct Part {
    pub span: (u64, u64),
    pub frames: u64,
    pub vantage: Option<Vantage>,
}

/// The merged section (none with fewer than two points) and the hops' findings, one run's.
#[derive(Debug)]
pub struct Merged {
    pub vantage: Option<Vantage>,
    pub findings: Vec<Finding>,
}

/// A point over the reports: its frames and span, and the first and last report (in time order)
/// it had frames in.
struct Global {
    point: VantagePoint,
    first: usize,
    last: usize,
}

/// A frame one run holds for matching, as the replay of a cut keeps it.
struct Held {
    ts: u64,
    id: u64,
    points: u64,
    first: usize,
    mirrored: bool,
    /// Held since a report before the one replayed.
    earlier: bool,
}

/// The reports' vantage sections in time order (`order`) merged, or why they cannot be.
pub fn merge(parts: &[Part], order: &[usize]) -> Result<Merged, String> {
    let parts: Vec<&Part> = order.iter().map(|i| &parts[*i]).collect();
    let Some(start) = parts.iter().position(|p| p.vantage.is_some()) else {
        return Ok(Merged { vantage: None, findings: Vec::new() });
    };
    let parts = &parts[start..];
    let mut sections = Vec::new();
    for p in parts {
        let Some(v) = &p.vantage else {
            return Err("a report after one that matched frames had no matching (no mirrored copy, one input)".into());
        };
        let Some(e) = &v.edge else { return Err("a report carries no vantage edge (made without --edges)".into()) };
        if v.hops.len() != e.hops.len() || v.points.len() > 64 {
            return Err("a report's vantage edge does not match its section (or it has more than 64 points)".into());
        }
        let offered: u64 = v.points.iter().map(|p| p.frames).sum();
        if !sections.is_empty() && offered != p.frames {
            return Err("a report's matching started after its first frame (at its first mirrored copy)".into());
        }
        sections.push((v, e));
    }
    let (first, _) = sections[0];
    if sections.iter().any(|(v, e)| {
        v.match_window_ns != first.match_window_ns
            || (e.link_speed_bps, e.kmin_min_bytes) != (sections[0].1.link_speed_bps, sections[0].1.kmin_min_bytes)
    }) {
        return Err("the reports differ in --match-window, --link-speed or the Kmin floor".into());
    }
    let (points, maps) = points(&sections);
    let (peak, crossing) = replay_cuts(&sections, &maps, &points, first.match_window_ns)?;
    if crossing > 0 {
        return Err(format!(
            "{crossing} frames opening a report are copies of frames the report before held at its end, within \
             the match window: one run counts each once, the reports twice (in flows and every analysis)"
        ));
    }
    let sightings = sightings(&sections, &maps, &points)?;
    let (hops, findings) = hops(&sections, &maps, &points, &sightings)?;
    let vantage = (points.len() >= 2).then(|| Vantage {
        match_window_ns: first.match_window_ns,
        points: points.into_iter().map(|g| g.point).collect(),
        hops,
        copies: sections.iter().map(|(v, _)| v.copies).sum(),
        peak_held: peak,
        edge: None,
    });
    let findings = if vantage.is_some() { findings } else { Vec::new() };
    Ok(Merged { vantage, findings })
}

type Section<'a> = (&'a Vantage, &'a VantageEdge);

/// The points of all reports in the order one run met them, and each report's indices into them.
fn points(sections: &[Section]) -> (Vec<Global>, Vec<Vec<usize>>) {
    let mut all: Vec<Global> = Vec::new();
    let mut maps = Vec::new();
    for (k, (v, _)) in sections.iter().enumerate() {
        let mut map = Vec::new();
        for p in &v.points {
            let i = match all.iter().position(|g| g.point.name == p.name) {
                Some(i) => {
                    let g = &mut all[i];
                    g.point.frames += p.frames;
                    g.point.first_ns = g.point.first_ns.min(p.first_ns);
                    g.point.last_ns = g.point.last_ns.max(p.last_ns);
                    g.last = k;
                    i
                }
                None => {
                    all.push(Global { point: p.clone(), first: k, last: k });
                    all.len() - 1
                }
            };
            map.push(i);
        }
        maps.push(map);
    }
    (all, maps)
}

/// A report's mask of points in the merged points' bits.
fn remap(mask: u64, map: &[usize]) -> u64 {
    map.iter().enumerate().filter(|(i, _)| mask & (1u64 << i) != 0).fold(0, |m, (_, g)| m | bit(*g as u16))
}

/// Replays each cut's match window: the frames held at a report's end beside the next one's
/// head. Returns one run's most frames held and the copies one run folds across a cut.
fn replay_cuts(
    sections: &[Section],
    maps: &[Vec<usize>],
    points: &[Global],
    window: u64,
) -> Result<(u64, u64), String> {
    let mut queue: VecDeque<Held> = VecDeque::new();
    let (mut peak, mut crossing) = (0u64, 0u64);
    for ((v, e), map) in sections.iter().zip(maps) {
        peak = peak.max(v.peak_held);
        if queue.is_empty() {
            // Nothing held across the cut: the report's own matching is one run's.
        } else {
            for &[ts, id, at, held] in &e.head {
                let g = *map.get((at & 0xffff) as usize).ok_or("a head frame names no point")?;
                let mirrored = at & MIRRORED != 0;
                let folds = |h: &Held| {
                    let label = |i: usize| &points[i].point.label;
                    h.earlier
                        && h.id == id
                        && h.points & bit(g as u16) == 0
                        && ts.saturating_sub(h.ts) <= window
                        && (label(h.first) != label(g) || (h.mirrored && mirrored))
                };
                if id != 0 && queue.iter().any(folds) {
                    crossing += 1;
                }
                if held == 1 {
                    let h = Held { ts, id, points: bit(g as u16), first: g, mirrored, earlier: false };
                    queue.push_back(h);
                    peak = peak.max(queue.len() as u64);
                }
                while queue.front().is_some_and(|h| ts.saturating_sub(h.ts) > window) {
                    queue.pop_front();
                }
            }
        }
        queue.retain(|h| h.earlier);
        if !queue.is_empty() && e.head_closed {
            return Err(
                "frames held across a cut outlast the next report's first match window (times out of order)".into()
            );
        }
        for &[ts, id, mask, at] in &e.ended {
            let first = *map.get((at & 0xffff) as usize).ok_or("a held frame names no point")?;
            let mirrored = at & MIRRORED != 0;
            queue.push_back(Held { ts, id, points: remap(mask, map), first, mirrored, earlier: true });
        }
    }
    Ok((peak, crossing))
}

/// Per flow, the frames counted by (points that saw them, points outside whose span they were)
/// as one run counts them: a point that captured in an earlier report was capturing before a
/// frame its own report saw it start after; one that captured in a later report was after.
fn sightings(
    sections: &[Section],
    maps: &[Vec<usize>],
    points: &[Global],
) -> Result<BTreeMap<FlowKey, Vec<Sighted>>, String> {
    let mut all: BTreeMap<FlowKey, Vec<Sighted>> = BTreeMap::new();
    for (k, ((v, e), map)) in sections.iter().zip(maps).enumerate() {
        let local = (1u64 << v.points.len()) - 1;
        let here = remap(local, map);
        // Points of other reports only: outside this one's frames unless they captured on both sides.
        let absent = points
            .iter()
            .enumerate()
            .filter(|(g, p)| here & bit(*g as u16) == 0 && !(p.first < k && p.last > k))
            .fold(0, |m, (g, _)| m | bit(g as u16));
        let earlier = points.iter().enumerate().filter(|(_, p)| p.first < k).fold(0, |m, (g, _)| m | bit(g as u16));
        let later = points.iter().enumerate().filter(|(_, p)| p.last > k).fold(0, |m, (g, _)| m | bit(g as u16));
        for f in &e.flows {
            let key = flow_ref_key(&f.flow).ok_or("a flow's address does not parse")?;
            let sets = all.entry(key).or_default();
            for &[seen, before, after, n] in &f.sets {
                let before = remap(before & local, map) & !earlier;
                let after = remap(after & local, map) & !later;
                let set = (remap(seen & local, map), before | after | absent);
                match sets.iter_mut().find(|s| (s.0, s.1) == set) {
                    Some(s) => s.2 += n,
                    None => sets.push((set.0, set.1, n)),
                }
            }
        }
    }
    Ok(all)
}

/// A hop over the reports, as it adds up.
#[derive(Default)]
struct HopSum {
    matched: u64,
    ce: u64,
    flows: BTreeSet<FlowKey>,
    latency: Vec<Samples>,
    /// The series of its matched frames from one run's first mark on.
    series: Vec<MarkingSeries>,
    marks: Vec<(i64, i64, Vec<[i64; 3]>)>,
}

/// One run's hops, in its order (by the points' indices), and their findings.
fn hops(
    sections: &[Section],
    maps: &[Vec<usize>],
    points: &[Global],
    sightings: &BTreeMap<FlowKey, Vec<Sighted>>,
) -> Result<(Vec<VantageHop>, Vec<Finding>), String> {
    let mut sums: BTreeMap<(usize, usize), HopSum> = BTreeMap::new();
    let index = |name: &str| points.iter().position(|g| g.point.name == name).ok_or("a hop names no point");
    for ((v, e), _) in sections.iter().zip(maps) {
        for (h, he) in v.hops.iter().zip(&e.hops) {
            let s = sums.entry((index(&h.from)?, index(&h.to)?)).or_default();
            let marked_before = !s.series.is_empty();
            s.matched += h.frames_matched;
            s.ce += h.ce_marked;
            for f in &he.flows {
                s.flows.insert(flow_ref_key(f).ok_or("a hop's flow does not parse")?);
            }
            s.latency.push(Samples::from_edge(&he.latency));
            if marked_before {
                s.series.extend(he.before.clone());
            }
            s.series.extend(h.marking.clone());
            s.marks.push((he.marks_base, he.marks_min, he.marks.clone()));
        }
    }
    let settings = (sections[0].1.link_speed_bps, sections[0].1.kmin_min_bytes);
    let (mut out, mut findings) = (Vec::new(), Vec::new());
    for ((from, to), s) in sums {
        let (fname, tname) = (points[from].point.name.clone(), points[to].point.name.clone());
        let flows = sightings.iter().map(|(k, sets)| (*k, sets.as_slice()));
        let (outside, worst) = losses(flows, from as u16, to as u16);
        let missing = worst.iter().map(|(_, n)| n).sum();
        findings.extend(loss_between(&fname, &tname, missing, &worst, outside));
        let marking = match s.series.as_slice() {
            [] => None,
            list => {
                let (joined, nested) = super::marking_merge::join(&list.iter().collect::<Vec<_>>());
                if !nested {
                    return Err("a hop's marking series do not nest (another --rate-window)".into());
                }
                Some(joined)
            }
        };
        let named: Vec<FlowRef> = s.flows.iter().take(FLOWS_NAMED).map(flow_ref).collect();
        let fit = (s.ce > 0).then(|| LatencyMarks::merged(&s.marks).fit()).flatten();
        let profile = fit.map(|fit| marking_profile(fit, settings, (&fname, &tname), named, &mut findings));
        out.push(VantageHop {
            from: fname,
            to: tname,
            flows: s.flows.len() as u64,
            frames_matched: s.matched,
            frames_missing: missing,
            frames_outside_span: outside,
            ce_marked: s.ce,
            marking,
            latency_ns: Samples::merged(&s.latency).percentiles().unwrap_or_default(),
            marking_profile: profile,
        });
    }
    Ok((out, findings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::vantage::Vantage as Matching;
    use crate::analyses::vantage::tests::copy;
    use crate::frames::FrameMeta;
    use analyzer_common::PacketSummary;

    const WINDOW: u64 = 2_500;
    const SETTINGS: (u64, u64) = (100_000_000_000, 37_500);

    /// Thirty frames 1 µs apart seen at switch 1, at switch 2 300 ns later (but 5 and 15, lost
    /// between), CE-marked there from 12 on every third; switch 3, 600 ns after 1, sees the
    /// even ones below 10 and from 20 on. Four more frames, 100 to 103, burst at 9.7 µs and
    /// reach switch 2 before 10 µs.
    fn frames() -> Vec<(u64, PacketSummary)> {
        let mut out = Vec::new();
        for n in 0..30u32 {
            let t = 1_000 * n as u64;
            let ecn = if n >= 12 && n % 3 == 0 { 3 } else { 2 };
            out.push((t, copy(n, 1, 2)));
            if n != 5 && n != 15 {
                out.push((t + 300, copy(n, 2, ecn)));
                if n % 2 == 0 && !(10..20).contains(&n) {
                    out.push((t + 600, copy(n, 3, ecn)));
                }
            }
            if n == 9 {
                out.extend((100..104u32).map(|p| (9_700 + 10 * (p as u64 - 100), copy(p, 1, 2))));
                out.extend((100..104u32).map(|p| (9_800 + 10 * (p as u64 - 100), copy(p, 2, 2))));
            }
        }
        out.sort_by_key(|f| f.0);
        out
    }

    /// One run's matching of `frames` (with its edges when `edges`), as its report has it.
    fn run(frames: &[(u64, PacketSummary)], edges: bool) -> (Part, Vec<Finding>) {
        let mut v = Matching::new(WINDOW, 1_000);
        v.activate();
        if edges {
            v.keep_edges();
        }
        for (ts, s) in frames {
            v.offer(FrameMeta { ts_ns: *ts, source: 0 }, s, "cap");
            while v.due(Some(*ts)).is_some() {}
        }
        while v.due(None).is_some() {}
        let mut audit = Vec::new();
        let vantage = crate::report::assemble::vantage::of(&v, SETTINGS, &mut audit);
        let span = (frames[0].0, frames[frames.len() - 1].0);
        (Part { span, frames: frames.len() as u64, vantage }, audit)
    }

    /// The frames cut before the frames at `cuts` (indices), each part run with its edges.
    fn parts(frames: &[(u64, PacketSummary)], cuts: &[usize]) -> Vec<Part> {
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(frames.len());
        bounds.windows(2).map(|w| run(&frames[w[0]..w[1]], true).0).collect()
    }

    fn index_of(frames: &[(u64, PacketSummary)], ts: u64) -> usize {
        frames.iter().position(|f| f.0 == ts).expect("a frame at that time")
    }

    #[test]
    fn captures_cut_in_time_merge_into_one_runs_hops() {
        let all = frames();
        let (whole, audit) = run(&all, false);
        let whole = whole.vantage.expect("three points");
        // Cut before frame 10 and before frame 20, where no frame's copy is still to come.
        let parts = parts(&all, &[index_of(&all, 10_000), index_of(&all, 20_000)]);
        let m = merge(&parts, &[0, 1, 2]).expect("merged");
        assert_eq!(m.vantage.as_ref(), Some(&whole));
        assert_eq!(m.findings, audit);
        // By hand: 1 → 2 loses 5 and 15. 3 sees 10 frames (0 to 8 and 20 to 28, even): 1 → 3
        // loses the 24 others of 1's 34 but 29, after 3's last (outside), 2 → 3 the 22 others of
        // 2's 32 but 29 too; those from 10 to 19 only because 3 captured before and after,
        // where the parts alone had it absent.
        let hop = |a: &str, b: &str| whole.hops.iter().find(|h| h.from.ends_with(a) && h.to.ends_with(b)).unwrap();
        assert_eq!((hop("2.1", "2.2").frames_missing, hop("2.1", "2.2").frames_matched), (2, 32));
        assert_eq!((hop("2.1", "2.3").frames_missing, hop("2.1", "2.3").frames_outside_span), (23, 1));
        assert_eq!((hop("2.2", "2.3").frames_missing, hop("2.2", "2.3").frames_outside_span), (21, 1));
        let lost_in_parts: u64 =
            parts.iter().flat_map(|p| &p.vantage.as_ref().unwrap().hops).map(|h| h.frames_missing).sum();
        assert!(lost_in_parts < 2 + 23 + 21, "the parts alone count {lost_in_parts}");
        // The burst at the first cut: one run held more than either part did.
        let peaks: Vec<u64> = parts.iter().map(|p| p.vantage.as_ref().unwrap().peak_held).collect();
        assert!(whole.peak_held > *peaks.iter().max().unwrap(), "{} against {peaks:?}", whole.peak_held);
        // Marks at 12, 18, 21, 24 and 27 (15 lost): the series starts in the second part and
        // counts every frame matched from 12 on, 17, the third part's 20 before its own first mark too.
        assert_eq!(hop("2.1", "2.2").ce_marked, 5);
        assert_eq!(hop("2.1", "2.2").marking.as_ref().map(|m| m.frames.iter().sum::<u64>()), Some(17));
    }

    #[test]
    fn a_copy_after_a_cut_of_a_frame_held_before_it_is_said() {
        let all = frames();
        let parts = parts(&all, &[index_of(&all, 9_300)]);
        let why = merge(&parts, &[0, 1]).expect_err("a copy across the cut");
        assert!(why.starts_with("1 frames opening a report are copies"), "{why}");
    }

    #[test]
    fn reports_without_edges_or_with_another_window_are_said() {
        let all = frames();
        let cut = index_of(&all, 20_000);
        let mut p = parts(&all, &[cut]);
        let (plain, _) = run(&all[cut..], false);
        let without = [p[0].clone(), plain];
        assert!(merge(&without, &[0, 1]).unwrap_err().contains("--edges"));
        p[1].vantage.as_mut().unwrap().match_window_ns = 1;
        assert!(merge(&p, &[0, 1]).unwrap_err().contains("--match-window"));
    }
}
