//! PFC (802.1Qbb) and 802.3x PAUSE frames per sender.

use std::collections::BTreeMap;

use analyzer_common::{FrameClass, PacketSummary};

use super::FrameMeta;

/// Counters of one (sender MAC, priority) — or, for 802.3x, one sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseCounters {
    /// Frames that carried a quanta for this priority (class-enable bit set).
    pub frames: u64,
    /// Quanta > 0: pause.
    pub xoff: u64,
    /// Quanta = 0: resume.
    pub xon: u64,
    /// Sum of quanta (512 bit times each).
    pub quanta: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl PauseCounters {
    fn add(&mut self, ts: u64, quanta: u16) {
        if self.frames == 0 {
            self.first_ns = ts;
        }
        self.first_ns = self.first_ns.min(ts);
        self.last_ns = self.last_ns.max(ts);
        self.frames += 1;
        if quanta > 0 {
            self.xoff += 1;
        } else {
            self.xon += 1;
        }
        self.quanta += quanta as u64;
    }
}

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
                        self.pfc.entry((s.src_mac, prio)).or_default().add(meta.ts_ns, s.pfc_quanta[prio as usize]);
                    }
                }
            }
            FrameClass::Pause => {
                self.pause_frames += 1;
                self.pause.entry(s.src_mac).or_default().add(meta.ts_ns, s.pfc_quanta[0]);
            }
            _ => {}
        }
    }
}
