//! Where export lines go: standard output, or a directory of numbered NDJSON files rotated by
//! size and count. A line is never split, across files or by a failing disk: lines are
//! buffered whole and, when the file system refuses part of a write, the file is cut back to
//! its last whole line and the lines not written are counted as dropped. A restarted agent
//! continues after the highest number it finds, so nothing an earlier run wrote is
//! overwritten. Files are created exclusively under the directory's handle ([`OutDir`]): a
//! link planted under the next file's name is skipped, never followed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::report::out_dir::OutDir;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("{path}: cannot use as the export directory")]
    Dir { path: String, source: std::io::Error },
    #[error("{path}: cannot write export lines")]
    Write { path: String, source: std::io::Error },
}

/// The prefix and suffix of export file names: `roce-analyzer-000042.ndjson`.
pub const PREFIX: &str = "roce-analyzer-";
pub const SUFFIX: &str = ".ndjson";

/// Names tried past a planted one before the directory is given up.
const PLANTED_MAX: u64 = 64;

/// Bytes of whole lines buffered before they are written.
const BUFFER: usize = 1 << 16;

/// The number of an export file named by [`file_name`], if `name` is one.
pub fn file_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

pub fn file_name(n: u64) -> String {
    format!("{PREFIX}{n:06}{SUFFIX}")
}

/// The export files of `dir`, oldest (lowest number) first.
pub fn files(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    Ok(numbers(&OutDir::open(dir)?)?.into_iter().map(|n| (n, dir.join(file_name(n)))).collect())
}

/// The numbers of the export files in `dir`, lowest first.
fn numbers(dir: &OutDir) -> std::io::Result<Vec<u64>> {
    let mut v: Vec<u64> = dir.names()?.iter().filter_map(|n| file_number(n)).collect();
    v.sort();
    Ok(v)
}

/// Limits of a directory sink.
#[derive(Debug, Clone, Copy)]
pub struct Rotation {
    /// A file is closed before a line would take it past this many bytes (a longer line gets
    /// a file of its own).
    pub max_bytes: u64,
    /// Files kept, the current one included; older ones are deleted.
    pub keep: usize,
}

/// The file being written: its number, the file, the bytes in it (whole lines), and the
/// whole lines buffered for it with their count.
struct Current {
    n: u64,
    file: File,
    written: u64,
    buf: Vec<u8>,
    lines: u64,
}

enum Target {
    /// No file: the lines go to ClickHouse only.
    Nowhere,
    Stdout,
    Dir {
        dir: OutDir,
        rotation: Rotation,
        file: Option<Current>,
    },
}

pub struct Sink {
    target: Target,
    /// Lines written whole.
    pub lines: u64,
    /// Lines given up (the file system refused them): never a part of one.
    pub dropped: u64,
    /// Files closed because they were full.
    pub rotations: u64,
    /// Files deleted to keep `--export-keep`.
    pub deleted: u64,
    /// Names skipped because something was already there (a planted link).
    pub planted: u64,
    /// The first error since the last flush.
    pending: Option<SinkError>,
    /// The first error of the run, with its causes (for the report).
    pub failed: Option<String>,
}

impl Sink {
    /// `-` is standard output; anything else a directory (created if missing).
    pub fn open(path: &Path, rotation: Rotation) -> Result<Sink, SinkError> {
        if path == Path::new("-") {
            return Ok(Sink::new(Target::Stdout));
        }
        let err = |source| SinkError::Dir { path: path.display().to_string(), source };
        let dir = OutDir::create_all(path).map_err(err)?;
        let next = numbers(&dir).map_err(err)?.last().map_or(0, |n| n + 1);
        let mut sink = Sink::new(Target::Dir { dir, rotation, file: None });
        // Opened now, so an unwritable directory is found before the run.
        sink.start_file(next).map_err(|e| match e {
            SinkError::Write { source, .. } => err(source),
            e => e,
        })?;
        Ok(sink)
    }

