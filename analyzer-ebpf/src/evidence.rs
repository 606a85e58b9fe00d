//! Copies of the frames the agent asked for (`--evidence`): frames of named flows until their
//! deadline, and PFC/PAUSE frames.

use analyzer_common::PacketSummary;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{
    DEFAULT_EVIDENCE_BYTES, DEFAULT_MAX_EVIDENCE_FLOWS, EVIDENCE_MAX_SNAPLEN, EvidenceFrame, counter, evidence_ctl,
};
use aya_ebpf::bindings::BPF_RB_NO_WAKEUP;
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::helpers::generated::bpf_xdp_load_bytes;
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, HashMap, RingBuf};
use aya_ebpf::programs::XdpContext;

use crate::counters::count;
use crate::scratch::Word;

/// Whether `--evidence` is given (set by the loader; the verifier prunes the copies when not).
#[unsafe(no_mangle)]
pub(crate) static EVIDENCE_ON: u8 = 0;

/// Flows whose frames the agent wants copied, each until its deadline (monotonic ns).
#[map]
pub(crate) static EVIDENCE_FLOWS: HashMap<FlowKey, u64> = HashMap::with_max_entries(DEFAULT_MAX_EVIDENCE_FLOWS, 0);

/// The copy controls ([`evidence_ctl`]).
#[map]
pub(crate) static EVIDENCE_CTL: Array<u64> = Array::with_max_entries(evidence_ctl::COUNT, 0);

/// Copied frames for the agent's evidence files.
#[map]
pub(crate) static EVIDENCE: RingBuf = RingBuf::with_byte_size(DEFAULT_EVIDENCE_BYTES, 0);

/// A RoCE frame of a flow the agent asked for (a finding named it): copied until the flow's
/// deadline. While no flow is asked for (or every deadline has passed), one array read and a
/// compare against the clock the flow accounting read already; the precise clock for a frame
/// copied.
#[inline(always)]
pub(crate) fn evidence_flow(ctx: &XdpContext, key: &FlowKey, s: &PacketSummary, now: u64) {
    let Some(until) = EVIDENCE_CTL.get(evidence_ctl::FLOWS_UNTIL) else { return };
    if now > *until {
        return;
    }
    // SAFETY: the value is read once; the agent may update it concurrently (a u64 write).
    if unsafe { EVIDENCE_FLOWS.get(key) }.is_some_and(|d| now <= *d) {
        // SAFETY: helper without arguments.
        // The frame's whole length (the classifier's, from `bpf_xdp_get_buff_len`).
        evidence_copy(ctx, s, key, unsafe { bpf_ktime_get_ns() }, s.frame_len);
    }
}

/// The frame's first bytes (up to the snap length) into the evidence ring.
#[inline(never)]
pub(crate) fn evidence_copy(ctx: &XdpContext, s: &PacketSummary, key: &FlowKey, now: u64, wire_len: u32) {
    let snap = EVIDENCE_CTL.get(evidence_ctl::SNAPLEN).copied().unwrap_or(0) as u32;
    let len = if snap < wire_len { snap } else { wire_len };
    let len = if len > EVIDENCE_MAX_SNAPLEN as u32 { EVIDENCE_MAX_SNAPLEN as u32 } else { len };
    let Some(mut e) = EVIDENCE.reserve::<EvidenceFrame>(0) else {
        count(counter::EVIDENCE_FULL);
        return;
    };
    let p = e.as_mut_ptr();
    // SAFETY: the reservation is one EvidenceFrame; every field but the data beyond `caplen`
    // is written before submit; the bytes by the helper, which checks them against the frame.
    let loaded = unsafe {
        EvidenceFrame::fill_head(p, now, wire_len, s, key);
        match Word::get() {
            Some(word) if len >= 1 => {
                // Laundered, so that neither LLVM nor the verifier keeps the range of `len`:
                // the mask alone bounds the length to 1..=256 for the helper.
                let n = (word.launder((len - 1) as u64) & (EVIDENCE_MAX_SNAPLEN as u64 - 1)) as u32 + 1;
                (*p).caplen = n as u16;
                bpf_xdp_load_bytes(ctx.ctx, 0, (*p).data.as_mut_ptr() as *mut _, n)
            }
            _ => {
                (*p).caplen = 0;
                0
            }
        }
    };
    if loaded == 0 {
        e.submit(BPF_RB_NO_WAKEUP as u64);
        count(counter::EVIDENCE);
    } else {
        e.discard(0);
    }
}
