//! `--evidence DIR`: the frames behind each finding, incast episode, PFC storm and deadlock,
//! as a pcapng file an engineer opens in Wireshark. A request names the frames ([`Select`])
//! and the span; the report links each item to its file and lists the files with what they
//! could not keep. Offline the frames come from a [`spool::Spool`] written during the one
//! pass over the inputs; live, from the XDP program's evidence ring (`crate::live`).

pub mod file;
pub mod live;
pub mod seen;
pub mod select;
pub mod spool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use analyzer_common::flow::FlowKey;
use rustc_hash::FxHashMap;

use self::file::{EvidenceError, Vantage};
use self::select::{PAUSE_BIT, Router, Select};
use crate::analyses::tree;
use crate::model::{
    Deadlock, Episode, Evidence, EvidenceFile, Finding, FlowRef, Report, StormJson, TailMessage, addr_bytes,
    flow_ref_key,
};
use crate::pipeline::Pipeline;
use crate::report::out_dir::OutDir;
pub use seen::Seen;

/// `--evidence` and its bounds.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub snaplen: u32,
    pub max_frames: u64,
    pub margin_ns: u64,
    /// The directory opened at start ([`prepare`]); the files are created under it.
    pub handle: Option<Arc<OutDir>>,
}

/// Which item of the report a file is the evidence of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    Finding(usize),
    /// A finding of the ECMP section (`ecmp.findings`).
    EcmpFinding(usize),
    Episode(usize),
    Storm(usize),
    Deadlock(usize),
    /// One of the tail's slowest messages (`messages.tail.worst`).
    TailMessage(usize),
}

/// One evidence file to cut: its frames, its span, and what it is about.
#[derive(Debug, Clone)]
pub struct Request {
    /// Which item of the report it shows, the same in every report of a run ([`items`]).
    pub id: String,
    /// What it is, for the file name (`go_back_n`, `incast`).
    pub what: String,
    /// The file name, relative to the directory (given by the [`Cutter`]).
    pub file: String,
    pub about: String,
    /// The section comment: what the item says.
    pub comment: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub select: Select,
}

/// A request's file.
#[derive(Debug)]
enum Slot {
    /// No frame of its yet.
    Empty,
    Open(Box<file::File>),
    /// Writing it failed (said in `errors`): its frames are not written again elsewhere.
    Failed,
}

/// The files being cut, with their requests and counts.
#[derive(Debug)]
pub struct Cutter {
    pub opts: Options,
    pub requests: Vec<Request>,
    files: Vec<Slot>,
    left_out: Vec<u64>,
    router: Router,
    pub errors: Vec<String>,
    hits: Vec<usize>,
}

impl Cutter {
    pub fn new(opts: Options, requests: Vec<Request>) -> Cutter {
        let mut c = Cutter {
            opts,
            requests: Vec::new(),
            files: Vec::new(),
            left_out: Vec::new(),
            router: Router::default(),
            errors: Vec::new(),
            hits: Vec::new(),
        };
        for r in requests {
            c.add(r);
        }
        c
    }

    /// One more request (live: as findings open), routed from now on; its file is numbered in
    /// the order requests came.
    pub fn add(&mut self, mut r: Request) {
        r.file = format!("{:03}-{}.pcapng", self.requests.len() + 1, r.what);
        self.router.add(self.requests.len(), &r.select);
        self.requests.push(r);
        self.files.push(Slot::Empty);
        self.left_out.push(0);
    }

