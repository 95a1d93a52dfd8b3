//! Reading and writing the cache file safely.
//!
//! The cache directory is opened once per use through directory file descriptors, as careful
//! tools do (ssh's `StrictModes`, git's `safe.directory`): every directory on the way to it,
//! and the cache directory itself, must be owned by root or by the current user and not
//! writable by group or others unless sticky (as `/tmp` is); a symlink on the way must be owned
//! by root or the current user too, and the cache directory's own last component is never
//! followed. Anything else is refused: the boot then runs without a cache. Without these
//! checks, another user who can create a directory or a symlink on the way (`/tmp/cache`, the
//! default for a program run from `/`) could make loadscan read and overwrite a file of the
//! victim's choosing.
//!
//! Inside it, loadscan only ever touches names of its own (the cache file, `loadscan.cache`,
//! and its temp files), relative to the directory's fd (`openat`, `renameat`, `unlinkat`), never
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

use std::fmt;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::format::{HEADER_LEN, MAGIC};
use super::snapshot::{check_header, Snapshot};

/// The largest cache file loadscan reads. The file is read whole into memory, so its size is
/// memory the boot spends: a 50,000-feature cache is 1.8 MB and an 800-gem app listed in full
/// about 7 MB, so 256 MiB leaves a margin of more than 30 while keeping a stray or hostile file
/// (a sparse file claims any size at no disk cost) from costing more than that, or from
/// aborting the process on a failed allocation.
pub const MAX_FILE_LEN: u64 = 256 << 20;

/// Who may have written a cache file we trust.
#[derive(Clone, Copy, Debug)]
pub struct TrustPolicy {
    /// The effective uid of this process: the file must be owned by it (or by root).
    pub uid: u32,
}

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

/// An opened, checked cache directory.
pub struct CacheDir {
    path: PathBuf,
    euid: u32,
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
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

    /// The directory as it was named.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads and checks the cache file `name` for the environment key `env`.
    pub fn load(&self, name: &str, env: &[u8]) -> Result<Snapshot, LoadError> {
        let mut file = sys::open_file(self, name)?;
        let len = file.metadata().map_err(LoadError::Io)?.len();
        let mut header = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match file.read(&mut header[got..]) {
                Ok(0) => return Err(LoadError::Corrupt("not a loadscan cache (bad magic or too short)")),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LoadError::Io(e)),
            }
        }
        check_header(&header, len)?;
        if len > MAX_FILE_LEN {
            return Err(LoadError::Corrupt("larger than a cache can be (256 MiB)"));
        }
        file.rewind().map_err(LoadError::Io)?;
        let bytes = super::buffer::read_all(&mut file, len as usize).map_err(LoadError::Io)?;
        Snapshot::parse(bytes, env)
    }

    /// Whether the file `name` may be written over: absent, or a loadscan cache (by its magic)
    /// owned by this user.
    pub fn replaceable(&self, name: &str) -> io::Result<bool> {
        sys::replaceable(self, name)
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
                    format!("{} exists and is not a loadscan cache of this user; not replacing it", name),
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

/// Loads and checks the cache file at `path` (its directory is checked as [`CacheDir::open`]
/// does) for the environment key `env`.
pub fn load(path: &Path, env: &[u8], trust: TrustPolicy) -> Result<Snapshot, LoadError> {
    let (dir, name) = split(path).map_err(|e| LoadError::Untrusted(e.to_string()))?;
    match CacheDir::open(dir, trust.uid) {
        Ok(Some(d)) => d.load(name, env),
        Ok(None) => Err(LoadError::Missing),
        Err(DirError::Refused(why)) => Err(LoadError::Untrusted(why)),
        Err(DirError::Io(e)) => Err(LoadError::Io(e)),
    }
}

/// Writes `bytes` to `dir/name` (see [`CacheDir::write_atomic`]), creating `dir` if needed.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8], trust: TrustPolicy) -> io::Result<PathBuf> {
    let d = CacheDir::create(dir, trust.uid).map_err(|e| match e {
        DirError::Io(e) => e,
        DirError::Refused(why) => io::Error::new(io::ErrorKind::PermissionDenied, why),
    })?;
    d.write_atomic(name, bytes)
}

