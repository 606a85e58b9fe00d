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
pub fn write_json(path: &Path, report: &super::Report) -> Result<(), WriteError> {
    write_atomic_with(path, |w| {
        serde_json::to_writer_pretty(&mut *w, report).map_err(std::io::Error::from)?;
        w.write_all(b"\n")
    })
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
