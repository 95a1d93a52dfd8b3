//! The core of loadscan: list `$LOAD_PATH` entries (up front, or each directory when a lookup
//! first needs it) and answer, for any feature, which file Ruby's `require` would load — with
//! Ruby's own precedence, and an honest "don't know" where a listing could not see everything.
//! No Ruby is needed: `cargo test` covers it all.
//!
//! ```no_run
//! use loadscan_core::index::{Index, Located, SyncPolicy};
//! use loadscan_core::{scan::ScanOptions, store::Validation};
//! use std::path::PathBuf;
//!
//! let order = vec![PathBuf::from("/app/lib"), PathBuf::from("/usr/lib/ruby/3.1.0")];
//! // eager_depth 0: list each entry's own directory now, subdirectories when a lookup needs them
//! let scan = ScanOptions { eager_depth: 0, ..ScanOptions::default() };
//! let policy = SyncPolicy { scan, validation: Validation::Mtime, stable: vec![] };
//! let mut index = Index::new(b"so");
//! index.sync(&order, &policy); // lists what it has not seen, then ranks
//! let query = index.parse(b"json").expect("a feature, not a path");
//! if let Located::Found(root, kind) = index.locate(&query) {
//!     println!("{}", String::from_utf8_lossy(&index.path_of(root, &query.stem, kind)));
//! }
//! ```
#![deny(missing_docs)]

pub mod hash;
pub mod index;
pub mod realpath;
pub mod scan;
pub mod store;
