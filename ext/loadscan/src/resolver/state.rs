//! The process-wide state: one index, following `$LOAD_PATH`, behind a lock only ever tried.
//!
//! Locking: the state sits in a `Mutex` that is only ever *tried*. A thread that finds it busy
//! (another thread is scanning with the GVL released) gets "no answer" and Ruby's own
//! `require` runs instead, so no thread ever waits on loadscan while holding the GVL, and no
//! lock of ours is held while Ruby code (`require`) runs.
//!
//! Exceptions: no Ruby exception unwinds through a frame that holds the lock. Ruby code that
//! runs under it (an entry's `to_path`) runs under `rb_protect`, and what it raised, threw or
//! was interrupted with comes back as an `Err`; GVL-free work never raises (see `nogvl`).
//! Either is raised once the lock is released ([`try_synced`]).
//!
//! Fork: a child has only the thread that forked, so a lock another thread held at the fork
//! would stay held in the child for good. `Process._fork` (lib/loadscan/core_ext/process.rb)
//! takes the lock first ([`hold_for_fork`]) and lets it go in parent and child alike
//! ([`release_after_fork`]): the child inherits a state no thread was changing, unlocked.
//!
//! Ractors: only the main Ractor is served; others go to Ruby's own `require`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use loadscan_core::{
    list_deferred, settle, settle_in_turn, Index, Kind, Located, Lookup, ProblemKind, Query, Reason, SyncPolicy,
};
use magnus::Error;
use rb_sys::VALUE;

use super::cache::{load_cache, Cache};
use super::counters;
use crate::load_path::{LoadPath, Polled};
use crate::nogvl::{raise_pending, without_gvl};

/// Where the time went, for `Loadscan.stats`.
#[derive(Default, Clone, Copy)]
pub struct Timings {
    /// Reading and checking the cache file.
    pub load: Duration,
    /// Expanding `$LOAD_PATH` entries (realpath), over all syncs.
    pub expand: Duration,
    /// Revalidating, scanning and ranking, over all syncs.
    pub sync: Duration,
}

pub(super) struct State {
    pub(super) timings: Timings,
    pub(super) index: Index,
    pub(super) load_path: LoadPath,
    pub(super) policy: SyncPolicy,
    pub(super) cache: Option<Cache>,
    /// Everything scans worked around, oldest first (capped at `MAX_PROBLEMS`).
    pub(super) problems: Vec<(ProblemKind, String)>,
    /// How many of `problems` were handed out for a warning already.
    pub(super) reported: usize,
    pub(super) scanned_roots: usize,
    pub(super) refreshed_roots: usize,
    pub(super) fresh_roots: usize,
    pub(super) scans: usize,
    /// Roots scanned and refreshed, and the time it took, by syncs since the last report
    /// (`counters::take_rescan`): scans a `$LOAD_PATH` change made during the boot.
    pub(super) rescanned: Option<(usize, usize, Duration)>,
    /// This Ruby links extensions in (`RbConfig::CONFIG["EXTSTATIC"] == "static"`): a miss may
    /// be one of them, which only Ruby's own search finds, so no miss is sure.
    pub(super) static_ext: bool,
}

pub(super) static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Starts following `load_path` (drops any earlier state). With a cache, its snapshot serves
/// the roots it knows; the answer is why an existing cache was not used (for a warning).
pub fn start(
    load_path: VALUE,
    dlext: &[u8],
    policy: SyncPolicy,
    cache: Option<Cache>,
    static_ext: bool,
) -> Option<String> {
    mark_main_ractor();
    let started = Instant::now();
    let (index, warning, usable) = match &cache {
        Some(c) => without_gvl(|| load_cache(c, dlext)),
        None => (Index::new(dlext), None, false),
    };
    // A cache that can be neither read nor written warns once, here, and is not written at exit.
    let cache = if usable { cache } else { None };
    let timings = Timings { load: started.elapsed(), ..Timings::default() };
    let state = State {
        timings,
        index,
        load_path: LoadPath::new(load_path),
        policy,
        cache,
        problems: Vec::new(),
        reported: 0,
        scanned_roots: 0,
        refreshed_roots: 0,
        fresh_roots: 0,
        scans: 0,
        rescanned: None,
        static_ext,
    };
    counters::reset();
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
    warning
}

thread_local! {
    /// The state lock while this thread forks (between [`hold_for_fork`] and
    /// [`release_after_fork`]).
    static HELD_FOR_FORK: RefCell<Option<MutexGuard<'static, Option<State>>>> = const { RefCell::new(None) };
}

/// Takes the state lock for a `fork` about to happen on this thread: `true` when this thread
/// holds it now, `false` when another one does (the caller waits, GVL released, and asks again:
/// never a wait here).
pub fn hold_for_fork() -> bool {
    HELD_FOR_FORK.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() {
            *held = match STATE.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            };
        }
        held.is_some()
    })
}

/// Lets go of the lock [`hold_for_fork`] took, once the fork is done (in the parent and in the
/// child, where the same thread goes on).
pub fn release_after_fork() {
    HELD_FOR_FORK.with(|held| drop(held.borrow_mut().take()));
}

