//! `--html FILE`: one self-contained page (no scripts, fonts or images fetched) that opens as
//! the summary does, with the diagnosis, then the findings and the sections a person scans:
//! messages and the tail, sources and span, flows, transport health, PFC senders and storms,
//! congestion trees (inline SVG, contributors and victims named), incast, ECMP, load
//! balancing, DCQCN, marking, vantage hops, RTT. A contents list links every section.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::{FlowRef, MarkingSeries, Report, Tree};

use super::page::{Page, ms, us};
use super::text::html as esc;

const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222}h1{font-size:22px}\
h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}table{border-collapse:collapse}\
td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}td.n{text-align:right}\
.error{color:#b00020}.warning{color:#a65e00}.info{color:#555}svg text{font-size:12px}\
nav{margin:12px 0;padding:6px 10px;background:#f4f6fa;line-height:1.8}nav a{margin-right:12px}\
#diagnosis li{margin-bottom:6px}td.flow{white-space:nowrap}.more{color:#555;font-style:italic}section ul{margin-top:2px}";

/// Renders the page.
pub fn render(r: &Report, page: &Page<'_>) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>roce-analyzer report</title><style>{STYLE}</style></head><body>\n"
    );
    let mut body = String::new();
    for section in SECTIONS {
        section(&mut body, r, page);
    }
    // The title and the diagnosis come first; the contents list after them, built from the
    // sections that were written (a section with nothing to show writes no heading).
    let cut = body.find("<h2 id=\"key-numbers\"").unwrap_or(0);
    o.push_str(&body[..cut]);
    contents(&mut o, &body[cut..]);
    o.push_str(&body[cut..]);
    let _ = writeln!(o, "</body></html>");
    o
}

/// A list of links to every `<h2 id="…">` of `body`, in order.
fn contents(o: &mut String, body: &str) {
    let _ = write!(o, "<nav id=\"contents\">Contents:");
    for part in body.split("<h2 id=\"").skip(1) {
        let (Some((id, rest)), true) = (part.split_once('"'), true) else { continue };
        let Some(title) = rest.strip_prefix('>').and_then(|t| t.split_once("</h2>")).map(|t| t.0) else { continue };
        let _ = write!(o, " <a href=\"#{id}\">{title}</a>");
    }
    let _ = writeln!(o, "</nav>");
}

/// A section of the page: it writes its heading and content from the report (and the RTT
/// samples behind it).
type Section = fn(&mut String, &Report, &Page<'_>);

/// The page's sections, top to bottom.
const SECTIONS: [Section; 16] = [
    summary,
    findings,
    messages,
    super::html_tables::sources,
    super::html_tables::flows,
    super::html_tables::health,
    rtt,
    super::html_tables::pfc,
    trees,
    incast,
    ecmp,
    super::load_balancing::html,
    dcqcn,
    marking,
    vantage,
    nic,
];

/// Messages: the tail's diagnosis, completion times per size class (a CDF), the tail's causes.
fn messages(o: &mut String, r: &Report, page: &Page<'_>) {
    if let Some(m) = &r.messages {
        super::messages::html(o, r, m, page);
    }
}

/// The title and the key numbers.
fn summary(o: &mut String, r: &Report, _page: &Page<'_>) {
    let c = &r.capture;
    let _ = writeln!(o, "<h1>roce-analyzer {} · {} report</h1>", esc(&r.tool.version), esc(&r.kind));
    let span = c.end_ns.saturating_sub(c.start_ns);
    let _ = writeln!(
        o,
        "<p>{} source{} · {} frames over {}{}</p>",
        c.sources.len(),
        if c.sources.len() == 1 { "" } else { "s" },
        c.frames,
        ms(span),
        if c.partial { " · <b class=\"error\">PARTIAL: an input was truncated</b>" } else { "" }
    );
    failed_outputs(o, r);
    diagnosis(o, r);
    let _ = writeln!(o, "<h2 id=\"key-numbers\">Key numbers</h2><table id=\"summary\">");
    let rows: [(&str, String); 8] = [
        ("frames", c.frames.to_string()),
        ("RoCE frames", c.classes.get("roce").copied().unwrap_or(0).to_string()),
        ("CNPs", c.classes.get("cnp").copied().unwrap_or(0).to_string()),
        ("flows", r.flows.len().to_string()),
        ("PFC frames", r.pfc.frames.to_string()),
        ("PFC storms", r.pfc.storms.len().to_string()),
        ("incast episodes", r.incast.episodes.len().to_string()),
        ("RTT samples", r.rtt_ns.percentiles.samples.to_string()),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "<tr><th>{k}</th><td class=\"n\">{v}</td></tr>");
    }
    let _ = writeln!(o, "</table>");
}

/// Outputs that could not be written, before anything else (as the summary says them).
fn failed_outputs(o: &mut String, r: &Report) {
    if r.output_failures.is_empty() {
        return;
    }
    let _ = writeln!(o, "<p class=\"error\"><b>Outputs failed</b> (the others were written):</p><ul>");
    for f in &r.output_failures {
        let _ = writeln!(o, "<li class=\"error\">{}: {}</li>", esc(&f.output), esc(&f.error));
    }
    let _ = writeln!(o, "</ul>");
}

/// The diagnosis, as the summary opens with it: every entry, most important first.
fn diagnosis(o: &mut String, r: &Report) {
    let all = &r.diagnosis;
    let _ = writeln!(o, "<section id=\"diagnosis\"><h2>Diagnosis</h2>");
    if all.is_empty() {
        let _ = writeln!(o, "<p>Nothing wrong found: no finding, PFC storm, deadlock or incast.</p></section>");
        return;
    }
    let _ = writeln!(o, "<ol>");
    for d in all {
        let place = match d.place.is_empty() {
            true => String::new(),
            false => format!("<br>where: {}", esc(&d.place)),
        };
        let _ = writeln!(
            o,
            "<li class=\"{}\"><b>{}</b> [{}] {}{place}<br>do: {}</li>",
            d.severity,
            d.severity,
            esc(&d.code),
            esc(&d.what),
            esc(&d.advice)
        );
    }
    let _ = writeln!(o, "</ol></section>");
}

/// Congestion trees and deadlocks.
fn trees(o: &mut String, r: &Report, page: &Page<'_>) {
    let _ = writeln!(o, "<h2 id=\"trees\">Congestion trees</h2>");
    if r.congestion_tree.trees.is_empty() {
        let _ = writeln!(o, "<p>No PFC pause relations.</p>");
    }
    for t in &r.congestion_tree.trees {
        tree_svg(o, t);
        super::html_tables::tree_flows(o, t, page);
    }
    if !r.congestion_tree.unresolved.is_empty() {
        let _ = writeln!(
            o,
            "<p>PFC senders the topology does not place: {}.</p>",
            esc(&r.congestion_tree.unresolved.join(", "))
        );
    }
    for d in &r.congestion_tree.deadlocks {
        let part = match d.devices.len() > d.cycle.len() {
            true => format!(
                " ({} devices, {} links in the circle: {})",
                d.devices.len(),
                d.links.len(),
                esc(&d.devices.join(", "))
            ),
            false => String::new(),
        };
        let _ = writeln!(
            o,
            "<p class=\"error\">Deadlock on priority {}: {} → {}{part} for {}</p>",
            d.priority,
            esc(&d.cycle.join(" → ")),
            esc(d.cycle.first().map_or("", String::as_str)),
            ms(d.duration_ns)
        );
    }
    if r.congestion_tree.deadlocks_omitted > 0 {
        let _ = writeln!(
            o,
            "<p class=\"error\">{} more deadlocks counted, not listed.</p>",
            r.congestion_tree.deadlocks_omitted
        );
    }
}

/// ECMP: source-port entropy, observed shares per label, predicted paths per tier.
fn ecmp(o: &mut String, r: &Report, _page: &Page<'_>) {
    let _ = writeln!(o, "<h2 id=\"ecmp\">ECMP</h2>");
    let _ = writeln!(
        o,
        "<p>{} distinct UDP source ports ({:.2} bits of entropy).</p>",
        r.ecmp.distinct_sports, r.ecmp.sport_entropy_bits
    );
    if let Some(obs) = &r.ecmp.observed {
        let bars: Vec<(String, u64, String)> = obs
            .by_label
            .iter()
            .map(|(l, s)| (l.clone(), s.bytes, format!("{} B, {} flows", s.bytes, s.flows)))
            .collect();
        let _ = writeln!(o, "<h3>Observed per label (imbalance {:.2})</h3>", obs.imbalance);
        bars_svg(o, "ecmp-observed", &bars);
    }
    if let Some(p) = &r.ecmp.predicted {
        for (i, t) in p.tiers.iter().enumerate() {
            let _ = writeln!(
                o,
                "<h3>Tier {} ({}:{}:{}:{}), imbalance {:.2}</h3>",
                i + 1,
                t.hash,
                t.fanout,
                t.seed,
                t.shift,
                t.imbalance
            );
            let bars: Vec<(String, u64, String)> = t
                .per_path
                .iter()
                .enumerate()
                .map(|(n, s)| (format!("path {n}"), s.flows, format!("{} flows, {} B", s.flows, s.bytes)))
                .collect();
            bars_svg(o, &format!("ecmp-tier{}", i + 1), &bars);
        }
        let _ = writeln!(
            o,
            "<p>{} of {} path combinations used{}.</p>",
            p.combinations_used,
            p.combinations_total,
            if p.polarized { " — <b class=\"warning\">polarized</b>" } else { "" }
        );
    }
}

/// Vantage points: per hop the frames matched, missing, CE-marked between, latency.
fn vantage(o: &mut String, r: &Report, _page: &Page<'_>) {
    if let Some(v) = &r.vantage {
        let _ = writeln!(
            o,
            "<h2 id=\"vantage-points\">Vantage points</h2><table id=\"vantage\"><tr><th>from</th><th>to</th><th>flows</th><th>matched</th><th>missing</th><th>CE-marked between</th><th>latency min / p50 / p99 / max (µs)</th><th>ECN marking profile</th></tr>"
        );
        if v.hops.is_empty() {
            let _ = writeln!(o, "<tr><td colspan=\"8\">No hop: no frame was seen at two of these points.</td></tr>");
        }
        for h in &v.hops {
            let l = &h.latency_ns;
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}{}</td><td>{}</td><td>{} / {} / {} / {}</td><td>{}</td></tr>",
                esc(&h.from),
                esc(&h.to),
                h.flows,
                h.frames_matched,
                if h.frames_missing > 0 { " class=\"warning\"" } else { "" },
                h.frames_missing,
                match h.frames_outside_span {
                    0 => String::new(),
                    n => format!(" (+{n} while {} was not capturing)", esc(&h.to)),
                },
                h.ce_marked,
                us(l.min),
                us(l.p50),
                us(l.p99),
                us(l.max),
                h.marking_profile.as_ref().map_or_else(String::new, |p| esc(&super::human::marking_profile(p)))
            );
        }
        let points: Vec<String> = v.points.iter().map(|p| format!("{} ({} frames)", esc(&p.name), p.frames)).collect();
        let _ = writeln!(o, "</table><p>Points: {}; {} copies counted once.</p>", points.join(", "), v.copies);
        // Where marking starts: the CE fraction added on each hop that marked, over time.
        let hops: Vec<(String, &MarkingSeries)> =
            v.hops.iter().filter_map(|h| h.marking.as_ref().map(|m| (format!("{} → {}", h.from, h.to), m))).collect();
        if !hops.is_empty() {
            let _ = writeln!(o, "<p>CE marks added between points, over time:</p>");
            marking_svg(o, "marking-hops", &hops);
        }
    }
}

