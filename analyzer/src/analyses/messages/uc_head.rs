//! `--edges` for UC transfers: a flow's first frames in a run, up to its first FIRST. One run
//! over a capture cut in time may have a message being sent at the cut: its MIDDLE and LAST
//! frames after the cut extend and complete it there, where the report after the cut, which
//! never saw its FIRST, counts the LAST partial. From the report's first FIRST on, one run's
//! state is the report's. `merge` replays these frames on the message the report before left
//! open (`kept::Transfer`'s rules).

use analyzer_common::record::Record;

use super::kept::uc_opens;

/// UC frames a flow's head keeps at most before its first FIRST.
pub const UC_HEAD: usize = 64;

/// A UC flow's first frames in a run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UcHead {
    /// `[opcode, time, payload]` of each, in order; its first FIRST is the last.
    pub frames: Vec<[u64; 3]>,
    /// More frames came before its first FIRST than it keeps.
    pub cut: bool,
}

impl UcHead {
    pub fn add(&mut self, r: &Record) {
        // Closed at its first FIRST, or cut.
        if self.cut || self.frames.last().is_some_and(|f| uc_opens((f[0] & 0x1F) as u8)) {
            return;
        }
        if self.frames.len() >= UC_HEAD {
            self.cut = true;
            return;
        }
        self.frames.push([r.opcode as u64, r.ts_ns, r.payload_len as u64]);
    }
}
