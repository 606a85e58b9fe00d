//! Live evidence: the kernel cannot keep every frame, so when a finding (or an incast episode,
//! a storm, a deadlock) first appears, the agent asks the XDP program to copy the frames of the
//! flows it names (and their replies; PFC frames for storms and deadlocks) for
//! `--evidence-time`, and cuts them into the item's file as they arrive. What the kernel could
//! not copy (its ring full) and what the flow map could not watch are counted.

use analyzer_common::flow::FlowKey;
use analyzer_common::maps;
use analyzer_common::maps::EvidenceFrame;
use rustc_hash::FxHashSet;

use super::seen::Seen;
use super::select::Select;
use super::{Cutter, Item, Items, Options, items, request, vantage_of};
use crate::capture::LinkType;
use crate::capture::kernel::KernelError;
use crate::capture::kernel::evidence::EvidenceSource;
use crate::engine::live::Clock;
use crate::model::flow_ref_key;
use crate::model::{Evidence, Report};
use crate::pipeline::Pipeline;
use crate::report::assemble;

/// Files a live run writes at most: an agent that runs for months keeps each file's selection
/// (its flows) to route copies by, so their number is bounded; items past it are counted.
pub const MAX_LIVE_FILES: usize = 1000;

pub struct LiveEvidence<S: EvidenceSource> {
    source: S,
    cutter: Cutter,
    /// Items asked for already (by identity).
    opened: FxHashSet<String>,
    /// Per finding code, the flows a file of that code watches already: a finding whose flows
    /// grow (the same item, a new identity) gets a file for its new flows only.
    covered: rustc_hash::FxHashMap<&'static str, FxHashSet<FlowKey>>,
    time_ns: u64,
    /// Flows a request named that the kernel's evidence flow map had no room for.
    unwatched: u64,
    /// Items that appeared after [`MAX_LIVE_FILES`] files were asked for.
    unkept: u64,
}

impl<S: EvidenceSource> LiveEvidence<S> {
    pub fn new(source: S, opts: Options, time_ns: u64) -> Self {
        LiveEvidence {
            source,
            cutter: Cutter::new(opts, Vec::new()),
            opened: FxHashSet::default(),
            covered: Default::default(),
            time_ns,
            unwatched: 0,
            unkept: 0,
        }
    }

    /// Looks for items that appeared since the last look (a report of the run so far) and
    /// asks the kernel for their frames from `now_mono` on, for the evidence time.
    pub fn open(&mut self, run: &Pipeline, clock: &Clock, now_mono: u64) -> Result<usize, KernelError> {
        // The items only (findings as /metrics computes them, episodes, storms, deadlocks): a
        // whole report would also judge DCQCN, spread ECMP and write notes on the agent's loop.
        let mut audit = assemble::judged::judge(run, &assemble::fabric::ecmp(run, false)).audit;
        let episodes = assemble::incast::incast(run).episodes;
        let storms = assemble::fabric::storms(&run.analyses.pause, run.analyses.config.topology.as_ref());
        let deadlocks = assemble::fabric::congestion_tree(run).deadlocks;
        let until = now_mono.saturating_add(self.time_ns);
        let mut opened = 0;
        let mut index = None;
        // What live evidence can be about (no ECMP section, no tail: see `Items`).
        let live =
            |audit| Items { audit, ecmp: &[], episodes: &episodes, storms: &storms, deadlocks: &deadlocks, tail: &[] };
        let ids = items(&live(&audit));
        for (item, mut id) in ids {
            if !self.opened.insert(id.clone()) {
                continue;
            }
            if self.cutter.requests.len() >= MAX_LIVE_FILES {
                self.unkept += 1;
                continue;
            }
            let mut partial = false;
            if let Item::Finding(i) = item {
                let f = &mut audit[i];
                let covered = self.covered.entry(f.code.name()).or_default();
                let named = f.flows.len();
                f.flows.retain(|r| flow_ref_key(r).is_some_and(|k| !covered.contains(&k)));
                if f.flows.is_empty() {
                    continue;
                }
                if f.flows.len() < named {
                    // A file for part of the finding: the finding links its first file.
                    partial = true;
                    id.push_str(" (new flows)");
                }
                covered.extend(f.flows.iter().filter_map(flow_ref_key));
            }
            let report = Items::live(&audit, &episodes, &storms, &deadlocks);
            let Some(mut r) = request(&report, run, 0, item, id) else { continue };
            if partial {
                r.about.push_str(", flows that joined it later");
            }
            (r.start_ns, r.end_ns) = (clock.wall(now_mono), clock.wall(until));
            let keys = kernel_keys(&mut index, run, &r.select);
            let taken = self.source.watch_flows(&keys, until)?;
            self.unwatched += (keys.len() - taken) as u64;
            if r.select.pause.is_some() {
                self.source.watch_pause(until)?;
            }
            self.cutter.add(r);
            opened += 1;
        }
        self.source.expire(now_mono)?;
        Ok(opened)
    }

