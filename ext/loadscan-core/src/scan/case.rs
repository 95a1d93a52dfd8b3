//! Does a directory fold case? On a case-insensitive file system (vfat, exFAT, NTFS and SMB
//! mounts, ext4/f2fs/tmpfs/bcachefs directories with the casefold attribute, WSL's `/mnt/c`, Docker
//! Desktop's bind mounts, macOS) `require "logger"` opens `Logger.rb` where the index, which
//! compares bytes, would have gone on to the stdlib's `logger.rb`. Such a directory is made a
//! blind spot, so every lookup that reaches it is answered by Ruby itself.
//!
//! Asked of each root, and of each directory on another device than its parent (a mount point
//! inside a root), never per ordinary directory: one `fstatfs` on the open directory, plus the
//! inode flags (`FS_IOC_GETFLAGS`) on the file systems whose directories can carry casefold.
//! File system types that cannot fold case answer at once; the ones that always do
//! (vfat/exFAT/HPFS/SMB) too. Any other type (FUSE, 9p, NFS, ZFS, NTFS3, …, and every type off
//! Linux) is asked by behaviour: `lstat` of one entry's name with its letters' case swapped.
//! Absent means names are exact; found, any other error, or nothing to ask with, means the
//! directory is left to Ruby. A directory listed lazily, below the eager depth, has no parent
//! at hand: it is asked when it is on another device than the one recorded for its root.

use std::io;
use std::path::Path;

/// Whether to ask a directory being listed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ask {
    /// A root: always asked.
    Always,
    /// A subdirectory whose parent is on this device: asked only when it is on another one.
    IfOffDevice(u64),
    /// Not asked: a digest for revalidation (`super::dir_digest`).
    Never,
}

impl Ask {
    pub(crate) fn wanted(self, dev: u64) -> bool {
        match self {
            Ask::Always => true,
            Ask::IfOffDevice(parent) => parent != dev,
            Ask::Never => false,
        }
    }
}

/// What the file system's type says. (Off Linux every type is asked by behaviour, so the other
/// two are never made there.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(any(not(target_os = "linux"), feature = "portable-readdir"), allow(dead_code))]
pub(crate) enum ByType {
    /// Names are compared byte for byte.
    Exact,
    /// Names fold case.
    Folds,
    /// Unknown from the type: ask by behaviour ([`folds_by_lookup`]).
    Probe,
}

/// The letters of `name` with their ASCII case swapped, or `None` when it has no ASCII letter
/// (such a name cannot tell folding from exact names).
pub(crate) fn swapped(name: &[u8]) -> Option<Vec<u8>> {
    if !name.iter().any(u8::is_ascii_alphabetic) {
        return None;
    }
    Some(
        name.iter()
            .map(|&c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
            .collect(),
    )
}

/// The verdict of the behavioural test: `lookup` of the swapped name of an entry that exists.
/// `None` (no name with a letter): undecided, counted as folding.
pub(crate) fn folds_by_lookup(swapped_lookup: Option<io::Result<()>>) -> bool {
    match swapped_lookup {
        Some(Err(e)) => e.kind() != io::ErrorKind::NotFound,
        Some(Ok(())) | None => true,
    }
}

#[cfg(all(target_os = "linux", not(feature = "portable-readdir")))]
mod imp {
    use super::ByType;
    use linux_raw_sys::general as k;
    use rustix::fd::AsFd;
    use rustix::fs::{fstatfs, ioctl_getflags};

    /// The verdict of the file system's type for the open directory `fd`.
    pub(crate) fn by_type(fd: impl AsFd) -> ByType {
        let Ok(st) = fstatfs(&fd) else {
            return ByType::Probe;
        };
        // `f_type` is a signed word; the magic numbers are 32-bit.
        match st.f_type as u32 {
            k::EXT4_SUPER_MAGIC | k::F2FS_SUPER_MAGIC | k::TMPFS_MAGIC | k::BCACHEFS_SUPER_MAGIC => {
                match ioctl_getflags(&fd) {
                    Ok(flags) if flags.bits() & k::FS_CASEFOLD_FL != 0 => ByType::Folds,
                    _ => ByType::Exact,
                }
            }
            k::XFS_SUPER_MAGIC
            | k::BTRFS_SUPER_MAGIC
            | k::OVERLAYFS_SUPER_MAGIC
            | k::SQUASHFS_MAGIC
            | k::EROFS_SUPER_MAGIC_V1
            | k::RAMFS_MAGIC
            | k::NILFS_SUPER_MAGIC
            | k::REISERFS_SUPER_MAGIC
            | k::OCFS2_SUPER_MAGIC => ByType::Exact,
            k::MSDOS_SUPER_MAGIC
            | k::EXFAT_SUPER_MAGIC
            | k::HPFS_SUPER_MAGIC
            | k::SMB_SUPER_MAGIC
            | k::SMB2_SUPER_MAGIC
            | k::CIFS_SUPER_MAGIC => ByType::Folds,
            _ => ByType::Probe,
        }
    }
}

#[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
mod imp {
    use super::ByType;

    /// Off Linux (and with `portable-readdir`) every directory asked is asked by behaviour.
    pub(crate) fn by_type<T>(_dir: T) -> ByType {
        ByType::Probe
    }
}

pub(crate) use imp::by_type;

/// Whether the directory at `dir` folds case, asked through `std` (the serial walker's way, and
/// the portable lister's; the Linux lister asks on the directory it has open, in `readdir.rs`).
pub(crate) fn folds_at(dir: &Path) -> bool {
    let Ok(handle) = std::fs::File::open(dir) else {
        return true;
    };
    match by_type(&handle) {
        ByType::Exact => false,
        ByType::Folds => true,
        ByType::Probe => {
            let sample = std::fs::read_dir(dir).ok().and_then(|entries| {
                entries
                    .flatten()
                    .find_map(|e| swapped(std::os::unix::ffi::OsStrExt::as_bytes(e.file_name().as_os_str())))
            });
            folds_by_lookup(sample.map(|name| {
                std::fs::symlink_metadata(
                    dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&name)),
                )
                .map(|_| ())
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_ascii_letters_only() {
        assert_eq!(swapped(b"Logger.rb").as_deref(), Some(&b"lOGGER.RB"[..]));
        assert_eq!(swapped(b"caf\xc3\xa9").as_deref(), Some(&b"CAF\xc3\xa9"[..]));
        assert_eq!(swapped(b"123_-.9"), None);
    }

    #[test]
    fn the_local_tmp_dir_is_exact() {
        // ext4, tmpfs, overlay or btrfs here: the fast and the behavioural answers agree.
        let dir = std::env::temp_dir().join(format!("loadscan-case-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Logger.rb"), b"").unwrap();
        assert!(!folds_at(&dir));
        assert!(!folds_by_lookup(Some(std::fs::symlink_metadata(dir.join("lOGGER.RB")).map(|_| ()))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn undecided_counts_as_folding() {
        assert!(folds_by_lookup(None));
        assert!(folds_by_lookup(Some(Ok(()))));
    }
}
