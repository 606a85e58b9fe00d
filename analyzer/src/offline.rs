//! The offline path: capture files → frames → the pipeline (engine and analyses).
//!
//! One input is read straight through. Several inputs are several vantage points: each is
//! read on its own thread and their records are merged in time order (with each input's
//! clock offset applied), so that copies of one frame meet within the match window and every
//! analysis sees the frames in the order they happened.

use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use analyzer_common::PacketSummary;
use analyzer_common::wire::cm;

use crate::capture::input::InputSpec;
use crate::capture::{CaptureError, LinkType, ReadOutcome, Record, Truncation, pcap};
use crate::engine::{DropReason, FrameMeta};
use crate::frames;
use crate::pipeline::Pipeline;
use crate::report::evidence::select::Tag;
use crate::report::evidence::spool::Spool;

/// Records per batch a reader thread hands over.
const BATCH: usize = 512;
/// Batches in flight per input: memory is bounded by inputs × this × BATCH records.
const BATCHES_IN_FLIGHT: usize = 4;

/// Reads every input into one run. A truncated last record ends that input, marks the
/// run partial and is returned; any other error stops the analysis. `progress` gets the
/// input being read and the bytes read so far over all inputs.
pub fn analyze_files(
    run: &mut Pipeline,
    inputs: &[InputSpec],
    progress: impl FnMut(&Path, u64),
) -> Result<Vec<Truncation>, CaptureError> {
    analyze_files_spooled(run, inputs, None, progress)
}

/// The same, spooling the frames evidence can be about (`--evidence`) as they are read.
pub fn analyze_files_spooled(
    run: &mut Pipeline,
    inputs: &[InputSpec],
    mut spool: Option<&mut Spool>,
    mut progress: impl FnMut(&Path, u64),
) -> Result<Vec<Truncation>, CaptureError> {
    let mut truncations = Vec::new();
    let sources: Vec<u16> =
        inputs.iter().map(|i| run.engine.add_source("pcap", &i.path.display().to_string(), &i.label)).collect();
    if inputs.len() == 1 {
        let (input, source) = (&inputs[0], sources[0]);
        let mut summary = PacketSummary::zeroed();
        let outcome = pcap::read_file(
            &input.path,
            |rec| take(run, &mut summary, source, input.clock_offset_ns, rec, spool.as_deref_mut()),
            |bytes| progress(&input.path, bytes),
        )?;
        settle(run, outcome, &mut truncations);
    } else {
        let labels: std::collections::BTreeSet<&str> = inputs.iter().map(|i| i.label.as_str()).collect();
        if labels.len() > 1 {
            run.expect_vantage_points();
        }
        for outcome in merged(run, inputs, &sources, spool, &mut progress)? {
            settle(run, outcome, &mut truncations);
        }
    }
    run.finish();
    run.engine.settle_span();
    Ok(truncations)
}

/// One record into the run (and into the evidence spool when there is one).
fn take(
    run: &mut Pipeline,
    summary: &mut PacketSummary,
    source: u16,
    offset_ns: i64,
    rec: &Record<'_>,
    spool: Option<&mut Spool>,
) {
    frames::decode(rec.link, rec.data, rec.orig_len, summary);
    let ts_ns = rec.ts_ns.saturating_add_signed(offset_ns);
    let admitted = run.observe(FrameMeta { ts_ns, source }, summary);
    if let Some(spool) = spool
        && admitted
        && Tag::wanted(summary.class())
    {
        spool.push(ts_ns, source, rec.link, rec.orig_len, summary, rec.data);
    }
    if cm::is_carrier(summary.opcode, summary.dst_qp)
        && let Some(mad) = frames::bytes_at(rec.link, rec.data, summary.payload_off as usize, cm::BYTES)
    {
        run.observe_cm(&summary.src_ip, &summary.dst_ip, mad);
    }
}

/// What an input's reading left to count: skipped link types, a truncated end.
fn settle(run: &mut Pipeline, outcome: ReadOutcome, truncations: &mut Vec<Truncation>) {
    if outcome.skipped > 0 {
        run.engine.count_drop(DropReason::UnreadLinkType, outcome.skipped);
        run.engine.visibility.skipped_linktypes.extend(&outcome.skipped_linktypes);
    }
    if let Some(t) = outcome.truncated {
        run.engine.partial = true;
        run.engine.count_drop(DropReason::TruncatedRecord, 1);
        truncations.push(t);
    }
}

