//! The fabric sections of the report: PFC senders with their pause time and storms, the
//! congestion trees and deadlocks, incast episodes and ECMP.

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;

use crate::analyses::pause::{ALL_PRIORITIES, Pause};
use crate::analyses::topology::Topology;
use crate::analyses::tree::FlowSpan;
use crate::analyses::{ecmp, tree};
use crate::model::{
    CongestionTrees, Ecmp, Episode, Incast, LabelShare, PauseSender, PauseTime, Pfc, PfcSender, StormJson, addr_string,
    mac_string,
};
use crate::pipeline::Pipeline;

pub fn pfc(run: &Pipeline) -> Pfc {
    let t = &run.engine.pfc;
    let a = &run.analyses;
    let topo = a.config.topology.as_ref();
    let pause = |mac: &[u8; 6], prio: u8| {
        PauseTime::of(&a.pause.timers.get(&(*mac, prio)).map(|t| t.all_intervals()).unwrap_or_default())
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
    }
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
    at.extend(run.analyses.vantage.points_of(k).map(|p| (p.label.clone(), p.origin.clone())));
    at
}

pub fn incast(run: &Pipeline) -> Incast {
    let a = &run.analyses;
    let w = a.incast.window_ns();
    let episodes = a
        .incast
        .episodes()
        .into_iter()
        .map(|((ip, v), e)| {
            let peak_gbps = e.peak_window_bytes as f64 * 8.0 / w as f64;
            Episode {
                dst: addr_string(v, &ip),
                start_ns: e.start_ns,
                end_ns: e.end_ns,
                peak_senders: e.peak_senders,
                senders: e.senders().iter().map(|(s, v)| addr_string(*v, s)).collect(),
                bytes: e.bytes(),
                peak_gbps,
                peak_link_ratio: peak_gbps * 1e9 / a.config.link_speed_bps.max(1) as f64,
                ce_packets: e.ce(),
                cnp_packets: e.cnp(),
                pfc_frames: a.pause.frame_times.iter().filter(|&&t| t >= e.start_ns && t <= e.end_ns).count() as u64,
                evidence: None,
            }
        })
        .collect();
    Incast { window_ns: w, min_senders: a.incast.min_senders(), episodes }
}

/// The ECMP section of a run: bytes per label from each flow's bytes per source, and the flows
/// (`list_host_pairs` false: `host_pairs` left empty, for a report whose lists are streamed).
pub fn ecmp(run: &Pipeline, list_host_pairs: bool) -> Ecmp {
    let engine = &run.engine;
    let flows: Vec<(FlowKey, u64)> = engine.flows.iter().map(|(k, s)| (*k, s.bytes)).collect();
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
    ecmp::section(&by_label, multi, &run.analyses.config.ecmp_tiers, &flows, list_host_pairs)
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