    /// One frame seen at `source`: into every file whose selection and span take it, up to
    /// `max_frames` each (the rest counted).
    pub fn frame(&mut self, seen: &Seen<'_>, vantage: &dyn Fn(u16) -> Vantage) {
        let Seen { ts_ns, orig_len, source, link, ref tag, data } = *seen;
        let mut hits = std::mem::take(&mut self.hits);
        self.router.route(tag, &mut hits);
        for &i in &hits {
            let r = &self.requests[i];
            if ts_ns < r.start_ns || ts_ns > r.end_ns {
                continue;
            }
            let slot = &mut self.files[i];
            if let Slot::Empty = slot {
                let dir = match &self.opts.handle {
                    Some(d) => Ok(d.clone()),
                    None => OutDir::open(&self.opts.dir)
                        .map(Arc::new)
                        .map_err(|cause| EvidenceError::Io { path: self.opts.dir.clone(), cause }),
                };
                *slot = match dir.and_then(|d| file::File::new(d, &r.file, &r.comment, self.opts.snaplen)) {
                    Ok(f) => Slot::Open(Box::new(f)),
                    Err(e) => {
                        self.errors.push(e.to_string());
                        Slot::Failed
                    }
                };
            }
            let Slot::Open(f) = slot else { continue };
            if f.frames >= self.opts.max_frames {
                self.left_out[i] += 1;
                continue;
            }
            if let Err(e) = f.write(ts_ns, source, link, orig_len, data, || vantage(source)) {
                self.errors.push(e.to_string());
                *slot = Slot::Failed;
            }
        }
        self.hits = hits;
    }

    /// Writes what is buffered, links every item to its file and returns the report's section.
    /// Items whose span held no frame of theirs get no file.
    pub fn finish(mut self, report: &mut Report) -> Evidence {
        let mut files = Vec::new();
        let ids: FxHashMap<String, Item> = items(&Items::of(report)).into_iter().map(|(item, id)| (id, item)).collect();
        let mut written = vec![false; self.requests.len()];
        for (i, r) in self.requests.iter().enumerate() {
            let Slot::Open(f) = &mut self.files[i] else { continue };
            if let Err(e) = f.flush() {
                self.errors.push(e.to_string());
                continue;
            }
            written[i] = true;
            if let Some(item) = ids.get(&r.id) {
                link(report, *item, &r.file);
            }
            files.push(EvidenceFile {
                file: r.file.clone(),
                about: r.about.clone(),
                start_ns: r.start_ns,
                end_ns: r.end_ns,
                frames: f.frames,
                left_out: self.left_out[i],
            });
        }
        // Live, a finding whose flows grew since its file was opened is not the same item any
        // more: it links the first file of its code that holds one of its flows.
        for f in report.audit.iter_mut().filter(|f| f.evidence.is_none()) {
            let keys: Vec<FlowKey> = f.flows.iter().filter_map(flow_ref_key).collect();
            let first = self.requests.iter().enumerate().find(|(i, r)| {
                written[*i]
                    && r.what == f.code.name()
                    && r.id.starts_with("finding ")
                    && keys.iter().any(|k| r.select.flows.contains(k))
            });
            if let Some((_, r)) = first {
                f.evidence = Some(r.file.clone());
            }
        }
        self.errors.dedup();
        Evidence {
            dir: self.opts.dir.display().to_string(),
            snaplen: self.opts.snaplen,
            max_frames: self.opts.max_frames,
            margin_ns: self.opts.margin_ns,
            files,
            ring_full: 0,
            errors: self.errors,
        }
    }
}

/// Sets the item's `evidence` link.
fn link(report: &mut Report, item: Item, file: &str) {
    let slot = match item {
        Item::Finding(i) => report.audit.get_mut(i).map(|f| &mut f.evidence),
        Item::EcmpFinding(i) => report.ecmp.findings.get_mut(i).map(|f| &mut f.evidence),
        Item::Episode(i) => report.incast.episodes.get_mut(i).map(|e| &mut e.evidence),
        Item::Storm(i) => report.pfc.storms.get_mut(i).map(|s| &mut s.evidence),
        Item::Deadlock(i) => report.congestion_tree.deadlocks.get_mut(i).map(|d| &mut d.evidence),
        Item::TailMessage(i) => report.messages.as_mut().and_then(|m| m.tail.worst.get_mut(i)).map(|w| &mut w.evidence),
    };
    if let Some(s) = slot {
        *s = Some(file.to_string());
    }
}

