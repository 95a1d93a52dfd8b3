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

use super::error::DirError;
use super::private_group::{group_name, is_private_group};

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
        sys::open(path, euid, false)
    }

    /// Opens the cache directory `path`, creating what is missing of it (mode 0755).
    pub fn create(path: &Path, euid: u32) -> Result<CacheDir, DirError> {
        sys::open(path, euid, true)?.ok_or_else(|| DirError::Io(io::ErrorKind::NotFound.into()))
    }
}

/// The mode a directory loadscan creates gets (before the umask): 0755.
const DIR_MODE: Mode = Mode::RWXU.union(Mode::RGRP).union(Mode::XGRP).union(Mode::ROTH).union(Mode::XOTH);

/// Whether what `uid` owns may be trusted by `euid`: its own, or root's.
pub(super) fn trusted_owner(uid: u32, euid: u32) -> bool {
    uid == euid || uid == Uid::ROOT.as_raw()
}

/// Whether a directory with this owner, group and mode may hold (or lead to) the cache of
/// `euid`. Group-writable is fine when the group is `euid`'s private group (`private_group.rs`).
fn dir_refusal(shown: &Path, (uid, gid): (u32, u32), mode: Mode, euid: u32) -> Option<String> {
    if !trusted_owner(uid, euid) {
        return Some(format!("{} is owned by uid {uid}, not by root or uid {euid}", shown.display()));
    }
    if mode.contains(Mode::SVTX) || !mode.intersects(Mode::WGRP | Mode::WOTH) {
        return None;
    }
    let bits = (mode & (Mode::RWXU | Mode::RWXG | Mode::RWXO)).bits();
    if mode.contains(Mode::WOTH) {
        return Some(format!("{} is writable by others (mode {bits:o})", shown.display()));
    }
    if is_private_group(gid, euid) {
        return None;
    }
    let group = group_name(gid).map_or(format!("gid {gid}"), |name| format!("{name} (gid {gid})"));
    Some(format!(
        "{} is writable by group {group}, which is not a private group of uid {euid} alone (mode {bits:o})",
        shown.display()
    ))
}

#[cfg(target_os = "linux")]
mod sys {
    //! Linux: everything relative to directory fds, flags and errnos from rustix.
    use super::*;
    use rustix::fs::{openat, statat, AtFlags, FileType, OFlags, CWD};
    use rustix::io::Errno;
    use std::collections::VecDeque;
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt;

    /// How many symlinks a cache dir path may go through: a bound of ours, as generous as
    /// Linux's own for one path lookup.
    const MAX_SYMLINKS: usize = 40;

    fn refused(msg: String) -> DirError {
        DirError::Refused(msg)
    }

    fn check_dir(fd: &OwnedFd, shown: &Path, euid: u32) -> Result<(), DirError> {
        let st = rustix::fs::fstat(fd).map_err(io::Error::from)?;
        match dir_refusal(shown, (st.st_uid, st.st_gid), Mode::from_raw_mode(st.st_mode), euid) {
            Some(why) => Err(refused(why)),
            None => Ok(()),
        }
    }

