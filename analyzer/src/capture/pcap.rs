//! pcap and pcapng files, read in a streaming way through the pcap-parser crate: memory
//! stays bounded by the largest record, not the file. Classic pcap records are parsed in
//! place in a buffer the stream fills (`legacy`), pcapng blocks through the crate's reader.

use std::fs::File;
use std::path::Path;

use pcap_parser::pcapng::Block;
use pcap_parser::{PcapBlockOwned, PcapError};

use super::{CaptureError, LinkType, ReadOutcome, Record, Truncation};

/// A record longer than this is taken as a corrupt length field, not a frame (jumbo frames
/// are 9 KiB; 256 KiB is libpcap's own maximum snap length).
pub const MAX_RECORD: u32 = 256 * 1024;
const BUFFER: usize = 1 << 20;
/// Bytes of a stream's start read before the pcapng reader is made.
const START: usize = 1 << 16;
/// Bytes of a classic pcap's file header.
const LEGACY_HEADER: usize = 24;
/// Bytes of a file's start kept for messages: the magic, or a pcapng section header's fixed part.
const PEEK: usize = 28;

/// One pcapng interface: link type and timestamp units per second.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: Option<LinkType>,
    linktype: u32,
    units_per_sec: u64,
    offset_sec: i64,
}

/// Reads `path` (`-`: standard input), calling `on_record` for every frame in file order.
/// `on_progress` is told how many bytes were consumed so far (for a progress bar).
pub fn read_file(
    path: &Path,
    on_record: impl FnMut(&Record<'_>),
    on_progress: impl FnMut(u64),
) -> Result<ReadOutcome, CaptureError> {
    if path == Path::new("-") {
        let stdin = decompressed(std::io::BufReader::with_capacity(1 << 16, std::io::stdin()), path)?;
        return read_stream(stdin, path, on_record, on_progress);
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(CaptureError::NotAFile { path: path.into(), what: "a directory" });
    }
    let file = File::open(path).map_err(|source| CaptureError::Open { path: path.into(), source })?;
    read_stream(decompressed(std::io::BufReader::new(file), path)?, path, on_record, on_progress)
}

/// The capture inside `r`: gzip and zstd compressed captures are read as they are (byte
/// offsets in messages are then those of the decompressed capture).
fn decompressed<R: std::io::BufRead + Send + 'static>(
    mut r: R,
    path: &Path,
) -> Result<Box<dyn std::io::Read + Send>, CaptureError> {
    let read_err = |source| CaptureError::Read { path: path.into(), offset: 0, source };
    let head = r.fill_buf().map_err(read_err)?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(r))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(r).map_err(read_err)?)
    } else {
        Box::new(r)
    })
}

/// Reads a capture from any byte stream; `path` names it in errors.
pub fn read_stream(
    stream: impl std::io::Read + Send,
    path: &Path,
    mut on_record: impl FnMut(&Record<'_>),
    mut on_progress: impl FnMut(u64),
) -> Result<ReadOutcome, CaptureError> {
    let mut st = State { path, out: ReadOutcome::default(), offset: 0, legacy: None, interfaces: Vec::new() };
    let mut stream = stream;
    let head = read_head(&mut stream, path)?;
    if let Ok((_, header)) = pcap_parser::parse_pcap_header(&head) {
        return legacy(&mut st, header, stream, &mut on_record, &mut on_progress);
    }
    // pcap-parser recognises the format in its first read: hand it more than a header's bytes.
    let mut head = head;
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut stream, START as u64), &mut head)
        .map_err(|source| CaptureError::Read { path: path.into(), offset: 0, source })?;
    let mut reader = open(std::io::Read::chain(std::io::Cursor::new(head), stream), path)?;
    loop {
        match reader.next() {
            Ok((size, block)) => {
                st.block(block, &mut on_record)?;
                reader.consume(size);
                st.passed(size, &mut on_progress);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                reader.refill().map_err(|_| CaptureError::Read {
                    path: path.into(),
                    offset: st.offset,
                    source: std::io::Error::other("read failed"),
                })?;
            }
            Err(PcapError::UnexpectedEof) => {
                st.out.truncated = Some(st.truncation(reader.data()));
                break;
            }
            Err(PcapError::BufferTooSmall) => return Err(st.too_long(reader.data())),
            Err(e) => {
                return Err(CaptureError::Malformed { path: path.into(), offset: st.offset, detail: describe(&e) });
            }
        }
    }
    Ok(st.out)
}

