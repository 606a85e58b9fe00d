//! The offline path: capture files → frames → the pipeline (engine and analyses).
//!
//! The analyses take the frames on a thread of their own ([`crate::pipeline::queue`]), the
//! rest of the run on the caller's: they and the reading, classifying and counting each
//! take about half of an offline run, and share nothing but the records handed over. One
//! input is read, classified and counted on the caller's thread. Several inputs are several
//! vantage points: each is read and its frames classified on a thread of its own, in
//! batches, and their frames are merged in time order on the caller's thread (with each
//! input's clock offset applied), so that copies of one frame meet within the match window
//! and every analysis sees the frames in the order they happened. [`Threads::One`] runs one
//! input's whole run on the caller's thread: one core, for machines where the run must not
//! take a second.

use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use analyzer_common::PacketSummary;
use analyzer_common::wire::cm;

use crate::capture::input::InputSpec;
use crate::capture::{CaptureError, LinkType, ReadOutcome, Record, Truncation, pcap};
use crate::engine::DropReason;
use crate::frames;
use crate::frames::FrameMeta;
use crate::pipeline::{Front, Pipeline, Sink};
use crate::report::evidence::select::Tag;
use crate::report::evidence::spool::Spool;

/// Frames per batch a reader thread hands over.
const BATCH: usize = 2048;
/// Batches in flight per input: memory is bounded by inputs × (twice this, with the emptied
/// batches on their way back, + 2) × BATCH frames of 248 bytes (≈ 4 MB an input). Fewer,
/// smaller batches cost a wake-up of the reader more often (512: ≈ 10 % more CPU time).
const BATCHES_IN_FLIGHT: usize = 3;

/// Which threads an offline run takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// The analyses on a thread of their own (the default).
    #[default]
    Split,
    /// One input read, counted and analysed on the caller's thread (`--one-thread`). Several
    /// inputs have a reader each anyway.
    One,
}

/// Reads every input into one run. A truncated last record ends that input, marks the
/// run partial and is returned; any other error stops the analysis. `progress` gets the
/// input being read and the bytes read so far over all inputs.
pub fn analyze_files(
    run: &mut Pipeline,
    inputs: &[InputSpec],
    progress: impl FnMut(&Path, u64),
) -> Result<Vec<Truncation>, CaptureError> {
    analyze_files_spooled(run, inputs, Threads::default(), None, progress)
}

/// The same, spooling the frames evidence can be about (`--evidence`) as they are read.
pub fn analyze_files_spooled(
    run: &mut Pipeline,
    inputs: &[InputSpec],
    threads: Threads,
    spool: Option<&mut Spool>,
    mut progress: impl FnMut(&Path, u64),
) -> Result<Vec<Truncation>, CaptureError> {
    let mut truncations = Vec::new();
    let sources: Vec<u16> =
        inputs.iter().map(|i| run.engine.add_source("pcap", &i.path.display().to_string(), &i.label)).collect();
    let labels: std::collections::BTreeSet<&str> = inputs.iter().map(|i| i.label.as_str()).collect();
    if labels.len() > 1 {
        run.expect_vantage_points();
    }
    if let ([input], [source]) = (inputs, &sources[..]) {
        let outcome = match threads {
            Threads::One => read_one(&mut run.front(), input, *source, spool, &mut progress),
            Threads::Split => {
                crate::pipeline::queue::aside(run, |front| read_one(front, input, *source, spool, &mut progress))
            }
        }?;
        settle(run, outcome, &mut truncations);
    } else {
        let outcomes = crate::pipeline::queue::aside(run, |front| {
            let outcomes = merged(front, inputs, &sources, spool, &mut progress)?;
            front.finish();
            Ok::<_, CaptureError>(outcomes)
        })?;
        for outcome in outcomes {
            settle(run, outcome, &mut truncations);
        }
    }
    run.engine.settle_span();
    Ok(truncations)
}

/// One input read, classified and counted on this thread.
fn read_one(
    front: &mut Front<'_, impl Sink>,
    input: &InputSpec,
    source: u16,
    mut spool: Option<&mut Spool>,
    progress: &mut impl FnMut(&Path, u64),
) -> Result<ReadOutcome, CaptureError> {
    let spooling = spool.is_some();
    let mut f = Decoded::empty();
    let outcome = pcap::read_file(
        &input.path,
        |rec| {
            let keep = f.decode(rec, input.clock_offset_ns, spooling, |_| (0, rec.data.len() as u32));
            take(front, &f, source, || keep.then_some(rec.data), spool.as_deref_mut());
        },
        |bytes| progress(&input.path, bytes),
    )?;
    front.finish();
    Ok(outcome)
}

