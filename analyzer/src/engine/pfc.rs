//! PFC (802.1Qbb) and 802.3x PAUSE frames per sender.

use std::collections::BTreeMap;

use analyzer_common::{FrameClass, PacketSummary};

use crate::frames::FrameMeta;

/// Counters of one (sender MAC, priority), or of one 802.3x sender: the kernel map's type.
pub use analyzer_common::maps::PfcCounters as PauseCounters;

#[derive(Debug, Default)]
pub struct PfcTable {
    /// PFC frames in total (whatever their class-enable vector).
    pub pfc_frames: u64,
    pub pause_frames: u64,
    /// (sender MAC, priority) → counters.
    pub pfc: BTreeMap<([u8; 6], u8), PauseCounters>,
    /// 802.3x sender MAC → counters.
    pub pause: BTreeMap<[u8; 6], PauseCounters>,
}

impl PfcTable {
    pub fn observe(&mut self, meta: FrameMeta, s: &PacketSummary) {
        match s.class() {
            FrameClass::Pfc => {
                self.pfc_frames += 1;
                for prio in 0..8u8 {
                    if s.pfc_enable & (1 << prio) != 0 {
                        self.pfc.entry((s.src_mac, prio)).or_default().record(meta.ts_ns, s.pfc_quanta[prio as usize]);
                    }
                }
            }
            FrameClass::Pause => {
                self.pause_frames += 1;
                self.pause.entry(s.src_mac).or_default().record(meta.ts_ns, s.pfc_quanta[0]);
            }
            _ => {}
        }
    }
}
