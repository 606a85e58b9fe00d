//! The tail of a merge of reports in series, as one run explains it: the messages joined
//! across cuts ([`super::messages_stitch::Whole::done`]), each size class's slowest kept as one
//! run keeps them, laid over the merged pause intervals, DCQCN rate cuts and incast episodes with
//! the settings the reports' edges name ([`TailEdge`]). What one run would know and the reports
//! do not (pause intervals not all listed, rate cuts or incast episodes not stitched, hops
//! between vantage points, other settings) leaves the tail each report's, and the note says why.

use std::collections::BTreeMap;

use analyzer_common::flow::FlowKey;

use super::dcqcn_stitch::Cuts;
use super::messages_stitch::Whole;
use crate::analyses::keys::Addr;
use crate::analyses::messages::dist::{self, Dist};
use crate::analyses::messages::kept::{Kind, Msg};
use crate::analyses::messages::tail::{Context, Kept, Paused, Slowest, incast_of};
use crate::analyses::pause::ALL_PRIORITIES;
use crate::analyses::topology::{Node, Topology, parse_mac};
use crate::model::*;
use crate::report::assemble::messages::{findings, paused_of, tail_over};

/// The messages joined across cuts, per size class: their completions and their slowest.
pub struct Joined {
    bounds: Vec<u64>,
    classes: Vec<(Dist, Slowest)>,
}

impl Joined {
    /// Takes `w`'s completed messages, offered in the order one run completes them.
    pub fn take(w: &mut Whole) -> Joined {
        let bounds = w.bounds.clone();
        let mut slowest = vec![Slowest::default(); w.classes.len()];
        for (key, end_ns, m) in std::mem::take(&mut w.done) {
            let class = dist::class_of(&bounds, m.bytes);
            if let Some(s) = slowest.get_mut(class) {
                s.offer(Kept { key, msg: msg_of(&m), end_ns });
            }
        }
        Joined { classes: w.classes.iter().cloned().zip(slowest).collect(), bounds }
    }
}

/// A message of an edge as the analysis keeps it (what the tail reads of it).
fn msg_of(m: &EdgeMessage) -> Msg {
    let kind = Kind::ALL[(m.kind as usize).min(Kind::ALL.len() - 1)];
    let mut msg = Msg::sent(kind, m.psn_first, m.start_ns, m.bytes, m.pcp, m.dscp);
    (msg.psn_last, msg.marks) = (m.psn_last, m.marks as u8);
    msg.with_times(m.retx_ns, m.rnr_ns)
}

/// What the merge knows besides the messages: the reports' tail settings (each report's, none
/// where a report has no messages edge), `merge --topology`, the merged rate cuts (none: not
/// stitched), whether the merged incast episodes are one run's, whether any report had hops
/// between vantage points, and their hop latencies left out of the tail.
pub struct Around<'a> {
    pub settings: Vec<Option<&'a TailEdge>>,
    pub topology: Option<&'a Topology>,
    pub cuts: Option<&'a Cuts>,
    pub incast: bool,
    pub hops: bool,
    pub unkept: u64,
}

/// The merged tail as one run explains it, or why it cannot be (in words, for the note).
pub fn tail(j: &Joined, (pfc, episodes): (&Pfc, &Incast), a: &Around) -> Result<Tail, &'static str> {
    let first = a.settings.first().copied().flatten();
    let Some(first) = first.filter(|f| a.settings.iter().all(|s| *s == Some(*f))) else {
        return Err("the reports name other tail settings (--tail-threshold, --dscp-priority), or none");
    };
    if first.topology != a.topology.is_some() {
        return Err("merge has a topology the reports were not made with, or none where they had one");
    }
    let Some(cuts) = a.cuts else { return Err("the DCQCN rate cuts near a cut are not one run's") };
    if !a.incast {
        return Err("the incast episodes at a cut are not one run's");
    }
    if a.hops {
        return Err("hops between vantage points queued in each report's own time");
    }
    let pauses = pauses(pfc, a.topology).ok_or("some reports do not list all their pause intervals")?;
    let topo = a.topology;
    let path = |k: &FlowKey| -> Option<Vec<Node>> { topo?.path_of(k.ip_version, &k.src, &k.dst) };
    let cut = |k: &FlowKey| cuts.get(k).map(|c| c.iter().copied().collect()).unwrap_or_default();
    let dscp_priority: BTreeMap<u8, u8> = first.dscp_priority.iter().map(|[d, p]| (*d, *p)).collect();
    let cx = Context {
        pauses,
        path: &path,
        cuts: &cut,
        incast: incast(episodes),
        dscp_priority: &dscp_priority,
        queued: Vec::new(),
    };
    let classes: Vec<(String, &Dist, &Slowest)> =
        j.classes.iter().enumerate().map(|(i, (d, s))| (dist::class_label(&j.bounds, i), d, s)).collect();
    Ok(tail_over(&classes, first.threshold_ns, &cx, a.unkept))
}

