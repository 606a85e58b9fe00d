//! Writing reports: atomically (temporary file in the same directory, then rename), or to
//! stdout for `-`.

use std::io::Write;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: cannot write report")]
    Io { path: String, source: std::io::Error },
}

/// The temporary file a write to `dir/name` goes through, for process `pid`.
fn temp_name(name: &str, pid: u32) -> String {
    format!(".{name}.{pid}.tmp")
}

/// Before a run: makes sure `path` can be written (so a long live run does not find out at
/// its end), and removes temporary files that earlier runs writing the same path left behind
/// when they were killed mid-write (their process is gone). Returns how many it removed.
pub fn prepare(path: &Path) -> Result<usize, WriteError> {
    let io = |source| WriteError::Io { path: path.display().to_string(), source };
    if path == Path::new("-") {
        return Ok(0);
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(io(std::io::Error::other("is a directory"))),
        Ok(m) if !m.is_file() => {
            std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
            return Ok(0);
        }
        _ => {}
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "report".into());
    let mut removed = 0;
    let prefix = format!(".{name}.");
    for e in std::fs::read_dir(dir).map_err(io)?.filter_map(Result::ok) {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(pid) =
            file.strip_prefix(&prefix).and_then(|r| r.strip_suffix(".tmp")).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    // Can a file be created there (the directory exists and is writable)?
    let probe = dir.join(temp_name(&name, std::process::id()));
    std::fs::File::create(&probe).map_err(io)?;
    let _ = std::fs::remove_file(&probe);
    Ok(removed)
}

/// Writes `text` to `path` atomically, or to stdout when `path` is `-`.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), WriteError> {
    write_atomic_with(path, |w| w.write_all(text))
}

/// Writes what `fill` writes to `path` atomically (a temporary file in the same directory,
/// then a rename), or to stdout for `-`, through a buffer: nothing is held whole in memory.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let io = |source| WriteError::Io { path: path.display().to_string(), source };
    if path == Path::new("-") {
        return buffered(&mut std::io::stdout().lock(), fill).map_err(io);
    }
    // A device, FIFO or socket (e.g. /dev/null) is written in place: renaming over it would
    // replace the special file itself.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
        return buffered(&mut f, fill).map_err(io);
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "report".into());
    let tmp = dir.join(temp_name(&name, std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        buffered(&mut f, fill)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
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
pub fn write_json(path: &Path, report: &crate::model::Report) -> Result<(), WriteError> {
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
    path: &Path,
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
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        write_atomic(Path::new("/dev/null"), b"x").unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file(), "/dev/null is still a device");
        assert!(write_atomic(&dir.path().join("missing/dir/r.json"), b"x").is_err());
    }
}
