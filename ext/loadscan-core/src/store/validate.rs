//! Is a cached root still what it was? Cheap checks, per root kind:
//!
//! - stable roots (installed gems, Ruby's own dirs): one `stat` of the root directory;
//! - volatile roots (the app's own dirs): a `stat` of every directory recorded, and only the
//!   directories that changed are listed again.
//!
//! With [`Validation::Listing`] the checks compare a digest of each directory's entry names
//! instead of stamps, so a cache built on one CI worker stays valid on another after a fresh
//! `git checkout` (new inodes and mtimes, same names).
//!
//! Timestamps are coarse (the kernel stamps with a clock that advances by ticks, and some file
//! systems keep whole seconds), so a directory whose mtime is not clearly older than the scan
//! that recorded it is *racy*: it counts as changed, as git treats racily clean index entries.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::snapshot::{RootView, Snapshot};
use crate::scan::{dir_digest, DirRecord, DirStamp, RootState};

/// How far an mtime must lie before the scan to be trusted (covers 1 s file systems).
pub const RACY_NS: i64 = 1_100_000_000;

/// What to compare (`LOADSCAN_VALIDATE`). The default, [`Validation::Mtime`], is the first of
/// [`Validation::ALL`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Validation {
    /// `(dev, ino)`, mtime in ns and size of each directory.
    #[default]
    Mtime,
    /// A digest of each directory's entry names and types.
    Listing,
}

impl Validation {
    /// Every validation, the default first (`Loadscan::Native::VALIDATIONS` names them).
    pub const ALL: [Validation; 2] = [Validation::Mtime, Validation::Listing];

    /// Its name in `LOADSCAN_VALIDATE` and `Native.start`'s `validate:`.
    pub fn name(self) -> &'static str {
        match self {
            Validation::Mtime => "mtime",
            Validation::Listing => "listing",
        }
    }

    /// The validation of that name.
    pub fn named(name: &str) -> Option<Validation> {
        Validation::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// The verdict for one root.
#[derive(Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Unchanged: serve it from the snapshot.
    Fresh,
    /// These directories changed: list them again (see [`crate::scan::refresh`]).
    Refresh(Vec<Vec<u8>>),
    /// Scan the whole root again.
    Rescan,
}

/// Whether the directory `dir` differs from its record (or was racy when recorded: changed
/// within `RACY_NS` of `scanned_at_ns`, so a change in the same mtime tick could be missed; or
/// is unsettled, [`crate::DirStamp::UNSETTLED_NS`]: its listing can go stale unnoticed).
fn changed(dir: &Path, rec: &DirRecord, mode: Validation, scanned_at_ns: i64) -> bool {
    if rec.stamp.is_unsettled() {
        return true;
    }
    match mode {
        Validation::Mtime => std::fs::metadata(dir).map_or(true, |md| stamp_differs(&md, rec, scanned_at_ns)),
        Validation::Listing => !matches!(dir_digest(dir), Ok(d) if d == rec.digest),
    }
}

/// [`changed`] by mtime, given the directory's `stat` already made.
pub(crate) fn stamp_differs(md: &std::fs::Metadata, rec: &DirRecord, scanned_at_ns: i64) -> bool {
    let s = &rec.stamp;
    s.is_unsettled() || DirStamp::of(md) != *s || s.mtime_ns.saturating_add(RACY_NS) >= scanned_at_ns
}

/// Checks one root of a snapshot. `volatile` roots are checked directory by directory; stable
/// ones by their top directory alone (the records below it serve `Index::confirm_missing`).
pub fn check_root(snapshot: &Snapshot, root: &RootView<'_>, volatile: bool, mode: Validation) -> Freshness {
    let path = root.path_buf();
    match root.state {
        RootState::Missing => {
            return match std::fs::metadata(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Freshness::Fresh,
                _ => Freshness::Rescan,
            }
        }
        RootState::NotDir => {
            return match std::fs::metadata(&path) {
                Ok(md) if !md.is_dir() => Freshness::Fresh,
                _ => Freshness::Rescan,
            }
        }
        RootState::Dir => {}
    }
    if !volatile {
        // Records are sorted, the top directory first; none at all: a root never listed (ignored,
        // case-folding), as before.
        return match snapshot.dirs(root).next() {
            None => Freshness::Fresh,
            Some(Some(top)) if top.rel.is_empty() && !changed(&path, &top, mode, root.scanned_at_ns) => {
                Freshness::Fresh
            }
            Some(_) => Freshness::Rescan,
        };
    }
    let mut out = Vec::new();
    for rec in snapshot.dirs(root) {
        let Some(rec) = rec else { return Freshness::Rescan };
        let dir = if rec.rel.is_empty() { path.clone() } else { path.join(std::ffi::OsStr::from_bytes(&rec.rel)) };
        if changed(&dir, &rec, mode, root.scanned_at_ns) {
            out.push(rec.rel);
        }
    }
    if out.is_empty() {
        Freshness::Fresh
    } else {
        Freshness::Refresh(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Validation;

    #[test]
    fn each_validation_is_found_by_its_name_and_mtime_is_the_default() {
        for v in Validation::ALL {
            assert_eq!(Validation::named(v.name()), Some(v));
        }
        assert_eq!(Validation::ALL[0], Validation::default());
        assert_eq!(Validation::named("MTIME"), None, "Ruby downcases first");
    }
}
