//! A RoCE frame's PSN/AETH accounting on its flow's entry ([`analyzer_common::psn::account_with`],
//! the function the host runs offline).

use analyzer_common::PacketSummary;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{FlowEntry, extra_kind};
use analyzer_common::psn::{self, Tally};

use crate::extra::extra_add;
use crate::notes::KernelNotes;

/// The PSN/AETH counts of a flow entry: those a frame can move every time in the entry
/// ([`maps::ENTRY_PSN_COUNTERS`]), those only an anomaly moves in the extra map
/// ([`extra_kind::PSN`]).
pub(crate) struct EntryTally<'a> {
    key: &'a FlowKey,
    entry: *mut FlowEntry,
}

impl Tally for EntryTally<'_> {
    #[inline(always)]
    fn add(&mut self, counter: u8, n: u32) {
        // SAFETY: the flow's map value, valid for this program run (its counters are apart
        // from the sequence state the state machine holds).
        match unsafe { (*self.entry).psn_count(counter) } {
            Some(c) => *c = c.wrapping_add(n),
            None => extra_add(*self.key, extra_kind::PSN, counter, n as u64),
        }
    }
}

/// The frame's PSN/AETH accounting on its flow's entry. Inlined, like every step of a
/// frame's usual path: a BPF-to-BPF call costs its return, which a kernel with return-stack
/// mitigations (AMD's "Safe RET" here) makes dear; as a call of its own it cost 5–12 ns a RoCE
/// frame. The verifier walks ≈ 54 000 instructions more for it.
#[inline(always)]
pub(crate) fn account_psn(key: &FlowKey, entry: *mut FlowEntry, s: &PacketSummary) {
    let mut tally = EntryTally { key, entry };
    // SAFETY: the flow's map value, valid for this program run.
    psn::account_with(unsafe { &mut (*entry).seq }, &mut tally, s, &mut KernelNotes);
}
