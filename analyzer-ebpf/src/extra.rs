//! The extra map: per-flow counts the flow entry has no room for (rare opcodes, DSCPs, PCPs,
//! anomalies, ECN restated by mirrored copies).

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{DEFAULT_MAX_EXTRA, ExtraKey, counter, extra_kind};
use aya_ebpf::bindings::BPF_F_NO_PREALLOC;
use aya_ebpf::macros::map;
use aya_ebpf::maps::PerCpuHashMap;

use crate::counters::count;

#[map]
pub(crate) static FLOW_EXTRA: PerCpuHashMap<ExtraKey, u64> =
    PerCpuHashMap::with_max_entries(DEFAULT_MAX_EXTRA, BPF_F_NO_PREALLOC);

/// Moves one of the flow's ECN counts from `from` to `to`: a count in the extra map (rare:
/// copies that differ in ECN), which the host applies to the flow.
#[inline(always)]
pub(crate) fn restate_ecn(key: &FlowKey, from: u8, to: u8) {
    if from != to {
        extra(*key, extra_kind::ECN_MOVED, ((from & 3) << 2) | (to & 3));
    }
}

/// Counts a value outside the flow entry's opcodes, DSCP or PCP (rare).
#[inline(always)]
pub(crate) fn extra(flow: FlowKey, kind: u8, value: u8) {
    extra_add(flow, kind, value, 1);
}

/// Adds `n` to a count of the extra map (rare values and anomalies).
#[inline(never)]
pub(crate) fn extra_add(flow: FlowKey, kind: u8, value: u8, n: u64) {
    let key = ExtraKey { flow, kind, value, _pad: [0; 6] };
    match FLOW_EXTRA.get_ptr_mut(&key) {
        // SAFETY: this CPU's value.
        Some(v) => unsafe { *v += n },
        None => {
            if FLOW_EXTRA.insert(&key, &n, 0).is_err() {
                count(counter::EXTRA_MAP_FULL);
            }
        }
    }
}
