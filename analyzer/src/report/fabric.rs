//! The fabric sections of the report: PFC senders with their pause time and storms, the
//! congestion trees and deadlocks, incast episodes and ECMP.

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;

use super::{
    CongestionTrees, Ecmp, EcmpObserved, EcmpPredicted, Episode, Finding, HostPair, Incast, LabelShare, PauseSender,
    PauseTime, Pfc, PfcSender, StormJson, TierJson, addr_string, flow_ref, mac_string,
};
use crate::analyses::pause::ALL_PRIORITIES;
use crate::analyses::{ecmp, tree};
use crate::engine::Engine;

pub fn pfc(engine: &Engine) -> Pfc {
    let t = &engine.pfc;
    let a = &engine.analyses;
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
        storms: a
            .pause
            .storms()
            .into_iter()
            .map(|s| StormJson {
                mac: mac_string(&s.mac),
                device: tree::owner_names(topo, &s.mac).0,
                priority: s.priority,
                start_ns: s.start_ns,
                duration_ns: s.duration_ns,
            })
            .collect(),
        link_speed_bps: a.config.link_speed_bps,
    }
}

pub fn congestion_tree(engine: &Engine) -> CongestionTrees {
    let a = &engine.analyses;
    tree::build(&a.pause, a.config.topology.as_ref(), engine.flows.iter(), a.config.deadlock_min_ns)
}

pub fn incast(engine: &Engine) -> Incast {
    let a = &engine.analyses;
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
            }
        })
        .collect();
    Incast { window_ns: w, min_senders: a.incast.min_senders(), episodes }
}

fn finding(severity: &str, code: &str, message: String, flows: Vec<&FlowKey>) -> Finding {
    let mut flows: Vec<_> = flows.into_iter().map(flow_ref).collect();
    flows.sort();
    Finding { severity: severity.into(), code: code.into(), message, flows }
}