    fn open_dir_at(at: &OwnedFd, name: &[u8], flags: OFlags) -> rustix::io::Result<OwnedFd> {
        openat(at, name, flags | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
    }

    fn root() -> io::Result<OwnedFd> {
        Ok(openat(CWD, "/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
    }

    fn components(bytes: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
        bytes.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".").map(<[u8]>::to_vec)
    }

    pub(super) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirError> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.first() != Some(&b'/') {
            return Err(refused(format!("{:?} is not an absolute path", path)));
        }
        let mut todo: VecDeque<Vec<u8>> = components(bytes).collect();
        let last = match todo.pop_back() {
            Some(l) if l != b".." => l,
            _ => return Err(refused(format!("{} does not name a directory of its own", path.display()))),
        };
        let mut fd = root()?;
        let mut shown = PathBuf::from("/");
        check_dir(&fd, &shown, euid)?;
        let mut links = 0;
        while let Some(comp) = todo.pop_front() {
            if comp == b".." {
                fd = open_dir_at(&fd, b"..", OFlags::PATH).map_err(io::Error::from)?;
                shown.pop();
                check_dir(&fd, &shown, euid)?;
                continue;
            }
            let here = shown.join(std::ffi::OsStr::from_bytes(&comp));
            match statat(&fd, comp.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(refused(format!("{}: too many symlinks", path.display())));
                    }
                    if !trusted_owner(st.st_uid, euid) {
                        return Err(refused(format!(
                            "{} is a symlink owned by uid {}, not by root or uid {euid}",
                            here.display(),
                            st.st_uid
                        )));
                    }
                    let target = rustix::fs::readlinkat(&fd, comp.as_slice(), Vec::new()).map_err(io::Error::from)?;
                    let target = target.as_bytes();
                    for c in components(target).collect::<Vec<_>>().into_iter().rev() {
                        todo.push_front(c);
                    }
                    if target.first() == Some(&b'/') {
                        fd = root()?;
                        shown = PathBuf::from("/");
                    }
                    continue;
                }
                Ok(_) => {}
                Err(Errno::NOENT) if create => match rustix::fs::mkdirat(&fd, comp.as_slice(), DIR_MODE) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(DirError::Io(e.into())),
                },
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(DirError::Io(e.into())),
            }
            fd = match open_dir_at(&fd, &comp, OFlags::PATH) {
                Ok(fd) => fd,
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    return Err(refused(format!("{} is not a directory", here.display())));
                }
                Err(e) => return Err(DirError::Io(e.into())),
            };
            shown = here;
            check_dir(&fd, &shown, euid)?;
        }
        // The cache directory itself: never through a symlink.
        let here = shown.join(std::ffi::OsStr::from_bytes(&last));
        let mut made = false;
        let dir = loop {
            match open_dir_at(&fd, &last, OFlags::RDONLY) {
                Ok(d) => break d,
                Err(Errno::NOENT) if create && !made => match rustix::fs::mkdirat(&fd, last.as_slice(), DIR_MODE) {
                    Ok(()) | Err(Errno::EXIST) => made = true,
                    Err(e) => return Err(DirError::Io(e.into())),
                },
                Err(Errno::NOENT) if !create => return Ok(None),
                Err(Errno::LOOP) => return Err(refused(format!("{} is a symlink", here.display()))),
                Err(Errno::NOTDIR) => {
                    let link = statat(&fd, last.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                    let what = if link { "a symlink" } else { "not a directory" };
                    return Err(refused(format!("{} is {what}", here.display())));
                }
                Err(e) => return Err(DirError::Io(e.into())),
            }
        };
        check_dir(&dir, &here, euid)?;
        Ok(Some(CacheDir { path: path.to_path_buf(), euid, fd: dir }))
    }
}

#[cfg(not(target_os = "linux"))]
use portable as sys;

/// Other systems (macOS): the same checks by path with std only. Every directory on the way is
/// checked after resolving symlinks above the cache dir, so no other user can swap a name on
/// it; the cache dir itself is checked with `lstat`.
#[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
#[allow(dead_code)] // compiled on Linux with `portable-readdir` so that `cargo check` covers it
mod portable {
    use super::*;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};

    fn check(md: &std::fs::Metadata, shown: &Path, euid: u32) -> Result<(), DirError> {
        match dir_refusal(shown, (md.uid(), md.gid()), Mode::from_bits_truncate(md.mode() as _), euid) {
            Some(why) => Err(DirError::Refused(why)),
            None => Ok(()),
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirError> {
        Ok(open_path(path, euid, create)?.map(|path| CacheDir { path, euid }))
    }

    /// The checked cache directory's path (`None`: it does not exist yet).
    #[allow(clippy::useless_conversion)] // mode_t is u16 on macOS, u32 on Linux
    pub(super) fn open_path(path: &Path, euid: u32, create: bool) -> Result<Option<PathBuf>, DirError> {
        if !path.is_absolute() {
            return Err(DirError::Refused(format!("{:?} is not an absolute path", path)));
        }
        let (Some(parent), Some(_)) = (path.parent(), path.file_name()) else {
            return Err(DirError::Refused(format!("{} does not name a directory of its own", path.display())));
        };
        let parent = match std::fs::canonicalize(parent) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                open_path(parent, euid, true)?;
                std::fs::canonicalize(parent)?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        for dir in parent.ancestors() {
            check(&std::fs::metadata(dir)?, dir, euid)?;
        }
        let here = parent.join(path.file_name().unwrap_or_default());
        let md = match std::fs::symlink_metadata(&here) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                match std::fs::DirBuilder::new().mode(DIR_MODE.bits().into()).create(&here) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e.into()),
                    _ => std::fs::symlink_metadata(&here)?,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if md.file_type().is_symlink() {
            return Err(DirError::Refused(format!("{} is a symlink", here.display())));
        }
        if !md.is_dir() {
            return Err(DirError::Refused(format!("{} is not a directory", here.display())));
        }
        check(&md, &here, euid)?;
        Ok(Some(here))
    }
}
