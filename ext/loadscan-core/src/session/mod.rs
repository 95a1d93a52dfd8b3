//! What a process follows: `$LOAD_PATH` as Ruby expands it ([`ExpandedLoadPath`]), one
//! [`Index`] kept in line with it under one [`crate::SyncPolicy`], an optional [`CacheFile`] read at
//! the start and written on `save` (and the last boot's record beside it), the problems scans
//! worked around (with how many were handed out for a warning), and the figures of
//! `Loadscan.stats`. The binding holds one `Session` behind its lock and drives it exactly as
//! the tests (`tests/session.rs`) do: [`Session::start`] (the cache dir opened once, the first
//! sync), `sync` with the Ruby array as the [`Entries`] source before each question, `find`,
//! and [`Session::finish`] at exit (the cache and the last boot's record, under the one rule of
//! [`Session::writes`]); blocking work runs through the [`Blocking`] it is given.

mod figures;
mod last_boot;
mod life;
mod pending;
mod problems;

use std::time::{Duration, Instant};

pub use figures::{Counters, Figure, Requires, Stats, Timings};
pub use last_boot::Json;
pub use life::{Finished, Saved, Settings, Started};
pub use pending::Pending;
pub use problems::Problem;

use crate::blocking::Blocking;
use crate::index::{Answer, Explanation, Index, Reason};
use crate::load_path::{Entries, ExpandedLoadPath, SyncError};
use crate::scan::ScanProblem;
use crate::store::CacheFile;
use problems::Problems;

/// Roots scanned and refreshed by syncs since the last [`Session::take_rescan`], and the time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rescan {
    /// Roots listed whole.
    pub scanned: usize,
    /// Cached roots whose changed directories were listed again.
    pub refreshed: usize,
    /// Time the syncs took.
    pub took: Duration,
}

/// One process's index, cache and figures.
pub struct Session {
    load_path: ExpandedLoadPath,
    index: Index,
    cache: Option<CacheFile>,
    /// Whether the cache dir as opened may be written ([`crate::store::Opened::writable`]).
    writable: bool,
    /// Never written to in this process ([`Settings::readonly`], [`Session::set_readonly`]).
    readonly: bool,
    /// Its cache was deleted by this process ([`Session::clear`]): not written again.
    cleared: bool,
    problems: Problems,
    rescan: Option<Rescan>,
    figures: Figures,
}

/// What the session did, for [`Stats`].
#[derive(Default)]
struct Figures {
    timings: Timings,
    scanned_roots: usize,
    refreshed_roots: usize,
    fresh_roots: usize,
    scans: usize,
    load_path_entries: usize,
}

impl Session {
    /// Starts a session: opens the cache directory once, reads the cache and the last boot's
    /// record from it, then syncs with `$LOAD_PATH`, read from `source` (what that first sync
    /// listed is the start's, not a rescan: [`Session::take_rescan`] does not see it). `Err`:
    /// asking an element for its path failed ([`SyncError::Raised`]), for the caller to raise; a
    /// load path that cannot be mirrored now ([`SyncError::Opaque`]) leaves the sync to the first
    /// question.
    pub fn start<S: Entries>(
        settings: Settings,
        source: &mut S,
        blocking: &impl Blocking,
    ) -> Result<Started, S::Error> {
        let started = Instant::now();
        let Settings { policy, cache, readonly } = settings;
        let opened = cache.as_ref().map(|c| blocking.run(|| c.open()));
        let (snapshot, warning, writable, last_boot) = match opened {
            None => (None, None, false, None),
            Some(o) => (o.snapshot, o.warning, o.writable, o.last_boot),
        };
        let index = match snapshot {
            Some(snapshot) => Index::from_snapshot(policy, snapshot),
            None => Index::new(policy),
        };
        let figures =
            Figures { timings: Timings { load: started.elapsed(), ..Timings::default() }, ..Figures::default() };
        let mut session = Session {
            load_path: ExpandedLoadPath::default(),
            index,
            cache,
            writable,
            readonly,
            cleared: false,
            problems: Problems::default(),
            rescan: None,
            figures,
        };
        match session.sync(source, blocking) {
            Ok(()) | Err(SyncError::Opaque) => {}
            Err(SyncError::Raised(e)) => return Err(e),
        }
        session.rescan = None;
        session.figures.timings.setup = started.elapsed();
        Ok(Started { session, warning, last_boot })
    }

