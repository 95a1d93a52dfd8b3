//! Reading and writing the cache file safely.
//!
//! Reading refuses anything that is not a regular file owned by the current user and
//! writable by nobody else (otherwise anyone who can write to a shared cache dir could make
//! the app require their code), and never follows a symlink or blocks on a fifo. Writing goes
//! to a temp file opened exclusively in the cache dir, then renamed over the old file: a
//! process killed at any point leaves either the old file or the new one.
//!
//! There is no `fsync`. It cost 10–20 ms per write here (a third of a cold boot's own work),
//! and it only matters after a power loss or kernel crash, where the file may be left empty or
//! torn: the reader then rejects it by its length and CRC32 (one warning, one rescan), so a
//! crash costs one slow boot, never a wrong answer. A cache is a cache.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::snapshot::Snapshot;

#[cfg(target_os = "linux")]
const O_NOFOLLOW: i32 = 0o400000;
#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(target_os = "linux"))]
const O_NOFOLLOW: i32 = 0x0100;
#[cfg(not(target_os = "linux"))]
const O_NONBLOCK: i32 = 0x0004;

/// Who may have written a cache file we trust.
#[derive(Clone, Copy, Debug)]
pub struct TrustPolicy {
    /// The effective uid of this process: the file must be owned by it.
    pub uid: u32,
}

/// Why a cache file was not used. Every variant but `Missing` deserves a warning.
#[derive(Debug)]
pub enum LoadError {
    /// There is no cache file yet.
    Missing,
    /// A file from another format, Ruby or loadscan version.
    Stale(&'static str),
    /// Damaged: truncated, wrong magic, bad checksum, inconsistent sections.
    Corrupt(&'static str),
    /// Not a regular file (a directory, fifo, symlink…).
    NotAFile,
    /// Owned by someone else, or writable by group or others.
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

/// Loads and checks the cache file at `path` for the environment key `env`.
pub fn load(path: &Path, env: &[u8], trust: TrustPolicy) -> Result<Snapshot, LoadError> {
    let mut file = match OpenOptions::new().read(true).custom_flags(O_NOFOLLOW | O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(LoadError::Missing),
        // ELOOP: the path is a symlink.
        Err(e) if e.raw_os_error() == Some(40) || e.raw_os_error() == Some(62) => return Err(LoadError::NotAFile),
        Err(e) => return Err(LoadError::Io(e)),
    };
    let md = file.metadata().map_err(LoadError::Io)?;
    if !md.file_type().is_file() {
        return Err(LoadError::NotAFile);
    }
    if md.uid() != trust.uid {
        return Err(LoadError::Untrusted(format!("owned by uid {}, not {}", md.uid(), trust.uid)));
    }
    if md.mode() & 0o022 != 0 {
        return Err(LoadError::Untrusted(format!("writable by group or others (mode {:o})", md.mode() & 0o777)));
    }
    let bytes = super::buffer::read_all(&mut file, md.len() as usize).map_err(LoadError::Io)?;
    Snapshot::parse(bytes, env)
}

fn now_tag() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// Writes `bytes` to `dir/name` atomically for other processes (temp file, rename; see the
/// module docs for why there is no fsync).
/// `pause` stops halfway through the temp file (a test hook for kill -9 tests).
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8], pause: Option<Duration>) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    remove_stale_temp_files(dir, name);
    let tmp = dir.join(format!(".{name}.tmp.{}.{}", std::process::id(), now_tag()));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(O_NOFOLLOW).open(&tmp)?;
        let half = bytes.len() / 2;
        f.write_all(&bytes[..half])?;
        if let Some(p) = pause {
            f.flush()?;
            std::thread::sleep(p);
        }
        f.write_all(&bytes[half..])?;
        drop(f);
        let dest = dir.join(name);
        std::fs::rename(&tmp, &dest)?;
        Ok(dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Temp files left by killed writers, older than ten minutes.
fn remove_stale_temp_files(dir: &Path, name: &str) {
    let prefix = format!(".{name}.tmp.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let stale = e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix))
            && e.metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(600));
        if stale {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
