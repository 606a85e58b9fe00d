//! Export files back into reports, for `merge`: one report per host found in the files, from
//! its latest totals (the last `interval` line's capture, each flow's and PFC sender's last
//! line, the paused intervals joined), its closed events and its findings. What exports do not
//! carry (the RTT distribution, CE/CNP pairs, CNP pacing, the ECMP prediction) the rebuilt
//! report leaves empty, and its `from_export` note says so.
//!
//! Every line is checked against the export schema before it is used; a damaged line is an
//! error naming the file and line, except an unterminated last line of a file (the agent was
//! killed while writing it), which is left out and counted in the note.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::line::{Body, EXPORT_SCHEMA, EXPORT_SCHEMA_JSON, IntervalLine, Line};
use super::sink;
use crate::model::*;

#[derive(Debug, thiserror::Error)]
pub enum ExportReadError {
    #[error("{path}: cannot read")]
    Read { path: PathBuf, source: crate::capture::bounded::BoundedError },
    #[error("{path}: line {line}: {detail}")]
    Line { path: PathBuf, line: usize, detail: String },
    #[error("{path}: no export files (roce-analyzer-NNNNNN.ndjson) in the directory")]
    NoFiles { path: PathBuf },
    #[error("{path}: host {host:?} has no interval line (the agent never finished an interval): nothing to rebuild")]
    NoInterval { path: PathBuf, host: String },
}

/// Whether `path` holds export lines rather than a report: a directory, a `.ndjson` file, or
/// a file whose first line names the export schema.
pub fn is_export(path: &Path) -> bool {
    if path.is_dir() || path.extension().is_some_and(|e| e == "ndjson") {
        return true;
    }
    // Not a regular file (a FIFO: opening it would wait for a writer): the report reader
    // refuses it.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    use std::io::Read;
    let mut head = [0u8; 96];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    String::from_utf8_lossy(&head[..n]).contains(EXPORT_SCHEMA)
}

/// Hands the export schema the report's, which it refers to (`../report/v1#/…`); nothing
/// is fetched from elsewhere.
struct ReportSchema;

impl jsonschema::Retrieve for ReportSchema {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        if uri.as_str().trim_end_matches('#').ends_with("roce-analyzer/report/v1") {
            return Ok(serde_json::from_str(crate::report::validate::SCHEMA_JSON)?);
        }
        Err(format!("{uri}: not a roce-analyzer schema").into())
    }
}

fn validator() -> Result<&'static jsonschema::Validator, String> {
    static V: std::sync::OnceLock<Result<jsonschema::Validator, String>> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let schema: serde_json::Value = serde_json::from_str(EXPORT_SCHEMA_JSON).map_err(|e| e.to_string())?;
        jsonschema::options().with_retriever(ReportSchema).build(&schema).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| format!("the shipped export schema does not load: {e}"))
}

/// The schema's first complaint about one export line, if any.
pub fn line_violation(v: &serde_json::Value) -> Option<String> {
    match validator() {
        Ok(val) => val.iter_errors(v).next().map(|e| format!("{}: {e}", e.instance_path())),
        Err(e) => Some(e),
    }
}

/// The lines of one file, checked; the count of unterminated last lines left out.
/// Bytes of one export line, at most: the agent's longest lines are a few kilobytes, and a
/// line is parsed whole (a 100 MB line took 3.9 GB).
const LINE_MAX: usize = 64 << 20;
/// Characters of a bad line's explanation kept (it may quote the line).
const DETAIL_MAX: usize = 300;

fn lines_of(path: &Path, out: &mut Vec<Line>, max: u64) -> Result<u64, ExportReadError> {
    let text = crate::capture::bounded::read(path, max, "an export file")
        .map_err(|source| ExportReadError::Read { path: path.into(), source })?;
    let err = |line: usize, detail: String| ExportReadError::Line {
        path: path.into(),
        line,
        detail: crate::capture::bounded::excerpt(detail, DETAIL_MAX),
    };
    let mut cut = 0;
    let pieces: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        if piece.is_empty() {
            continue;
        }
        if piece.len() > LINE_MAX {
            return Err(err(i + 1, format!("{} bytes, longer than any line the agent writes (64 MiB)", piece.len())));
        }
        let v: serde_json::Value = match serde_json::from_slice(piece) {
            Ok(v) => v,
            // The agent was killed while writing its last line.
            Err(_) if last => {
                cut += 1;
                continue;
            }
            Err(e) => return Err(err(i + 1, format!("not JSON: {e}"))),
        };
        if let Some(why) = line_violation(&v) {
            return Err(err(i + 1, why));
        }
        out.push(serde_json::from_value(v).map_err(|e| err(i + 1, e.to_string()))?);
    }
    Ok(cut)
}

