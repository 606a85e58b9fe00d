//! The diagnosis: the few things in a report that matter most, ranked, each with where it is
//! (flows, devices, ports) and what to check or change. The summary and the page open with it;
//! it is a function of the report alone, so a merged or re-read report gets the same one.
//!
//! The ranking follows what costs a job most: error findings, the tail's leading cause, PFC
//! storms, deadlocks, incast, loss between vantage points, what the capture could not see, then
//! the other warnings and information.

use std::collections::BTreeMap;

use crate::model::{Diagnosis, Finding, FindingCode, FlowRef, NoteCode, Report, Severity};

/// What to check or change for a finding.
fn advice(code: FindingCode) -> &'static str {
    use FindingCode::*;
    match code {
        NotEct => {
            "mark RoCE data ECN-capable on the senders (enable ECN/DCQCN for this priority on the RNICs): \
             switches cannot mark Not-ECT frames"
        }
        RoceDscp => {
            "put RoCE data in its lossless class (DSCP 26, NCCL_IB_TC=106), or give the fabric's with --roce-dscp"
        }
        CnpDscp => "send CNPs in a class of their own (DSCP 48, strict priority), or give the fabric's with --cnp-dscp",
        CeWithoutCnp => {
            "enable the notification point (CNP generation) on the receiving RNICs, and check that CNPs are not \
             dropped on the way back"
        }
        CnpWithoutCe => "usually harmless (some RNICs send CNPs on NAKs); check the flows named for loss",
        GoBackN => {
            "find the loss the NAKs answer: drops on the path (is this priority lossless, with PFC?), or \
             reordering by spraying"
        }
        Reordering => {
            "the path reorders: packet spraying or adaptive routing; enable out-of-order placement on the \
             receivers, or hash per flow"
        }
        PsnGap => {
            "frames were lost before this point: the drop counters of the switches on the path, and PFC on this priority"
        }
        RnrRetry | RnrNak => {
            "the receiver had no receive posted: post receives earlier or deeper (a larger receive queue)"
        }
        Retransmission => {
            "requests timed out and were sent again: loss on the path, and the QPs' timeout and retry settings"
        }
        NakError => "a remote access or operation error: the application's memory registrations and keys",
        ReadResponseGap => "READ responses were lost on the way back: the reverse path's drop counters",
        RttTimeout => {
            "requests were never answered within --rtt-timeout: the responder or the reverse path (capture both \
             directions)"
        }
        UplinkImbalance | EcmpPolarized | CrcSeed => {
            "change the ECMP hash (seed or fields) per tier, or use adaptive routing or packet spraying"
        }
        FewSourcePorts => {
            "let the RNICs vary the UDP source port per QP, or use more QPs per connection \
             (NCCL_IB_QPS_PER_CONNECTION)"
        }
        ElephantFlows => "split the largest flows over more QPs, or use adaptive routing",
        LossBetween => "the switch between the two points drops: its drop counters, buffer and PFC configuration",
        CnpIgnored => "enable the reaction point (DCQCN rate reduction) on the sending RNICs for this priority",
        SlowRecovery => "tune the senders' DCQCN recovery (rate-increase timer and byte counter, additive increase)",
        CnpStorm => "raise the receivers' minimum time between CNPs, or the switches' ECN thresholds",
        TailDominatedBy => "act on the leading cause first: its section below names the priority, port or flows",
        RingStraggler => {
            "look at the slow edge: its hosts' NICs, the link speed, PFC and the switch ports between them"
        }
        PfcBeforeEcn => "lower the switch's ECN thresholds (Kmin, Kmax) below its PFC XOFF threshold, or raise XOFF",
        PfcRateHigh => {
            "make ECN act before PFC (the switches' ECN thresholds below their XOFF threshold), and check the \
             receivers' fan-in"
        }
        SprayingWithoutOoo => {
            "enable out-of-order placement on the receiving RNICs, or hash these flows per flow or flowlet"
        }
        EcnThresholdLow => "raise Kmin (150–256 KB at 400 Gbit/s), keeping it below the PFC XOFF threshold",
    }
}

/// The rank of a finding's kind: lower comes first.
fn tier(f: &Finding) -> u8 {
    match (f.code, f.severity) {
        (FindingCode::TailDominatedBy, _) => 1,
        (FindingCode::LossBetween, _) => 5,
        (_, Severity::Info) => 8,
        (_, Severity::Error) => 0,
        (_, Severity::Warning) => 7,
    }
}

/// One entry per finding code (the first finding's message, how many more there are, the
/// flows of them all), so that ten senders pausing early read as one thing to fix.
fn from_findings<'a>(findings: impl Iterator<Item = &'a Finding>) -> Vec<(u8, Diagnosis)> {
    let mut groups: Vec<(FindingCode, Vec<&Finding>)> = Vec::new();
    for f in findings {
        match groups.iter_mut().find(|(c, _)| *c == f.code) {
            Some((_, g)) => g.push(f),
            None => groups.push((f.code, vec![f])),
        }
    }
    groups
        .into_iter()
        .map(|(code, g)| {
            let first = g.iter().min_by_key(|f| f.severity).expect("a group has a finding");
            // Each flow once, in the findings' order (a set: thousands of findings name
            // thousands of flows, and a search of the list for each was quadratic).
            let mut seen = std::collections::HashSet::new();
            let flows: Vec<FlowRef> =
                g.iter().flat_map(|f| f.flows.iter()).filter(|x| seen.insert(*x)).cloned().collect();
            let omitted = g.iter().map(|f| f.flows_omitted).sum();
            let what = match g.len() {
                1 => first.message.clone(),
                n => format!("{} (and {} more {code} findings)", first.message, n - 1),
            };
            let place = if flows.is_empty() { String::new() } else { FlowRef::named(&flows, omitted) };
            let d = Diagnosis {
                severity: first.severity,
                code: code.name().into(),
                what,
                place,
                advice: advice(code).into(),
            };
            (g.iter().map(|f| tier(f)).min().unwrap_or(8), d)
        })
        .collect()
}

