//! Offline with `--edges`: each flow's first RoCE frames as the PSN state machine read them,
//! and its state after them (`crate::model::edge`). Off, no frame pays for it.

use analyzer_common::PacketSummary;
use analyzer_common::psn::{PSN_HALF, PsnSeq, psn_diff, psn_later};

use crate::model::edge::{FlowEdge, HEAD, HEAD_MAX, HeadFrame};

/// One flow's head.
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub frames: Vec<HeadFrame>,
    /// Each frame's time.
    pub times: Vec<u64>,
    /// The state after the last frame of `frames`, once it holds [`HEAD`] or more.
    pub after: Option<PsnSeq>,
    /// A frame came after the head.
    pub more: bool,
}

impl Head {
    /// Whether a frame past the first [`HEAD`] with `psn` still belongs to the head, within
    /// [`HEAD_MAX`] frames: one run, which started the flow from another state, may still count
    /// it otherwise. It repeats a PSN the head reached (a retransmission that began in the head
    /// goes on), or the responder still waits for a request it NAKed (an episode the head
    /// opened, which one run may have opened at another PSN or before the cut).
    fn unsettled(&self, psn: u32) -> bool {
        let mut psns = self.frames.iter().map(|f| f.0[1]);
        let Some(first) = psns.next() else { return false };
        // The latest PSN reached, in 24-bit serial order.
        let reached = psns.fold(first, psn_later);
        let repeats = !(1..PSN_HALF).contains(&psn_diff(reached, psn));
        let nak = self.after.is_some_and(|a| a.responder_nak != 0);
        self.frames.len() < HEAD_MAX && (repeats || nak)
    }
}

/// The heads of all flows, by the flow's index in the engine's table.
#[derive(Debug, Default)]
pub struct Heads {
    heads: Vec<Head>,
}

impl Heads {
    /// A RoCE frame of flow `i` at `ts`, whose PSN state is `seq` after it.
    pub fn observe(&mut self, i: usize, ts: u64, s: &PacketSummary, seq: &PsnSeq) {
        if self.heads.len() <= i {
            self.heads.resize_with(i + 1, Head::default);
        }
        let h = &mut self.heads[i];
        if h.more || (h.frames.len() >= HEAD && !h.unsettled(s.psn)) {
            h.more = true;
            return;
        }
        h.frames.push(frame_of(s));
        h.times.push(ts);
        if h.frames.len() >= HEAD {
            h.after = Some(*seq);
        }
    }

    pub fn get(&self, i: usize) -> Option<&Head> {
        self.heads.get(i)
    }
}

/// A flow's edge from its head (`None`: it had no RoCE frame) and its state at the end; the
/// notes and `--pmtu` are the caller's to add.
pub fn edge(head: Option<&Head>, end: PsnSeq) -> FlowEdge {
    FlowEdge {
        head: head.map(|h| h.frames.clone()).unwrap_or_default(),
        head_ns: head.map(|h| h.times.clone()).unwrap_or_default(),
        late: Vec::new(),
        complete: !head.is_some_and(|h| h.more),
        after_head: head.and_then(|h| h.after).unwrap_or(end),
        end,
        read_note: 0,
        rnr_psns: Vec::new(),
        default_pmtu: 0,
        rtt: None,
        acks: None,
        gaps: Vec::new(),
        marking: None,
    }
}

/// What [`analyzer_common::psn::account`] reads of a frame (its addresses are the flow's).
pub fn frame_of(s: &PacketSummary) -> HeadFrame {
    HeadFrame([s.opcode as u32, s.psn, s.payload_len, s.reth_dma_len, s.aeth_syndrome as u32, s.ext as u32])
}

/// The frame a [`HeadFrame`] was taken from, as the PSN state machine sees it, between `src`
/// and `dst` (the flow's addresses).
pub fn summary_of(f: &HeadFrame, src: [u8; 16], dst: [u8; 16]) -> PacketSummary {
    let [opcode, psn, payload_len, dma_len, syndrome, ext] = f.0;
    let mut s = PacketSummary::zeroed();
    s.opcode = opcode as u8;
    s.psn = psn;
    s.payload_len = payload_len;
    s.reth_dma_len = dma_len;
    s.aeth_syndrome = syndrome as u8;
    s.ext = ext as u16;
    s.src_ip = src;
    s.dst_ip = dst;
    s
}
