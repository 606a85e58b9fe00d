//! The messages in the human summary (the tail's leading cause opens it in the diagnosis): the
//! completion times per size class, the tail's causes and slowest messages, steadiness, rings.

use std::fmt::Write as _;

use crate::model::{Messages, Report};

fn us(ns: u64) -> String {
    if ns >= 10_000_000 { format!("{:.1} ms", ns as f64 / 1e6) } else { format!("{:.1} µs", ns as f64 / 1e3) }
}

fn gbps(bps: u64) -> String {
    format!("{:.2} Gbit/s", bps as f64 / 1e9)
}

/// The section.
pub fn section(o: &mut String, m: &Messages, top: usize) {
    let kinds: Vec<String> = m.by_kind.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(
        o,
        "\nMessages: {} completed ({}) · {} pending · {} partial · {} abandoned · {} evicted · vantage: {}",
        m.completed,
        if kinds.is_empty() { "none".into() } else { kinds.join(" · ") },
        m.pending,
        m.partial,
        m.abandoned,
        m.in_flight_evicted,
        m.vantage.position
    );
    let _ = writeln!(o, "  ({})", m.vantage.meaning);
    let _ = writeln!(
        o,
        "  {:<10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>14} {:>9}",
        "class", "messages", "p50", "p90", "p99", "p99.9", "max", "goodput p50", "slowdown"
    );
    for c in m.classes.iter().filter(|c| c.stats.messages > 0) {
        let (s, p) = (&c.stats, &c.stats.mct_ns);
        let slow = match (s.slowdown_p50, s.slowdown_p99) {
            (Some(a), Some(b)) => format!("{a:.1}/{b:.1}"),
            _ => "-".into(),
        };
        let _ = writeln!(
            o,
            "  {:<10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>14} {:>9}",
            c.name,
            s.messages,
            us(p.p50),
            us(p.p90),
            us(p.p99),
            us(p.p999),
            us(p.max),
            s.goodput_bps_p50.map(gbps).unwrap_or_else(|| "-".into()),
            slow
        );
    }
    if m.transfers.uc_messages + m.transfers.ud_messages > 0 {
        let t = &m.transfers;
        let _ = writeln!(
            o,
            "  unreliable: UC {} messages ({} B, transfer p50 {}) · UD {} messages ({} B)",
            t.uc_messages,
            t.uc_bytes,
            us(t.uc_transfer_ns.p50),
            t.ud_messages,
            t.ud_bytes
        );
    }
    tail(o, m, top);
    if let Some(s) = &m.steadiness.overall {
        let _ = writeln!(
            o,
            "  goodput per {} window: p5 {} · p50 {} · p95 {} · fluctuation {:.0} % over {} windows",
            us(m.steadiness.window_ns),
            gbps(s.p5_bps),
            gbps(s.p50_bps),
            gbps(s.p95_bps),
            s.fluctuation * 100.0,
            s.windows
        );
    }
    for ring in &m.rings.rings {
        let _ = writeln!(
            o,
            "  ring {}: straggler {} ({:.1}× below the median edge)",
            ring.hosts.join(" → "),
            ring.straggler,
            ring.straggler_ratio
        );
    }
}

fn tail(o: &mut String, m: &Messages, top: usize) {
    let t = &m.tail;
    if t.messages == 0 {
        return;
    }
    let th: Vec<String> =
        t.thresholds.iter().map(|x| format!("{} > {} ({})", x.class, us(x.threshold_ns), x.from)).collect();
    let _ = writeln!(o, "  tail: {} messages ({} examined) · {}", t.messages, t.examined, th.join(" · "));
    for c in &t.causes {
        let _ = writeln!(
            o,
            "    {:<15} {:>5.0} %  {:>6} messages  overlapped {}{}",
            c.cause,
            c.share * 100.0,
            c.messages,
            us(c.overlap_ns),
            c.source.as_ref().map(|s| format!(" · most: {s}")).unwrap_or_default()
        );
    }
    if t.hop_latencies_unkept > 0 {
        let _ = writeln!(
            o,
            "    {} hop latencies past the bound kept in time were not laid over the tail (queueing)",
            t.hop_latencies_unkept
        );
    }
    for w in t.worst.iter().take(top.min(5)) {
        let causes: Vec<String> = w.causes.iter().map(|c| format!("{} {}", c.cause, us(c.overlap_ns))).collect();
        let _ = writeln!(
            o,
            "    slowest: {} {} PSN {}–{} {} B in {}: {}",
            w.flow.label(),
            w.kind,
            w.psn_first,
            w.psn_last,
            w.bytes,
            us(w.mct_ns),
            causes.join(", ")
        );
    }
}

use super::text::html as esc;

/// Colours of the size classes' lines.
const COLOURS: [&str; 6] = ["#4a7bd0", "#d0784a", "#3a9a5b", "#9a3a8a", "#777777", "#b0a030"];

