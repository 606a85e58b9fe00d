//! Capture sources: where frames come from. Offline this is a pcap/pcapng file ([`pcap`]);
//! live it is the XDP program, whose maps and ring buffers [`kernel`] loads and reads (the
//! `live` module drives it), with the NIC's own counters beside it ([`nic`]).

pub mod bounded;
pub mod input;
pub mod kernel;
pub mod nic;
pub mod pcap;

use std::path::PathBuf;

/// Link layer of a capture's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    Ethernet,
    /// Linux cooked capture v1 (`tcpdump -i any`).
    LinuxSll,
    /// Linux cooked capture v2.
    LinuxSll2,
    /// Raw IP (LINKTYPE_RAW 101): the record starts at the IP header, version by its nibble.
    RawIp,
    /// Raw IPv4 (228).
    Ipv4,
    /// Raw IPv6 (229).
    Ipv6,
}

/// The link types this tool reads, with their pcap LINKTYPE numbers.
const LINKTYPES: [(u32, LinkType); 6] = [
    (1, LinkType::Ethernet),
    (113, LinkType::LinuxSll),
    (276, LinkType::LinuxSll2),
    (101, LinkType::RawIp),
    (228, LinkType::Ipv4),
    (229, LinkType::Ipv6),
];

impl LinkType {
    /// The link types this tool reads, by their pcap LINKTYPE number.
    pub fn from_linktype(n: u32) -> Option<Self> {
        LINKTYPES.iter().find(|(k, _)| *k == n).map(|(_, l)| *l)
    }

    /// Its pcap LINKTYPE number (to write it again: evidence files).
    pub fn linktype(self) -> u32 {
        LINKTYPES.iter().find(|(_, l)| *l == self).map_or(1, |(k, _)| *k)
    }
}

/// One captured frame, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Unix time in nanoseconds.
    pub ts_ns: u64,
    /// Length of the frame on the wire (≥ `data.len()` when the snap length cut it).
    pub orig_len: u32,
    pub data: &'a [u8],
    pub link: LinkType,
    /// Byte offset of the record in its file (for messages).
    pub offset: u64,
}

/// Errors that stop reading a capture. Each names the file and, past the header, the byte
/// offset of the record or block at fault.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{path}: cannot open")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("{path}: byte offset {offset}: read error")]
    Read { path: PathBuf, offset: u64, source: std::io::Error },
    #[error("{path}: byte offset 0: not a pcap or pcapng capture (magic {magic})")]
    NotACapture { path: PathBuf, magic: String },
    #[error("{path}: byte offset {offset}: damaged pcapng section header: {detail}")]
    DamagedSectionHeader { path: PathBuf, offset: u64, detail: String },
    #[error("{path}: {what}, not a capture file")]
    NotAFile { path: PathBuf, what: &'static str },
    #[error("{path}: byte offset {len}: the file ends inside the {kind} file header ({len} of its {need} bytes)")]
    TooShort { path: PathBuf, kind: &'static str, len: usize, need: usize },
    #[error("{path}: byte offset 0: empty file, not a capture")]
    Empty { path: PathBuf },
    #[error(
        "{path}: byte offset {offset}: unsupported link type {linktype} \
         (supported: Ethernet 1, Linux cooked SLL 113, SLL2 276, raw IP 101, IPv4 228, IPv6 229)"
    )]
    UnsupportedLinkType { path: PathBuf, offset: u64, linktype: u32 },
    #[error("{path}: byte offset {offset}: corrupt record length: {detail}")]
    CorruptRecordLength { path: PathBuf, offset: u64, detail: String },
    #[error(
        "{path}: byte offset {offset}: packet on interface {interface}, which no interface description block declared"
    )]
    UnknownInterface { path: PathBuf, offset: u64, interface: u32 },
    #[error("{path}: byte offset {offset}: malformed capture: {detail}")]
    Malformed { path: PathBuf, offset: u64, detail: String },
}

/// A capture's last record ends past the end of the file: everything before it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub path: PathBuf,
    pub offset: u64,
    pub cause: String,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: byte offset {}: {}", self.path.display(), self.offset, self.cause)
    }
}

/// What reading one file gave besides its records.
#[derive(Debug, Clone, Default)]
pub struct ReadOutcome {
    pub records: u64,
    pub bytes: u64,
    /// pcapng: packets of interfaces whose link type this tool does not read (e.g. a loopback
    /// interface beside the Ethernet one), skipped, and those link types.
    pub skipped: u64,
    pub skipped_linktypes: std::collections::BTreeSet<u32>,
    /// Set when the file ends inside a record (the report is then partial).
    pub truncated: Option<Truncation>,
}
