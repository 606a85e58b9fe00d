//! Where export lines go: standard output, or a directory of numbered NDJSON files rotated by
//! size and count. A line is never split across files; a restarted agent continues after the
//! highest number it finds, so nothing an earlier run wrote is overwritten.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

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
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter_map(|e| file_number(&e.file_name().to_string_lossy()).map(|n| (n, e.path())))
        .collect();
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

enum Target {
    Stdout,
    Dir { dir: PathBuf, rotation: Rotation, file: Option<(u64, std::io::BufWriter<File>)>, written: u64 },
}

pub struct Sink {
    target: Target,
    /// Files closed because they were full.
    pub rotations: u64,
    /// Files deleted to keep `--export-keep`.
    pub deleted: u64,
}

impl Sink {
    /// `-` is standard output; anything else a directory (created if missing).
    pub fn open(path: &Path, rotation: Rotation) -> Result<Sink, SinkError> {
        if path == Path::new("-") {
            return Ok(Sink { target: Target::Stdout, rotations: 0, deleted: 0 });
        }
        let err = |source| SinkError::Dir { path: path.display().to_string(), source };
        std::fs::create_dir_all(path).map_err(err)?;
        let next = files(path).map_err(err)?.last().map_or(0, |(n, _)| n + 1);
        let mut sink = Sink {
            target: Target::Dir { dir: path.to_path_buf(), rotation, file: None, written: 0 },
            rotations: 0,
            deleted: 0,
        };
        // Opened now, so an unwritable directory is found before the run.
        sink.start_file(next).map_err(|e| match e {
            SinkError::Write { source, .. } => err(source),
            e => e,
        })?;
        Ok(sink)
    }

    fn start_file(&mut self, n: u64) -> Result<(), SinkError> {
        let Target::Dir { dir, rotation, file, written } = &mut self.target else { return Ok(()) };
        let path = dir.join(file_name(n));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| SinkError::Write { path: path.display().to_string(), source })?;
        *written = f.metadata().map(|m| m.len()).unwrap_or(0);
        *file = Some((n, std::io::BufWriter::new(f)));
        let all = files(dir).map_err(|source| SinkError::Write { path: dir.display().to_string(), source })?;
        for (_, old) in all.iter().take(all.len().saturating_sub(rotation.keep.max(1))) {
            if std::fs::remove_file(old).is_ok() {
                self.deleted += 1;
            }
        }
        Ok(())
    }

    /// Writes one line (without its newline, which this adds).
    pub fn line(&mut self, line: &[u8]) -> Result<(), SinkError> {
        let need = line.len() as u64 + 1;
        let rotate = match &self.target {
            Target::Stdout => None,
            Target::Dir { rotation, file, written, .. } => {
                let n = file.as_ref().map_or(0, |(n, _)| *n);
                (*written > 0 && written + need > rotation.max_bytes).then_some(n + 1)
            }
        };
        if let Some(n) = rotate {
            self.flush()?;
            self.rotations += 1;
            self.start_file(n)?;
        }
        match &mut self.target {
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(line)
                    .and_then(|_| out.write_all(b"\n"))
                    .map_err(|source| SinkError::Write { path: "-".into(), source })
            }
            Target::Dir { dir, file: Some((n, w)), written, .. } => {
                *written += need;
                w.write_all(line)
                    .and_then(|_| w.write_all(b"\n"))
                    .map_err(|source| SinkError::Write { path: dir.join(file_name(*n)).display().to_string(), source })
            }
            Target::Dir { .. } => Ok(()),
        }
    }

    /// Pushes what is buffered to the file (or standard output): after each interval's lines.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        match &mut self.target {
            Target::Stdout => std::io::stdout().flush().map_err(|source| SinkError::Write { path: "-".into(), source }),
            Target::Dir { dir, file: Some((n, w)), .. } => w
                .flush()
                .map_err(|source| SinkError::Write { path: dir.join(file_name(*n)).display().to_string(), source }),
            Target::Dir { .. } => Ok(()),
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