/// Incast: the episodes on a timeline, then a table of them with their evidence.
fn incast(o: &mut String, r: &Report, page: &Page<'_>) {
    let _ = writeln!(o, "<h2 id=\"incast-timeline\">Incast</h2>");
    incast_svg(o, r);
    let eps = &r.incast.episodes;
    if eps.is_empty() {
        return;
    }
    let linked = page.evidence.is_some() && eps.iter().any(|e| e.evidence.is_some());
    let _ = writeln!(
        o,
        "<table id=\"episodes\"><tr><th>destination</th><th>start</th><th>duration</th><th>peak senders</th><th>bytes</th><th>peak Gbit/s</th><th>CE</th><th>CNP</th><th>PFC</th>{}</tr>",
        if linked { "<th>evidence</th>" } else { "" }
    );
    for e in eps.iter().take(page.top) {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">+{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}</tr>",
            esc(&e.dst),
            us(e.start_ns.saturating_sub(r.capture.start_ns)),
            us(e.end_ns.saturating_sub(e.start_ns)),
            e.peak_senders,
            e.bytes,
            e.peak_gbps,
            e.ce_packets,
            e.cnp_packets,
            e.pfc_frames,
            if linked { format!("<td>{}</td>", page.link(e.evidence.as_ref())) } else { String::new() }
        );
    }
    let _ = writeln!(o, "</table>{}", super::page::more(eps.len(), page.top, "episodes"));
}

