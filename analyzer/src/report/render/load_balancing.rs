//! The `load_balancing` section as text and as a table of the page: the mode, what it was
//! judged on, the reordering, and the sprayed flows.

use std::fmt::Write as _;

use super::text::html as esc;
use crate::model::{LbBasis, LoadBalancing, Report};

/// "sprayed over u0, u1 (2 of 3 flows) · 10 of 63 requests reordered (15.9 %), displacement
/// p50 1 max 2".
fn headline(lb: &LoadBalancing) -> String {
    let mode = serde_json::to_value(lb.mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let basis = match lb.basis {
        LbBasis::Uplinks => format!("uplinks {}", lb.uplinks.join(", ")),
        LbBasis::Reordering => "reordering (no uplinks labelled)".to_string(),
    };
    let r = &lb.reorder;
    let displacement = match (r.displacement_p50, r.displacement_max) {
        (Some(p), Some(m)) => format!(", displacement p50 {p} max {m}"),
        _ => String::new(),
    };
    format!(
        "{mode} ({} of {} request flows sprayed, judged on {basis}) · {} of {} requests reordered ({:.1} %){displacement}",
        lb.sprayed_flows,
        lb.flows,
        r.reordered,
        r.packets,
        r.ratio * 100.0
    )
}

/// The section in the human summary: the headline, then the sprayed flows.
pub fn text(o: &mut String, lb: &LoadBalancing, top: usize) {
    let _ = writeln!(o, "\nLoad balancing: {}", headline(lb));
    for f in lb.sprayed.iter().take(top) {
        let _ = writeln!(
            o,
            "  {}: {}{} requests, {} reordered, {} PSN-sequence NAKs",
            f.flow.label(),
            f.uplinks.map_or(String::new(), |n| format!("{n} uplinks, ")),
            f.requests,
            f.reordered,
            f.psn_sequence_naks
        );
    }
}

/// The section of the page.
pub fn html(o: &mut String, r: &Report, page: &super::page::Page<'_>) {
    let Some(lb) = &r.load_balancing else { return };
    let _ = writeln!(o, "<h2 id=\"load-balancing\">Load balancing</h2><p>{}</p>", esc(&headline(lb)));
    if lb.sprayed.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<table id=\"load_balancing\"><tr><th>flow</th><th>uplinks</th><th>requests</th><th>reordered</th><th>displacement p50 / max</th><th>PSN-sequence NAKs</th></tr>"
    );
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    for f in lb.sprayed.iter().take(page.top) {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td{}>{}</td></tr>",
            esc(&f.flow.label()),
            opt(f.uplinks),
            f.requests,
            f.reordered,
            opt(f.displacement_p50),
            opt(f.displacement_max),
            if f.psn_sequence_naks > 0 { " class=\"warning\"" } else { "" },
            f.psn_sequence_naks
        );
    }
    let _ = writeln!(o, "</table>{}", super::page::more(lb.sprayed.len(), page.top, "sprayed flows"));
}
