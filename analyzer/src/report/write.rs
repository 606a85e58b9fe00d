//! Writing reports: atomically (a temporary file in the same directory, then a rename, both
//! under the directory's handle: [`OutDir`]), or to stdout for `-`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::out_dir::OutDir;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: cannot write report")]
    Io { path: String, source: std::io::Error },
}

/// Where a report goes, decided before any work: standard output, a device or FIFO the user
/// named (written in place), or a regular file replaced atomically under the handle of its
/// directory opened at start ([`OutDir`]).
#[derive(Debug, Clone)]
pub enum Target {
    Stdout,
    Special(PathBuf),
    File { dir: Arc<OutDir>, name: String },
}

impl Target {
    /// The path, for messages.
    pub fn path(&self) -> PathBuf {
        match self {
            Target::Stdout => PathBuf::from("-"),
            Target::Special(p) => p.clone(),
            Target::File { dir, name } => dir.join(name),
        }
    }

    /// Before a run: makes sure `path` can be written (so a long live run does not find out
    /// at its end), opens its directory, and removes temporary files that earlier runs writing
    /// the same path left behind when they were killed mid-write (their process is gone).
    /// Returns the target and how many it removed.
    pub fn prepare(path: &Path) -> Result<(Target, usize), WriteError> {
        let io = |source| WriteError::Io { path: path.display().to_string(), source };
        if path == Path::new("-") {
            return Ok((Target::Stdout, 0));
        }
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(io(std::io::Error::other("is a directory"))),
            Ok(m) if !m.is_file() && named_by_us(path) => {
                std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
                return Ok((Target::Special(path.to_path_buf()), 0));
            }
            _ => {}
        }
        let (dir, name) = OutDir::of_file(path).map_err(io)?;
        let mut removed = 0;
        for file in dir.names().map_err(io)? {
            if temp_of(&file, &name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
                && dir.remove(&file).is_ok()
            {
                removed += 1;
            }
        }
        // Can a file be created there (the directory is writable)?
        let (_, probe) = dir.temp(&name).map_err(io)?;
        let _ = dir.remove(&probe);
        Ok((Target::File { dir: Arc::new(dir), name }, removed))
    }
}

/// The report's files, prepared before any work ([`Target::prepare`]).
#[derive(Debug, Default, Clone)]
pub struct Prepared {
    pub json: Option<Target>,
    pub html: Option<Target>,
    pub dot: Option<Target>,
}

/// Whether a special file at `path` is one the user named: reached directly or through a
/// link of this user's (a link someone else planted to a device is replaced, not written to).
fn named_by_us(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| !m.file_type().is_symlink() || m.uid() == rustix::process::geteuid().as_raw())
}

/// The process id in `file` when it is a temporary file of a write to `name`
/// (`.name.PID.RANDOM.tmp`, or `.name.PID.tmp` as earlier versions named them).
fn temp_of(file: &str, name: &str) -> Option<u32> {
    let rest = file.strip_prefix('.')?.strip_prefix(name)?.strip_prefix('.')?.strip_suffix(".tmp")?;
    rest.split('.').next()?.parse().ok()
}

/// Writes `text` to `target` atomically.
pub fn write_atomic(target: &Target, text: &[u8]) -> Result<(), WriteError> {
    write_atomic_with(target, |w| w.write_all(text))
}

/// Writes what `fill` writes to `target` atomically (a temporary file of an unpredictable name
/// in the same directory, then a rename), or in place for standard output and special files,
/// through a buffer: nothing is held whole in memory.
pub fn write_atomic_with(
    target: &Target,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let io = |source| WriteError::Io { path: target.path().display().to_string(), source };
    let (dir, name) = match target {
        Target::Stdout => return buffered(&mut std::io::stdout().lock(), fill).map_err(io),
        Target::Special(path) => {
            let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
            return buffered(&mut f, fill).map_err(io);
        }
        Target::File { dir, name } => (dir, name),
    };
    if dir.deleted() {
        return Err(io(std::io::Error::other("its directory was removed while the program ran")));
    }
    let (mut f, tmp) = dir.temp(name).map_err(io)?;
    let result = (|| {
        buffered(&mut f, fill)?;
        f.sync_all()?;
        dir.rename(&tmp, name)
    })();
    if result.is_err() {
        let _ = dir.remove(&tmp);
    }
    result.map_err(io)
}

/// `fill` writing into `w` through a buffer, flushed.
fn buffered(w: &mut dyn Write, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut b = std::io::BufWriter::with_capacity(1 << 16, w);
    fill(&mut b)?;
    b.flush()
}

