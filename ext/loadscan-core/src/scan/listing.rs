//! What a scan of one load-path entry produces.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The two kinds of file `require` can load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A Ruby source file, `*.rb`.
    Rb,
    /// A native extension, `*.<DLEXT>` (`.so` on Linux, `.bundle` on macOS).
    Ext,
}

/// Identity and change stamp of a directory, read with one `fstat` on the open directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DirStamp {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Size as `stat` reports it (changes with the entry table on most file systems).
    pub size: u64,
}

impl DirStamp {
    /// The mtime recorded for an *unsettled* directory: one whose listing can go stale without
    /// the directory itself changing — it could not be listed (unreadable: its contents are a
    /// blind spot), or it holds an entry that could not be identified (a dangling symlink named
    /// like a loadable file, whose target may appear at any time, or an entry that could not be
    /// `stat`ed). No directory has this
    /// mtime, so every revalidation counts it as changed: it is listed again on the next boot,
    /// and a miss there is never sure (`Index::confirm_missing`).
    pub const UNSETTLED_NS: i64 = i64::MIN;

    /// Whether this is the stamp of an unsettled directory ([`DirStamp::UNSETTLED_NS`]).
    pub fn is_unsettled(&self) -> bool {
        self.mtime_ns == Self::UNSETTLED_NS
    }

    /// The stamp in a directory's metadata (`stat` through `std`).
    pub(crate) fn of(md: &std::fs::Metadata) -> DirStamp {
        use std::os::unix::fs::MetadataExt;
        DirStamp::from_parts((md.dev(), md.ino()), (md.mtime(), md.mtime_nsec()), md.size())
    }

    /// The stamp in a `stat` made through rustix (the fast walker's `fstat` of the open directory).
    #[cfg(all(target_os = "linux", not(feature = "portable-readdir")))]
    #[allow(clippy::unnecessary_cast)] // the fields' types differ between targets
    pub(crate) fn of_stat(st: &rustix::fs::Stat) -> DirStamp {
        DirStamp::from_parts(
            (st.st_dev as u64, st.st_ino as u64),
            (st.st_mtime as i64, st.st_mtime_nsec as i64),
            st.st_size as u64,
        )
    }

    fn from_parts((dev, ino): (u64, u64), (mtime_s, mtime_nsec): (i64, i64), size: u64) -> DirStamp {
        DirStamp { dev, ino, mtime_ns: mtime_s * 1_000_000_000 + mtime_nsec, size }
    }

    /// This stamp, marked unsettled (identity kept: the loop check and mount detection use it).
    pub fn unsettled(self) -> DirStamp {
        DirStamp { mtime_ns: Self::UNSETTLED_NS, ..self }
    }
}

/// A directory that was listed, relative to the scanned root (`""` is the root itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirRecord {
    /// Path relative to the root, `/`-separated, no leading or trailing slash.
    pub rel: Vec<u8>,
    /// Its stamp at the time it was read.
    pub stamp: DirStamp,
    /// Order-independent digest of its entries' names and types (`LOADSCAN_VALIDATE=listing`
    /// compares this instead of the stamp, so a fresh checkout with new mtimes stays valid).
    pub digest: u64,
}

impl DirRecord {
    /// The record of a directory that could not be listed: unsettled, with its identity if a
    /// `stat` still tells it (zeros otherwise), so the next boot tries it again.
    pub(crate) fn unlisted(rel: Vec<u8>, path: &std::path::Path) -> DirRecord {
        use std::os::unix::fs::MetadataExt;
        let (dev, ino) = std::fs::metadata(path).map_or((0, 0), |md| (md.dev(), md.ino()));
        DirRecord { rel, stamp: DirStamp { dev, ino, mtime_ns: 0, size: 0 }.unsettled(), digest: 0 }
    }
}

/// A loadable file: its path relative to the root without the extension, and its kind.
///
/// `lib/foo/bar.rb` under root `lib` is `FileEntry { stem: b"foo/bar", kind: Kind::Rb }`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileEntry {
    /// Relative path without the extension.
    pub stem: Vec<u8>,
    /// Which extension it had.
    pub kind: Kind,
}

/// How the root of a scan turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootState {
    /// A directory that was listed (possibly with blind spots).
    Dir,
    /// Nothing exists at that path: `require` finds nothing there either.
    Missing,
    /// Something that is not a directory (a file): `require` finds nothing under it.
    NotDir,
}

/// Why part of a tree was not listed, or a name was left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// A symlink points back to a directory on its own path.
    Loop,
    /// A symlink whose target does not exist (or is a loop of links).
    Dangling,
    /// The directory (or a symlink's target) could not be read.
    Unreadable,
    /// Deeper than the depth cap, or the root had more files or directories than the caps.
    TooLarge,
    /// The directory vanished or changed type while it was being scanned.
    Vanished,
    /// The scan itself failed (a bug): the whole root is left to Ruby's require.
    Failed,
    /// The directory is on a file system (or has the attribute) that folds case, where
    /// `require` may open a file under another spelling: left to Ruby's require.
    CaseFolding,
}

