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
const DIR_MODE: Mode = Mode::RWXU.union(Mode::RGRP).union(Mode::XGRP).union(Mode::ROTH).union(Mode::XOTH);

/// Whether what `uid` owns may be trusted by `euid`: its own, or root's.
pub(super) fn trusted_owner(uid: u32, euid: u32) -> bool {
    uid == euid || uid == Uid::ROOT.as_raw()
}

/// Whether a directory `shown` with this owner, group and mode may hold (or lead to) the cache
/// of `euid`. Group-writable is fine when the group is `euid`'s private group
/// (`private_group.rs`).
fn check_owner_and_mode(shown: &Path, (uid, gid): (u32, u32), mode: Mode, euid: u32) -> Result<(), DirErrorKind> {
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

#[cfg(target_os = "linux")]
mod sys {
    //! Linux: everything relative to directory fds, flags and errnos from rustix.
    use super::*;
    use rustix::fs::{openat, statat, AtFlags, FileType, OFlags, CWD};
    use rustix::io::Errno;
    use std::collections::VecDeque;
    use std::ffi::OsStr;
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt;

    /// How many symlinks a cache dir path may go through: a bound of ours, as generous as
    /// Linux's own for one path lookup.
    const MAX_SYMLINKS: usize = 40;

    fn check_dir(fd: &OwnedFd, shown: &Path, euid: u32) -> Result<(), DirErrorKind> {
        let st = rustix::fs::fstat(fd)?;
        check_owner_and_mode(shown, (st.st_uid, st.st_gid), Mode::from_raw_mode(st.st_mode), euid)
    }

    fn open_dir_at(at: &OwnedFd, name: &[u8], flags: OFlags) -> rustix::io::Result<OwnedFd> {
        openat(at, name, flags | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
    }

    fn root() -> rustix::io::Result<OwnedFd> {
        openat(CWD, "/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    }

    /// Makes the directory `name` in `at` (mode 0755); one that exists already is fine.
    fn make_dir_at(at: &OwnedFd, name: &[u8]) -> rustix::io::Result<()> {
        match rustix::fs::mkdirat(at, name, DIR_MODE) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn components(bytes: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
        bytes.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".").map(<[u8]>::to_vec)
    }

    /// The components of `path` on the way to the cache directory, and its own last one.
    fn split(path: &Path) -> Result<(VecDeque<Vec<u8>>, Vec<u8>), DirErrorKind> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.first() != Some(&b'/') {
            return Err(DirErrorKind::refused(path, "is not an absolute path"));
        }
        let mut todo: VecDeque<Vec<u8>> = components(bytes).collect();
        match todo.pop_back() {
            Some(last) if last != b".." => Ok((todo, last)),
            _ => Err(DirErrorKind::refused(path, "does not name a directory of its own")),
        }
    }

    /// Where the walk to the cache directory is: the directory open (`O_PATH`) and its path as
    /// shown in refusals, the components still to go, and the symlinks gone through.
    struct Way {
        fd: OwnedFd,
        shown: PathBuf,
        todo: VecDeque<Vec<u8>>,
        links: usize,
    }

    impl Way {
        /// Goes through the symlink `comp` (at `here`, owned by `uid`): its target's components
        /// come next, from `/` when it is absolute.
        fn follow(&mut self, comp: &[u8], here: &Path, uid: u32, euid: u32) -> Result<(), DirErrorKind> {
            self.links += 1;
            if self.links > MAX_SYMLINKS {
                return Err(DirErrorKind::refused(
                    here,
                    format!("is a symlink past the {MAX_SYMLINKS} allowed on the way"),
                ));
            }
            if !trusted_owner(uid, euid) {
                return Err(DirErrorKind::refused(
                    here,
                    format!("is a symlink owned by uid {uid}, not by root or uid {euid}"),
                ));
            }
            let target = rustix::fs::readlinkat(&self.fd, comp, Vec::new())?;
            let target = target.as_bytes();
            for c in components(target).collect::<Vec<_>>().into_iter().rev() {
                self.todo.push_front(c);
            }
            if target.first() == Some(&b'/') {
                self.fd = root()?;
                self.shown = PathBuf::from("/");
            }
            Ok(())
        }

        /// Goes down into `comp` (making it if `create`), or up for `..`, checking where it
        /// arrives. `false`: `comp` does not exist (and is not to be made).
        fn enter(&mut self, comp: &[u8], euid: u32, create: bool) -> Result<bool, DirErrorKind> {
            if comp == b".." {
                self.fd = open_dir_at(&self.fd, b"..", OFlags::PATH)?;
                self.shown.pop();
                check_dir(&self.fd, &self.shown, euid)?;
                return Ok(true);
            }
            let here = self.shown.join(OsStr::from_bytes(comp));
            match statat(&self.fd, comp, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    self.follow(comp, &here, st.st_uid, euid)?;
                    return Ok(true);
                }
                Ok(_) => {}
                Err(Errno::NOENT) if create => make_dir_at(&self.fd, comp)?,
                Err(Errno::NOENT) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
            self.fd = match open_dir_at(&self.fd, comp, OFlags::PATH) {
                Ok(fd) => fd,
                Err(Errno::NOTDIR | Errno::LOOP) => return Err(DirErrorKind::refused(&here, "is not a directory")),
                Err(e) => return Err(e.into()),
            };
            self.shown = here;
            check_dir(&self.fd, &self.shown, euid)?;
            Ok(true)
        }

        /// Opens the cache directory itself, `last` (at `here`), never through a symlink;
        /// `None` when it does not exist (and is not to be made).
        fn open_last(&self, last: &[u8], here: &Path, create: bool) -> Result<Option<OwnedFd>, DirErrorKind> {
            let mut made = false;
            loop {
                match open_dir_at(&self.fd, last, OFlags::RDONLY) {
                    Ok(d) => return Ok(Some(d)),
                    Err(Errno::NOENT) if create && !made => {
                        make_dir_at(&self.fd, last)?;
                        made = true;
                    }
                    Err(Errno::NOENT) if !create => return Ok(None),
                    Err(Errno::LOOP) => return Err(DirErrorKind::refused(here, "is a symlink")),
                    Err(Errno::NOTDIR) => {
                        let link = statat(&self.fd, last, AtFlags::SYMLINK_NOFOLLOW)
                            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                        return Err(DirErrorKind::refused(
                            here,
                            if link { "is a symlink" } else { "is not a directory" },
                        ));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    pub(super) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirErrorKind> {
        let (todo, last) = split(path)?;
        let mut way = Way { fd: root()?, shown: PathBuf::from("/"), todo, links: 0 };
        check_dir(&way.fd, &way.shown, euid)?;
        while let Some(comp) = way.todo.pop_front() {
            if !way.enter(&comp, euid, create)? {
                return Ok(None);
            }
        }
        let here = way.shown.join(OsStr::from_bytes(&last));
        let Some(dir) = way.open_last(&last, &here, create)? else { return Ok(None) };
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

    fn check(md: &std::fs::Metadata, shown: &Path, euid: u32) -> Result<(), DirErrorKind> {
        check_owner_and_mode(shown, (md.uid(), md.gid()), Mode::from_bits_truncate(md.mode() as _), euid)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirErrorKind> {
        Ok(open_path(path, euid, create)?.map(|path| CacheDir { path, euid }))
    }

    /// The checked cache directory's path (`None`: it does not exist yet).
    #[allow(clippy::useless_conversion)] // mode_t is u16 on macOS, u32 on Linux
    pub(super) fn open_path(path: &Path, euid: u32, create: bool) -> Result<Option<PathBuf>, DirErrorKind> {
        if !path.is_absolute() {
            return Err(DirErrorKind::refused(path, "is not an absolute path"));
        }
        let (Some(parent), Some(_)) = (path.parent(), path.file_name()) else {
            return Err(DirErrorKind::refused(path, "does not name a directory of its own"));
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
            return Err(DirErrorKind::refused(&here, "is a symlink"));
        }
        if !md.is_dir() {
            return Err(DirErrorKind::refused(&here, "is not a directory"));
        }
        check(&md, &here, euid)?;
        Ok(Some(here))
    }
}
