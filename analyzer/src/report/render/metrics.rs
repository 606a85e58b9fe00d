//! Prometheus text exposition (live mode serves it on `--metrics`). Cardinality is bounded:
//! the top flows by bytes get their own series, the rest one "other" bucket.
//!
//! What the text shows is an [`Input`]: built from a report ([`render`], for a finished run),
//! or each interval straight from the live run's state ([`render_run`]) — sums over the flow
//! table without a per-flow allocation, the RTT histogram the RTT analysis keeps as samples
//! arrive, and findings re-evaluated every few intervals — instead of assembling a report.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use analyzer_common::psn::count;

use crate::analyses::stats::PromBuckets;
use crate::model::{Capture, FlowRef, Naks, Nic, Pfc, PsnJson, Report, Responder, Severity, Vantage, flow_ref};
use crate::pipeline::Pipeline;
use crate::report::assemble::{self, fabric};

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

/// One flow with its own series.
#[derive(Debug, Clone, PartialEq)]
pub struct TopFlow {
    pub flow: FlowRef,
    pub bytes: u64,
    pub packets: u64,
}

/// Findings per severity (in [`Severity::ALL`] order).
pub type FindingCounts = [u64; 3];

/// The findings of a run per severity, as its report lists them in `audit` (the ECMP
/// section's own findings apart).
pub fn finding_counts(run: &Pipeline) -> FindingCounts {
    by_severity(&assemble::judged::judge(run, &assemble::fabric::ecmp(run, false)).audit)
}

fn by_severity(findings: &[crate::model::Finding]) -> FindingCounts {
    let mut n = [0; 3];
    for (i, sev) in Severity::ALL.iter().enumerate() {
        n[i] = findings.iter().filter(|f| f.severity == *sev).count() as u64;
    }
    n
}

/// Everything the metrics text shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub capture: Capture,
    pub flows: u64,
    /// The top flows by bytes (ties by flow key).
    pub top: Vec<TopFlow>,
    pub other_bytes: u64,
    pub other_packets: u64,
    pub ce: u64,
    pub psn: PsnJson,
    pub responder: Responder,
    pub aeth: Naks,
    pub pfc: Pfc,
    pub rtt: PromBuckets,
    pub rtt_timeouts: u64,
    pub incast_episodes: u64,
    pub findings: FindingCounts,
    pub vantage: Option<Vantage>,
    /// Per sender host: CNPs and the reaction to them.
    pub dcqcn_hosts: Vec<crate::model::DcqcnHost>,
    pub nic: Option<Nic>,
    /// Per size class (its label), the completion times in Prometheus' buckets.
    pub message_classes: Vec<(String, PromBuckets)>,
    /// Tail messages per cause.
    pub tail_causes: Vec<(String, u64)>,
    pub version: String,
    /// `--export` / `--export-clickhouse`: lines written or inserted, and given up.
    pub export: Option<crate::model::ExportStats>,
}

/// A size class's completion times (the 1 % histogram's buckets, each at its middle) in
/// Prometheus' buckets: within 0.5 % of the samples', the same live and offline.
fn class_buckets(histogram: &[[u64; 2]]) -> PromBuckets {
    let mut p = PromBuckets::default();
    for [b, n] in histogram {
        let v = crate::analyses::stats::GROWTH.powf(*b as f64 + 0.5).round() as u64;
        for _ in 0..*n {
            p.observe(v);
        }
    }
    p
}

/// Per size class its buckets, and the tail's messages per cause.
type MessageInputs = (Vec<(String, PromBuckets)>, Vec<(String, u64)>);

/// A messages section's size classes and tail, as the metrics show them (none without one).
fn message_inputs(parts: Option<(&[crate::model::MessageClass], &crate::model::Tail)>) -> MessageInputs {
    let Some((classes, tail)) = parts else { return Default::default() };
    (
        classes.iter().map(|c| (c.name.clone(), class_buckets(&c.histogram))).collect(),
        tail.causes.iter().map(|c| (c.cause.clone(), c.messages)).collect(),
    )
}

