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
//! spots:    "rails"     => Spots { blind: [], deferred: [7, 12] } directory prefixes whose
//!                          contents some roots do not list (yet)
//! ```
//!
//! # Lazy listing
//! With [`ScanOptions::eager_depth`] `0` a sync lists only each root's own entries; every
//! subdirectory is *deferred*. A lookup of `a/b/c` is answered only once no deferred `a` or
//! `a/b` remains in a root that could change the answer (one ranked before the winner, or any
//! ranked root when the answer is "missing" or a native extension that a `.rb` would beat);
//! [`Index::locate`] lists those directories on demand, one `getdents` each. A boot then lists
//! the directories its requires go through (a fifth of the tree of a 400-gem app) instead of
//! all of them, and the cache written at exit holds exactly those, to be extended the same way
//! by a later boot that needs more.

mod explain;
mod feature;
mod ids;

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

pub use explain::Explanation;
pub use feature::{Query, Want};
use ids::IdList;

use crate::scan::DirRecord;
use crate::scan::{list_deferred, refresh, scan_roots, Kind, Listing, RootState, ScanOptions, ScanProblem};
use crate::store::{changed, check_root, Freshness, RootRecord, RootView, Snapshot, Validation};

const NOT_ON_PATH: u32 = u32::MAX;
/// Fewer checks than this per thread are not worth starting a thread for (see `check_roots`).
const STATS_PER_THREAD: usize = 1024;

/// A root with its load-path position: `(rank, id)`, compared rank first.
type Ranked = (u32, RootId);

/// Identifies a scanned root inside one [`Index`].
pub type RootId = u32;

/// Lists one deferred directory (`rel` below a root) with the given options, as
/// [`list_deferred`] does.
pub type Lister<'a> = dyn FnMut(&Path, &[u8], &ScanOptions) -> Listing + 'a;

/// [`Resolution`] without the stem (the caller has it in its [`Query`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Located {
    /// In this root, with this extension.
    Found(RootId, Kind),
    /// No entry has it.
    Missing,
    /// The index cannot answer exactly.
    Unknown,
}

/// The answer to "which file would `require` load?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// This file, exactly as Ruby would name it: `root/stem.ext`.
    Found {
        /// Root the file lives in.
        root: RootId,
        /// Canonical stem, relative to the root.
        stem: Vec<u8>,
        /// Extension kind.
        kind: Kind,
    },
    /// No entry has it: Ruby's `require` will raise or go to RubyGems.
    Missing,
    /// The index cannot answer exactly (unsupported spelling, or a blind spot of an entry
    /// that comes first): leave it to Ruby.
    Unknown,
}

#[derive(Default)]
struct Postings {
    rb: IdList,
    ext: IdList,
}

/// Roots whose contents at a directory prefix are not (yet) known.
#[derive(Default)]
struct Spots {
    /// Blind spots: Ruby answers below them.
    blind: IdList,
    /// Deferred directories of roots scanned in this process.
    deferred: IdList,
    /// Snapshot roots whose deferred directory here has been listed since (the snapshot still
    /// says deferred).
    listed: IdList,
}

struct Root {
    path: Vec<u8>,
    /// The listing, for roots scanned in this process (`None`: served from the snapshot).
    listing: Option<Listing>,
    /// For a root served from the snapshot: the deferred directories listed since.
    extra: Option<Listing>,
    /// The root's index in the snapshot, while the snapshot still speaks for it.
    base: Option<u32>,
    /// Replaced by a newer listing under another id: never ranked again.
    retired: bool,
    volatile: bool,
    scanned_at_ns: i64,
    last_used_s: i64,
    /// Snapshot roots are revalidated the first time they are on the load path.
    checked: bool,
}

/// How [`Index::sync`] scans and revalidates.
#[derive(Clone, Debug)]
pub struct SyncPolicy {
    /// Scanner options.
    pub scan: ScanOptions,
    /// What revalidation of cached roots compares.
    pub validation: Validation,
    /// Roots under these directories are stable (installed gems, Ruby's own dirs).
    pub stable: Vec<PathBuf>,
}

