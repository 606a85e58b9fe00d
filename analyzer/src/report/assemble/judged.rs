//! The findings of a run in one place: the report, the export, `/metrics` and live evidence
//! all judge through [`judge`], so none of them can list findings the others do not.

use super::{audit, fabric, load_balancing, messages, vantage};
use crate::model::*;
use crate::pipeline::Pipeline;

/// The sections that carry findings, and the audit list the findings of all of them end in
/// (the ECMP section keeps its own findings).
pub struct Judged {
    pub audit: Vec<Finding>,
    pub pfc: Pfc,
    pub vantage: Option<Vantage>,
    pub load_balancing: Option<LoadBalancing>,
    pub messages: Option<Messages>,
}

/// Judges the run; `ecmp` is the run's ECMP section (its uplinks tell spraying).
pub fn judge(run: &Pipeline, ecmp: &Ecmp) -> Judged {
    let mut audit = audit::findings(run);
    let vantage = vantage::section(run, &mut audit);
    let load_balancing = load_balancing::section(run, ecmp, &mut audit);
    let pfc = fabric::pfc(run);
    let data = &run.analyses.marks.data_frames;
    let data_seen =
        |prio: u8| data.get(prio as usize).copied().unwrap_or(0) + data[crate::analyses::ecn_lead::UNKNOWN] > 0;
    audit.extend(fabric::pfc_findings(&pfc, run.analyses.config.pfc_rate_max, data_seen));
    let messages = messages::section(run);
    if let Some(m) = &messages {
        audit.extend(messages::findings(m, run.analyses.config.straggler_ratio));
    }
    Judged { audit, pfc, vantage, load_balancing, messages }
}
