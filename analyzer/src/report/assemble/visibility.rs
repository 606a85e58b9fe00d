//! What the vantage point could not see. A capture point that shows no RoCE or no PFC is
//! usually blind to it, not witness to its absence; the report says so instead of showing
//! zeros.

use crate::model::{Note, NoteCode, Report};
use crate::pipeline::Pipeline;

fn note(code: NoteCode, message: String) -> Note {
    Note::new(code, message)
}

/// The notes of a run, in the order the report lists them: the hardware bypass, then one per
/// [`RULES`] entry that applies.
pub fn notes(run: &Pipeline, report: &Report) -> Vec<Note> {
    let mut out = Vec::new();
    let c = &report.capture.classes;
    let roce = c["roce"] + c["cnp"];
    let bypass = roce == 0 && !run.engine.visibility.rdma_devices.is_empty();
    if bypass {
        out.push(note(
            NoteCode::HardwareRoceBypass,
            format!(
                "no RoCE frame reached XDP on this interface, whose NIC has RDMA device(s) {}: the \
                 hardware RNIC moves RoCE without the kernel (and consumes PFC). Zeros here say \
                 nothing about the fabric: capture on a switch mirror/ERSPAN port, or use the NIC's \
                 offloaded sniffer and analyse its capture with --pcap.",
                run.engine.visibility.rdma_devices.join(", ")
            ),
        ));
    }
    let pairs: Vec<(u8, &[u8; 16], &[u8; 16])> =
        run.engine.flows.iter().map(|(k, _)| (k.ip_version, &k.src, &k.dst)).collect();
    let given = Given {
        topology: run.analyses.config.topology.is_some(),
        ce_marked: run.engine.flows.iter().map(|(_, s)| s.ecn[3]).sum(),
        several_points: report.vantage.is_some(),
        one_way: one_way(pairs, |(v, a, b)| (*v, *b, *a)),
    };
    let told = RULES.iter().filter_map(|rule| match rule.tell {
        Tell::Report(tell) => tell(report, given),
        Tell::Run(tell) => tell(run, report),
    });
    // The bypass says why no RoCE came: "no RoCE" would repeat it.
    out.extend(told.filter(|n| !(bypass && n.code == NoteCode::NoRoce)));
    out
}

/// The notes a report's own sections decide, in the order a run lists them: those a merge
/// tells again over its merged sections (a run's others are each report's, carried).
pub fn told_by_report(report: &Report, given: Given) -> Vec<Note> {
    let tells = RULES.iter().filter_map(|rule| match rule.tell {
        Tell::Report(tell) => Some(tell),
        Tell::Run(_) => None,
    });
    tells.filter_map(|tell| tell(report, given)).collect()
}

/// Whether a merge tells a note of this code again over the merged report
/// ([`told_by_report`]) instead of carrying each report's.
pub fn told_by_merge(code: NoteCode) -> bool {
    RULES.iter().any(|r| r.code == code && matches!(r.tell, Tell::Report(_)))
}

/// What the notes read from a report need to know besides it.
#[derive(Debug, Clone, Copy)]
pub struct Given {
    /// A topology was given (`--topology`): PFC senders not placed are not in it.
    pub topology: bool,
    /// CE-marked frames of the flows (a run's report may stream its flows instead of holding
    /// them; a merge holds them: [`ce_marked`]).
    pub ce_marked: u64,
    /// Frames were matched between vantage points (a merge: in any of its reports, whether or
    /// not it could merge their sections).
    pub several_points: bool,
    /// Of the (src, dst) host pairs of RoCE flows, those seen one way only, and all of them
    /// ([`one_way`]; a merge's: [`report_one_way`]).
    pub one_way: (usize, usize),
}

/// CE-marked frames of a report's flows, when it holds them.
pub fn ce_marked(r: &Report) -> u64 {
    r.flows.iter().map(|f| f.ecn.ce).sum()
}

/// A note that one fact decides: None when it does not apply.
struct Rule {
    code: NoteCode,
    tell: Tell,
}

