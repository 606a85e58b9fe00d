//! The refreshing terminal view of live mode: totals and rates since the previous poll, top
//! flows by rate, CE / CNP / PFC rates, pause time, transport health and losses.

use std::fmt::Write as _;
use std::time::Duration;

use analyzer_common::FrameClass;
use analyzer_common::flow::FlowKey;
use analyzer_common::psn::count;
use rustc_hash::FxHashMap;

use crate::model::addr_string;
use crate::pipeline::Pipeline;

/// Previous totals, to turn them into rates.
#[derive(Debug, Default)]
pub struct LiveView {
    prev_at: Duration,
    prev_classes: [u64; FrameClass::COUNT],
    prev_flows: FxHashMap<FlowKey, (u64, u64, u64)>,
}

impl LiveView {
    pub fn render(&mut self, run: &Pipeline, iface: &str, mode: &str, elapsed: Duration, top: usize) -> String {
        let iface = super::text::escape(iface);
        let dt = (elapsed - self.prev_at).as_secs_f64().max(1e-9);
        let mut o = String::new();
        self.header(&mut o, run, &iface, mode, elapsed, dt);
        let next = self.flows(&mut o, run, dt, top);
        totals(&mut o, run);
        self.prev_at = elapsed;
        self.prev_classes = run.engine.classes;
        self.prev_flows = next;
        o
    }

    /// The interface, frames by class with their rates, losses.
    fn header(&self, o: &mut String, run: &Pipeline, iface: &str, mode: &str, elapsed: Duration, dt: f64) {
        let rate = |now: u64, before: u64| (now.saturating_sub(before)) as f64 / dt;
        let _ = writeln!(
            o,
            "roce-analyzer live · {iface} ({mode} XDP) · {:.0} s · {} frames ({:.0}/s)",
            elapsed.as_secs_f64(),
            run.engine.frames,
            rate(run.engine.frames, self.prev_classes.iter().sum())
        );
        let mut line = Vec::new();
        for c in [FrameClass::Roce, FrameClass::Cnp, FrameClass::Pfc, FrameClass::Pause, FrameClass::NonRoce] {
            line.push(format!(
                "{} {} ({:.0}/s)",
                c.name(),
                run.engine.class_count(c),
                rate(run.engine.class_count(c), self.prev_classes[c as usize])
            ));
        }
        let malformed: u64 =
            FrameClass::ALL.iter().filter(|c| c.is_malformed()).map(|c| run.engine.class_count(*c)).sum();
        line.push(format!("malformed {malformed}"));
        let _ = writeln!(o, "{}", line.join(" · "));
        let losses: Vec<String> =
            run.engine.dropped.iter().filter(|(_, n)| **n > 0).map(|(r, n)| format!("{} {n}", r.name())).collect();
        let _ = writeln!(o, "losses: {}", if losses.is_empty() { "none".into() } else { losses.join(" · ") });
    }

    /// The top flows by rate since the last view; returns the flows' totals for the next.
    fn flows(&self, o: &mut String, run: &Pipeline, dt: f64, top: usize) -> FxHashMap<FlowKey, (u64, u64, u64)> {
        let rate = |now: u64, before: u64| (now.saturating_sub(before)) as f64 / dt;
        let mut rows: Vec<(f64, f64, f64, &FlowKey, u64)> = Vec::new();
        let mut next = FxHashMap::default();
        for (k, s) in run.engine.flows.iter() {
            let (b0, p0, ce0) = self.prev_flows.get(k).copied().unwrap_or((0, 0, 0));
            rows.push((
                rate(s.bytes, b0) * 8.0 / 1e9,
                rate(s.packets, p0),
                rate(s.ecn[3], ce0),
                k,
                s.opcodes.get(0x81),
            ));
            next.insert(*k, (s.bytes, s.packets, s.ecn[3]));
        }
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let _ = writeln!(o, "\nflows: {} · top {} by rate", run.engine.flows.len(), top.min(rows.len()));
        let _ = writeln!(
            o,
            "  {:<18} {:<18} {:>5} {:>8} {:>9} {:>10} {:>8} {:>7}",
            "src", "dst", "sport", "dst_qp", "Gbit/s", "pkt/s", "CE/s", "CNP"
        );
        for (gbps, pps, ce, k, cnp) in rows.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:<18} {:<18} {:>5} {:>#8x} {:>9.3} {:>10.0} {:>8.0} {:>7}",
                addr_string(k.ip_version, &k.src),
                addr_string(k.ip_version, &k.dst),
                k.udp_sport,
                k.dst_qp,
                gbps,
                pps,
                ce,
                cnp
            );
        }
        next
    }
}

/// PFC/PAUSE so far, and the transport's health over all flows.
fn totals(o: &mut String, run: &Pipeline) {
    let pfc: u64 = run.engine.pfc.pfc_frames + run.engine.pfc.pause_frames;
    let paused: u64 = run.analyses.pause.timers.values().map(|t| t.paused_ns()).sum();
    let _ = writeln!(
        o,
        "\nPFC/PAUSE frames: {pfc} · senders: {} · paused {:.3} ms in all · storms {}",
        run.engine.pfc.pfc.len() + run.engine.pfc.pause.len(),
        paused as f64 / 1e6,
        run.analyses.pause.storms().len()
    );
    // Transport health so far: PSN anomalies and NAKs over all flows, RTT, incast.
    let (mut oos, mut dup, mut naks) = (0, 0, 0);
    for (_, s) in run.engine.flows.iter() {
        oos += s.psn.count[count::OUT_OF_SEQUENCE];
        dup += s.psn.count[count::DUPLICATES];
        naks += s.psn.naks();
    }
    let rtt = run.analyses.rtt.overall();
    let p99 = rtt.percentiles().map_or("-".to_string(), |p| format!("{:.1} µs", p.p99 as f64 / 1e3));
    let _ = writeln!(
        o,
        "health: out-of-sequence {oos} · duplicates {dup} · NAKs {naks} · RTT samples {} (p99 {p99}) · incast episodes {}",
        rtt.len(),
        run.analyses.incast.episodes().len()
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_interface_name_is_escaped() {
        let run = crate::pipeline::Pipeline::default();
        let text =
            super::LiveView::default().render(&run, "eth\u{1b}[2J0", "native", std::time::Duration::from_secs(1), 5);
        assert!(text.contains("eth\\x1b[2J0") && !text.contains('\u{1b}'), "{text}");
    }
}
