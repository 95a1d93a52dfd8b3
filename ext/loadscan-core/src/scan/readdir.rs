//! Reading one directory: names with the file type `readdir` reports (`d_type`), so no `stat`
//! is paid per entry. Only symlinks and entries of unknown type cost one `stat` (following the
//! link), as `require`'s own `open` would follow it.
//!
//! On Linux this is `rustix::fs::RawDir`: `getdents64` into one stack buffer, no allocation per
//! entry. Elsewhere `std::fs::read_dir`, whose `DirEntry::file_type` also comes from `d_type`
//! but allocates a `DirEntry` (with its name) per entry.
//!
//! Measured (`examples/scan.rs`, median of 5, warm page cache, 2 cores; the `portable-readdir`
//! feature builds the std path on Linux): one thread, 50k files in 800 gem dirs: RawDir 238–245
//! ms, std 313–331 ms; Rails over 360 Debian package dirs (11k files): 13.3 ms vs 16.3–18.3 ms.
//! With two threads the gap narrows (190–218 vs 212–246 ms) as the kernel's directory reads
//! dominate. jwalk was not considered: it is unmaintained.

use std::io;
use std::path::Path;

use super::case::Ask;
use super::listing::DirStamp;

/// What listing a directory found besides its entries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Listed {
    /// Its identity and change stamp.
    pub(crate) stamp: DirStamp,
    /// It was asked (see [`Ask`]) and its names fold case: `require` may open an entry under
    /// another spelling, so the directory must be left to Ruby (`super::case`).
    pub(crate) folds: bool,
}

/// The errors the scanner tells apart, never by a number written by hand (they differ between
/// systems, `ELOOP` is 40 on Linux and 62 on macOS, where 62 is `ETIME` on Linux). On Linux
/// rustix's `Errno`; elsewhere (and with `portable-readdir`, so Linux tests cover it) std's
/// error kinds, by name: std names `NotADirectory` and `FilesystemLoop` but lets code match
/// them only from Rust 1.83 (this crate's `rust-version` is older) and not yet, respectively.
pub(crate) mod errno {
    use std::io;

    /// `ENOENT`.
    pub(crate) fn not_found(e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::NotFound
    }

