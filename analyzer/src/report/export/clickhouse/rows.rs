//! Export lines as rows of the fleet's ClickHouse tables (`deploy/clickhouse/schema.sql`): one
//! table per kind of line, flat columns the fleet's queries group by, every row carrying the
//! agent (host, label, interface), its interval and the day it is partitioned by. The rows of
//! an interval are complete when its `interval` line comes (which names the capture's sources
//! and the interval's end), so [`Interval`] collects them until then.

use serde_json::{Map, Value, json};

use crate::model::FlowRef;
use crate::report::export::line::{Body, Line};

/// The tables, by the kind of line they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Flows,
    Pfc,
    Events,
    Findings,
    Hops,
    Messages,
    MessagePairs,
    Samples,
    Intervals,
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Flows,
        Table::Pfc,
        Table::Events,
        Table::Findings,
        Table::Hops,
        Table::Messages,
        Table::MessagePairs,
        Table::Samples,
        Table::Intervals,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Flows => "flows",
            Table::Pfc => "pfc",
            Table::Events => "events",
            Table::Findings => "findings",
            Table::Hops => "hops",
            Table::Messages => "messages",
            Table::MessagePairs => "message_pairs",
            Table::Samples => "samples",
            Table::Intervals => "intervals",
        }
    }
}

/// A flow as one string, the same in the flows and findings tables:
/// `src>dst:udp_sport/dst_qp`.
pub fn flow_id(src: &str, dst: &str, udp_sport: u16, dst_qp: u32) -> String {
    format!("{src}>{dst}:{udp_sport}/{dst_qp}")
}

fn flow_ref_id(f: &FlowRef) -> String {
    flow_id(&f.src, &f.dst, f.udp_sport, f.dst_qp)
}

/// The rows of one line, without the columns its interval gives them: one, or one per
/// trajectory sample.
fn rows(line: &Line) -> Vec<(Table, Value)> {
    match &line.body {
        Body::Samples(l) => {
            l.id.iter()
                .zip(&l.ts_ns)
                .zip(l.ecn.iter().zip(&l.dir))
                .map(|((id, ts), (ecn, dir))| {
                    (Table::Samples, json!({"id": id, "ts_ns": ts, "ecn": ecn, "dir": dir, "one_in": l.one_in}))
                })
                .collect()
        }
        _ => row(line).into_iter().collect(),
    }
}

/// The row of one line (not a samples line), without the columns its interval gives it.
fn row(line: &Line) -> Option<(Table, Value)> {
    Some(match &line.body {
        Body::Samples(_) => return None,
        Body::Flow(f) => {
            let t = &f.total;
            let d = &f.delta;
            let r = json!({
                "flow": flow_id(&t.src, &t.dst, t.udp_sport, t.dst_qp),
                "src": t.src, "dst": t.dst, "udp_sport": t.udp_sport, "dst_qp": t.dst_qp,
                "packets": d.packets, "bytes": d.bytes, "ce": d.ce, "ack_req": d.ack_req,
                "fecn": d.fecn, "becn": d.becn, "rtt_samples": d.rtt_samples,
                "total_packets": t.packets, "total_bytes": t.bytes,
                "first_ns": t.first_ns, "last_ns": t.last_ns,
                "labels": t.labels,
                "total": serde_json::to_string(t).unwrap_or_default(),
            });
            (Table::Flows, r)
        }
        Body::Pfc(p) => (
            Table::Pfc,
            json!({
                "mac": p.mac, "device": p.device.clone().unwrap_or_default(),
                "port": p.port.clone().unwrap_or_default(), "priority": p.priority,
                "frames": p.delta.frames, "paused_ns": p.delta.paused_ns,
                "total_frames": p.counts.frames, "total_paused_ns": p.paused_ns,
            }),
        ),
        Body::Storm { storm } => (
            Table::Events,
            event("storm", storm.start_ns, storm.start_ns + storm.duration_ns, serde_json::to_value(storm).ok()?)
                .with("mac", &storm.mac)
                .with("device", storm.device.as_deref().unwrap_or_default())
                .with("priority", storm.priority),
        ),
        Body::IncastEpisode { episode: e } => (
            Table::Events,
            event("incast_episode", e.start_ns, e.end_ns, serde_json::to_value(e).ok()?)
                .with("dst", &e.dst)
                .with("senders", &e.senders)
                .with("peak_senders", e.peak_senders)
                .with("bytes", e.bytes),
        ),
        Body::Deadlock { deadlock: d } => (
            Table::Events,
            event("deadlock", d.start_ns, d.start_ns + d.duration_ns, serde_json::to_value(d).ok()?)
                .with("priority", d.priority)
                .with("senders", &d.cycle),
        ),
        Body::LossBetween(l) => (
            Table::Hops,
            json!({
                "from_label": l.from, "to_label": l.to, "frames_missing": l.frames_missing,
                "frames_missing_total": l.frames_missing_total, "frames_matched_total": l.frames_matched_total,
            }),
        ),
        Body::Finding { id, state, finding: f } => (
            Table::Findings,
            json!({
                "id": id, "state": state, "severity": f.severity, "code": f.code, "message": f.message,
                "flows": f.flows.iter().map(flow_ref_id).collect::<Vec<_>>(),
                "flows_omitted": f.flows_omitted,
            }),
        ),
        Body::Messages { messages: m } => (
            Table::Messages,
            json!({
                "completed": m.completed, "mct_p50_ns": m.mct_ns.p50, "mct_p99_ns": m.mct_ns.p99,
                "mct_p999_ns": m.mct_ns.p999, "mct_max_ns": m.mct_ns.max,
                "body": serde_json::to_string(m).unwrap_or_default(),
            }),
        ),
        Body::MessagePair { pair } => (Table::MessagePairs, message_pair_row(pair)),
        Body::Interval(i) => (Table::Intervals, interval_row(i)),
    })
}

