//! Offline, the analyses on a thread of their own. The front (the input's merge, `--filter`,
//! the vantage matching and the engine's counters) and the analyses each take about half of
//! the analysing thread's time, and they share nothing but what the front hands over: a
//! record with its flow's index, a pause frame, a CM MAD. So the front queues those, in the
//! order the frames came, in batches to a thread that runs the analyses; the analyses see the
//! same input in the same order as on one thread, and the report is the same.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use analyzer_common::PacketSummary;
use analyzer_common::record::Record;
use analyzer_common::wire::cm;

use super::{Front, Pipeline, Sink};
use crate::analyses::Analyses;
use crate::analyses::flows::Hint;
use crate::analyses::pause;

/// Items per batch: large enough that a hand-over (a wake-up of the other thread, a few µs
/// in a VM) is rare, small enough to stay in the cache between the two (320 KB; 1024 woke
/// the analyses four times as often and cost the reading thread 6 % in wake-ups).
const BATCH: usize = 4096;
/// Batches on their way to the analyses: memory is bounded by twice this (the emptied ones
/// on their way back) + 2 batches.
const IN_FLIGHT: usize = 4;

/// What the front hands the analyses.
enum Item {
    Record(Record, Hint),
    Pause(u64, pause::Frame),
    Cm([u8; 16], [u8; 16], cm::Repr),
}

/// The front's sink: items gathered into batches for the analyses' thread.
pub struct Queue {
    batch: Vec<Item>,
    tx: SyncSender<Vec<Item>>,
    /// Emptied batches back from the analyses, to be filled again.
    spent: Receiver<Vec<Item>>,
}

impl Queue {
    #[inline]
    fn push(&mut self, item: Item) {
        self.batch.push(item);
        if self.batch.len() == BATCH {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        let next = self.spent.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
        // The analyses' thread is gone only when it panicked: the scope's join says so.
        let _ = self.tx.send(std::mem::replace(&mut self.batch, next));
    }
}

impl Sink for Queue {
    #[inline]
    fn record(&mut self, r: &Record, hint: Hint) {
        self.push(Item::Record(*r, hint));
    }

    fn pause(&mut self, ts: u64, s: &PacketSummary) {
        if let Some(f) = pause::Frame::of(s) {
            self.push(Item::Pause(ts, f));
        }
    }

    fn cm(&mut self, src: &[u8; 16], dst: &[u8; 16], m: cm::Repr) {
        self.push(Item::Cm(*src, *dst, m));
    }
}

/// Runs `body` with the front of `run` while its analyses take the front's output on a thread
/// of their own; returns when they have taken all of it.
pub fn aside<R>(run: &mut Pipeline, body: impl FnOnce(&mut Front<'_, Queue>) -> R) -> R {
    let (front, analyses) = run.split();
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        let (spent_tx, spent) = sync_channel(IN_FLIGHT + 2);
        scope.spawn(move || analyse(analyses, rx, spent_tx));
        let mut front = front.into(Queue { batch: Vec::with_capacity(BATCH), tx, spent });
        let out = body(&mut front);
        if !front.sink.batch.is_empty() {
            front.sink.hand_over();
        }
        // The front (and with it the sender) goes here: the analyses end with the last batch.
        out
    })
}

/// The analyses' thread: every batch's items in order, the emptied batch sent back.
fn analyse(a: &mut Analyses, rx: Receiver<Vec<Item>>, spent: SyncSender<Vec<Item>>) {
    for mut batch in rx {
        for item in batch.drain(..) {
            match item {
                Item::Record(r, hint) => a.observe_hinted(&r, hint),
                Item::Pause(ts, f) => a.pause.observe(ts, &f),
                Item::Cm(src, dst, m) => a.rtt.cm(&src, &dst, &m),
            }
        }
        let _ = spent.try_send(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::FrameMeta;
    use analyzer_common::FrameClass;
    use analyzer_common::opcode::ext;

    /// Frames through the queue reach the analyses as they do on one thread: the same RTT
    /// samples (an ACK before its request pairs with nothing: order counts), ECN counts and
    /// pause timers, over more frames than a batch holds, ending with a part batch.
    #[test]
    fn the_analyses_aside_see_what_they_see_inline() {
        let frames = tests_frames(3 * BATCH + 17);
        let mut inline = Pipeline::default();
        for (ts, s) in &frames {
            inline.observe(FrameMeta { ts_ns: *ts, source: 0 }, s);
        }
        let mut queued = Pipeline::default();
        aside(&mut queued, |front| {
            for (ts, s) in &frames {
                front.observe(FrameMeta { ts_ns: *ts, source: 0 }, s);
            }
        });
        let view = |p: &Pipeline| {
            let mut samples = p.analyses.rtt.all_samples();
            samples.sort_unstable();
            let data: u64 = p.analyses.flows.markings().map(|(_, m)| m.data).sum();
            (samples, data, p.analyses.rtt.unpaired_acks, p.analyses.pause.frame_times.clone())
        };
        let (samples, data, _, pauses) = view(&inline);
        assert_eq!(samples.len(), frames.len() / 4, "every request answered");
        assert!(data > 0 && pauses.len() == frames.len() / 4);
        assert_eq!(view(&queued), view(&inline));
        assert_eq!((queued.engine.frames, queued.engine.classes), (inline.engine.frames, inline.engine.classes));
    }

    /// `n` frames: per four, a request with AckReq, its ACK, a data frame and a PFC frame.
    fn tests_frames(n: usize) -> Vec<(u64, PacketSummary)> {
        let roce = |src: u8, dst: u8, qp: u32, opcode: u8, psn: u32| {
            let mut s = PacketSummary::zeroed();
            s.class = FrameClass::Roce as u8;
            (s.roce_version, s.ip_version) = (2, 4);
            s.src_ip[..4].copy_from_slice(&[10, 0, 0, src]);
            s.dst_ip[..4].copy_from_slice(&[10, 0, 0, dst]);
            (s.dst_qp, s.udp_sport, s.opcode, s.psn, s.frame_len) = (qp, 49152, opcode, psn, 1090);
            s
        };
        (0..n)
            .map(|i| {
                let h = 10 + (i / 4 % 200) as u8;
                let (qp, psn, ts) = (0x100 + (i / 4) as u32, (i / 4) as u32, 1000 * i as u64);
                let s = match i % 4 {
                    0 => PacketSummary { ack_req: 1, ..roce(1, h, qp, 0x0A, psn) },
                    1 => PacketSummary { ext: ext::AETH, ..roce(h, 1, qp + 0x1000, 0x11, psn) },
                    2 => roce(1, h, qp, 0x06, psn + 1),
                    _ => {
                        let mut s = PacketSummary::zeroed();
                        s.class = FrameClass::Pfc as u8;
                        (s.src_mac, s.pfc_enable, s.pfc_quanta[3]) = ([2, 0, 0, 0, 0, h], 1 << 3, 100);
                        s
                    }
                };
                (ts, s)
            })
            .collect()
    }
}
