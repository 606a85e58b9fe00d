//! `merge` of the load-balancing sections. The uplinks are the labels the merged ECMP observed,
//! as a run takes them. The request flows (two requests or more) and their
//! requests are counted over the merged flows, a flow seen by several reports once with its
//! requests added (summing the sections counted it in each, and missed one with a request in
//! each of two). On uplinks a flow's paths are the uplinks among the labels of all its reports.
//! Late arrivals are added per flow and over all; a flow's median displacement is kept where
//! its reports agree (the lower median of a union of sets with one lower median is that
//! median). A flow across cuts in time whose every part has its edge is counted from its parts'
//! edges (`flows[].edge.late`: its late arrivals by displacement, listed as sprayed there or
//! not), with the replay's correction where a cut changed them ([`super::lb_stitch`]): its
//! median one run's. Where a sprayed flow was not listed by every report that saw it (past a
//! report's listed flows, or spread there by nothing) and the edges do not hold it, or its
//! reports' medians differ, or a request after a cut in time may have arrived late into a gap
//! one run had open at the cut and the replay cannot tell, the merge says so
//! (`load_balancing_not_merged`).

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::psn::{aeth, count};

use super::lb_stitch::Late;
use super::psn_stitch::Part;
use super::rtt_stitch::FlowId;
use crate::analyses::messages::reorder::p50_max;
use crate::model::*;

/// Flows whose late arrivals a cut changed ([`super::lb_stitch`]): each one's late arrivals
/// by displacement over all its parts as one run counts them (its parts' edges, corrected), with
/// the PSN-sequence NAKs its receiver sent back; the displacements one run adds to and takes
/// from the parts' density; and whether every correction found what it takes away.
#[derive(Debug, Default)]
pub struct Fixed {
    flows: BTreeMap<FlowRef, (BTreeMap<u32, u64>, u64)>,
    add: Vec<u32>,
    sub: Vec<u32>,
    whole: bool,
}

impl Fixed {
    pub fn of(late: &BTreeMap<FlowId, Late>, parts: &BTreeMap<FlowId, Vec<Part>>, flows: &[Flow]) -> Fixed {
        let back = super::audit_merge::Back::of(flows, parts);
        let mut fixed = Fixed { whole: true, ..Fixed::default() };
        for f in flows {
            let id = super::rtt_stitch::id_of(f);
            let Some(ps) = parts.get(&id) else { continue };
            // A flow across cuts whose every part has its edge: its late arrivals are all in the
            // edges, listed by its reports or not (a part where it was not spread lists none).
            let across = ps.len() > 1 && ps.iter().all(|p| p.edge.is_some()) && super::psn_stitch::follow(ps);
            let l = match late.get(&id) {
                Some(l) => l,
                None if across => &Late::default(),
                None => continue,
            };
            let mut density: BTreeMap<u32, u64> = BTreeMap::new();
            for [d, n] in ps.iter().filter_map(|p| p.edge.as_ref()).flat_map(|e| &e.late) {
                *density.entry(*d as u32).or_default() += n;
            }
            fixed.whole &= take(&mut density, &l.sub);
            l.add.iter().for_each(|d| *density.entry(*d).or_default() += 1);
            fixed.add.extend(&l.add);
            fixed.sub.extend(&l.sub);
            fixed.flows.insert(f.flow_ref(), (density, back.get(f, aeth::PSN_SEQUENCE_ERROR)));
        }
        fixed
    }
}

/// `density` less one arrival at each of `sub`; false when one is not there.
fn take(density: &mut BTreeMap<u32, u64>, sub: &[u32]) -> bool {
    let mut all = true;
    for d in sub {
        match density.get_mut(d) {
            Some(n) if *n > 0 => {
                *n -= 1;
                if *n == 0 {
                    density.remove(d);
                }
            }
            _ => all = false,
        }
    }
    all
}