fn sender(mac: &str, device: Option<&String>) -> String {
    device.map_or_else(|| mac.to_string(), |d| format!("{d} ({mac})"))
}

/// PFC storms, one entry per sender and priority.
fn storms(r: &Report) -> Vec<(u8, Diagnosis)> {
    let mut by: BTreeMap<(String, u8), (u64, u64)> = BTreeMap::new();
    for s in &r.pfc.storms {
        let e = by.entry((sender(&s.mac, s.device.as_ref()), s.priority)).or_default();
        e.0 += 1;
        e.1 = e.1.max(s.duration_ns);
    }
    by.into_iter()
        .map(|((who, prio), (n, longest))| {
            let d = Diagnosis {
                severity: Severity::Error,
                code: "pfc_storm".into(),
                what: format!(
                    "{n} PFC storm{} on priority {prio}: paused without a break for up to {:.1} ms",
                    if n == 1 { "" } else { "s" },
                    longest as f64 / 1e6
                ),
                place: who,
                advice: "find the receiver that cannot drain behind this port (a stuck host or NIC), and enable the \
                         switches' PFC watchdog"
                    .into(),
            };
            (2, d)
        })
        .collect()
}

fn deadlocks(r: &Report) -> Vec<(u8, Diagnosis)> {
    r.congestion_tree
        .deadlocks
        .iter()
        .map(|d| {
            let devices = if d.devices.is_empty() { &d.cycle } else { &d.devices };
            let item = Diagnosis {
                severity: Severity::Error,
                code: "pfc_deadlock".into(),
                what: format!(
                    "PFC deadlock on priority {}: {} devices pausing each other in a circle for {:.1} ms",
                    d.priority,
                    devices.len(),
                    d.duration_ns as f64 / 1e6
                ),
                place: format!("cycle {}", d.cycle.join(" → ")),
                advice: "break the cycle: routing that cannot loop (up-down), no flooding in the lossless class, and \
                         the switches' PFC watchdog"
                    .into(),
            };
            (3, item)
        })
        .collect()
}

/// Incast, one entry per destination.
fn incast(r: &Report) -> Vec<(u8, Diagnosis)> {
    let mut by: BTreeMap<&str, (u64, u32, u64)> = BTreeMap::new();
    for e in &r.incast.episodes {
        let x = by.entry(e.dst.as_str()).or_default();
        x.0 += 1;
        x.1 = x.1.max(e.peak_senders);
        x.2 += e.end_ns.saturating_sub(e.start_ns);
    }
    by.into_iter()
        .map(|(dst, (n, peak, ns))| {
            let d = Diagnosis {
                severity: Severity::Warning,
                code: "incast".into(),
                what: format!(
                    "{n} incast episode{} into {dst}: up to {peak} senders at once, {:.1} µs in all",
                    if n == 1 { "" } else { "s" },
                    ns as f64 / 1e3
                ),
                place: dst.to_string(),
                advice: "limit or stagger the fan-in (the collective's algorithm and channels), and check that DCQCN \
                         reacts and the receiver's port has buffer"
                    .into(),
            };
            (4, d)
        })
        .collect()
}

/// What the capture could not see, when that changes the answers.
fn blind(r: &Report) -> Vec<(u8, Diagnosis)> {
    let advice = |c: NoteCode| match c {
        NoteCode::HardwareRoceBypass | NoteCode::NoRoce => {
            "capture where RoCE passes the kernel: a mirror or ERSPAN collector port, a tap, or the RNIC's own sniffer"
        }
        _ => "a mirror port, a larger capture ring or a shorter snap length",
    };
    r.visibility
        .iter()
        .filter(|n| matches!(n.code, NoteCode::HardwareRoceBypass | NoteCode::NoRoce | NoteCode::CaptureLoss))
        .map(|n| {
            let d = Diagnosis {
                severity: Severity::Warning,
                code: n.code.name().into(),
                what: n.message.clone(),
                place: String::new(),
                advice: advice(n.code).into(),
            };
            (6, d)
        })
        .collect()
}

/// The report's diagnosis, most important first (findings of equal rank in the report's order).
pub fn diagnose(r: &Report) -> Vec<Diagnosis> {
    let mut all = from_findings(r.audit.iter().chain(&r.ecmp.findings));
    all.extend(storms(r));
    all.extend(deadlocks(r));
    all.extend(incast(r));
    all.extend(blind(r));
    all.sort_by_key(|(tier, _)| *tier);
    all.into_iter().map(|(_, d)| d).collect()
}
