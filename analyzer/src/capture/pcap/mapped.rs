//! A capture file read where it lies: the file is mapped into memory and its blocks are parsed
//! in place, with no copy into a reader's buffer. The stream readers' copy (kernel to buffer)
//! and buffer upkeep were about a tenth of an offline run. Blocks, sizes and errors come out
//! as pcap-parser's stream readers give them, so one loop ([`super::read_blocks`]) reads both;
//! the tests below hold the two to that on good, cut and corrupt captures.

use std::fs::File;

use memmap2::{Mmap, UncheckedAdvice};
use pcap_parser::nom::{self, IResult, Needed};
use pcap_parser::pcapng::{Block, parse_block_be, parse_block_le, parse_sectionheaderblock};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{
    LegacyPcapBlock, PcapBlockOwned, PcapError, PcapHeader, parse_pcap_frame, parse_pcap_frame_be,
    parse_pcap_frame_modified, parse_pcap_header,
};

use super::BUFFER;

/// `file` mapped, when it is a regular, non-empty file whose bytes are a capture as they are
/// (compressed ones are read as streams through their decoder); `None` otherwise, and when the
/// system refuses the mapping: the stream reader reads those.
pub fn map(file: &File) -> Option<Mmap> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    // SAFETY: the mapping is only read. Another process truncating the file while it is
    // read would fault the reader (SIGBUS); capture writers (tcpdump, dumpcap, tshark) append,
    // and a capture rotated away is a new file, so a capture on disk is not cut under us.
    let map = unsafe { Mmap::map(file) }.ok()?;
    // Read front to back once: the kernel may read ahead and drop pages behind.
    let _ = map.advise(memmap2::Advice::Sequential);
    (!super::compressed(&map)).then_some(map)
}

type LegacyParse = fn(&[u8]) -> IResult<&[u8], LegacyPcapBlock<'_>, PcapError<&[u8]>>;

enum Format {
    /// Classic pcap: its header (handed out first, as the stream reader does) and the record
    /// parser its magic calls for.
    Legacy { header: PcapHeader, parse: LegacyParse },
    /// pcapng: the byte order of the current section.
    Ng { big_endian: bool },
}

/// Bytes read between two releases of the pages read (multiples of any page size).
const RELEASE: usize = 1 << 20;

/// pcap-parser's reader interface over a capture in memory.
pub struct Mapped<'a> {
    data: &'a [u8],
    consumed: usize,
    format: Format,
    /// The mapping `data` is, whose pages below `released` were handed back ([`Mapped::release`]).
    map: Option<&'a Mmap>,
    released: usize,
}

impl<'a> Mapped<'a> {
    /// The reader for `data`, chosen as `pcap_parser::create_reader` chooses (a pcapng section
    /// header first, else a pcap file header), or the error it would give.
    pub fn new(data: &'a [u8]) -> Result<Self, PcapError<&'a [u8]>> {
        if data.is_empty() {
            return Err(PcapError::Eof);
        }
        let format = if parse_sectionheaderblock(data).is_ok() {
            Format::Ng { big_endian: false }
        } else {
            let (_, header) = parse_pcap_header(data).map_err(|_| PcapError::HeaderNotRecognized)?;
            let parse: LegacyParse = match (header.is_modified_format(), header.is_bigendian()) {
                (true, _) => parse_pcap_frame_modified,
                (false, true) => parse_pcap_frame_be,
                (false, false) => parse_pcap_frame,
            };
            Format::Legacy { header, parse }
        };
        Ok(Mapped { data, consumed: 0, format, map: None, released: 0 })
    }

    /// The same reader over a mapped file, giving back the pages it has read as it goes.
    pub fn over(map: &'a Mmap) -> Result<Self, PcapError<&'a [u8]>> {
        Ok(Mapped { map: Some(map), ..Mapped::new(map)? })
    }

    /// Unmaps the pages of the blocks already read: mapped pages count in the process's
    /// resident memory, and a run's memory must follow its flows, not the size of its file.
    /// The pages stay in the page cache; only this process's view of them goes.
    fn release(&mut self) {
        let Some(map) = self.map else { return };
        let upto = self.consumed / RELEASE * RELEASE;
        if upto > self.released {
            // SAFETY: nothing below `consumed` is borrowed any more (a block is handed out,
            // accounted and dropped before it is consumed), and this mapping is read-only and
            // of a file: a page read again after DONTNEED is the file's bytes again.
            let _ =
                unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, self.released, upto - self.released) };
            self.released = upto;
        }
    }

