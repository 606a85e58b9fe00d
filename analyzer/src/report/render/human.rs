//! The human summary: totals, classes, top flows by bytes, transport health (PSN, NAKs, RTT,
//! ECN/CNP, audit findings), PFC senders, visibility notes.

use std::fmt::Write as _;

use analyzer_common::psn::{aeth, count};

use crate::model::Report;

/// Renders the summary; `top` flows are listed. Every string of the report is printed with its
/// control characters escaped ([`super::text`]).
pub fn render(r: &Report, top: usize) -> String {
    let r = &*super::text::escaped(r);
    let mut o = String::new();
    header(&mut o, r);
    failed_outputs(&mut o, r);
    diagnosis(&mut o, r);
    totals(&mut o, r);
    top_flows(&mut o, r, top);
    health(&mut o, r, top);
    if let Some(m) = &r.messages {
        super::messages::section(&mut o, m, top);
    }
    if let Some(d) = &r.dcqcn {
        dcqcn(&mut o, d, top);
    }
    pfc(&mut o, &r.pfc);
    fabric(&mut o, r, top);
    if let Some(lb) = &r.load_balancing {
        super::load_balancing::text(&mut o, lb, top);
    }
    if let Some(v) = &r.vantage {
        vantage(&mut o, v);
    }
    if let Some(t) = &r.trajectory {
        trajectory(&mut o, t);
    }
    if let Some(n) = &r.nic {
        nic(&mut o, n);
    }
    visibility(&mut o, r);
    o
}

/// Vantage points and the hops between them.
fn vantage(o: &mut String, v: &crate::model::Vantage) {
    let points: Vec<String> = v.points.iter().map(|p| format!("{} {} frames", p.name, p.frames)).collect();
    let _ = writeln!(o, "\nVantage points: {} · {} copies counted once", points.join(" · "), v.copies);
    for h in &v.hops {
        let l = &h.latency_ns;
        let outside = match h.frames_outside_span {
            0 => String::new(),
            n => format!(" ({n} while {} was not capturing)", h.to),
        };
        let _ = writeln!(
            o,
            "  {} → {}: {} frames matched ({} flows), {} missing{outside}, {} CE-marked between · latency min/p50/p99/max {}/{}/{}/{} µs",
            h.from,
            h.to,
            h.frames_matched,
            h.flows,
            h.frames_missing,
            h.ce_marked,
            us(l.min),
            us(l.p50),
            us(l.p99),
            us(l.max)
        );
        if let Some(p) = &h.marking_profile {
            let _ = writeln!(o, "    ECN marking: {}", marking_profile(p));
        }
    }
}

/// The hops between collectors from their trajectory samples.
fn trajectory(o: &mut String, t: &crate::model::Trajectory) {
    let points: Vec<String> = t.points.iter().map(|p| format!("{} {} samples", p.name, p.samples)).collect();
    let _ = writeln!(o, "\nTrajectory samples (1/{}): {}", t.one_in, points.join(" · "));
    let pct = |e: &crate::model::Estimate| {
        format!("{:.2} % (95 %: {:.2}–{:.2} %)", e.value * 100.0, e.ci95[0] * 100.0, e.ci95[1] * 100.0)
    };
    for h in &t.hops {
        let clocks = match h.clock_offset_ns {
            Some(off) => format!("clock offset {} µs ({})", us_signed(off), h.clocks),
            None => "clock offset not separable (frames one way): latency includes it".into(),
        };
        let [min, p50, p99, max] = h.latency_ns;
        let _ = writeln!(
            o,
            "  {} → {}: {} matched, {} missing: loss {} · CE-marked between {} · latency min/p50/p99/max {}/{}/{}/{} µs · {clocks}",
            h.from,
            h.to,
            h.matched,
            h.missing,
            pct(&h.loss),
            pct(&h.marking),
            us_signed(min),
            us_signed(p50),
            us_signed(p99),
            us_signed(max)
        );
    }
}

