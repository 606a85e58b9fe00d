//! Frames: from a record's link layer to a classified [`PacketSummary`], through the one
//! classifier of `analyzer_common` that the XDP program runs too.
//!
//! Linux cooked captures (SLL, SLL2) and raw IP captures (link types 101, 228, 229: RoCE v2
//! starts at the IP header) have no Ethernet header; they are presented to the classifier as
//! an Ethernet frame whose header is synthesised (from the cooked header's source address and
//! protocol, or the IP version) and whose body is the captured bytes, without copying them.

pub mod filter;

use analyzer_common::{FrameBytes, FrameClass, PacketSummary, classify};

use crate::capture::LinkType;

/// Metadata of a frame that is not in its summary.
#[derive(Debug, Clone, Copy)]
pub struct FrameMeta {
    pub ts_ns: u64,
    /// Index of the input (capture file or interface) in the engine's sources.
    pub source: u16,
}

/// The bit of input `source` in a set of inputs (a flow's, a vantage point's): inputs beyond 64
/// share bit 63.
pub fn source_bit(source: u16) -> u64 {
    1u64 << source.min(63)
}

pub const SLL_LEN: usize = 16;
pub const SLL2_LEN: usize = 20;

/// Classifies one captured frame of link type `link`.
#[inline]
/// `len` bytes at offset `at` of the frame [`decode`] analysed (for a cooked capture, the
/// Ethernet frame its header stands for: offsets past the 14-byte Ethernet header map into the
/// record after the cooked header), if the record holds them.
pub fn bytes_at(link: LinkType, data: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    let start = match link {
        LinkType::Ethernet => at,
        LinkType::LinuxSll => (at.checked_sub(14)?) + SLL_LEN,
        LinkType::LinuxSll2 => (at.checked_sub(14)?) + SLL2_LEN,
        LinkType::RawIp | LinkType::Ipv4 | LinkType::Ipv6 => at.checked_sub(14)?,
    };
    data.get(start..start.checked_add(len)?)
}

pub fn decode(link: LinkType, data: &[u8], orig_len: u32, out: &mut PacketSummary) -> FrameClass {
    match link {
        LinkType::Ethernet => classify(data, orig_len, out),
        LinkType::RawIp | LinkType::Ipv4 | LinkType::Ipv6 => {
            let v6 = match link {
                LinkType::Ipv4 => false,
                LinkType::Ipv6 => true,
                _ => data.first().is_some_and(|b| b >> 4 == 6),
            };
            let mut head = [0u8; 14];
            let ethertype: u16 = if v6 { 0x86DD } else { 0x0800 };
            head[12..14].copy_from_slice(&ethertype.to_be_bytes());
            classify(&Spliced { head, tail: data }, orig_len.saturating_add(14), out)
        }
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            let (hlen, proto_at, halen_at, addr_at) = match link {
                LinkType::LinuxSll => (SLL_LEN, 14, 4, 6),
                _ => (SLL2_LEN, 0, 11, 12),
            };
            if data.len() < hlen {
                *out = PacketSummary::zeroed();
                out.frame_len = orig_len;
                out.class = FrameClass::TruncatedHeader as u8;
                return FrameClass::TruncatedHeader;
            }
            let mut head = [0u8; 14];
            let halen = if link == LinkType::LinuxSll {
                u16::from_be_bytes([data[halen_at], data[halen_at + 1]]) as usize
            } else {
                data[halen_at] as usize
            };
            if halen == 6 {
                head[6..12].copy_from_slice(&data[addr_at..addr_at + 6]);
            }
            head[12..14].copy_from_slice(&data[proto_at..proto_at + 2]);
            let frame = Spliced { head, tail: &data[hlen..] };
            let wire = (orig_len as usize).saturating_sub(hlen) + 14;
            classify(&frame, wire as u32, out)
        }
    }
}

/// A synthesised 14-byte Ethernet header followed by borrowed bytes.
struct Spliced<'a> {
    head: [u8; 14],
    tail: &'a [u8],
}

impl FrameBytes for Spliced<'_> {
    fn read<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        let h = self.head.len();
        if offset >= h {
            return self.tail.read(offset - h);
        }
        let mut a = [0u8; N];
        for (i, byte) in a.iter_mut().enumerate() {
            let at = offset + i;
            *byte = if at < h { self.head[at] } else { *self.tail.get(at - h)? };
        }
        Some(a)
    }
}
