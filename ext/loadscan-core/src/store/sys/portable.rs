//! Other systems (macOS): the same checks by path with std only. The cache directory
//! (`cache_dir.rs`): every directory on the way is checked after resolving symlinks above the
//! cache dir, so no other user can swap a name on it; the cache dir itself is checked with
//! `lstat`. The files in it (`file.rs`) are checked with `lstat`, and a file opened for reading
//! must be the one checked (same device and inode).

use rustix::fs::Mode;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::store::cache_dir::{check_owner_and_mode, CacheDir, DIR_MODE};
use crate::store::error::{DirErrorKind, LoadErrorKind};
use crate::store::file::{file_refusal, starts_with, type_name, CACHE_MODE, STALE_TEMP};
use crate::store::names::signature;

// ---- the cache directory

fn check(md: &std::fs::Metadata, shown: &Path, euid: u32) -> Result<(), DirErrorKind> {
    check_owner_and_mode(shown, (md.uid(), md.gid()), Mode::from_bits_truncate(md.mode() as _), euid)
}

#[cfg(not(target_os = "linux"))]
pub(in crate::store) fn open(path: &Path, euid: u32, create: bool) -> Result<Option<CacheDir>, DirErrorKind> {
    Ok(open_path(path, euid, create)?.map(|path| CacheDir { path, euid }))
}

/// The checked cache directory's path (`None`: it does not exist yet).
#[allow(clippy::useless_conversion)] // mode_t is u16 on macOS, u32 on Linux
pub(in crate::store) fn open_path(path: &Path, euid: u32, create: bool) -> Result<Option<PathBuf>, DirErrorKind> {
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

// ---- the files in it

pub(in crate::store) fn open_file(dir: &CacheDir, name: &str) -> Result<File, LoadErrorKind> {
    let path = dir.path.join(name);
    let before = match std::fs::symlink_metadata(&path) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(LoadErrorKind::Missing),
        Err(e) => return Err(LoadErrorKind::Io(e)),
    };
    let file_type = rustix::fs::FileType::from_raw_mode(before.mode() as _);
    if !before.file_type().is_file() {
        return Err(LoadErrorKind::NotAFile(type_name(file_type)));
    }
    let file = File::open(&path).map_err(LoadErrorKind::Io)?;
    let md = file.metadata().map_err(LoadErrorKind::Io)?;
    if (md.dev(), md.ino()) != (before.dev(), before.ino()) || !md.is_file() {
        return Err(LoadErrorKind::NotAFile("file replaced while opened"));
    }
    match file_refusal(md.uid(), Mode::from_bits_truncate(md.mode() as _), dir.euid) {
        Some(e) => Err(e),
        None => Ok(file),
    }
}

#[allow(clippy::useless_conversion)] // mode_t is u16 on macOS, u32 on Linux
pub(in crate::store) fn create_new(dir: &CacheDir, name: &str) -> io::Result<File> {
    // O_CREAT | O_EXCL never follows a symlink.
    OpenOptions::new().write(true).create_new(true).mode(CACHE_MODE.bits().into()).open(dir.path.join(name))
}

pub(in crate::store) fn dir_writable(dir: &CacheDir) -> bool {
    use rustix::fs::{Access, AtFlags, CWD};
    rustix::fs::accessat(CWD, &dir.path, Access::WRITE_OK | Access::EXEC_OK, AtFlags::EACCESS).is_ok()
}

pub(in crate::store) fn replaceable(dir: &CacheDir, name: &str) -> io::Result<bool> {
    match open_file(dir, name) {
        Err(LoadErrorKind::Missing) => Ok(true),
        Err(LoadErrorKind::Io(e)) => Err(e),
        Err(_) => Ok(false),
        Ok(mut f) => Ok(f.metadata()?.len() == 0 || starts_with(&mut f, signature(name))),
    }
}

pub(in crate::store) fn remove_file(dir: &CacheDir, name: &str) -> io::Result<bool> {
    let path = dir.path.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(md) if md.file_type().is_file() || md.file_type().is_symlink() => std::fs::remove_file(path).map(|_| true),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

pub(in crate::store) fn rename(dir: &CacheDir, from: &str, to: &str) -> io::Result<()> {
    std::fs::rename(dir.path.join(from), dir.path.join(to))
}

pub(in crate::store) fn remove(dir: &CacheDir, name: &str) {
    let _ = std::fs::remove_file(dir.path.join(name));
}

pub(in crate::store) fn remove_stale_temp_files(dir: &CacheDir, name: &str) {
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
