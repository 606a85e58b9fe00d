//! Writing captures (through the pcap-file crate) for fixtures, tests and benchmarks.

use std::io::Write;
use std::time::Duration;

pub use pcap_file::DataLink;
use pcap_file::Endianness;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapTsResolution, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption, InterfaceTsResolution,
};

/// One record: timestamp (Unix ns), captured bytes, original length on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub ts_ns: u64,
    pub data: Vec<u8>,
    pub orig_len: u32,
    /// pcapng interface index (ignored for pcap).
    pub interface: u32,
}

impl Record {
    pub fn new(ts_ns: u64, data: Vec<u8>) -> Self {
        let orig_len = data.len() as u32;
        Record { ts_ns, data, orig_len, interface: 0 }
    }
    /// Keeps only the first `snap` bytes, as `tcpdump -s snap` would.
    pub fn snap(mut self, snap: usize) -> Self {
        self.data.truncate(snap);
        self.data.shrink_to_fit();
        self
    }
}

/// Options of a classic pcap file.
#[derive(Debug, Clone, Copy)]
pub struct PcapOptions {
    pub nanosecond: bool,
    pub big_endian: bool,
    pub linktype: DataLink,
    pub snaplen: u32,
}

impl Default for PcapOptions {
    fn default() -> Self {
        PcapOptions { nanosecond: false, big_endian: false, linktype: DataLink::ETHERNET, snaplen: 65535 }
    }
}

/// Writes a classic pcap.
pub fn write_pcap<W: Write>(w: W, opts: PcapOptions, records: &[Record]) -> Result<W, pcap_file::pcap::PcapWriteError> {
    let header = PcapHeader {
        snaplen: opts.snaplen,
        datalink: opts.linktype,
        ts_resolution: if opts.nanosecond { PcapTsResolution::NanoSecond } else { PcapTsResolution::MicroSecond },
        endianness: if opts.big_endian { Endianness::Big } else { Endianness::Little },
        ..Default::default()
    };
    let mut pw = PcapWriter::with_header(w, header)?;
    for r in records {
        let ts = Duration::from_nanos(r.ts_ns);
        let p = PcapPacket::new(ts, r.orig_len, &r.data[..]).expect("record within pcap limits");
        pw.write_packet(&p)?;
    }
    Ok(pw.into_inner())
}

/// An interface of a pcapng file: link type and timestamp resolution (`if_tsresol`, as a
/// power of ten, e.g. 6 = µs, 9 = ns).
#[derive(Debug, Clone, Copy)]
pub struct NgInterface {
    pub linktype: DataLink,
    pub tsresol_pow10: u8,
}

/// Writes a pcapng with the given interfaces; `Record::interface` picks one.
pub fn write_pcapng<W: Write>(
    w: W,
    interfaces: &[NgInterface],
    records: &[Record],
) -> Result<W, pcap_file::pcapng::PcapNgWriteError> {
    let mut nw = PcapNgWriter::new(w)?;
    for i in interfaces {
        let resol = InterfaceTsResolution::from_u8(i.tsresol_pow10).expect("power-of-ten resolution");
        nw.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: i.linktype,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(resol)],
        })?;
    }
    for r in records {
        nw.write_pcapng_block(EnhancedPacketBlock {
            interface_id: r.interface,
            timestamp: Duration::from_nanos(r.ts_ns),
            original_len: r.orig_len,
            data: r.data.as_slice().into(),
            options: vec![],
        })?;
    }
    Ok(nw.into_inner())
}
