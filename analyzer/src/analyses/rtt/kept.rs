//! What the RTT analysis keeps in each request flow's entry of the analyses' flows table.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

/// A request flow: its PSN span, and (boxed: most flows of a large capture have none) the
/// requests with AckReq that wait for their ACK.
#[derive(Debug, Default)]
pub(crate) struct RequestFlow {
    pub(super) first_psn: u32,
    pub(super) last_psn: u32,
    pub(super) waiting: Option<Box<Waiting>>,
}

#[derive(Debug, Default)]
pub(super) struct Waiting {
    /// (PSN, time) of AckReq requests not yet acknowledged, oldest first.
    queue: VecDeque<(u32, u64)>,
    /// The PSNs in `queue` (each once), for O(1) retransmission checks.
    psns: FxHashSet<u32>,
}

impl RequestFlow {
    pub(super) fn front(&self) -> Option<(u32, u64)> {
        self.waiting.as_ref()?.queue.front().copied()
    }

    pub(super) fn pop(&mut self) -> Option<(u32, u64)> {
        let w = self.waiting.as_mut()?;
        let front = w.queue.pop_front()?;
        w.psns.remove(&front.0);
        Some(front)
    }

    /// Waits for the ACK of request `psn` sent at `ts` (once per PSN: a retransmission keeps
    /// the first); true when the queue was full and its oldest was let go.
    pub(super) fn wait(&mut self, psn: u32, ts: u64) -> bool {
        let w = self.waiting.get_or_insert_with(Default::default);
        if !w.psns.insert(psn) {
            return false;
        }
        let evicted = w.queue.len() == MAX_WAITING;
        if evicted && let Some((old, _)) = w.queue.pop_front() {
            w.psns.remove(&old);
        }
        w.queue.push_back((psn, ts));
        evicted
    }

    pub(super) fn queue(&self) -> impl Iterator<Item = &(u32, u64)> {
        self.waiting.iter().flat_map(|w| w.queue.iter())
    }
}

/// AckReq requests one flow keeps waiting for their ACK, at most. An RNIC has far fewer
/// outstanding (its send queue depth); more means the ACKs are not seen here.
pub const MAX_WAITING: usize = 1 << 16;
