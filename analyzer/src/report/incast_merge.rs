//! `merge` of the incast sections of several reports: per destination, the episodes of every
//! report joined in time. Episodes of one destination that overlap, or come closer than one
//! window (the analysis merges those within a report too), are one episode: from the first
//! start to the last end, the union of their senders, their data, marks, CNPs and pause
//! frames added. A capture split in time gives the episode that crossed the cut back whole;
//! several collectors give one episode per destination with every sender any of them saw.
//!
//! What the reports cannot give is the concurrency of the union: `peak_senders` and `peak_gbps`
//! of an episode joined from several are the largest of theirs (at least that many senders, at
//! least that rate, at one moment), and the report says so.

use std::collections::{BTreeMap, BTreeSet};

use super::rtt_stitch::{Span, in_series};
use crate::model::*;

/// A merge's incast section, the episodes it joined from several reports, those at a cut in
/// time it could not give as one run, and why not.
pub struct Merged {
    pub incast: Incast,
    pub joined: u64,
    pub cut: u64,
    pub why: Option<&'static str>,
}

/// The incast sections of reports with their spans: one run's when the reports follow each
/// other in time with their edges (`incast_stitch`), else joined per destination ([`merge`]).
pub fn merged(sections: &[Incast], spans: &[(u64, u64)], link_speed: u64) -> Merged {
    let series: Vec<Span> = spans.iter().map(|&(start_ns, end_ns)| Span { start_ns, end_ns, timeout_ns: 0 }).collect();
    let mut why = None;
    if let Some(order) = in_series(&series).filter(|_| sections.iter().any(|s| s.edge.is_some())) {
        let ordered: Vec<&Incast> = order.iter().map(|&i| &sections[i]).collect();
        match super::incast_stitch::stitch(&ordered, link_speed) {
            Ok(incast) => return Merged { incast, joined: 0, cut: 0, why: None },
            Err(w) => why = Some(w),
        }
    }
    let (mut incast, joined) = merge(&sections.iter().collect::<Vec<_>>());
    incast.edge = None;
    Merged { incast, joined, cut: at_cuts(sections, spans), why }
}

/// The incast sections joined, and how many episodes were joined from more than one.
pub fn merge(sections: &[&Incast]) -> (Incast, u64) {
    let window_ns = sections.iter().map(|s| s.window_ns).max().unwrap_or(0);
    let min_senders = sections.iter().map(|s| s.min_senders).max().unwrap_or(0);
    let mut by_dst: BTreeMap<&str, Vec<&Episode>> = BTreeMap::new();
    for e in sections.iter().flat_map(|s| &s.episodes) {
        by_dst.entry(&e.dst).or_default().push(e);
    }
    let mut joined_count = 0;
    let mut episodes = Vec::new();
    for list in by_dst.into_values() {
        for group in in_time(list, window_ns) {
            joined_count += u64::from(group.len() > 1);
            episodes.push(join(&group));
        }
    }
    episodes.sort_by(|a, b| (a.start_ns, &a.dst).cmp(&(b.start_ns, &b.dst)));
    (Incast::new(window_ns, min_senders, episodes), joined_count)
}

/// One destination's episodes in groups that touch in time (closer than `window_ns`).
fn in_time(mut list: Vec<&Episode>, window_ns: u64) -> Vec<Vec<&Episode>> {
    list.sort_by_key(|e| (e.start_ns, e.end_ns));
    let mut groups: Vec<Vec<&Episode>> = Vec::new();
    let mut end = 0u64;
    for e in list {
        match groups.last_mut() {
            Some(g) if e.start_ns < end.saturating_add(window_ns) => {
                g.push(e);
                end = end.max(e.end_ns);
            }
            _ => {
                groups.push(vec![e]);
                end = e.end_ns;
            }
        }
    }
    groups
}