    /// Bytes whose pages were given back (tests).
    #[cfg(test)]
    pub fn released(&self) -> usize {
        self.released
    }
}

impl PcapReaderIterator for Mapped<'_> {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        let rest = &self.data[self.consumed..];
        let parsed = match &mut self.format {
            Format::Legacy { header, .. } if self.consumed == 0 => {
                return Ok((header.size(), PcapBlockOwned::from(header.clone())));
            }
            _ if rest.is_empty() => return Err(PcapError::Eof),
            Format::Legacy { parse, .. } => parse(rest).map(|(left, b)| (left.len(), PcapBlockOwned::from(b))),
            Format::Ng { big_endian } => {
                let parse = if *big_endian { parse_block_be } else { parse_block_le };
                parse(rest).map(|(left, b)| {
                    if let Block::SectionHeader(shb) = &b {
                        *big_endian = shb.big_endian();
                    }
                    (left.len(), PcapBlockOwned::from(b))
                })
            }
        };
        match parsed {
            // A block the stream reader's buffer could not hold is refused as it refuses it.
            Ok((left, _)) if rest.len() - left > BUFFER => Err(PcapError::BufferTooSmall),
            Ok((left, block)) => Ok((rest.len() - left, block)),
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => Err(e),
            Err(nom::Err::Incomplete(Needed::Size(n))) if rest.len() + n.get() >= BUFFER => {
                Err(PcapError::BufferTooSmall)
            }
            Err(nom::Err::Incomplete(_)) => Err(PcapError::UnexpectedEof),
        }
    }

    fn consume(&mut self, offset: usize) {
        self.consumed += offset;
        if self.consumed - self.released >= 2 * RELEASE {
            self.release();
        }
    }

    fn consume_noshift(&mut self, offset: usize) {
        self.consume(offset);
    }

    fn consumed(&self) -> usize {
        self.consumed
    }

    /// Everything is in memory: there is nothing to read.
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        Ok(())
    }

    fn position(&self) -> usize {
        0
    }

    fn grow(&mut self, _new_size: usize) -> bool {
        false
    }

    fn data(&self) -> &[u8] {
        &self.data[self.consumed..]
    }

    fn reader_exhausted(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::{read_in_place, read_stream};

    /// Everything a read gives: each record (offset, time, lengths, link, bytes), then the
    /// outcome or the error as the user sees it.
    fn transcript(read: impl FnOnce(&mut dyn FnMut(&crate::capture::Record<'_>)) -> String) -> Transcript {
        let mut records = Vec::new();
        let end = read(&mut |r| records.push((r.offset, r.ts_ns, r.orig_len, r.link, r.data.to_vec())));
        (records, end)
    }

    type Transcript = (Vec<(u64, u64, u32, crate::capture::LinkType, Vec<u8>)>, String);

    fn both(bytes: &[u8], path: &Path) -> (Transcript, Transcript) {
        let end = |r: Result<crate::capture::ReadOutcome, crate::capture::CaptureError>| match r {
            Ok(o) => format!("{o:?}"),
            Err(e) => format!("error: {e:#}"),
        };
        let stream = transcript(|f| end(read_stream(bytes, path, f, |_| {})));
        let mapped = transcript(|f| end(read_in_place(super::Mapped::new(bytes), bytes, path, f, |_| {})));
        (stream, mapped)
    }

    fn data_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data")
    }

    #[test]
    fn in_place_reads_every_fixture_as_the_stream_reader_does() {
        let mut files = Vec::new();
        for dir in [data_dir(), data_dir().join("bad")] {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "pcap" || x == "pcapng") {
                    files.push(p);
                }
            }
        }
        files.sort();
        assert!(files.len() >= 40, "fixtures found: {}", files.len());
        let mut errors = 0;
        for p in &files {
            let bytes = std::fs::read(p).unwrap();
            let (stream, mapped) = both(&bytes, p);
            assert_eq!(stream, mapped, "{}", p.display());
            errors += usize::from(stream.1.starts_with("error"));
        }
        // The bad captures (empty, not a capture, corrupt lengths, unknown link type) fail.
        assert!(errors >= 5, "{errors} fixtures failed to read");
    }

    /// Cut anywhere, a pcap and a pcapng read the same way in place and as streams: the same
    /// records before the cut, the same truncation or error after them.
    #[test]
    fn cut_captures_read_the_same_in_place() {
        for name in ["example.pcap", "nanosecond_be.pcap", "two_interfaces.pcapng"] {
            let p = data_dir().join(name);
            let bytes = std::fs::read(&p).unwrap();
            let mut cuts: Vec<usize> = (0..64.min(bytes.len())).collect();
            cuts.extend((64..bytes.len().min(4096)).step_by(37));
            cuts.extend((4096..bytes.len()).step_by(401));
            for cut in cuts {
                let (stream, mapped) = both(&bytes[..cut], &p);
                assert_eq!(stream, mapped, "{name} cut at {cut}");
            }
        }
    }

    /// A big-endian pcapng (no fixture is one): a section header, an Ethernet interface, and
    /// two packets. The reader must switch to the section's byte order after its header.
    fn big_endian_pcapng() -> Vec<u8> {
        fn block(kind: u32, body: &[u8]) -> Vec<u8> {
            let len = (12 + body.len()) as u32;
            [&kind.to_be_bytes()[..], &len.to_be_bytes(), body, &len.to_be_bytes()].concat()
        }
        let shb = [&0x1a2b_3c4du32.to_be_bytes()[..], &1u16.to_be_bytes(), &0u16.to_be_bytes(), &[0xff; 8]].concat();
        let idb = [&1u16.to_be_bytes()[..], &[0, 0], &0u32.to_be_bytes()].concat();
        let mut out = [block(0x0a0d_0d0a, &shb), block(1, &idb)].concat();
        for (i, len) in [(1u32, 60u32), (2, 64)] {
            let head = [0u32, 7, i * 1000, len, len + 4].map(u32::to_be_bytes).concat();
            out.extend(block(6, &[head, vec![i as u8; len as usize]].concat()));
        }
        out
    }

    #[test]
    fn big_endian_pcapng_reads_the_same_in_place() {
        let bytes = big_endian_pcapng();
        let p = Path::new("be.pcapng");
        let (stream, mapped) = both(&bytes, p);
        assert_eq!(stream.0.len(), 2, "{}", stream.1);
        assert_eq!(stream, mapped);
        for cut in 0..bytes.len() {
            let (stream, mapped) = both(&bytes[..cut], p);
            assert_eq!(stream, mapped, "cut at {cut}");
        }
    }

    /// A file of many megabytes read in place gives back the pages it has read as it goes
    /// (its resident memory stays bounded) and reads as the stream reader reads it.
    #[test]
    fn a_mapped_file_gives_back_what_it_has_read() {
        let example = std::fs::read(data_dir().join("example.pcap")).unwrap();
        let mut bytes = example[..24].to_vec();
        while bytes.len() < 5 * super::RELEASE + 12345 {
            bytes.extend_from_slice(&example[24..]);
        }
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        let map = super::map(file.as_file()).expect("a regular file maps");
        let mut reader = super::Mapped::over(&map).unwrap();
        let path = file.path();
        let mapped = transcript(|f| format!("{:?}", super::super::read_blocks(&mut reader, path, f, |_| {}).unwrap()));
        assert!(reader.released() >= bytes.len() - 2 * super::RELEASE, "released {}", reader.released());
        assert_eq!(reader.released() % super::RELEASE, 0);
        let stream = transcript(|f| format!("{:?}", read_stream(&bytes[..], path, f, |_| {}).unwrap()));
        assert_eq!(stream, mapped);
    }

    /// A record declaring more bytes than any reader buffers is refused alike, whether the
    /// file holds them or ends first.
    #[test]
    fn oversized_blocks_are_refused_alike() {
        let p = data_dir().join("example.pcap");
        let bytes = std::fs::read(&p).unwrap();
        for declared in [super::BUFFER as u32 - 100, super::BUFFER as u32 + 100, u32::MAX - 3] {
            let mut b = bytes[..24].to_vec();
            b.extend_from_slice(&[0; 8]);
            b.extend_from_slice(&declared.to_le_bytes());
            b.extend_from_slice(&declared.to_le_bytes());
            let (stream, mapped) = both(&b, &p);
            assert_eq!(stream, mapped, "declared {declared}, file ends");
            b.resize(24 + 16 + super::BUFFER + 200, 0);
            let (stream, mapped) = both(&b, &p);
            assert_eq!(stream, mapped, "declared {declared}, file holds them");
            assert!(stream.1.starts_with("error: "), "{}", stream.1);
        }
    }
}