fn split(path: &Path) -> Result<(&Path, &str), DirError> {
    let bad = || DirError::Refused(format!("{}: not a cache file path", path.display()));
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(bad)?;
    Ok((path.parent().ok_or_else(bad)?, name))
}

fn now_tag() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// Whether a directory with this owner and mode may hold (or lead to) the cache of `euid`.
fn dir_refusal(shown: &Path, uid: u32, mode: u32, euid: u32) -> Option<String> {
    const GROUP_OTHER_WRITE: u32 = 0o022;
    const STICKY: u32 = 0o1000;
    if uid != 0 && uid != euid {
        return Some(format!("{} is owned by uid {uid}, not by root or uid {euid}", shown.display()));
    }
    if mode & GROUP_OTHER_WRITE != 0 && mode & STICKY == 0 {
        return Some(format!("{} is writable by group or others (mode {:o})", shown.display(), mode & 0o7777));
    }
    None
}

/// Whether a cache file with this owner and mode may be read by `euid`: its own, or root's (a
/// cache built as root — a Docker image layer — served read-only to the app's user; root can
/// change anything anyway, so trusting its file adds nothing an attacker could use).
fn file_refusal(uid: u32, mode: u32, euid: u32) -> Option<LoadError> {
    if uid != 0 && uid != euid {
        return Some(LoadError::Untrusted(format!("owned by uid {uid}, not by root or uid {euid}")));
    }
    if mode & 0o022 != 0 {
        return Some(LoadError::Untrusted(format!("writable by group or others (mode {:o})", mode & 0o777)));
    }
    None
}

/// The mode a new cache file is created with (before the umask).
const CACHE_MODE: u32 = 0o644;

/// Stale temp files are those of killed writers, older than this.
const STALE_TEMP: Duration = Duration::from_secs(600);

#[cfg(target_os = "linux")]
mod sys {
    //! Linux: everything relative to directory fds, flags and errnos from rustix.
    use super::*;
    use rustix::fs::{openat, statat, AtFlags, FileType, Mode, OFlags, CWD};
    use rustix::io::Errno;
    use std::collections::VecDeque;
    use std::fs::File;
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt;

    /// How many symlinks a cache dir path may go through (the kernel's own limit).
    const MAX_SYMLINKS: usize = 40;

    fn refused(msg: String) -> DirError {
        DirError::Refused(msg)
    }

    fn check_dir(fd: &OwnedFd, shown: &Path, euid: u32) -> Result<(), DirError> {
        let st = rustix::fs::fstat(fd).map_err(io::Error::from)?;
        match dir_refusal(shown, st.st_uid, st.st_mode, euid) {
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
                    if st.st_uid != 0 && st.st_uid != euid {
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
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&fd, comp.as_slice(), Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(DirError::Io(e.into())),
                    }
                }
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
                Err(Errno::NOENT) if create && !made => {
                    match rustix::fs::mkdirat(&fd, last.as_slice(), Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => made = true,
                        Err(e) => return Err(DirError::Io(e.into())),
                    }
                }
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

    pub(super) fn open_file(dir: &CacheDir, name: &str) -> Result<File, LoadError> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = match openat(&dir.fd, name, flags, Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(Errno::NOENT) => return Err(LoadError::Missing),
            // A symlink (ELOOP under O_NOFOLLOW), or a device that refuses to be opened so.
            Err(Errno::LOOP | Errno::NXIO) => return Err(LoadError::NotAFile),
            Err(e) => return Err(LoadError::Io(e.into())),
        };
        let st = rustix::fs::fstat(&file).map_err(|e| LoadError::Io(e.into()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(LoadError::NotAFile);
        }
        match file_refusal(st.st_uid, st.st_mode, dir.euid) {
            Some(e) => Err(e),
            None => Ok(file),
        }
    }

    /// Readable by others (subject to the umask): a cache holds names from the load path, no
    /// secrets, and a cache built as root must be readable by the app's user (Docker images).
    pub(super) fn create_new(dir: &CacheDir, name: &str) -> io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(openat(&dir.fd, name, flags, Mode::from_raw_mode(CACHE_MODE))?))
    }

    /// Whether `name` may be replaced: absent, or a loadscan cache of this user.
    pub(super) fn replaceable(dir: &CacheDir, name: &str) -> io::Result<bool> {
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
        let mut magic = [0u8; 8];
        Ok(st.st_size == 0 || (file.read_exact(&mut magic).is_ok() && &magic == MAGIC))
    }

    pub(super) fn rename(dir: &CacheDir, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&dir.fd, from, &dir.fd, to)?)
    }

    pub(super) fn remove(dir: &CacheDir, name: &str) {
        let _ = rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty());
    }

    /// Temp files left by killed writers (regular files of this user, older than ten minutes).
    pub(super) fn remove_stale_temp_files(dir: &CacheDir, name: &str) {
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
}

