//! Live evidence: the kernel cannot keep every frame, so when a finding (or an incast episode,
//! a storm, a deadlock) first appears, the agent asks the XDP program to copy the frames of the
//! flows it names (and their replies; PFC frames for storms and deadlocks) for
//! `--evidence-time`, and cuts them into the item's file as they arrive. What the kernel could
//! not copy (its ring full) and what the flow map could not watch are counted.

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::EvidenceFrame;
use analyzer_common::{FrameClass, maps};
use rustc_hash::FxHashSet;

use super::select::{Select, Tag};
use super::{Cutter, Options, Seen, plan, vantage_of};
use crate::capture::LinkType;
use crate::capture::kernel::KernelError;
use crate::capture::kernel::evidence::EvidenceSource;
use crate::engine::live::Clock;
use crate::pipeline::Pipeline;
use crate::report::assemble::{Lists, RunKind};
use crate::report::model::{Evidence, Report};

pub struct LiveEvidence<S: EvidenceSource> {
    source: S,
    cutter: Cutter,
    /// Items asked for already (by identity).
    opened: FxHashSet<String>,
    time_ns: u64,
    /// Flows a request named that the kernel's evidence flow map had no room for.
    unwatched: u64,
    /// Copies read from the ring.
    pub copies: u64,
}

impl<S: EvidenceSource> LiveEvidence<S> {
    pub fn new(source: S, opts: Options, time_ns: u64) -> Self {
        LiveEvidence {
            source,
            cutter: Cutter::new(opts, Vec::new()),
            opened: FxHashSet::default(),
            time_ns,
            unwatched: 0,
            copies: 0,
        }
    }

    /// Looks for items that appeared since the last look (a report of the run so far) and
    /// asks the kernel for their frames from `now_mono` on, for the evidence time.
    pub fn open(&mut self, run: &Pipeline, clock: &Clock, now_mono: u64) -> Result<usize, KernelError> {
        let report = Report::assemble_with(run, RunKind::Live, Lists::Streamed);
        let until = now_mono.saturating_add(self.time_ns);
        let mut opened = 0;
        for mut r in plan(&report, run, 0) {
            if !self.opened.insert(r.id.clone()) {
                continue;
            }
            (r.start_ns, r.end_ns) = (clock.wall(now_mono), clock.wall(until));
            let keys = kernel_keys(run, &r.select);
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
        let n = self.source.drain(max, &mut |e: &EvidenceFrame| {
            let tag = Tag {
                class: FrameClass::from_u8(e.class).unwrap_or(FrameClass::NonRoce),
                flow: e.flow,
                aeth: e.aeth != 0,
                src_mac: e.src_mac,
                priorities: e.priorities,
            };
            let len = (e.caplen as usize).min(maps::EVIDENCE_MAX_SNAPLEN);
            let seen = Seen {
                ts_ns: clock.wall(e.ts_ns),
                orig_len: e.orig_len,
                source,
                link: LinkType::Ethernet,
                tag,
                data: &e.data[..len],
            };
            cutter.frame(&seen, &vantage);
        });
        self.copies += n;
        n
    }

    /// Done with the kernel (the run ended): what is left is linking the files.
    pub fn close(self) -> Closed {
        Closed { cutter: self.cutter, unwatched: self.unwatched }
    }
}

/// Live evidence after the run: the files, to be linked into the final report.
#[derive(Debug)]
pub struct Closed {
    cutter: Cutter,
    unwatched: u64,
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
        let mut e = self.cutter.finish(report);
        e.ring_full = ring_full;
        e
    }
}

/// The kernel keys whose frames a selection takes: its flows, the flows the run has seen that
/// carry its replies (a CNP's flow has the CNP's own source port), and the flows into and out
/// of an incast's destination.
fn kernel_keys(run: &Pipeline, s: &Select) -> Vec<FlowKey> {
    let mut keys: FxHashSet<FlowKey> = s.flows.iter().copied().collect();
    if !s.replies.is_empty() || s.host.is_some() {
        for (k, _) in run.engine.flows.iter() {
            let reply =
                s.replies.iter().any(|(a, b, qp)| k.src == *a && k.dst == *b && qp.is_none_or(|q| q == k.dst_qp));
            let host = s.host.is_some_and(|h| k.dst == h || k.src == h);
            if reply || host {
                keys.insert(*k);
            }
        }
    }
    let mut v: Vec<FlowKey> = keys.into_iter().collect();
    v.sort_unstable_by_key(crate::report::model::flow_order);
    v
}
