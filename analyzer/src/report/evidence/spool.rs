//! Offline evidence in one pass over the inputs: while they are read, every frame evidence can
//! be about (RoCE, CNP, PFC, PAUSE) is appended, cut to the snap length, tagged as the XDP
//! program tags its copies ([`EvidenceFrame::fill_head`]), to a spool: an unnamed temporary file in the evidence directory (gone when the run ends, even
//! killed). Which frames each finding needs is known only when the run is over; one
//! sequential read of the spool then cuts every file. The captures are not read twice (they
//! may be standard input).

use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use analyzer_common::PacketSummary;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::EvidenceFrame;

use super::file::EvidenceError;
use super::seen::Seen;
use crate::capture::LinkType;

/// Bytes of a spooled frame before its own: the input (u16), its pcap link type (u16), four
/// zero bytes, then the head of an [`EvidenceFrame`] (what the kernel's copies carry).
const HEAD: usize = 8 + EvidenceFrame::HEAD;

pub struct Spool {
    dir: PathBuf,
    out: Option<BufWriter<std::fs::File>>,
    snaplen: u32,
    /// The frame being spooled (only its head is written; a 16 KiB copy is not zeroed per frame).
    head: Box<EvidenceFrame>,
    pub frames: u64,
    pub bytes: u64,
    /// The first write error (the spool stops there; the report says so).
    pub failed: Option<String>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool").field("dir", &self.dir).field("frames", &self.frames).finish()
    }
}

impl Spool {
    /// A spool in `dir` (which must exist and be writable). `snaplen` is at most
    /// [`analyzer_common::maps::EVIDENCE_MAX_SNAPLEN`], the bytes an [`EvidenceFrame`] holds.
    pub fn create(dir: &Path, snaplen: u32) -> Result<Spool, EvidenceError> {
        let f = tempfile::tempfile_in(dir).map_err(|cause| EvidenceError::Io { path: dir.into(), cause })?;
        Ok(Spool {
            dir: dir.into(),
            out: Some(BufWriter::with_capacity(1 << 20, f)),
            snaplen: snaplen.min(analyzer_common::maps::EVIDENCE_MAX_SNAPLEN as u32),
            head: Box::new(EvidenceFrame::zeroed()),
            frames: 0,
            bytes: 0,
            failed: None,
        })
    }

    /// Appends one frame, tagged from its summary as the XDP program tags its copies (nothing
    /// once a write has failed).
    pub fn push(&mut self, ts_ns: u64, source: u16, link: LinkType, orig_len: u32, s: &PacketSummary, data: &[u8]) {
        let Some(out) = &mut self.out else { return };
        let data = &data[..data.len().min(self.snaplen as usize)];
        let e = &mut *self.head;
        // SAFETY: `e` is a valid EvidenceFrame.
        unsafe { EvidenceFrame::fill_head(e, ts_ns, orig_len, s, &FlowKey::from_summary(s)) };
        e.caplen = data.len() as u16;
        let mut h = [0u8; 8];
        h[0..2].copy_from_slice(&source.to_le_bytes());
        h[2..4].copy_from_slice(&(link.linktype() as u16).to_le_bytes());
        let written = out
            .write_all(&h)
            .and_then(|_| out.write_all(&self.head.as_bytes()[..EvidenceFrame::HEAD]))
            .and_then(|_| out.write_all(data));
        if let Err(e) = written {
            self.failed = Some(format!("the spool in {}: {e}", self.dir.display()));
            self.out = None;
            return;
        }
        self.frames += 1;
        self.bytes += (HEAD + data.len()) as u64;
    }

    /// Reads every spooled frame back, in the order pushed.
    pub fn replay(self, mut each: impl FnMut(&Seen<'_>)) -> Result<(), EvidenceError> {
        let Some(out) = self.out else { return Ok(()) };
        let io = |cause| EvidenceError::Io { path: self.dir.clone(), cause };
        let mut f = out.into_inner().map_err(|e| io(e.into_error()))?;
        f.rewind().map_err(io)?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut h = [0u8; 8];
        let mut e = Box::new(EvidenceFrame::zeroed());
        for _ in 0..self.frames {
            r.read_exact(&mut h).map_err(io)?;
            r.read_exact(&mut e.as_bytes_mut()[..EvidenceFrame::HEAD]).map_err(io)?;
            let len = (e.caplen as usize).min(e.data.len());
            r.read_exact(&mut e.data[..len]).map_err(io)?;
            let source = u16::from_le_bytes([h[0], h[1]]);
            let link = LinkType::from_linktype(u16::from_le_bytes([h[2], h[3]]) as u32).unwrap_or(LinkType::Ethernet);
            each(&Seen::of(&e, e.ts_ns, source, link));
        }
        Ok(())
    }
}
