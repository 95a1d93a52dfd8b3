//! Scanning load-path entries: see [`scan_roots`].

mod listing;
mod options;
mod oracle;
mod readdir;
mod walk;

pub use listing::{
    DirRecord, DirStamp, FileEntry, Kind, Listing, ProblemKind, RootState, ScanProblem,
};
pub use options::ScanOptions;
pub use oracle::scan_serial;
pub use walk::scan_roots;
