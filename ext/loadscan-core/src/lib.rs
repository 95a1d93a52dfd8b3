//! The core of loadscan: list `$LOAD_PATH` entries (up front, or each directory when a lookup
//! first needs it) and answer, for any feature, which file Ruby's `require` would load — with
//! Ruby's own precedence, and an honest "don't know" where a listing could not see everything.
//! No Ruby is needed: `cargo test` covers it all.
//!
//! ```no_run
//! use loadscan_core::index::{Index, Resolution, SyncPolicy};
//! use loadscan_core::{scan::ScanOptions, store::Validation};
//! use std::path::PathBuf;
//!
//! let order = vec![PathBuf::from("/app/lib"), PathBuf::from("/usr/lib/ruby/3.1.0")];
//! // eager_depth 0: list each entry's own directory now, subdirectories when a lookup needs them
//! let scan = ScanOptions { eager_depth: 0, ..ScanOptions::default() };
//! let policy = SyncPolicy { scan, validation: Validation::Mtime, stable: vec![] };
//! let mut index = Index::new(b"so");
//! index.sync(&order, &policy); // lists what it has not seen, then ranks
//! if let Resolution::Found { root, stem, kind } = index.lookup(b"json") {
//!     println!("{}", String::from_utf8_lossy(&index.path_of(root, &stem, kind)));
//! }
//! ```
#![deny(missing_docs)]

pub mod hash;
pub mod index;
pub mod realpath;
pub mod scan;
pub mod store;