/// Records of one input, owned: their bytes back to back in `data`.
#[derive(Default)]
struct Batch {
    data: Vec<u8>,
    records: Vec<(u64, u32, LinkType, u64, usize, usize)>,
    /// Bytes of the input read so far.
    read: u64,
}

enum Msg {
    Records(Batch),
    End(Result<ReadOutcome, CaptureError>),
}

/// Reads one input on its thread, in batches; stops handing them over when the merge is gone.
fn reader(input: &InputSpec, tx: SyncSender<Msg>) {
    let mut batch = Batch::default();
    let mut gone = false;
    let read = std::cell::Cell::new(0);
    let result = pcap::read_file(
        &input.path,
        |rec| {
            if gone {
                return;
            }
            let start = batch.data.len();
            batch.data.extend_from_slice(rec.data);
            batch.records.push((rec.ts_ns, rec.orig_len, rec.link, rec.offset, start, batch.data.len()));
            if batch.records.len() == BATCH {
                batch.read = read.get();
                gone = tx.send(Msg::Records(std::mem::take(&mut batch))).is_err();
            }
        },
        |bytes| read.set(bytes),
    );
    if !batch.records.is_empty() && !gone {
        batch.read = read.get();
        let _ = tx.send(Msg::Records(batch));
    }
    let _ = tx.send(Msg::End(result));
}

/// One input's side of the merge: its current batch and what is left of it.
struct Lane {
    rx: Receiver<Msg>,
    batch: Batch,
    next: usize,
    end: Option<Result<ReadOutcome, CaptureError>>,
    read: u64,
}

impl Lane {
    /// The time of its next record (clock offset applied), fetching a batch when needed.
    fn head(&mut self, offset_ns: i64) -> Option<u64> {
        while self.next == self.batch.records.len() && self.end.is_none() {
            match self.rx.recv() {
                Ok(Msg::Records(b)) => {
                    self.read = b.read;
                    (self.batch, self.next) = (b, 0);
                }
                Ok(Msg::End(r)) => self.end = Some(r),
                Err(_) => self.end = Some(Ok(ReadOutcome::default())),
            }
        }
        self.batch.records.get(self.next).map(|r| r.0.saturating_add_signed(offset_ns))
    }

    /// An input that ended with an error stops the analysis (the other readers stop handing
    /// over batches when their lanes are dropped).
    fn fail(&mut self) -> Result<(), CaptureError> {
        match self.end.take() {
            Some(Err(e)) => Err(e),
            end => {
                self.end = end;
                Ok(())
            }
        }
    }
}

/// Reads several inputs at once and feeds their records to the run in time order; returns
/// each input's outcome, or the first error.
fn merged(
    run: &mut Pipeline,
    inputs: &[InputSpec],
    sources: &[u16],
    mut spool: Option<&mut Spool>,
    progress: &mut impl FnMut(&Path, u64),
) -> Result<Vec<ReadOutcome>, CaptureError> {
    std::thread::scope(|scope| {
        let mut lanes: Vec<Lane> = inputs
            .iter()
            .map(|input| {
                let (tx, rx) = sync_channel(BATCHES_IN_FLIGHT);
                scope.spawn(move || reader(input, tx));
                Lane { rx, batch: Batch::default(), next: 0, end: None, read: 0 }
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, lane) in lanes.iter_mut().enumerate() {
            match lane.head(inputs[i].clock_offset_ns) {
                Some(t) => heap.push(std::cmp::Reverse((t, i))),
                None => lane.fail()?,
            }
        }
        let mut summary = PacketSummary::zeroed();
        let mut last_read = vec![0u64; inputs.len()];
        while let Some(std::cmp::Reverse((_, i))) = heap.pop() {
            let lane = &mut lanes[i];
            let (ts_ns, orig_len, link, offset, start, end) = lane.batch.records[lane.next];
            lane.next += 1;
            let rec = Record { ts_ns, orig_len, data: &lane.batch.data[start..end], link, offset };
            take(run, &mut summary, sources[i], inputs[i].clock_offset_ns, &rec, spool.as_deref_mut());
            if last_read[i] != lane.read {
                last_read[i] = lane.read;
                progress(&inputs[i].path, last_read.iter().sum());
            }
            match lane.head(inputs[i].clock_offset_ns) {
                Some(t) => heap.push(std::cmp::Reverse((t, i))),
                None => lane.fail()?,
            }
        }
        // Every lane has ended (its head is None only then), without an error.
        lanes.into_iter().map(|l| l.end.unwrap_or_else(|| Ok(ReadOutcome::default()))).collect()
    })
}