/// Removes every evidence link (a merged report has no evidence directory of its own).
pub fn unlink(report: &mut Report) {
    report.evidence = None;
    report.audit.iter_mut().chain(&mut report.ecmp.findings).for_each(|f| f.evidence = None);
    report.incast.episodes.iter_mut().for_each(|e| e.evidence = None);
    report.pfc.storms.iter_mut().for_each(|s| s.evidence = None);
    report.congestion_tree.deadlocks.iter_mut().for_each(|d| d.evidence = None);
    report.messages.iter_mut().flat_map(|m| m.tail.worst.iter_mut()).for_each(|w| w.evidence = None);
}

/// A finding's frames: its flows, their ACK flows, and the replies to their senders (to the
/// sender's QP when its ACK flow is known, else any from that receiver).
pub fn finding_select(run: &Pipeline, f: &Finding) -> Select {
    let mut s = Select::default();
    for r in &f.flows {
        flow_select(run, r, &mut s);
    }
    s
}

/// A flow's frames, its ACK flow's and the replies to its sender.
fn flow_select(run: &Pipeline, r: &FlowRef, s: &mut Select) {
    let Some(k) = flow_ref_key(r) else { return };
    s.flows.insert(k);
    let peer = run.analyses.rtt.peer(&k);
    if let Some(p) = peer {
        s.flows.insert(p);
    }
    s.replies.insert((k.dst, k.src, peer.map(|p| p.dst_qp)));
}

/// What evidence can be about, borrowed from a report or computed from a run on its own (live,
/// without assembling a whole report).
#[derive(Debug, Clone, Copy)]
pub struct Items<'a> {
    pub audit: &'a [Finding],
    /// The ECMP section's findings (offline; live does not compute the ECMP section).
    pub ecmp: &'a [Finding],
    pub episodes: &'a [Episode],
    pub storms: &'a [StormJson],
    pub deadlocks: &'a [Deadlock],
    /// The tail's slowest messages (offline; live leaves them out: their completion is not
    /// known when the agent would ask the kernel for their frames).
    pub tail: &'a [TailMessage],
}

impl<'a> Items<'a> {
    /// What live evidence can be about: no ECMP section, no tail (see the fields).
    pub fn live(
        audit: &'a [Finding],
        episodes: &'a [Episode],
        storms: &'a [StormJson],
        deadlocks: &'a [Deadlock],
    ) -> Self {
        Items { audit, ecmp: &[], episodes, storms, deadlocks, tail: &[] }
    }

    pub fn of(report: &'a Report) -> Self {
        Items {
            audit: &report.audit,
            ecmp: &report.ecmp.findings,
            episodes: &report.incast.episodes,
            storms: &report.pfc.storms,
            deadlocks: &report.congestion_tree.deadlocks,
            tail: report.messages.as_ref().map_or(&[], |m| &m.tail.worst),
        }
    }
}

/// Every item evidence can be about, with its identity: the same item in a later report of
/// the run (live: counts grow, messages change) has the same one.
pub fn items(report: &Items<'_>) -> Vec<(Item, String)> {
    let mut out = Vec::new();
    let id = |f: &Finding| {
        let flows: Vec<String> =
            f.flows.iter().map(|r| format!("{}>{}:{}/{:#x}", r.src, r.dst, r.udp_sport, r.dst_qp)).collect();
        format!("finding {} {}", f.code.name(), flows.join(" "))
    };
    for (i, f) in report.audit.iter().enumerate() {
        out.push((Item::Finding(i), id(f)));
    }
    for (i, f) in report.ecmp.iter().enumerate() {
        out.push((Item::EcmpFinding(i), id(f)));
    }
    for (i, e) in report.episodes.iter().enumerate() {
        out.push((Item::Episode(i), format!("incast {} {}", e.dst, e.start_ns)));
    }
    for (i, s) in report.storms.iter().enumerate() {
        out.push((Item::Storm(i), format!("storm {} {} {}", s.mac, s.priority, s.start_ns)));
    }
    for (i, d) in report.deadlocks.iter().enumerate() {
        out.push((Item::Deadlock(i), format!("deadlock {} {} {}", d.priority, d.cycle.join(","), d.start_ns)));
    }
    for (i, w) in report.tail.iter().enumerate() {
        let f = &w.flow;
        out.push((
            Item::TailMessage(i),
            format!("tail {}>{}:{}/{:#x} {} {}", f.src, f.dst, f.udp_sport, f.dst_qp, w.psn_first, w.start_ns),
        ));
    }
    out
}

