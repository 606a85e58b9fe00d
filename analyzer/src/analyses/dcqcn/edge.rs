//! `--edges`: what `merge` of captures cut in time needs to judge CNPs as one run would.
//!
//! A CNP is judged on its flow's rate windows from the few before it to the horizon after it
//! ([`super::reach`] windows in all). Near a cut, some of those windows are in the
//! report before or after: each report keeps, for every data flow (watched or not: the whole
//! may watch it from an earlier report), its windows with data within reach of the report's
//! first and last windows, and all its data frames as a series (the whole's plot of a flow it
//! watched earlier counts them). The CNPs keep their outcome here and how they were attributed.

use std::collections::VecDeque;

use analyzer_common::flow::FlowKey;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use crate::analyses::marking::Series;

/// One data flow's windows near the report's ends, and its frames as a series.
#[derive(Debug)]
pub struct FlowEdge {
    /// It carries requests (the messages analysis keeps its latest windows: DCQCN judges its
    /// first CNPs on them).
    pub request: bool,
    /// Windows (window, bytes) within reach of the report's first window.
    head: Vec<(u64, u64)>,
    /// Its latest windows within reach of its latest one.
    tail: VecDeque<(u64, u64)>,
    /// Every data frame of it here.
    pub all: Series,
}

impl FlowEdge {
    /// Its windows within reach of either end of the report (`first`, `last`), each once.
    pub fn windows(&self, first: u64, last: u64, reach: u64) -> Vec<(u64, u64)> {
        let mut out = self.head.clone();
        let near_end = self.tail.iter().filter(|(w, _)| *w + reach >= last && *w >= first + reach);
        out.extend(near_end);
        out
    }
}

/// The report's span in windows and its data flows.
#[derive(Debug, Default)]
pub struct Edges {
    pub first: Option<u64>,
    pub last: u64,
    flows: Vec<FlowEdge>,
    index: FxHashMap<FlowKey, u32>,
    /// The latest data frame's flow and its place (a message's frames follow each other: one
    /// lookup less for most).
    latest: Option<(FlowKey, u32)>,
    /// Data flows not kept (past the analysis' bound).
    pub over: u64,
    /// CNPs no flow could take, the first [`MAX_STRAYS`] (one run over a longer capture may
    /// know their flow), and how many more.
    pub strays: Vec<Stray>,
    pub strays_over: u64,
}

/// Unattributed CNPs an edge lists, at most.
pub const MAX_STRAYS: usize = 1024;

/// A CNP no flow could take: to `sender` (its QP `qp`) from `receiver`, at `ts_ns`; `several`:
/// several flows between them were watched (else none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stray {
    pub sender: [u8; 16],
    pub receiver: [u8; 16],
    pub ip_version: u8,
    pub qp: u32,
    pub ts_ns: u64,
    pub several: bool,
}

impl Edges {
    /// A CNP no flow could take.
    pub fn stray(&mut self, s: Stray) {
        if self.strays.len() < MAX_STRAYS {
            self.strays.push(s);
        } else {
            self.strays_over += 1;
        }
    }

    /// A data flow's edge.
    pub fn get(&self, key: &FlowKey) -> Option<&FlowEdge> {
        self.index.get(key).map(|i| &self.flows[*i as usize])
    }

    /// The data flows kept.
    pub fn keys(&self) -> impl Iterator<Item = &FlowKey> {
        self.index.keys()
    }

    /// The place of a data frame's flow (kept on its first frame); none past the bound.
    fn place(&mut self, r: &Record, w: u64, cap: usize) -> Option<usize> {
        let key = r.flow();
        if let Some((k, i)) = self.latest
            && k == key
        {
            return Some(i as usize);
        }
        let i = match self.index.get(&key) {
            Some(i) => *i,
            None if self.flows.len() >= cap => {
                self.over += 1;
                return None;
            }
            None => {
                self.flows.push(FlowEdge {
                    request: analyzer_common::opcode::is_reliable_request(r.opcode),
                    head: Vec::new(),
                    tail: VecDeque::new(),
                    all: Series::new(w),
                });
                let i = self.flows.len() as u32 - 1;
                self.index.insert(key, i);
                i
            }
        };
        self.latest = Some((key, i));
        Some(i as usize)
    }

    /// Any record at window `w`; a data frame (not a CNP) adds to its flow's windows.
    pub fn record(&mut self, r: &Record, w: u64, reach: u64, cap: usize) {
        let first = *self.first.get_or_insert(w);
        self.last = self.last.max(w);
        if r.is_cnp() || !analyzer_common::opcode::is_data(r.opcode) {
            return;
        }
        let Some(i) = self.place(r, w, cap) else { return };
        let f = &mut self.flows[i];
        let bytes = r.frame_len as u64;
        f.all.add(w, bytes, r.ce());
        if w < first + reach {
            add(&mut f.head, w, bytes);
        }
        match f.tail.back_mut() {
            Some(b) if b.0 == w => b.1 += bytes,
            // (A record a little out of order, live, adds to its own window.)
            Some(b) if b.0 > w => {
                if let Some(e) = f.tail.iter_mut().find(|e| e.0 == w) {
                    e.1 += bytes;
                }
            }
            _ => f.tail.push_back((w, bytes)),
        }
        while f.tail.front().is_some_and(|(x, _)| x + reach < w) {
            f.tail.pop_front();
        }
    }
}

fn add(v: &mut Vec<(u64, u64)>, w: u64, bytes: u64) {
    match v.binary_search_by_key(&w, |e| e.0) {
        Ok(at) => v[at].1 += bytes,
        Err(at) => v.insert(at, (w, bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(ts: u64) -> Record {
        let mut r = Record { ts_ns: ts, opcode: 0x07, frame_len: 100, ip_version: 4, dst_qp: 9, ..Default::default() };
        r.src_ip[..4].copy_from_slice(&[10, 0, 0, 1]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 0, 2]);
        r
    }

    /// Windows 0..50, two frames each but 20..30 empty; reach 8: the head keeps 0..8, the
    /// tail 41..50 (42..49 within reach of the last window 49); each once.
    #[test]
    fn a_flow_keeps_the_windows_within_reach_of_both_ends() {
        let mut e = Edges::default();
        for w in (0..50).filter(|w| !(20..30).contains(w)) {
            for i in 0..2 {
                e.record(&data(w * 10 + i), w, 8, 10);
            }
        }
        let f = e.get(&data(0).flow()).unwrap();
        let w = f.windows(e.first.unwrap(), e.last, 8);
        let expect: Vec<(u64, u64)> = (0..8).chain(41..50).map(|w| (w, 200)).collect();
        assert_eq!(w, expect);
        assert_eq!((f.all.frames.iter().sum::<u64>(), f.request), (80, true));
        // A short report: head and tail overlap, every window once.
        let mut s = Edges::default();
        for w in 0..5 {
            s.record(&data(w * 10), w, 8, 10);
        }
        let f = s.get(&data(0).flow()).unwrap();
        assert_eq!(f.windows(0, 4, 8), (0..5).map(|w| (w, 100)).collect::<Vec<_>>());
        // Past the bound a new flow is counted, not kept.
        let mut other = data(60);
        other.dst_qp = 10;
        s.record(&other, 6, 8, 1);
        assert_eq!((s.keys().count(), s.over), (1, 1));
    }
}
