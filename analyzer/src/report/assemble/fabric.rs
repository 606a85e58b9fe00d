//! The fabric sections of the report: PFC senders with their pause time and storms, the
//! congestion trees and deadlocks, incast episodes and ECMP.

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;

use crate::analyses::ecn_lead::Pair;
use crate::analyses::pause::{ALL_PRIORITIES, Pause};
use crate::analyses::topology::{self, Topology};
use crate::analyses::tree::FlowSpan;
use crate::analyses::{ecmp, tree};
use crate::model::{
    CongestionTrees, Ecmp, EcnLead, Finding, FindingCode, LabelShare, PauseCounts, PauseSender, PauseTime, Pfc,
    PfcEdge, PfcRate, PfcSender, Severity, StormJson, mac_string,
};
use crate::pipeline::Pipeline;

pub fn pfc(run: &Pipeline) -> Pfc {
    let t = &run.engine.pfc;
    let a = &run.analyses;
    let topo = a.config.topology.as_ref();
    // (`--edges`: with the first frame's time, for `merge` across cuts in time.)
    let edges = run.engine.heads.is_some();
    let pause = |mac: &[u8; 6], prio: u8| {
        let timer = a.pause.timers.get(&(*mac, prio));
        let first_frame_ns = timer.and_then(|t| t.first_ts).filter(|_| edges);
        PauseTime { first_frame_ns, ..PauseTime::of(&timer.map(|t| t.all_intervals()).unwrap_or_default()) }
    };
    Pfc {
        frames: t.pfc_frames,
        pause_8023x_frames: t.pause_frames,
        senders: t
            .pfc
            .iter()
            .map(|((mac, prio), c)| {
                let (device, port) = tree::owner_names(topo, mac);
                PfcSender {
                    mac: mac_string(mac),
                    device,
                    port,
                    priority: *prio,
                    counts: c.into(),
                    pause: pause(mac, *prio),
                    ecn_lead: ecn_lead(run, mac, *prio),
                }
            })
            .collect(),
        pause_senders: t
            .pause
            .iter()
            .map(|(mac, c)| {
                let (device, port) = tree::owner_names(topo, mac);
                PauseSender { mac: mac_string(mac), device, port, counts: c.into(), pause: pause(mac, ALL_PRIORITIES) }
            })
            .collect(),
        storms: storms(&a.pause, topo),
        link_speed_bps: a.config.link_speed_bps,
        rates: rates(run),
        edge: edges.then(|| PfcEdge {
            rate_max: a.config.pfc_rate_max,
            unknown_priority_data_frames: a.marks.data_frames[crate::analyses::ecn_lead::UNKNOWN],
            marks: marks_edge(run),
        }),
    }
}

/// The CE marks near the run's ends for `merge` across cuts: the runs an onset of the next
/// capture within `--ecn-lead` of its start can ask (or join with a run of its own).
fn marks_edge(run: &Pipeline) -> Option<crate::model::MarksEdge> {
    let a = &run.analyses;
    let reach = a.config.ecn_lead_ns + crate::analyses::ecn_lead::RUN_GAP_NS;
    let end = run.engine.last_ns.unwrap_or(0);
    a.marks.edge(end.saturating_sub(reach))
}

/// A PFC sender's pause onsets and the CE marks on its priority's data before them.
fn ecn_lead(run: &Pipeline, mac: &[u8; 6], priority: u8) -> Option<EcnLead> {
    let a = &run.analyses;
    let onsets: Vec<u64> = a.pause.timers.get(&(*mac, priority))?.all_intervals().iter().map(|(s, _)| *s).collect();
    let window_ns = a.config.ecn_lead_ns;
    // With a topology that places the paused link: only the marks of host pairs through it.
    let topo = a.config.topology.as_ref();
    let link = topo.and_then(|t| Some((t, t.paused_link(mac)?)));
    let first = |t: u64| match link {
        Some((topo, link)) => {
            let on_path = |p: &Pair| topo.path_of(p.1, &p.2, &p.3).is_some_and(|path| topology::crosses(&path, link));
            a.marks.first_before_on(priority, t, window_ns, on_path).flatten()
        }
        None => a.marks.first_before(priority, t, window_ns),
    };
    let each: Vec<(u64, Option<u64>)> = onsets.iter().map(|t| (*t, first(*t).map(|m| t - m))).collect();
    let mut leads: Vec<u64> = each.iter().filter_map(|(_, l)| *l).collect();
    Some(EcnLead {
        edge: run.engine.heads.is_some().then_some(each),
        onsets: onsets.len() as u64,
        preceded: leads.len() as u64,
        window_ns,
        lead_ns_p50: (!leads.is_empty()).then(|| crate::analyses::stats::median(&mut leads)),
        link: link.map(|(t, (from, to))| format!("{} → {}", t.name(to), t.name(from))),
    })
}

