//! `merge` of the messages sections of several reports: the completion-time histograms per
//! size class added (percentiles within the histogram's 0.5 %), counts and tail causes summed,
//! the slowest messages and the flows' and pairs' lists joined, rings kept per report. What
//! needs the messages themselves (goodput and slowdown percentiles of a class several reports
//! fill, the tail thresholds) is each report's: the merged report says so
//! (`messages_not_merged`). The steadiness of reports in series with their edges is stitched as
//! one run's ([`super::steady_stitch`]).

use std::collections::BTreeMap;

use super::assemble::messages as assemble;
use super::messages_stitch::Whole;
use crate::analyses::messages::kept::Kind;
use crate::analyses::stats::Samples;
use crate::model::*;

fn percentiles(buckets: &BTreeMap<u64, u64>, min: u64, max: u64) -> Percentiles {
    let b: Vec<(u32, u64)> = buckets.iter().map(|(k, v)| (*k as u32, *v)).collect();
    Samples::from_buckets(&b, min, max).percentiles().unwrap_or(Percentiles { exact: true, ..Default::default() })
}

#[derive(Default)]
struct Class {
    first: Option<MessageClass>,
    reports: usize,
    messages: u64,
    bytes: u64,
    min: u64,
    max: u64,
    buckets: BTreeMap<u64, u64>,
}

impl Class {
    fn add(&mut self, c: &MessageClass) {
        if c.stats.messages == 0 {
            self.first.get_or_insert_with(|| c.clone());
            return;
        }
        self.min = if self.messages == 0 { c.stats.mct_ns.min } else { self.min.min(c.stats.mct_ns.min) };
        self.max = self.max.max(c.stats.mct_ns.max);
        self.messages += c.stats.messages;
        self.bytes += c.stats.bytes;
        self.reports += 1;
        for [b, n] in &c.histogram {
            *self.buckets.entry(*b).or_default() += n;
        }
        if self.first.as_ref().is_none_or(|f| f.stats.messages == 0) {
            self.first = Some(c.clone());
        }
    }

    fn merged(self) -> Option<MessageClass> {
        let mut c = self.first?;
        if self.reports > 1 {
            c.stats.messages = self.messages;
            c.stats.bytes = self.bytes;
            c.stats.mct_ns = percentiles(&self.buckets, self.min, self.max);
            c.histogram = self.buckets.iter().map(|(b, n)| [*b, *n]).collect();
            (c.stats.goodput_bps_p50, c.stats.slowdown_p50, c.stats.slowdown_p99) = (None, None, None);
        }
        Some(c)
    }
}

/// What of a merged section stayed each report's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Partly {
    /// The messages were joined across cuts ([`super::messages_stitch`]) …
    pub joined: bool,
    /// … but for this many flows, whose messages at a cut the reports do not tell.
    pub untold: u64,
    /// Whose the tail (thresholds, causes, slowest messages) is ([`super::tail_merge`]).
    pub tail: TailOf,
    /// Reports had UC transfers: a UC message sent across a cut is in none of them, and the
    /// transfer times of several are not merged.
    pub uc: bool,
    /// Flows whose steadiness across a cut may not be one run's: requests sent again just
    /// after it (counted as new payload there), a first frame the stitch could not place.
    pub steady: u64,
}

/// Whose a merged tail is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TailOf {
    /// One run's (the joined messages laid over the merged context), or there is none.
    #[default]
    Run,
    /// Each report's, its causes summed: the messages were not joined (or not yet laid over).
    Reports,
    /// Each report's, for this reason: what one run laid the joined messages over is not known.
    Because(&'static str),
}