/// Where the fact is: in the report (a merge can tell the note again), or in the run only.
enum Tell {
    Report(fn(&Report, Given) -> Option<Note>),
    Run(fn(&Pipeline, &Report) -> Option<Note>),
}

const fn report(code: NoteCode, tell: fn(&Report, Given) -> Option<Note>) -> Rule {
    Rule { code, tell: Tell::Report(tell) }
}

const fn run(code: NoteCode, tell: fn(&Pipeline, &Report) -> Option<Note>) -> Rule {
    Rule { code, tell: Tell::Run(tell) }
}

/// The notes one fact decides each, in the order the report lists them.
const RULES: [Rule; 21] = [
    report(NoteCode::NoRoce, no_roce),
    report(NoteCode::NoPfc, no_pfc),
    report(NoteCode::OneDirection, one_direction),
    report(NoteCode::Malformed, malformed),
    report(NoteCode::Partial, partial),
    report(NoteCode::BthCut, bth_cut),
    report(NoteCode::SnapCut, snap_cut),
    run(NoteCode::SeveralCpus, several_cpus),
    run(NoteCode::SkippedInterfaces, skipped_interfaces),
    report(NoteCode::FlowsFolded, flows_folded),
    run(NoteCode::ListsCapped, lists_capped),
    run(NoteCode::ImplausibleTimestamps, implausible_timestamps),
    report(NoteCode::CutCopies, cut_copies),
    run(NoteCode::TimelineOff, timeline_off),
    report(NoteCode::PfcUnplaced, pfc_unplaced),
    report(NoteCode::Mirrored, mirrored),
    report(NoteCode::MatchedCopies, matched_copies),
    report(NoteCode::SightingsEvicted, sightings_evicted),
    report(NoteCode::NoCompletions, no_completions),
    report(NoteCode::CaptureLoss, capture_loss),
    report(NoteCode::ThresholdsNeedTwoPoints, thresholds_need_two_points),
];

/// Frames the network delivered and this capture did not hold (a merge's: over the merged
/// loss, a cut's gaps told by the ACKs after it).
fn capture_loss(r: &Report, _: Given) -> Option<Note> {
    let l = r.capture.loss?;
    Some(note(
        NoteCode::CaptureLoss,
        format!(
            "this capture missed {} frames ({:.3} % of the RoCE frames) that the network delivered: PSNs skipped here that a later ACK covered, with no NAK and no retransmission (counted per flow in psn.capture_missed, not as loss). An offloaded NIC sniffer or a full capture ring drops frames under load: capture on a mirror port, give the capture a larger ring (tcpdump -B, dumpcap -B), or a shorter snap length (-s 128 keeps every RoCE header).",
            l.frames_missed,
            l.ratio * 100.0
        ),
    ))
}

/// CE marks, one vantage point: which switch marked, and at what queue, needs two.
fn thresholds_need_two_points(_: &Report, given: Given) -> Option<Note> {
    let ce = given.ce_marked;
    (ce > 0 && !given.several_points).then(|| {
        note(
            NoteCode::ThresholdsNeedTwoPoints,
            format!(
                "{ce} CE-marked frames were seen from one vantage point: the CE fraction per priority and host pair over time is in marking, but a switch's marking thresholds (Kmin, Kmax, pmax) need the same frames seen before and after it. Capture at two points around the switch (two labelled inputs, or ERSPAN from both sides) to get vantage.hops[].marking_profile."
            ),
        )
    })
}

/// Messages sent and none completed: the responses are not seen here.
fn no_completions(r: &Report, _: Given) -> Option<Note> {
    let m = r.messages.as_ref()?;
    (m.completed == 0 && m.pending > 0).then(|| {
        note(
            NoteCode::NoCompletions,
            format!(
                "{} messages were sent and none completed: this vantage point does not see the responses (ACKs, READ responses) of their flows, so there are no completion times. Capture both directions (a mirror of both ports, or the receiver's side too).",
                m.pending
            ),
        )
    })
}