impl Input {
    /// From a report, and the RTT samples behind it.
    pub fn of_report(r: &Report, top: usize, rtt_ns: &[u64]) -> Input {
        let mut flows: Vec<_> = r.flows.iter().collect();
        flows.sort_by(|a, b| {
            b.bytes.cmp(&a.bytes).then_with(|| crate::model::flow_sort_key(a).cmp(&crate::model::flow_sort_key(b)))
        });
        let (mut psn, mut responder, mut aeth) = (PsnJson::default(), Responder::default(), Naks::default());
        for f in &r.flows {
            psn.add(&f.psn.sequence);
            responder.add(&f.psn.responder);
            aeth.add(&f.naks);
        }
        let rest = flows.iter().skip(top);
        let messages = message_inputs(r.messages.as_ref().map(|m| (&m.classes[..], &m.tail)));
        let mut rtt = PromBuckets::default();
        for v in rtt_ns {
            rtt.observe(*v);
        }
        Input {
            capture: r.capture.clone(),
            flows: r.flows.len() as u64,
            top: flows
                .iter()
                .take(top)
                .map(|f| TopFlow { flow: f.flow_ref(), bytes: f.bytes, packets: f.packets })
                .collect(),
            other_bytes: rest.clone().map(|f| f.bytes).sum(),
            other_packets: rest.map(|f| f.packets).sum(),
            ce: r.flows.iter().map(|f| f.ecn.ce).sum(),
            psn,
            responder,
            aeth,
            pfc: r.pfc.clone(),
            rtt,
            rtt_timeouts: r.rtt_ns.timeouts,
            incast_episodes: r.incast.episodes.len() as u64,
            findings: by_severity(&r.audit),
            vantage: r.vantage.clone(),
            dcqcn_hosts: r.dcqcn.as_ref().map(|d| d.hosts.clone()).unwrap_or_default(),
            nic: r.nic.clone(),
            message_classes: messages.0,
            tail_causes: messages.1,
            version: r.tool.version.clone(),
            export: r.export.clone(),
        }
    }

    /// From a live run's state, without a report: the flow table summed in place (the top
    /// flows picked by a partial sort), `findings` as last evaluated.
    pub fn of_run(run: &Pipeline, top: usize, findings: FindingCounts) -> Input {
        let e = &run.engine;
        let (mut count, mut aeth, mut resp) = ([0; analyzer_common::psn::count::COUNT], [0; 8], [0; 2]);
        let mut ce = 0;
        type Rank = (u64, (u8, [u8; 16], [u8; 16], u16, u32), u32);
        let mut order: Vec<Rank> = Vec::with_capacity(e.flows.len());
        for (i, (k, s)) in e.flows.iter().enumerate() {
            ce += s.ecn[3];
            for (a, b) in count.iter_mut().zip(s.psn.count) {
                *a += b;
            }
            for (a, b) in aeth.iter_mut().zip(s.psn.aeth) {
                *a += b;
            }
            for (a, b) in resp.iter_mut().zip(s.psn.responder) {
                *a += b;
            }
            order.push((s.bytes, crate::model::flow_order(k), i as u32));
        }
        let by_bytes = |a: &Rank, b: &Rank| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1));
        let n = top.min(order.len());
        if n < order.len() && n > 0 {
            order.select_nth_unstable_by(n - 1, by_bytes);
        }
        let (head, rest) = order.split_at_mut(n);
        head.sort_unstable_by(by_bytes);
        let top_flows = head
            .iter()
            .map(|(_, _, i)| {
                let (k, s) = e.flows.at(*i as usize);
                TopFlow { flow: flow_ref(k), bytes: s.bytes, packets: s.packets }
            })
            .collect();
        let other_packets = rest.iter().map(|(_, _, i)| e.flows.at(*i as usize).1.packets).sum();
        // As the report has them (none without a messages section).
        let parts = assemble::messages::metrics_parts(run);
        let messages = message_inputs(parts.as_ref().map(|(c, t)| (&c[..], t)));
        Input {
            capture: assemble::capture(run),
            flows: e.flows.len() as u64,
            top: top_flows,
            other_bytes: rest.iter().map(|(b, _, _)| *b).sum(),
            other_packets,
            ce,
            psn: PsnJson::new(count),
            responder: Responder::new(resp),
            aeth: Naks::new(aeth),
            pfc: fabric::pfc(run),
            rtt: run.analyses.rtt.prom.clone(),
            rtt_timeouts: assemble::rtt_waiting(run).0,
            incast_episodes: run.analyses.incast.episode_count(),
            findings,
            vantage: assemble::vantage::section(run, &mut Vec::new()),
            dcqcn_hosts: assemble::dcqcn::hosts(&run.analyses.dcqcn.flows()),
            nic: e.nic.clone(),
            message_classes: messages.0,
            tail_causes: messages.1,
            version: env!("CARGO_PKG_VERSION").into(),
            export: None,
        }
    }
}

