//! The core of loadscan: list `$LOAD_PATH` entries (up front, or each directory when a lookup
//! first needs it) and answer, for any feature, which file Ruby's `require` would load — with
//! Ruby's own precedence, and an honest "don't know" where a listing could not see everything.
//! No Ruby is needed: `cargo test` covers it all.
//!
//! A process follows `$LOAD_PATH` with one [`Session`]: it reads the cache at the start, syncs
//! with `$LOAD_PATH` (any [`Entries`] source: the binding's reads the Ruby array) before each
//! question, *finds* each feature ([`Session::find`]: an [`Answer`], or the [`Reason`] Ruby's
//! own search must answer), and writes the cache and the last boot's record at exit
//! ([`Session::finish`]).
//!
//! ```no_run
//! use loadscan_core::{Entries, Entry, InPlace, Session, Settings, SyncPolicy};
//!
//! /// `$LOAD_PATH` as a list of Strings that never changes after the first sync.
//! struct Fixed(Vec<&'static [u8]>, bool);
//!
//! impl Entries for Fixed {
//!     type Error = ();
//!     fn len(&self) -> usize { self.0.len() }
//!     fn entry(&mut self, i: usize) -> Result<Entry<'_>, ()> { Ok(Entry::String(self.0[i])) }
//!     fn is_unchanged(&self) -> bool { self.1 }
//!     fn remember(&mut self) { self.1 = true }
//! }
//!
//! // the default policy, as loadscan ships: each entry's own directory now, the rest when needed
//! let settings = Settings { policy: SyncPolicy::default(), cache: None, readonly: false };
//! let mut load_path = Fixed(vec![b"/app/lib", b"/usr/lib/ruby/3.1.0"], false);
//! let mut session = Session::start(settings, &mut load_path, &InPlace).expect("entries to read").session;
//! if let Ok(answer) = session.find(b"json", &InPlace) {
//!     match answer.file {
//!         Some(file) => println!("{}", String::from_utf8_lossy(&file.path)),
//!         None => println!("LoadError: no entry has it"),
//!     }
//! }
//! ```
//!
//! What the tests, examples and benchmarks drive directly (the index, the scanner, the cache
//! file's parts) is in [`internals`], hidden from the docs: no stable interface.
#![deny(missing_docs)]

pub use blocking::{Blocking, InPlace};
pub use hash::unseeded_hash;
pub use index::{
    resolve, Answer, Explanation, FoundFile, Hint, LazyStats, Reason, RecentPaths, Resolved, SyncPolicy, Want, PROBE,
};
pub use load_path::{Entries, Entry, SyncError};
pub use scan::{Kind, ProblemKind, ScanOptions};
pub use session::{
    Counters, Figure, Finished, Json, Pending, Problem, Requires, Rescan, Saved, Session, Settings, Started, Stats,
    Timings,
};
pub use store::{CacheFile, Validation, CACHE_FILE, ISEQ_FILE, LAST_BOOT_FILE};
pub use xattr::copy_xattrs;

/// The parts below the [`Session`] that the tests, examples and benchmarks drive directly: the
/// index and its lookups, the scanner, the cache file's layout and trust checks. Not a stable
/// interface.
#[doc(hidden)]
pub mod internals {
    pub use crate::index::{decide, decide_in_turn, Index, Lister, Located, Query, RootId, SyncReport};
    pub use crate::load_path::ExpandedLoadPath;
    pub use crate::scan::{
        list_deferred, scan_roots, scan_serial, DirRecord, DirStamp, FileEntry, ListHook, Listing, RootState,
        ScanProblem,
    };
    pub use crate::store::{
        bound_dead_roots, encode, Bytes, CacheDir, DirError, DirErrorKind, LoadError, LoadErrorKind, Opened,
        RootRecord, Snapshot, DEAD_ROOTS_MIN, FORMAT_VERSION, MAX_FILE_LEN, MAX_LAST_BOOT_LEN, RACY_NS,
    };
}

mod blocking;
pub mod compile_cache;
mod hash;
mod index;
mod json;
/// JSON's string escape, as Ruby's JSON writes it (the boot profile's writer uses it too).
#[doc(hidden)]
pub use json::string as json_string;
mod load_path;
mod relpath;
mod scan;
mod session;
mod store;
mod xattr;
