//! The congestion trees as Graphviz (`--dot`).

use crate::model::CongestionTrees;

use crate::analyses::pause::ALL_PRIORITIES;

/// Graphviz of the trees: pause edges with their paused time, roots and congested egress
/// marked. Names have their control characters and backslashes escaped
/// ([`super::text::escape`]), quotes too, so no name ends or breaks a statement.
pub fn dot(trees: &CongestionTrees) -> String {
    let trees = &*super::text::escaped(trees);
    let mut o = String::from("digraph congestion {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n");
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\\\""));
    for t in &trees.trees {
        let prio = if t.priority == ALL_PRIORITIES { "802.3x".to_string() } else { format!("prio {}", t.priority) };
        for r in &t.roots {
            let egress = match (&r.congested_port, &r.congested_host) {
                (Some(p), Some(h)) => format!("\\ncongested egress {p} → {h}"),
                (None, Some(h)) => format!("\\ncongested toward {h}"),
                _ => String::new(),
            };
            o += &format!(
                "  {} [style=filled, fillcolor=\"#f4a6a6\", label={}];\n",
                q(&r.device),
                q(&format!("{}\\nroot ({prio}){egress}", r.device))
            );
            if let Some(h) = &r.congested_host {
                o += &format!("  {} [shape=ellipse, color=red];\n", q(h));
            }
        }
        for e in &t.edges {
            o += &format!(
                "  {} -> {} [label={}];\n",
                q(&e.from),
                q(&e.to),
                q(&format!("pauses ({prio}) {:.3} ms", e.paused_ns as f64 / 1e6))
            );
        }
    }
    for d in &trees.deadlocks {
        for w in 0..d.cycle.len() {
            let (a, b) = (&d.cycle[w], &d.cycle[(w + 1) % d.cycle.len()]);
            o += &format!("  {} -> {} [color=red, penwidth=2, label=\"deadlock\"];\n", q(a), q(b));
        }
    }
    o += "}\n";
    o
}
