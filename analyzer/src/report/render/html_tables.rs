//! The page's tables a person scans after the diagnosis: what was analysed (sources, span,
//! frames, drops, what could not be seen), the flows by bytes with their anomalies, transport
//! health, PFC senders and storms, and the flows a congestion tree names. Rows are chosen and
//! ordered as the summary chooses them ([`super::select`]) and cut at `--top`.

use std::fmt::Write as _;

use analyzer_common::psn::{aeth, count};

use crate::model::{Report, Tree};

use super::page::{Page, duration, more, ms, us};
use super::select;
use super::text::html as esc;

/// A capture time as a person reads it: UTC when it is a wall-clock time, else nanoseconds.
fn when(ns: u64) -> String {
    /// 2000-01-01: earlier times are not wall-clock (a synthetic capture, a monotonic clock).
    const WALL: u64 = 946_684_800_000_000_000;
    match ns >= WALL {
        true => {
            humantime::format_rfc3339_micros(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns)).to_string()
        }
        false => format!("{ns} ns"),
    }
}

/// Sources and span: each source, when the capture starts and ends, its frames by class,
/// what was left out or dropped, and what this vantage point could not see.
pub fn sources(o: &mut String, r: &Report, _page: &Page<'_>) {
    let c = &r.capture;
    let _ = writeln!(o, "<section><h2 id=\"sources\">Sources and span</h2>");
    let _ = writeln!(o, "<table id=\"source-list\"><tr><th>label</th><th>source</th><th>kind</th><th>XDP</th></tr>");
    for s in &c.sources {
        let xdp = s.xdp.as_ref().map_or("-".to_string(), |x| esc(&x.mode));
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{xdp}</td></tr>",
            esc(&s.label),
            esc(&s.name),
            esc(&s.kind)
        );
    }
    let _ = writeln!(
        o,
        "</table><p>From {} to {} ({}){}.</p>",
        when(c.start_ns),
        when(c.end_ns),
        ms(c.end_ns.saturating_sub(c.start_ns)),
        if c.partial { " — <b class=\"error\">partial: an input was truncated</b>" } else { "" }
    );
    let classes: Vec<String> =
        c.classes.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{} {n}", esc(k))).collect();
    let _ = writeln!(o, "<p>Frames: {} ({}).</p>", c.frames, classes.join(" · "));
    let drops: Vec<String> =
        c.dropped.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{} {n}", esc(k))).collect();
    let _ = writeln!(
        o,
        "<p>Dropped before analysis: {}.</p>",
        if drops.is_empty() { "none".to_string() } else { format!("<b class=\"warning\">{}</b>", drops.join(" · ")) }
    );
    if let Some(f) = &c.filter {
        let _ = writeln!(
            o,
            "<p>Filter <code>{}</code>: {} frames left out (counted, not analysed).</p>",
            esc(&f.expr),
            f.frames_out
        );
    }
    if let Some(l) = &c.loss {
        let _ = writeln!(
            o,
            "<p class=\"warning\">The capture missed {} frames ({:.3} % of what crossed): counts below are of what it held.</p>",
            l.frames_missed,
            l.ratio * 100.0
        );
    }
    if let Some(f) = &c.flows_folded {
        let _ = writeln!(
            o,
            "<p>{} idle flows ({} packets, {} B) folded into one aggregate (bounded memory).</p>",
            f.flows, f.packets, f.bytes
        );
    }
    let _ = writeln!(o, "<h3>What this vantage point could not see</h3><ul id=\"visibility\">");
    for n in &r.visibility {
        let _ = writeln!(o, "<li><b>{}</b>: {}</li>", n.code, esc(&n.message));
    }
    if r.visibility.is_empty() {
        let _ = writeln!(o, "<li>Nothing noted.</li>");
    }
    let _ = writeln!(o, "</ul></section>");
}