/// The page's section: the diagnosis, the CDF of completion times per size class on a log
/// axis, the tail's causes and its slowest messages.
pub fn html(o: &mut String, r: &Report, m: &Messages, page: &super::page::Page<'_>) {
    let _ = writeln!(o, "<section><h2 id=\"messages\">Messages and the tail</h2>");
    for f in r.audit.iter().filter(|f| {
        matches!(f.code, crate::model::FindingCode::TailDominatedBy | crate::model::FindingCode::RingStraggler)
    }) {
        let _ = writeln!(o, "<p class=\"{}\"><b>{}</b></p>", f.severity.name(), esc(&f.message));
    }
    let _ = writeln!(
        o,
        "<p>{} messages completed · {} pending · {} partial · {} abandoned · {} evicted · vantage {}: {}</p>",
        m.completed,
        m.pending,
        m.partial,
        m.abandoned,
        m.in_flight_evicted,
        esc(&m.vantage.position),
        esc(&m.vantage.meaning)
    );
    classes_html(o, m);
    cdf_svg(o, m);
    if !m.tail.causes.is_empty() {
        let _ = writeln!(
            o,
            "<h3>What the tail messages overlapped</h3><table id=\"tail-causes\"><tr><th>cause</th><th>messages</th><th>share</th><th>overlap</th><th>mostly from</th></tr>"
        );
        for c in &m.tail.causes {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0} %</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(&c.cause),
                c.messages,
                c.share * 100.0,
                us(c.overlap_ns),
                esc(c.source.as_deref().unwrap_or(""))
            );
        }
        let _ = writeln!(o, "</table>");
        worst_html(o, m, page);
    }
    let _ = writeln!(o, "</section>");
}

/// Completion times per size class: count, percentiles, goodput, slowdown.
fn classes_html(o: &mut String, m: &Messages) {
    let _ = writeln!(
        o,
        "<table id=\"mct-classes\"><tr><th>size class</th><th>messages</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>goodput p50</th><th>slowdown p50 / p99</th></tr>"
    );
    for c in m.classes.iter().filter(|c| c.stats.messages > 0) {
        let (s, p) = (&c.stats, &c.stats.mct_ns);
        let slow = match (s.slowdown_p50, s.slowdown_p99) {
            (Some(a), Some(b)) => format!("{a:.1} / {b:.1}"),
            _ => "-".into(),
        };
        let cells: String =
            [p.p50, p.p90, p.p99, p.p999, p.max].iter().map(|v| format!("<td class=\"n\">{}</td>", us(*v))).collect();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td>{cells}<td class=\"n\">{}</td><td class=\"n\">{slow}</td></tr>",
            esc(&c.name),
            s.messages,
            s.goodput_bps_p50.map(gbps).unwrap_or_else(|| "-".into())
        );
    }
    let _ = writeln!(o, "</table>");
}

/// The slowest tail messages, `--top` of them, with their causes and evidence.
fn worst_html(o: &mut String, m: &Messages, page: &super::page::Page<'_>) {
    let _ = writeln!(
        o,
        "<h3>The slowest tail messages</h3><table id=\"tail-worst\"><tr><th>flow</th><th>kind</th><th>PSN</th><th>bytes</th><th>MCT</th><th>causes</th><th>evidence</th></tr>"
    );
    for w in m.tail.worst.iter().take(page.top) {
        let causes: Vec<String> = w.causes.iter().map(|c| format!("{} {}", c.cause, us(c.overlap_ns))).collect();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}–{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.flow.label()),
            esc(&w.kind),
            w.psn_first,
            w.psn_last,
            w.bytes,
            us(w.mct_ns),
            esc(&causes.join(", ")),
            page.link(w.evidence.as_ref())
        );
    }
    let _ = writeln!(o, "</table>{}", super::page::more(m.tail.worst.len(), page.top, "tail messages listed"));
}

/// One line per size class: the share of its messages completed within x (log axis).
fn cdf_svg(o: &mut String, m: &Messages) {
    let growth = crate::analyses::stats::GROWTH;
    let classes: Vec<_> = m.classes.iter().filter(|c| c.stats.messages > 0).collect();
    let (lo, hi) = classes
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), c| (lo.min(c.stats.mct_ns.min.max(1)), hi.max(c.stats.mct_ns.max)));
    if classes.is_empty() || hi == 0 {
        return;
    }
    let (l0, l1) = ((lo as f64).log10().floor(), (hi as f64).log10().ceil().max((lo as f64).log10().floor() + 1.0));
    let (w, h, left) = (640.0, 220.0, 60.0);
    let x = |ns: f64| left + (ns.max(1.0).log10() - l0) / (l1 - l0) * w;
    let y = |f: f64| 10.0 + (1.0 - f) * h;
    let _ = writeln!(
        o,
        "<svg id=\"mct-cdf\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">",
        left + w + 140.0,
        h + 50.0
    );
    for d in l0 as i32..=l1 as i32 {
        let xd = x(10f64.powi(d));
        let _ = writeln!(
            o,
            "<line x1=\"{xd:.1}\" y1=\"10\" x2=\"{xd:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            10.0 + h,
            xd - 12.0,
            h + 28.0,
            esc(&us(10u64.pow(d as u32)))
        );
    }
    // p99 is 2 px under 100 %: one label for both.
    for (f, label) in [(0.0, "0 %"), (0.5, "p50"), (0.9, "p90"), (0.99, "p99")] {
        let _ = writeln!(
            o,
            "<text x=\"0\" y=\"{:.1}\">{label}</text><line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>",
            y(f) + 4.0,
            y(f),
            left + w,
            y(f)
        );
    }
    for (i, c) in classes.iter().enumerate() {
        let total: u64 = c.histogram.iter().map(|b| b[1]).sum();
        let mut seen = 0;
        let mut points = vec![format!("{:.1},{:.1}", x(c.stats.mct_ns.min as f64), y(0.0))];
        for b in &c.histogram {
            seen += b[1];
            let upper = growth.powf(b[0] as f64 + 1.0).min(c.stats.mct_ns.max as f64).max(c.stats.mct_ns.min as f64);
            points.push(format!("{:.1},{:.1}", x(upper), y(seen as f64 / total.max(1) as f64)));
        }
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{} ({})</text>",
            points.join(" "),
            left + w + 8.0,
            24.0 + i as f64 * 16.0,
            esc(&c.name),
            c.stats.messages
        );
    }
    let _ = writeln!(o, "</svg>");
}