    /// `ENOTDIR`.
    #[cfg(all(target_os = "linux", not(feature = "portable-readdir")))]
    pub(crate) fn not_dir(e: &io::Error) -> bool {
        e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error())
    }

    /// `ELOOP`.
    #[cfg(all(target_os = "linux", not(feature = "portable-readdir")))]
    pub(crate) fn is_loop(e: &io::Error) -> bool {
        e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
    }

    /// `ENOTDIR`.
    #[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
    pub(crate) fn not_dir(e: &io::Error) -> bool {
        kind_named(e, "NotADirectory")
    }

    /// `ELOOP`.
    #[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
    pub(crate) fn is_loop(e: &io::Error) -> bool {
        kind_named(e, "FilesystemLoop")
    }

    #[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
    fn kind_named(e: &io::Error, name: &str) -> bool {
        format!("{:?}", e.kind()) == name
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn tells_the_errors_apart() {
            let dir = std::env::temp_dir().join(format!("loadscan-errno-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("file"), b"").unwrap();
            std::os::unix::fs::symlink("loop", dir.join("loop")).unwrap();
            let not_dir = std::fs::metadata(dir.join("file/x")).unwrap_err();
            let looped = std::fs::metadata(dir.join("loop")).unwrap_err();
            let absent = std::fs::metadata(dir.join("none")).unwrap_err();
            assert!(super::not_dir(&not_dir) && !super::is_loop(&not_dir) && !super::not_found(&not_dir));
            assert!(super::is_loop(&looped) && !super::not_dir(&looped) && !super::not_found(&looped));
            assert!(super::not_found(&absent) && !super::not_dir(&absent) && !super::is_loop(&absent));
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

impl Entry {
    /// A small tag for the listing digest.
    pub(crate) fn tag(&self) -> u64 {
        match self {
            Entry::Dir => 1,
            Entry::File => 2,
            Entry::Ignore => 3,
            Entry::Dangling(_) => 4,
            Entry::Unknown(_) => 5,
        }
    }
}

/// The digest contribution of one entry; a directory's digest is the wrapping sum over its
/// entries, so the order `readdir` returns them in does not matter.
pub(crate) fn entry_digest(name: &[u8], found: &Entry) -> u64 {
    crate::hash::unseeded_hash(name).wrapping_add(found.tag().wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// What a directory entry is, after following a symlink.
#[derive(Debug)]
pub(crate) enum Entry {
    /// A directory (or a symlink to one).
    Dir,
    /// Something `require` can open and load: a regular file, or a fifo / character device
    /// (Ruby's `rb_file_load_ok` accepts those too).
    File,
    /// Something `require` cannot load (socket, block device).
    Ignore,
    /// A symlink whose target is missing or is a loop of links.
    Dangling(io::Error),
    /// A symlink (or entry of unknown type) that could not be `stat`ed for another reason.
    Unknown(io::Error),
}

#[cfg(all(target_os = "linux", not(feature = "portable-readdir")))]
mod imp {
    use super::*;
    use crate::scan::case::{self, ByType};
    use rustix::fs::{fstat, openat, statat, AtFlags, FileType, Mode, OFlags, RawDir, CWD};
    use std::mem::MaybeUninit;

    fn from_type(t: FileType) -> Entry {
        match t {
            FileType::Directory => Entry::Dir,
            FileType::RegularFile | FileType::Fifo | FileType::CharacterDevice => Entry::File,
            _ => Entry::Ignore,
        }
    }

    pub(crate) fn list(path: &Path, ask: Ask, mut visit: impl FnMut(&[u8], Entry)) -> io::Result<Listed> {
        let fd = openat(CWD, path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let st = fstat(&fd)?;
        let stamp = DirStamp::of_stat(&st);
        let by_type = if ask.wanted(stamp.dev) { case::by_type(&fd) } else { ByType::Exact };
        let mut sample: Option<Vec<u8>> = None;
        let mut buf = [MaybeUninit::<u8>::uninit(); 32 * 1024];
        let mut dir = RawDir::new(&fd, &mut buf);
        while let Some(entry) = dir.next() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if by_type == ByType::Probe && sample.is_none() {
                sample = case::swapped(name);
            }
            let found = match entry.file_type() {
                FileType::Symlink | FileType::Unknown => match statat(&fd, entry.file_name(), AtFlags::empty()) {
                    Ok(st) => from_type(FileType::from_raw_mode(st.st_mode)),
                    Err(e) if e == rustix::io::Errno::NOENT || e == rustix::io::Errno::LOOP => {
                        Entry::Dangling(e.into())
                    }
                    Err(e) => Entry::Unknown(e.into()),
                },
                t => from_type(t),
            };
            visit(name, found);
        }
        let folds = match by_type {
            ByType::Exact => false,
            ByType::Folds => true,
            ByType::Probe => case::folds_by_lookup(sample.map(|name| {
                statat(&fd, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW).map(|_| ()).map_err(io::Error::from)
            })),
        };
        Ok(Listed { stamp, folds })
    }
}

#[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
mod imp {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;

    fn from_type(t: std::fs::FileType) -> Entry {
        if t.is_dir() {
            Entry::Dir
        } else if t.is_file() || t.is_fifo() || t.is_char_device() {
            Entry::File
        } else {
            Entry::Ignore
        }
    }

    pub(crate) fn list(path: &Path, ask: Ask, mut visit: impl FnMut(&[u8], Entry)) -> io::Result<Listed> {
        let md = std::fs::metadata(path)?;
        if !md.is_dir() {
            // The system's own ENOTDIR, whatever its number.
            std::fs::read_dir(path)?;
            return Err(io::Error::other("replaced while being listed"));
        }
        let stamp = DirStamp::of(&md);
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let t = entry.file_type()?;
            let found = if t.is_symlink() {
                match std::fs::metadata(entry.path()) {
                    Ok(md) => from_type(md.file_type()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Entry::Dangling(e),
                    Err(e) => Entry::Unknown(e),
                }
            } else {
                from_type(t)
            };
            visit(entry.file_name().as_bytes(), found);
        }
        let folds = ask.wanted(stamp.dev) && crate::scan::case::folds_at(path);
        Ok(Listed { stamp, folds })
    }
}

pub(crate) use imp::list;
