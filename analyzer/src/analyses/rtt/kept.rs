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
    /// The PSNs in `queue` (each once), for O(1) retransmission checks, once it held more than
    /// [`SCANNED`] (and until it drains); empty before: the queue is scanned (a set for each
    /// flow's one waiting request was 13 MB at 200 000 flows).
    psns: FxHashSet<u32>,
}

/// Waiting requests a flow scans for a PSN instead of keeping a set of them.
const SCANNED: usize = 32;

impl Waiting {
    /// Whether the PSNs are in the set (else the queue is scanned).
    fn indexed(&self) -> bool {
        !self.psns.is_empty()
    }

    fn holds(&self, psn: u32) -> bool {
        match self.indexed() {
            true => self.psns.contains(&psn),
            false => self.queue.iter().any(|(p, _)| *p == psn),
        }
    }
}

impl RequestFlow {
    pub(super) fn front(&self) -> Option<(u32, u64)> {
        self.waiting.as_ref()?.queue.front().copied()
    }

    pub(super) fn pop(&mut self) -> Option<(u32, u64)> {
        let w = self.waiting.as_mut()?;
        let front = w.queue.pop_front()?;
        if w.indexed() {
            w.psns.remove(&front.0);
            if w.queue.is_empty() {
                // Its memory goes too.
                w.psns = FxHashSet::default();
            }
        }
        Some(front)
    }

    /// Waits for the ACK of request `psn` sent at `ts` (once per PSN: a retransmission keeps
    /// the first); true when the queue was full and its oldest was let go.
    pub(super) fn wait(&mut self, psn: u32, ts: u64) -> bool {
        let w = self.waiting.get_or_insert_with(Default::default);
        if w.holds(psn) {
            return false;
        }
        let evicted = w.queue.len() == MAX_WAITING;
        if evicted && let Some((old, _)) = w.queue.pop_front() {
            w.psns.remove(&old);
        }
        w.queue.push_back((psn, ts));
        if w.indexed() {
            w.psns.insert(psn);
        } else if w.queue.len() > SCANNED {
            w.psns.extend(w.queue.iter().map(|(p, _)| *p));
        }
        evicted
    }

    pub(super) fn queue(&self) -> impl Iterator<Item = &(u32, u64)> {
        self.waiting.iter().flat_map(|w| w.queue.iter())
    }
}

/// AckReq requests one flow keeps waiting for their ACK, at most. An RNIC has far fewer
/// outstanding (its send queue depth); more means the ACKs are not seen here.
pub const MAX_WAITING: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// A PSN already waiting keeps its first time whether the queue is scanned (short) or
    /// indexed (past SCANNED), and after it drained and grew again.
    #[test]
    fn a_waiting_psn_is_found_scanned_or_indexed() {
        let mut f = RequestFlow::default();
        for round in 0..2u64 {
            let n = SCANNED as u32 + 8;
            for p in 0..n {
                assert!(!f.wait(p, round * 1000 + p as u64));
                // Sent again at once: the first time stays.
                assert!(!f.wait(p, 999_999));
            }
            assert_eq!(f.waiting.as_ref().map(|w| (w.queue.len(), w.indexed())), Some((n as usize, true)));
            for p in 0..n {
                assert_eq!(f.pop(), Some((p, round * 1000 + p as u64)), "round {round}");
            }
            assert_eq!(f.pop(), None);
            assert!(!f.waiting.as_ref().unwrap().indexed(), "drained: back to scanning");
        }
        // Scanned: a PSN popped is new again.
        f.wait(5, 1);
        f.pop();
        f.wait(5, 2);
        assert_eq!(f.front(), Some((5, 2)));
    }
}