/// The flows by bytes, `--top` of them, each with its anomalies in words.
pub fn flows(o: &mut String, r: &Report, page: &Page<'_>) {
    let flows = select::by_bytes(r);
    let _ = writeln!(
        o,
        "<section><h2 id=\"flows\">Flows</h2><p>{} flows, by bytes (the first {}).</p>",
        flows.len(),
        page.top.min(flows.len())
    );
    if flows.is_empty() {
        let _ = writeln!(o, "<p>No RoCE flow.</p></section>");
        return;
    }
    let _ = writeln!(
        o,
        "<table id=\"flow-table\"><tr><th>src</th><th>dst</th><th>QP</th><th>sport</th><th>packets</th><th>bytes</th><th>span</th><th>CE</th><th>CNP</th><th>DSCP</th><th>labels</th><th>anomalies</th></tr>"
    );
    for f in flows.iter().take(page.top) {
        let words = select::anomaly_words(f);
        let dscp: Vec<&str> = f.dscp.keys().collect();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:#x}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td{}>{}</td></tr>",
            esc(&f.src),
            esc(&f.dst),
            f.dst_qp,
            f.udp_sport,
            f.packets,
            f.bytes,
            duration(f.last_ns.saturating_sub(f.first_ns)),
            f.ecn.ce,
            f.opcodes.get("CNP").copied().unwrap_or(0),
            esc(&dscp.join(",")),
            esc(&f.labels.join(",")),
            if words.is_empty() { "" } else { " class=\"warning\"" },
            if words.is_empty() { "—".to_string() } else { esc(&words) }
        );
    }
    let _ = writeln!(o, "</table>{}</section>", more(flows.len(), page.top, "flows"));
}

/// Transport health: the flows with requests or ACKs, most anomalies first; RTT over all flows;
/// the host pairs with CE marks or CNPs.
pub fn health(o: &mut String, r: &Report, page: &Page<'_>) {
    let flows = select::by_anomalies(r);
    let _ = writeln!(
        o,
        "<section><h2 id=\"health\">Transport health</h2><p>{} flows with requests or ACKs, most anomalies first.</p>",
        flows.len()
    );
    if !flows.is_empty() {
        let _ = writeln!(
            o,
            "<table id=\"health-table\"><tr><th>flow</th><th>requests</th><th>out of sequence</th><th>skipped</th><th>duplicate</th><th>sequence NAK</th><th>RNR NAK</th><th>other NAK</th><th>ACKs</th><th>RTT p50</th><th>RTT p99</th><th>timeouts</th></tr>"
        );
        for f in flows.iter().take(page.top) {
            let n = &f.naks;
            let rtt = f.rtt_ns.as_ref().filter(|t| t.percentiles.samples > 0);
            let cell = |v: u64| match v {
                0 => "<td class=\"n\">0</td>".to_string(),
                v => format!("<td class=\"n warning\">{v}</td>"),
            };
            let _ = writeln!(
                o,
                "<tr><td class=\"flow\">{}</td><td class=\"n\">{}</td>{}{}{}{}{}{}<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}</tr>",
                esc(&f.flow_ref().label()),
                f.psn[count::REQUESTS],
                cell(f.psn[count::OUT_OF_SEQUENCE]),
                cell(f.psn[count::PSN_SKIPPED]),
                cell(f.psn[count::DUPLICATES]),
                cell(n[aeth::PSN_SEQUENCE_ERROR]),
                cell(n[aeth::RNR]),
                cell(select::naks(f) - n[aeth::PSN_SEQUENCE_ERROR] - n[aeth::RNR]),
                n[aeth::ACK],
                rtt.map_or("-".to_string(), |t| us(t.percentiles.p50)),
                rtt.map_or("-".to_string(), |t| us(t.percentiles.p99)),
                cell(f.rtt_ns.as_ref().map_or(0, |t| t.timeouts))
            );
        }
        let _ = writeln!(o, "</table>{}", more(flows.len(), page.top, "flows"));
    }
    ecn_pairs(o, r, page);
    let _ = writeln!(o, "</section>");
}

/// The host pairs with CE marks or CNPs, most unanswered marks first.
fn ecn_pairs(o: &mut String, r: &Report, page: &Page<'_>) {
    let pairs = select::marked_pairs(r);
    if pairs.is_empty() {
        let _ = writeln!(o, "<p>No CE mark and no CNP.</p>");
        return;
    }
    let _ = writeln!(
        o,
        "<h3>CE marks and CNPs per host pair</h3><table id=\"ecn-pairs\"><tr><th>data from</th><th>to</th><th>data packets</th><th>CE</th><th>CNPs back</th><th>CE unanswered</th><th>CE pending</th></tr>"
    );
    for p in pairs.iter().take(page.top) {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n{}\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&p.a),
            esc(&p.b),
            p.data_packets,
            p.ce,
            p.cnp_back,
            if p.ce_unanswered > 0 { " warning" } else { "" },
            p.ce_unanswered,
            p.ce_pending
        );
    }
    let _ = writeln!(o, "</table>{}", more(pairs.len(), page.top, "host pairs"));
}