/// The merged section (none when no report has one), and what stayed each report's (none:
/// nothing) (`sections`: each report's span and section; `whole`: their messages joined across
/// cuts, as one run gives them, [`super::messages_stitch`]).
pub fn merge(
    sections: &[(u64, u64, Messages)],
    whole: Option<Whole>,
    fixes: &super::steady_stitch::Fixes,
) -> Option<(Messages, Option<Partly>)> {
    let all: Vec<&Messages> = sections.iter().map(|(_, _, m)| m).collect();
    let first = *all.first()?;
    if all.len() == 1 {
        return Some((Messages { edge: None, ..first.clone() }, None));
    }
    let stitched = super::uc_stitch::stitch(sections);
    let (uc_times, uc) = match &stitched {
        Some(u) => (u.times, false),
        None => uc_transfers(sections),
    };
    let mut classes: BTreeMap<String, Class> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut m = first.clone();
    for r in &all[1..] {
        add_counts(&mut m, r);
    }
    for r in &all {
        for c in &r.classes {
            if !classes.contains_key(&c.name) {
                order.push(c.name.clone());
            }
            classes.entry(c.name.clone()).or_default().add(c);
        }
    }
    let mut total = Class::default();
    for c in all.iter().flat_map(|r| r.classes.iter()) {
        total.add(c);
    }
    m.mct_ns = percentiles(&total.buckets, total.min, total.max);
    m.classes = order.iter().filter_map(|n| classes.remove(n).and_then(Class::merged)).collect();
    m.steadiness.overall = None;
    m.transfers.uc_transfer_ns = uc_times;
    if let Some(u) = stitched {
        let t = &mut m.transfers;
        (t.uc_messages, t.uc_bytes, t.uc_partial, t.uc_open) = (u.messages, u.bytes, u.partial, u.open);
    }
    m.tail = tail(&all);
    // Reports in series with their edges: one run's steadiness (else each report's).
    let spans: Vec<(u64, u64, &Messages)> = sections.iter().map(|(s, e, m)| (*s, *e, m)).collect();
    let mut doubts = 0;
    let none = BTreeMap::new();
    let first_done = whole.as_ref().map_or(&none, |w| &w.first_done);
    if let Some((steadiness, unplaced)) = super::steady_stitch::stitch(&spans, fixes, first_done) {
        m.steadiness = steadiness;
        doubts = unplaced;
    }
    m.edge = None;
    m.flows.sort_by(|a, b| a.flow.cmp(&b.flow));
    m.pairs.sort_by(|a, b| (&a.src, &a.dst).cmp(&(&b.src, &b.dst)));
    let tail = all.iter().any(|r| r.tail.examined > 0 || r.tail.messages > 0 || !r.tail.thresholds.is_empty());
    let Some(w) = whole else {
        let tail = if tail { TailOf::Reports } else { TailOf::Run };
        return Some((m, Some(Partly { joined: false, untold: 0, tail, uc, steady: doubts })));
    };
    // One run has a tail threshold for every class with a completion, which the parts' tails
    // may not (a part whose messages all completed in the next has none): the merge explains
    // the joined messages' tail again, or says why not ([`super::tail_merge`]).
    let tail = if tail || !w.all.is_empty() { TailOf::Reports } else { TailOf::Run };
    let partly = Partly { joined: true, untold: w.untold, tail, uc, steady: doubts + w.resent.len() as u64 };
    set_whole(&mut m, w);
    Some((m, partly.any().then_some(partly)))
}

/// Adds a later report's counts and rows to the merge's (what two reports in series sum to).
fn add_counts(m: &mut Messages, r: &Messages) {
    m.completed += r.completed;
    for (k, n) in &r.by_kind {
        *m.by_kind.entry(k.clone()).or_default() += n;
    }
    m.pending += r.pending;
    m.partial += r.partial;
    m.abandoned += r.abandoned;
    m.in_flight_evicted += r.in_flight_evicted;
    m.flows.extend(r.flows.iter().cloned());
    m.pairs.extend(r.pairs.iter().cloned());
    m.transfers.uc_messages += r.transfers.uc_messages;
    m.transfers.uc_bytes += r.transfers.uc_bytes;
    m.transfers.ud_messages += r.transfers.ud_messages;
    m.transfers.uc_partial += r.transfers.uc_partial;
    // Being sent at the end: the last report's, and (said, `uc`) an earlier one's that the
    // next did not continue.
    m.transfers.uc_open += r.transfers.uc_open;
    m.transfers.ud_bytes += r.transfers.ud_bytes;
    m.steadiness.flows.extend(r.steadiness.flows.iter().cloned());
    m.steadiness.pairs.extend(r.steadiness.pairs.iter().cloned());
    m.rings.rings.extend(r.rings.rings.iter().cloned());
    m.rings.other_groups += r.rings.other_groups;
}

/// The merged UC transfer times (the one report's with UC messages; several reports carry
/// percentiles, not merged), and whether the transfers may not be one run's: a UC message sent
/// across a cut is in neither report (being sent at the end of one, `uc_open`; its frames without
/// their FIRST left out by the next), nor are its bytes and time.
fn uc_transfers(sections: &[(u64, u64, Messages)]) -> (Percentiles, bool) {
    let with_uc: Vec<&Messages> = sections.iter().map(|(_, _, m)| m).filter(|r| r.transfers.uc_messages > 0).collect();
    let last = sections.iter().enumerate().max_by_key(|(_, (s, e, _))| (*e, *s)).map(|(i, _)| i);
    let open_at_cut = sections.iter().enumerate().any(|(i, (_, _, m))| Some(i) != last && m.transfers.uc_open > 0);
    let times = match with_uc.as_slice() {
        [one] => one.transfers.uc_transfer_ns,
        _ => Percentiles { exact: true, ..Default::default() },
    };
    (times, with_uc.len() > 1 || open_at_cut)
}

