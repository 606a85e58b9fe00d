//! Every file this program writes is created under a directory handle opened once, at start,
//! so that nobody who can write to that directory can redirect an output: the agent runs as
//! root, and a symlink planted under a name it is about to use (`.r.json.1234.tmp`, the next
//! export file, an evidence file) would otherwise make it overwrite or append to the link's
//! target. New files are opened `O_CREAT | O_EXCL | O_NOFOLLOW` (a planted name makes the open
//! fail, it is never followed), temporary names carry a random part nobody can predict, and the
//! final rename happens within the handle (rename replaces a link, it does not follow it).
//! A file opened again to append is opened `O_NOFOLLOW` and must be a regular file of ours.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

/// Mode of the files created (before the umask).
const FILE_MODE: u32 = 0o644;

/// An open directory that outputs are created in.
#[derive(Debug)]
pub struct OutDir {
    fd: OwnedFd,
    /// The path it was opened by, for messages.
    pub path: PathBuf,
}

impl OutDir {
    /// Opens the directory `path`, which must exist.
    pub fn open(path: &Path) -> io::Result<OutDir> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(OutDir { fd, path: path.to_path_buf() })
    }

    /// Opens the directory `path`, creating it (and its parents) when missing.
    pub fn create_all(path: &Path) -> io::Result<OutDir> {
        std::fs::create_dir_all(path)?;
        OutDir::open(path)
    }

    /// The directory a file `path` is in, opened, and the file's name in it.
    pub fn of_file(path: &Path) -> io::Result<(OutDir, String)> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().ok_or_else(|| io::Error::other("names no file"))?;
        Ok((OutDir::open(dir)?, name.to_string_lossy().into_owned()))
    }

    /// `name` in this directory, as a path for messages.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Creates `name`, which must not exist (not even as a link): `AlreadyExists` otherwise.
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(FILE_MODE))?))
    }

    /// Opens `name` to append to it: it must be a regular file owned by this process's user
    /// with one link (a link planted in its place is refused, not followed).
    pub fn append(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
        let st = rustix::fs::fstat(&fd)?;
        let ours = st.st_uid == rustix::process::geteuid().as_raw();
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
            || st.st_nlink != 1
            || !ours
        {
            return Err(io::Error::other("replaced by something this program did not create; not written"));
        }
        Ok(File::from(fd))
    }

    /// A new temporary file that will become `name`: `.name.PID.RANDOM.tmp`, created
    /// exclusively. Returns it and its name.
    pub fn temp(&self, name: &str) -> io::Result<(File, String)> {
        loop {
            let mut r = [0u8; 8];
            rustix::rand::getrandom(&mut r, rustix::rand::GetRandomFlags::empty())?;
            let tmp = format!(".{name}.{}.{:016x}.tmp", std::process::id(), u64::from_ne_bytes(r));
            match self.create_new(&tmp) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                r => return r.map(|f| (f, tmp)),
            }
        }
    }

    /// Renames `from` to `to` within this directory (replacing `to`, even a link, never its
    /// target).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Moves `name` into the directory `to` under the same name.
    pub fn move_to(&self, name: &str, to: &OutDir) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, name, &to.fd, name)?)
    }

    /// Opens the directory `name` in this one (not following a link).
    pub fn sub(&self, name: &str) -> io::Result<OutDir> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
        Ok(OutDir { fd, path: self.path.join(name) })
    }

    /// Removes the file (or link) `name`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// Creates the directory `name` in this one.
    pub fn mkdir(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755))?)
    }

    /// Whether `name` is a regular file here (not following a link).
    pub fn is_file(&self, name: &str) -> bool {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile)
    }

    /// The names in this directory (`.` and `..` left out).
    pub fn names(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in rustix::fs::Dir::read_from(&self.fd)? {
            let e = e?;
            let n = OsStr::from_bytes(e.file_name().to_bytes());
            if n != "." && n != ".." {
                out.push(n.to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }

    /// Whether the directory was removed since it was opened (its files would be written into
    /// nothing anyone can read).
    pub fn deleted(&self) -> bool {
        rustix::fs::fstat(&self.fd).is_ok_and(|st| st.st_nlink == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_is_neither_followed_nor_appended_to() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, b"precious").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("out")).unwrap();
        let dir = OutDir::open(d.path()).unwrap();
        assert_eq!(dir.create_new("out").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert!(dir.append("out").is_err(), "O_NOFOLLOW refuses the link");
        // A temporary file renamed over the link replaces the link, not its target.
        let (f, tmp) = dir.temp("out").unwrap();
        assert!(tmp.starts_with(".out.") && tmp.ends_with(".tmp") && tmp.len() > ".out.1.tmp".len() + 16, "{tmp}");
        drop(f);
        dir.rename(&tmp, "out").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        assert!(dir.is_file("out"));
    }

    #[test]
    fn two_temporary_names_differ_and_a_removed_directory_is_noticed() {
        let d = tempfile::tempdir().unwrap();
        let dir = OutDir::create_all(&d.path().join("sub")).unwrap();
        let (_, a) = dir.temp("x").unwrap();
        let (_, b) = dir.temp("x").unwrap();
        assert_ne!(a, b);
        let mut names = dir.names().unwrap();
        names.sort();
        assert_eq!(names.len(), 2);
        assert!(!dir.deleted());
        std::fs::remove_dir_all(d.path().join("sub")).unwrap();
        assert!(dir.deleted());
    }
}