/// Per priority PFC paused: its pause frames and paused time per million data frames. With
/// `--edges` every priority that carried data is listed too (no pause frames: a part of a
/// capture cut in time whose data `merge` must count, though PFC paused it in another part).
fn rates(run: &Pipeline) -> Vec<PfcRate> {
    let a = &run.analyses;
    let mut by: BTreeMap<u8, (u64, u64)> = BTreeMap::new();
    if run.engine.heads.is_some() {
        for (p, _) in a.marks.data_frames.iter().enumerate().take(8).filter(|(_, n)| **n > 0) {
            by.insert(p as u8, (0, 0));
        }
    }
    for ((mac, prio), c) in &run.engine.pfc.pfc {
        let e = by.entry(*prio).or_default();
        e.0 += PauseCounts::from(c).frames;
        e.1 += a.pause.timers.get(&(*mac, *prio)).map_or(0, |t| t.paused_ns());
    }
    by.into_iter()
        .map(|(priority, (pause_frames, paused_ns))| {
            let data_frames = a.marks.data_frames.get(priority as usize).copied().unwrap_or(0);
            let per_million = |v: u64| (data_frames > 0).then(|| v as f64 * 1e6 / data_frames as f64);
            PfcRate {
                priority,
                data_frames,
                pause_frames,
                paused_ns,
                frames_per_million: per_million(pause_frames),
                paused_ns_per_million: per_million(paused_ns),
            }
        })
        .collect()
}

/// ECN before PFC: `pfc_before_ecn` per sender and priority whose onsets mostly came without
/// marks before them, `pfc_rate_high` per priority pausing too often. A priority whose data
/// this capture did not see (`data_seen` false: PFC frames alone, another port's traffic) has
/// no marks to judge by, so its onsets give no finding.
pub fn pfc_findings(p: &Pfc, rate_max: f64, data_seen: impl Fn(u8) -> bool) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in p.senders.iter().filter(|s| data_seen(s.priority)) {
        let Some(l) = s.ecn_lead.as_ref().filter(|l| l.onsets > 0 && l.preceded * 2 < l.onsets) else { continue };
        let name = match (&s.device, &s.port) {
            (Some(d), Some(port)) => format!("{d}:{port} ({})", s.mac),
            (Some(d), None) => format!("{d} ({})", s.mac),
            _ => s.mac.clone(),
        };
        out.push(Finding::new(
            Severity::Warning,
            FindingCode::PfcBeforeEcn,
            format!(
                "{name} paused priority {} {} times, {} of them with no CE mark on that priority's data{} in the {} µs before: the ECN marking threshold is at or above the PFC XOFF threshold; ECN should slow senders before PFC pauses links (lower Kmin/Kmax, or raise XOFF)",
                s.priority,
                l.onsets,
                l.onsets - l.preceded,
                l.link.as_ref().map(|k| format!(" through {k}")).unwrap_or_default(),
                l.window_ns / 1000
            ),
            Vec::new(),
        ));
    }
    for r in &p.rates {
        let Some(rate) = r.frames_per_million.filter(|v| *v > rate_max) else { continue };
        out.push(Finding::new(
            Severity::Warning,
            FindingCode::PfcRateHigh,
            format!(
                "priority {}: {} pause frames for {} data frames ({rate:.1} per million, above {rate_max}): PFC triggers too often; tuned fabrics pause on well under 0.001 % of frames (ECN should act first)",
                r.priority, r.pause_frames, r.data_frames
            ),
            Vec::new(),
        ));
    }
    out
}

/// The storms of the pause timers, their senders named by the topology (a run and `merge`).
pub fn storms(pause: &Pause, topo: Option<&Topology>) -> Vec<StormJson> {
    pause
        .storms()
        .into_iter()
        .map(|s| StormJson {
            mac: mac_string(&s.mac),
            device: tree::owner_names(topo, &s.mac).0,
            priority: s.priority,
            start_ns: s.start_ns,
            duration_ns: s.duration_ns,
            evidence: None,
        })
        .collect()
}

pub fn congestion_tree(run: &Pipeline) -> CongestionTrees {
    let a = &run.analyses;
    // Without a pause there is no tree to place flows on (and no list of them to build).
    if a.pause.timers.is_empty() {
        return tree::build(&a.pause, a.config.topology.as_ref(), &[], a.config.deadlock_min_ns);
    }
    let flows: Vec<FlowSpan> = run
        .engine
        .flows
        .iter()
        .map(|(k, s)| FlowSpan {
            key: *k,
            bytes: s.bytes,
            first_ns: s.first_ns,
            last_ns: s.last_ns,
            pcps: (0..8u8).filter(|p| s.pcp.get(*p) > 0).fold(0, |m, p| m | 1 << p),
            untagged: s.untagged > 0,
            seen_at: seen_at(run, k, s.sources),
        })
        .collect();
    tree::build(&a.pause, a.config.topology.as_ref(), &flows, a.config.deadlock_min_ns)
}

