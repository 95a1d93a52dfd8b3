//! Reading and writing the cache file safely, in a [`CacheDir`] (opened and checked by
//! `cache_dir.rs`).
//!
//! Inside that directory, loadscan only ever touches names of its own (`names.rs`: the cache file,
//! `loadscan.cache`, the last boot's `last_boot.json`, and their temp files), relative to the directory's fd (`openat`, `renameat`, `unlinkat`), never
//! follows a symlink (`O_NOFOLLOW`), never blocks on a fifo (`O_NONBLOCK`), and never replaces
//! a file that is not a loadscan cache owned by the current user.
//!
//! Reading refuses anything that is not a regular file owned by the current user and
//! writable by nobody else (otherwise anyone who can write to a shared cache dir could make
//! the app require their code). Its header is read and checked first, then its size against
//! the header and against [`MAX_FILE_LEN`], and only then the file. Writing goes to a temp file
//! created exclusively in the cache dir, then renamed over the old file: a process killed at
//! any point leaves either the old file or the new one.
//!
//! There is no `fsync`. It cost 10–20 ms per write here (a third of a cold boot's own work),
//! and it only matters after a power loss or kernel crash, where the file may be left empty or
//! torn: the reader then rejects it by its length and CRC32 (one warning, one rescan), so a
//! crash costs one slow boot, never a wrong answer. A cache is a cache.

use rustix::fs::Mode;
use std::io::{self, Read, Seek, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::cache_dir::{trusted_owner, CacheDir};
use super::error::{LoadError, LoadErrorKind};
use super::layout::header;
use super::snapshot::{check_header, Snapshot};
use super::sys;

/// The largest cache file loadscan reads. The file is read whole into memory, so its size is
/// memory the boot spends: a 50,000-feature cache is 1.8 MB and an 800-gem app listed in full
/// about 7 MB, so 256 MiB leaves a margin of more than 30 while keeping a stray or hostile file
/// (a sparse file claims any size at no disk cost) from costing more than that, or from
/// aborting the process on a failed allocation.
pub const MAX_FILE_LEN: u64 = 256 << 20;

impl CacheDir {
    /// Loads and checks the cache file `name` for the environment key `env`.
    pub fn load(&self, name: &str, env: &[u8]) -> Result<Snapshot, LoadError> {
        self.read(name, env).map_err(|kind| LoadError::new(self.path.join(name), kind))
    }

    fn read(&self, name: &str, env: &[u8]) -> Result<Snapshot, LoadErrorKind> {
        let mut file = sys::open_file(self, name)?;
        let len = file.metadata().map_err(LoadErrorKind::Io)?.len();
        let mut head = [0u8; header::LEN];
        let mut got = 0;
        while got < header::LEN {
            match file.read(&mut head[got..]) {
                Ok(0) => return Err(LoadErrorKind::Corrupt("not a loadscan cache (bad magic or too short)")),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LoadErrorKind::Io(e)),
            }
        }
        check_header(&head, len)?;
        if len > MAX_FILE_LEN {
            return Err(LoadErrorKind::Corrupt("larger than a cache can be (256 MiB)"));
        }
        file.rewind().map_err(LoadErrorKind::Io)?;
        let bytes = super::buffer::read_all(&mut file, len as usize).map_err(LoadErrorKind::Io)?;
        Snapshot::parse(bytes, env)
    }

    /// Reads the small file `name` whole (at most `max` bytes), trusted as [`CacheDir::load`]
    /// trusts the cache file: a regular file, not through a symlink, without blocking on a fifo,
    /// owned by this user or root and writable by no one else. `Ok(None)`: there is none.
    pub fn read_small(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>, LoadErrorKind> {
        let file = match sys::open_file(self, name) {
            Ok(file) => file,
            Err(LoadErrorKind::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(LoadErrorKind::Io)?;
        if bytes.len() as u64 > max {
            return Err(LoadErrorKind::TooLarge(max));
        }
        Ok(Some(bytes))
    }

    /// Opens the file `name` to read, trusted as [`CacheDir::load`] trusts the cache file.
    pub fn open_trusted(&self, name: &str) -> Result<std::fs::File, LoadErrorKind> {
        sys::open_file(self, name)
    }

    /// Whether the file `name` may be written over: absent, or a file of loadscan's under that
    /// name (by its first bytes) owned by this user.
    pub fn replaceable(&self, name: &str) -> io::Result<bool> {
        sys::replaceable(self, name)
    }

    /// Whether this user may write the file `name` here: the directory lets it create and
    /// rename files (asked with the effective ids; a read-only mount does not) and `name` is
    /// absent or its own (`replaceable`). A cache root built for other users (a Docker image's)
    /// is read-only to them.
    pub fn may_write(&self, name: &str) -> bool {
        sys::dir_writable(self) && self.replaceable(name).unwrap_or(false)
    }

    /// Removes `name` when it is a regular file or a symlink (the link itself); whether it did.
    pub(crate) fn remove_file(&self, name: &str) -> io::Result<bool> {
        sys::remove_file(self, name)
    }

    /// Writes `bytes` to the cache file `name` atomically for other processes (temp file,
    /// rename; see the module docs for why there is no fsync). An existing `name` is only
    /// replaced when it is a loadscan cache owned by this user. A writer killed before the rename
    /// leaves the previous file untouched and a temp file removed by a later write
    /// (tests/crash.rs kills real writers).
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
        sys::remove_stale_temp_files(self, name);
        let tmp = format!(".{name}.tmp.{}.{}", std::process::id(), now_tag());
        let result = (|| {
            let mut f = sys::create_new(self, &tmp)?;
            f.write_all(bytes)?;
            drop(f);
            if !sys::replaceable(self, name)? {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{name} exists and is not a file of loadscan's of this user; not replacing it"),
                ));
            }
            sys::rename(self, &tmp, name)?;
            Ok(self.path.join(name))
        })();
        if result.is_err() {
            sys::remove(self, &tmp);
        }
        result
    }
}

/// Whether the file's first bytes are `signature`.
pub(super) fn starts_with(file: &mut impl Read, signature: &[u8]) -> bool {
    let mut head = vec![0u8; signature.len()];
    file.read_exact(&mut head).is_ok() && head == signature
}

fn now_tag() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// What a file that is not a regular one is, in a refusal: `not a regular file (fifo)`.
pub(super) fn type_name(file_type: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType;
    match file_type {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "unknown file type",
    }
}

/// Whether a cache file with this owner and mode may be read by `euid`: its own, or root's (a
/// cache built as root — a Docker image layer — served read-only to the app's user; root can
/// change anything anyway, so trusting its file adds nothing an attacker could use).
pub(super) fn file_refusal(uid: u32, mode: Mode, euid: u32) -> Option<LoadErrorKind> {
    if !trusted_owner(uid, euid) {
        return Some(LoadErrorKind::Untrusted(format!("owned by uid {uid}, not by root or uid {euid}")));
    }
    if mode.intersects(Mode::WGRP | Mode::WOTH) {
        let perms = mode & (Mode::RWXU | Mode::RWXG | Mode::RWXO);
        return Some(LoadErrorKind::Untrusted(format!("writable by group or others (mode {:o})", perms.bits())));
    }
    None
}

/// The mode a new cache file is created with (before the umask): 0644.
pub(super) const CACHE_MODE: Mode = Mode::RUSR.union(Mode::WUSR).union(Mode::RGRP).union(Mode::ROTH);

/// Stale temp files are those of killed writers, older than this.
pub(super) const STALE_TEMP: Duration = Duration::from_secs(600);
