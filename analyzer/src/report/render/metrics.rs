//! Prometheus text exposition of a report (live mode serves it on `--metrics`). Cardinality
//! is bounded: the top flows by bytes get their own series, the rest one "other" bucket.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use analyzer_common::psn::count;

use crate::report::model::{Naks, PsnJson, Report, Responder, Severity};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FlowLabels {
    src: String,
    dst: String,
    udp_sport: u16,
    dst_qp: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SenderLabels {
    mac: String,
    /// 0..7, or "all" for 802.3x PAUSE.
    priority: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NicPortLabels {
    device: String,
    port: String,
    counter: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NetdevLabels {
    iface: String,
    counter: String,
}

fn counter_family<L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> Family<L, Counter> {
    let f = Family::<L, Counter>::default();
    registry.register(name, help, f.clone());
    f
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let g = Gauge::<i64>::default();
    g.set(value.min(i64::MAX as u64) as i64);
    registry.register(name, help, g);
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(value);
    registry.register(name, help, c);
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SeverityLabel {
    severity: String,
}

/// Bucket bounds of the RTT histogram (seconds): 1 µs doubling to about 1 s.
fn rtt_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(1e-6, 2.0, 21)
}

/// The report's totals as Prometheus text; `top` flows get their own series. `rtt_ns` are the
/// RTT samples behind the report's percentiles (for the histogram).
pub fn render(r: &Report, top: usize, rtt_ns: &[u64]) -> String {
    let mut reg = Registry::with_prefix("roce_analyzer");
    totals(&mut reg, r);
    flows(&mut reg, r, top);
    pfc(&mut reg, r);
    transport(&mut reg, r, rtt_ns);
    if let Some(v) = &r.vantage {
        vantage(&mut reg, v);
    }
    if let Some(n) = &r.nic {
        nic(&mut reg, n);
    }
    let info = Family::<VersionLabel, Gauge>::default();
    reg.register("build_info", "The agent's version (always 1)", info.clone());
    info.get_or_create(&VersionLabel { version: r.tool.version.clone() }).set(1);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg).expect("writing to a String cannot fail");
    classic(&out)
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics text as the Prometheus text format every scraper and `promtool check metrics`
/// read: a counter family's HELP and TYPE name its `_total` samples, no `# EOF`.
fn classic(open_metrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        open_metrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(open_metrics.len() + 64 * counters.len());
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HopLabels {
    from: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HopQuantileLabels {
    from: String,
    to: String,
    /// min, p50, p99 or max (`quantile` is reserved for summaries).
    stat: String,
}

/// Per hop between vantage points: frames matched, missing, CE-marked between, latency.
fn vantage(reg: &mut Registry, v: &crate::report::model::Vantage) {
    let matched = counter_family::<HopLabels>(reg, "vantage_hop_frames_matched", "Frames seen at both points of a hop");
    let missing = counter_family::<HopLabels>(
        reg,
        "vantage_hop_frames_missing",
        "Frames of flows seen at both points that the first point saw and the second never did",
    );
    let ce = counter_family::<HopLabels>(
        reg,
        "vantage_hop_ce_marked",
        "Matched frames CE-marked at the second point and not at the first",
    );
    let latency = Family::<HopQuantileLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register(
        "vantage_hop_latency_seconds",
        "Time from the first point to the second over matched frames: min, p50, p99, max (synchronised capture clocks)",
        latency.clone(),
    );
    for h in &v.hops {
        let l = HopLabels { from: h.from.clone(), to: h.to.clone() };
        matched.get_or_create(&l).inc_by(h.frames_matched);
        missing.get_or_create(&l).inc_by(h.frames_missing);
        ce.get_or_create(&l).inc_by(h.ce_marked);
        for (q, ns) in
            [("min", h.latency_ns.min), ("p50", h.latency_ns.p50), ("p99", h.latency_ns.p99), ("max", h.latency_ns.max)]
        {
            let q = HopQuantileLabels { from: h.from.clone(), to: h.to.clone(), stat: q.into() };
            latency.get_or_create(&q).set(ns as f64 / 1e9);
        }
    }
}

/// Frames by class and losses.
fn totals(reg: &mut Registry, r: &Report) {
    let frames = counter_family::<ClassLabel>(
        reg,
        "frames",
        "Frames by class (roce, cnp, pfc, pause, non_roce, malformed kinds)",
    );
    for (class, n) in &r.capture.classes {
        frames.get_or_create(&ClassLabel { class: class.clone() }).inc_by(*n);
    }
    let dropped = counter_family::<ReasonLabel>(reg, "dropped", "Frames or events lost before analysis, by reason");
    for (reason, n) in &r.capture.dropped {
        dropped.get_or_create(&ReasonLabel { reason: reason.clone() }).inc_by(*n);
    }
    if let Some(f) = &r.capture.flows_folded {
        counter(reg, "flows_folded", "Idle flows folded into one aggregate to bound memory", f.flows);
    }
    if let Some(f) = &r.capture.filter {
        counter(reg, "filtered_frames", "Frames --filter left out (counted, not analysed)", f.frames_out);
    }
}

/// The top flows by bytes with their own series, the rest in one bucket, CE and CNPs.
fn flows(reg: &mut Registry, r: &Report, top: usize) {
    let mut flows: Vec<_> = r.flows.iter().collect();
    flows.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| crate::report::model::flow_sort_key(a).cmp(&crate::report::model::flow_sort_key(b)))
    });
    let bytes = counter_family::<FlowLabels>(reg, "flow_bytes", "RoCE bytes of the top flows by bytes");
    let packets = counter_family::<FlowLabels>(reg, "flow_packets", "RoCE packets of the top flows by bytes");
    for f in flows.iter().take(top) {
        let l = FlowLabels { src: f.src.clone(), dst: f.dst.clone(), udp_sport: f.udp_sport, dst_qp: f.dst_qp };
        bytes.get_or_create(&l).inc_by(f.bytes);
        packets.get_or_create(&l).inc_by(f.packets);
    }
    let rest = flows.iter().skip(top);
    let (other_bytes, other_packets) = rest.fold((0, 0), |(b, p), f| (b + f.bytes, p + f.packets));
    gauge(reg, "other_flows_bytes", "RoCE bytes of the flows beyond the top ones (their set changes)", other_bytes);
    gauge(reg, "other_flows_packets", "RoCE packets of the flows beyond the top ones", other_packets);
    gauge(reg, "flows", "Flows seen", r.flows.len() as u64);
    counter(reg, "ce_packets", "RoCE packets marked CE", r.flows.iter().map(|f| f.ecn.ce).sum());
    counter(reg, "cnp", "CNPs", r.capture.classes.get("cnp").copied().unwrap_or(0));
}

/// PFC/PAUSE frames, quanta and pause time per sender and priority; storms.
fn pfc(reg: &mut Registry, r: &Report) {
    let pfc = counter_family::<SenderLabels>(reg, "pfc_frames", "PFC/PAUSE frames per sender and priority");
    let quanta =
        counter_family::<SenderLabels>(reg, "pfc_quanta", "Pause quanta (512 bit times) per sender and priority");
    for s in &r.pfc.senders {
        let l = SenderLabels { mac: s.mac.clone(), priority: s.priority.to_string() };
        pfc.get_or_create(&l).inc_by(s.counts.frames);
        quanta.get_or_create(&l).inc_by(s.counts.quanta);
    }
    for s in &r.pfc.pause_senders {
        let l = SenderLabels { mac: s.mac.clone(), priority: "all".into() };
        pfc.get_or_create(&l).inc_by(s.counts.frames);
        quanta.get_or_create(&l).inc_by(s.counts.quanta);
    }
    let paused = Family::<SenderLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register(
        "pfc_paused_seconds",
        "Time paused (union of the pause intervals at --link-speed) per sender and priority",
        paused.clone(),
    );
    let secs = |ns: u64| ns as f64 / 1e9;
    for s in &r.pfc.senders {
        paused
            .get_or_create(&SenderLabels { mac: s.mac.clone(), priority: s.priority.to_string() })
            .inc_by(secs(s.pause.paused_ns));
    }
    for s in &r.pfc.pause_senders {
        paused
            .get_or_create(&SenderLabels { mac: s.mac.clone(), priority: "all".into() })
            .inc_by(secs(s.pause.paused_ns));
    }
    counter(reg, "pfc_storms", "Continuous pauses of at least --pfc-storm", r.pfc.storms.len() as u64);
}

/// PSN anomalies, AETHs, RTT, incast episodes and audit findings.
fn transport(reg: &mut Registry, r: &Report, rtt_ns: &[u64]) {
    let psn = counter_family::<KindLabel>(reg, "psn_anomalies", "PSN anomalies over all flows, by kind");
    let mut psn_sum = PsnJson::default();
    let mut responder_sum = Responder::default();
    let mut aeth_sum = Naks::default();
    for f in &r.flows {
        psn_sum.add(&f.psn.sequence);
        responder_sum.add(&f.psn.responder);
        aeth_sum.add(&f.naks);
    }
    let responder = counter_family::<KindLabel>(
        reg,
        "responder_anomalies",
        "Requests the responder's NIC would count as out of sequence (once per NAK episode) or duplicate, by kind",
    );
    for (kind, n) in responder_sum.iter() {
        responder.get_or_create(&KindLabel { kind: kind.into() }).inc_by(n);
    }
    // Every sequence counter but the request count itself is an anomaly.
    for (kind, n) in psn_sum.iter().filter(|(k, _)| *k != count::NAMES[count::REQUESTS]) {
        psn.get_or_create(&KindLabel { kind: kind.into() }).inc_by(n);
    }
    let aeth = counter_family::<KindLabel>(reg, "aeth", "ACKs and NAKs (AETH syndromes) over all flows, by kind");
    for (kind, n) in aeth_sum.iter() {
        aeth.get_or_create(&KindLabel { kind: kind.into() }).inc_by(n);
    }
    let hist = prometheus_client::metrics::histogram::Histogram::new(rtt_buckets());
    for v in rtt_ns {
        hist.observe(*v as f64 / 1e9);
    }
    reg.register("rtt_seconds", "Round-trip time, request with AckReq to the ACK covering it", hist);
    counter(reg, "rtt_timeouts", "Requests with AckReq not acknowledged within --rtt-timeout", r.rtt_ns.timeouts);
    counter(reg, "incast_episodes", "Incast episodes", r.incast.episodes.len() as u64);
    let audit = counter_family::<SeverityLabel>(reg, "audit_findings", "Audit findings by severity");
    for sev in Severity::ALL {
        audit
            .get_or_create(&SeverityLabel { severity: sev.name().into() })
            .inc_by(r.audit.iter().filter(|f| f.severity == sev).count() as u64);
    }
}

/// The NIC's own counters.
fn nic(reg: &mut Registry, nic: &crate::report::model::Nic) {
    let rdma = counter_family::<NicPortLabels>(reg, "nic_rdma", "RDMA port counters (sysfs), since the agent started");
    for p in &nic.rdma {
        for (name, v) in &p.counters {
            let l = NicPortLabels { device: p.device.clone(), port: p.port.clone(), counter: name.clone() };
            rdma.get_or_create(&l).inc_by(*v);
        }
    }
    let netdev =
        counter_family::<NetdevLabels>(reg, "nic_netdev", "Driver statistics (ethtool), since the agent started");
    for (name, v) in &nic.netdev.counters {
        netdev.get_or_create(&NetdevLabels { iface: nic.netdev.name.clone(), counter: name.clone() }).inc_by(*v);
    }
}