fn bth_cut(r: &Report, _: Given) -> Option<Note> {
    let bth_cut = r.capture.noted.bth_cut;
    if bth_cut == 0 {
        return None;
    }
    let needs = match r.capture.noted.bth_needs {
        0 => "the headers up to the end of the BTH (about 60 to 100 bytes)".to_string(),
        n => format!("{n} bytes"),
    };
    Some(note(
        NoteCode::BthCut,
        format!(
            "RoCE was seen, but {bth_cut} RoCE frames were cut before the end of their BTH (a snap length or \
             truncating mirror session too short) and counted as truncated_header: a capture must keep at \
             least {needs} (128 keeps every RoCE header)."
        ),
    ))
}

fn snap_cut(r: &Report, _: Given) -> Option<Note> {
    let n = r.capture.noted.ext_cut;
    (n > 0).then(|| {
        note(
            NoteCode::SnapCut,
            format!(
                "{n} RoCE frames were cut by the snap length before their extended headers \
                 (RETH/AETH/… fields unavailable for them); bytes use original lengths."
            ),
        )
    })
}

fn several_cpus(run: &Pipeline, _: &Report) -> Option<Note> {
    let n = run.engine.visibility.several_cpus;
    (n > 0).then(|| {
        note(
            NoteCode::SeveralCpus,
            format!(
                "{n} flows were handled on more than one CPU. The kernel keeps one entry per flow (its \
                 counters and PSN state), which the CPUs update without a lock: where two CPUs handled \
                 frames of one flow at the same moment, its counts (packets, bytes, opcodes, ECN, gaps, \
                 duplicates) can be off by those frames; the frame totals of the capture are exact. A \
                 NIC's RSS keeps a flow on one queue; a software device (veth, soft-RoCE), a sender \
                 moving between CPUs or a change of the NIC's RSS table spreads it."
            ),
        )
    })
}

fn skipped_interfaces(run: &Pipeline, _: &Report) -> Option<Note> {
    let skipped = &run.engine.visibility.skipped_linktypes;
    if skipped.is_empty() {
        return None;
    }
    let types: Vec<String> = skipped.iter().map(|t| t.to_string()).collect();
    Some(note(
        NoteCode::SkippedInterfaces,
        format!(
            "{} packets of pcapng interfaces with link type {} (not read by this tool) were skipped; \
             the other interfaces were analysed.",
            run.engine.dropped.get(&crate::engine::DropReason::UnreadLinkType).copied().unwrap_or(0),
            types.join(", ")
        ),
    ))
}

fn flows_folded(report: &Report, _: Given) -> Option<Note> {
    let f = report.capture.flows_folded.as_ref()?;
    Some(note(
        NoteCode::FlowsFolded,
        format!(
            "{} idle flows ({} packets, {} bytes) were folded into capture.flows_folded to bound memory: \
             the kernel had let them go, and more idle flows than --max-flows were kept (the oldest went \
             first); they are in the totals, not in flows, and their per-flow analysis state is gone.",
            f.flows, f.packets, f.bytes
        ),
    ))
}

fn lists_capped(run: &Pipeline, report: &Report) -> Option<Note> {
    use crate::analyses::incast::{MAX_EPISODE_SENDERS, MAX_EPISODES_PER_DEST, MAX_LISTED_SENDERS};
    use crate::model::MAX_LISTED_FLOWS;
    let (dropped, capped) =
        (run.analyses.incast.episodes_dropped(), run.analyses.incast.episodes_with_senders_capped());
    let findings = report.audit.iter().chain(&report.ecmp.findings).filter(|f| f.flows_omitted > 0).count();
    let trees = report.congestion_tree.trees.iter().filter(|t| t.flows_omitted > 0).count();
    let deadlocks = report.congestion_tree.deadlocks_omitted;
    if dropped + capped == 0 && findings + trees == 0 && deadlocks == 0 {
        return None;
    }
    let deadlocks = match deadlocks {
        0 => String::new(),
        n => format!(
            "; {n} deadlocks past the first {} were counted, not listed",
            crate::analyses::deadlock::MAX_LISTED_DEADLOCKS
        ),
    };
    Some(note(
        NoteCode::ListsCapped,
        format!(
            "lists were capped to bound memory: {dropped} incast episodes past {MAX_EPISODES_PER_DEST} at one \
             destination were counted, not listed; {capped} episodes list only part of their senders (at \
             most {MAX_EPISODE_SENDERS} each, {MAX_LISTED_SENDERS} over all episodes; their bytes, CE and CNP \
             counts cover all); {findings} findings and \
             {trees} congestion trees list their first {MAX_LISTED_FLOWS} flows (flows_omitted counts the rest)\
             {deadlocks}."
        ),
    ))
}