/// The vantage points that saw a flow: its inputs' labels, and the mirror origins the
/// matching saw it from.
fn seen_at(run: &Pipeline, k: &FlowKey, sources: u64) -> Vec<(String, Option<String>)> {
    let mut at: Vec<(String, Option<String>)> = run
        .engine
        .sources
        .iter()
        .enumerate()
        .filter(|(i, _)| sources & crate::frames::source_bit(*i as u16) != 0)
        .map(|(_, s)| (s.label.clone(), None))
        .collect();
    at.extend(run.vantage.points_of(k).map(|p| (p.label.clone(), p.origin.clone())));
    at
}

/// The ECMP section of a run: bytes per label from each flow's bytes per source, and the flows
/// (`list_host_pairs` false: `host_pairs` left empty, for a report whose lists are streamed).
pub fn ecmp(run: &Pipeline, list_host_pairs: bool) -> Ecmp {
    let engine = &run.engine;
    let flows: Vec<(&FlowKey, u64)> = engine.flows.iter().map(|(k, s)| (k, s.bytes)).collect();
    let labels: BTreeSet<&str> = engine.sources.iter().map(|s| s.label.as_str()).collect();
    let mut by_label: BTreeMap<String, LabelShare> = BTreeMap::new();
    let mut multi = 0;
    if labels.len() >= 2 {
        by_label = labels.iter().map(|l| (l.to_string(), LabelShare { bytes: 0, flows: 0 })).collect();
        for (_, s) in engine.flows.iter() {
            let mut seen: BTreeSet<&str> = BTreeSet::new();
            for (src, bytes) in &s.source_bytes {
                let Some(source) = engine.sources.get(*src as usize) else { continue };
                let share = by_label.get_mut(&source.label).expect("every label listed");
                share.bytes += bytes;
                seen.insert(&source.label);
            }
            for l in &seen {
                by_label.get_mut(*l).expect("listed").flows += 1;
            }
            multi += (seen.len() > 1) as u64;
        }
    }
    let in_series = uplinks(run, &mut by_label);
    ecmp::section((&by_label, in_series), multi, &run.analyses.config.ecmp_tiers, &flows, list_host_pairs)
}

/// Inputs in series are not uplinks: two labels are in series when at least half the frames of
/// the smaller were also seen by the other (vantage points' matched copies: a leaf and a spine
/// capture of the same frames). Taken from the fewest frames up, a label joins the uplinks
/// unless it is in series with one already there; those left out are removed from `by_label`.
fn uplinks(run: &Pipeline, by_label: &mut BTreeMap<String, LabelShare>) -> Vec<crate::model::InSeries> {
    let v = &run.vantage;
    let mut frames: BTreeMap<&str, u64> = BTreeMap::new();
    for p in &v.points {
        *frames.entry(p.label.as_str()).or_default() += p.frames;
    }
    let mut copies: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for h in v.hop_list() {
        let (a, b) = (v.points[h.from as usize].label.as_str(), v.points[h.to as usize].label.as_str());
        if a != b {
            *copies.entry((a.min(b), a.max(b))).or_default() += h.state.matched;
        }
    }
    let mut order: Vec<&str> = by_label.keys().map(String::as_str).collect();
    order.sort_by_key(|l| (frames.get(l).copied().unwrap_or(0), *l));
    let (mut kept, mut out): (Vec<&str>, Vec<crate::model::InSeries>) = (Vec::new(), Vec::new());
    for l in order {
        let with = kept.iter().find_map(|k| {
            let n = copies.get(&(l.min(k), l.max(k))).copied().unwrap_or(0);
            let smaller = frames.get(l).copied().unwrap_or(0).min(frames.get(k).copied().unwrap_or(0));
            (n > 0 && n * 2 >= smaller).then_some((*k, n))
        });
        match with {
            Some((k, n)) => out.push(crate::model::InSeries { label: l.to_string(), with: k.to_string(), copies: n }),
            None => kept.push(l),
        }
    }
    for s in &out {
        by_label.remove(&s.label);
    }
    out
}

/// The ECMP section's host pairs, in order, for a report whose lists are streamed.
pub fn host_pair_items(run: &Pipeline) -> impl Iterator<Item = crate::model::HostPair> {
    let sorted = ecmp::spread::sorted(run.engine.flows.iter().map(|(k, _)| k));
    let mut at = 0;
    std::iter::from_fn(move || {
        let (p, _) = ecmp::spread::pairs(&sorted[at..]).next()?;
        at += p.flows as usize;
        Some(p.json())
    })
}