/// The merged section (none without request flows), and whether it is one run's. `flows` and
/// `ecmp` are the merged report's (the uplinks are the labels ECMP observed, as a run takes
/// them); `seen` tells how many reports saw a flow.
pub fn merge(
    sections: &[&LoadBalancing],
    flows: &[Flow],
    ecmp: &Ecmp,
    seen: &dyn Fn(&Flow) -> usize,
    fixed: &Fixed,
) -> Option<(LoadBalancing, bool)> {
    let uplinks: BTreeSet<&str> = ecmp.observed.iter().flat_map(|o| o.by_label.keys().map(String::as_str)).collect();
    let basis = if uplinks.len() >= 2 { LbBasis::Uplinks } else { LbBasis::Reordering };
    let mut density: BTreeMap<u32, u64> = BTreeMap::new();
    let mut whole = fixed.whole && sections.iter().all(|s| s.sprayed_omitted == 0);
    let mut listed: BTreeMap<&FlowRef, (SprayedFlow, usize)> = BTreeMap::new();
    for s in sections {
        for b in &s.reorder.density {
            *density.entry(b.displacement).or_default() += b.packets;
        }
        for f in &s.sprayed {
            let fresh = || SprayedFlow { reordered: 0, displacement_max: None, psn_sequence_naks: 0, ..f.clone() };
            let (m, n) = listed.entry(&f.flow).or_insert_with(|| (fresh(), 0));
            *n += 1;
            whole &= join(m, f);
        }
    }
    // Late arrivals a cut changed, as one run counts them.
    whole &= take(&mut density, &fixed.sub);
    fixed.add.iter().for_each(|d| *density.entry(*d).or_default() += 1);
    let (mut total, mut packets) = (0, 0);
    let mut sprayed: Vec<SprayedFlow> = Vec::new();
    for f in flows.iter().filter(|f| f.psn.sequence[count::REQUESTS] >= 2) {
        let requests = f.psn.sequence[count::REQUESTS];
        (total, packets) = (total + 1, packets + requests);
        let flow = f.flow_ref();
        let paths = (basis == LbBasis::Uplinks)
            .then(|| f.labels.iter().filter(|l| uplinks.contains(l.as_str())).count() as u32);
        let (entry, told) = entry_of(&flow, &mut listed, fixed, seen(f));
        let spread = paths.map_or_else(|| entry.as_ref().is_some_and(|e| e.reordered > 0), |n| n >= 2);
        if !spread {
            continue;
        }
        whole &= told;
        let base = SprayedFlow {
            psn_sequence_naks: fixed.flows.get(&flow).map_or(0, |(_, naks)| *naks),
            flow,
            uplinks: None,
            requests,
            reordered: 0,
            displacement_p50: None,
            displacement_max: None,
        };
        sprayed.push(SprayedFlow { uplinks: paths, requests, ..entry.unwrap_or(base) });
    }
    if total == 0 {
        return None;
    }
    // As a run lists them: most reordered first, then by key.
    sprayed.sort_by_key(|f| (std::cmp::Reverse(f.reordered), flow_ref_key(&f.flow)));
    let sprayed_flows = sprayed.len() as u64;
    let omitted = sprayed_flows.saturating_sub(SPRAYED_LISTED as u64);
    sprayed.truncate(SPRAYED_LISTED);
    let section = LoadBalancing {
        mode: LbMode::of(sprayed_flows, total),
        basis,
        uplinks: uplinks.into_iter().map(str::to_string).collect(),
        flows: total,
        sprayed_flows,
        reorder: crate::report::assemble::load_balancing::stats(packets, &density),
        sprayed,
        sprayed_omitted: omitted,
    };
    Some((section, whole))
}

/// A flow's listing (none: no report listed it, or it had no late arrival) and whether it is
/// all of the flow's: from its parts' edges where a cut changed its late arrivals, else from the
/// reports' listings (`seen`: how many reports saw it).
fn entry_of(
    flow: &FlowRef,
    listed: &mut BTreeMap<&FlowRef, (SprayedFlow, usize)>,
    fixed: &Fixed,
    seen: usize,
) -> (Option<SprayedFlow>, bool) {
    let entry = listed.remove(flow);
    match fixed.flows.get(flow) {
        // Over every part's edge: listed or not, all its late arrivals are here.
        Some(fix) => (refixed(flow, fix), true),
        // Every report that saw it listed it: its late arrivals and NAKs are all here.
        None => {
            let told = entry.as_ref().is_some_and(|(_, n)| *n == seen);
            (entry.map(|(e, _)| e), told)
        }
    }
}

