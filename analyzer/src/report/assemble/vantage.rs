//! The `vantage` section: points, hops, and a `loss_between` finding per hop that lost frames.

use crate::analyses::vantage::Hop;
use crate::model::*;
use crate::pipeline::Pipeline;

/// The section when the run had several vantage points (else none); findings go to `audit`.
pub fn section(run: &Pipeline, audit: &mut Vec<Finding>) -> Option<Vantage> {
    let v = &run.vantage;
    if v.points.len() < 2 {
        return None;
    }
    let name = |i: u16| v.points[i as usize].name.clone();
    let mut hops = Vec::new();
    for hop in v.hop_list() {
        let (from, to) = (name(hop.from), name(hop.to));
        if hop.missing > 0 {
            let flows = hop.worst.len();
            let worst = hop.worst.iter().take(3).map(|(k, n)| format!("{} ({n})", flow_label(k))).collect::<Vec<_>>();
            audit.push(Finding::new(
                Severity::Warning,
                FindingCode::LossBetween,
                format!(
                    "{} frames of {flows} flows seen at {from} never reached {to} while both were capturing; most: {}{}",
                    hop.missing,
                    worst.join(", "),
                    outside_note(hop.outside, &to)
                ),
                hop.worst.iter().map(|(k, _)| flow_ref(k)).collect(),
            ));
        }
        hops.push(VantageHop {
            from,
            to,
            flows: hop.state.flows.len() as u64,
            frames_matched: hop.state.matched,
            frames_missing: hop.missing,
            frames_outside_span: hop.outside,
            ce_marked: hop.state.ce_marked,
            marking: hop.state.marking.as_deref().map(|s| super::dcqcn::series_json(s, v.point_ns)),
            latency_ns: hop.state.latency.percentiles().unwrap_or_default(),
            marking_profile: marking_profile(run, &hop, audit),
        });
    }
    Some(Vantage {
        match_window_ns: v.window_ns,
        points: v
            .points
            .iter()
            .map(|p| VantagePoint {
                name: p.name.clone(),
                label: p.label.clone(),
                origin: p.origin.clone(),
                frames: p.frames,
                first_ns: p.first_ns,
                last_ns: p.last_ns,
            })
            .collect(),
        hops,
        copies: v.copies,
        peak_held: v.peak_held as u64,
    })
}

/// The hop's marking profile when frames were marked between its points, and
/// `ecn_threshold_low` when its fitted Kmin lies below `--kmin-min`.
fn marking_profile(run: &Pipeline, hop: &Hop, audit: &mut Vec<Finding>) -> Option<MarkingProfile> {
    if hop.state.ce_marked == 0 {
        return None;
    }
    let fit = hop.state.marks.fit()?;
    let bps = run.analyses.config.link_speed_bps;
    let bytes = |ns: u64| (ns as u128 * bps as u128 / 8_000_000_000) as u64;
    let p = MarkingProfile {
        frames: fit.frames,
        marked: fit.marked,
        kmin_ns: fit.kmin_ns,
        kmax_ns: fit.kmax_ns,
        kmin_bytes: fit.kmin_ns.map(bytes),
        kmax_bytes: fit.kmax_ns.map(bytes),
        pmax: fit.pmax,
        confidence: fit.confidence.name().into(),
    };
    let floor = run.analyses.config.kmin_min_bytes();
    if let Some(kmin) = p.kmin_bytes.filter(|k| *k < floor) {
        let v = &run.vantage;
        let (from, to) = (&v.points[hop.from as usize].name, &v.points[hop.to as usize].name);
        let kmax = p.kmax_bytes.map_or_else(|| "not reached".into(), kb);
        audit.push(Finding::new(
            Severity::Warning,
            FindingCode::EcnThresholdLow,
            format!(
                "the switch between {from} and {to} marks CE from a queue of {} (Kmin; Kmax {kmax}, pmax {:.2}, fitted to {} marked of {} frames, {} confidence), below {} for {} links: it marks before real congestion, DCQCN cuts rates that need no cut. Raise the ECN marking threshold (Kmin) to at least {} (150–256 KB at 400 Gbit/s cut false marks from 8.3 % to 1.7 % in published tuning), keeping it below the PFC XOFF threshold.",
                kb(kmin),
                p.pmax.unwrap_or(0.0),
                p.marked,
                p.frames,
                p.confidence,
                kb(floor),
                gbps(bps),
                kb(floor),
            ),
            {
                let mut flows: Vec<_> = hop.state.flows.keys().collect();
                flows.sort();
                flows.into_iter().take(FLOWS_NAMED).map(flow_ref).collect()
            },
        ));
    }
    Some(p)
}

/// Flows a hop's finding names (the hop's, in key order).
const FLOWS_NAMED: usize = 10;

/// Bytes as KB (1000), one decimal.
fn kb(b: u64) -> String {
    format!("{:.1} KB", b as f64 / 1000.0)
}

fn gbps(bps: u64) -> String {
    format!("{} Gbit/s", bps / 1_000_000_000)
}

/// What lay outside the span both points captured, for the finding.
fn outside_note(outside: u64, to: &str) -> String {
    match outside {
        0 => String::new(),
        n => format!(" ({n} more were seen while {to} was not capturing: not counted)"),
    }
}

/// "src→dst QP" of a flow, for messages.
fn flow_label(k: &analyzer_common::flow::FlowKey) -> String {
    let r = flow_ref(k);
    format!("{}→{} {:#x}", r.src, r.dst, r.dst_qp)
}
