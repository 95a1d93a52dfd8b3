//! The feature index: which file `require` would load for a feature, given the ordered list of
//! load-path entries, with Ruby's precedence (extension by extension, then entry by entry).
//!
//! Listings are kept per entry (a *root*) and merged at lookup time through small posting
//! lists, so reordering or inserting entries (RubyGems' `insert`) only recomputes ranks and
//! never rescans or rebuilds:
//!
//! ```text
//! features: "rails/all" => Postings { rb: [7], ext: [] }       root ids having rails/all.rb
//!           "json/ext"  => Postings { rb: [], ext: [2, 31] }
//! rank:     [root id] => position of that root in $LOAD_PATH (or NOT_ON_PATH)
//! gaps:     "rails"     => Gaps { blind: [], deferred: [7, 12], lifted: [] } directory
//!                          prefixes whose contents some roots do not list (yet)
//! ```
//!
//! One job per file: `roots` (the registry of roots and their ranks), `gaps` (the one writer of
//! the gap table), `locate` (precedence:
//! pure logic over what is listed, no I/O), `lazy` (listing deferred directories a lookup
//! needs), `find` (the whole lookup, the *find*: parse, locate, decide a miss with one `stat`
//! per root, giving an [`Answer`]),
//! `linked_in` (which misses Ruby's table of extensions without a file may still answer),
//! `sync` (revalidation and scans, the only user of `store::check_root`), `racy` (listing racy
//! directories again once their window has passed), `records` (what the cache is written
//! from), `resolve` (what `require` does with a find's [`Answer`]), `recent`
//! (which question `resolve` asks Ruby first), `explain` (introspection).
//!
//! # Lazy listing
//! With [`crate::ScanOptions::eager_depth`] `0` a sync lists only each root's own entries; every
//! subdirectory is *deferred*. A lookup of `a/b/c` is answered only once no deferred `a` or
//! `a/b` remains in a root that could change the answer (one ranked before the winner, or any
//! ranked root when the answer is "missing" or a native extension that a `.rb` would beat);
//! [`Index::locate`] lists those directories on demand, one `getdents` each. A boot then lists
//! the directories its requires go through (a fifth of the tree of a 400-gem app) instead of
//! all of them, and the cache written at exit holds exactly those, to be extended the same way
//! by a later boot that needs more.

mod explain;
mod feature;
mod find;
mod gaps;
mod ids;
mod lazy;
mod linked_in;
mod locate;
mod racy;
mod recent;
mod records;
mod resolve;
mod roots;
mod sync;

use std::path::Path;

use rustc_hash::FxHashMap;

pub use explain::Explanation;
pub use feature::{Query, Want};
pub use find::{decide, decide_in_turn, Answer, FoundFile};
use gaps::GapTable;
use ids::IdList;
pub use lazy::{LazyStats, Lister};
use linked_in::NotLinkedIn;
pub use locate::Located;
pub use recent::RecentPaths;
pub use resolve::{resolve, Hint, Reason, Resolved, PROBE};
pub use sync::{SyncPolicy, SyncReport};

use crate::scan::{Listing, ScanProblem};
use crate::store::Snapshot;

const NOT_ON_PATH: u32 = u32::MAX;

/// Identifies a root inside one [`Index`].
pub type RootId = u32;

/// Which roots have a feature's stem, as a `.rb` and as a native extension.
#[derive(Default)]
struct Postings {
    rb: IdList,
    ext: IdList,
}

/// What a root is, and where its contents come from.
enum Life {
    /// Listed in this process: the listing is the whole truth about it.
    Scanned(Listing),
    /// Served from the cache snapshot (revalidated the first time it is on the load path). Its
    /// id is its *slot*, its index among the snapshot's roots: [`Index::from_snapshot`] adds one
    /// root per slot, in order, to an empty index, and roots are only ever appended.
    Cached {
        /// Revalidated in this process (fresh, not re-listed).
        revalidated: bool,
        /// The deferred directories listed since the snapshot was written.
        listed_since: Option<Listing>,
    },
    /// Replaced by a newer listing under another id, or unreadable in the snapshot: never
    /// ranked again.
    Retired,
}

struct Root {
    path: Vec<u8>,
    life: Life,
    volatile: bool,
    scanned_at_ns: i64,
    last_used_s: i64,
}

impl Root {
    fn is_retired(&self) -> bool {
        matches!(self.life, Life::Retired)
    }

    /// Whether the snapshot speaks for this root.
    fn is_cached(&self) -> bool {
        matches!(self.life, Life::Cached { .. })
    }

    /// What this process listed of it: the whole listing, or what was listed since the
    /// snapshot.
    fn listed_here(&self) -> Option<&Listing> {
        match &self.life {
            Life::Scanned(l) => Some(l),
            Life::Cached { listed_since, .. } => listed_since.as_ref(),
            Life::Retired => None,
        }
    }
}

/// The merged index: roots from a cache snapshot (looked up in place) plus roots scanned in
/// this process (an in-memory overlay).
pub struct Index {
    roots: Vec<Root>,
    ids: FxHashMap<Vec<u8>, RootId>,
    rank: Vec<u32>,
    snapshot: Option<Snapshot>,
    features: FxHashMap<Box<[u8]>, Postings>,
    gaps: GapTable,
    dirty: bool,
    /// How to scan, list and revalidate, DLEXT included (given to [`Index::new`]).
    policy: SyncPolicy,
    /// What lazy listings worked around, not yet taken by [`Index::take_problems`].
    problems: Vec<ScanProblem>,
    lazy: LazyStats,
    /// Features Ruby's own search could not load: their misses can be sure (`linked_in`).
    not_linked_in: NotLinkedIn,
    /// Validated by listing: directories whose records carry another checkout's stamps that
    /// [`Index::confirm_missing`] found with the names listed, and the stamp it saw then and
    /// when (`find.rs`): a later miss there costs a `stat`, as after a listing of this process.
    same_names: FxHashMap<(RootId, Vec<u8>), SeenAt>,
}

/// A directory's stamp as seen, and when (ns since the epoch): a record of its own for
/// [`crate::store::stamp_differs`].
type SeenAt = (crate::scan::DirStamp, i64);

fn bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

fn path_of_bytes(p: &[u8]) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(p))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The directory prefixes of `stem` a lookup depends on, as lengths: the root itself (`0`),
/// then every prefix ending before a `/`.
fn prefix_lens(stem: &[u8]) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0).chain(stem.iter().enumerate().filter(|(_, &c)| c == b'/').map(|(i, _)| i))
}