/// DCQCN reactions.
fn dcqcn(o: &mut String, r: &Report, page: &Page<'_>) {
    if let Some(d) = &r.dcqcn {
        let _ = writeln!(o, "<h2 id=\"dcqcn-reaction\">DCQCN reaction</h2>");
        dcqcn_html(o, d, page.top);
    }
}

/// CE marking over time per class and priority.
fn marking(o: &mut String, r: &Report, _page: &Page<'_>) {
    if let Some(m) = &r.marking {
        let _ = writeln!(o, "<h2 id=\"marking-over-time\">CE marking over time</h2>");
        let classes: Vec<(String, &MarkingSeries)> =
            m.classes.iter().map(|c| (format!("DSCP {}", c.dscp), &c.series)).collect();
        marking_svg(o, "marking", &classes);
        if m.priorities.iter().any(|p| p.pcp.is_some()) {
            let prios: Vec<(String, &MarkingSeries)> = m
                .priorities
                .iter()
                .map(|p| (p.pcp.map_or("untagged".into(), |n| format!("PCP {n}")), &p.series))
                .collect();
            marking_svg(o, "marking-pcp", &prios);
        }
    }
}

/// The RTT distribution.
fn rtt(o: &mut String, r: &Report, page: &Page<'_>) {
    let _ = writeln!(o, "<h2 id=\"rtt-distribution\">RTT distribution</h2>");
    rtt_svg(o, r, page.rtt_ns);
}