/// Writes the report as pretty JSON with a trailing newline, streamed ([`write_atomic_with`]).
pub fn write_json(path: &Target, report: &crate::model::Report) -> Result<(), WriteError> {
    write_atomic_with(path, |w| {
        serde_json::to_writer_pretty(&mut *w, report).map_err(std::io::Error::from)?;
        w.write_all(b"\n")
    })
}

/// Writes a report assembled without its growing lists ([`super::assemble::Lists::Streamed`]),
/// streaming `flows`, `pairs` and `ecmp.host_pairs` from `run` one item at a time into the
/// places the report leaves empty: byte for byte what [`write_json`] writes of the whole
/// report (tested), without holding the lists.
pub fn write_json_streamed(
    path: &Target,
    report: &crate::model::Report,
    run: &crate::pipeline::Pipeline,
) -> Result<(), WriteError> {
    use super::assemble::{fabric, flow_items, pair_items};
    write_atomic_with(path, |w| {
        let text = serde_json::to_string_pretty(report).map_err(std::io::Error::from)?;
        let mut rest = text.as_str();
        // In the order the report's fields come: each an empty list at its indentation.
        let mut fill = |w: &mut dyn Write, needle: &str, items: &mut dyn Iterator<Item = Vec<u8>>| {
            let at = rest.find(needle).ok_or_else(|| std::io::Error::other(format!("no {needle:?} to fill")))?;
            let head = at + needle.len() - 2; // up to the "[]"
            w.write_all(&rest.as_bytes()[..head])?;
            let indent = " ".repeat(needle.len() - needle.trim_start().len() - 1 + 2);
            write_list(w, items, &indent)?;
            rest = &rest[head + 2..];
            Ok::<(), std::io::Error>(())
        };
        fill(w, "\n  \"flows\": []", &mut flow_items(run).map(|f| pretty(&f)))?;
        fill(w, "\n  \"pairs\": []", &mut pair_items(run).map(|p| pretty(&p)))?;
        fill(w, "\n    \"host_pairs\": []", &mut fabric::host_pair_items(run).map(|h| pretty(&h)))?;
        w.write_all(rest.as_bytes())?;
        w.write_all(b"\n")
    })
}

/// A JSON list as serde_json's pretty printer writes it at `indent` (the items' indentation):
/// `[]` when empty.
fn write_list(w: &mut dyn Write, items: &mut dyn Iterator<Item = Vec<u8>>, indent: &str) -> std::io::Result<()> {
    let mut first = true;
    for item in items {
        w.write_all(if first { b"[\n" } else { b",\n" })?;
        first = false;
        w.write_all(indent.as_bytes())?;
        // Pretty JSON has no newline inside a string: every newline starts a line to indent.
        for (i, line) in item.split(|b| *b == b'\n').enumerate() {
            if i > 0 {
                w.write_all(b"\n")?;
                w.write_all(indent.as_bytes())?;
            }
            w.write_all(line)?;
        }
    }
    if first {
        return w.write_all(b"[]");
    }
    w.write_all(b"\n")?;
    w.write_all(&indent.as_bytes()[2..])?;
    w.write_all(b"]")
}

/// An item as serde_json's pretty printer writes it at the top level.
fn pretty<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // Serialising the report's own types into memory cannot fail.
    serde_json::to_vec_pretty(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_regular_files_and_writes_devices_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        std::fs::write(&p, b"old").unwrap();
        let (t, _) = Target::prepare(&p).unwrap();
        write_atomic(&t, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        let (null, _) = Target::prepare(Path::new("/dev/null")).unwrap();
        assert!(matches!(null, Target::Special(_)));
        write_atomic(&null, b"x").unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file(), "/dev/null is still a device");
        assert!(Target::prepare(&dir.path().join("missing/dir/r.json")).is_err());
    }

    #[test]
    fn links_planted_as_the_temporary_or_the_final_name_redirect_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let p = dir.path().join("r.json");
        let (t, _) = Target::prepare(&p).unwrap();
        // Every name a predictable scheme could use, planted after the start.
        for pid in [std::process::id(), std::process::id() + 1] {
            std::os::unix::fs::symlink(&victim, dir.path().join(format!(".r.json.{pid}.tmp"))).unwrap();
        }
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_atomic(&t, b"report").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink(), "the link itself was replaced");
        assert_eq!(std::fs::read(&p).unwrap(), b"report");
    }

    #[test]
    fn temporary_names_of_killed_runs_are_recognised() {
        assert_eq!(temp_of(".r.json.123.0011223344556677.tmp", "r.json"), Some(123));
        assert_eq!(temp_of(".r.json.123.tmp", "r.json"), Some(123));
        assert_eq!(temp_of(".r.json.x.tmp", "r.json"), None);
        assert_eq!(temp_of(".other.123.tmp", "r.json"), None);
    }
}