/// A latency histogram as Prometheus' classic histogram (bounds 1 µs doubling to about 1 s):
/// the RTT, a size class's completion times.
#[derive(Debug, Clone)]
struct RttHistogram(PromBuckets);

impl prometheus_client::encoding::EncodeMetric for RttHistogram {
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        let h = &self.0;
        let buckets: Vec<(f64, u64)> = prometheus_client::metrics::histogram::exponential_buckets(1e-6, 2.0, 21)
            .chain([f64::INFINITY])
            .zip(h.counts)
            .collect();
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            h.sum_ns as f64 / 1e9,
            h.count,
            &buckets,
            None,
        )
    }
    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

/// The report's totals as Prometheus text; `top` flows get their own series. `rtt_ns` are the
/// RTT samples behind the report's percentiles (for the histogram).
pub fn render(r: &Report, top: usize, rtt_ns: &[u64]) -> String {
    encode(&Input::of_report(r, top, rtt_ns))
}

/// A live run's metrics each interval, without assembling a report (`findings` as last
/// evaluated with [`finding_counts`]).
pub fn render_run(run: &Pipeline, top: usize, findings: FindingCounts) -> String {
    encode(&Input::of_run(run, top, findings))
}

/// The text of an [`Input`] in the Prometheus text format ([`CONTENT_TYPE`]).
pub fn encode(m: &Input) -> String {
    classic(&open_metrics(m))
}