/// One classified frame into the run (and into the evidence spool when there is one); `data`
/// gives its bytes when they were kept ([`keeps_bytes`]). Asked for only when needed: most
/// frames' bytes stay behind, and reading whether they were kept costs a cache line the
/// reader thread wrote (a tenth of the run when it was read for every frame).
fn take<'a>(
    run: &mut Front<'_, impl Sink>,
    f: &Decoded,
    source: u16,
    data: impl Fn() -> Option<&'a [u8]>,
    spool: Option<&mut Spool>,
) {
    let summary = &f.summary;
    let admitted = run.observe(FrameMeta { ts_ns: f.ts_ns, source }, summary);
    if let Some(spool) = spool
        && admitted
        && Tag::wanted(summary.class())
        && let Some(data) = data()
    {
        spool.push(f.ts_ns, source, f.link, f.orig_len, summary, data);
    }
    if cm::is_carrier(summary.opcode, summary.dst_qp)
        && let Some(mad) = data().and_then(|d| frames::bytes_at(f.link, d, summary.payload_off as usize, cm::BYTES))
    {
        run.observe_cm(&summary.src_ip, &summary.dst_ip, mad);
    }
}

/// Whether the run needs a frame's bytes besides its summary: a CM MAD's (QP pairing), and with
/// `--evidence` those of every frame evidence can be about. The others' bytes stay behind.
fn keeps_bytes(s: &PacketSummary, spooling: bool) -> bool {
    cm::is_carrier(s.opcode, s.dst_qp) || (spooling && Tag::wanted(s.class()))
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

/// A frame as its reader classified it: its time with the input's clock offset applied.
struct Decoded {
    ts_ns: u64,
    orig_len: u32,
    link: LinkType,
    summary: PacketSummary,
    /// Its bytes in the batch's `data`, when kept.
    bytes: Option<(u32, u32)>,
}

impl Decoded {
    fn empty() -> Self {
        Decoded { ts_ns: 0, orig_len: 0, link: LinkType::Ethernet, summary: PacketSummary::zeroed(), bytes: None }
    }

    /// Classifies `rec` in place; when the run needs its bytes, `keep` puts them where they
    /// stay (their range is `bytes`). Whether they are kept.
    fn decode(
        &mut self,
        rec: &Record<'_>,
        offset_ns: i64,
        spooling: bool,
        keep: impl FnOnce(&[u8]) -> (u32, u32),
    ) -> bool {
        frames::decode(rec.link, rec.data, rec.orig_len, &mut self.summary);
        self.bytes = keeps_bytes(&self.summary, spooling).then(|| keep(rec.data));
        self.ts_ns = rec.ts_ns.saturating_add_signed(offset_ns);
        (self.orig_len, self.link) = (rec.orig_len, rec.link);
        self.bytes.is_some()
    }
}

/// Frames of one input, and the bytes of those whose bytes are kept, back to back. Its
/// `BATCH` frames are allocated once and classified in place (a summary is 216 bytes: built
/// elsewhere and copied in, it cost a tenth of the reader's time); `len` of them are taken.
struct Batch {
    frames: Box<[Decoded]>,
    len: usize,
    data: Vec<u8>,
    /// Bytes of the input read so far.
    read: u64,
}

impl Batch {
    fn new() -> Self {
        Batch { frames: (0..BATCH).map(|_| Decoded::empty()).collect(), len: 0, data: Vec::new(), read: 0 }
    }

    fn taken(&self) -> &[Decoded] {
        &self.frames[..self.len]
    }

    fn bytes(&self, f: &Decoded) -> Option<&[u8]> {
        f.bytes.and_then(|(start, end)| self.data.get(start as usize..end as usize))
    }
}

enum Msg {
    Frames(Batch),
    End(Result<ReadOutcome, CaptureError>),
}

/// Reads and classifies one input on its thread, in batches (taking back the emptied ones from
/// `spent`, so that a run allocates a few); stops handing them over when the merge is gone.
fn reader(input: &InputSpec, spooling: bool, tx: SyncSender<Msg>, spent: Receiver<Batch>) {
    let mut batch = Batch::new();
    let mut gone = false;
    let read = std::cell::Cell::new(0);
    let result = pcap::read_file(
        &input.path,
        |rec| {
            if gone {
                return;
            }
            let data = &mut batch.data;
            batch.frames[batch.len].decode(rec, input.clock_offset_ns, spooling, |bytes| {
                let start = data.len();
                data.extend_from_slice(bytes);
                (start as u32, data.len() as u32)
            });
            batch.len += 1;
            if batch.len == BATCH {
                batch.read = read.get();
                let next = spent.try_recv().unwrap_or_else(|_| Batch::new());
                gone = tx.send(Msg::Frames(std::mem::replace(&mut batch, next))).is_err();
            }
        },
        |bytes| read.set(bytes),
    );
    if batch.len > 0 && !gone {
        batch.read = read.get();
        let _ = tx.send(Msg::Frames(batch));
    }
    let _ = tx.send(Msg::End(result));
}

/// One input's side of the merge: its current batch and what is left of it.
struct Lane {
    rx: Receiver<Msg>,
    /// Emptied batches back to the reader.
    spent: SyncSender<Batch>,
    /// The batch being taken (none before the first arrives).
    batch: Option<Batch>,
    next: usize,
    end: Option<Result<ReadOutcome, CaptureError>>,
    read: u64,
}

impl Lane {
    /// The frames of its current batch.
    fn frames(&self) -> &[Decoded] {
        self.batch.as_ref().map_or(&[], Batch::taken)
    }

    /// The time of its next frame, fetching a batch when needed.
    fn head(&mut self) -> Option<u64> {
        while self.next == self.frames().len() && self.end.is_none() {
            match self.rx.recv() {
                Ok(Msg::Frames(b)) => {
                    self.read = b.read;
                    self.next = 0;
                    if let Some(mut done) = self.batch.replace(b) {
                        done.len = 0;
                        done.data.clear();
                        // The reader allocates another when this one is not taken back in time.
                        let _ = self.spent.try_send(done);
                    }
                }
                Ok(Msg::End(r)) => self.end = Some(r),
                Err(_) => self.end = Some(Ok(ReadOutcome::default())),
            }
        }
        self.frames().get(self.next).map(|f| f.ts_ns)
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

/// Reads the inputs at once and feeds their frames to the run in time order (one input: in
/// its order); returns each input's outcome, or the first error.
fn merged(
    run: &mut Front<'_, impl Sink>,
    inputs: &[InputSpec],
    sources: &[u16],
    mut spool: Option<&mut Spool>,
    progress: &mut impl FnMut(&Path, u64),
) -> Result<Vec<ReadOutcome>, CaptureError> {
    let spooling = spool.is_some();
    std::thread::scope(|scope| {
        let mut lanes: Vec<Lane> = inputs
            .iter()
            .map(|input| {
                let (tx, rx) = sync_channel(BATCHES_IN_FLIGHT);
                let (spent, spent_rx) = sync_channel(BATCHES_IN_FLIGHT);
                scope.spawn(move || reader(input, spooling, tx, spent_rx));
                Lane { rx, spent, batch: None, next: 0, end: None, read: 0 }
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, lane) in lanes.iter_mut().enumerate() {
            match lane.head() {
                Some(t) => heap.push(std::cmp::Reverse((t, i))),
                None => lane.fail()?,
            }
        }
        let mut last_read = vec![0u64; inputs.len()];
        while let Some(std::cmp::Reverse((_, i))) = heap.pop() {
            let lane = &mut lanes[i];
            // Take the lane's frames while they are the earliest: all of them with one input.
            let batch = lane.batch.as_ref().expect("a lane with a head has a batch");
            loop {
                let f = &batch.taken()[lane.next];
                take(run, f, sources[i], || batch.bytes(f), spool.as_deref_mut());
                lane.next += 1;
                if lane.next == batch.len {
                    break;
                }
                let next = batch.taken()[lane.next].ts_ns;
                if heap.peek().is_some_and(|std::cmp::Reverse((t, j))| (*t, *j) < (next, i)) {
                    break;
                }
            }
            if last_read[i] != lane.read {
                last_read[i] = lane.read;
                progress(&inputs[i].path, last_read.iter().sum());
            }
            match lane.head() {
                Some(t) => heap.push(std::cmp::Reverse((t, i))),
                None => lane.fail()?,
            }
        }
        // Every lane has ended (its head is None only then), without an error.
        lanes.into_iter().map(|l| l.end.unwrap_or_else(|| Ok(ReadOutcome::default()))).collect()
    })
}

/// Reading standard input from a pipe (`tcpdump -w - | roce-analyzer -r -`), a Ctrl-C reaches
/// both ends: the writer stops and closes the pipe, and this run should then report what it
/// read, not die with it. So the first SIGINT only says so (the input's end ends the run) and
/// the second stops it without a report, as usual.
pub fn finish_on_first_interrupt() {
    extern "C" fn first(_: libc::c_int) {
        const SAID: &[u8] =
            b"roce-analyzer: interrupted: reading standard input to its end, then reporting (Ctrl-C again to stop without a report)\n";
        // SAFETY: write(2) and signal(2) are async-signal-safe; SAID outlives the call.
        unsafe {
            libc::write(2, SAID.as_ptr().cast(), SAID.len());
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
    }
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe { libc::signal(libc::SIGINT, first as *const () as libc::sighandler_t) };
}