/// The findings with their evidence files.
fn findings(o: &mut String, r: &Report, page: &Page<'_>) {
    let _ = writeln!(o, "<h2 id=\"findings-list\">Findings</h2>");
    if r.audit.is_empty() && r.ecmp.findings.is_empty() {
        let _ = writeln!(o, "<p>None.</p>");
        return;
    }
    let _ = writeln!(o, "<table id=\"findings\">");
    for f in r.audit.iter().chain(&r.ecmp.findings) {
        let evidence = page.link(f.evidence.as_ref());
        let _ = writeln!(
            o,
            "<tr><td class=\"{}\">{}</td><td>{}</td><td>{}{}</td><td>{evidence}</td></tr>",
            f.severity,
            f.severity,
            f.code,
            esc(&f.message),
            match f.flows.is_empty() {
                true => String::new(),
                false => format!("<br><small>flows: {}</small>", esc(&FlowRef::named(&f.flows, f.flows_omitted))),
            }
        );
    }
    let _ = writeln!(o, "</table>");
}

/// Live with `--nic-counters`: the NIC's own counters over the run (what the kernel path
/// cannot see on an offloading RNIC).
fn nic(o: &mut String, r: &Report, _page: &Page<'_>) {
    let Some(n) = &r.nic else { return };
    let _ = writeln!(
        o,
        "<h2 id=\"nic-counters\">NIC counters</h2><table id=\"nic\"><tr><th>device</th><th>port</th><th>counters</th></tr>"
    );
    for p in &n.rdma {
        let kv: Vec<String> =
            p.counters.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{} {v}", esc(k))).collect();
        let _ = writeln!(o, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&p.device), esc(&p.port), kv.join(" · "));
    }
    let pause: Vec<String> = n
        .netdev
        .counters
        .iter()
        .filter(|(k, v)| k.contains("pause") && **v > 0)
        .map(|(k, v)| format!("{} {v}", esc(k)))
        .collect();
    let _ = writeln!(
        o,
        "<tr><td>{}</td><td>driver</td><td>{}</td></tr></table>",
        esc(&n.netdev.name),
        match (&n.netdev.error, pause.is_empty()) {
            (Some(e), _) => format!("statistics unavailable ({})", esc(e)),
            (None, true) => "no pause frames counted by the driver".into(),
            (None, false) => pause.join(" · "),
        }
    );
}