/// The merged PFC and PAUSE senders' intervals as one run's pause timers (in their order: by
/// sender and priority); none when a report did not list them all.
fn pauses(pfc: &Pfc, topo: Option<&Topology>) -> Option<Vec<Paused>> {
    let senders = pfc.senders.iter().map(|s| (&s.mac, s.priority, &s.pause));
    let pause = pfc.pause_senders.iter().map(|s| (&s.mac, ALL_PRIORITIES, &s.pause));
    let mut timers = Vec::new();
    for (mac, priority, p) in senders.chain(pause) {
        let mac = parse_mac(mac).filter(|_| p.intervals_complete)?;
        timers.push((mac, priority, p.intervals.iter().map(|[s, e]| (*s, *e)).collect()));
    }
    timers.sort_by_key(|(mac, priority, _)| (*mac, *priority));
    Some(timers.into_iter().map(|(mac, priority, iv)| paused_of(topo, &mac, priority, iv)).collect())
}

/// The merged incast episodes per destination, as the tail reads them.
fn incast(i: &Incast) -> BTreeMap<Addr, Vec<(u64, u64)>> {
    let episodes = i.episodes.iter().filter_map(|e| Some((addr_of(&e.dst)?, e.start_ns, e.end_ns)));
    incast_of(episodes)
}