    /// A sink that writes nowhere (`--export-clickhouse` without `--export`).
    pub fn nowhere() -> Sink {
        Sink::new(Target::Nowhere)
    }

    fn new(target: Target) -> Sink {
        Sink { target, lines: 0, dropped: 0, rotations: 0, deleted: 0, planted: 0, pending: None, failed: None }
    }

    /// Creates file `n` (or the next free number past names already taken), then deletes the
    /// oldest beyond `keep`.
    fn start_file(&mut self, mut n: u64) -> Result<(), SinkError> {
        let Target::Dir { dir, rotation, file } = &mut self.target else { return Ok(()) };
        let f = loop {
            match dir.create_new(&file_name(n)) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && self.planted < PLANTED_MAX => {
                    self.planted += 1;
                    n += 1;
                }
                r => {
                    break r.map_err(|source| SinkError::Write {
                        path: dir.join(&file_name(n)).display().to_string(),
                        source,
                    })?;
                }
            }
        };
        *file = Some(Current { n, file: f, written: 0, buf: Vec::with_capacity(BUFFER), lines: 0 });
        let all = numbers(dir).map_err(|source| SinkError::Write { path: dir.path.display().to_string(), source })?;
        for old in all.iter().take(all.len().saturating_sub(rotation.keep.max(1))) {
            if dir.remove(&file_name(*old)).is_ok() {
                self.deleted += 1;
            }
        }
        Ok(())
    }

    /// Writes one line (without its newline, which this adds). A file system error while the
    /// lines of an interval go out is kept for [`Sink::flush`] to return (the lines it cost are
    /// counted as dropped), so that one interval's lines are all tried.
    pub fn line(&mut self, line: &[u8]) -> Result<(), SinkError> {
        let need = line.len() as u64 + 1;
        let rotate = match &self.target {
            Target::Stdout | Target::Nowhere => None,
            Target::Dir { rotation, file, .. } => file.as_ref().and_then(|c| {
                let used = c.written + c.buf.len() as u64;
                (used > 0 && used + need > rotation.max_bytes).then_some(c.n + 1)
            }),
        };
        if let Some(n) = rotate {
            self.write_out();
            self.rotations += 1;
            if let Err(e) = self.start_file(n) {
                self.pending.get_or_insert(e);
            }
        }
        match &mut self.target {
            Target::Nowhere => Ok(()),
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                self.lines += 1;
                out.write_all(line)
                    .and_then(|_| out.write_all(b"\n"))
                    .map_err(|source| SinkError::Write { path: "-".into(), source })
            }
            Target::Dir { file: Some(c), .. } => {
                c.buf.extend_from_slice(line);
                c.buf.push(b'\n');
                c.lines += 1;
                if c.buf.len() >= BUFFER {
                    self.write_out();
                }
                Ok(())
            }
            Target::Dir { file: None, .. } => {
                self.dropped += 1;
                Ok(())
            }
        }
    }

    /// Pushes the buffered lines to the file (or standard output): after each interval's
    /// lines. Returns the first error since the last flush.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        match self.target {
            Target::Stdout => {
                return std::io::stdout().flush().map_err(|source| SinkError::Write { path: "-".into(), source });
            }
            Target::Nowhere => return Ok(()),
            Target::Dir { .. } => {}
        }
        self.write_out();
        let e = self.pending.take();
        if let Some(e) = &e {
            self.failed.get_or_insert_with(|| crate::model::error_chain(e));
        }
        e.map_or(Ok(()), Err)
    }

    /// Writes the buffered lines whole. When the file system takes only part of them, the file
    /// is cut back to its last whole line and the lines are counted as dropped. A directory
    /// removed while the run went on is noticed here: it is created again and the lines go to
    /// a new file there (the error is kept, to be said), instead of into a file nobody can
    /// reach.
    fn write_out(&mut self) {
        if self.dir_removed() {
            let Target::Dir { dir, file, .. } = &mut self.target else { return };
            let path = dir.path.clone();
            let kept = file.take().map(|c| (c.n, c.buf, c.lines));
            let err = std::io::Error::other("the export directory was removed while the program ran; created again");
            self.pending.get_or_insert(SinkError::Dir { path: path.display().to_string(), source: err });
            match OutDir::create_all(&path) {
                Ok(d) => {
                    *dir = d;
                    let (n, buf, lines) = kept.unwrap_or_default();
                    if let Err(e) = self.start_file(n + 1) {
                        self.dropped += lines;
                        self.pending.get_or_insert(e);
                        return;
                    }
                    if let Target::Dir { file: Some(c), .. } = &mut self.target {
                        (c.buf, c.lines) = (buf, lines);
                    }
                }
                Err(source) => {
                    self.dropped += kept.map_or(0, |k| k.2);
                    self.pending.get_or_insert(SinkError::Dir { path: path.display().to_string(), source });
                    return;
                }
            }
        }
        let Target::Dir { dir, file: Some(c), .. } = &mut self.target else { return };
        if c.buf.is_empty() {
            return;
        }
        match c.file.write_all(&c.buf) {
            Ok(()) => {
                c.written += c.buf.len() as u64;
                self.lines += c.lines;
            }
            Err(source) => {
                // Whatever part of the lines reached the file goes: whole lines only.
                use std::io::Seek;
                let _ = c.file.set_len(c.written);
                let _ = c.file.seek(std::io::SeekFrom::Start(c.written));
                self.dropped += c.lines;
                let path = dir.join(&file_name(c.n)).display().to_string();
                self.pending.get_or_insert(SinkError::Write { path, source });
            }
        }
        c.buf.clear();
        c.lines = 0;
    }

    fn dir_removed(&self) -> bool {
        matches!(&self.target, Target::Dir { dir, .. } if dir.deleted())
    }

    /// What the report says of this sink.
    pub fn stats(&self) -> crate::model::ExportStats {
        crate::model::ExportStats {
            lines: self.lines,
            dropped: self.dropped,
            rotations: self.rotations,
            deleted: self.deleted,
            skipped: self.planted,
            clickhouse: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_keeps_the_newest_and_never_splits_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sink::open(dir.path(), Rotation { max_bytes: 25, keep: 3 }).unwrap();
        for i in 0..10 {
            s.line(format!("line {i:04} ........").as_bytes()).unwrap(); // 19 bytes + newline
        }
        s.flush().unwrap();
        let f = files(dir.path()).unwrap();
        assert_eq!(f.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![7, 8, 9], "one line per file, 3 kept");
        assert_eq!((s.rotations, s.deleted), (9, 7));
        assert_eq!(std::fs::read_to_string(&f[2].1).unwrap(), "line 0009 ........\n");
        // A restarted writer continues after the highest number.
        let mut s = Sink::open(dir.path(), Rotation { max_bytes: 1 << 20, keep: 3 }).unwrap();
        s.line(b"next").unwrap();
        s.flush().unwrap();
        let f = files(dir.path()).unwrap();
        assert_eq!(f.last().unwrap().0, 10);
        assert_eq!(std::fs::read_to_string(&f.last().unwrap().1).unwrap(), "next\n");
    }

    #[test]
    fn names_are_numbered_and_recognised() {
        assert_eq!(file_name(42), "roce-analyzer-000042.ndjson");
        assert_eq!(file_number("roce-analyzer-000042.ndjson"), Some(42));
        assert_eq!(file_number("roce-analyzer-1234567.ndjson"), Some(1_234_567));
        for other in ["roce-analyzer-.ndjson", "roce-analyzer-12.json", "x-000001.ndjson", "roce-analyzer-1a.ndjson"] {
            assert_eq!(file_number(other), None, "{other}");
        }
    }

    #[test]
    fn an_unusable_directory_is_an_error_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"").unwrap();
        let e = Sink::open(&file, Rotation { max_bytes: 100, keep: 2 }).err().expect("a file is not a directory");
        assert!(e.to_string().contains("plain"), "{e}");
    }
}