/// A tree laid out by depth from its roots: pause edges as arrows with their paused time.
/// Where each device of a tree goes: columns by depth from the roots (a cycle's devices, with
/// no root, from depth 0), rows in name order; and how many columns there are and the most
/// rows one holds.
fn tree_layout(t: &Tree) -> (BTreeMap<&str, (usize, usize)>, usize, usize) {
    let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
    let mut queue: std::collections::VecDeque<&str> = t.roots.iter().map(|r| r.device.as_str()).collect();
    for r in &queue {
        depth.insert(r, 0);
    }
    while let Some(n) = queue.pop_front() {
        let d = depth[n];
        for e in t.edges.iter().filter(|e| e.from == n) {
            if !depth.contains_key(e.to.as_str()) {
                depth.insert(&e.to, d + 1);
                queue.push_back(&e.to);
            }
        }
    }
    for e in &t.edges {
        // Nodes of a cycle (no root) start at depth 0.
        for n in [e.from.as_str(), e.to.as_str()] {
            let next = depth.len();
            depth.entry(n).or_insert(next % 3);
        }
    }
    let mut column: BTreeMap<usize, usize> = BTreeMap::new();
    let mut pos: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut order: Vec<(&str, usize)> = depth.iter().map(|(n, d)| (*n, *d)).collect();
    order.sort_by_key(|(n, d)| (*d, *n));
    for (n, d) in order {
        let row = column.entry(d).or_default();
        pos.insert(n, (100 + d * 220, 40 + *row * 70));
        *row += 1;
    }
    (pos, column.len().max(1), column.values().max().copied().unwrap_or(1))
}

