//! Offline with `--edges`: what `merge` of captures cut in time needs to pair a request before
//! a cut with its ACK after it (`report::rtt_stitch`). Per ACK flow, its first ACKs with their
//! times and how many of its ACKs this run could not pair; per request flow, its first requests
//! with AckReq (one sent again after the cut keeps its first time in one run, Karn: the merge
//! replays them); the request flows' waiting requests are read from their queues at the end.
//! Off, no request or ACK pays for it.

use analyzer_common::flow::FlowKey;
use rustc_hash::FxHashMap;

use crate::model::edge::{ACK_HEAD, EdgeAcks, REQUEST_HEAD};

/// The ACK flows' heads, by the ACK flow's key; the request flows' first AckReq requests
/// (`[psn, time]`, and whether there were more), by the request flow's key.
#[derive(Debug, Default)]
pub struct AckHeads {
    acks: FxHashMap<FlowKey, EdgeAcks>,
    requests: FxHashMap<FlowKey, (Vec<[u64; 2]>, bool)>,
}

/// How an ACK fared in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paired {
    Yes,
    /// No request flow could account for it.
    Unpaired,
    /// Several could.
    Ambiguous,
}

impl AckHeads {
    /// An ACK of flow `key` at `ts` for `psn`.
    pub fn observe(&mut self, key: FlowKey, ts: u64, psn: u32, paired: Paired) {
        let e = self.acks.entry(key).or_insert_with(|| EdgeAcks { complete: true, ..Default::default() });
        if e.head.len() < ACK_HEAD {
            e.head.push([ts, psn as u64]);
        } else {
            e.complete = false;
        }
        match paired {
            Paired::Yes => {}
            Paired::Unpaired => e.unpaired += 1,
            Paired::Ambiguous => e.ambiguous += 1,
        }
    }

    /// A request with AckReq of flow `key` at `ts` for `psn` (one the run follows).
    pub fn request(&mut self, key: FlowKey, ts: u64, psn: u32) {
        let (head, more) = self.requests.entry(key).or_default();
        match head.len() < REQUEST_HEAD {
            true => head.push([psn as u64, ts]),
            false => *more = true,
        }
    }

    pub fn get(&self, key: &FlowKey) -> Option<&EdgeAcks> {
        self.acks.get(key)
    }

    /// A request flow's first AckReq requests, and whether there were more.
    pub fn requests(&self, key: &FlowKey) -> Option<&(Vec<[u64; 2]>, bool)> {
        self.requests.get(key)
    }

    pub fn forget(&mut self, gone: &rustc_hash::FxHashSet<FlowKey>) {
        self.acks.retain(|k, _| !gone.contains(k));
        self.requests.retain(|k, _| !gone.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_keeps_the_first_acks_and_counts_every_unpaired_one() {
        let mut h = AckHeads::default();
        let k = FlowKey::default();
        for i in 0..ACK_HEAD as u64 + 3 {
            let paired = match i % 3 {
                0 => Paired::Unpaired,
                1 => Paired::Yes,
                _ => Paired::Ambiguous,
            };
            h.observe(k, 100 + i, i as u32, paired);
        }
        let e = h.get(&k).unwrap();
        assert_eq!(e.head.len(), ACK_HEAD);
        assert_eq!((e.head[0], e.head[ACK_HEAD - 1]), ([100, 0], [100 + ACK_HEAD as u64 - 1, ACK_HEAD as u64 - 1]));
        let n = ACK_HEAD as u64 + 3;
        assert_eq!((e.complete, e.unpaired, e.ambiguous), (false, n.div_ceil(3), (n - 2).div_ceil(3)));
        for i in 0..REQUEST_HEAD as u64 + 1 {
            h.request(k, 500 + i, 40 + i as u32);
        }
        let (head, more) = h.requests(&k).unwrap();
        assert_eq!((head.len(), head[0], head[REQUEST_HEAD - 1], *more), (REQUEST_HEAD, [40, 500], [55, 515], true));
    }
}
