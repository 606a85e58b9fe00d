//! RTT in `merge`: percentiles do not add, samples do. Reports made with `--edges` carry each
//! request flow's samples (`flows[].edge.rtt`), so a flow seen in several reports, and the
//! whole report's `rtt_ns`, get the percentiles one run over every part would give (exact while
//! the samples are). Without edges a flow's percentiles cannot be combined (`rtt_not_merged`).
//!
//! A cut in time also separates requests from their ACKs: a request still waiting at the end of
//! one part is answered in the next, where its ACK finds no request (`unpaired_acks`).
//! [`super::rtt_stitch`] pairs them again from the edges; what it cannot pair the merge counts
//! ([`Cuts`]) and says (`rtt_not_stitched`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::psn_stitch::Part;
use super::rtt_stitch::{Fix, Stitched};
use crate::analyses::stats::Samples;
use crate::model::{FlowRtt, Note, NoteCode, Percentiles, Report, RttHistogram, RttSummary};

/// A flow's RTT over its parts: `None` when a part has no edge (its samples are not known),
/// else the flow's RTT as one run would report it (itself `None` when it had no requests with
/// AckReq), its timeouts and pending requests summed.
pub fn flow_rtt(parts: &[Part], fix: Option<&Fix>) -> Option<Option<FlowRtt>> {
    let samples: Vec<Samples> = parts.iter().map(|p| samples_of(p, fix)).collect::<Option<_>>()?;
    let mut merged = Samples::merged(&samples);
    let timeouts: u64 = parts.iter().filter_map(|p| p.rtt).map(|r| r.timeouts).sum();
    let pending: u64 = parts.iter().filter_map(|p| p.rtt).map(|r| r.pending).sum();
    let Some(fix) = fix else { return Some(FlowRtt::of(merged.percentiles(), timeouts, pending)) };
    fix.extra.iter().for_each(|v| merged.push(*v));
    let (timeouts, pending) = (shift(timeouts, fix.timeouts), shift(pending, fix.pending));
    Some(FlowRtt::of(merged.percentiles(), timeouts, pending))
}

/// `n` moved by `by` (a count a stitch decided otherwise).
fn shift(n: u64, by: i64) -> u64 {
    n.saturating_add_signed(by)
}

/// `rtt_ns`'s counts as one run over the stitched reports: requests decided across cuts moved
/// from pending or timeouts, ACKs paired across cuts no longer unpaired.
pub fn apply_totals(rtt: &mut RttSummary, st: &Stitched) {
    for fix in st.flows.values() {
        rtt.timeouts = shift(rtt.timeouts, fix.timeouts);
        rtt.pending = shift(rtt.pending, fix.pending);
    }
    rtt.unpaired_acks = rtt.unpaired_acks.saturating_sub(st.unpaired);
    rtt.ambiguous_acks = rtt.ambiguous_acks.saturating_sub(st.ambiguous);
}

/// Every sample of every part, when each carries its edge (less those its flow's fix takes
/// out; the fix's own samples are added by the caller).
pub fn overall<'a>(parts: impl Iterator<Item = (&'a Part, Option<&'a Fix>)>) -> Option<Samples> {
    let samples: Vec<Samples> = parts.map(|(p, fix)| samples_of(p, fix)).collect::<Option<_>>()?;
    Some(Samples::merged(&samples))
}

/// `rtt_ns`'s percentiles and histogram from every sample (a run's, or a merge's).
pub fn set_percentiles(rtt: &mut RttSummary, all: &Samples) {
    let buckets = all.buckets();
    rtt.histogram = (!buckets.is_empty()).then(|| RttHistogram {
        growth: crate::analyses::stats::GROWTH,
        relative_error: crate::analyses::stats::RELATIVE_ERROR,
        buckets: buckets.into_iter().map(|(b, c)| [b as u64, c]).collect(),
    });
    rtt.percentiles = all.percentiles().unwrap_or(Percentiles { exact: true, ..Default::default() });
}

