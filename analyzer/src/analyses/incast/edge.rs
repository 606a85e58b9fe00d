//! `--edges`: what `merge` of captures cut in time needs to give each destination's incast
//! episodes as one run does. The part after a cut counted the destination's senders afresh;
//! one run met its first frames with the window and the open episode the part before left.
//! Each report keeps, per destination, its events of the first two windows (the head) and its
//! state at the end (the window's packets, the open episode with its tally and what waits
//! below the minimum). `merge` resumes the state of the part before, replays the head from it
//! and from nothing, and the two runs meet by the head's end: one window after the first
//! frame every packet from before the cut has left the window (the counts are equal), and one
//! window more settles an episode that was falling below the minimum (`report::incast_stitch`).

use analyzer_common::opcode;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use crate::analyses::keys::Addr;

/// Head events kept over all destinations, at most (past it the head is incomplete and
/// `merge` says so).
pub const MAX_HEAD_EVENTS: usize = 1 << 16;

/// A record the analysis counts: a data packet from `src` (its length, CE mark), or a CNP the
/// destination sent (`src` none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    pub src: Option<Addr>,
    pub len: u32,
    pub ce: bool,
}

impl Event {
    /// The record the analysis counts for this event to `dst` (the CNP's source is `dst`).
    pub fn record(&self, dst: Addr) -> Record {
        let mut r = Record { ts_ns: self.ts_ns, ip_version: dst.1, frame_len: self.len, ..Default::default() };
        match self.src {
            Some(src) => {
                (r.src_ip, r.dst_ip, r.opcode) = (src.0, dst.0, opcode::op::RDMA_WRITE_ONLY);
                r.ecn = if self.ce { 3 } else { 2 };
            }
            None => (r.src_ip, r.opcode) = (dst.0, opcode::CNP),
        }
        r
    }
}

/// The heads: each destination's events before `until_ns` (two windows after the first record).
#[derive(Debug, Default)]
pub struct Edges {
    pub until_ns: Option<u64>,
    pub heads: FxHashMap<Addr, Vec<Event>>,
    events: usize,
    /// Events past [`MAX_HEAD_EVENTS`] were not kept.
    pub over: bool,
}

impl Edges {
    /// Keeps the record's event in its destination's head while within two windows `w` of the
    /// first record.
    pub fn note(&mut self, r: &Record, w: u64) {
        let until = *self.until_ns.get_or_insert(r.ts_ns.saturating_add(2 * w));
        if r.ts_ns >= until {
            return;
        }
        if self.events == MAX_HEAD_EVENTS {
            self.over = true;
            return;
        }
        self.events += 1;
        let (dst, src) = match r.is_cnp() {
            true => ((r.src_ip, r.ip_version), None),
            false => ((r.dst_ip, r.ip_version), Some((r.src_ip, r.ip_version))),
        };
        self.heads.entry(dst).or_default().push(Event { ts_ns: r.ts_ns, src, len: r.frame_len, ce: r.ce() });
    }
}

/// An episode's counts and senders as an edge carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TallyState {
    pub bytes: u64,
    pub ce: u64,
    pub cnp: u64,
    /// In address order.
    pub senders: Vec<Addr>,
    pub capped: bool,
}

/// An open episode as an edge carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenState {
    pub start_ns: u64,
    pub peak_senders: u32,
    pub peak_window_bytes: u64,
    pub tally: TallyState,
    /// The moment the count fell below the minimum, while the episode may still come back.
    pub below_since: Option<u64>,
    /// What arrived since then.
    pub pending: TallyState,
}

/// A destination's state at a moment: the packets in its window (time, source, length) and
/// its open episode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestState {
    pub window: Vec<(u64, Addr, u32)>,
    pub open: Option<OpenState>,
}

impl DestState {
    /// Nothing to carry: the same as a destination never seen.
    pub fn is_empty(&self) -> bool {
        self.window.is_empty() && self.open.is_none()
    }
}