    /// Cuts the copies waiting in the ring into their files; returns how many were read.
    pub fn drain(&mut self, max: u64, run: &Pipeline, clock: &Clock, source: u16) -> u64 {
        let cutter = &mut self.cutter;
        let vantage = |s: u16| vantage_of(run, s);
        self.source.drain(max, &mut |e: &EvidenceFrame| {
            cutter.frame(&Seen::of(e, clock.wall(e.ts_ns), source, LinkType::Ethernet), &vantage);
        })
    }

    /// Done with the kernel (the run ended): what is left is linking the files.
    pub fn close(self) -> Closed {
        Closed { cutter: self.cutter, unwatched: self.unwatched, unkept: self.unkept }
    }
}

/// Live evidence after the run: the files, to be linked into the final report.
#[derive(Debug)]
pub struct Closed {
    cutter: Cutter,
    unwatched: u64,
    unkept: u64,
}

impl Closed {
    /// The files, linked into the final report; `ring_full` is the kernel's count of copies
    /// its ring had no room for.
    pub fn finish(mut self, report: &mut Report, ring_full: u64) -> Evidence {
        if self.unwatched > 0 {
            self.cutter.errors.push(format!(
                "{} flows named by findings were not watched: the kernel's evidence flow map ({} entries) was full",
                self.unwatched,
                maps::DEFAULT_MAX_EVIDENCE_FLOWS
            ));
        }
        if self.unkept > 0 {
            self.cutter.errors.push(format!(
                "{} findings, episodes, storms or deadlocks appeared after {MAX_LIVE_FILES} evidence files were asked for: no file for them",
                self.unkept
            ));
        }
        let mut e = self.cutter.finish(report);
        e.ring_full = ring_full;
        e
    }
}

/// The run's flows by (source, destination) and by either address, built once per look and
/// only when a selection needs them (one pass over the flows, not one per item).
#[derive(Default)]
struct FlowIndex {
    by_pair: rustc_hash::FxHashMap<([u8; 16], [u8; 16]), Vec<FlowKey>>,
    by_host: rustc_hash::FxHashMap<[u8; 16], Vec<FlowKey>>,
}

impl FlowIndex {
    fn of(run: &Pipeline) -> Self {
        let mut x = FlowIndex::default();
        for (k, _) in run.engine.flows.iter() {
            x.by_pair.entry((k.src, k.dst)).or_default().push(*k);
            x.by_host.entry(k.src).or_default().push(*k);
            if k.dst != k.src {
                x.by_host.entry(k.dst).or_default().push(*k);
            }
        }
        x
    }
}

/// The kernel keys whose frames a selection takes: its flows, the flows the run has seen that
/// carry its replies (a CNP's flow has the CNP's own source port), and the flows into and out
/// of an incast's destination.
fn kernel_keys(index: &mut Option<FlowIndex>, run: &Pipeline, s: &Select) -> Vec<FlowKey> {
    let mut keys: FxHashSet<FlowKey> = s.flows.iter().copied().collect();
    if !s.replies.is_empty() || s.host.is_some() {
        let index = index.get_or_insert_with(|| FlowIndex::of(run));
        for (a, b, qp) in &s.replies {
            let flows = index.by_pair.get(&(*a, *b)).into_iter().flatten();
            keys.extend(flows.filter(|k| qp.is_none_or(|q| q == k.dst_qp)));
        }
        if let Some(h) = s.host {
            keys.extend(index.by_host.get(&h).into_iter().flatten());
        }
    }
    let mut v: Vec<FlowKey> = keys.into_iter().collect();
    v.sort_unstable_by_key(crate::model::flow_order);
    v
}

#[cfg(test)]
mod tests {
    use analyzer_common::record::Record;