/// The first bytes of `stream`: as many as a classic pcap's file header takes, fewer only at
/// its end.
fn read_head(stream: &mut impl std::io::Read, path: &Path) -> Result<Vec<u8>, CaptureError> {
    let mut head = Vec::with_capacity(LEGACY_HEADER);
    std::io::Read::read_to_end(&mut std::io::Read::take(stream, LEGACY_HEADER as u64), &mut head)
        .map_err(|source| CaptureError::Read { path: path.into(), offset: 0, source })?;
    Ok(head)
}

/// A classic pcap's records after its file `header`, parsed in place in a buffer the stream
/// fills (pcap-parser's frame parsers; its reader's buffer handling and dynamic calls per
/// record were a fifth of the reading thread's time). The same outcomes as the reader's: a
/// record longer than the buffer is a corrupt length, a stream ending inside one a truncation.
fn legacy(
    st: &mut State<'_>,
    header: pcap_parser::PcapHeader,
    mut stream: impl std::io::Read,
    on_record: &mut impl FnMut(&Record<'_>),
    on_progress: &mut impl FnMut(u64),
) -> Result<ReadOutcome, CaptureError> {
    use pcap_parser::nom::{Err, Needed};
    let parse = match (header.is_modified_format(), header.is_bigendian()) {
        (true, _) => pcap_parser::parse_pcap_frame_modified,
        (false, true) => pcap_parser::parse_pcap_frame_be,
        (false, false) => pcap_parser::parse_pcap_frame,
    };
    st.block(PcapBlockOwned::from(header), on_record)?;
    st.offset = LEGACY_HEADER as u64;
    let mut buf = vec![0u8; BUFFER];
    let (mut start, mut end, mut exhausted) = (0, 0, false);
    loop {
        let data = &buf[start..end];
        match parse(data) {
            Ok((rest, b)) => {
                let size = data.len() - rest.len();
                st.block(PcapBlockOwned::from(b), on_record)?;
                start += size;
                st.passed(size, on_progress);
            }
            Err(Err::Incomplete(_)) if exhausted => {
                if !data.is_empty() {
                    st.out.truncated = Some(st.truncation(data));
                }
                return Ok(std::mem::take(&mut st.out));
            }
            Err(Err::Incomplete(needed)) => {
                if let Needed::Size(n) = needed
                    && data.len() + usize::from(n) >= BUFFER
                {
                    return Err(st.too_long(data));
                }
                buf.copy_within(start..end, 0);
                (start, end) = (0, end - start);
                let n = read_some(&mut stream, &mut buf[end..]).map_err(|source| CaptureError::Read {
                    path: st.path.into(),
                    offset: st.offset,
                    source,
                })?;
                exhausted = n == 0;
                end += n;
            }
            Err(Err::Error(e) | Err::Failure(e)) => {
                return Err(CaptureError::Malformed { path: st.path.into(), offset: st.offset, detail: describe(&e) });
            }
        }
    }
}

/// `read`, again when interrupted by a signal.
fn read_some(stream: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A pcap-parser reader over `stream`, or why the stream is no capture.
fn open<'b, R: std::io::Read + Send + 'b>(
    stream: R,
    path: &Path,
) -> Result<Box<dyn pcap_parser::traits::PcapReaderIterator + Send + 'b>, CaptureError> {
    let magic = std::sync::Arc::new(std::sync::Mutex::new(Vec::with_capacity(4)));
    let peek = Peek { inner: stream, magic: magic.clone() };
    match pcap_parser::create_reader(BUFFER, peek) {
        Ok(r) => Ok(r),
        Err(PcapError::Eof) => Err(CaptureError::Empty { path: path.into() }),
        Err(PcapError::ReadError) => {
            let source = std::io::Error::other("read failed");
            Err(CaptureError::Read { path: path.into(), offset: 0, source })
        }
        Err(_) => {
            let seen = magic.lock().map(|m| m.clone()).unwrap_or_default();
            if let Some((offset, detail)) = damaged_section_header(&seen) {
                return Err(CaptureError::DamagedSectionHeader { path: path.into(), offset, detail });
            }
            if let Some(kind) = capture_kind(&seen)
                && seen.len() < kind.1
            {
                return Err(CaptureError::TooShort { path: path.into(), kind: kind.0, len: seen.len(), need: kind.1 });
            }
            let magic = seen.iter().take(4).map(|b| format!("{b:02x}")).collect();
            Err(CaptureError::NotACapture { path: path.into(), magic })
        }
    }
}

/// What a read knows between blocks: where it is, the legacy header, the current pcapng
/// section's interfaces.
struct State<'p> {
    path: &'p Path,
    out: ReadOutcome,
    offset: u64,
    legacy: Option<Legacy>,
    interfaces: Vec<Interface>,
}