    /// Brings the session in line with `$LOAD_PATH`, read from `source`: expands what Ruby
    /// would expand again ([`ExpandedLoadPath::poll`]) and, when the expanded entries changed,
    /// brings the index in line with them (scanning what it has not seen: see
    /// [`Session::take_rescan`]). A few field reads and [`Entries::is_unchanged`] when nothing
    /// changed, before every question. `Err`: the load path cannot be mirrored now
    /// ([`SyncError::Opaque`]: Ruby answers), or asking an element for its path failed
    /// ([`SyncError::Raised`]: for the caller to raise once it holds nothing of its own).
    #[inline]
    pub fn sync<S: Entries>(&mut self, source: &mut S, blocking: &impl Blocking) -> Result<(), SyncError<S::Error>> {
        if self.load_path.is_mirrored() && source.is_unchanged() {
            return Ok(());
        }
        self.poll(source, blocking)
    }

    /// [`Session::sync`] once `$LOAD_PATH` may have changed: out of line, so that the check
    /// before every question stays a few instructions wherever it is inlined.
    #[inline(never)]
    fn poll<S: Entries>(&mut self, source: &mut S, blocking: &impl Blocking) -> Result<(), SyncError<S::Error>> {
        let started = Instant::now();
        if self.load_path.poll(source)?.is_some() {
            self.sync_index(started.elapsed(), blocking);
        }
        Ok(())
    }

    /// Brings the index in line with the entries as last expanded; `expanding` is the time
    /// their expansion took.
    fn sync_index(&mut self, expanding: Duration, blocking: &impl Blocking) {
        let started = Instant::now();
        let (index, order) = (&mut self.index, self.load_path.entries());
        let report = blocking.run(|| index.sync(order));
        let took = started.elapsed();
        let f = &mut self.figures;
        f.timings.expand += expanding;
        f.timings.sync += took;
        f.load_path_entries = order.len();
        f.fresh_roots += report.fresh;
        if report.scanned + report.refreshed > 0 {
            f.scans += 1;
            f.scanned_roots += report.scanned;
            f.refreshed_roots += report.refreshed;
            let r = self.rescan.get_or_insert_with(Rescan::default);
            r.scanned += report.scanned;
            r.refreshed += report.refreshed;
            r.took += expanding + took;
        }
        self.absorb(report.problems);
    }

    /// Where `feature` is, as Ruby's search would find it now ([`Index::find`]).
    pub fn find(&mut self, feature: &[u8], blocking: &impl Blocking) -> Result<Answer, Reason> {
        let found = self.index.find(feature, blocking);
        let problems = self.index.take_problems();
        self.absorb(problems);
        found
    }

    /// Ruby's own search raised `LoadError` for `feature`, which the session had left to it: a
    /// later miss of it can be sure ([`Index::learn_not_linked_in`]).
    pub fn learn_not_linked_in(&mut self, feature: &[u8]) {
        self.index.learn_not_linked_in(feature);
    }

    /// The one rule for what a boot writes, its cache and its record alike: the cache dir it
    /// was started with, as long as opening it allowed writing ([`crate::store::Opened::writable`]:
    /// not refused, not another's file, not read-only to this user), the session is not
    /// read-only, and its cache was not cleared in this process.
    pub fn writes(&self) -> Option<&CacheFile> {
        self.cache.as_ref().filter(|_| self.writable && !self.readonly && !self.cleared)
    }

    /// Read-only from now on (or not): a later setup's `readonly:`.
    pub fn set_readonly(&mut self, readonly: bool) {
        self.readonly = readonly;
    }