/// The numbers of messages joined across cuts: counts, distributions, flows, pairs, rings.
fn set_whole(m: &mut Messages, w: Whole) {
    m.completed = w.all.len();
    m.by_kind = Kind::ALL.iter().map(|k| (k.name().to_string(), w.by_kind[*k as usize])).collect();
    (m.pending, m.partial) = (w.pending, w.partial);
    m.abandoned += w.abandoned;
    m.mct_ns = assemble::pct(&w.all);
    m.classes = assemble::classes_of(&w.bounds, &w.classes);
    m.flows = w
        .flows
        .iter()
        .map(|(k, d, pending)| MessageFlow { flow: flow_ref(k), pending: *pending, stats: assemble::stats(d) })
        .collect();
    m.rings = assemble::rings_over(w.pairs.iter().map(|(s, d, dist, _)| (s, d, dist)));
    m.pairs = w
        .pairs
        .iter()
        .map(|(s, d, dist, rtt)| MessagePair {
            src: assemble::addr(s),
            dst: assemble::addr(d),
            min_rtt_ns: *rtt,
            stats: assemble::stats(dist),
        })
        .collect();
}

fn tail(all: &[&Messages]) -> Tail {
    let mut t = Tail::default();
    let mut causes: BTreeMap<String, TailCause> = BTreeMap::new();
    for r in all {
        t.thresholds.extend(r.tail.thresholds.iter().cloned());
        t.messages += r.tail.messages;
        t.examined += r.tail.examined;
        t.hop_latencies_unkept += r.tail.hop_latencies_unkept;
        t.worst.extend(r.tail.worst.iter().cloned());
        for c in &r.tail.causes {
            let e =
                causes.entry(c.cause.clone()).or_insert_with(|| TailCause { messages: 0, overlap_ns: 0, ..c.clone() });
            e.messages += c.messages;
            e.overlap_ns += c.overlap_ns;
        }
    }
    t.worst.sort_by_key(|w| std::cmp::Reverse(w.mct_ns));
    t.worst.truncate(MAX_WORST);
    t.causes = causes
        .into_values()
        .map(|mut c| {
            c.share = c.messages as f64 / t.examined.max(1) as f64;
            c
        })
        .collect();
    t.causes.sort_by(|a, b| b.messages.cmp(&a.messages).then(a.cause.cmp(&b.cause)));
    t
}

impl Partly {
    /// Whether anything stayed each report's.
    pub fn any(&self) -> bool {
        self.untold > 0 || self.tail != TailOf::Run || self.uc || self.steady > 0
    }
}

/// The note of a merge that kept parts per report.
pub fn note(p: Partly) -> Note {
    let mut parts = Vec::new();
    if p.joined {
        parts.push(
            "messages: the reports' messages are joined across their cuts (a message sent before a cut and \
             completed after it counts once, with its whole completion time), and counts, completion times, \
             goodput, slowdown, flows, pairs and rings are one run's"
                .to_string(),
        );
        if p.untold > 0 {
            parts.push(format!(
                "but for {} flow(s) whose messages at a cut the reports do not tell (a request repeated after the \
                 cut within a longer message, a message being sent that the next report does not continue, ACKs \
                 not all listed, a READ whose span is not known: theirs stay as each report counted them, pending \
                 in one and partial in the next; or the RTT one run had when a message held at a cut completed \
                 after it, when the request was sent again: its slowdown is left out)",
                p.untold
            ));
        }
    } else {
        parts.push(
            "messages: completion-time percentiles are combined from the reports' histograms (within 0.5 %) and \
             counts summed; the goodput and slowdown percentiles of a size class several reports fill and the \
             rings are each report's, and a message in flight at a cut is pending in one report and partial in \
             the next (reports in series made with --edges join them)"
                .to_string(),
        );
    }
    if p.uc {
        parts.push(
            "the UC transfers are each report's: a UC message being sent at the end of a report (transfers.uc_open) \
             is in neither report if it was completed after a cut (the one after it counts it in uc_partial), and the \
             transfer times of several reports are left out"
                .to_string(),
        );
    }
    let each = "the tail (thresholds, causes and slowest messages) is each report's, its causes summed";
    match p.tail {
        TailOf::Reports => parts.push(each.to_string()),
        TailOf::Because(why) => parts.push(format!("{each}: {why}")),
        TailOf::Run if p.joined && p.untold > 0 => parts.push(
            "the tail is the joined messages' laid over the merged pauses, rate cuts and incast episodes: one \
             run's but for those flows' messages"
                .into(),
        ),
        TailOf::Run if p.joined => parts.push(
            "the tail is one run's (the joined messages laid over the merged pauses, rate cuts and incast episodes)"
                .into(),
        ),
        TailOf::Run => {}
    }
    if p.joined && p.steady > 0 {
        parts.push(format!(
            "the steadiness of {} flow(s) at a cut may not be one run's: requests sent again just after the cut \
             (new payload in the report after it) that the replay of the edges could not tell or place (a window \
             inside the report past the 16 full windows its edge lists), or a first frame it could not place",
            p.steady
        ));
    }
    parts.push(
        "the steadiness is one run's for reports in series made with --edges (PSNs sent again just after a cut \
         replayed: no new payload; but for those in a window inside the report after it past the 16 full \
         windows its edge lists, and a flow's first frame after a cut placed only by its window), else each \
         report's"
            .to_string(),
    );
    Note::new(NoteCode::MessagesNotMerged, parts.join("; "))
}