/// Every request of a report built from `run`: one per finding, incast episode, PFC storm and
/// deadlock. A finding's span starts at the first trouble its flows showed (a CE mark, a CNP,
/// a NAK, a PSN out of sequence or repeated; else their first frame) and ends at their last.
pub fn plan(report: &Report, run: &Pipeline, margin_ns: u64) -> Vec<Request> {
    let mut out = Vec::new();
    let report = Items::of(report);
    for (item, id) in items(&report) {
        if let Some(r) = request(&report, run, margin_ns, item, id) {
            out.push(r);
        }
    }
    out
}

/// The request of one item of `report`.
pub(crate) fn request(report: &Items<'_>, run: &Pipeline, margin_ns: u64, item: Item, id: String) -> Option<Request> {
    let new = |what: &str, about: String, comment: String, span: (u64, u64), select: Select| Request {
        id: id.clone(),
        what: what.to_string(),
        file: String::new(),
        about,
        comment,
        start_ns: span.0.saturating_sub(margin_ns),
        end_ns: span.1.saturating_add(margin_ns),
        select,
    };
    let finding = |f: &Finding| {
        let select = finding_select(run, f);
        let span = flows_span(run, &select.flows);
        new(
            f.code.name(),
            format!("finding {} ({})", f.code.name(), f.severity.name()),
            format!("roce-analyzer finding {} ({}): {}", f.code.name(), f.severity.name(), f.message),
            // Flows the engine does not hold (live before a poll, past --max-flows): the run.
            span.unwrap_or((0, u64::MAX)),
            select,
        )
    };
    Some(match item {
        Item::Finding(i) => finding(&report.audit[i]),
        Item::EcmpFinding(i) => finding(&report.ecmp[i]),
        Item::Episode(i) => {
            let e = &report.episodes[i];
            let select =
                Select { host: Some(addr_bytes(&e.dst)?), pause: Some((Vec::new(), 0x1FF)), ..Default::default() };
            new(
                "incast",
                format!("incast episode into {}", e.dst),
                format!(
                    "roce-analyzer incast episode: {} senders at peak into {} ({} bytes, peak {:.1} Gb/s, {} CE-marked, {} CNPs, {} PFC frames)",
                    e.peak_senders, e.dst, e.bytes, e.peak_gbps, e.ce_packets, e.cnp_packets, e.pfc_frames
                ),
                episode_span(report.episodes, i, margin_ns),
                select,
            )
        }
        Item::Storm(i) => {
            let s = &report.storms[i];
            let prios = if s.priority >= 8 { PAUSE_BIT } else { 1 << s.priority };
            new(
                "pfc_storm",
                format!("PFC storm from {} priority {}", s.mac, s.priority),
                format!(
                    "roce-analyzer PFC storm: {}{} paused priority {} for {} ns",
                    s.mac,
                    s.device.as_ref().map(|d| format!(" ({d})")).unwrap_or_default(),
                    s.priority,
                    s.duration_ns
                ),
                (s.start_ns, s.start_ns.saturating_add(s.duration_ns)),
                Select { pause: Some((vec![parse_mac(&s.mac)?], prios)), ..Default::default() },
            )
        }
        Item::Deadlock(i) => {
            let d = &report.deadlocks[i];
            let prios = if d.priority >= 8 { PAUSE_BIT } else { 1 << d.priority };
            let macs = deadlock_macs(run, &d.cycle);
            new(
                "deadlock",
                format!("PFC deadlock on priority {}", d.priority),
                format!(
                    "roce-analyzer PFC deadlock on priority {}: {} paused each other for {} ns",
                    d.priority,
                    d.cycle.join(" → "),
                    d.duration_ns
                ),
                (d.start_ns, d.start_ns.saturating_add(d.duration_ns)),
                Select { pause: Some((macs, prios)), ..Default::default() },
            )
        }
        Item::TailMessage(i) => tail_request(run, &report.tail[i], new),
    })
}