/// What a sync did.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Roots scanned whole (new, or cached but changed).
    pub scanned: usize,
    /// Cached roots where only changed directories were listed again.
    pub refreshed: usize,
    /// Cached roots confirmed unchanged.
    pub fresh: usize,
    /// What the scans worked around.
    pub problems: Vec<ScanProblem>,
}

/// The merged index: roots from a cache snapshot (looked up in place) plus roots scanned in
/// this process (an in-memory overlay).
pub struct Index {
    dlext: Vec<u8>,
    roots: Vec<Root>,
    ids: FxHashMap<Vec<u8>, RootId>,
    rank: Vec<u32>,
    base: Option<Snapshot>,
    features: FxHashMap<Box<[u8]>, Postings>,
    spots: FxHashMap<Box<[u8]>, Spots>,
    dirty: bool,
    /// Options for listing deferred directories (the last sync's).
    scan: ScanOptions,
    /// What lazy listings worked around, not yet taken by [`Index::take_problems`].
    problems: Vec<ScanProblem>,
    lazy: LazyStats,
}

/// What lazy listing did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LazyStats {
    /// Deferred directories listed on demand.
    pub listed: usize,
    /// Time spent listing them.
    pub time: std::time::Duration,
}

/// One step of a lookup: an answer, or a deferred directory to list first.
enum Step {
    Done(Located),
    List(RootId, usize),
}

/// Whether `path` is `dir` or lies below it, compared as whole components (both canonical, as
/// realpaths are; `Path::starts_with` would parse every component of both on each call).
fn is_under(path: &[u8], dir: &[u8]) -> bool {
    let dir = match dir {
        [rest @ .., b'/'] if !rest.is_empty() => rest,
        d => d,
    };
    path.starts_with(dir) && (path.len() == dir.len() || dir.ends_with(b"/") || path[dir.len()] == b'/')
}

fn bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

impl Index {
    /// An empty index for native extensions named `*.<dlext>`.
    pub fn new(dlext: &[u8]) -> Self {
        Index {
            dlext: dlext.to_vec(),
            roots: Vec::new(),
            ids: FxHashMap::default(),
            rank: Vec::new(),
            base: None,
            features: FxHashMap::default(),
            spots: FxHashMap::default(),
            dirty: false,
            scan: ScanOptions::default(),
            problems: Vec::new(),
            lazy: LazyStats::default(),
        }
    }

    /// An index serving the roots of a cache snapshot (each revalidated on first use).
    pub fn from_snapshot(dlext: &[u8], snapshot: Snapshot) -> Self {
        let mut index = Index::new(dlext);
        for i in 0..snapshot.root_count() {
            let Some(r) = snapshot.root(i) else {
                // A damaged record: the root is simply unknown and gets scanned when needed.
                index.push_root(Root::retired());
                continue;
            };
            let id = index.push_root(Root {
                path: r.path.to_vec(),
                listing: None,
                extra: None,
                base: Some(i as u32),
                retired: false,
                volatile: r.volatile,
                scanned_at_ns: r.scanned_at_ns,
                last_used_s: r.last_used_s,
                checked: false,
            });
            index.ids.entry(r.path.to_vec()).or_insert(id);
        }
        index.base = Some(snapshot);
        index
    }

