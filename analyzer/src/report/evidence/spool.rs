//! Offline evidence in one pass over the inputs: while they are read, every frame evidence can
//! be about (RoCE, CNP, PFC, PAUSE) is appended, cut to the snap length, with its [`Tag`], to a
//! spool: an unnamed temporary file in the evidence directory (gone when the run ends, even
//! killed). Which frames each finding needs is known only when the run is over; one
//! sequential read of the spool then cuts every file. The captures are not read twice (they
//! may be standard input).

use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use analyzer_common::FrameClass;
use analyzer_common::flow::FlowKey;

use super::Seen;
use super::file::EvidenceError;
use super::select::Tag;
use crate::capture::LinkType;

/// Bytes of a spooled frame's fixed part: ts, orig_len, caplen, source, link, class, aeth,
/// priorities, src_mac, flow key.
const HEAD: usize = 8 + 4 + 4 + 2 + 1 + 1 + 1 + 2 + 6 + 40 + 1;

pub struct Spool {
    dir: PathBuf,
    out: Option<BufWriter<std::fs::File>>,
    snaplen: u32,
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

fn link_code(l: LinkType) -> u8 {
    match l {
        LinkType::Ethernet => 0,
        LinkType::LinuxSll => 1,
        LinkType::LinuxSll2 => 2,
        LinkType::RawIp => 3,
        LinkType::Ipv4 => 4,
        LinkType::Ipv6 => 5,
    }
}

fn link_of(c: u8) -> Option<LinkType> {
    Some(match c {
        0 => LinkType::Ethernet,
        1 => LinkType::LinuxSll,
        2 => LinkType::LinuxSll2,
        3 => LinkType::RawIp,
        4 => LinkType::Ipv4,
        5 => LinkType::Ipv6,
        _ => return None,
    })
}

impl Spool {
    /// A spool in `dir` (which must exist and be writable).
    pub fn create(dir: &Path, snaplen: u32) -> Result<Spool, EvidenceError> {
        let f = tempfile::tempfile_in(dir).map_err(|source| EvidenceError::Io { path: dir.into(), source })?;
        Ok(Spool {
            dir: dir.into(),
            out: Some(BufWriter::with_capacity(1 << 20, f)),
            snaplen,
            frames: 0,
            bytes: 0,
            failed: None,
        })
    }

    /// Appends one frame (nothing once a write has failed).
    pub fn push(&mut self, ts_ns: u64, source: u16, link: LinkType, orig_len: u32, tag: &Tag, data: &[u8]) {
        let Some(out) = &mut self.out else { return };
        let data = &data[..data.len().min(self.snaplen as usize)];
        let mut h = [0u8; HEAD];
        h[0..8].copy_from_slice(&ts_ns.to_le_bytes());
        h[8..12].copy_from_slice(&orig_len.to_le_bytes());
        h[12..16].copy_from_slice(&(data.len() as u32).to_le_bytes());
        h[16..18].copy_from_slice(&source.to_le_bytes());
        h[18] = link_code(link);
        h[19] = tag.class as u8;
        h[20] = tag.aeth as u8;
        h[21..23].copy_from_slice(&tag.priorities.to_le_bytes());
        h[23..29].copy_from_slice(&tag.src_mac);
        let k = &tag.flow;
        h[29..45].copy_from_slice(&k.src);
        h[45..61].copy_from_slice(&k.dst);
        h[61..65].copy_from_slice(&k.dst_qp.to_le_bytes());
        h[65..67].copy_from_slice(&k.udp_sport.to_le_bytes());
        h[67] = k.ip_version;
        h[68] = 0;
        if let Err(e) = out.write_all(&h).and_then(|_| out.write_all(data)) {
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
        let io = |source| EvidenceError::Io { path: self.dir.clone(), source };
        let mut f = out.into_inner().map_err(|e| io(e.into_error()))?;
        f.rewind().map_err(io)?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut h = [0u8; HEAD];
        let mut data = vec![0u8; self.snaplen as usize];
        for _ in 0..self.frames {
            r.read_exact(&mut h).map_err(io)?;
            let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
            let len = u32_at(12) as usize;
            r.read_exact(&mut data[..len]).map_err(io)?;
            let mut flow = FlowKey {
                src: [0; 16],
                dst: [0; 16],
                dst_qp: u32_at(61),
                udp_sport: u16::from_le_bytes([h[65], h[66]]),
                ip_version: h[67],
                _pad: 0,
            };
            flow.src.copy_from_slice(&h[29..45]);
            flow.dst.copy_from_slice(&h[45..61]);
            let mut src_mac = [0u8; 6];
            src_mac.copy_from_slice(&h[23..29]);
            let tag = Tag {
                class: FrameClass::from_u8(h[19]).unwrap_or(FrameClass::NonRoce),
                flow,
                aeth: h[20] != 0,
                src_mac,
                priorities: u16::from_le_bytes([h[21], h[22]]),
            };
            each(&Seen {
                ts_ns: u64::from_le_bytes(h[0..8].try_into().expect("8 bytes")),
                orig_len: u32_at(8),
                source: u16::from_le_bytes([h[16], h[17]]),
                link: link_of(h[18]).unwrap_or(LinkType::Ethernet),
                tag,
                data: &data[..len],
            });
        }
        Ok(())
    }
}