fn us_signed(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// A hop's fitted marking profile in one line (the HTML's too).
pub(super) fn marking_profile(p: &crate::model::MarkingProfile) -> String {
    let at = |b: Option<u64>, ns: Option<u64>| match (b, ns) {
        (Some(b), Some(ns)) => format!("{:.1} KB ({} µs)", b as f64 / 1000.0, us(ns)),
        _ => "not reached".to_string(),
    };
    match p.kmin_ns {
        None => format!(
            "{} of {} frames marked between the points: too few to fit the thresholds (confidence {})",
            p.marked, p.frames, p.confidence
        ),
        Some(_) => format!(
            "Kmin {}, Kmax {}, pmax {:.2} · {} of {} frames marked · confidence {}",
            at(p.kmin_bytes, p.kmin_ns),
            at(p.kmax_bytes, p.kmax_ns),
            p.pmax.unwrap_or(0.0),
            p.marked,
            p.frames,
            p.confidence
        ),
    }
}

/// Sources, frames by class, malformed frames and drops.
/// The first line: what was analysed.
fn header(o: &mut String, r: &Report) {
    let c = &r.capture;
    let span = c.end_ns.saturating_sub(c.start_ns) as f64 / 1e9;
    let _ = writeln!(
        o,
        "roce-analyzer {} · {} · {} source{} · {} frames over {:.6} s{}",
        r.tool.version,
        r.kind,
        c.sources.len(),
        if c.sources.len() == 1 { "" } else { "s" },
        c.frames,
        span,
        if c.partial { " · PARTIAL (an input was truncated)" } else { "" }
    );
}

/// Outputs that could not be written (the report is partial: exit code 3), first: whoever
/// reads the summary must know a file they expect is missing or incomplete.
fn failed_outputs(o: &mut String, r: &Report) {
    if r.output_failures.is_empty() {
        return;
    }
    let _ = writeln!(o, "OUTPUTS FAILED (the others were written):");
    for f in &r.output_failures {
        let _ = writeln!(o, "  {}: {}", f.output, f.error);
    }
    if let Some(x) = r.export.as_ref().filter(|x| x.dropped > 0) {
        let _ = writeln!(o, "  --export: {} line(s) written, {} dropped whole (none cut)", x.lines, x.dropped);
    }
    o.push('\n');
}

/// Entries of the diagnosis the summary shows; the rest are counted (all are in the audit).
const DIAGNOSED: usize = 5;

/// The diagnosis: what is wrong, where, what to do, most important first.
fn diagnosis(o: &mut String, r: &Report) {
    let all = &r.diagnosis;
    if all.is_empty() {
        let _ = writeln!(
            o,
            "DIAGNOSIS: nothing wrong found in these {} frames (no finding, PFC storm, deadlock or incast)\n",
            r.capture.frames
        );
        return;
    }
    let _ = writeln!(o, "DIAGNOSIS (most important first):");
    for (i, d) in all.iter().take(DIAGNOSED).enumerate() {
        let _ = writeln!(o, "  {}. {:<7} [{}] {}", i + 1, d.severity, d.code, d.what);
        if !d.place.is_empty() {
            let _ = writeln!(o, "     where: {}", d.place);
        }
        let _ = writeln!(o, "     do:    {}", d.advice);
    }
    if all.len() > DIAGNOSED {
        let _ = writeln!(o, "  … and {} more below", all.len() - DIAGNOSED);
    }
    let _ = writeln!(o);
}

/// Sources, frame classes, what was left out or dropped.
fn totals(o: &mut String, r: &Report) {
    let c = &r.capture;
    for s in &c.sources {
        let _ = writeln!(o, "  source {} = {} ({})", s.label, s.name, s.kind);
    }
    let main = ["roce", "cnp", "pfc", "pause", "non_roce"];
    let line: Vec<String> = main.iter().map(|k| format!("{k} {}", c.classes.get(*k).copied().unwrap_or(0))).collect();
    let _ = writeln!(o, "frames: {}", line.join(" · "));
    if let Some(f) = &c.flows_folded {
        let _ = writeln!(
            o,
            "flows folded: {} idle flows ({} packets, {} bytes) kept only as one aggregate (bounded memory)",
            f.flows, f.packets, f.bytes
        );
    }
    if let Some(f) = &c.filter {
        let _ = writeln!(o, "filter: {} · {} frames left out (counted, not analysed)", f.expr, f.frames_out);
    }
    let bad: Vec<String> = c
        .classes
        .iter()
        .filter(|(k, v)| !main.contains(&k.as_str()) && **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if !bad.is_empty() {
        let _ = writeln!(o, "malformed: {}", bad.join(" · "));
    }
    let drops: Vec<String> = c.dropped.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(o, "dropped: {}", if drops.is_empty() { "none".into() } else { drops.join(" · ") });
}

/// The `top` flows by bytes.
fn top_flows(o: &mut String, r: &Report, top: usize) {
    let flows = super::select::by_bytes(r);
    let _ = writeln!(o, "\nflows: {} (top {} by bytes)", r.flows.len(), top.min(r.flows.len()));
    if !flows.is_empty() {
        let _ = writeln!(
            o,
            "  {:<18} {:<18} {:>5} {:>8} {:>10} {:>12} {:>7} {:>6} {:>5}  labels",
            "src", "dst", "sport", "dst_qp", "packets", "bytes", "CE", "CNP", "dscp"
        );
        for f in flows.iter().take(top) {
            let dscp: Vec<&str> = f.dscp.keys().collect();
            let _ = writeln!(
                o,
                "  {:<18} {:<18} {:>5} {:>#8x} {:>10} {:>12} {:>7} {:>6} {:>5}  {}",
                f.src,
                f.dst,
                f.udp_sport,
                f.dst_qp,
                f.packets,
                f.bytes,
                f.ecn.ce,
                f.opcodes.get("CNP").copied().unwrap_or(0),
                dscp.join(","),
                f.labels.join(",")
            );
        }
    }
}

/// PFC and PAUSE senders with their pause time, and storms.
fn pfc(o: &mut String, p: &crate::model::Pfc) {
    let _ = writeln!(o, "\nPFC: {} frames · 802.3x PAUSE: {} frames", p.frames, p.pause_8023x_frames);
    if !p.senders.is_empty() || !p.pause_senders.is_empty() {
        let _ = writeln!(
            o,
            "  {:<17} {:<14} {:>4} {:>8} {:>8} {:>8} {:>12} {:>12}",
            "sender", "device:port", "prio", "frames", "xoff", "xon", "quanta", "paused ms"
        );
        let place = super::select::place;
        let mut row = |mac: &str, place: String, prio: String, c: &crate::model::PauseCounts, paused: u64| {
            let _ = writeln!(
                o,
                "  {:<17} {:<14} {:>4} {:>8} {:>8} {:>8} {:>12} {:>12.3}",
                mac,
                place,
                prio,
                c.frames,
                c.xoff,
                c.xon,
                c.quanta,
                paused as f64 / 1e6
            );
        };
        for s in &p.senders {
            row(&s.mac, place(&s.device, &s.port), s.priority.to_string(), &s.counts, s.pause.paused_ns);
        }
        for s in &p.pause_senders {
            row(&s.mac, place(&s.device, &s.port), "all".into(), &s.counts, s.pause.paused_ns);
        }
    }
    ecn_before_pfc(o, p);
    for st in &p.storms {
        let _ = writeln!(
            o,
            "  STORM: {} ({}) priority {} paused {:.1} ms from {}",
            st.mac,
            st.device.as_deref().unwrap_or("?"),
            st.priority,
            st.duration_ns as f64 / 1e6,
            st.start_ns
        );
    }
}

/// ECN before PFC: each sender's onsets with marks before them, each priority's pause rate.
fn ecn_before_pfc(o: &mut String, p: &crate::model::Pfc) {
    for s in &p.senders {
        if let Some(l) = s.ecn_lead.as_ref().filter(|l| l.onsets > 0) {
            let _ = writeln!(
                o,
                "  ECN before PFC: {} priority {}: {} of {} pause onsets had CE marks{} in the {} µs before{}",
                s.mac,
                s.priority,
                l.preceded,
                l.onsets,
                l.link.as_ref().map(|k| format!(" on flows through {k}")).unwrap_or_default(),
                l.window_ns / 1000,
                l.lead_ns_p50.map(|n| format!(" (median lead {:.1} µs)", n as f64 / 1e3)).unwrap_or_default()
            );
        }
    }
    for r in &p.rates {
        if let Some(f) = r.frames_per_million {
            let _ = writeln!(
                o,
                "  priority {}: {} pause frames per million data frames ({} of {}), {:.1} µs paused per million",
                r.priority,
                format_args!("{f:.1}"),
                r.pause_frames,
                r.data_frames,
                r.paused_ns_per_million.unwrap_or(0.0) / 1e3
            );
        }
    }
}

/// The NIC's own counters over the run.
fn nic(o: &mut String, nic: &crate::model::Nic) {
    /// The counters that tell a RoCE story, as mlx5 names them.
    const KEY: [&str; 8] = [
        "np_cnp_sent",
        "rp_cnp_handled",
        "np_ecn_marked_roce_packets",
        "out_of_sequence",
        "duplicate_request",
        "packet_seq_err",
        "local_ack_timeout_err",
        "rnr_nak_retry_err",
    ];
    let _ = writeln!(o, "\nNIC counters over the run:");
    if nic.rdma.is_empty() {
        let _ = writeln!(o, "  no RDMA device on {}", nic.netdev.name);
    }
    for p in &nic.rdma {
        let kv: Vec<String> = KEY.iter().filter_map(|k| p.counters.get(*k).map(|v| format!("{k} {v}"))).collect();
        let _ = writeln!(o, "  {} port {}: {}", p.device, p.port, kv.join(" · "));
    }
    let pause: Vec<String> = nic
        .netdev
        .counters
        .iter()
        .filter(|(k, v)| k.contains("pause") && **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    match &nic.netdev.error {
        Some(e) => {
            let _ = writeln!(o, "  {}: driver statistics unavailable ({e})", nic.netdev.name);
        }
        None if pause.is_empty() => {
            let _ = writeln!(o, "  {}: no pause frames counted by the driver", nic.netdev.name);
        }
        None => {
            let _ = writeln!(o, "  {}: {}", nic.netdev.name, pause.join(" · "));
        }
    }
}

/// The visibility notes.
fn visibility(o: &mut String, r: &Report) {
    if !r.visibility.is_empty() {
        let _ = writeln!(o, "\nwhat this vantage point could not see:");
        for n in &r.visibility {
            let _ = writeln!(o, "  - [{}] {}", n.code, n.message);
        }
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The "health" table: flows with PSN anomalies or NAKs first, then RTT, CE/CNP and findings.
fn health(o: &mut String, r: &Report, top: usize) {
    health_flows(o, r, top);
    rtt(o, r);
    ecn(o, r, top);
    audit(o, r);
    evidence(o, r);
}

/// The flows with requests or ACKs, most anomalies first.
fn health_flows(o: &mut String, r: &Report, top: usize) {
    let flows = super::select::by_anomalies(r);
    let _ = writeln!(
        o,
        "\nhealth: {} flows with requests or ACKs (top {} by anomalies)",
        flows.len(),
        top.min(flows.len())
    );
    if !flows.is_empty() {
        let _ = writeln!(
            o,
            "  {:<18} {:<18} {:>8} {:>9} {:>6} {:>7} {:>6} {:>6} {:>5} {:>5} {:>7} {:>9} {:>9}",
            "src",
            "dst",
            "dst_qp",
            "requests",
            "oos",
            "skipped",
            "dup",
            "seqNAK",
            "RNR",
            "NAK*",
            "ACKs",
            "rtt p50us",
            "p99us"
        );
        for f in flows.iter().take(top) {
            let n = &f.naks;
            let other = super::select::naks(f) - n[aeth::PSN_SEQUENCE_ERROR] - n[aeth::RNR];
            let (p50, p99) = match &f.rtt_ns {
                Some(r) if r.percentiles.samples > 0 => (us(r.percentiles.p50), us(r.percentiles.p99)),
                _ => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                o,
                "  {:<18} {:<18} {:>#8x} {:>9} {:>6} {:>7} {:>6} {:>6} {:>5} {:>5} {:>7} {:>9} {:>9}",
                f.src,
                f.dst,
                f.dst_qp,
                f.psn[count::REQUESTS],
                f.psn[count::OUT_OF_SEQUENCE],
                f.psn[count::PSN_SKIPPED],
                f.psn[count::DUPLICATES],
                n[aeth::PSN_SEQUENCE_ERROR],
                n[aeth::RNR],
                other,
                n[aeth::ACK],
                p50,
                p99
            );
        }
    }
}

/// RTT over all flows.
fn rtt(o: &mut String, r: &Report) {
    let t = &r.rtt_ns;
    if t.percentiles.samples > 0 || t.timeouts > 0 {
        let p = &t.percentiles;
        let [min, p50, p90, p99, p999, max] = p.ladder().map(us);
        let _ = writeln!(
            o,
            "RTT: {} samples{} · min {min} · p50 {p50} · p90 {p90} · p99 {p99} · p99.9 {p999} · max {max} us · {} timeouts · {} pending",
            p.samples,
            if p.exact { "" } else { " (1% histogram)" },
            t.timeouts,
            t.pending
        );
    }
}

/// CE marks and CNPs per pair.
/// The `top` host pairs with CE marks or CNPs, most unanswered marks first, then most marks.
fn ecn(o: &mut String, r: &Report, top: usize) {
    let pairs = super::select::marked_pairs(r);
    for p in pairs.iter().take(top) {
        let _ = writeln!(
            o,
            "ECN: {} → {}: {} data packets, {} CE · {} CNPs back · {} CE unanswered{}",
            p.a,
            p.b,
            p.data_packets,
            p.ce,
            p.cnp_back,
            p.ce_unanswered,
            match p.ce_pending {
                0 => String::new(),
                n => format!(" · {n} CE pending (within --cnp-timeout of the end)"),
            }
        );
    }
    more(o, pairs.len(), top, "host pairs with CE marks or CNPs");
}

/// "… N more" when a list of `len` was cut to `top` (all are in the JSON).
fn more(o: &mut String, len: usize, top: usize, what: &str) {
    if len > top {
        let _ = writeln!(o, "  … {} more {what} (--top {top}; all in the JSON)", len - top);
    }
}

/// The findings.
fn audit(o: &mut String, r: &Report) {
    if !r.audit.is_empty() {
        let _ = writeln!(o, "audit:");
        for f in &r.audit {
            let evidence = f.evidence.as_ref().map(|e| format!(" → {e}")).unwrap_or_default();
            let _ = writeln!(o, "  {:<7} [{}] {} ({} flows){evidence}", f.severity, f.code, f.message, f.flows.len());
            if !f.flows.is_empty() {
                let _ = writeln!(o, "          flows: {}", crate::model::FlowRef::named(&f.flows, f.flows_omitted));
            }
        }
    }
}

/// The evidence files written.
fn evidence(o: &mut String, r: &Report) {
    if let Some(e) = &r.evidence {
        let frames: u64 = e.files.iter().map(|f| f.frames).sum();
        let left: u64 = e.files.iter().map(|f| f.left_out).sum();
        let _ = writeln!(
            o,
            "evidence: {} pcapng files ({frames} frames{}{}) in {}{}",
            e.files.len(),
            if left > 0 { format!(", {left} past --evidence-max left out") } else { String::new() },
            if e.ring_full > 0 {
                format!(", {} copies lost: the kernel's evidence ring was full", e.ring_full)
            } else {
                String::new()
            },
            e.dir,
            if e.errors.is_empty() { String::new() } else { format!("; errors: {}", e.errors.join("; ")) }
        );
    }
}

/// Senders' reaction to CNPs: the flows with the most CNPs.
fn dcqcn(o: &mut String, d: &crate::model::Dcqcn, top: usize) {
    let _ = writeln!(
        o,
        "\nDCQCN: reaction to CNPs ({} µs windows, {} µs horizon){}",
        d.rate_window_ns / 1000,
        d.horizon_ns / 1000,
        if d.unattributed_cnps > 0 {
            format!(" · {} CNPs not attributed to a flow", d.unattributed_cnps)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        o,
        "  {:<40} {:>6} {:>7} {:>9} {:>9} {:>6} {:>12} {:>12}",
        "flow", "CNPs", "reacted", "unreacted", "unjudged", "cut", "reaction µs", "recovery µs"
    );
    let flows = super::select::by_cnps(d);
    let opt = |v: Option<u64>| v.map_or("-".into(), |n| format!("{:.1}", n as f64 / 1000.0));
    for f in flows.iter().take(top) {
        let s = &f.stats;
        let _ = writeln!(
            o,
            "  {:<40} {:>6} {:>7} {:>9} {:>9} {:>6} {:>12} {:>12}",
            format!("{} → {} {:#x}", f.src, f.dst, f.dst_qp),
            s.cnps,
            s.reacted,
            s.unreacted_cnps,
            s.no_rate_before,
            s.cut_ratio_p50.map_or("-".into(), |c| format!("{c:.2}")),
            opt(s.reaction_ns_p50),
            opt(s.recovery_ns_p50)
        );
    }
    more(o, flows.len(), top, "flows with CNPs");
}

/// Congestion trees as text, deadlocks, incast episodes, ECMP.
fn fabric(o: &mut String, r: &Report, top: usize) {
    trees(o, r, top);
    incast(o, r);
    ecmp(o, r);
}

/// The congestion trees, their victims, and the deadlocks.
fn trees(o: &mut String, r: &Report, top: usize) {
    let c = &r.congestion_tree;
    for t in &c.trees {
        let _ = writeln!(
            o,
            "\ncongestion tree, priority {}:",
            if t.priority == 8 { "all (802.3x)".into() } else { t.priority.to_string() }
        );
        for root in &t.roots {
            let egress = match (&root.congested_port, &root.congested_host) {
                (Some(p), Some(h)) => format!(" — congested egress {p} toward {h}"),
                (None, Some(h)) => format!(" — congested toward {h}"),
                _ => String::new(),
            };
            let _ = writeln!(o, "  {} (root){egress}", root.device);
            let mut seen = vec![root.device.clone()];
            tree_children(o, t, &root.device, 2, &mut seen);
        }
        if t.roots.is_empty() {
            let _ = writeln!(o, "  no root: every device pausing is paused too (a cycle)");
            for e in &t.edges {
                let _ = writeln!(o, "    {} pauses {} ({:.3} ms)", e.from, e.to, e.paused_ns as f64 / 1e6);
            }
        }
        let _ = writeln!(
            o,
            "  contributors: {} flows · victims (head-of-line blocked): {} flows",
            t.contributors.len(),
            t.victims.len()
        );
        for (name, flows) in [("contributor", &t.contributors), ("victim", &t.victims)] {
            for f in flows.iter().take(top) {
                let _ = writeln!(o, "    {name} {}", f.label());
            }
            more(o, flows.len(), top, &format!("{name}s"));
        }
    }
    if !c.unresolved.is_empty() {
        let _ = writeln!(o, "  PFC senders the topology does not place: {}", c.unresolved.join(", "));
    }
    for d in &c.deadlocks {
        // A part larger than its example cycle: how many devices and links wait in it.
        let part = match d.devices.len() > d.cycle.len() {
            true => format!(" ({} devices, {} links in the circle)", d.devices.len(), d.links.len()),
            false => String::new(),
        };
        let _ = writeln!(
            o,
            "DEADLOCK priority {}: {} → {}{part} for {:.1} ms from {}",
            d.priority,
            d.cycle.join(" → "),
            d.cycle.first().map_or("", String::as_str),
            d.duration_ns as f64 / 1e6,
            d.start_ns
        );
    }
    if c.deadlocks_omitted > 0 {
        let _ = writeln!(o, "  {} more deadlocks counted, not listed", c.deadlocks_omitted);
    }
}

/// The incast episodes.
fn incast(o: &mut String, r: &Report) {
    let i = &r.incast;
    if !i.episodes.is_empty() {
        let _ = writeln!(
            o,
            "\nincast: {} episodes (≥ {} senders within {} us)",
            i.episodes.len(),
            i.min_senders,
            i.window_ns / 1000
        );
        for e in &i.episodes {
            let _ = writeln!(
                o,
                "  → {}: {:.1} us, peak {} senders, {} bytes, peak {:.1} Gbit/s ({:.0}% of link), CE {} · CNP {} · PFC {}",
                e.dst,
                e.end_ns.saturating_sub(e.start_ns) as f64 / 1e3,
                e.peak_senders,
                e.bytes,
                e.peak_gbps,
                e.peak_link_ratio * 100.0,
                e.ce_packets,
                e.cnp_packets,
                e.pfc_frames
            );
        }
    }
}

/// ECMP: source-port entropy, observed shares, predicted paths, findings.
fn ecmp(o: &mut String, r: &Report) {
    let e = &r.ecmp;
    let _ = writeln!(o, "\nECMP: {} distinct UDP source ports ({:.2} bits)", e.distinct_sports, e.sport_entropy_bits);
    if let Some(obs) = &e.observed {
        let shares: Vec<String> =
            obs.by_label.iter().map(|(l, s)| format!("{l} {} B/{} flows", s.bytes, s.flows)).collect();
        let _ = writeln!(o, "  observed: {} · imbalance {:.2}", shares.join(" · "), obs.imbalance);
    }
    if let Some(p) = &e.predicted {
        for t in &p.tiers {
            let per: Vec<String> = t.per_path.iter().map(|x| x.flows.to_string()).collect();
            let _ = writeln!(
                o,
                "  tier {}:{}:{}:{}: flows per path [{}] · imbalance {:.2}",
                t.hash,
                t.fanout,
                t.seed,
                t.shift,
                per.join(" "),
                t.imbalance
            );
        }
        let _ = writeln!(
            o,
            "  {} of {} path combinations used{}",
            p.combinations_used,
            p.combinations_total,
            if p.polarized { " — POLARIZED" } else { "" }
        );
    }
    for f in &e.findings {
        let _ = writeln!(o, "  {:<7} [{}] {}", f.severity, f.code, f.message);
        if !f.flows.is_empty() {
            let _ = writeln!(o, "          flows: {}", crate::model::FlowRef::named(&f.flows, f.flows_omitted));
        }
    }
}

/// The devices `name` pauses, recursively (each once).
fn tree_children(o: &mut String, t: &crate::model::Tree, name: &str, depth: usize, seen: &mut Vec<String>) {
    for e in t.edges.iter().filter(|e| e.from == name) {
        let _ = writeln!(o, "{}└ pauses {} ({:.3} ms)", "  ".repeat(depth), e.to, e.paused_ns as f64 / 1e6);
        if !seen.contains(&e.to) {
            seen.push(e.to.clone());
            tree_children(o, t, &e.to, depth + 1, seen);
        }
    }
}