/// A group of one destination's episodes as one.
fn join(group: &[&Episode]) -> Episode {
    let [first, rest @ ..] = group else { unreachable!("groups are never empty") };
    if rest.is_empty() {
        return (*first).clone();
    }
    let mut seen = BTreeSet::new();
    let senders = group.iter().flat_map(|e| &e.senders).filter(|s| seen.insert(s.as_str())).cloned().collect();
    let sum = |f: fn(&Episode) -> u64| group.iter().map(|e| f(e)).fold(0u64, u64::saturating_add);
    let peak = group.iter().max_by(|a, b| a.peak_gbps.total_cmp(&b.peak_gbps)).expect("not empty");
    Episode {
        dst: first.dst.clone(),
        start_ns: first.start_ns,
        end_ns: group.iter().map(|e| e.end_ns).max().unwrap_or(first.end_ns),
        peak_senders: group.iter().map(|e| e.peak_senders).max().unwrap_or(0),
        senders,
        bytes: sum(|e| e.bytes),
        peak_gbps: peak.peak_gbps,
        peak_link_ratio: peak.peak_link_ratio,
        ce_packets: sum(|e| e.ce_packets),
        cnp_packets: sum(|e| e.cnp_packets),
        pfc_frames: sum(|e| e.pfc_frames),
        // Each report's evidence lies in its own directory (unlinked by the merge).
        evidence: None,
    }
}

/// Episodes within a window of the end of their report (`spans[i]` is `sections[i]`'s) when
/// another report begins at or after that end, or of its start when another ended at or
/// before it: a capture cut there, whose next part counts the destination's senders afresh
/// (what it sees before they reach the minimum again is in no episode, and an episode that
/// begins just after the cut may have begun with senders of the part before).
pub fn at_cuts(sections: &[Incast], spans: &[(u64, u64)]) -> u64 {
    let continued = |end: u64| spans.iter().any(|(s, _)| *s >= end);
    let preceded = |start: u64| spans.iter().any(|(_, e)| *e <= start && start > 0);
    let mut n = 0;
    for (s, (start, end)) in sections.iter().zip(spans) {
        let w = s.window_ns;
        let at_end = |e: &&Episode| continued(*end) && e.end_ns + w >= *end;
        let at_start = |e: &&Episode| preceded(*start) && e.start_ns <= start + w;
        n += s.episodes.iter().filter(|e| at_end(e) || at_start(e)).count() as u64;
    }
    n
}

/// The note of a merge with episodes at a cut in time it could not give as one run (`why`;
/// none: the reports have no edges).
pub fn cut_note(episodes: u64, why: Option<&str>) -> Note {
    let why = why.unwrap_or("the reports have no incast edges (made without --edges)");
    Note::new(
        NoteCode::IncastCut,
        format!(
            "{episodes} incast episodes reached a cut in time between reports, not stitched as one run ({why}): \
             the part after it counts the destination's senders afresh, so its data, marks and CNPs until they \
             reach the minimum again are in no episode, and an episode it begins may have begun earlier with the \
             part before's senders (the merged episode's start, bytes, marks and CNPs may differ from one run's)"
        ),
    )
}