/// A tail message's evidence: its flow, its ACKs and the replies to its sender, and every pause
/// in its time; what it is about, its comment, its span.
fn tail_request(
    run: &Pipeline,
    w: &TailMessage,
    new: impl Fn(&str, String, String, (u64, u64), Select) -> Request,
) -> Request {
    let mut select = Select { pause: Some((Vec::new(), 0x1FF)), ..Default::default() };
    flow_select(run, &w.flow, &mut select);
    let causes: Vec<String> = w.causes.iter().map(|c| format!("{} {} ns", c.cause, c.overlap_ns)).collect();
    new(
        "tail",
        format!("tail message {} PSN {}", w.flow.label(), w.psn_first),
        format!(
            "roce-analyzer tail message: {} {} PSN {}-{}, {} bytes, completed in {} ns; overlapped: {}",
            w.flow.label(),
            w.kind,
            w.psn_first,
            w.psn_last,
            w.bytes,
            w.mct_ns,
            causes.join(", ")
        ),
        (w.start_ns, w.start_ns.saturating_add(w.mct_ns)),
        select,
    )
}

/// From the first frame (or event) to the last of the flows the engine holds among `flows`.
fn flows_span<'a>(run: &Pipeline, flows: impl IntoIterator<Item = &'a FlowKey>) -> Option<(u64, u64)> {
    let mut span: Option<(u64, u64)> = None;
    for k in flows {
        if let Some(s) = run.engine.flows.get(k) {
            let start = if s.first_event_ns != 0 { s.first_event_ns } else { s.first_ns };
            span = Some(span.map_or((start, s.last_ns), |(a, b)| (a.min(start), b.max(s.last_ns))));
        }
    }
    span
}

