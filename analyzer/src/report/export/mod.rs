//! Continuous export (`--export`): every interval, NDJSON lines (schema
//! `roce-analyzer/export/v1`, `schema/export-v1.schema.json`) for what changed: one per flow
//! whose counters moved (deltas and the flow's totals as the report shows it), one per PFC
//! sender and priority that paused (deltas, totals and the paused intervals that closed), one
//! per event that closed (a PFC storm, an incast episode, a deadlock, frames lost between two
//! vantage points) or finding that was raised (or cleared), the messages' distributions and tail
//! (`messages`, cumulative), and last an `interval` line with the capture's
//! totals that closes the interval. A line after the last `interval` line of a file belongs to
//! an interval the agent did not finish (it was killed).
//!
//! An event is closed when it stopped changing for one interval (a storm's pause ended, an
//! episode's senders went quiet), or when the run ends; a finding is exported when raised, and
//! again (`state: final`) at the end of the run if it changed since. [`read`] turns export
//! files back into a report for `merge`.

pub mod clickhouse;
pub mod line;
pub mod read;
pub mod sink;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use analyzer_common::flow::FlowKey;
use rustc_hash::{FxHashMap, FxHashSet};

use super::assemble::{self, RunKind, fabric};
use crate::model::*;
use crate::pipeline::Pipeline;
pub use line::*;
pub use sink::{Rotation, Sink, SinkError};

fn hash_of(v: &impl Hash) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    v.hash(&mut h);
    h.finish()
}

/// Events (storms, episodes, deadlocks) exported once each, when closed.
#[derive(Debug, Default)]
struct Events {
    /// Seen at the previous export, not yet closed: identity → content.
    open: FxHashMap<u64, u64>,
    /// Identities exported (8 bytes each).
    done: FxHashSet<u64>,
}

impl Events {
    /// Whether the event (`id`, `content`) is to be exported now; remembers it either way.
    fn closes(&mut self, open: &mut FxHashMap<u64, u64>, id: u64, content: u64, last: bool) -> bool {
        if self.done.contains(&id) {
            return false;
        }
        if last || self.open.get(&id) == Some(&content) {
            self.done.insert(id);
            return true;
        }
        open.insert(id, content);
        false
    }
}

/// What has been exported so far, to compute the next interval's lines.
pub struct Exporter {
    sink: Sink,
    host: String,
    kind: RunKind,
    seq: u64,
    /// Where the next interval starts (none yet offline: the capture's first frame).
    start_ns: Option<u64>,
    capture: CaptureDelta,
    flows: FxHashMap<FlowKey, FlowDelta>,
    /// Per sender and priority: frames and pause time exported, and the end of the last
    /// paused interval exported.
    pfc: FxHashMap<(String, u8), (u64, u64, u64)>,
    hops: FxHashMap<(String, String), u64>,
    /// Per host pair (source, destination): its completed messages when its line was last
    /// written.
    pair_messages: FxHashMap<(String, String), u64>,
    events: Events,
    /// Findings raised and not cleared: identity (code, flows) → the message exported, and
    /// the finding (for its `cleared` line).
    findings: FxHashMap<u64, (u64, Finding)>,
    /// Lines written, for the run's summary.
    pub lines: u64,
    /// `--export-clickhouse`: the interval's rows being collected, and the sender.
    clickhouse: Option<(clickhouse::rows::Interval, clickhouse::sender::Sender)>,
    /// What the sender did, once ended.
    clickhouse_done: Option<clickhouse::sender::SenderStats>,
    /// Trajectory samples exported so far (the index of the next).
    samples_from: u64,
}

/// Trajectory samples per export line, at most (about 40 bytes each).
pub const SAMPLES_PER_LINE: usize = 16_384;

/// The machine's host name (what export lines say they come from).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