    fn push_root(&mut self, root: Root) -> RootId {
        self.roots.push(root);
        self.rank.push(NOT_ON_PATH);
        (self.roots.len() - 1) as RootId
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

    fn add_scanned(&mut self, listing: Listing, volatile: bool, scanned_at_ns: i64) -> RootId {
        self.dirty = true;
        let path = bytes(&listing.root).to_vec();
        if let Some(&old) = self.ids.get(&path) {
            self.forget(old);
            let r = &mut self.roots[old as usize];
            r.retired = true;
            r.base = None;
            self.rank[old as usize] = NOT_ON_PATH;
        }
        let id = self.roots.len() as RootId;
        self.index(id, &listing);
        self.ids.insert(path.clone(), id);
        self.push_root(Root {
            path,
            listing: Some(listing),
            extra: None,
            base: None,
            retired: false,
            volatile,
            scanned_at_ns,
            last_used_s: 0,
            checked: true,
        });
        id
    }

    fn index(&mut self, id: RootId, listing: &Listing) {
        for f in &listing.files {
            let p = self.features.entry(f.stem.as_slice().into()).or_default();
            match f.kind {
                Kind::Rb => p.rb.insert(id),
                Kind::Ext => p.ext.insert(id),
            }
        }
        for b in &listing.blind {
            self.spots.entry(b.as_slice().into()).or_default().blind.insert(id);
        }
        for d in &listing.deferred {
            self.spots.entry(d.as_slice().into()).or_default().deferred.insert(id);
        }
    }

    /// Drops what the overlay holds for a root (its listing, or what was listed lazily).
    fn forget(&mut self, id: RootId) {
        let root = &mut self.roots[id as usize];
        let Some(listing) = root.listing.take().or_else(|| root.extra.take()) else { return };
        for f in &listing.files {
            if let Some(p) = self.features.get_mut(f.stem.as_slice()) {
                p.rb.remove(id);
                p.ext.remove(id);
                if p.rb.is_empty() && p.ext.is_empty() {
                    self.features.remove(f.stem.as_slice());
                }
            }
        }
        let spots = listing.blind.iter().chain(&listing.deferred).chain(listing.dirs.iter().map(|d| &d.rel));
        for prefix in spots {
            if let Some(s) = self.spots.get_mut(prefix.as_slice()) {
                s.blind.remove(id);
                s.deferred.remove(id);
                s.listed.remove(id);
                if s.blind.is_empty() && s.deferred.is_empty() && s.listed.is_empty() {
                    self.spots.remove(prefix.as_slice());
                }
            }
        }
    }

    /// Lists the deferred directory `rel` of root `id` with `lister` and adds what it holds.
    fn list_now(&mut self, id: RootId, rel: &[u8], lister: &mut Lister) {
        let started = std::time::Instant::now();
        let root_path = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&self.roots[id as usize].path);
        let mut part = lister(Path::new(root_path), rel, &self.scan);
        self.problems.append(&mut part.problems);
        self.dirty = true;
        self.index(id, &part);
        // The spot says the directory is listed now; a root's own `deferred` list keeps the
        // name until the cache is written (`records` drops it then).
        match self.spots.get_mut(rel) {
            Some(spot) if spot.deferred.contains(id) => spot.deferred.remove(id),
            // Deferred in the snapshot, which cannot be changed: masked here.
            Some(spot) => spot.listed.insert(id),
            None => {
                self.spots.insert(rel.into(), Spots { listed: IdList::One(id), ..Spots::default() });
            }
        }
        let root = &mut self.roots[id as usize];
        let target = match root.listing.as_mut() {
            Some(listing) => listing,
            None => root.extra.get_or_insert_with(|| Listing::empty(part.root.clone(), RootState::Dir)),
        };
        target.files.append(&mut part.files);
        target.dirs.append(&mut part.dirs);
        target.blind.append(&mut part.blind);
        target.deferred.append(&mut part.deferred);
        self.lazy.listed += 1;
        self.lazy.time += started.elapsed();
    }

    /// What lazy listing did so far.
    pub fn lazy_stats(&self) -> LazyStats {
        self.lazy
    }

    /// Takes what lazy listings worked around since the last call.
    pub fn take_problems(&mut self) -> Vec<ScanProblem> {
        std::mem::take(&mut self.problems)
    }

    /// Sets the load-path order (expanded entries; roots not added are treated as empty).
    /// Duplicates rank at their first position. Costs O(entries): nothing is rescanned.
    pub fn set_order(&mut self, order: &[PathBuf]) {
        self.rank.iter_mut().for_each(|r| *r = NOT_ON_PATH);
        for (pos, p) in order.iter().enumerate() {
            if let Some(&id) = self.ids.get(bytes(p)) {
                let r = &mut self.rank[id as usize];
                *r = (*r).min(pos as u32);
            }
        }
    }

    fn is_stable(path: &Path, policy: &SyncPolicy) -> bool {
        policy.stable.iter().any(|s| is_under(bytes(path), bytes(s)))
    }