/// A flow's listing from its late arrivals over all its parts (`fix`: by displacement, and the
/// NAKs back); none without late arrivals.
fn refixed(flow: &FlowRef, (density, naks): &(BTreeMap<u32, u64>, u64)) -> Option<SprayedFlow> {
    let (p50, max) = p50_max(density)?;
    Some(SprayedFlow {
        flow: flow.clone(),
        uplinks: None,
        requests: 0,
        reordered: density.values().sum(),
        displacement_p50: Some(p50),
        displacement_max: Some(max),
        psn_sequence_naks: *naks,
    })
}

/// Adds one report's listing of a flow to the merged one; false when their medians differ.
fn join(m: &mut SprayedFlow, f: &SprayedFlow) -> bool {
    let agree = f.reordered == 0 || m.reordered == 0 || m.displacement_p50 == f.displacement_p50;
    if f.reordered > 0 {
        m.displacement_p50 = if agree { f.displacement_p50 } else { None };
    }
    m.reordered += f.reordered;
    m.displacement_max = m.displacement_max.max(f.displacement_max);
    m.psn_sequence_naks += f.psn_sequence_naks;
    agree
}

/// The note of a merge whose load balancing may not be one run's: `listed` false when a
/// sprayed flow's listing was not whole; `irregular` flows have a request after a cut in time
/// that may have arrived late into a gap one run had open there (neither part saw it late).
pub fn note(listed: bool, irregular: u64, report: &Report) -> Option<Note> {
    if report.load_balancing.is_none() || (listed && irregular == 0) {
        return None;
    }
    let mut why = Vec::new();
    if irregular > 0 {
        why.push(format!(
            "{irregular} flows have a request after a cut in time that may have arrived late into a gap one run \
             had open at the cut (a repeat at the cut, or a request the part counted behind its own next PSN after \
             a gap), which the reports cannot replay (first frames that end too soon, events at one time whose \
             order changes the state, no frame times): one run may count it late where neither part did, or the other way round"
        ));
    }
    if !listed {
        why.push(
            "a sprayed flow was not listed by every report that saw it (past a report's listed flows, or not \
             spread there), or its reports' median displacements differ: its late arrivals, NAKs or median are \
             those of the reports that listed it"
                .to_string(),
        );
    }
    Some(Note::new(NoteCode::LoadBalancingNotMerged, format!("load_balancing: {}", why.join("; "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(reordered: u64, p50: u32, max: u32) -> SprayedFlow {
        SprayedFlow {
            flow: FlowRef { src: "10.0.0.1".into(), dst: "10.0.0.2".into(), udp_sport: 1, dst_qp: 2 },
            uplinks: None,
            requests: 10,
            reordered,
            displacement_p50: Some(p50),
            displacement_max: Some(max),
            psn_sequence_naks: 1,
        }
    }

    #[test]
    fn a_flow_listed_twice_adds_up_and_keeps_a_median_both_agree_on() {
        let mut m = SprayedFlow { reordered: 0, displacement_max: None, psn_sequence_naks: 0, ..listed(0, 0, 0) };
        assert!(join(&mut m, &listed(3, 1, 2)));
        assert!(join(&mut m, &listed(5, 1, 4)));
        assert_eq!(
            (m.reordered, m.displacement_p50, m.displacement_max, m.psn_sequence_naks),
            (8, Some(1), Some(4), 2)
        );
        // Lower medians 1 and 3: the union's lies between, unknown here.
        assert!(!join(&mut m, &listed(2, 3, 3)));
        assert_eq!((m.reordered, m.displacement_p50), (10, None));
    }
}