/// The messages findings (`tail_dominated_by`, `ring_straggler`) of a merged section that is
/// one run's, in place of the reports' (`settings`: the reports' tail settings).
pub fn set_findings(report: &mut Report, settings: Option<&TailEdge>) {
    let (Some(m), Some(s)) = (report.messages.as_ref(), settings) else { return };
    let found = findings(m, s.straggler_ratio);
    report.audit.retain(|f| !matches!(f.code, FindingCode::TailDominatedBy | FindingCode::RingStraggler));
    report.audit.extend(found);
    crate::report::assemble::audit::in_run_order(&mut report.audit);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::messages::dist::Done;
    use crate::analyses::messages::kept::mark;

    const LINK: u64 = 100_000_000_000;
    const T: u64 = 1_000_000_000;

    /// A WRITE of 1 KiB on `flow`'s QP started at `start`, completed `mct` later, its first
    /// frame at PCP 3.
    fn write(start: u64, marks: u64, retx: Option<u64>) -> EdgeMessage {
        EdgeMessage {
            kind: Kind::Write as u64,
            marks,
            psn_first: 0,
            psn_last: 0,
            bytes: 1024,
            start_ns: start,
            pcp: 3,
            dscp: 26,
            retx_ns: retx,
            rnr_ns: None,
        }
    }

    /// 200 messages of the class up to 4 KiB, 1 µs each, but the 50th (40 µs, over a pause
    /// of priority 3 from 20 µs into it to 30 µs) and the 100th (30 µs, NAKed 10 µs into it).
    fn joined() -> Joined {
        let mut w = Whole { bounds: vec![4096], classes: vec![Dist::default(); 2], ..Default::default() };
        let key = FlowKey { ip_version: 4, dst_qp: 7, ..Default::default() };
        for i in 0..200u64 {
            let start = T + i * 100_000;
            let (m, mct) = match i {
                50 => (write(start, 0, None), 40_000),
                100 => (write(start, mark::NAK as u64, Some(start + 10_000)), 30_000),
                _ => (write(start, 0, None), 1_000),
            };
            w.classes[0].add(&Done::new(mct, 1024, LINK, None));
            w.done.push((key, start + mct, m));
        }
        Joined::take(&mut w)
    }

    fn pfc(start: u64, end: u64, complete: bool) -> Pfc {
        let pause = PauseTime {
            paused_ns: end - start,
            intervals: vec![[start, end]],
            intervals_complete: complete,
            first_frame_ns: None,
        };
        let counts = PauseCounts { frames: 1, xoff: 1, xon: 0, quanta: 0, first_ns: start, last_ns: start };
        let sender = PfcSender {
            mac: "02:00:00:00:00:01".into(),
            device: None,
            port: None,
            priority: 3,
            counts,
            pause,
            ecn_lead: None,
        };
        Pfc {
            frames: 1,
            pause_8023x_frames: 0,
            senders: vec![sender],
            pause_senders: Vec::new(),
            storms: Vec::new(),
            link_speed_bps: LINK,
            rates: Vec::new(),
            edge: None,
        }
    }

    fn settings() -> TailEdge {
        TailEdge { dscp_priority: Vec::new(), threshold_ns: None, topology: false, straggler_ratio: 1.5 }
    }

    #[test]
    fn the_joined_messages_laid_over_the_merged_pauses() {
        let j = joined();
        let s = settings();
        let cuts = Cuts::new();
        let around =
            |settings| Around { settings, topology: None, cuts: Some(&cuts), incast: true, hops: false, unkept: 0 };
        let paused_from = T + 50 * 100_000 + 20_000;
        let p = pfc(paused_from, paused_from + 10_000, true);
        let t = tail(&j, (&p, &Incast::default()), &around(vec![Some(&s), Some(&s)])).expect("told");
        // The class's p99 of 198 × 1 µs and two slower is 1 µs: both are the tail.
        assert_eq!(
            t.thresholds,
            vec![TailThreshold { class: "le_4KiB".into(), threshold_ns: 1_000, from: "p99".into() }]
        );
        assert_eq!((t.messages, t.examined), (2, 2));
        let worst: Vec<(u64, &str, u64)> =
            t.worst.iter().map(|w| (w.mct_ns, w.causes[0].cause.as_str(), w.causes[0].overlap_ns)).collect();
        // The slowest overlapped 10 µs of pause; the other was NAKed 20 µs before its end.
        assert_eq!(worst, vec![(40_000, "pause", 10_000), (30_000, "retransmission", 20_000)]);
        assert_eq!(t.causes[0].source.as_deref(), Some("priority 3 from 02:00:00:00:00:01"));
        // What the merge does not know as one run leaves the tail each report's.
        let other = TailEdge { threshold_ns: Some(5_000), ..settings() };
        assert!(tail(&j, (&p, &Incast::default()), &around(vec![Some(&s), Some(&other)])).is_err());
        assert!(tail(&j, (&p, &Incast::default()), &around(vec![Some(&s), None])).is_err());
        let incomplete = pfc(paused_from, paused_from + 10_000, false);
        assert!(tail(&j, (&incomplete, &Incast::default()), &around(vec![Some(&s)])).is_err());
        let unstitched = Around { cuts: None, ..around(vec![Some(&s)]) };
        assert!(tail(&j, (&p, &Incast::default()), &unstitched).is_err());
    }

    #[test]
    fn a_message_keeps_its_times_through_the_edge() {
        let m = write(T, mark::NAK as u64, Some(T + 7));
        let back = EdgeMessage::of_completed(&m.completed(3, T + 100, None));
        assert_eq!(back, m);
        assert_eq!(EdgeMessage::of_held(&m.held(true)), m);
        // Kept in 32 bits after its start, as the analysis keeps it: saturated.
        let late = write(T, 0, Some(T + (1 << 40)));
        let kept = msg_of(&EdgeMessage::of_held(&late.held(false)));
        assert_eq!(kept.retx_ns(), Some(T + u32::MAX as u64 - 1));
        let msg = Msg::sent(Kind::Write, 0, T, 1024, 3, 26).with_times(Some(T + (1 << 40)), None);
        assert_eq!(msg.retx_ns(), kept.retx_ns());
    }
}
