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
use aya_ebpf::maps::{Array, HashMap, PerCpuArray, RingBuf};
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

/// This CPU's copy under assembly: too big for the stack and, reserved on the ring whole, a
/// 16 KiB slot for a 100-byte ACK; the ring takes only its head and the bytes copied.
#[map]
pub(crate) static EVIDENCE_SCRATCH: PerCpuArray<EvidenceFrame> = PerCpuArray::with_max_entries(1, 0);

/// The frame's first bytes (up to the snap length: whole frames by default) into the evidence
/// ring.
#[inline(never)]
pub(crate) fn evidence_copy(ctx: &XdpContext, s: &PacketSummary, key: &FlowKey, now: u64, wire_len: u32) {
    let snap = EVIDENCE_CTL.get(evidence_ctl::SNAPLEN).copied().unwrap_or(0) as u32;
    let len = if snap < wire_len { snap } else { wire_len };
    let len = if len > EVIDENCE_MAX_SNAPLEN as u32 { EVIDENCE_MAX_SNAPLEN as u32 } else { len };
    let (Some(p), Some(word)) = (EVIDENCE_SCRATCH.get_ptr_mut(0), Word::get()) else { return };
    if len < 1 {
        return;
    }
    // SAFETY: `p` is this CPU's entry, one EvidenceFrame; the head is written field by field,
    // the bytes by the helper, which checks them against the frame; the ring takes the head
    // and the `n` bytes written.
    let sent = unsafe {
        EvidenceFrame::fill_head(p, now, wire_len, s, key);
        // Laundered, so that neither LLVM nor the verifier keeps the range of `len`: the mask
        // alone bounds the length to 1..=EVIDENCE_MAX_SNAPLEN for the helper and the ring.
        let n = (word.launder((len - 1) as u64) & (EVIDENCE_MAX_SNAPLEN as u64 - 1)) as u32 + 1;
        (*p).caplen = n as u16;
        if bpf_xdp_load_bytes(ctx.ctx, 0, (*p).data.as_mut_ptr() as *mut _, n) != 0 {
            return;
        }
        let bytes = core::slice::from_raw_parts(p as *const u8, EvidenceFrame::HEAD + n as usize);
        EVIDENCE.output::<[u8]>(bytes, BPF_RB_NO_WAKEUP as u64)
    };
    match sent {
        Ok(()) => count(counter::EVIDENCE),
        Err(_) => count(counter::EVIDENCE_FULL),
    };
}