    /// Brings the index in line with `order`: revalidates cached roots on their first use,
    /// lists changed directories again, scans roots never seen, then ranks them.
    pub fn sync(&mut self, order: &[PathBuf], policy: &SyncPolicy) -> SyncReport {
        self.scan = policy.scan.clone();
        let mut report = SyncReport::default();
        let mut to_scan: Vec<PathBuf> = Vec::new();
        let mut to_check: Vec<(RootId, u32, bool, &PathBuf)> = Vec::new();
        let mut seen: FxHashMap<&[u8], ()> = FxHashMap::default();
        for path in order {
            if seen.insert(bytes(path), ()).is_some() {
                continue;
            }
            let Some(&id) = self.ids.get(bytes(path)) else {
                to_scan.push(path.clone());
                continue;
            };
            let root = &self.roots[id as usize];
            if let (Some(base), false) = (root.base, root.checked) {
                let volatile = !Self::is_stable(path, policy);
                if volatile && !root.volatile {
                    // Cached as stable (only its top directory recorded): cannot be checked
                    // directory by directory.
                    to_scan.push(path.clone());
                } else {
                    to_check.push((id, base, volatile, path));
                }
            }
        }
        let verdicts = self.check_roots(&to_check, policy);
        let snapshot = self.base.take();
        for ((id, base, volatile, path), verdict) in to_check.into_iter().zip(verdicts) {
            match verdict {
                Freshness::Fresh => {
                    report.fresh += 1;
                    self.roots[id as usize].checked = true;
                }
                Freshness::Rescan => to_scan.push(path.clone()),
                Freshness::Refresh(dirs) => {
                    let old = snapshot.as_ref().and_then(|s| s.root(base as usize).and_then(|v| s.listing(&v, base)));
                    match old {
                        Some(old) => {
                            let started = now_ns();
                            let mut listing = refresh(&old, &dirs, &policy.scan);
                            report.problems.append(&mut listing.problems);
                            report.refreshed += 1;
                            self.add_scanned(listing, volatile, started);
                        }
                        None => to_scan.push(path.clone()),
                    }
                }
            }
        }
        self.base = snapshot;
        if !to_scan.is_empty() {
            let started = now_ns();
            for mut listing in scan_roots(&to_scan, &policy.scan) {
                report.problems.append(&mut listing.problems);
                report.scanned += 1;
                let volatile = !Self::is_stable(&listing.root, policy);
                self.add_scanned(listing, volatile, started);
            }
        }
        self.set_order(order);
        report
    }