impl Exporter {
    /// An exporter whose first interval starts at `start_ns` (live: when the agent started;
    /// offline none: at the capture's first frame).
    pub fn new(sink: Sink, host: String, kind: RunKind, start_ns: Option<u64>) -> Exporter {
        Exporter {
            sink,
            host,
            kind,
            seq: 0,
            start_ns,
            capture: CaptureDelta::default(),
            flows: FxHashMap::default(),
            pfc: FxHashMap::default(),
            hops: FxHashMap::default(),
            pair_messages: FxHashMap::default(),
            events: Events::default(),
            findings: FxHashMap::default(),
            lines: 0,
            clickhouse: None,
            clickhouse_done: None,
            samples_from: 0,
        }
    }

    /// Sends every interval's lines to ClickHouse too.
    pub fn with_clickhouse(mut self, sender: clickhouse::sender::Sender) -> Exporter {
        self.clickhouse = Some((clickhouse::rows::Interval::default(), sender));
        self
    }

    /// The trajectory samples taken since the last interval, in lines of at most
    /// [`SAMPLES_PER_LINE`].
    fn sample_lines(&mut self, run: &Pipeline) -> Result<(), SinkError> {
        let t = &run.analyses.trajectory;
        if t.one_in == 0 || t.taken == self.samples_from {
            return Ok(());
        }
        let fresh = || SamplesLine { one_in: t.one_in, dropped: t.dropped, ..Default::default() };
        let mut line = fresh();
        for s in t.since(self.samples_from) {
            line.id.push(s.id);
            line.ts_ns.push(s.ts_ns);
            line.ecn.push(s.ecn);
            line.dir.push(s.dir);
            if line.id.len() == SAMPLES_PER_LINE {
                self.write(Body::Samples(std::mem::replace(&mut line, fresh())))?;
            }
        }
        self.samples_from = t.taken;
        if !line.id.is_empty() {
            self.write(Body::Samples(line))?;
        }
        Ok(())
    }

    /// What the sinks wrote and gave up so far.
    pub fn stats(&self) -> ExportStats {
        let mut x = self.sink.stats();
        let c = self.clickhouse.as_ref().map(|(_, s)| s.stats()).or_else(|| self.clickhouse_done.clone());
        if let Some(c) = c {
            x.dropped += c.counts.dropped;
            x.clickhouse = Some(c.counts);
        }
        x
    }

    /// Ends the ClickHouse sender (waiting at most `wait` for its last inserts).
    pub fn finish_clickhouse(&mut self, wait: std::time::Duration) -> Option<clickhouse::sender::SenderStats> {
        let done = self.clickhouse.take().map(|(_, s)| s.finish(wait));
        self.clickhouse_done.clone_from(&done);
        done
    }

    /// Where the lines go (what it wrote and gave up).
    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    fn write(&mut self, body: Body) -> Result<(), SinkError> {
        let line = Line { schema: EXPORT_SCHEMA.into(), host: self.host.clone(), seq: self.seq, body };
        // Serialising our own types into memory cannot fail.
        let bytes = serde_json::to_vec(&line).unwrap_or_default();
        if let Some((interval, sender)) = &mut self.clickhouse
            && let Some(batch) = interval.line(&line)
        {
            sender.push(batch);
        }
        self.lines += 1;
        self.sink.line(&bytes)
    }

