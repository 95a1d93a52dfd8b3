//! The cache file's owner: how it is opened (or why not, in one warning), written (pruned and
//! bounded), the last boot's figures beside it, and clearing both (the names: `names.rs`). Everything
//! inside the directory goes through [`CacheDir`], so one safety model covers reading, writing
//! and deleting: names of loadscan's own, relative to the checked directory's fd, never a
//! symlink followed, never a file replaced that is not loadscan's.

use std::io;
use std::path::PathBuf;

use super::names::{CACHE_FILE, CACHE_FILES, LAST_BOOT_FILE};
use super::{bound_dead_roots, encode, CacheDir, DirError, LoadErrorKind, RootRecord, Snapshot};

/// Roots off the load path this long are dropped from the cache when it is written.
const PRUNE_AFTER_S: i64 = 30 * 24 * 3600;

/// The largest last boot's record read back: one is about two kilobytes.
pub const MAX_LAST_BOOT_LEN: u64 = 64 << 10;

/// Where a process's cache lives and what it must match.
#[derive(Clone, Debug)]
pub struct CacheFile {
    /// The cache directory (see [`CacheDir`] for the checks it must pass).
    pub dir: PathBuf,
    /// Loadscan version, Ruby revision, platform, DLEXT: a file with another key is ignored.
    pub env: Vec<u8>,
    /// The uid that must own the directory and the file.
    pub uid: u32,
}

/// What opening the cache gave.
pub struct Opened {
    /// The cache's contents, when there was a usable one.
    pub snapshot: Option<Snapshot>,
    /// Why an existing cache or the directory was not used (for one warning).
    pub warning: Option<String>,
    /// Whether to write the cache at exit: not when the directory is refused or unusable, nor
    /// over a file that is not a loadscan cache (the warning given is the only one), nor over a
    /// cache this user may read but not write (no warning: a read-only cache is one).
    pub writable: bool,
}

impl CacheFile {
    /// Opens the directory and reads the cache. A missing cache, or one written for another
    /// loadscan or Ruby (an upgrade), is no problem: the boot lists what it needs and the file
    /// is written at exit.
    pub fn open(&self) -> Opened {
        let fresh = |warning: Option<String>, writable| Opened { snapshot: None, warning, writable };
        let dir = match CacheDir::open(&self.dir, self.uid) {
            Ok(Some(dir)) => dir,
            // Created when the cache is first written.
            Ok(None) => return fresh(None, true),
            Err(e) => return fresh(Some(self.not_using_dir(&e)), false),
        };
        match dir.load(CACHE_FILE, &self.env) {
            // Read-only to this user (root's, for the app's user of a Docker image; a read-only
            // mount): used as it is, quietly, never written (nor the last boot's figures).
            Ok(snapshot) => Opened { snapshot: Some(snapshot), warning: None, writable: dir.may_write(CACHE_FILE) },
            Err(e) if matches!(e.kind(), LoadErrorKind::Missing | LoadErrorKind::Stale(_)) => fresh(None, true),
            Err(e) => match dir.replaceable(CACHE_FILE) {
                Ok(true) => fresh(Some(format!("{e}; scanning instead")), true),
                _ => fresh(Some(format!("{e}; scanning instead, not replacing it")), false),
            },
        }
    }

    /// The oldest last use (seconds since the epoch) a root off the load path may have to be
    /// kept when the cache is written at `now_s`.
    pub fn prune_before(now_s: i64) -> i64 {
        now_s - PRUNE_AFTER_S
    }

    /// Writes the cache from `records` (roots off `on_path` bounded, see [`bound_dead_roots`])
    /// and the features Ruby's own search could not load, creating the directory if needed. The
    /// error is one line for a warning.
    pub fn save(
        &self,
        mut records: Vec<RootRecord>,
        not_linked_in: &[&[u8]],
        on_path: &[PathBuf],
    ) -> Result<(), String> {
        bound_dead_roots(&mut records, on_path);
        let bytes = encode(&records, not_linked_in, &self.env);
        self.write(CACHE_FILE, &bytes, true)
            .map_err(|e| format!("could not write the cache in {}: {e}", self.dir.display()))?;
        Ok(())
    }