/// The MACs of the PFC/PAUSE senders that are devices of a deadlock's cycle (the topology
/// names their MACs).
fn deadlock_macs(run: &Pipeline, cycle: &[String]) -> Vec<[u8; 6]> {
    let topo = run.analyses.config.topology.as_ref();
    let mut macs: Vec<[u8; 6]> = (run.engine.pfc.pfc.keys().map(|(m, _)| *m))
        .chain(run.engine.pfc.pause.keys().copied())
        .filter(|m| tree::owner_names(topo, m).0.is_some_and(|n| cycle.contains(&n)))
        .collect();
    macs.sort_unstable();
    macs.dedup();
    macs
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// How an input names itself in an interface block.
pub fn vantage_of(run: &Pipeline, source: u16) -> Vantage {
    match run.engine.sources.get(source as usize) {
        Some(s) => {
            Vantage { name: s.label.clone(), description: format!("vantage point {}: {} {}", s.label, s.kind, s.name) }
        }
        None => Vantage { name: format!("input {source}"), description: String::new() },
    }
}

/// Offline: the files of `report`, cut from the spool of the run's one pass, linked into it.
pub fn cut_offline(
    report: &mut Report,
    run: &Pipeline,
    spool: spool::Spool,
    opts: Options,
) -> Result<(), EvidenceError> {
    let failed = spool.failed.clone();
    let mut cutter = Cutter::new(opts.clone(), plan(report, run, opts.margin_ns));
    let vantage = |s: u16| vantage_of(run, s);
    spool.replay(|f| cutter.frame(f, &vantage))?;
    cutter.errors.extend(failed);
    report.evidence = Some(cutter.finish(report));
    Ok(())
}

/// `--evidence DIR` made ready before any work ([`prepare`]).
#[derive(Debug)]
pub struct Prepared {
    /// The directory as an absolute path (the report and the HTML page link files by it).
    pub dir: PathBuf,
    /// It, opened: every file is created under this handle.
    pub handle: Arc<OutDir>,
    /// Evidence files of an earlier run, moved aside, and where to.
    pub moved: usize,
    pub aside: Option<PathBuf>,
}

/// Checks that evidence can be written to `dir` (created when missing) before any work, opens
/// it, and moves the evidence files of an earlier run there into a new `previous-N`
/// subdirectory: a file this run does not write must not pass for its evidence, and the earlier
/// run's report (a checkpoint of a killed agent) must not lose the files it links.
pub fn prepare(dir: &Path) -> Result<Prepared, EvidenceError> {
    let io = |cause| EvidenceError::Io { path: dir.into(), cause };
    if dir.exists() && !dir.is_dir() {
        return Err(EvidenceError::NotADirectory { path: dir.into() });
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    let handle = OutDir::open(&dir.canonicalize().map_err(io)?).map_err(io)?;
    tempfile::tempfile_in(&handle.path).map_err(io)?;
    let names = handle.names().map_err(io)?;
    let earlier: Vec<&String> = names.iter().filter(|n| is_evidence_name(n) && handle.is_file(n)).collect();
    let mut aside = None;
    if !earlier.is_empty() {
        let n = names.iter().filter_map(|n| n.strip_prefix("previous-")?.parse::<u64>().ok()).max().unwrap_or(0) + 1;
        let name = format!("previous-{n}");
        handle.mkdir(&name).map_err(io)?;
        let to = handle.sub(&name).map_err(io)?;
        for f in &earlier {
            handle.move_to(f, &to).map_err(|cause| EvidenceError::Io { path: handle.join(f), cause })?;
        }
        aside = Some(to.path.clone());
    }
    Ok(Prepared { dir: handle.path.clone(), handle: Arc::new(handle), moved: earlier.len(), aside })
}

/// The span an episode's file takes, before `new` widens it by `margin` each side: the margin
/// stops halfway to the previous and the next episode of the same destination, so that a
/// file holds its own episode, not its neighbour's (episodes of a periodic incast are often
/// closer together than the margin).
fn episode_span(episodes: &[Episode], i: usize, margin: u64) -> (u64, u64) {
    let e = &episodes[i];
    let same = episodes.iter().enumerate().filter(|(j, x)| *j != i && x.dst == e.dst).map(|(_, x)| x);
    let before =
        same.clone().filter(|x| x.end_ns <= e.start_ns).map(|x| e.start_ns - (e.start_ns - x.end_ns) / 2).max();
    // A frame at the very midpoint belongs to the later file.
    let after = same
        .filter(|x| x.start_ns >= e.end_ns)
        .map(|x| (e.end_ns + (x.start_ns - e.end_ns) / 2).saturating_sub(1).max(e.end_ns))
        .min();
    let start = before.map_or(e.start_ns.saturating_sub(margin), |b| b.max(e.start_ns.saturating_sub(margin)));
    let end = after.map_or(e.end_ns.saturating_add(margin), |a| a.min(e.end_ns.saturating_add(margin)));
    (start.saturating_add(margin), end.saturating_sub(margin))
}

/// `NNN-what.pcapng`, as [`Cutter::add`] names files.
fn is_evidence_name(n: &str) -> bool {
    let Some(stem) = n.strip_suffix(".pcapng") else { return false };
    let Some((num, what)) = stem.split_once('-') else { return false };
    num.len() >= 3
        && num.bytes().all(|b| b.is_ascii_digit())
        && !what.is_empty()
        && what.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}