/// The lines of `path` (a directory of export files, read in their order, or one file), each
/// checked, and how many unterminated last lines were left out.
pub fn lines(path: &Path, max: u64) -> Result<(Vec<Line>, u64), ExportReadError> {
    let files = if path.is_dir() {
        let f = sink::files(path).map_err(|e| ExportReadError::Read { path: path.into(), source: e.into() })?;
        if f.is_empty() {
            return Err(ExportReadError::NoFiles { path: path.into() });
        }
        f.into_iter().map(|(_, p)| p).collect()
    } else {
        vec![path.to_path_buf()]
    };
    let (mut lines, mut cut) = (Vec::new(), 0);
    for f in &files {
        cut += lines_of(f, &mut lines, max)?;
    }
    Ok((lines, cut))
}

/// Reads `path` (a directory of export files, read in their order, or one file) as one
/// report per host.
pub fn read(path: &Path, max: u64) -> Result<Vec<(PathBuf, Report)>, ExportReadError> {
    let (lines, cut) = lines(path, max)?;
    let mut hosts: BTreeMap<String, Vec<Line>> = BTreeMap::new();
    for l in lines {
        hosts.entry(l.host.clone()).or_default().push(l);
    }
    hosts
        .into_iter()
        .map(|(host, lines)| {
            let shown = if host.is_empty() { path.to_path_buf() } else { path.join(&host) };
            rebuild(&host, lines, cut)
                .map(|r| (shown, r))
                .ok_or(ExportReadError::NoInterval { path: path.into(), host })
        })
        .collect()
}

/// One host's report from its lines (in the order written), or none without an interval line.
fn rebuild(host: &str, mut lines: Vec<Line>, cut: u64) -> Option<Report> {
    // Stable: lines of one interval keep their order; a restarted agent's intervals come after.
    lines.sort_by_key(|l| l.seq);
    let interval: IntervalLine = lines.iter().rev().find_map(|l| match &l.body {
        Body::Interval(i) => Some(i.clone()),
        _ => None,
    })?;
    let intervals = lines.iter().filter(|l| matches!(l.body, Body::Interval(_))).count();
    let first = lines.first().map_or(0, |l| l.seq);
    let identity =
        format!("host {host:?}, intervals {first} to {} ending at {} ns", interval_seq(&lines), interval.end_ns);
    let total = lines.len();
    let mut parts = Parts::default();
    for l in lines {
        parts.absorb(l.body);
    }
    let Parts { flows, senders, storms, episodes, deadlocks, findings, messages, samples } = parts;
    let samples = samples.map(|s| trajectory_samples(host, &interval.capture, s));
    let note = rebuilt_note(host, total, intervals, &interval, cut);
    let (pfc_senders, pause_senders) = split_senders(senders);
    let capture = interval.capture;
    let class = |name: &str| capture.classes.get(name).copied().unwrap_or(0);
    let mut report = Report {
        schema: SCHEMA.into(),
        tool: interval.tool,
        kind: interval.kind,
        diagnosis: Vec::new(),
        pfc: Pfc {
            frames: class("pfc"),
            pause_8023x_frames: class("pause"),
            senders: pfc_senders,
            pause_senders,
            storms,
            link_speed_bps: interval.link_speed_bps,
            rates: Vec::new(),
            edge: None,
        },
        capture,
        flows: flows.into_values().collect(),
        visibility: vec![Note::new(NoteCode::FromExport, note)],
        nic: None,
        rtt_ns: RttSummary::default(),
        pairs: Vec::new(),
        cnp_pacing: Vec::new(),
        cnp_interval: CnpInterval::default(),
        audit: {
            let mut a: Vec<Finding> = findings.into_values().collect();
            a.sort_by(|a, b| {
                (a.severity, a.code.name(), &a.flows, &a.message).cmp(&(
                    b.severity,
                    b.code.name(),
                    &b.flows,
                    &b.message,
                ))
            });
            a
        },
        congestion_tree: CongestionTrees { deadlocks, ..Default::default() },
        incast: Incast::new(interval.incast_window_ns, interval.incast_min_senders, episodes),
        ecmp: Ecmp::default(),
        vantage: None,
        dcqcn: None,
        marking: None,
        messages: messages.map(|m| *m),
        load_balancing: None,
        evidence: None,
        export: None,
        output_failures: Vec::new(),
        trajectory: None,
        samples,
        export_identity: None,
    };
    report.export_identity = Some(identity);
    report.diagnosis = crate::report::diagnose::diagnose(&report);
    Some(report)
}

/// The `from_export` note of a report rebuilt from `total` lines in `intervals` intervals.
fn rebuilt_note(host: &str, total: usize, intervals: usize, interval: &IntervalLine, cut: u64) -> String {
    let mut note = format!(
        "rebuilt from the export of host {host:?}: {total} lines in {intervals} intervals up to {} ns; flows, PFC senders, \
         storms, incast episodes, deadlocks, findings and the messages' distributions and tail as exported \
         (not their per-flow lists); the RTT distribution, CE/CNP pairs, CNP pacing \
         and the ECMP prediction are not in exports",
        interval.end_ns
    );
    if !interval.last {
        note.push_str("; the agent did not write its final interval (it was stopped without one, or is running)");
    }
    if cut > 0 {
        note.push_str(&format!("; {cut} unterminated last line(s) left out"));
    }
    note
}