fn tree_svg(o: &mut String, t: &Tree) {
    let (pos, columns, rows) = tree_layout(t);
    let width = 100 + columns * 220;
    let height = 60 + rows * 70;
    let prio = if t.priority == 8 { "802.3x (all priorities)".to_string() } else { format!("priority {}", t.priority) };
    let _ = writeln!(
        o,
        "<h3>{prio}</h3><svg class=\"tree\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\">\
         <defs><marker id=\"arrow{p}\" markerWidth=\"10\" markerHeight=\"8\" refX=\"10\" refY=\"4\" orient=\"auto\"><path d=\"M0,0 L10,4 L0,8 z\" fill=\"#555\"/></marker></defs>",
        p = t.priority
    );
    for e in &t.edges {
        let (Some(a), Some(b)) = (pos.get(e.from.as_str()), pos.get(e.to.as_str())) else { continue };
        let _ = writeln!(
            o,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#555\" marker-end=\"url(#arrow{})\"/><text x=\"{}\" y=\"{}\">{}</text>",
            a.0 + 60,
            a.1,
            b.0 - 60,
            b.1,
            t.priority,
            (a.0 + b.0) / 2 - 30,
            (a.1 + b.1) / 2 - 6,
            ms(e.paused_ns)
        );
    }
    for (n, (x, y)) in &pos {
        let root = t.roots.iter().find(|r| r.device == *n);
        let fill = if root.is_some() { "#f4a6a6" } else { "#dde6f4" };
        let _ = writeln!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"120\" height=\"30\" rx=\"6\" fill=\"{fill}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\">{}</text>",
            x - 60,
            y - 15,
            x - 52,
            y + 4,
            esc(n)
        );
        if let Some(r) = root
            && let Some(h) = &r.congested_host
        {
            let _ = writeln!(
                o,
                "<text x=\"{}\" y=\"{}\" fill=\"#b00020\">congested egress {} → {}</text>",
                x - 60,
                y + 30,
                esc(r.congested_port.as_deref().unwrap_or("?")),
                esc(h)
            );
        }
    }
    let _ = writeln!(o, "</svg>");
}

/// Horizontal bars: (label, value, text).
fn bars_svg(o: &mut String, id: &str, bars: &[(String, u64, String)]) {
    let max = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let _ = writeln!(
        o,
        "<svg id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"{}\">",
        esc(id),
        bars.len() * 26 + 10
    );
    for (i, (label, v, text)) in bars.iter().enumerate() {
        let w = (*v as f64 / max as f64 * 400.0).round() as u64;
        let y = 5 + i * 26;
        let _ = writeln!(
            o,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"120\" y=\"{y}\" width=\"{w}\" height=\"18\" fill=\"#4a7bd0\"/><text x=\"{}\" y=\"{}\">{}</text>",
            y + 14,
            esc(label),
            126 + w,
            y + 14,
            esc(text)
        );
    }
    let _ = writeln!(o, "</svg>");
}

/// The episodes per destination on a time axis that spans them (with a margin of a tenth
/// each side), labelled from the capture's start: a capture seconds long with episodes of
/// microseconds would otherwise draw them as one tick.
fn incast_svg(o: &mut String, r: &Report) {
    let eps = &r.incast.episodes;
    if eps.is_empty() {
        let _ = writeln!(
            o,
            "<p>No incast episode (≥ {} senders within {}).</p>",
            r.incast.min_senders,
            us(r.incast.window_ns)
        );
        return;
    }
    let (first, last) = eps.iter().fold((u64::MAX, 0), |(a, b), e| (a.min(e.start_ns), b.max(e.end_ns)));
    let margin = (last - first.min(last)) / 10 + 1;
    let (t0, t1) = (first.saturating_sub(margin).max(r.capture.start_ns.min(first)), last + margin);
    let mut dsts: Vec<&str> = eps.iter().map(|e| e.dst.as_str()).collect();
    dsts.sort();
    dsts.dedup();
    let x = |t: u64| 140.0 + (t.saturating_sub(t0)) as f64 / (t1 - t0) as f64 * 560.0;
    let _ = writeln!(
        o,
        "<svg id=\"incast\" xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"{}\">",
        dsts.len() * 30 + 30
    );
    for (i, d) in dsts.iter().enumerate() {
        let _ = writeln!(o, "<text x=\"0\" y=\"{}\">{}</text>", 20 + i * 30, esc(d));
    }
    for e in eps {
        let row = dsts.iter().position(|d| *d == e.dst).unwrap_or(0);
        let (a, b) = (x(e.start_ns), x(e.end_ns));
        let _ = writeln!(
            o,
            "<rect x=\"{a:.1}\" y=\"{}\" width=\"{:.1}\" height=\"20\" fill=\"#d04a4a\"><title>{} senders peak, {} bytes, {:.1} Gbit/s</title></rect>",
            6 + row * 30,
            (b - a).max(2.0),
            e.peak_senders,
            e.bytes,
            e.peak_gbps
        );
    }
    let since = |t: u64| us(t.saturating_sub(r.capture.start_ns));
    let _ = writeln!(
        o,
        "<text x=\"140\" y=\"{0}\">+{1}</text><text x=\"640\" y=\"{0}\">+{2}</text></svg>",
        dsts.len() * 30 + 24,
        since(t0),
        since(t1)
    );
}