impl State<'_> {
    /// A block of `size` bytes taken: the offset moves past it, and progress is told.
    fn passed(&mut self, size: usize, on_progress: &mut impl FnMut(u64)) {
        self.offset += size as u64;
        self.out.bytes = self.offset;
        on_progress(self.offset);
    }

    /// One block: headers update the state, packets go to `on_record`.
    fn block(
        &mut self,
        block: PcapBlockOwned<'_>,
        on_record: &mut impl FnMut(&Record<'_>),
    ) -> Result<(), CaptureError> {
        let (path, offset) = (self.path, self.offset);
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                let lt = h.network.0 as u32;
                let link = LinkType::from_linktype(lt).ok_or(CaptureError::UnsupportedLinkType {
                    path: path.into(),
                    offset: 20,
                    linktype: lt,
                })?;
                self.legacy =
                    Some(Legacy { link, nanosecond: h.is_nanosecond_precision(), big_endian: h.is_bigendian() });
            }
            PcapBlockOwned::Legacy(b) => {
                let Legacy { link, nanosecond: ns, .. } = self.legacy.expect("legacy header precedes records");
                check_lengths(path, offset, b.caplen, b.origlen)?;
                let ts_ns = b.ts_sec as u64 * 1_000_000_000 + b.ts_usec as u64 * if ns { 1 } else { 1000 };
                on_record(&Record { ts_ns, orig_len: b.origlen, data: b.data, link, offset });
                self.out.records += 1;
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => self.interfaces.clear(),
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                let lt = idb.linktype.0 as u32;
                self.interfaces.push(Interface {
                    link: LinkType::from_linktype(lt),
                    linktype: lt,
                    units_per_sec: idb.ts_resolution().unwrap_or(1_000_000),
                    offset_sec: idb.ts_offset(),
                });
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let Some(i) = self.readable(epb.if_id)? else { return Ok(()) };
                check_lengths(path, offset, epb.caplen, epb.origlen)?;
                let units = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                let ts_ns = ng_time(units, i.units_per_sec, i.offset_sec);
                let data = &epb.data[..(epb.caplen as usize).min(epb.data.len())];
                let link = i.link.expect("checked by readable");
                on_record(&Record { ts_ns, orig_len: epb.origlen, data, link, offset });
                self.out.records += 1;
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                let Some(i) = self.readable(0)? else { return Ok(()) };
                let link = i.link.expect("checked by readable");
                // No timestamp in a simple packet block: it inherits 0.
                on_record(&Record { ts_ns: 0, orig_len: spb.origlen, data: spb.data, link, offset });
                self.out.records += 1;
            }
            PcapBlockOwned::NG(_) => {}
        }
        Ok(())
    }

    /// The interface `id` of a packet, or `None` (the packet counted as skipped) when this tool
    /// does not read its link type: the other interfaces of the file are still analysed.
    fn readable(&mut self, id: u32) -> Result<Option<Interface>, CaptureError> {
        let i = *self.interfaces.get(id as usize).ok_or(CaptureError::UnknownInterface {
            path: self.path.into(),
            offset: self.offset,
            interface: id,
        })?;
        if i.link.is_none() {
            self.out.skipped += 1;
            self.out.skipped_linktypes.insert(i.linktype);
            return Ok(None);
        }
        Ok(Some(i))
    }

    /// The input ends inside a record (`rest` are its bytes).
    fn truncation(&self, rest: &[u8]) -> Truncation {
        Truncation {
            path: self.path.into(),
            offset: self.offset,
            cause: format!(
                "truncated last record: the file ends {} bytes into a record{}",
                rest.len(),
                declared_len(rest, self.legacy).map_or(String::new(), |n| format!(" that declares {n} captured bytes"))
            ),
        }
    }

    /// A record longer than the reader's buffer at the current offset (`rest`: its bytes).
    fn too_long(&self, rest: &[u8]) -> CaptureError {
        let detail = match declared_len(rest, self.legacy) {
            Some(n) => format!("record declares {n} captured bytes (more than {MAX_RECORD})"),
            None => format!("block longer than {} bytes", BUFFER),
        };
        CaptureError::CorruptRecordLength { path: self.path.into(), offset: self.offset, detail }
    }
}

/// pcapng timestamp units → Unix ns (`if_tsresol` units per second, `if_tsoffset` seconds).
fn ng_time(units: u64, units_per_sec: u64, offset_sec: i64) -> u64 {
    let ns = if units_per_sec == 1_000_000_000 {
        units as u128
    } else {
        units as u128 * 1_000_000_000 / units_per_sec.max(1) as u128
    };
    (ns as i128 + offset_sec as i128 * 1_000_000_000).clamp(0, u64::MAX as i128) as u64
}

