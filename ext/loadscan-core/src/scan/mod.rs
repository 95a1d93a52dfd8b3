//! Scanning load-path entries: see [`scan_roots`].

mod case;
mod jobs;
mod listing;
mod options;
mod readdir;
mod refresh;
mod serial;
mod step;
mod walk;

pub use listing::{DirRecord, DirStamp, FileEntry, Kind, Listing, ProblemKind, RootState, ScanProblem};
pub use options::{ListHook, ScanOptions};
pub use refresh::refresh;
pub use serial::scan_serial;
pub use walk::{list_deferred, scan_roots};

/// The entry digest of one directory, listed without descending (for revalidation).
pub fn dir_digest(path: &std::path::Path) -> std::io::Result<u64> {
    let mut digest = 0u64;
    readdir::list(path, case::Ask::Never, |name, found| {
        digest = digest.wrapping_add(readdir::entry_digest(name, &found))
    })?;
    Ok(digest)
}