/// The flows' reaction to CNPs (a table) and the plotted flows' rate with their CNPs (red
/// lines) and CE marks (orange dots).
fn dcqcn_html(o: &mut String, d: &crate::model::Dcqcn, top: usize) {
    let _ = writeln!(
        o,
        "<table id=\"dcqcn\"><tr><th>flow</th><th>CNPs</th><th>reacted</th><th>unreacted</th><th>not judged (no rate before)</th><th>cut (median)</th><th>reaction (µs)</th><th>recovery (µs)</th></tr>"
    );
    let opt = |v: Option<u64>| v.map_or("-".to_string(), us);
    let flows = super::select::by_cnps(d);
    for f in flows.iter().take(top) {
        let s = &f.stats;
        let _ = writeln!(
            o,
            "<tr><td>{} → {} {:#x}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&f.src),
            esc(&f.dst),
            f.dst_qp,
            s.cnps,
            s.reacted,
            s.unreacted_cnps,
            s.no_rate_before,
            s.cut_ratio_p50.map_or("-".to_string(), |c| format!("{c:.2}")),
            opt(s.reaction_ns_p50),
            opt(s.recovery_ns_p50)
        );
    }
    let _ = writeln!(o, "</table>{}", super::page::more(flows.len(), top, "flows with CNPs"));
    if d.unattributed_cnps > 0 {
        let _ = writeln!(o, "<p>{} CNPs not attributed to a flow.</p>", d.unattributed_cnps);
    }
    for (i, p) in d.plots.iter().enumerate() {
        let n = p.bytes.len().max(1) as u64;
        let span = n * p.point_ns.max(1);
        let gbps = |b: u64| b as f64 * 8.0 / p.point_ns.max(1) as f64;
        let top = p.bytes.iter().map(|b| gbps(*b)).fold(0.0f64, f64::max).max(1e-9);
        let x = |t: u64| 60.0 + t.saturating_sub(p.start_ns) as f64 / span as f64 * 680.0;
        let y = |g: f64| 130.0 - g / top * 110.0;
        let _ = writeln!(
            o,
            "<p>{} → {} QP {:#x}: rate per {}, {} CNPs, CE marks</p><svg id=\"dcqcn-plot-{i}\" class=\"dcqcn-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"160\">",
            esc(&p.src),
            esc(&p.dst),
            p.dst_qp,
            us(p.point_ns),
            p.cnps_ns.len()
        );
        let points: Vec<String> = p
            .bytes
            .iter()
            .enumerate()
            .map(|(k, b)| format!("{:.1},{:.1}", x(p.start_ns + k as u64 * p.point_ns), y(gbps(*b))))
            .collect();
        let _ = writeln!(o, "<polyline fill=\"none\" stroke=\"#2a6fb0\" points=\"{}\"/>", points.join(" "));
        for t in &p.cnps_ns {
            let _ = writeln!(
                o,
                "<line class=\"cnp\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"15\" y2=\"130\" stroke=\"#d04a4a\"/>",
                x(*t)
            );
        }
        for (k, c) in p.ce.iter().enumerate().filter(|(_, c)| **c > 0) {
            let _ = writeln!(
                o,
                "<circle class=\"ce\" cx=\"{:.1}\" cy=\"10\" r=\"3\" fill=\"#e89a2c\"><title>{c} CE</title></circle>",
                x(p.start_ns + k as u64 * p.point_ns)
            );
        }
        let _ = writeln!(
            o,
            "<text x=\"0\" y=\"25\">{top:.1} Gbit/s</text><text x=\"0\" y=\"130\">0</text><text x=\"60\" y=\"150\">0</text><text x=\"680\" y=\"150\">+{}</text></svg>",
            us(span)
        );
    }
}

