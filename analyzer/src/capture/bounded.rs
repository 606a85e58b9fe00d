//! Reading a whole input file (a topology, a report, an export file) that another program or
//! user may have made hostile: only a regular file (a FIFO would block for ever, `/dev/zero`
//! never ends), and at most a bound of bytes (`/dev/zero` linked as an export file, or a
//! 100 MB line, took gigabytes before).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    #[error("is a {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("is larger than {max} bytes (the bound for {flag}; --input-max-bytes)")]
    TooLarge { max: u64, flag: &'static str },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a file that is not regular is, for the error.
fn kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match t {
        t if t.is_dir() => "directory",
        t if t.is_fifo() => "FIFO",
        t if t.is_char_device() => "character device",
        t if t.is_block_device() => "block device",
        t if t.is_socket() => "socket",
        _ => "special file",
    }
}

/// The bytes of the regular file `path`, at most `max` of them (`flag` names the bound in the
/// error). Opened without blocking, so a FIFO is refused instead of waited on.
pub fn read(path: &Path, max: u64, flag: &'static str) -> Result<Vec<u8>, BoundedError> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(BoundedError::NotRegular(kind(meta.file_type())));
    }
    if meta.len() > max {
        return Err(BoundedError::TooLarge { max, flag });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // A file that grows while read (or lies about its size) is still cut at the bound.
    f.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(BoundedError::TooLarge { max, flag });
    }
    Ok(out)
}

/// The default bound of [`read`] for reports, export files and topologies
/// (`--input-max-bytes`).
pub const INPUT_MAX: u64 = 4 << 30;

/// `text` cut to its first `max` characters, with "…" when cut: an error quotes at most an
/// excerpt of what a hostile input held.
pub fn excerpt(mut text: String, max: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read(&f, 5, "--x").unwrap(), b"12345");
        assert!(matches!(read(&f, 4, "--x"), Err(BoundedError::TooLarge { max: 4, .. })));
        assert!(matches!(read(dir.path(), 4, "--x"), Err(BoundedError::NotRegular("directory"))));
        assert!(matches!(read(Path::new("/dev/zero"), 4, "--x"), Err(BoundedError::NotRegular("character device"))));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(read(&fifo, 4, "--x"), Err(BoundedError::NotRegular("FIFO"))), "refused, not waited on");
    }

    #[test]
    fn an_excerpt_keeps_whole_characters() {
        assert_eq!(excerpt("µµµ".into(), 2), "µµ…");
        assert_eq!(excerpt("ab".into(), 2), "ab");
    }
}
