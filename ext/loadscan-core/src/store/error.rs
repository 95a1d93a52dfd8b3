//! Why a cache file or directory was not used.

use std::fmt;
use std::io;

/// Why a cache file was not used. Every variant but `Missing` deserves a warning.
#[derive(Debug)]
pub enum LoadError {
    /// There is no cache file yet.
    Missing,
    /// A file from another format, Ruby or loadscan version.
    Stale(&'static str),
    /// Damaged: truncated, wrong magic, bad checksum, inconsistent sections, too big.
    Corrupt(&'static str),
    /// Not a regular file (a directory, fifo, symlink…).
    NotAFile,
    /// Owned by someone else, or writable by group or others (the file or its directory).
    Untrusted(String),
    /// The file could not be read.
    Io(io::Error),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Missing => write!(f, "no cache yet"),
            LoadError::Stale(why) => write!(f, "outdated cache ({why})"),
            LoadError::Corrupt(why) => write!(f, "corrupt cache ({why})"),
            LoadError::NotAFile => write!(f, "cache path is not a regular file"),
            LoadError::Untrusted(why) => write!(f, "untrusted cache ({why})"),
            LoadError::Io(e) => write!(f, "cache unreadable ({e})"),
        }
    }
}

/// Why a cache directory is not used.
#[derive(Debug)]
pub enum DirError {
    /// Unsafe to use (see the module docs): the reason.
    Refused(String),
    /// It could not be opened or created.
    Io(io::Error),
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirError::Refused(why) => write!(f, "{why}"),
            DirError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for DirError {
    fn from(e: io::Error) -> Self {
        DirError::Io(e)
    }
}
