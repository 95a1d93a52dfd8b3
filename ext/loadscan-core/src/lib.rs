//! The core of loadscan: list `$LOAD_PATH` entries (up front, or each directory when a lookup
//! first needs it) and answer, for any feature, which file Ruby's `require` would load — with
//! Ruby's own precedence, and an honest "don't know" where a listing could not see everything.
//! [`ExpandedLoadPath`] turns `$LOAD_PATH`'s elements into those entries as Ruby expands them.
//! No Ruby is needed: `cargo test` covers it all.
//!
//! ```no_run
//! use loadscan_core::{Index, Located, ScanOptions, SyncPolicy, Validation};
//! use std::path::PathBuf;
//!
//! let order = vec![PathBuf::from("/app/lib"), PathBuf::from("/usr/lib/ruby/3.1.0")];
//! // the default, as loadscan ships: each entry's own directory now, the rest when needed
//! let scan = ScanOptions::default();
//! let policy = SyncPolicy { scan, validation: Validation::Mtime, stable: vec![] };
//! let mut index = Index::new(b"so");
//! index.sync(&order, &policy); // lists what it has not seen, then ranks
//! let query = index.parse(b"json").expect("a feature, not a path");
//! if let Located::Found(root, kind) = index.locate(&query) {
//!     println!("{}", String::from_utf8_lossy(&index.path_of(root, &query.stem, kind)));
//! }
//! ```
#![deny(missing_docs)]

pub use blocking::{Blocking, InPlace};
pub use hash::stable_hash;
pub use index::{
    resolve, settle, settle_in_turn, Explanation, Hint, Index, LazyStats, Lister, Located, Lookup, Query, Reason,
    RecentPaths, Resolved, RootId, SyncPolicy, SyncReport, Want, PROBE,
};
pub use load_path::{Entries, Entry, ExpandedLoadPath, Polled};
pub use scan::{
    list_deferred, scan_roots, scan_serial, DirRecord, DirStamp, FileEntry, Kind, ListHook, Listing, ProblemKind,
    RootState, ScanOptions, ScanProblem,
};
pub use session::{Counters, Figure, Json, Problem, Requires, Rescan, Saved, Session, Settings, Stats, Timings};
pub use store::{
    bound_dead_roots, encode, Bytes, CacheDir, CacheFile, DirError, DirErrorKind, LoadError, LoadErrorKind, Opened,
    RootRecord, Snapshot, Validation, CACHE_FILE, CACHE_FILES, DEAD_ROOTS_MIN, FORMAT_VERSION, LAST_BOOT_FILE,
    MAX_FILE_LEN, RACY_NS,
};

mod blocking;
mod hash;
mod index;
mod load_path;
mod relpath;
mod scan;
mod session;
mod store;
