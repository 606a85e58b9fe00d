//! The `vantage` section: points, hops, and a `loss_between` finding per hop that lost frames.

use crate::model::*;
use crate::pipeline::Pipeline;

/// The section when the run had several vantage points (else none); findings go to `audit`.
pub fn section(run: &Pipeline, audit: &mut Vec<Finding>) -> Option<Vantage> {
    let v = &run.analyses.vantage;
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
