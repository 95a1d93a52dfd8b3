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
//! [`Index`] composes owned parts, each the one writer of its state, with its invariants in its
//! doc: `roots` (`Roots`: the roots, each path's id, their ranks), `overlay` (`Overlay`: the
//! stems and gaps of what this process listed, the gaps in `gaps`' `GapTable`), `linked_in`
//! (`NotLinkedIn`: which misses Ruby's table of extensions without a file may still answer),
//! `find`'s `SameNames`; `ids` and `feature` are the words they share. The work is done below,
//! over the parts it is given: `locate` (precedence, pure logic over what is listed, no I/O),
//! `lazy` (listing deferred directories a lookup needs), `find` (the *find*'s answer, and
//! deciding a miss with one `stat` per root), `sync` (revalidation and scans, the only user of
//! `store::check_root`), `racy` (listing racy directories again once their window has passed),
//! `records` (what the cache is written from), `resolve` (what `require` does with a find's
//! [`Answer`]), `recent` (which question `resolve` asks Ruby first), `explain` (introspection).
//! Parts import only parts below them; this file, above them all, is where they meet.
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
mod overlay;
mod racy;
mod recent;
mod records;
mod resolve;
mod roots;
mod sync;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use explain::Explanation;
pub use feature::{Query, Want};
pub use find::{decide, decide_in_turn, Answer, FoundFile, Reason};
pub use ids::RootId;
pub use lazy::{LazyStats, Lister};
pub use locate::Located;
pub use recent::RecentPaths;
pub use resolve::{resolve, Hint, Resolved, PROBE};
pub use sync::{SyncPolicy, SyncReport};

use crate::blocking::Blocking;
use crate::relpath::path_of_bytes;
use crate::scan::{list_deferred, Kind, Listing, ScanProblem};
use crate::store::{RootRecord, Snapshot};
use find::SameNames;
use linked_in::NotLinkedIn;
use locate::{Step, Tables};
use overlay::Overlay;
use roots::{now_ns, Roots};

/// The merged index: roots from a cache snapshot (looked up in place) plus roots scanned in
/// this process (an in-memory overlay). Invariant: the overlay indexes exactly the listings the
/// roots hold (`add_scanned` and `list_now` change both together).
pub struct Index {
    roots: Roots,
    overlay: Overlay,
    snapshot: Option<Snapshot>,
    /// How to scan, list and revalidate, DLEXT included (given to [`Index::new`]).
    policy: SyncPolicy,
    /// Whether something changed since the snapshot was loaded or the cache written.
    dirty: bool,
    /// What lazy listings worked around, not yet taken by [`Index::take_problems`].
    problems: Vec<ScanProblem>,
    lazy: LazyStats,
    /// Features Ruby's own search could not load: their misses can be sure (`linked_in`).
    not_linked_in: NotLinkedIn,
    /// Directories found with the names listed though their stamps differ ([`Index::confirm_missing`]).
    same_names: SameNames,
}

impl Index {
    /// An empty index, synced and listed under `policy` (native extensions are named
    /// `*.<policy.scan.dlext>`).
    pub fn new(policy: SyncPolicy) -> Self {
        Index {
            roots: Roots::default(),
            overlay: Overlay::default(),
            snapshot: None,
            dirty: false,
            policy,
            problems: Vec::new(),
            lazy: LazyStats::default(),
            not_linked_in: NotLinkedIn::default(),
            same_names: SameNames::default(),
        }
    }

    /// An index serving the roots of a cache snapshot (each revalidated on first use).
    pub fn from_snapshot(policy: SyncPolicy, snapshot: Snapshot) -> Self {
        let mut index = Index::new(policy);
        index.roots = Roots::from_snapshot(&snapshot);
        index.not_linked_in.load(snapshot.not_linked_in());
        index.snapshot = Some(snapshot);
        index
    }

    /// Whether something changed since the snapshot was loaded (worth writing a new one).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// What is held now has been written: the next write is worth making only after a change.
    pub fn mark_clean(&mut self) {
        self.dirty = false;
    }

    /// Adds a scanned root (replacing an earlier listing of the same path).
    pub fn add(&mut self, listing: Listing) -> RootId {
        self.add_scanned(listing, false, now_ns())
    }