#[cfg(not(target_os = "linux"))]
use portable as sys;

/// Other systems (macOS): the same checks by path with std only. Every directory on the way is
/// checked after resolving symlinks above the cache dir, so no other user can swap a name on
/// it; the cache dir itself and the files in it are checked with `lstat`, and a file opened for
/// reading must be the one checked (same device and inode).
#[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
#[allow(dead_code)] // compiled on Linux with `portable-readdir` so that `cargo check` covers it
mod portable {
    use super::*;
    use std::fs::{File, OpenOptions};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};

    fn check(md: &std::fs::Metadata, shown: &Path, euid: u32) -> Result<(), DirError> {
        match dir_refusal(shown, md.uid(), md.mode(), euid) {
            Some(why) => Err(DirError::Refused(why)),
            None => Ok(()),
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirError> {
        Ok(open_path(path, euid, create)?.map(|path| CacheDir { path, euid }))
    }

    /// The checked cache directory's path (`None`: it does not exist yet).
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
                match std::fs::DirBuilder::new().mode(0o755).create(&here) {
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

    pub(super) fn open_file(dir: &CacheDir, name: &str) -> Result<File, LoadError> {
        let path = dir.path.join(name);
        let before = match std::fs::symlink_metadata(&path) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(LoadError::Missing),
            Err(e) => return Err(LoadError::Io(e)),
        };
        if !before.file_type().is_file() {
            return Err(LoadError::NotAFile);
        }
        let file = File::open(&path).map_err(LoadError::Io)?;
        let md = file.metadata().map_err(LoadError::Io)?;
        if (md.dev(), md.ino()) != (before.dev(), before.ino()) || !md.is_file() {
            return Err(LoadError::NotAFile);
        }
        match file_refusal(md.uid(), md.mode(), dir.euid) {
            Some(e) => Err(e),
            None => Ok(file),
        }
    }

    pub(super) fn create_new(dir: &CacheDir, name: &str) -> io::Result<File> {
        // O_CREAT | O_EXCL never follows a symlink.
        OpenOptions::new().write(true).create_new(true).mode(CACHE_MODE).open(dir.path.join(name))
    }

    pub(super) fn replaceable(dir: &CacheDir, name: &str) -> io::Result<bool> {
        match open_file(dir, name) {
            Err(LoadError::Missing) => Ok(true),
            Err(LoadError::Io(e)) => Err(e),
            Err(_) => Ok(false),
            Ok(mut f) => {
                let mut magic = [0u8; 8];
                Ok(f.metadata()?.len() == 0 || (f.read_exact(&mut magic).is_ok() && &magic == MAGIC))
            }
        }
    }

    pub(super) fn rename(dir: &CacheDir, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(dir.path.join(from), dir.path.join(to))
    }

    pub(super) fn remove(dir: &CacheDir, name: &str) {
        let _ = std::fs::remove_file(dir.path.join(name));
    }

    pub(super) fn remove_stale_temp_files(dir: &CacheDir, name: &str) {
        let prefix = format!(".{name}.tmp.");
        let Ok(entries) = std::fs::read_dir(&dir.path) else { return };
        for e in entries.flatten() {
            let stale = e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix))
                && std::fs::symlink_metadata(e.path()).ok().is_some_and(|m| {
                    m.file_type().is_file()
                        && m.uid() == dir.euid
                        && m.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > STALE_TEMP)
                });
            if stale {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