/// A host pair's completion times (0 for a goodput or an RTT not measured).
fn message_pair_row(p: &crate::model::MessagePair) -> Value {
    json!({
        "src": p.src, "dst": p.dst, "completed": p.stats.messages, "bytes": p.stats.bytes,
        "mct_p50_ns": p.stats.mct_ns.p50, "mct_p99_ns": p.stats.mct_ns.p99,
        "mct_p999_ns": p.stats.mct_ns.p999, "mct_max_ns": p.stats.mct_ns.max,
        "goodput_bps_p50": p.stats.goodput_bps_p50.unwrap_or(0),
        "min_rtt_ns": p.min_rtt_ns.unwrap_or(0),
    })
}

fn interval_row(i: &crate::report::export::line::IntervalLine) -> Value {
    json!({
        "kind": i.kind, "start_ns": i.start_ns, "end_ns": i.end_ns, "is_final": u8::from(i.last),
        "frames": i.delta.frames, "dropped": i.delta.dropped.values().sum::<u64>(),
        "total_frames": i.capture.frames, "lines": i.lines,
    })
}

/// An event row: its kind, span and the event whole (`body`), the other columns at their
/// defaults until [`With::with`] sets them.
fn event(kind: &str, start_ns: u64, end_ns: u64, body: Value) -> Value {
    json!({
        "kind": kind, "start_ns": start_ns, "end_ns": end_ns, "duration_ns": end_ns.saturating_sub(start_ns),
        "dst": "", "mac": "", "device": "", "priority": -1, "senders": Vec::<String>::new(), "peak_senders": 0,
        "bytes": 0, "body": body.to_string(),
    })
}

trait With {
    fn with(self, key: &str, v: impl serde::Serialize) -> Self;
}

impl With for Value {
    fn with(mut self, key: &str, v: impl serde::Serialize) -> Value {
        if let Some(m) = self.as_object_mut() {
            m.insert(key.into(), serde_json::to_value(v).unwrap_or(Value::Null));
        }
        self
    }
}

/// The civil date (`YYYY-MM-DD`, UTC) of a Unix time in ns: the tables' partition.
pub fn date_of(ns: u64) -> String {
    let days = (ns / 86_400_000_000_000) as i64;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The rows of an interval being collected.
#[derive(Debug, Default)]
pub struct Interval {
    rows: Vec<(Table, Value)>,
}

/// An interval's rows, ready: newline-separated JSON objects per table (JSONEachRow), with
/// their line counts.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    pub tables: Vec<(Table, Vec<u8>, u64)>,
}

impl Batch {
    pub fn bytes(&self) -> usize {
        self.tables.iter().map(|t| t.1.len()).sum()
    }

    pub fn lines(&self) -> u64 {
        self.tables.iter().map(|t| t.2).sum()
    }
}

impl Interval {
    /// One export line; returns the interval's batch when `line` closes it.
    pub fn line(&mut self, line: &Line) -> Option<Batch> {
        self.rows.extend(rows(line));
        let Body::Interval(i) = &line.body else { return None };
        let sources = &i.capture.sources;
        let label = sources.iter().map(|s| s.label.as_str()).collect::<Vec<_>>().join(",");
        let interface =
            sources.iter().filter(|s| s.kind == "live").map(|s| s.name.as_str()).collect::<Vec<_>>().join(",");
        // An interval with no time (a capture without frames: an idle uplink's mirror) goes in
        // today's partition: the epoch's would fall to the TTL at once, and the collector with
        // it (the fleet's queries count a collector by its interval rows).
        let day_ns = match i.end_ns {
            0 => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
            t => t,
        };
        let common = json!({
            "date": date_of(day_ns), "host": line.host, "label": label, "interface": interface,
            "seq": line.seq, "interval_end_ns": i.end_ns,
        });
        let Value::Object(common) = common else { return None };
        let mut tables: Vec<(Table, Vec<u8>, u64)> = Vec::new();
        for (table, row) in self.rows.drain(..) {
            let mut m: Map<String, Value> = common.clone();
            if let Value::Object(r) = row {
                m.extend(r);
            }
            let at = match tables.iter().position(|t| t.0 == table) {
                Some(at) => at,
                None => {
                    tables.push((table, Vec::new(), 0));
                    tables.len() - 1
                }
            };
            let t = &mut tables[at];
            // Serialising a map of JSON values cannot fail.
            let _ = serde_json::to_writer(&mut t.1, &m);
            t.1.push(b'\n');
            t.2 += 1;
        }
        Some(Batch { tables })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(1_795_910_400_000_000_000), "2026-11-29");
        assert_eq!(date_of(951_782_400_000_000_000), "2000-02-29");
        assert_eq!(date_of(951_868_799_999_999_999), "2000-02-29");
        assert_eq!(date_of(951_868_800_000_000_000), "2000-03-01");
    }
}