fn implausible_timestamps(run: &Pipeline, _: &Report) -> Option<Note> {
    let n = run.engine.implausible_timestamps;
    (n > 0).then(|| {
        note(
            NoteCode::ImplausibleTimestamps,
            format!(
                "{n} frames carry timestamps more than a year away from the rest of the capture: they are left \
                 out of its span (a capture clock gone wrong?); their flows' first/last times show them as read."
            ),
        )
    })
}

fn cut_copies(r: &Report, _: Given) -> Option<Note> {
    let n = r.capture.noted.cut_copies;
    (n > 0).then(|| {
        note(
            NoteCode::CutCopies,
            format!(
                "{n} frames were copies cut short (a truncating mirror session, or a capture that kept \
                 no original length): they are classified and counted at the length their IP header \
                 states; fields past the cut are unavailable for them."
            ),
        )
    })
}

fn timeline_off(run: &Pipeline, _: &Report) -> Option<Note> {
    (!run.engine.timeline).then(|| {
        note(
            NoteCode::TimelineOff,
            "timeline records were off (--no-timeline): RTT, CE → CNP timing, CNP pacing and incast \
             episodes had no input and are empty; PSN/NAK counters and PFC come from the kernel maps."
                .into(),
        )
    })
}

fn pfc_unplaced(report: &Report, given: Given) -> Option<Note> {
    let unplaced = &report.congestion_tree.unresolved;
    if unplaced.is_empty() {
        return None;
    }
    Some(note(
        NoteCode::PfcUnplaced,
        format!(
            "{} PFC/PAUSE senders ({}) {}: whom they pause, and so the congestion tree above them, \
             cannot be resolved; they are named by MAC.",
            unplaced.len(),
            unplaced.join(", "),
            if given.topology { "are not in the topology or not linked" } else { "are not placed: give --topology" }
        ),
    ))
}

fn mirrored(r: &Report, _: Given) -> Option<Note> {
    let n = r.capture.noted.mirrored;
    (n > 0).then(|| {
        note(
            NoteCode::Mirrored,
            format!(
                "{n} frames were mirrored copies (GRE/ERSPAN), analysed as the inner frame; their \
                 lengths come from the inner IP header."
            ),
        )
    })
}

fn matched_copies(r: &Report, _: Given) -> Option<Note> {
    let copies = r.capture.noted.matched_copies;
    (copies > 0).then(|| {
        note(
            NoteCode::MatchedCopies,
            format!(
                "{copies} frames were copies of frames seen at another vantage point (another input, or \
                 another mirror origin of the same input, within --match-window) and were counted once: \
                 at their first copy, with the ECN of their last."
            ),
        )
    })
}

fn sightings_evicted(r: &Report, _: Given) -> Option<Note> {
    let evicted = r.capture.noted.sightings_evicted;
    (evicted > 0).then(|| {
        note(
            NoteCode::SightingsEvicted,
            format!(
                "{evicted} sightings of mirrored copies were given up within --match-window to make room in the \
                 kernel's table of {} frame identities: a later copy of such a frame was counted as a frame \
                 (shorten --match-window, or mirror fewer origins to this port).",
                analyzer_common::maps::DEFAULT_MAX_SIGHTINGS
            ),
        )
    })
}