/// The CE fraction of frames over time, a line per series (a DSCP class, a PCP, a hop).
fn marking_svg(o: &mut String, id: &str, lines: &[(String, &MarkingSeries)]) {
    let colours = ["#2a6fb0", "#d04a4a", "#3a9a4a", "#e89a2c", "#7a4ab0", "#555555"];
    let t0 = lines.iter().map(|(_, c)| c.start_ns).min().unwrap_or(0);
    let t1 = lines.iter().map(|(_, c)| c.start_ns + c.frames.len() as u64 * c.point_ns).max().unwrap_or(t0 + 1);
    let x = |t: u64| 60.0 + t.saturating_sub(t0) as f64 / (t1 - t0).max(1) as f64 * 680.0;
    let _ = writeln!(o, "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"{}\">", 170);
    for (i, (label, c)) in lines.iter().enumerate() {
        let points: Vec<String> = c
            .frames
            .iter()
            .zip(&c.ce)
            .enumerate()
            .filter(|(_, (f, _))| **f > 0)
            .map(|(k, (f, ce))| {
                format!("{:.1},{:.1}", x(c.start_ns + k as u64 * c.point_ns), 130.0 - *ce as f64 / *f as f64 * 110.0)
            })
            .collect();
        let _ = writeln!(
            o,
            "<polyline class=\"{id}\" fill=\"none\" stroke=\"{}\" points=\"{}\"><title>{}</title></polyline><text x=\"{}\" y=\"165\" fill=\"{}\">{}</text>",
            colours[i % colours.len()],
            points.join(" "),
            esc(label),
            60 + i * 150,
            colours[i % colours.len()],
            esc(label)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"0\" y=\"25\">100 %</text><text x=\"0\" y=\"130\">0 %</text><text x=\"60\" y=\"148\">0</text><text x=\"680\" y=\"148\">+{}</text></svg>",
        us(t1.saturating_sub(t0))
    );
}

/// A histogram of the samples on doubling buckets, and the percentiles.
fn rtt_svg(o: &mut String, r: &Report, samples: &[u64]) {
    let p = &r.rtt_ns.percentiles;
    if p.samples == 0 {
        let _ = writeln!(
            o,
            "<p>No RTT sample: no request with AckReq was answered by an ACK seen here ({} timeouts, {} pending).</p>",
            r.rtt_ns.timeouts, r.rtt_ns.pending
        );
        return;
    }
    let cells: String = p.ladder().iter().map(|v| format!("<td class=\"n\">{}</td>", us(*v))).collect();
    let _ = writeln!(
        o,
        "<table id=\"rtt\"><tr><th>samples</th><th>min</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>timeouts</th></tr>\
         <tr><td class=\"n\">{}</td>{cells}<td class=\"n\">{}</td></tr></table>",
        p.samples, r.rtt_ns.timeouts
    );
    if samples.is_empty() {
        return;
    }
    // Bucket b holds [2^b, 2^(b+1)) ns.
    let mut buckets: BTreeMap<u32, u64> = BTreeMap::new();
    for s in samples {
        *buckets.entry(63 - s.max(&1).leading_zeros()).or_default() += 1;
    }
    let bars: Vec<(String, u64, String)> =
        buckets.iter().map(|(b, n)| (format!("≥ {}", us(1u64 << b)), *n, format!("{n} samples"))).collect();
    bars_svg(o, "rtt-histogram", &bars);
}