    /// Adds a root listed in this process, retiring the earlier root of its path, to the roots
    /// and the overlay.
    fn add_scanned(&mut self, listing: Listing, volatile: bool, scanned_at_ns: i64) -> RootId {
        self.dirty = true;
        let (id, retired) = self.roots.add(listing, volatile, scanned_at_ns);
        if let Some((old, listing)) = retired {
            self.overlay.forget(old, &listing);
        }
        if let Some(listing) = self.roots.get(id).listed_here() {
            self.overlay.add(id, listing);
        }
        id
    }

    /// Sets the load-path order (expanded entries; roots not added are treated as empty).
    /// Duplicates rank at their first position. Costs O(entries): nothing is rescanned.
    pub fn set_order(&mut self, order: &[PathBuf]) {
        self.roots.set_order(order);
    }

    /// The absolute path of a found file, as Ruby would spell it.
    pub fn path_of(&self, root: RootId, stem: &[u8], kind: Kind) -> Vec<u8> {
        self.roots.path_of(root, stem, kind, &self.policy.scan.dlext)
    }

    /// How many roots are known (scanned here or served from the snapshot).
    pub fn root_count(&self) -> usize {
        self.roots.live_count()
    }

    /// How many distinct feature stems are indexed (snapshot and overlay, overlaps counted twice).
    pub fn len(&self) -> usize {
        self.overlay.len() + self.snapshot.as_ref().map_or(0, |s| s.feature_count())
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parses a feature with this index's DLEXT (`None`: the index never answers it).
    pub fn parse<'f>(&self, feature: &'f [u8]) -> Option<Query<'f>> {
        Query::parse(feature, &self.policy.scan.dlext)
    }

    fn tables(&self) -> Tables<'_> {
        Tables::new(&self.roots, &self.overlay, self.snapshot.as_ref())
    }

    /// Where `feature` is, ignoring what is already loaded (deferred directories it depends on
    /// are listed first); [`Located::Unknown`] for what the index never answers.
    pub fn locate_feature(&mut self, feature: &[u8]) -> Located {
        match self.parse(feature) {
            Some(q) => self.locate(&q),
            None => Located::Unknown,
        }
    }

    /// Where a parsed feature is, without copying anything (the hot path of `require`). Lists
    /// the deferred directories the answer depends on first (each at most once per index).
    pub fn locate(&mut self, q: &Query) -> Located {
        self.locate_with(q, &mut list_deferred)
    }

    /// [`Index::locate`], listing deferred directories with `lister` ([`list_deferred`] or a
    /// wrapper of it: the binding releases the GVL around each listing).
    pub fn locate_with(&mut self, q: &Query, lister: &mut Lister) -> Located {
        let mut last = None;
        loop {
            match self.tables().step(q) {
                Step::Done(answer) => return answer,
                // Listing a directory always clears its deferral; should it not (a bug), Ruby
                // answers rather than this loop spinning.
                Step::ListFirst(d) if last == Some(d) => return Located::Unknown,
                Step::ListFirst(d) => {
                    self.list_now(d.root(), d.rel(&q.stem), lister);
                    last = Some(d);
                }
            }
        }
    }

    /// Lists the deferred directory `rel` of root `id` with `lister` and adds what it holds to
    /// the overlay and the root.
    fn list_now(&mut self, id: RootId, rel: &[u8], lister: &mut Lister) {
        let started = Instant::now();
        let root_dev = self.roots.dev(id, self.snapshot.as_ref());
        let (part, mut problems) = lister(path_of_bytes(self.roots.get(id).path()), rel, root_dev, &self.policy.scan);
        self.problems.append(&mut problems);
        self.dirty = true;
        self.overlay.add(id, &part);
        self.overlay.listed(id, rel);
        if self.roots.add_listed(id, part) {
            self.lazy.count(started);
        }
    }

    /// What lazy listing did so far.
    pub fn lazy_stats(&self) -> LazyStats {
        self.lazy
    }

    /// Takes what lazy listings worked around since the last call.
    pub fn take_problems(&mut self) -> Vec<ScanProblem> {
        std::mem::take(&mut self.problems)
    }

    /// Where `feature` is, as Ruby's search would find it now: its file, `None` for a miss the
    /// index is sure of (every root asked, [`Index::confirm_missing`]), or why Ruby's own
    /// search must answer. `foo.so` that no entry has is searched again as a bare feature
    /// ([`Query::fallback`]), as `search_required` does. No miss of a spelling that Ruby's table
    /// of extensions without a file may hold is sure until Ruby said it does not (`linked_in`).
    /// Listings and `stat`s run through `blocking`; what listings worked around is kept for
    /// [`Index::take_problems`].
    pub fn find(&mut self, feature: &[u8], blocking: &impl Blocking) -> Result<Answer, Reason> {
        let q = self.parse(feature).ok_or(Reason::NotFeature)?;
        let bare = q.fallback(feature);
        let searches = [Some(&q), bare.as_ref()].into_iter().flatten();
        let found = decide_in_turn(searches, |s| self.find_one(s, blocking))?;
        // Ruby asks its table only once every search missed every entry.
        let maybe_linked_in = found.is_none() && self.not_linked_in.may_hold(feature, q.want);
        Ok(Answer { want: q.want, file: found, maybe_linked_in })
    }

    /// One search of [`Index::find`]: the file, `None` for a miss every entry is sure of, or why
    /// Ruby must search.
    fn find_one(&mut self, q: &Query, blocking: &impl Blocking) -> Result<Option<FoundFile>, Reason> {
        let located =
            self.locate_with(q, &mut |root, rel, dev, opts| blocking.run(|| list_deferred(root, rel, dev, opts)));
        let found = decide(located, || blocking.run(|| self.confirm_missing(&q.stem)))?;
        Ok(found.map(|(root, kind)| FoundFile { path: self.path_of(root, &q.stem, kind), kind }))
    }

    /// Whether a miss that [`Index::locate`] found still holds on disk: every ranked root's
    /// directory for `stem` absent, or unchanged since listed and settled (`find`'s
    /// `confirm_missing` says how). A miss is rare and raises; hits never pay for this.
    pub fn confirm_missing(&mut self, stem: &[u8]) -> bool {
        let validation = self.policy.validation;
        find::confirm_missing(&self.roots, self.snapshot.as_ref(), validation, &mut self.same_names, stem)
    }

    /// Brings the index in line with `order`: revalidates cached roots on their first use,
    /// lists changed directories again, scans roots never seen, then ranks them.
    pub fn sync(&mut self, order: &[PathBuf]) -> SyncReport {
        let (report, relisted) = sync::sync(&mut self.roots, self.snapshot.as_ref(), &self.policy, order);
        for (listing, volatile, scanned_at_ns) in relisted {
            self.add_scanned(listing, volatile, scanned_at_ns);
        }
        self.set_order(order);
        report
    }

    /// Lists the racy directories of the roots this process listed again, once the last of their
    /// windows has closed, and ranks the roots by `order` (the load path as last synced):
    /// `Err(wait)` while a window is still open (nothing done), else what the listings worked
    /// around (nothing to do: none). A directory that changed in the meantime is racy again.
    pub fn relist_racy(&mut self, order: &[PathBuf]) -> Result<Vec<ScanProblem>, Duration> {
        let (problems, relisted) = racy::relist(&self.roots, &self.policy.scan)?;
        if relisted.is_empty() {
            return Ok(problems);
        }
        for (listing, volatile, scanned_at_ns) in relisted {
            self.add_scanned(listing, volatile, scanned_at_ns);
        }
        self.set_order(order);
        Ok(problems)
    }

    /// Every live root as a record to write, dropping roots that are not on the current load
    /// path and were last used before `prune_before_s`.
    pub fn records(&self, now_s: i64, prune_before_s: i64) -> Vec<RootRecord> {
        records::records(&self.roots, self.overlay.gaps(), self.snapshot.as_ref(), now_s, prune_before_s)
    }

    /// Ruby's own search raised `LoadError` for `feature` (no entry had it, and neither did its
    /// table of linked-in extensions): from now on a miss of it can be sure. Only spellings the
    /// table may hold are kept; a new one makes the cache worth writing.
    pub fn learn_not_linked_in(&mut self, feature: &[u8]) {
        let Some(q) = self.parse(feature) else { return };
        if self.not_linked_in.learn(feature, q.want) {
            self.dirty = true;
        }
    }

    /// The features learned so far (read from the cache or in this process), for the cache.
    pub fn not_linked_in(&self) -> Vec<&[u8]> {
        self.not_linked_in.names()
    }

    /// Everything the index knows about `q`'s stem (without listing anything).
    pub fn explain(&self, q: &Query) -> Explanation {
        explain::explain(self.tables(), q)
    }

    /// Every stem some root on the load path has a file for (snapshot and overlay), sorted.
    pub fn stems(&self) -> Vec<Vec<u8>> {
        explain::stems(self.tables())
    }
}