/// The last interval line's sequence number.
fn interval_seq(lines: &[Line]) -> u64 {
    lines.iter().rev().find(|l| matches!(l.body, Body::Interval(_))).map_or(0, |l| l.seq)
}

/// A collector's trajectory samples, named `host/label` (its inputs' labels).
fn trajectory_samples(
    host: &str,
    capture: &Capture,
    (one_in, samples): (u64, Vec<TrajectorySample>),
) -> TrajectorySamples {
    let labels: Vec<&str> = capture.sources.iter().map(|s| s.label.as_str()).collect();
    TrajectorySamples { name: format!("{host}/{}", labels.join(",")), one_in, samples }
}

/// What one host's lines hold, as they come: each flow's and PFC sender's latest totals, the
/// events (storms, incast episodes, deadlocks), the findings not cleared.
#[derive(Default)]
struct Parts {
    flows: BTreeMap<(u8, String, String, u16, u32), Flow>,
    senders: BTreeMap<(String, u8), PfcSender>,
    storms: Vec<StormJson>,
    episodes: Vec<Episode>,
    deadlocks: Vec<Deadlock>,
    findings: BTreeMap<String, Finding>,
    /// The latest messages line (cumulative).
    messages: Option<Box<Messages>>,
    /// Trajectory samples, in the order taken.
    samples: Option<(u64, Vec<TrajectorySample>)>,
}

impl Parts {
    fn absorb(&mut self, body: Body) {
        match body {
            Body::Interval(_) | Body::LossBetween(_) => {}
            Body::Flow(f) => {
                let t = f.total;
                self.flows.insert((t.ip_version, t.src.clone(), t.dst.clone(), t.udp_sport, t.dst_qp), t);
            }
            Body::Pfc(p) => {
                let s = self.senders.entry((p.mac.clone(), p.priority)).or_insert_with(|| PfcSender {
                    mac: p.mac.clone(),
                    device: None,
                    port: None,
                    priority: p.priority,
                    counts: PauseCounts::ZERO,
                    pause: PauseTime::default(),
                    ecn_lead: None,
                });
                (s.device, s.port, s.counts, s.ecn_lead) = (p.device, p.port, p.counts, p.ecn_lead);
                s.pause.paused_ns = p.paused_ns;
                s.pause.intervals.extend(p.intervals);
            }
            Body::Storm { storm } => self.storms.push(storm),
            Body::IncastEpisode { episode } => self.episodes.push(episode),
            Body::Deadlock { deadlock } => self.deadlocks.push(deadlock),
            Body::Messages { messages } => self.messages = Some(messages),
            // The rebuilt report's messages list no pairs, as the messages line carries none
            // (a merge of reports does not combine pairs' percentiles); the store has them.
            Body::MessagePair { .. } => {}
            Body::Samples(l) => {
                let (_, v) = self.samples.get_or_insert_with(|| (l.one_in, Vec::new()));
                let cols = l.id.iter().zip(&l.ts_ns).zip(l.ecn.iter().zip(&l.dir));
                v.extend(cols.map(|((id, ts_ns), (ecn, dir))| TrajectorySample {
                    id: *id,
                    ts_ns: *ts_ns,
                    ecn: *ecn,
                    dir: *dir,
                }));
            }
            Body::Finding { id, state, finding } => {
                match state.as_str() {
                    "cleared" => self.findings.remove(&id),
                    _ => self.findings.insert(id, finding),
                };
            }
        }
    }
}

/// PFC senders with their pause intervals joined, and the 802.3x PAUSE senders apart.
fn split_senders(senders: BTreeMap<(String, u8), PfcSender>) -> (Vec<PfcSender>, Vec<PauseSender>) {
    let (mut pfc_senders, mut pause_senders) = (Vec::new(), Vec::new());
    for (_, mut s) in senders {
        let all: Vec<(u64, u64)> =
            joined(std::mem::take(&mut s.pause.intervals)).iter().map(|[a, b]| (*a, *b)).collect();
        let paused_ns = s.pause.paused_ns;
        s.pause = PauseTime { paused_ns, ..PauseTime::of(&all) };
        if s.priority == crate::analyses::pause::ALL_PRIORITIES {
            pause_senders.push(PauseSender {
                mac: s.mac,
                device: s.device,
                port: s.port,
                counts: s.counts,
                pause: s.pause,
            });
        } else {
            pfc_senders.push(s);
        }
    }
    (pfc_senders, pause_senders)
}

/// Intervals in time order with overlapping and touching ones joined.
fn joined(mut v: Vec<[u64; 2]>) -> Vec<[u64; 2]> {
    v.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::with_capacity(v.len());
    for [s, e] in v {
        match out.last_mut() {
            Some(last) if s <= last[1] => last[1] = last[1].max(e),
            _ => out.push([s, e]),
        }
    }
    out
}
