//! One evidence file: a pcapng whose section header says which finding it shows, with an
//! interface block per vantage point (input or live interface) its frames were seen at.
//! Blocks are kept in a small buffer and appended to the file now and then, so that thousands
//! of findings need no open file each.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption, InterfaceTsResolution,
};
use pcap_file::pcapng::blocks::opt_common::CommonOption;
use pcap_file::pcapng::blocks::section_header::{SectionHeaderBlock, SectionHeaderOption};

use crate::capture::LinkType;
use crate::report::out_dir::OutDir;

/// Bytes buffered per file before they are appended to it.
const FLUSH_AT: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// The OS error is said in the message, not chained as a source: `{:#}` would say it twice.
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("{path} is a file, not a directory: --evidence names a directory for the pcapng files")]
    NotADirectory { path: PathBuf },
    #[error("{path}: encoding a pcapng block: {detail}")]
    Encode { path: PathBuf, detail: String },
}

/// A vantage point as an interface block names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vantage {
    pub name: String,
    pub description: String,
}

/// A pcapng being written.
pub struct File {
    pub path: PathBuf,
    dir: Arc<OutDir>,
    name: String,
    writer: PcapNgWriter<Vec<u8>>,
    /// (source, link type) of each interface block written, by its index.
    interfaces: Vec<(u16, LinkType)>,
    snaplen: u32,
    pub frames: u64,
    started: bool,
    /// Bytes in the file, whole blocks.
    written: u64,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("path", &self.path).field("frames", &self.frames).finish()
    }
}

impl File {
    /// A file `name` in `dir` (created at the first flush; never one that exists, nor through
    /// a link planted under its name) whose section comment is `comment`.
    pub fn new(dir: Arc<OutDir>, name: &str, comment: &str, snaplen: u32) -> Result<File, EvidenceError> {
        let path = dir.join(name);
        let path = path.as_path();
        let shb = SectionHeaderBlock {
            endianness: pcap_file::Endianness::Little,
            options: vec![
                SectionHeaderOption::UserApplication(Cow::Owned(format!(
                    "roce-analyzer {}",
                    env!("CARGO_PKG_VERSION")
                ))),
                SectionHeaderOption::Common(CommonOption::Comment(Cow::Owned(comment.to_string()))),
            ],
            ..Default::default()
        };
        let writer = PcapNgWriter::with_section_header(Vec::with_capacity(1024), shb).map_err(|e| encode(path, e))?;
        Ok(File {
            path: path.to_path_buf(),
            dir,
            name: name.to_string(),
            writer,
            interfaces: Vec::new(),
            snaplen,
            frames: 0,
            started: false,
            written: 0,
        })
    }

    /// One frame (its first `snaplen` bytes) seen at `source` (named by `vantage`).
    pub fn write(
        &mut self,
        ts_ns: u64,
        source: u16,
        link: LinkType,
        orig_len: u32,
        data: &[u8],
        vantage: impl FnOnce() -> Vantage,
    ) -> Result<(), EvidenceError> {
        let id = match self.interfaces.iter().position(|i| *i == (source, link)) {
            Some(i) => i,
            None => {
                let v = vantage();
                self.writer
                    .write_pcapng_block(InterfaceDescriptionBlock {
                        linktype: DataLink::from(link.linktype()),
                        snaplen: self.snaplen,
                        options: vec![
                            InterfaceDescriptionOption::IfName(Cow::Owned(v.name)),
                            InterfaceDescriptionOption::IfDescription(Cow::Owned(v.description)),
                            InterfaceDescriptionOption::IfTsResol(
                                InterfaceTsResolution::from_u8(9).expect("nanoseconds"),
                            ),
                        ],
                    })
                    .map_err(|e| encode(&self.path, e))?;
                self.interfaces.push((source, link));
                self.interfaces.len() - 1
            }
        };
        let data = &data[..data.len().min(self.snaplen as usize)];
        self.writer
            .write_pcapng_block(EnhancedPacketBlock {
                interface_id: id as u32,
                timestamp: Duration::from_nanos(ts_ns),
                original_len: orig_len.max(data.len() as u32),
                data: Cow::Borrowed(data),
                options: vec![],
            })
            .map_err(|e| encode(&self.path, e))?;
        self.frames += 1;
        if self.writer.get_ref().len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    /// Appends what is buffered (the first flush creates the file). When the file system takes
    /// only part of it, the file is cut back to its last whole block (it stays a valid pcapng)
    /// and the error is returned.
    pub fn flush(&mut self) -> Result<(), EvidenceError> {
        let buf = self.writer.get_mut();
        if buf.is_empty() {
            return Ok(());
        }
        let io = |cause| EvidenceError::Io { path: self.path.clone(), cause };
        if self.dir.deleted() {
            return Err(io(std::io::Error::other("the evidence directory was removed while the program ran")));
        }
        let mut f =
            if self.started { self.dir.append(&self.name) } else { self.dir.create_new(&self.name) }.map_err(io)?;
        if let Err(e) = f.write_all(buf) {
            let _ = f.set_len(self.written);
            return Err(io(e));
        }
        self.written += buf.len() as u64;
        self.started = true;
        buf.clear();
        buf.shrink_to(FLUSH_AT * 2);
        Ok(())
    }
}

fn encode(path: &Path, e: impl std::fmt::Display) -> EvidenceError {
    EvidenceError::Encode { path: path.to_path_buf(), detail: e.to_string() }
}