    use super::*;
    use crate::model::FindingCode;

    /// A kernel without a kernel: what was asked, and copies waiting in the ring.
    #[derive(Default)]
    struct Fake {
        watched: Vec<(Vec<FlowKey>, u64)>,
        pause: Vec<u64>,
        ring: Vec<EvidenceFrame>,
    }

    impl EvidenceSource for Fake {
        fn watch_flows(&mut self, keys: &[FlowKey], until: u64) -> Result<usize, KernelError> {
            self.watched.push((keys.to_vec(), until));
            Ok(keys.len())
        }
        fn watch_pause(&mut self, until: u64) -> Result<(), KernelError> {
            self.pause.push(until);
            Ok(())
        }
        fn expire(&mut self, _now: u64) -> Result<(), KernelError> {
            Ok(())
        }
        fn drain(&mut self, max: u64, f: &mut dyn FnMut(&EvidenceFrame)) -> u64 {
            let n = (self.ring.len() as u64).min(max);
            for e in self.ring.drain(..n as usize) {
                f(&e);
            }
            n
        }
    }

    /// A Not-ECT data frame of flow `qp` from 10.0.0.1 to 10.0.0.2 (a `not_ect` finding).
    fn not_ect(qp: u32, ts: u64) -> Record {
        let mut r = Record {
            ts_ns: ts,
            opcode: 0x0A,
            ip_version: 4,
            dst_qp: qp,
            frame_len: 1000,
            dscp: 26,
            ..Default::default()
        };
        r.src_ip[..4].copy_from_slice(&[10, 0, 0, 1]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 0, 2]);
        r
    }

    fn copy(r: &Record, ts: u64) -> EvidenceFrame {
        EvidenceFrame {
            ts_ns: ts,
            orig_len: 1000,
            caplen: 64,
            class: analyzer_common::FrameClass::Roce as u8,
            aeth: 0,
            priorities: 0,
            src_mac: [2, 0, 0, 0, 0, 1],
            flow: r.flow(),
            data: [0xAB; maps::EVIDENCE_MAX_SNAPLEN],
        }
    }

    /// A finding opens once: its flows are watched for the evidence time from then, and the
    /// copies that arrive go to its file. When the same finding grows (a second flow), only
    /// the new flow gets a file of its own; the final finding links the first.
    #[test]
    fn a_finding_is_watched_once_and_its_new_flows_get_their_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options { dir: dir.path().into(), snaplen: 128, max_frames: 10, margin_ns: 0, handle: None };
        let mut ev = LiveEvidence::new(Fake::default(), opts, 5_000);
        let clock = Clock { offset: 0 };
        let mut run = Pipeline::default();
        let source = run.engine.add_source("live", "vb", "vb");
        let (a, b) = (not_ect(0x11, 100), not_ect(0x12, 200));
        run.analyses.observe(&a);
        assert_eq!(ev.open(&run, &clock, 1_000).unwrap(), 1);
        assert_eq!(ev.source.watched, vec![(vec![a.flow()], 6_000)]);
        assert_eq!(ev.open(&run, &clock, 2_000).unwrap(), 0, "once");
        // Copies within the span (1000..6000) go to the file; one after it does not.
        ev.source.ring = vec![copy(&a, 1_500), copy(&a, 2_500), copy(&a, 7_000)];
        assert_eq!(ev.drain(100, &run, &clock, source), 3);
        run.analyses.observe(&b);
        assert_eq!(ev.open(&run, &clock, 3_000).unwrap(), 1);
        assert_eq!(ev.source.watched[1], (vec![b.flow()], 8_000), "only the new flow");
        ev.source.ring = vec![copy(&b, 3_500), copy(&a, 3_600)];
        ev.drain(100, &run, &clock, source);
        let mut report = Report::assemble(&run, crate::report::RunKind::Live);
        let e = ev.close().finish(&mut report, 0);
        let files: Vec<(&str, u64)> = e.files.iter().map(|f| (f.file.as_str(), f.frames)).collect();
        assert_eq!(files, vec![("001-not_ect.pcapng", 3), ("002-not_ect.pcapng", 1)]);
        let f = report.audit.iter().find(|f| f.code == FindingCode::NotEct).unwrap();
        assert_eq!(f.flows.len(), 2);
        assert_eq!(f.evidence.as_deref(), Some("001-not_ect.pcapng"));
    }
}