fn check_lengths(path: &Path, offset: u64, caplen: u32, origlen: u32) -> Result<(), CaptureError> {
    let bad = if caplen > MAX_RECORD {
        Some(format!("captured length {caplen} exceeds {MAX_RECORD}"))
    } else if caplen > origlen {
        Some(format!("captured length {caplen} exceeds original length {origlen}"))
    } else {
        None
    };
    match bad {
        Some(detail) => Err(CaptureError::CorruptRecordLength { path: path.into(), offset, detail }),
        None => Ok(()),
    }
}

/// What a classic pcap's file header says about its records.
#[derive(Debug, Clone, Copy)]
struct Legacy {
    link: LinkType,
    nanosecond: bool,
    big_endian: bool,
}

/// The captured length a legacy record header at the start of `data` declares.
fn declared_len(data: &[u8], legacy: Option<Legacy>) -> Option<u32> {
    let big_endian = legacy?.big_endian;
    let b: [u8; 4] = data.get(8..12)?.try_into().ok()?;
    Some(if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
}

fn describe(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::NomError(_, k) | PcapError::OwnedNomError(_, k) => {
            format!("block does not parse ({k:?})")
        }
        PcapError::HeaderNotRecognized => "unrecognised block".into(),
        PcapError::ReadError => "read failed".into(),
        other => format!("{other:?}"),
    }
}

/// A reader that remembers the first four bytes it hands out (for the "not a capture" error).
/// The kind of capture `head` starts as, and the bytes its file header takes.
fn capture_kind(head: &[u8]) -> Option<(&'static str, usize)> {
    match head.get(..4)? {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0xc3, 0xd4] | [0x4d, 0x3c, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] => {
            Some(("pcap", 24))
        }
        [0x0a, 0x0d, 0x0d, 0x0a] => Some(("pcapng", 28)),
        _ => None,
    }
}

/// Where and how a pcapng section header block (the file's first bytes, `head`) is damaged,
/// when it starts with the block type of one; `None` when it is no pcapng at all.
fn damaged_section_header(head: &[u8]) -> Option<(u64, String)> {
    const SHB: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
    if head.get(..4)? != SHB {
        return None;
    }
    let word = |at: usize| head.get(at..at + 4).map(|b| [b[0], b[1], b[2], b[3]]);
    let Some(bom) = word(8) else {
        return Some((4, format!("the file ends after {} bytes, inside the block", head.len())));
    };
    let little = match bom {
        [0x4d, 0x3c, 0x2b, 0x1a] => true,
        [0x1a, 0x2b, 0x3c, 0x4d] => false,
        b => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            return Some((8, format!("byte-order magic {hex}, not 1a2b3c4d")));
        }
    };
    let u32_at = |at: usize| word(at).map(|w| if little { u32::from_le_bytes(w) } else { u32::from_be_bytes(w) });
    let len = u32_at(4).unwrap_or(0);
    if len < 28 || len % 4 != 0 {
        return Some((4, format!("block length {len} (a section header takes at least 28 bytes, a multiple of 4)")));
    }
    let major = head
        .get(12..14)
        .map(|b| if little { u16::from_le_bytes([b[0], b[1]]) } else { u16::from_be_bytes([b[0], b[1]]) });
    match major {
        Some(1) | None => Some((0, "the block does not parse".into())),
        Some(v) => Some((12, format!("major version {v}, not 1"))),
    }
}

