//! Why a cache file or directory was not used: which one, and what was wrong with it.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a cache file was not used: the file, and what was wrong with it. Displayed as one line,
/// `corrupt cache (bad checksum): /app/tmp/cache/loadscan/loadscan.cache`.
#[derive(Debug)]
pub struct LoadError {
    path: PathBuf,
    kind: LoadErrorKind,
}

/// What was wrong with a cache file. `Missing` (no cache yet) and `Stale` (an upgrade) are not
/// faults; the others deserve a warning.
#[derive(Debug)]
pub enum LoadErrorKind {
    /// There is no cache file yet.
    Missing,
    /// A file from another format, Ruby or loadscan version.
    Stale(&'static str),
    /// Damaged: truncated, wrong magic, bad checksum, inconsistent sections, too big.
    Corrupt(&'static str),
    /// Not a regular file: what it is (`symlink`, `fifo`, `directory`…).
    NotAFile(&'static str),
    /// Over the bytes a file of this name may have (a last boot's record: 64 KiB).
    TooLarge(u64),
    /// Owned by someone else, or writable by group or others (the file or its directory).
    Untrusted(String),
    /// The file could not be read.
    Io(io::Error),
}

impl LoadError {
    /// What was wrong with the cache file at `path`.
    pub fn new(path: PathBuf, kind: LoadErrorKind) -> Self {
        LoadError { path, kind }
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was wrong with it.
    pub fn kind(&self) -> &LoadErrorKind {
        &self.kind
    }

    /// What was wrong with it, taken out.
    pub fn into_kind(self) -> LoadErrorKind {
        self.kind
    }
}

impl fmt::Display for LoadErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadErrorKind::Missing => write!(f, "no cache yet"),
            LoadErrorKind::Stale(why) => write!(f, "outdated cache ({why})"),
            LoadErrorKind::Corrupt(why) => write!(f, "corrupt cache ({why})"),
            LoadErrorKind::NotAFile(what) => write!(f, "cache path is not a regular file ({what})"),
            LoadErrorKind::TooLarge(max) => write!(f, "larger than {max} bytes"),
            LoadErrorKind::Untrusted(why) => write!(f, "untrusted cache ({why})"),
            LoadErrorKind::Io(e) => write!(f, "cache unreadable ({e})"),
        }
    }
}

impl Error for LoadErrorKind {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            LoadErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.path.display())
    }
}

impl Error for LoadError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.kind.source()
    }
}

/// Why a cache directory is not used: the directory, and what was wrong. Displayed as one line,
/// `/app/tmp/cache/loadscan: /app/tmp is writable by others (mode 777)`.
#[derive(Debug)]
pub struct DirError {
    path: PathBuf,
    kind: DirErrorKind,
}

/// What was wrong with a cache directory.
#[derive(Debug)]
pub enum DirErrorKind {
    /// Unsafe to use (see `cache_dir.rs`): `at`, the cache directory or a directory or symlink
    /// on the way to it, `why` (`is writable by others (mode 777)`).
    Refused {
        /// The path that failed the checks.
        at: PathBuf,
        /// What is wrong with it, a phrase that follows the path.
        why: String,
    },
    /// It, or a directory on the way to it, could not be opened or created.
    Io(io::Error),
}

impl DirError {
    pub(crate) fn new(path: PathBuf, kind: DirErrorKind) -> Self {
        DirError { path, kind }
    }

    /// The cache directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was wrong with it.
    pub fn kind(&self) -> &DirErrorKind {
        &self.kind
    }

    /// What was wrong with it, taken out.
    pub fn into_kind(self) -> DirErrorKind {
        self.kind
    }
}

/// For callers that speak `io::Error`: an I/O failure as it was, a refusal as
/// `PermissionDenied` around the whole [`DirError`].
impl From<DirError> for io::Error {
    fn from(e: DirError) -> io::Error {
        match e.kind {
            DirErrorKind::Io(io) => io,
            kind => io::Error::new(io::ErrorKind::PermissionDenied, DirError { kind, ..e }),
        }
    }
}

impl DirErrorKind {
    /// A refusal of `at` (displayed as given), for `why`.
    pub(crate) fn refused(at: &Path, why: impl Into<String>) -> Self {
        DirErrorKind::Refused { at: at.to_path_buf(), why: why.into() }
    }
}

impl From<io::Error> for DirErrorKind {
    fn from(e: io::Error) -> Self {
        DirErrorKind::Io(e)
    }
}

impl From<rustix::io::Errno> for DirErrorKind {
    fn from(e: rustix::io::Errno) -> Self {
        DirErrorKind::Io(e.into())
    }
}

impl fmt::Display for DirErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirErrorKind::Refused { at, why } => write!(f, "{} {why}", at.display()),
            DirErrorKind::Io(e) => write!(f, "{e}"),
        }
    }
}

impl Error for DirErrorKind {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DirErrorKind::Io(e) => Some(e),
            DirErrorKind::Refused { .. } => None,
        }
    }
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.kind)
    }
}

impl Error for DirError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.kind.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_naming_the_path_and_the_io_error_is_the_source() {
        let denied = || io::Error::from(io::ErrorKind::PermissionDenied);
        let file = LoadError::new("/c/loadscan.cache".into(), LoadErrorKind::Corrupt("bad checksum"));
        assert_eq!(file.to_string(), "corrupt cache (bad checksum): /c/loadscan.cache");
        assert!(file.source().is_none());
        let file = LoadError::new("/c/loadscan.cache".into(), LoadErrorKind::Io(denied()));
        assert!(file.to_string().starts_with("cache unreadable (permission denied"), "{file}");
        assert_eq!(file.source().unwrap().to_string(), denied().to_string());

        let dir = DirError::new("/a/c".into(), DirErrorKind::refused(Path::new("/a"), "is writable by others"));
        assert_eq!(dir.to_string(), "/a/c: /a is writable by others");
        assert!(dir.source().is_none());
        let dir = DirError::new("/a/c".into(), DirErrorKind::Io(denied()));
        assert_eq!(dir.to_string(), format!("/a/c: {}", denied()));
        assert!(dir.source().is_some());
    }
}
