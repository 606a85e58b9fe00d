//! A frame as evidence sees it (offline from the spool, live from the kernel's copies).

use analyzer_common::maps::EvidenceFrame;

use super::select::Tag;
use crate::capture::LinkType;

/// One frame evidence may take: where and when it was seen, its [`Tag`] and its bytes (cut
/// to the snap length).
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub ts_ns: u64,
    pub orig_len: u32,
    pub source: u16,
    pub link: LinkType,
    pub tag: Tag,
    pub data: &'a [u8],
}

impl<'a> Seen<'a> {
    /// An evidence copy (the kernel's, or one read back from the offline spool) seen at
    /// `source` at `ts_ns`.
    pub fn of(e: &'a EvidenceFrame, ts_ns: u64, source: u16, link: LinkType) -> Self {
        let len = (e.caplen as usize).min(e.data.len());
        Seen { ts_ns, orig_len: e.orig_len, source, link, tag: Tag::of_frame(e), data: &e.data[..len] }
    }
}