/// A part's samples, less those `fix` takes out of it (listed: the stitch takes samples out of
/// a part only where its edge lists every one).
fn samples_of(p: &Part, fix: Option<&Fix>) -> Option<Samples> {
    let edge = p.edge.as_ref()?;
    let Some(rtt) = edge.rtt.as_ref() else { return Some(Samples::default()) };
    let mut out: Vec<u64> =
        fix.map(|f| f.removed.iter().filter(|(r, _)| *r == p.report).map(|(_, v)| *v).collect()).unwrap_or_default();
    if out.is_empty() {
        return Some(Samples::from_edge(rtt));
    }
    let mut kept = rtt.clone();
    kept.samples.retain(|v| match out.iter().position(|o| o == v) {
        Some(i) => {
            out.swap_remove(i);
            false
        }
        None => true,
    });
    Some(Samples::from_edge(&kept))
}

/// Requests waiting for their ACK at the end of a report that another of the same point
/// follows, and ACKs without a request in the reports after a cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cuts {
    pub waiting: u64,
    pub unpaired: u64,
}

impl Cuts {
    /// The cuts among `reports`: those of one point (the same labels) ordered by time, each
    /// report that starts where the one before ended (reports that overlap are other points'
    /// views, not cuts).
    pub fn of(reports: &[(PathBuf, Report)]) -> Cuts {
        let mut points: BTreeMap<Vec<&str>, Vec<&Report>> = BTreeMap::new();
        for (_, r) in reports {
            let mut labels: Vec<&str> = r.capture.sources.iter().map(|s| s.label.as_str()).collect();
            labels.sort_unstable();
            labels.dedup();
            points.entry(labels).or_default().push(r);
        }
        let mut cuts = Cuts::default();
        for mut series in points.into_values() {
            series.sort_by_key(|r| (r.capture.start_ns, r.capture.end_ns));
            for w in series.windows(2) {
                let (before, after) = (&w[0].rtt_ns, &w[1].rtt_ns);
                if w[1].capture.start_ns >= w[0].capture.end_ns {
                    cuts.waiting += before.pending;
                    cuts.unpaired += after.unpaired_acks + after.ambiguous_acks;
                }
            }
        }
        cuts
    }

    /// What is left once the stitch paired requests and ACKs across cuts.
    pub fn less(self, st: &Stitched) -> Cuts {
        Cuts {
            waiting: self.waiting.saturating_sub(st.waiting),
            unpaired: self.unpaired.saturating_sub(st.unpaired + st.ambiguous + st.unpaired_kept),
        }
    }

    /// The note when a cut separated requests from ACKs.
    pub fn note(self) -> Option<Note> {
        (self != Cuts::default()).then(|| {
            Note::new(
                NoteCode::RttNotStitched,
                format!(
                    "{} requests were waiting for their ACK at the end of a report that another continues, and {} \
                     ACKs in the reports after a cut found no request (or several) to pair with, that the reports' \
                     edges could not pair again (no --edges, a request repeated after the cut, an ACK flow paired \
                     ambiguously): their samples are in neither report (each counts them pending or unpaired); one \
                     run over the whole capture has them",
                    self.waiting, self.unpaired
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edge::EdgeRtt;

    fn part(samples: &[u64], timeouts: u64) -> Part {
        let edge = crate::engine::edges::edge(None, Default::default());
        let rtt = (!samples.is_empty()).then(|| EdgeRtt {
            samples: samples.to_vec(),
            min: *samples.iter().min().unwrap(),
            max: *samples.iter().max().unwrap(),
            ..Default::default()
        });
        let flow = FlowRtt { timeouts, ..Default::default() };
        Part {
            start_ns: 0,
            end_ns: 0,
            edge: Some(crate::model::edge::FlowEdge { rtt, ..edge }),
            rtt: Some(flow),
            ..Part::default()
        }
    }

    #[test]
    fn a_flow_in_parts_gets_the_percentiles_of_all_its_samples() {
        let parts = [part(&[10, 40], 1), part(&[], 0), part(&[20, 30, 50], 2)];
        let r = flow_rtt(&parts, None).unwrap().unwrap();
        let p = r.percentiles;
        assert_eq!((p.samples, p.min, p.p50, p.p90, p.max, p.exact, r.timeouts), (5, 10, 30, 50, 50, true, 3));
        let no_edge = Part { edge: None, ..part(&[10], 0) };
        assert_eq!(flow_rtt(&[parts[0].clone(), no_edge], None), None, "samples of a part unknown");
        assert_eq!(flow_rtt(&[part(&[], 0), part(&[], 0)], None), Some(None), "no requests with AckReq");
    }
}