/// The note of a merge that joined episodes.
pub fn note(joined: u64) -> Note {
    Note::new(
        NoteCode::IncastJoined,
        format!(
            "{joined} incast episodes were joined from several reports (one destination, touching in time): \
             their senders are the union, their bytes, marks, CNPs and pause frames the sums, and their \
             peak senders and peak rate the largest any report saw: a lower bound, since reports do not \
             carry per-packet times to count the union's senders at one moment"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(dst: &str, start: u64, end: u64, senders: &[&str], bytes: u64, peak: u32) -> Episode {
        Episode {
            dst: dst.into(),
            start_ns: start,
            end_ns: end,
            peak_senders: peak,
            senders: senders.iter().map(|s| s.to_string()).collect(),
            bytes,
            peak_gbps: peak as f64,
            peak_link_ratio: peak as f64 / 100.0,
            ce_packets: 1,
            cnp_packets: 2,
            pfc_frames: 3,
            evidence: None,
        }
    }

    fn section(episodes: Vec<Episode>) -> Incast {
        Incast::new(10, 3, episodes)
    }

    #[test]
    fn episodes_of_one_destination_touching_in_time_are_one() {
        let a = section(vec![ep("d", 100, 200, &["a", "b", "c"], 1000, 3), ep("e", 100, 150, &["x", "y", "z"], 5, 3)]);
        // Starts within one window (10 ns) of the first's end: the same episode; the third is
        // 11 ns past the joined end: another.
        let b = section(vec![ep("d", 205, 300, &["c", "d", "e"], 500, 4), ep("d", 311, 400, &["a", "b", "c"], 7, 3)]);
        let (m, joined) = merge(&[&a, &b]);
        assert_eq!(joined, 1);
        let got: Vec<_> =
            m.episodes.iter().map(|e| (e.dst.as_str(), e.start_ns, e.end_ns, e.bytes, e.peak_senders)).collect();
        assert_eq!(got, [("d", 100, 300, 1500, 4), ("e", 100, 150, 5, 3), ("d", 311, 400, 7, 3)]);
        assert_eq!(m.episodes[0].senders, ["a", "b", "c", "d", "e"]);
        assert_eq!((m.episodes[0].ce_packets, m.episodes[0].cnp_packets, m.episodes[0].pfc_frames), (2, 4, 6));
        assert_eq!(m.episodes[0].peak_gbps, 4.0);
    }

    #[test]
    fn an_episode_inside_a_longer_one_joins_it_and_keeps_the_end() {
        let a = section(vec![ep("d", 0, 1000, &["a", "b", "c"], 10, 3)]);
        let b = section(vec![ep("d", 100, 200, &["d", "e", "f"], 20, 3), ep("d", 900, 1005, &["g"], 1, 3)]);
        let (m, joined) = merge(&[&a, &b]);
        assert_eq!(joined, 1);
        assert_eq!(m.episodes.len(), 1);
        assert_eq!((m.episodes[0].start_ns, m.episodes[0].end_ns, m.episodes[0].bytes), (0, 1005, 31));
        assert_eq!(m.episodes[0].senders.len(), 7);
    }

    /// Reports in series without their edges: joined as before, and the episodes at the cut
    /// said with why they are not one run's; reports side by side (collectors) are joined.
    #[test]
    fn reports_in_series_without_edges_say_why() {
        let mut a = section(vec![ep("d", 100, 195, &["a", "b", "c"], 1000, 3)]);
        let b = section(vec![ep("d", 204, 300, &["c", "d", "e"], 500, 4)]);
        let m = merged(&[b.clone(), a.clone()], &[(200, 300), (0, 200)], 1);
        assert_eq!((m.joined, m.cut, m.incast.episodes.len(), m.why), (1, 2, 1, None));
        assert!(cut_note(m.cut, m.why).message.contains("not stitched as one run (the reports have no incast edges"));
        // One report with an edge cut at its bound, one without: the first reason.
        a.edge = Some(IncastEdge { complete: false, ..Default::default() });
        let m = merged(&[b.clone(), a.clone()], &[(200, 300), (0, 200)], 1);
        assert_eq!((m.joined, m.cut, m.why), (1, 2, Some("a report's first packets were more than its edge holds")));
        let side = merged(&[a, b], &[(0, 300), (0, 300)], 1);
        assert_eq!((side.joined, side.cut, side.why), (1, 0, None));
    }

    #[test]
    fn one_report_is_kept_as_it_is() {
        let a = section(vec![ep("d", 0, 5, &["a"], 1, 3), ep("d", 12, 20, &["b"], 2, 3)]);
        let (m, joined) = merge(&[&a]);
        assert_eq!(joined, 1, "within one window: joined (the analysis would have)");
        let b = section(vec![ep("d", 0, 5, &["a"], 1, 3), ep("d", 16, 20, &["b"], 2, 3)]);
        let (m2, joined2) = merge(&[&b]);
        assert_eq!((joined2, m2), (0, b.clone()));
        assert_eq!(m.episodes.len(), 1);
    }
}