    /// Writes the lines of the interval that ends at `end_ns` (`last`: the run's end, when
    /// every open event is closed). Returns how many lines it wrote.
    pub fn export(&mut self, run: &Pipeline, end_ns: u64, last: bool) -> Result<u64, SinkError> {
        let before = self.lines;
        self.flow_lines(run)?;
        let ecmp = fabric::ecmp(run, false);
        let judged = assemble::judged::judge(run, &ecmp);
        self.pfc_lines(&judged.pfc, end_ns, last)?;
        self.loss_lines(judged.vantage.as_ref())?;
        self.sample_lines(run)?;
        self.event_lines(run, &judged.pfc, last)?;
        let mut findings = judged.audit;
        findings.extend(ecmp.findings);
        if let Some(mut m) = judged.messages {
            for pair in std::mem::take(&mut m.pairs) {
                let n = pair.stats.messages;
                if self.pair_messages.insert((pair.src.clone(), pair.dst.clone()), n) != Some(n) {
                    self.write(Body::MessagePair { pair })?;
                }
            }
            m.flows.clear();
            m.steadiness.flows.clear();
            m.steadiness.pairs.clear();
            m.edge = None;
            self.write(Body::Messages { messages: Box::new(m) })?;
        }
        self.finding_lines(findings, last)?;
        let capture = assemble::capture(run);
        let delta = CaptureDelta {
            frames: capture.frames.saturating_sub(self.capture.frames),
            classes: since(&capture.classes, &self.capture.classes),
            dropped: since(&capture.dropped, &self.capture.dropped),
        };
        self.capture =
            CaptureDelta { frames: capture.frames, classes: capture.classes.clone(), dropped: capture.dropped.clone() };
        let cfg = &run.analyses.config;
        let interval = IntervalLine {
            kind: self.kind.name().into(),
            tool: Tool { name: "roce-analyzer".into(), version: env!("CARGO_PKG_VERSION").into() },
            start_ns: self.start_ns.or(run.engine.first_ns).unwrap_or(end_ns).min(end_ns),
            end_ns,
            last,
            delta,
            capture,
            link_speed_bps: cfg.link_speed_bps,
            incast_window_ns: cfg.incast_window_ns,
            incast_min_senders: cfg.incast_min_senders,
            lines: self.lines - before,
        };
        self.write(Body::Interval(interval))?;
        self.sink.flush()?;
        self.seq += 1;
        self.start_ns = Some(end_ns);
        Ok(self.lines - before)
    }

    fn flow_lines(&mut self, run: &Pipeline) -> Result<(), SinkError> {
        let mut changed: Vec<(&FlowKey, &crate::engine::FlowStats)> = run
            .engine
            .flows
            .iter()
            .filter(|(k, s)| {
                let rtt = run.analyses.rtt.flows.get(*k).map_or(0, |r| r.samples.len());
                self.flows.get(*k).is_none_or(|p| p.packets != s.packets || p.rtt_samples != rtt)
            })
            .collect();
        changed.sort_unstable_by_key(|(k, _)| flow_order(k));
        let lines: Vec<(FlowKey, Flow)> =
            changed.into_iter().map(|(k, s)| (*k, assemble::flow_json(run, k, s))).collect();
        for (k, total) in lines {
            let now = FlowDelta::of(&total);
            let delta = now.since(self.flows.insert(k, now).unwrap_or_default());
            self.write(Body::Flow(Box::new(FlowLine { delta, total })))?;
        }
        // Flows the agent folded away (live, under churn) are forgotten here too.
        if self.flows.len() > run.engine.flows.len() {
            self.flows.retain(|k, _| run.engine.flows.get(k).is_some());
        }
        Ok(())
    }

    fn pfc_lines(&mut self, pfc: &Pfc, end_ns: u64, last: bool) -> Result<(), SinkError> {
        let senders = pfc
            .senders
            .iter()
            .map(|s| (&s.mac, &s.device, &s.port, s.priority, &s.counts, &s.pause, s.ecn_lead.clone()));
        let pause = pfc
            .pause_senders
            .iter()
            .map(|s| (&s.mac, &s.device, &s.port, crate::analyses::pause::ALL_PRIORITIES, &s.counts, &s.pause, None));
        for (mac, device, port, priority, counts, pause, ecn_lead) in senders.chain(pause) {
            let key = (mac.clone(), priority);
            let (frames, paused, sent_until) = self.pfc.get(&key).copied().unwrap_or_default();
            // Intervals (or their parts) after what was sent, that have ended (all at the end).
            let intervals: Vec<[u64; 2]> = pause
                .intervals
                .iter()
                .filter(|[_, e]| *e > sent_until && (last || *e <= end_ns))
                .map(|[s, e]| [(*s).max(sent_until), *e])
                .collect();
            if counts.frames == frames && intervals.is_empty() {
                continue;
            }
            let until = intervals.last().map_or(sent_until, |i| i[1]);
            self.pfc.insert(key, (counts.frames, pause.paused_ns, until));
            self.write(Body::Pfc(PfcLine {
                mac: mac.clone(),
                device: device.clone(),
                port: port.clone(),
                priority,
                delta: PfcDelta {
                    frames: counts.frames.saturating_sub(frames),
                    paused_ns: pause.paused_ns.saturating_sub(paused),
                },
                counts: *counts,
                paused_ns: pause.paused_ns,
                intervals,
                ecn_lead,
            }))?;
        }
        Ok(())
    }

