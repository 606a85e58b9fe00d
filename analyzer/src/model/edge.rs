//! `flows[].edge` (offline with `--edges`): what a flow's PSN state machine needs to continue
//! across the end of one capture into the next, so that `merge` of captures cut in time counts
//! a flow's PSN anomalies as one analysis of the whole would.
//!
//! The state machine (`analyzer_common::psn`) starts each capture fresh: the first request of
//! a flow sets the expected PSN and is never out of sequence. Across a cut that first request
//! may skip PSNs, or repeat some, relative to where the previous capture left the flow. So a
//! report carries, per flow, the state it ended in (`end`), the first [`HEAD`] frames whose
//! accounting depended on the state they started from (`head`), and the state after them
//! (`after_head`). `merge` replays the head from the previous report's `end` and from a fresh
//! state with the same function, and adds the difference — when both replays end in the state
//! the report recorded (past the head the two runs then count alike).
//!
//! A request flow's edge carries its RTT samples too ([`EdgeRtt`]): percentiles do not add,
//! samples do; and the requests still waiting for their ACK at the end, with the flow that
//! carries its ACKs. An ACK flow's edge carries its first ACKs ([`EdgeAcks`]): a request waiting
//! at the end of one capture is answered by one of those in the next.

use analyzer_common::psn::PsnSeq;
use serde::{Deserialize, Serialize};

/// Frames of a flow kept as its head. Enough for the state to settle in every case we know
/// (an out-of-sequence first request settles it at once; a run of duplicates takes as long as
/// it lasts), small enough that an edge costs about the size of the flow's other fields.
pub const HEAD: usize = 8;

/// Frames a head holds at most: past [`HEAD`] it goes on while the frames repeat PSNs it
/// reached (a retransmission under way at the cut, which one run counts from another state).
pub const HEAD_MAX: usize = 64;

/// One frame of a head: what the PSN state machine reads of it, as
/// `[opcode, psn, payload_len, reth_dma_len, aeth_syndrome, ext]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadFrame(pub [u32; 6]);

impl HeadFrame {
    /// The kind of its AETH (ACK, RNR NAK, NAK), when its opcode carries one.
    pub fn aeth(&self) -> Option<analyzer_common::wire::ext::AckType> {
        let has = analyzer_common::opcode::headers(self.0[0] as u8) & analyzer_common::opcode::ext::AETH != 0;
        has.then(|| analyzer_common::wire::ext::syndrome_type(self.0[4] as u8))
    }
}

/// A flow's PSN state as JSON: the fields of `analyzer_common::psn::PsnSeq` through serde's
/// remote derive (the kernel's type stays free of serde); a field added there and not here
/// fails to compile.
#[derive(Serialize, Deserialize)]
#[serde(remote = "PsnSeq")]
pub struct SeqJson {
    pub expected: u32,
    pub response_psn: u32,
    pub pmtu: u32,
    pub responder_expected: u32,
    pub read_psn: u32,
    pub read_len: u32,
    pub started: u8,
    pub in_response: u8,
    pub mtus_excluded: u8,
    pub read_pending: u8,
    pub responder_nak: u8,
    #[serde(skip)]
    pub _pad: [u8; 3],
}