/// Of (src, dst) host pairs (repeated as their flows are), those seen one way only, and all
/// of them. A sorted vector of borrowed addresses, not a tree of copies: 200 000 flows' pairs
/// took 15 MB as a `BTreeSet` at the report's peak.
pub fn one_way<T: Ord>(mut pairs: Vec<T>, reversed: impl Fn(&T) -> T) -> (usize, usize) {
    pairs.sort_unstable();
    pairs.dedup();
    (pairs.iter().filter(|p| pairs.binary_search(&reversed(p)).is_err()).count(), pairs.len())
}

/// The one-way host pairs of a report's flows (for a merged report).
pub fn report_one_way(report: &Report) -> (usize, usize) {
    let pairs: Vec<(&str, &str)> = report.flows.iter().map(|f| (f.src.as_str(), f.dst.as_str())).collect();
    one_way(pairs, |(a, b)| (*b, *a))
}

/// The count of one frame class in a report (0 when the report has none).
fn class_count(report: &Report, class: &str) -> u64 {
    report.capture.classes.get(class).copied().unwrap_or(0)
}

fn no_roce(report: &Report, _: Given) -> Option<Note> {
    // RoCE cut before its BTH ends is RoCE seen: no "no RoCE" note then, but what the capture
    // needs (`bth_cut`).
    let roce = class_count(report, "roce") + class_count(report, "cnp");
    (roce == 0 && report.capture.noted.bth_cut == 0).then(|| {
        note(
            NoteCode::NoRoce,
            "no RoCE frames seen. Hardware RNICs (ConnectX and others) move RoCE without the \
             kernel, so a GPU host's own interface shows none: capture on a switch mirror or \
             ERSPAN collector port, a tap, or with the NIC's offloaded sniffer."
                .into(),
        )
    })
}

fn no_pfc(report: &Report, _: Given) -> Option<Note> {
    (report.pfc.frames + report.pfc.pause_8023x_frames == 0).then(|| {
        note(
            NoteCode::NoPfc,
            "no PFC or PAUSE frames seen. NICs and switch ports consume MAC control frames; only \
             a mirror that copies them shows PFC, so none here does not mean none were sent."
                .into(),
        )
    })
}

/// Host pairs seen one way only: their ACKs, NAKs, CNPs and read responses are elsewhere.
fn one_direction(_: &Report, given: Given) -> Option<Note> {
    let (one_way, all_pairs) = given.one_way;
    (one_way > 0).then(|| {
        note(
            NoteCode::OneDirection,
            format!(
                "{one_way} of {all_pairs} RoCE host pairs (src→dst) were seen in one direction only: \
                 their ACK/NAK, CNP and read-response traffic is outside this capture."
            ),
        )
    })
}

fn malformed(report: &Report, _: Given) -> Option<Note> {
    let malformed: u64 = analyzer_common::FrameClass::ALL
        .iter()
        .filter(|k| k.is_malformed())
        .map(|k| class_count(report, k.name()))
        .sum();
    (malformed > 0).then(|| {
        note(
            NoteCode::Malformed,
            format!("{malformed} frames could not be fully parsed; capture.classes counts them by kind."),
        )
    })
}

fn partial(report: &Report, _: Given) -> Option<Note> {
    report.capture.partial.then(|| {
        note(
            NoteCode::Partial,
            "an input ended inside a record: the report covers everything before that point.".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merge tells again the notes a report decides, and carries the rest: each code is one
    /// or the other.
    #[test]
    fn a_merge_tells_again_what_a_report_decides_and_carries_the_rest() {
        let told: Vec<NoteCode> = NoteCode::ALL.iter().copied().filter(|c| told_by_merge(*c)).collect();
        assert!(told.contains(&NoteCode::NoCompletions) && told.contains(&NoteCode::BthCut));
        assert!(told.contains(&NoteCode::NoRoce) && told.contains(&NoteCode::OneDirection));
        assert!(!told_by_merge(NoteCode::SeveralCpus) && !told_by_merge(NoteCode::TimelineOff));
        // No code has two rules (a merge would tell it and carry it, or tell it twice).
        assert!(RULES.iter().enumerate().all(|(i, r)| RULES[..i].iter().all(|o| o.code != r.code)));
    }
}