impl ProblemKind {
    /// Every kind (`Loadscan::Native::PROBLEM_KINDS` names them).
    pub const ALL: [ProblemKind; 7] = [
        ProblemKind::Loop,
        ProblemKind::Dangling,
        ProblemKind::Unreadable,
        ProblemKind::TooLarge,
        ProblemKind::Vanished,
        ProblemKind::Failed,
        ProblemKind::CaseFolding,
    ];

    /// Its name in `Loadscan.problems` (a Symbol there).
    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::Loop => "loop",
            ProblemKind::Dangling => "dangling",
            ProblemKind::Unreadable => "unreadable",
            ProblemKind::TooLarge => "too_large",
            ProblemKind::Vanished => "vanished",
            ProblemKind::Failed => "failed",
            ProblemKind::CaseFolding => "case_folding",
        }
    }

    /// Whether it is worth a warning: a dangling symlink is harmless (Ruby cannot open it
    /// either) and a directory whose names fold case is a setup, not a fault, so those stay
    /// quiet (`loadscan problems` and `doctor` still list them); loops and unreadable,
    /// vanished or oversized directories mean slower, Ruby-answered requires below them
    /// (`Loadscan::Native::QUIET_PROBLEM_KINDS` names the quiet ones).
    pub fn warns(self) -> bool {
        !matches!(self, ProblemKind::Dangling | ProblemKind::CaseFolding)
    }
}

/// Something the scanner noticed and worked around. Carries the path and the I/O error.
#[derive(Debug)]
pub struct ScanProblem {
    /// What happened.
    pub kind: ProblemKind,
    /// The absolute path concerned.
    pub path: PathBuf,
    /// The underlying error, where there was one.
    pub error: Option<io::Error>,
}

impl fmt::Display for ScanProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ProblemKind::Loop => "symlink loop, not followed",
            ProblemKind::Dangling => "dangling symlink, ignored",
            ProblemKind::Unreadable => "unreadable, left to Ruby's require",
            ProblemKind::TooLarge => "too deep or too large, left to Ruby's require",
            ProblemKind::Vanished => "changed during the scan, left to Ruby's require",
            ProblemKind::Failed => "scan failed, left to Ruby's require",
            ProblemKind::CaseFolding => "names fold case here, left to Ruby's require",
        };
        write!(f, "{}: {}", self.path.display(), what)?;
        if let Some(e) = &self.error {
            write!(f, " ({e})")?;
        }
        Ok(())
    }
}

/// Everything one scan of a load-path entry found.
///
/// A *blind spot* is a directory (relative to the root) whose contents are not fully known:
/// a feature below it may exist without being listed, so lookups below it must be answered by
/// Ruby itself. `""` means the whole root.
///
/// What a scan worked around comes beside the listing (`(Listing, Vec<ScanProblem>)`), not in
/// it: a listing is plain data, copied and merged freely; problems are reported once.
#[derive(Clone, Debug)]
pub struct Listing {
    /// The absolute directory that was scanned.
    pub root: PathBuf,
    /// What the root turned out to be.
    pub state: RootState,
    /// Loadable files, sorted by stem then kind.
    pub files: Vec<FileEntry>,
    /// Directories listed, sorted by relative path (for revalidation); one that could not be
    /// listed, or holds a dangling `*.rb` symlink, is recorded unsettled ([`DirStamp::UNSETTLED_NS`]).
    pub dirs: Vec<DirRecord>,
    /// Directories whose contents are not fully known, sorted.
    pub blind: Vec<Vec<u8>>,
    /// Directories that exist but were not listed yet (see [`super::ScanOptions::eager_depth`]):
    /// listed on demand by [`super::list_deferred`] when a lookup needs them. Sorted.
    pub deferred: Vec<Vec<u8>>,
}

impl Listing {
    /// An empty listing for `root` in the given state.
    pub fn empty(root: PathBuf, state: RootState) -> Self {
        Listing { root, state, files: Vec::new(), dirs: Vec::new(), blind: Vec::new(), deferred: Vec::new() }
    }

    /// Puts files, dirs and blind spots in canonical order (scans in parallel finish in any order).
    pub(crate) fn normalize(&mut self) {
        self.files.sort_unstable();
        self.files.dedup();
        self.dirs.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
        self.blind.sort_unstable();
        self.blind.dedup();
        self.deferred.sort_unstable();
        self.deferred.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::ProblemKind;

    #[test]
    fn problem_kinds_have_distinct_names_and_only_harmless_ones_are_quiet() {
        let mut names: Vec<_> = ProblemKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ProblemKind::ALL.len());
        let quiet: Vec<_> = ProblemKind::ALL.into_iter().filter(|k| !k.warns()).map(|k| k.name()).collect();
        assert_eq!(quiet, ["dangling", "case_folding"]);
    }
}