    fn loss_lines(&mut self, vantage: Option<&Vantage>) -> Result<(), SinkError> {
        for hop in vantage.map(|v| v.hops.as_slice()).unwrap_or_default() {
            let before = self.hops.insert((hop.from.clone(), hop.to.clone()), hop.frames_missing).unwrap_or(0);
            if hop.frames_missing > before {
                self.write(Body::LossBetween(LossLine {
                    from: hop.from.clone(),
                    to: hop.to.clone(),
                    frames_missing: hop.frames_missing - before,
                    frames_missing_total: hop.frames_missing,
                    frames_matched_total: hop.frames_matched,
                }))?;
            }
        }
        Ok(())
    }

    fn event_lines(&mut self, run: &Pipeline, pfc: &Pfc, last: bool) -> Result<(), SinkError> {
        let mut open = FxHashMap::default();
        let mut out = Vec::new();
        for s in &pfc.storms {
            let id = hash_of(&("storm", &s.mac, s.priority, s.start_ns));
            if self.events.closes(&mut open, id, hash_of(s), last) {
                out.push(Body::Storm { storm: s.clone() });
            }
        }
        for e in assemble::incast::incast(run).episodes {
            let id = hash_of(&("incast", &e.dst, e.start_ns));
            let content = hash_of(&(e.end_ns, e.peak_senders, e.bytes, e.ce_packets, e.cnp_packets, e.pfc_frames));
            if self.events.closes(&mut open, id, content, last) {
                out.push(Body::IncastEpisode { episode: e });
            }
        }
        if !pfc.storms.is_empty() || !pfc.senders.is_empty() {
            for d in fabric::congestion_tree(run).deadlocks {
                let id = hash_of(&("deadlock", d.priority, &d.cycle, d.start_ns));
                if self.events.closes(&mut open, id, d.duration_ns, last) {
                    out.push(Body::Deadlock { deadlock: d });
                }
            }
        }
        self.events.open = open;
        for b in out {
            self.write(b)?;
        }
        Ok(())
    }

    fn finding_lines(&mut self, findings: Vec<Finding>, last: bool) -> Result<(), SinkError> {
        let mut now = FxHashMap::default();
        let mut rank: FxHashMap<u64, u32> = FxHashMap::default();
        for f in findings {
            let same = hash_of(&(f.code.name(), &f.flows));
            let r = rank.entry(same).or_default();
            let id = hash_of(&(same, *r));
            *r += 1;
            let content = hash_of(&f.message);
            // What the export said of it so far stays until another line says otherwise.
            let (state, said) = match self.findings.remove(&id) {
                None => (Some("raised"), content),
                Some((c, _)) if last && c != content => (Some("final"), content),
                Some((c, _)) => (None, c),
            };
            if let Some(state) = state {
                self.write(Body::Finding { id: finding_id(&f, id), state: state.into(), finding: f.clone() })?;
            }
            now.insert(id, (said, f));
        }
        // What was raised and is gone (a gap that turned out to be go-back-N): cleared.
        let gone = std::mem::replace(&mut self.findings, now);
        let mut gone: Vec<(u64, Finding)> = gone.into_iter().map(|(id, (_, f))| (id, f)).collect();
        gone.sort_by(|(_, a), (_, b)| (a.code.name(), &a.flows).cmp(&(b.code.name(), &b.flows)));
        for (id, f) in gone {
            self.write(Body::Finding { id: finding_id(&f, id), state: "cleared".into(), finding: f })?;
        }
        Ok(())
    }
}

fn finding_id(f: &Finding, id: u64) -> String {
    format!("{}:{id:016x}", f.code.name())
}

/// `now - before` per key (keys new in `now` count whole).
fn since(now: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    now.iter().map(|(k, v)| (k.clone(), v.saturating_sub(before.get(k).copied().unwrap_or(0)))).collect()
}