    /// Writes the last boot's figures (`json`, one object) beside the cache, only where a cache
    /// directory exists and passes the checks. The error is one line for a warning.
    pub fn record_last_boot(&self, json: &[u8]) -> Result<(), String> {
        self.write(LAST_BOOT_FILE, json, false)
            .map_err(|e| format!("could not record this boot's figures in {} ({e})", self.dir.display()))?;
        Ok(())
    }

    /// Writes `name` in the cache dir (created if `create`); the error is a phrase that
    /// follows the directory's name.
    fn write(&self, name: &str, bytes: &[u8], create: bool) -> Result<PathBuf, String> {
        let dir = match create {
            true => CacheDir::create(&self.dir, self.uid).map(Some),
            false => CacheDir::open(&self.dir, self.uid),
        };
        match dir {
            Ok(Some(dir)) => dir.write_atomic(name, bytes).map_err(|e| e.to_string()),
            Ok(None) => Err(io::Error::from(io::ErrorKind::NotFound).to_string()),
            Err(e) => Err(e.kind().to_string()),
        }
    }

    /// Reads the last boot's figures back (the JSON [`CacheFile::record_last_boot`] wrote),
    /// trusted as the cache is (the directory's checks, then [`CacheDir::read_small`]'s, up to
    /// [`MAX_LAST_BOOT_LEN`]): `Ok(None)` when none was recorded. The error is one line for a
    /// warning, naming the file. The record is UTF-8 text (JSON) or refused here, the one place
    /// it is decoded: what reads it (a regex at setup, JSON for doctor) gets valid text or none.
    pub fn read_last_boot(&self) -> Result<Option<String>, String> {
        let path = self.dir.join(LAST_BOOT_FILE);
        let not_used = |why: String| Err(format!("{} is not used: {why}", path.display()));
        let dir = match CacheDir::open(&self.dir, self.uid) {
            Ok(Some(dir)) => dir,
            Ok(None) => return Ok(None),
            Err(e) => return not_used(e.kind().to_string()),
        };
        match dir.read_small(LAST_BOOT_FILE, MAX_LAST_BOOT_LEN) {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => Ok(Some(text)),
                Err(e) => not_used(format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to())),
            },
            Err(LoadErrorKind::NotAFile("symlink")) => not_used("it is a symlink".into()),
            Err(LoadErrorKind::NotAFile(what)) => not_used(format!("not a regular file ({what})")),
            Err(LoadErrorKind::Untrusted(why)) => not_used(why),
            Err(LoadErrorKind::Io(e)) => Err(format!("{} could not be read ({e})", path.display())),
            Err(other) => not_used(other.to_string()),
        }
    }

    /// Deletes the cache and the last boot's figures (regular files or symlinks of those names)
    /// and returns the paths removed. A directory that fails the checks is left alone: the
    /// error says why.
    pub fn clear(&self) -> Result<Vec<PathBuf>, String> {
        let dir = match CacheDir::open(&self.dir, self.uid) {
            Ok(Some(dir)) => dir,
            Ok(None) => return Ok(Vec::new()),
            Err(e) => return Err(self.not_using_dir(&e)),
        };
        let mut removed = Vec::new();
        for name in CACHE_FILES {
            match dir.remove_file(name) {
                Ok(true) => removed.push(self.dir.join(name)),
                Ok(false) => {}
                Err(e) => return Err(format!("could not remove {}: {e}", self.dir.join(name).display())),
            }
        }
        Ok(removed)
    }

    fn not_using_dir(&self, e: &DirError) -> String {
        format!("not using the cache dir {e}; booting without a cache")
    }
}