pub fn ecmp(engine: &Engine) -> Ecmp {
    let flows: Vec<(&FlowKey, u64)> = engine.flows.iter().map(|(k, s)| (k, s.bytes)).collect();
    let mut out = Ecmp::default();
    let mut findings = Vec::new();

    // Observed: bytes and flows per label (several sources may share one label).
    let labels: BTreeSet<&str> = engine.sources.iter().map(|s| s.label.as_str()).collect();
    if labels.len() >= 2 {
        let mut by_label: BTreeMap<String, LabelShare> =
            labels.iter().map(|l| (l.to_string(), LabelShare { bytes: 0, flows: 0 })).collect();
        let mut multi = 0;
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
        let bytes: Vec<u64> = by_label.values().map(|s| s.bytes).collect();
        let imbalance = ecmp::imbalance(&bytes);
        let idle: Vec<String> = by_label.iter().filter(|(_, s)| s.bytes == 0).map(|(l, _)| l.clone()).collect();
        if imbalance > 1.5 || !idle.is_empty() {
            findings.push(finding(
                "warning",
                "uplink_imbalance",
                format!(
                    "uplinks carry unequal shares: the busiest carries {imbalance:.2}× the mean{}",
                    if idle.is_empty() { String::new() } else { format!("; idle: {}", idle.join(", ")) }
                ),
                Vec::new(),
            ));
        }
        out.observed = Some(EcmpObserved { by_label, imbalance, idle, multi_label_flows: multi });
    }

    // Predicted, per tier.
    let tiers = &engine.analyses.config.ecmp_tiers;
    if !tiers.is_empty() {
        let keyed: Vec<(Vec<u8>, u64)> = flows.iter().map(|(k, b)| (ecmp::key(k), *b)).collect();
        let p = ecmp::predict(tiers, &keyed);
        let tiers_json: Vec<TierJson> = tiers
            .iter()
            .zip(&p.per_path)
            .map(|(t, per)| {
                let bytes: Vec<u64> = per.iter().map(|x| x.1).collect();
                TierJson {
                    hash: t.hash.name().into(),
                    fanout: t.fanout,
                    seed: t.seed,
                    shift: t.shift,
                    per_path: per.iter().map(|(f, b)| LabelShare { flows: *f, bytes: *b }).collect(),
                    imbalance: ecmp::imbalance(&bytes),
                    idle: per.iter().enumerate().filter(|(_, x)| x.0 == 0).map(|(i, _)| i as u32).collect(),
                }
            })
            .collect();
        if p.polarized {
            findings.push(finding(
                "warning",
                "ecmp_polarized",
                format!(
                    "a later tier's path is determined by an earlier tier's: {} of {} path combinations used by {} flows",
                    p.combinations_used,
                    p.combinations_total,
                    flows.len()
                ),
                Vec::new(),
            ));
        }
        if tiers.iter().any(|t| matches!(t.hash, ecmp::Hash::Crc32 | ecmp::Hash::Crc32c)) {
            findings.push(finding(
                "info",
                "crc_seed",
                "with CRC hashes a different seed alone does not decorrelate equal-length keys: crc(k, s1) xor crc(k, s2) \
                 is the same for every key of one length, so tiers taking the same bits split flows the same way; use \
                 other bits (shift), another hash or another key"
                    .into(),
                Vec::new(),
            ));
        }
        out.predicted = Some(EcmpPredicted {
            tiers: tiers_json,
            combinations_used: p.combinations_used,
            combinations_total: p.combinations_total,
            polarized: p.polarized,
        });
    }

    // Always: source ports, host pairs, elephants.
    let mut sports: BTreeMap<u16, u64> = BTreeMap::new();
    type Pair = (u8, [u8; 16], [u8; 16]);
    let mut pairs: BTreeMap<Pair, (u64, BTreeSet<u16>)> = BTreeMap::new();
    for (k, _) in &flows {
        *sports.entry(k.udp_sport).or_default() += 1;
        let e = pairs.entry((k.ip_version, k.src, k.dst)).or_default();
        e.0 += 1;
        e.1.insert(k.udp_sport);
    }
    out.distinct_sports = sports.len() as u64;
    out.sport_entropy_bits = ecmp::entropy_bits(sports.values().copied());
    out.host_pairs = pairs
        .iter()
        .map(|((v, a, b), (n, s))| HostPair {
            a: addr_string(*v, a),
            b: addr_string(*v, b),
            flows: *n,
            distinct_sports: s.len() as u64,
        })
        .collect();
    // Flows of one host pair can only spread over paths by their UDP source ports: those that
    // share a port with another flow of their pair share its path.
    let shared_flows: u64 = out.host_pairs.iter().filter(|p| p.flows >= 2).map(|p| p.flows).sum();
    let mut per_port: BTreeMap<(u8, [u8; 16], [u8; 16], u16), u64> = BTreeMap::new();
    for (k, _) in &flows {
        *per_port.entry((k.ip_version, k.src, k.dst, k.udp_sport)).or_default() += 1;
    }
    let colliding: u64 = per_port.values().filter(|n| **n >= 2).sum();
    if colliding >= 2 && colliding * 2 >= shared_flows {
        findings.push(finding(
            "warning",
            "few_source_ports",
            format!(
                "{colliding} of the {shared_flows} flows between host pairs with several flows share a UDP source port with another flow of their pair: ECMP hashes the 5-tuple, so they share its path; NICs vary the source port per QP, so more QPs per connection (or QP-aware hashing) spread them"
            ),
            Vec::new(),
        ));
    }
    let n = flows.len() as u64;
    let total: u64 = flows.iter().map(|(_, b)| b).sum();
    if n >= 4 && total > 0 {
        let mut by_bytes = flows.clone();
        by_bytes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut acc = 0;
        let mut k = 0;
        while acc * 10 < total * 8 {
            acc += by_bytes[k].1;
            k += 1;
        }
        if (k as u64) * 5 <= n {
            findings.push(finding(
                "warning",
                "elephant_flows",
                format!(
                    "{k} of {n} flows carry {:.0}% of the bytes: where a few elephants hash onto one path, that path is congested while others idle; more QPs per connection or QP-aware hashing spread them",
                    acc as f64 * 100.0 / total as f64
                ),
                by_bytes[..k].iter().map(|(f, _)| *f).collect(),
            ));
        }
    }
    out.findings = findings;
    out
}