/// The text of an [`Input`] in OpenMetrics ([`OPENMETRICS_CONTENT_TYPE`]), which Prometheus
/// asks for first.
pub fn open_metrics(m: &Input) -> String {
    let mut reg = Registry::with_prefix("roce_analyzer");
    totals(&mut reg, m);
    flows(&mut reg, m);
    pfc(&mut reg, &m.pfc);
    transport(&mut reg, m);
    if let Some(v) = &m.vantage {
        vantage(&mut reg, v);
    }
    if !m.dcqcn_hosts.is_empty() {
        dcqcn(&mut reg, &m.dcqcn_hosts);
    }
    if let Some(n) = &m.nic {
        nic(&mut reg, n);
    }
    if !m.message_classes.is_empty() {
        messages(&mut reg, m);
    }
    let info = Family::<VersionLabel, Gauge>::default();
    reg.register("build_info", "The agent's version (always 1)", info.clone());
    info.get_or_create(&VersionLabel { version: m.version.clone() }).set(1);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of [`open_metrics`]' text.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// OpenMetrics text as the Prometheus text format every scraper and `promtool check metrics`
/// read: a counter family's HELP and TYPE name its `_total` samples, no `# EOF`.
pub fn classic(open_metrics: &str) -> String {
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
fn vantage(reg: &mut Registry, v: &Vantage) {
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
fn totals(reg: &mut Registry, m: &Input) {
    let c = &m.capture;
    let frames = counter_family::<ClassLabel>(
        reg,
        "frames",
        "Frames by class (roce, cnp, pfc, pause, non_roce, malformed kinds)",
    );
    for (class, n) in &c.classes {
        frames.get_or_create(&ClassLabel { class: class.clone() }).inc_by(*n);
    }
    let dropped = counter_family::<ReasonLabel>(reg, "dropped", "Frames or events lost before analysis, by reason");
    for (reason, n) in &c.dropped {
        dropped.get_or_create(&ReasonLabel { reason: reason.clone() }).inc_by(*n);
    }
    if let Some(f) = &c.flows_folded {
        counter(reg, "flows_folded", "Idle flows folded into one aggregate to bound memory", f.flows);
    }
    if let Some(f) = &c.filter {
        counter(reg, "filtered_frames", "Frames --filter left out (counted, not analysed)", f.frames_out);
    }
    if let Some(x) = &m.export {
        export(reg, x);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabel {
    sink: String,
}

/// What the export's sinks wrote and gave up: a line given up is counted, never silent.
fn export(reg: &mut Registry, x: &crate::model::ExportStats) {
    let lines =
        counter_family::<SinkLabel>(reg, "export_lines", "Export lines written (file) or inserted (clickhouse)");
    let dropped = counter_family::<SinkLabel>(
        reg,
        "export_dropped_lines",
        "Export lines given up: a full disk or removed directory (file), a full --export-buffer or a server away at \
         the end (clickhouse)",
    );
    let file_dropped = x.dropped - x.clickhouse.as_ref().map_or(0, |c| c.dropped);
    lines.get_or_create(&SinkLabel { sink: "file".into() }).inc_by(x.lines);
    dropped.get_or_create(&SinkLabel { sink: "file".into() }).inc_by(file_dropped);
    if let Some(c) = &x.clickhouse {
        lines.get_or_create(&SinkLabel { sink: "clickhouse".into() }).inc_by(c.inserted);
        dropped.get_or_create(&SinkLabel { sink: "clickhouse".into() }).inc_by(c.dropped);
    }
}

/// The top flows by bytes with their own series, the rest in one bucket, CE and CNPs.
fn flows(reg: &mut Registry, m: &Input) {
    let bytes = counter_family::<FlowLabels>(reg, "flow_bytes", "RoCE bytes of the top flows by bytes");
    let packets = counter_family::<FlowLabels>(reg, "flow_packets", "RoCE packets of the top flows by bytes");
    for f in &m.top {
        let r = &f.flow;
        let l = FlowLabels { src: r.src.clone(), dst: r.dst.clone(), udp_sport: r.udp_sport, dst_qp: r.dst_qp };
        bytes.get_or_create(&l).inc_by(f.bytes);
        packets.get_or_create(&l).inc_by(f.packets);
    }
    gauge(reg, "other_flows_bytes", "RoCE bytes of the flows beyond the top ones (their set changes)", m.other_bytes);
    gauge(reg, "other_flows_packets", "RoCE packets of the flows beyond the top ones", m.other_packets);
    gauge(reg, "flows", "Flows seen", m.flows);
    counter(reg, "ce_packets", "RoCE packets marked CE", m.ce);
    counter(reg, "cnp", "CNPs", m.capture.classes.get("cnp").copied().unwrap_or(0));
}

/// PFC/PAUSE frames, quanta and pause time per sender and priority; storms.
fn pfc(reg: &mut Registry, p: &Pfc) {
    let pfc = counter_family::<SenderLabels>(reg, "pfc_frames", "PFC/PAUSE frames per sender and priority");
    let quanta =
        counter_family::<SenderLabels>(reg, "pfc_quanta", "Pause quanta (512 bit times) per sender and priority");
    for s in &p.senders {
        let l = SenderLabels { mac: s.mac.clone(), priority: s.priority.to_string() };
        pfc.get_or_create(&l).inc_by(s.counts.frames);
        quanta.get_or_create(&l).inc_by(s.counts.quanta);
    }
    for s in &p.pause_senders {
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
    for s in &p.senders {
        paused
            .get_or_create(&SenderLabels { mac: s.mac.clone(), priority: s.priority.to_string() })
            .inc_by(secs(s.pause.paused_ns));
    }
    for s in &p.pause_senders {
        paused
            .get_or_create(&SenderLabels { mac: s.mac.clone(), priority: "all".into() })
            .inc_by(secs(s.pause.paused_ns));
    }
    counter(reg, "pfc_storms", "Continuous pauses of at least --pfc-storm", p.storms.len() as u64);
}

/// PSN anomalies, AETHs, RTT, incast episodes and audit findings.
fn transport(reg: &mut Registry, m: &Input) {
    let psn = counter_family::<KindLabel>(reg, "psn_anomalies", "PSN anomalies over all flows, by kind");
    let responder = counter_family::<KindLabel>(
        reg,
        "responder_anomalies",
        "Requests the responder's NIC would count as out of sequence (once per NAK episode) or duplicate, by kind",
    );
    for (kind, n) in m.responder.iter() {
        responder.get_or_create(&KindLabel { kind: kind.into() }).inc_by(n);
    }
    // Every sequence counter but the request count itself is an anomaly.
    for (kind, n) in m.psn.iter().filter(|(k, _)| *k != count::NAMES[count::REQUESTS]) {
        psn.get_or_create(&KindLabel { kind: kind.into() }).inc_by(n);
    }
    let aeth = counter_family::<KindLabel>(reg, "aeth", "ACKs and NAKs (AETH syndromes) over all flows, by kind");
    for (kind, n) in m.aeth.iter() {
        aeth.get_or_create(&KindLabel { kind: kind.into() }).inc_by(n);
    }
    reg.register(
        "rtt_seconds",
        "Round-trip time, request with AckReq to the ACK covering it",
        RttHistogram(m.rtt.clone()),
    );
    counter(reg, "rtt_timeouts", "Requests with AckReq not acknowledged within --rtt-timeout", m.rtt_timeouts);
    counter(reg, "incast_episodes", "Incast episodes", m.incast_episodes);
    let audit = counter_family::<SeverityLabel>(reg, "audit_findings", "Audit findings by severity");
    for (i, sev) in Severity::ALL.iter().enumerate() {
        audit.get_or_create(&SeverityLabel { severity: sev.name().into() }).inc_by(m.findings[i]);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SizeClassLabel {
    size_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: String,
}

/// One latency histogram per size class.
#[derive(Debug)]
struct ClassHistograms(Vec<(String, PromBuckets)>);

impl prometheus_client::encoding::EncodeMetric for ClassHistograms {
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        for (class, h) in &self.0 {
            let label = SizeClassLabel { size_class: class.clone() };
            let buckets: Vec<(f64, u64)> = prometheus_client::metrics::histogram::exponential_buckets(1e-6, 2.0, 21)
                .chain([f64::INFINITY])
                .zip(h.counts)
                .collect();
            encoder.encode_family(&label)?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                h.sum_ns as f64 / 1e9,
                h.count,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

/// Message completion times per size class, and the tail's messages per cause.
fn messages(reg: &mut Registry, m: &Input) {
    reg.register(
        "message_completion_seconds",
        "Message completion time (first packet to the response covering its last PSN), by size class",
        ClassHistograms(m.message_classes.clone()),
    );
    let tail = counter_family::<CauseLabel>(
        reg,
        "tail_messages",
        "Tail messages (slower than their class's threshold) by cause they overlapped",
    );
    for (cause, n) in &m.tail_causes {
        tail.get_or_create(&CauseLabel { cause: cause.clone() }).inc_by(*n);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SrcLabel {
    src: String,
}

/// Per sender host: CNPs received, those without a rate cut, the median cut and recovery.
fn dcqcn(reg: &mut Registry, hosts: &[crate::model::DcqcnHost]) {
    let cnps = counter_family::<SrcLabel>(reg, "dcqcn_cnps", "CNPs sent to the flows of a sender host");
    let unreacted = counter_family::<SrcLabel>(
        reg,
        "dcqcn_unreacted_cnps",
        "CNPs after which the flow's rate did not fall below 90 % of the rate before",
    );
    let cut = Family::<SrcLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register("dcqcn_cut_ratio", "Median of lowest rate after a CNP / rate before (0.5 is a halving)", cut.clone());
    let recovery = Family::<SrcLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register("dcqcn_recovery_seconds", "Median time from a CNP back to 90 % of the rate before", recovery.clone());
    for h in hosts {
        let l = SrcLabel { src: h.src.clone() };
        cnps.get_or_create(&l).inc_by(h.stats.cnps);
        unreacted.get_or_create(&l).inc_by(h.stats.unreacted_cnps);
        if let Some(c) = h.stats.cut_ratio_p50 {
            cut.get_or_create(&l).set(c);
        }
        if let Some(t) = h.stats.recovery_ns_p50 {
            recovery.get_or_create(&l).set(t as f64 / 1e9);
        }
    }
}

/// The NIC's own counters.
fn nic(reg: &mut Registry, nic: &Nic) {
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