/// `flows[].edge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEdge {
    /// The flow's first RoCE frames: [`HEAD`], and those after them that repeat PSNs they
    /// reached (at most [`HEAD_MAX`]).
    pub head: Vec<HeadFrame>,
    /// Their times: a request after a cut fills a gap one run had open there unless an ACK
    /// before it told the gap apart (`report::lb_stitch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head_ns: Vec<u64>,
    /// Whether `head` is every RoCE frame of the flow in this capture.
    pub complete: bool,
    /// The state after `head`.
    #[serde(with = "SeqJson")]
    pub after_head: PsnSeq,
    /// The state at the end of the capture.
    #[serde(with = "SeqJson")]
    pub end: PsnSeq,
    /// When `end` waits for a READ's span (`read_pending`): the MTU its READ RESPONSE showed
    /// by the end of the capture (0: none yet). Without it the cut cannot be stitched.
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub read_note: u32,
    /// PSNs of this flow's requests refused by an RNR NAK and not repeated by the end: a
    /// repeat after the cut is taken as the refused request, not as a duplicate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rnr_psns: Vec<u32>,
    /// `--pmtu` of the run (0: learned per flow), which the replays must use too.
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub default_pmtu: u32,
    /// The flow's RTT samples (a request flow that had any), so that `merge` gives the
    /// percentiles of the flow and of the whole over every part as one run would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<EdgeRtt>,
    /// An ACK flow's first ACKs and the ACKs the run could not pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<EdgeAcks>,
    /// A request flow's PSNs skipped and not told apart by the end, as `[first, count, lost]`
    /// (lost 1: a NAK or a retransmission touched them): an ACK after the cut that covers them
    /// tells one run they were delivered and missed by the capture (`capture.loss`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<[u32; 3]>,
    /// A request flow's late arrivals (load balancing's reorder density) as `[displacement,
    /// arrivals]`, ascending: `merge` of captures cut in time gives each flow's median and
    /// largest displacement over every part, and corrects those a cut changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late: Vec<[u64; 2]>,
    /// The flow's data packets and CNPs as the audit's marking findings count them: `merge` of
    /// captures cut in time adds them and finds what one run finds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marking: Option<EdgeMarking>,
}

/// `flows[].edge.marking`: data packets, those Not-ECT and those in another DSCP than
/// `roce_dscp`, CNPs and those in another DSCP than `cnp_dscp`, and the first other DSCP seen on
/// each (the run's expected DSCPs beside them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeMarking {
    pub data: u64,
    pub data_not_ect: u64,
    pub data_other_dscp: u64,
    pub cnps: u64,
    pub cnp_other_dscp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_data_dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_cnp_dscp: Option<u8>,
    pub roce_dscp: u8,
    pub cnp_dscp: u8,
}

/// ACKs an ACK flow's edge keeps, at most.
pub const ACK_HEAD: usize = 16;

/// AckReq requests a request flow's edge keeps from its start, at most.
pub const REQUEST_HEAD: usize = 16;

/// Waiting requests a request flow's edge lists, at most (an RNIC has far fewer outstanding).
pub const EDGE_WAITING: usize = 1024;

/// `flows[].edge.acks`: an ACK flow's first ACKs (ACK-type AETH) as `[time, psn]`, whether that
/// is every one, and how many of all its ACKs found no request flow (`unpaired`) or several
/// (`ambiguous`) in this capture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeAcks {
    pub head: Vec<[u64; 2]>,
    pub complete: bool,
    pub unpaired: u64,
    pub ambiguous: u64,
}

/// A request flow's RTT samples (ns): every one while the run kept them exactly, else (past
/// 2^20) their 1 % buckets, as `rtt_ns.histogram` holds them, with the smallest and largest;
/// and what pairs requests with ACKs across a cut.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeRtt {
    /// Every sample, in the order they were taken (empty when `buckets` holds them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<u64>,
    /// [bucket index, samples], by index, once the samples were folded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<[u64; 2]>,
    pub min: u64,
    pub max: u64,
    /// Requests with AckReq still waiting for their ACK at the end, as `[psn, time]`, oldest
    /// first (those older than the timeout too: the report counted them timeouts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<[u64; 2]>,
    /// More requests were waiting than [`EDGE_WAITING`], or the flow's queue was full (some
    /// may have been let go): `waiting` is not all of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting_cut: bool,
    /// The flow that carried this flow's ACKs, once paired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_flow: Option<super::FlowRef>,
    /// The flow's first requests with AckReq as `[psn, time]` (at most [`REQUEST_HEAD`]): one
    /// that repeats a request waiting at the cut before keeps that one's time in one run (Karn),
    /// which `merge` replays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<[u64; 2]>,
    /// The flow sent more requests with AckReq than `requests` lists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requests_cut: bool,
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}