    /// Revalidates cached roots, spread over the scanner's threads when there is enough to
    /// check: a volatile root costs a `stat` per directory, so a big app is worth splitting,
    /// while a few hundred stable roots (a `stat` each) are checked sooner than two threads
    /// start (0.3 against 0.57 ms for the 200-gem fixture's 214 roots).
    fn check_roots(&self, roots: &[(RootId, u32, bool, &PathBuf)], policy: &SyncPolicy) -> Vec<Freshness> {
        let Some(snapshot) = &self.base else { return roots.iter().map(|_| Freshness::Rescan).collect() };
        let views: Vec<_> =
            roots.iter().map(|&(_, base, volatile, _)| (snapshot.root(base as usize), volatile)).collect();
        let check = |(view, volatile): &(Option<RootView>, bool)| match view {
            Some(view) => check_root(snapshot, view, *volatile, policy.validation),
            None => Freshness::Rescan,
        };
        let stats: usize =
            views.iter().map(|(view, volatile)| view.as_ref().filter(|_| *volatile).map_or(1, |v| v.dir_count())).sum();
        let threads = policy.scan.threads.clamp(1, 8).min(stats / STATS_PER_THREAD).max(1);
        if threads == 1 || views.len() < 2 {
            return views.iter().map(check).collect();
        }
        // Contiguous chunks keep the input order; a chunk whose thread panicked is rescanned.
        let chunk = views.len().div_ceil(threads);
        // A chunk whose thread cannot be started (a process or pids limit) is checked here.
        std::thread::scope(|s| {
            let check = &check;
            let handles: Vec<_> = views
                .chunks(chunk)
                .map(|part| {
                    (part, std::thread::Builder::new().spawn_scoped(s, move || part.iter().map(check).collect()))
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|(part, h)| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| part.iter().map(|_| Freshness::Rescan).collect::<Vec<_>>()),
                    Err(_) => part.iter().map(check).collect(),
                })
                .collect()
        })
    }

    /// Every live root as a record to write, dropping roots that are not on the current load
    /// path and were last used before `prune_before_s`.
    pub fn records(&self, now_s: i64, prune_before_s: i64) -> Vec<RootRecord> {
        let mut out = Vec::new();
        let mut base_files = match &self.base {
            Some(s) if self.roots.iter().any(|r| r.base.is_some() && !r.retired) => s.files_by_root(None),
            _ => Vec::new(),
        };
        for (id, r) in self.roots.iter().enumerate() {
            if r.retired {
                continue;
            }
            let on_path = self.rank[id] != NOT_ON_PATH;
            let last_used_s = if on_path { now_s } else { r.last_used_s };
            if !on_path && last_used_s < prune_before_s {
                continue;
            }
            let still_deferred =
                |d: &Vec<u8>| self.spots.get(d.as_slice()).is_some_and(|s| s.deferred.contains(id as u32));
            let listing = match (&r.listing, r.base, &self.base) {
                (Some(l), _, _) => {
                    let mut l = copy(l);
                    l.deferred.retain(still_deferred);
                    Some(l)
                }
                (None, Some(b), Some(s)) => s.root(b as usize).and_then(|v| s.skeleton(&v)).map(|mut l| {
                    l.files = base_files.get_mut(b as usize).map(std::mem::take).unwrap_or_default();
                    if let Some(extra) = &r.extra {
                        let listed =
                            |d: &Vec<u8>| self.spots.get(d.as_slice()).is_some_and(|s| s.listed.contains(id as u32));
                        l.deferred.retain(|d| !listed(d));
                        let mut extra = copy(extra);
                        extra.deferred.retain(still_deferred);
                        l.files.extend(extra.files);
                        l.dirs.extend(extra.dirs);
                        l.blind.extend(extra.blind);
                        l.deferred.extend(extra.deferred);
                    }
                    l
                }),
                _ => None,
            };
            if let Some(mut listing) = listing {
                listing.normalize();
                if !r.volatile {
                    // A stable root is only ever checked at its top directory.
                    listing.dirs.retain(|d| d.rel.is_empty());
                }
                out.push(RootRecord { listing, volatile: r.volatile, scanned_at_ns: r.scanned_at_ns, last_used_s });
            }
        }
        out
    }

    /// Which file `require(feature)` would load, ignoring what is already loaded (deferred
    /// directories it depends on are listed first).
    pub fn lookup(&mut self, feature: &[u8]) -> Resolution {
        match self.parse(feature) {
            Some(q) => self.lookup_query(&q),
            None => Resolution::Unknown,
        }
    }

    /// Parses a feature with this index's DLEXT (`None`: the index never answers it).
    pub fn parse<'f>(&self, feature: &'f [u8]) -> Option<Query<'f>> {
        Query::parse(feature, &self.dlext)
    }

    fn ranked(&self, id: RootId) -> Option<(u32, RootId)> {
        let r = *self.rank.get(id as usize)?;
        (r != NOT_ON_PATH).then_some((r, id))
    }

    /// The best-ranked roots having `stem.rb` and `stem.<dlext>`.
    fn best(&self, stem: &[u8]) -> (Option<Ranked>, Option<Ranked>) {
        let (mut rb, mut ext) = (None, None);
        let consider = |slot: &mut Option<(u32, RootId)>, id: RootId| {
            if let Some(c) = self.ranked(id) {
                *slot = Some(slot.map_or(c, |s: (u32, RootId)| s.min(c)));
            }
        };
        if let Some(p) = self.features.get(stem) {
            p.rb.iter().for_each(|id| consider(&mut rb, id));
            p.ext.iter().for_each(|id| consider(&mut ext, id));
        }
        if let Some(s) = &self.base {
            if let Some((prb, pext)) = s.lookup(stem) {
                s.for_each_id(prb, |id| consider(&mut rb, id));
                s.for_each_id(pext, |id| consider(&mut ext, id));
            }
        }
        (rb, ext)
    }

    /// For the directory prefixes of `stem` (the root itself included): the first rank at
    /// which a blind spot could hide a file, and the first-ranked deferred directory
    /// `(rank, root, prefix length)`.
    fn first_spots(&self, stem: &[u8]) -> (u32, Option<(u32, RootId, usize)>) {
        let base = self.base.as_ref().filter(|s| s.has_spots());
        let (mut blind, mut deferred) = (NOT_ON_PATH, None::<(u32, RootId, usize)>);
        if self.spots.is_empty() && base.is_none() {
            return (blind, deferred);
        }
        let rank = |id: RootId| self.rank.get(id as usize).copied().unwrap_or(NOT_ON_PATH);
        let mut check = |len: usize| {
            let prefix = &stem[..len];
            let overlay = self.spots.get(prefix);
            let mut defer = |id: RootId| {
                let r = rank(id);
                if r != NOT_ON_PATH && deferred.map_or(true, |(d, _, _)| r < d) {
                    deferred = Some((r, id, len));
                }
            };
            if let Some(o) = overlay {
                o.blind.iter().for_each(|id| blind = blind.min(rank(id)));
                o.deferred.iter().for_each(&mut defer);
            }
            if let Some((pb, pd)) = base.and_then(|s| s.spots(prefix)) {
                let s = base.expect("spots came from the snapshot");
                s.for_each_id(pb, |id| blind = blind.min(rank(id)));
                s.for_each_id(pd, |id| {
                    let served = self.roots.get(id as usize).is_some_and(|r| r.listing.is_none() && !r.retired);
                    if served && !overlay.is_some_and(|o| o.listed.contains(id)) {
                        defer(id)
                    }
                });
            }
        };
        check(0);
        for (i, &c) in stem.iter().enumerate() {
            if c == b'/' {
                check(i);
            }
        }
        (blind, deferred)
    }

    /// [`Index::lookup`] for a parsed feature.
    pub fn lookup_query(&mut self, q: &Query) -> Resolution {
        match self.locate(q) {
            Located::Found(root, kind) => Resolution::Found { root, stem: q.stem.to_vec(), kind },
            Located::Missing => Resolution::Missing,
            Located::Unknown => Resolution::Unknown,
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
            match self.step(q) {
                Step::Done(answer) => return answer,
                // Listing a directory always clears its deferral; should it not (a bug), Ruby
                // answers rather than this loop spinning.
                Step::List(id, len) if last == Some((id, len)) => return Located::Unknown,
                Step::List(id, len) => {
                    self.list_now(id, &q.stem[..len], lister);
                    last = Some((id, len));
                }
            }
        }
    }

    /// The answer from what is listed now, or the deferred directory that could change it.
    fn step(&self, q: &Query) -> Step {
        let (rb, ext) = self.best(&q.stem);
        let (blind, deferred) = self.first_spots(&q.stem);
        // Spots ranked before `limit` can change the answer: before the winning `.rb`, or
        // anywhere when a `.rb` is still possible (a bare feature found only as an extension).
        let winner = match q.want {
            Want::Rb => rb.map(|w| (w, Kind::Rb)),
            Want::Ext => ext.map(|w| (w, Kind::Ext)),
            Want::Bare => rb.map(|w| (w, Kind::Rb)).or(ext.map(|w| (w, Kind::Ext))),
        };
        let limit = match (q.want, winner) {
            (Want::Bare, Some((_, Kind::Ext))) => NOT_ON_PATH,
            (_, Some(((rank, _), _))) => rank,
            (_, None) => NOT_ON_PATH,
        };
        match deferred {
            Some((rank, id, len)) if rank < limit && rank < blind => return Step::List(id, len),
            _ => {}
        }
        // A blind spot in the winner's own root counts too (it may hide nothing, but is unknown).
        let hidden = if limit == NOT_ON_PATH { blind != NOT_ON_PATH } else { blind <= limit };
        Step::Done(match winner {
            _ if hidden => Located::Unknown,
            Some(((_, root), kind)) => Located::Found(root, kind),
            None => Located::Missing,
        })
    }

    /// Whether a miss that [`Index::locate`] found still holds on disk. Roots whose contents can
    /// change while the process runs (volatile ones: the application's own directories) are
    /// checked with one `stat` each, of the directory where `stem` would be: it must not exist
    /// (then neither does the file), or be the very directory that was listed, unchanged since
    /// (same device, inode, mtime and size, and not changed within `RACY_NS` of the listing).
    /// Anything else — a directory that appeared, changed, or cannot be asked — is `false`:
    /// Ruby's own search decides. Stable roots (installed gems, Ruby's own directories) are not
    /// asked: nothing is installed into them while a program runs (README, Limits).
    pub fn confirm_missing(&self, stem: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let rel = stem.iter().rposition(|&c| c == b'/').map_or(&stem[..0], |i| &stem[..i]);
        self.roots.iter().enumerate().all(|(id, root)| {
            if !root.volatile || root.retired || self.ranked(id as RootId).is_none() {
                return true;
            }
            let mut dir = root.path.clone();
            if !rel.is_empty() {
                dir.push(b'/');
                dir.extend_from_slice(rel);
            }
            let dir = Path::new(std::ffi::OsStr::from_bytes(&dir));
            match std::fs::metadata(dir) {
                // Absent, not a directory, or unreachable (EACCES, ELOOP): Ruby's `open` of a
                // file in it fails the same way.
                Err(_) => true,
                Ok(md) if !md.is_dir() => true,
                Ok(_) => self
                    .dir_record(id as RootId, rel)
                    .is_some_and(|rec| !changed(dir, &rec, Validation::Mtime, root.scanned_at_ns)),
            }
        })
    }

    /// The record of the directory `rel` of root `id`, from whichever listing holds it.
    fn dir_record(&self, id: RootId, rel: &[u8]) -> Option<DirRecord> {
        let root = &self.roots[id as usize];
        let listed = root.listing.iter().chain(&root.extra).flat_map(|l| &l.dirs).find(|d| d.rel == rel);
        if let Some(rec) = listed {
            return Some(rec.clone());
        }
        let snapshot = self.base.as_ref()?;
        snapshot.find_dir(&snapshot.root(root.base? as usize)?, rel)
    }

    /// The absolute path of a found file, as Ruby would spell it.
    pub fn path_of(&self, root: RootId, stem: &[u8], kind: Kind) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.roots[root as usize].path.len() + stem.len() + self.dlext.len() + 2);
        self.write_path(root, stem, kind, &mut out);
        out
    }

    /// [`Index::path_of`] into a buffer the caller reuses (cleared first).
    pub fn write_path(&self, root: RootId, stem: &[u8], kind: Kind, out: &mut Vec<u8>) {
        let base = &self.roots[root as usize].path;
        out.clear();
        out.extend_from_slice(base);
        if !base.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(stem);
        match kind {
            Kind::Rb => out.extend_from_slice(b".rb"),
            Kind::Ext => {
                out.push(b'.');
                out.extend_from_slice(&self.dlext);
            }
        }
    }

    /// How many roots are known (scanned here or served from the snapshot).
    pub fn root_count(&self) -> usize {
        self.roots.iter().filter(|r| !r.retired).count()
    }

    /// How many distinct feature stems are indexed (snapshot and overlay, overlaps counted twice).
    pub fn len(&self) -> usize {
        self.features.len() + self.base.as_ref().map_or(0, |s| s.feature_count())
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Root {
    fn retired() -> Self {
        Root {
            path: Vec::new(),
            listing: None,
            extra: None,
            base: None,
            retired: true,
            volatile: false,
            scanned_at_ns: 0,
            last_used_s: 0,
            checked: true,
        }
    }
}

/// A listing without its problems (they were reported when it was made).
fn copy(l: &Listing) -> Listing {
    Listing {
        root: l.root.clone(),
        state: l.state,
        files: l.files.clone(),
        dirs: l.dirs.clone(),
        blind: l.blind.clone(),
        deferred: l.deferred.clone(),
        problems: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_under;

    #[test]
    fn is_under_compares_whole_components() {
        for (path, dir) in [("/a/b", "/a"), ("/a", "/a"), ("/a/b", "/a/"), ("/a", "/"), ("/", "/"), ("/a/b/c", "/a/b")]
        {
            assert!(is_under(path.as_bytes(), dir.as_bytes()), "{path} under {dir}");
        }
        for (path, dir) in [("/ab", "/a"), ("/a", "/a/b"), ("/b", "/a"), ("/a.rb", "/a")] {
            assert!(!is_under(path.as_bytes(), dir.as_bytes()), "{path} not under {dir}");
        }
    }
}