/// Stops: every later resolve answers `Unknown`.
pub fn stop() {
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

impl State {
    /// Mirrors `$LOAD_PATH`; scans entries never seen. `Ok(false)` when it cannot be mirrored,
    /// `Err` when an entry's `to_path` raised (to be raised once the lock is released).
    pub(super) fn sync(&mut self) -> Result<bool, Error> {
        if self.load_path.is_unchanged() {
            return Ok(true);
        }
        let started = Instant::now();
        let order: Vec<PathBuf> = match self.load_path.poll() {
            Ok(None) => return Ok(true),
            Ok(Some(entries)) => entries.to_vec(),
            Err(Polled::Opaque) => return Ok(false),
            Err(Polled::Raised(e)) => return Err(e),
        };
        let expanded = started.elapsed();
        let (index, policy) = (&mut self.index, &self.policy);
        let report = without_gvl(|| index.sync(&order, policy));
        self.timings.expand += expanded;
        self.timings.sync += started.elapsed() - expanded;
        if report.scanned + report.refreshed > 0 {
            self.scans += 1;
            self.scanned_roots += report.scanned;
            self.refreshed_roots += report.refreshed;
            let (scanned, refreshed, took) = self.rescanned.unwrap_or_default();
            let took = took + started.elapsed();
            self.rescanned = Some((scanned + report.scanned, refreshed + report.refreshed, took));
            counters::note_rescan();
        }
        self.fresh_roots += report.fresh;
        self.absorb(report.problems);
        Ok(true)
    }

    /// Where `feature` is, as Ruby's search would find it now: its file, `None` for a miss the
    /// index is sure of (every root asked, `Index::confirm_missing`), or why Ruby's own
    /// search must answer. The one lookup behind `require`, `resolve_feature_path` and `lookup`.
    /// `foo.so` that no entry has is searched again as a bare feature (`Query::fallback`).
    pub(super) fn find(&mut self, feature: &[u8]) -> Result<Lookup, Reason> {
        let q = self.index.parse(feature).ok_or(Reason::NotFeature)?;
        let bare = q.fallback(feature);
        let found = settle_in_turn([Some(&q), bare.as_ref()].into_iter().flatten(), |q| self.settle_one(q))?;
        Ok((q.want, found))
    }

    /// One search of `find`: the file, `None` for a sure miss, or why Ruby must search.
    fn settle_one(&mut self, q: &Query) -> Result<Option<(Vec<u8>, Kind)>, Reason> {
        let located = locate(&mut self.index, q);
        self.absorb_lazy();
        let (index, linked_in) = (&self.index, self.static_ext && q.want.may_be_static_ext());
        let found = settle(located, || !linked_in && without_gvl(|| index.confirm_missing(&q.stem)))?;
        Ok(found.map(|(root, kind)| (index.path_of(root, &q.stem, kind), kind)))
    }

    /// Takes what lazy listings during the last lookup worked around.
    fn absorb_lazy(&mut self) {
        let problems = self.index.take_problems();
        self.absorb(problems);
    }
}

/// Runs `f` on the state after syncing with `$LOAD_PATH`: `Ok(None)` if stopped, busy, opaque
/// or called from a Ractor other than the main one; `Err` for what Ruby raised meanwhile (an
/// entry's `to_path`, an interrupt during GVL-free work), returned after the lock is released.
pub(super) fn try_synced<T>(f: impl FnOnce(&mut State) -> T) -> Result<Option<T>, Error> {
    if !in_main_ractor() {
        return Ok(None);
    }
    let result = {
        let mut guard = match STATE.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(None),
        };
        match guard.as_mut() {
            None => Ok(None),
            Some(state) => state.sync().map(|mirrored| mirrored.then(|| f(state))),
        }
    };
    raise_pending()?;
    result
}

/// [`try_synced`] for the introspection entry points (`sync`, `explain`, `stems`), which return
/// no `Result`: the error is raised here, once the lock is released; it unwinds only through the
/// caller's frames, which hold none of loadscan's state.
pub(super) fn with_synced<T>(f: impl FnOnce(&mut State) -> T) -> Option<T> {
    try_synced(f).unwrap_or_else(|e| raise_now(e))
}

/// Raises `e` (the lock must not be held).
fn raise_now(e: Error) -> ! {
    unsafe { magnus::rb_sys::resume_error(e) }
}

/// Where a parsed feature is, listing the deferred directories it depends on with the GVL
/// released (the state lock stays held: other threads find it busy and go to Ruby).
fn locate(index: &mut Index, q: &Query) -> Located {
    index.locate_with(q, &mut |root, rel, dev, opts| without_gvl(|| list_deferred(root, rel, dev, opts)))
}

/// The key of a Ractor-local value set in the Ractor that started loadscan (the main one).
static MAIN_RACTOR_KEY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn mark_main_ractor() {
    let key = *MAIN_RACTOR_KEY.get_or_init(|| unsafe { rb_sys::rb_ractor_local_storage_value_newkey() } as usize);
    unsafe { rb_sys::rb_ractor_local_storage_value_set(key as _, rb_sys::Qtrue as VALUE) };
}

/// Whether the running Ractor is the one that started loadscan. Others are left to Ruby: the
/// state is not theirs, and Ruby's own `require` decides what they may load.
pub fn in_main_ractor() -> bool {
    let Some(&key) = MAIN_RACTOR_KEY.get() else { return true };
    let mut v: VALUE = rb_sys::Qnil as VALUE;
    unsafe { rb_sys::rb_ractor_local_storage_value_lookup(key as _, &mut v) && v == rb_sys::Qtrue as VALUE }
}
