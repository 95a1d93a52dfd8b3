//! The cache directory, opened once per use through directory file descriptors, as careful
//! tools do (ssh's `StrictModes`, git's `safe.directory`): every directory on the way to it,
//! and the cache directory itself, must be owned by root or by the current user and not
//! writable by group or others unless sticky (as `/tmp` is); a symlink on the way must be owned
//! by root or the current user too, and the cache directory's own last component is never
//! followed. Anything else is refused: the boot then runs without a cache. Without these
//! checks, another user who can create a directory or a symlink on the way (`/tmp/cache`, the
//! default for a program run from `/`) could make loadscan read and overwrite a file of the
//! victim's choosing. A group-writable directory whose group is the user's private group (no
//! other member: Debian's and Fedora's default for what a user creates) is not shared, and is
//! accepted (`private_group.rs`). What is done inside it is in `file.rs`.

use rustix::fs::{Mode, Uid};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::error::{DirError, DirErrorKind};
use super::private_group::{group_name, is_private_group};
use super::sys;

/// An opened, checked cache directory.
pub struct CacheDir {
    pub(super) path: PathBuf,
    pub(super) euid: u32,
    #[cfg(target_os = "linux")]
    pub(super) fd: std::os::fd::OwnedFd,
}

impl fmt::Debug for CacheDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheDir").field("path", &self.path).finish()
    }
}

impl CacheDir {
    /// Opens the cache directory `path` for the user `euid`: `Ok(None)` when it does not exist
    /// yet (everything above it that exists passed the checks).
    pub fn open(path: &Path, euid: u32) -> Result<Option<CacheDir>, DirError> {
        sys::open(path, euid, false).map_err(|kind| DirError::new(path.to_path_buf(), kind))
    }

    /// Opens the cache directory `path`, creating what is missing of it (mode 0755).
    pub fn create(path: &Path, euid: u32) -> Result<CacheDir, DirError> {
        match sys::open(path, euid, true) {
            Ok(Some(dir)) => Ok(dir),
            Ok(None) => Err(DirError::new(path.to_path_buf(), io::Error::from(io::ErrorKind::NotFound).into())),
            Err(kind) => Err(DirError::new(path.to_path_buf(), kind)),
        }
    }
}

/// The mode a directory loadscan creates gets (before the umask): 0755.
pub(super) const DIR_MODE: Mode = Mode::RWXU.union(Mode::RGRP).union(Mode::XGRP).union(Mode::ROTH).union(Mode::XOTH);

/// Whether what `uid` owns may be trusted by `euid`: its own, or root's.
pub(super) fn trusted_owner(uid: u32, euid: u32) -> bool {
    uid == euid || uid == Uid::ROOT.as_raw()
}

/// Whether a directory `shown` with this owner, group and mode may hold (or lead to) the cache
/// of `euid`. Group-writable is fine when the group is `euid`'s private group
/// (`private_group.rs`).
pub(super) fn check_owner_and_mode(
    shown: &Path,
    (uid, gid): (u32, u32),
    mode: Mode,
    euid: u32,
) -> Result<(), DirErrorKind> {
    if !trusted_owner(uid, euid) {
        return Err(DirErrorKind::refused(shown, format!("is owned by uid {uid}, not by root or uid {euid}")));
    }
    if mode.contains(Mode::SVTX) || !mode.intersects(Mode::WGRP | Mode::WOTH) {
        return Ok(());
    }
    let bits = (mode & (Mode::RWXU | Mode::RWXG | Mode::RWXO)).bits();
    if mode.contains(Mode::WOTH) {
        return Err(DirErrorKind::refused(shown, format!("is writable by others (mode {bits:o})")));
    }
    if is_private_group(gid, euid) {
        return Ok(());
    }
    let group = group_name(gid).map_or(format!("gid {gid}"), |name| format!("{name} (gid {gid})"));
    Err(DirErrorKind::refused(
        shown,
        format!("is writable by group {group}, which is not a private group of uid {euid} alone (mode {bits:o})"),
    ))
}
