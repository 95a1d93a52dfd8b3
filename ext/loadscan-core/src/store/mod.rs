//! The cache file: a snapshot of every scanned root (its listing and directory stamps) plus a
//! feature table with posting lists, looked up in place on the next boot.
//!
//! # Why a custom format
//! The file is read once per boot and then queried a few thousand times, so what matters is
//! (1) load cost independent of size — no map rebuilt, no per-entry allocation — and (2)
//! robustness against any byte sequence. A flat little-endian layout read through bounds-checked
//! slice accessors gives both with no dependency and no `unsafe`: loading is one `read` plus a
//! CRC32 of the body, and a lookup is one hash probe into the file's own table. rkyv would give
//! the same zero-copy lookups but validates an archive by walking it (`bytecheck`), which costs
//! a pass over every entry per boot, and ties the file to rkyv's layout across its versions;
//! bincode (unmaintained, 3.0 a tombstone) would deserialize into a fresh `HashMap` every boot.
//!
//! Measured with `examples/format_compare.rs` (the same feature → roots table, 250 roots, read
//! from disk, then the first lookup; median of 9, 2 cores):
//!
//! | features | this format | rkyv 0.8 `HashMap` archive + bytecheck validation |
//! |---:|---|---|
//! | 5,000 | 37 µs, 171 KB | 51 µs, 222 KB |
//! | 50,000 | 295 µs, 1.6 MB | 1,388 µs, 2.2 MB |
//! | 200,000 | 1,592 µs, 6.7 MB | 5,640 µs, 9.2 MB |
//!
//! (rkyv's figure includes copying into aligned storage, about 0.2 ms at 50k.) A cache that
//! another process may have written must be validated, so rkyv's unchecked access is not an
//! option. Boot-level figures are in `bench/README.md`.
//!
//! # Layout (version 5, [`FORMAT_VERSION`])
//! ```text
//! header  64 bytes: magic "LOADSCAN", version, body length, CRC32 of the body, env key length
//! body    env key (Config#env_key: loadscan version, RUBY_REVISION, RUBY_PLATFORM, DLEXT, EXTSTATIC,
//!         ignored directories) then the sections:
//!         counts | roots | dirs | gaps | features | slots | ids | prefixes | prefix_slots | not_linked_in | strings
//! ```
//! Roots own ranges of dirs and *gaps* (blind spots and deferred directories, each tagged);
//! `prefixes` maps a directory prefix to the roots having a blind spot or a deferred directory
//! there, hashed like the features (a lookup probes each prefix of its stem). A root's files are the features whose postings
//! name it (rebuilt in one pass when a root must be re-listed or the file rewritten, never on
//! the boot path), which keeps the file — and the page faults of reading it — small. A feature record points
//! at its stem in `strings` and holds two posting values (root ids with a `.rb`, with the
//! native extension): one id inline, or an index into `ids` for several. `slots` is an
//! open-addressing table over the feature records keyed by [`crate::hash::unseeded_hash`]. Each
//! record's fields are placed once, in `layout.rs`, for both the writer and the reader.
//! `not_linked_in` holds the features Ruby's own search could not load (`index::linked_in`), one
//! string each.

mod buffer;
mod cache_dir;
mod cache_file;
mod error;
mod file;
mod format;
mod layout;
mod names;
mod private_group;
mod snapshot;
mod sys;
mod validate;

pub use buffer::Bytes;
pub use cache_dir::CacheDir;
pub use cache_file::{CacheFile, Opened, MAX_LAST_BOOT_LEN};
pub use error::{DirError, DirErrorKind, LoadError, LoadErrorKind};
pub use file::MAX_FILE_LEN;
pub use format::{bound_dead_roots, encode, RootRecord, DEAD_ROOTS_MIN, FORMAT_VERSION};
pub use names::{CACHE_FILE, ISEQ_FILE, LAST_BOOT_FILE};
pub use snapshot::{RootView, Snapshot};
pub(crate) use validate::stamp_differs;
pub use validate::{check_root, Freshness, Validation, RACY_NS};