    /// The cache directory the session was started with, if any.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.cache.as_ref().map(|c| c.dir.as_path())
    }

    /// Deletes the cache and the last boot's record in the session's cache dir
    /// ([`CacheFile::clear`]); from now on the session writes neither (`rake loadscan:clear`
    /// leaves the next boot a cold start).
    pub fn clear(&mut self) -> Result<Vec<std::path::PathBuf>, String> {
        self.cleared = true;
        self.cache.as_ref().map_or(Ok(Vec::new()), CacheFile::clear)
    }

    /// Writes the cache if anything changed (roots off the load path as last synced age out),
    /// where [`Session::writes`] allows.
    pub fn save(&mut self, blocking: &impl Blocking) -> Saved {
        let Some(cache) = self.writes() else { return Saved::Skipped };
        if !self.index.is_dirty() {
            return Saved::Clean;
        }
        let (index, on_path) = (&self.index, self.load_path.entries());
        let written = blocking.run(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            cache.save(index.records(now, CacheFile::prune_before(now)), &index.not_linked_in(), on_path)
        });
        match written {
            Ok(()) => {
                self.index.mark_clean();
                Saved::Written
            }
            Err(why) => Saved::Failed(why),
        }
    }

    /// Lists the racy directories of what this session listed again once their window has
    /// passed (`Index::relist_racy`, ranked by the load path as last synced), so the cache
    /// written next serves every boot that only reads it (`loadscan build`): `Some(wait)` while
    /// a window is open.
    pub fn relist_racy(&mut self, blocking: &impl Blocking) -> Option<Duration> {
        let (index, order) = (&mut self.index, self.load_path.entries());
        match blocking.run(|| index.relist_racy(order)) {
            Ok(problems) => {
                self.absorb(problems);
                None
            }
            Err(wait) => Some(wait),
        }
    }

    /// Ends the session's life (at exit): saves the cache ([`Session::save`]) and, when the
    /// cache was written or is clean, records this boot beside it: `extra`'s fields, what the
    /// cache did (`"cache"`), then the figures of [`Session::stats`] ([`Stats::last_boot_json`]).
    /// Both under [`Session::writes`]: a read-only, cleared or refused cache dir gets neither.
    pub fn finish(&mut self, counters: &Counters, extra: &[(String, Json)], blocking: &impl Blocking) -> Finished {
        let saved = self.save(blocking);
        let unrecorded = match (&saved, self.writes()) {
            (Saved::Written | Saved::Clean, Some(cache)) => {
                let mut fields = extra.to_vec();
                fields.push(("cache".to_string(), Json::Str(saved.name().as_bytes().to_vec())));
                let json = self.stats(counters).last_boot_json(&fields);
                blocking.run(|| cache.record_last_boot(&json)).err()
            }
            _ => None,
        };
        Finished { saved, unrecorded }
    }

    /// Keeps problems for [`Session::problems`] and the next warning.
    fn absorb(&mut self, problems: Vec<ScanProblem>) {
        self.problems.absorb(problems);
    }

    /// Every problem scans worked around so far (at most `MAX_PROBLEMS`), oldest first.
    pub fn problems(&self) -> &[Problem] {
        self.problems.all()
    }

    /// Whether some problems were not handed out by [`Session::take_unreported`] yet.
    pub fn has_unreported(&self) -> bool {
        self.problems.has_unreported()
    }

    /// The problems not handed out for a warning yet; they count as handed out from now on.
    pub fn take_unreported(&mut self) -> Vec<Problem> {
        self.problems.take_unreported()
    }

    /// What syncs scanned since the last call, if anything.
    pub fn take_rescan(&mut self) -> Option<Rescan> {
        self.rescan.take()
    }

    /// Whether a rescan waits for [`Session::take_rescan`].
    pub fn has_rescan(&self) -> bool {
        self.rescan.is_some()
    }

    /// The figures of `Loadscan.stats`, with the require counters.
    pub fn stats(&self, counters: &Counters) -> Stats {
        let f = &self.figures;
        Stats {
            roots_scanned: f.scanned_roots,
            roots_refreshed: f.refreshed_roots,
            roots_from_cache: f.fresh_roots,
            features: self.index.len(),
            scans: f.scans,
            load_path_entries: f.load_path_entries,
            requires: counters.read(),
            timings: f.timings,
            lazy: self.index.lazy_stats(),
        }
    }

    /// How many roots the index knows.
    pub fn root_count(&self) -> usize {
        self.index.root_count()
    }

    /// What the index holds about `feature` (`loadscan explain`); `None` for a path.
    pub fn explain(&self, feature: &[u8]) -> Option<Explanation> {
        self.index.parse(feature).map(|q| self.index.explain(&q))
    }

    /// Every stem the index holds for the current load path (`loadscan verify`).
    pub fn stems(&self) -> Vec<Vec<u8>> {
        self.index.stems()
    }
}