/// PFC and PAUSE senders with their paused time, each priority's pause rate, and the storms
/// with their evidence.
pub fn pfc(o: &mut String, r: &Report, page: &Page<'_>) {
    let p = &r.pfc;
    let _ = writeln!(
        o,
        "<section><h2 id=\"pfc\">PFC senders and storms</h2><p>{} PFC frames · {} 802.3x PAUSE frames.</p>",
        p.frames, p.pause_8023x_frames
    );
    if !p.senders.is_empty() || !p.pause_senders.is_empty() {
        let span = r.capture.end_ns.saturating_sub(r.capture.start_ns).max(1);
        let _ = writeln!(
            o,
            "<table id=\"pfc-senders\"><tr><th>sender</th><th>device:port</th><th>priority</th><th>frames</th><th>XOFF</th><th>XON</th><th>quanta</th><th>paused</th><th>of the span</th><th>onsets after CE marks</th></tr>"
        );
        let rows = p
            .senders
            .iter()
            .map(|s| (&s.mac, &s.device, &s.port, s.priority.to_string(), &s.counts, &s.pause, s.ecn_lead.as_ref()));
        let all =
            p.pause_senders.iter().map(|s| (&s.mac, &s.device, &s.port, "all".to_string(), &s.counts, &s.pause, None));
        for (mac, device, port, prio, c, pause, lead) in rows.chain(all) {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{prio}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1} %</td><td>{}</td></tr>",
                esc(mac),
                esc(&select::place(device, port)),
                c.frames,
                c.xoff,
                c.xon,
                c.quanta,
                ms(pause.paused_ns),
                pause.paused_ns as f64 * 100.0 / span as f64,
                lead.filter(|l| l.onsets > 0).map_or("-".to_string(), |l| format!("{} of {}", l.preceded, l.onsets))
            );
        }
        let _ = writeln!(o, "</table>");
    }
    if p.storms.is_empty() {
        let _ = writeln!(o, "<p>No PFC storm.</p></section>");
        return;
    }
    let _ = writeln!(
        o,
        "<table id=\"storms\"><tr><th>storm from</th><th>device</th><th>priority</th><th>start</th><th>paused</th><th>evidence</th></tr>"
    );
    for s in &p.storms {
        let _ = writeln!(
            o,
            "<tr class=\"error\"><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">+{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&s.mac),
            esc(s.device.as_deref().unwrap_or("-")),
            s.priority,
            ms(s.start_ns.saturating_sub(r.capture.start_ns)),
            ms(s.duration_ns),
            page.link(s.evidence.as_ref())
        );
    }
    let _ = writeln!(o, "</table></section>");
}

/// The flows a tree names: contributors (paused on the way to its congested host) and victims
/// (paused on the way elsewhere: head-of-line blocked), `--top` of each.
pub fn tree_flows(o: &mut String, t: &Tree, page: &Page<'_>) {
    let lists = [
        ("contributor", "paused on the way to the congested host", &t.contributors),
        ("victim", "head-of-line blocked: paused on the way elsewhere", &t.victims),
    ];
    for (one, why, flows) in lists {
        let name = format!("{one}s");
        let _ = writeln!(
            o,
            "<p><b>{} {}</b> ({why}){}</p>",
            flows.len(),
            if flows.len() == 1 { one } else { &name },
            if flows.is_empty() { "." } else { ":" }
        );
        if flows.is_empty() {
            continue;
        }
        let _ = writeln!(o, "<ul class=\"{name}\">");
        for f in flows.iter().take(page.top) {
            let _ = writeln!(o, "<li>{}</li>", esc(&f.label()));
        }
        let _ = writeln!(o, "</ul>{}", more(flows.len(), page.top, &name));
    }
    if t.flows_omitted > 0 {
        let _ = writeln!(o, "<p>{} more contributors and victims counted, not listed.</p>", t.flows_omitted);
    }
}