struct Peek<R> {
    inner: R,
    magic: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl<R: std::io::Read> std::io::Read for Peek<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Ok(mut m) = self.magic.lock()
            && m.len() < PEEK
        {
            let take = (PEEK - m.len()).min(n);
            m.extend_from_slice(&buf[..take]);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_section_headers_say_where() {
        let mut shb = vec![0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
        shb.extend_from_slice(&[0xff; 12]);
        assert_eq!(damaged_section_header(&shb), Some((0, "the block does not parse".into())));
        let mut bad_bom = shb.clone();
        bad_bom[8] = 0x00;
        assert_eq!(damaged_section_header(&bad_bom).unwrap().0, 8);
        let mut bad_len = shb.clone();
        bad_len[4] = 7;
        assert!(damaged_section_header(&bad_len).unwrap().1.contains("block length 7"));
        let mut bad_version = shb.clone();
        bad_version[12] = 9;
        assert_eq!(damaged_section_header(&bad_version).unwrap(), (12, "major version 9, not 1".into()));
        assert_eq!(damaged_section_header(&[0xd4, 0xc3, 0xb2, 0xa1]), None, "a pcap is no pcapng");
        assert_eq!(damaged_section_header(&shb[..6]).unwrap().0, 4);
    }

    /// A reader handing out at most `step` bytes a call (a pipe).
    struct Trickle<'a>(&'a [u8], usize);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// A classic pcap (Ethernet, microseconds) of `records` (caplen, bytes present), in either
    /// byte order.
    fn pcap(records: &[(u32, usize)], big_endian: bool) -> Vec<u8> {
        let w32 = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut f = w32(0xa1b2c3d4).to_vec();
        f.extend(w16(2));
        f.extend(w16(4));
        for v in [0, 0, 65535, 1] {
            f.extend(w32(v));
        }
        for (i, (caplen, present)) in records.iter().enumerate() {
            for v in [i as u32 + 1, 7, *caplen, *caplen] {
                f.extend(w32(v));
            }
            f.extend(std::iter::repeat_n(i as u8, *present));
        }
        f
    }

    /// What a test sees of a record: offset, time, length, first byte.
    type Seen = (u64, u64, usize, u8);

    fn read(bytes: &[u8], step: usize) -> (Result<ReadOutcome, CaptureError>, Vec<Seen>) {
        let mut seen = Vec::new();
        let out = read_stream(
            Trickle(bytes, step),
            Path::new("t.pcap"),
            |r| seen.push((r.offset, r.ts_ns, r.data.len(), r.data.first().copied().unwrap_or(0))),
            |_| {},
        );
        (out, seen)
    }

    /// Classic pcap records are parsed in place in the buffer the stream fills: whatever the
    /// stream hands out per read, in either byte order, every record arrives whole with its
    /// offset and time, the buffer moving over records as long as 60 KiB.
    #[test]
    fn classic_records_whatever_the_reads() {
        let records: Vec<(u32, usize)> = (0..40).map(|i| (60 + 1500 * i, 60 + 1500 * i as usize)).collect();
        for big_endian in [false, true] {
            let file = pcap(&records, big_endian);
            let want: Vec<Seen> = {
                let mut at = 24u64;
                records
                    .iter()
                    .enumerate()
                    .map(|(i, (c, _))| {
                        let r = (at, (i as u64 + 1) * 1_000_000_000 + 7_000, *c as usize, i as u8);
                        at += 16 + *c as u64;
                        r
                    })
                    .collect()
            };
            for step in [1, 7, 4096, usize::MAX] {
                let (out, seen) = read(&file, step);
                let out = out.unwrap();
                assert_eq!((out.records, out.bytes, out.truncated.is_none()), (40, file.len() as u64, true));
                assert_eq!(seen, want, "step {step}");
            }
        }
    }

    /// The ends a classic pcap can have: a record cut by the end of the file (a truncation,
    /// with where and what it declared), a record header cut, a declared length no buffer
    /// holds (a corrupt length, wherever the file ends), a file header alone.
    #[test]
    fn classic_ends() {
        let (out, seen) = read(&pcap(&[(100, 100), (300, 40)], false), 5);
        let t = out.unwrap().truncated.expect("truncated");
        assert_eq!((seen.len(), t.offset), (1, 24 + 116));
        assert_eq!(
            t.cause,
            "truncated last record: the file ends 56 bytes into a record that declares 300 captured bytes"
        );
        let mut cut = pcap(&[(100, 100)], false);
        cut.extend([1, 0, 0, 0, 0, 0]);
        let t = read(&cut, 3).0.unwrap().truncated.expect("truncated");
        assert_eq!((t.offset, t.cause.as_str()), (140, "truncated last record: the file ends 6 bytes into a record"));
        for present in [10, 2_000_000] {
            let (out, seen) = read(&pcap(&[(100, 100), (2_000_000, present)], false), 65536);
            let Err(CaptureError::CorruptRecordLength { offset, detail, .. }) = out else { panic!("{out:?}") };
            assert_eq!((seen.len(), offset), (1, 140));
            assert_eq!(detail, "record declares 2000000 captured bytes (more than 262144)");
        }
        let (out, seen) = read(&pcap(&[], true), 1);
        assert_eq!((out.unwrap().records, seen.len()), (0, 0));
    }

    #[test]
    fn ng_time_units() {
        assert_eq!(ng_time(1_500_000, 1_000_000, 0), 1_500_000_000);
        assert_eq!(ng_time(7, 1_000_000_000, 1), 1_000_000_007);
        assert_eq!(ng_time(3, 1_000, 0), 3_000_000);
    }
}
