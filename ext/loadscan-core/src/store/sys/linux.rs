//! Linux: everything relative to directory fds, flags and errnos from rustix — the walk to the
//! cache directory and its checks (`cache_dir.rs`), then the files in it (`file.rs`).

use rustix::fs::{openat, statat, Access, AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::store::cache_dir::{check_owner_and_mode, trusted_owner, CacheDir, DIR_MODE};
use crate::store::error::{DirErrorKind, LoadErrorKind};
use crate::store::file::{file_refusal, starts_with, type_name, CACHE_MODE, STALE_TEMP};
use crate::store::names::signature;

// ---- the cache directory

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
                    return Err(DirErrorKind::refused(here, if link { "is a symlink" } else { "is not a directory" }));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

pub(in crate::store) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirErrorKind> {
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

// ---- the files in it

pub(in crate::store) fn open_file(dir: &CacheDir, name: &str) -> Result<File, LoadErrorKind> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match openat(&dir.fd, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) => return Err(LoadErrorKind::Missing),
        // A symlink (ELOOP under O_NOFOLLOW), or a socket or device that refuses to be opened so.
        Err(Errno::LOOP) => return Err(LoadErrorKind::NotAFile("symlink")),
        Err(Errno::NXIO) => return Err(LoadErrorKind::NotAFile("socket or device")),
        Err(e) => return Err(LoadErrorKind::Io(e.into())),
    };
    let st = rustix::fs::fstat(&file).map_err(|e| LoadErrorKind::Io(e.into()))?;
    let file_type = FileType::from_raw_mode(st.st_mode);
    if file_type != FileType::RegularFile {
        return Err(LoadErrorKind::NotAFile(type_name(file_type)));
    }
    match file_refusal(st.st_uid, Mode::from_raw_mode(st.st_mode), dir.euid) {
        Some(e) => Err(e),
        None => Ok(file),
    }
}

/// Readable by others (subject to the umask): a cache holds names from the load path, no
/// secrets, and a cache built as root must be readable by the app's user (Docker images).
pub(in crate::store) fn create_new(dir: &CacheDir, name: &str) -> io::Result<File> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(File::from(openat(&dir.fd, name, flags, CACHE_MODE)?))
}

pub(in crate::store) fn dir_writable(dir: &CacheDir) -> bool {
    rustix::fs::accessat(&dir.fd, ".", Access::WRITE_OK | Access::EXEC_OK, AtFlags::EACCESS).is_ok()
}

/// Whether `name` may be replaced: absent, or a loadscan cache of this user.
pub(in crate::store) fn replaceable(dir: &CacheDir, name: &str) -> io::Result<bool> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mut file = match openat(&dir.fd, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) => return Ok(true),
        Err(Errno::LOOP | Errno::NXIO) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&file)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_uid != dir.euid {
        return Ok(false);
    }
    Ok(st.st_size == 0 || starts_with(&mut file, signature(name)))
}

pub(in crate::store) fn remove_file(dir: &CacheDir, name: &str) -> io::Result<bool> {
    let st = match statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile | FileType::Symlink => {
            rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty())?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

pub(in crate::store) fn rename(dir: &CacheDir, from: &str, to: &str) -> io::Result<()> {
    Ok(rustix::fs::renameat(&dir.fd, from, &dir.fd, to)?)
}

pub(in crate::store) fn remove(dir: &CacheDir, name: &str) {
    let _ = rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty());
}

/// Temp files left by killed writers (regular files of this user, older than ten minutes).
pub(in crate::store) fn remove_stale_temp_files(dir: &CacheDir, name: &str) {
    let prefix = format!(".{name}.tmp.");
    let Ok(entries) = rustix::fs::Dir::read_from(&dir.fd) else { return };
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    for e in entries.flatten() {
        let n = e.file_name().to_bytes();
        if !n.starts_with(prefix.as_bytes()) {
            continue;
        }
        #[allow(clippy::unnecessary_cast)] // st_mtime is narrower than i64 on some targets
        let stale = statat(&dir.fd, e.file_name(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                && st.st_uid == dir.euid
                && now.saturating_sub(st.st_mtime as i64) > STALE_TEMP.as_secs() as i64
        });
        if stale {
            let _ = rustix::fs::unlinkat(&dir.fd, e.file_name(), AtFlags::empty());
        }
    }
}
