//! The process-wide resolver behind `Loadscan::Native`: one index, following `$LOAD_PATH`.
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
//! Ractors: only the main Ractor is served; others go to Ruby's own `require`.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};
use std::time::{Duration, Instant};

use loadscan_core::{bound_dead_roots, encode, CacheDir, LoadError};
use loadscan_core::{resolve, settle, Index, LazyStats, Located, Lookup, SyncPolicy};
use loadscan_core::{Kind, ProblemKind, ScanProblem};
pub use loadscan_core::{Reason, Resolved, PROBE};
use rb_sys::VALUE;

use crate::load_path::{LoadPath, Polled};
use crate::nogvl::{raise_pending, without_gvl};
use loadscan_core::{list_deferred, Query};
use magnus::Error;

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

struct State {
    timings: Timings,
    index: Index,
    load_path: LoadPath,
    policy: SyncPolicy,
    cache: Option<Cache>,
    /// Everything scans worked around, oldest first (capped at `MAX_PROBLEMS`).
    problems: Vec<(ProblemKind, String)>,
    /// How many of `problems` were handed out for a warning already.
    reported: usize,
    scanned_roots: usize,
    refreshed_roots: usize,
    fresh_roots: usize,
    scans: usize,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// Set when a scan found problems not yet handed out for a warning (checked on every require,
/// so it is an atomic rather than a trip through the lock).
static UNREPORTED: AtomicBool = AtomicBool::new(false);
const MAX_PROBLEMS: usize = 1000;
/// Requires answered by the index (a path, or `false`), and requires left to Ruby, by reason.
static HITS: AtomicUsize = AtomicUsize::new(0);
/// Requires answered with a `LoadError` (a miss the index is sure of).
static MISSES: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)] // only used to initialise DEFERRED
const ZERO: AtomicUsize = AtomicUsize::new(0);
static DEFERRED: [AtomicUsize; Reason::ALL.len()] = [ZERO; Reason::ALL.len()];
/// Probes that reached the decorator (see `PROBE`).
static PROBES: AtomicUsize = AtomicUsize::new(0);

/// What a lookup gives back to Ruby.
pub enum Answer {
    /// The absolute path of the file `require` would find.
    Path(Vec<u8>),
    /// No entry has the feature.
    Missing,
    /// loadscan does not know: Ruby's `require` must decide.
    Unknown,
}

/// Where the cache lives and what it must match.
pub struct Cache {
    /// The cache directory; the file is `dir/loadscan.cache` (see `store::CacheDir` for the
    /// checks it must pass).
    pub dir: PathBuf,
    /// Loadscan version, Ruby revision, platform, DLEXT: a file with another key is ignored.
    pub env: Vec<u8>,
    /// The uid that must own the file.
    pub uid: u32,
}

/// A name of loadscan's own, never one another tool may use (the name used before, `index`,
/// became a victim's `.git/index` through a planted symlink). Old `index` files are left alone.
const CACHE_FILE: &str = "loadscan.cache";
/// Roots off the load path this long are dropped from the cache when it is written.
const PRUNE_AFTER_S: i64 = 30 * 24 * 3600;

/// Starts following `load_path` (drops any earlier state). With a cache, its snapshot serves
/// the roots it knows; the answer is why an existing cache was not used (for a warning).
pub fn start(load_path: VALUE, dlext: &[u8], policy: SyncPolicy, cache: Option<Cache>) -> Option<String> {
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
    };
    HITS.store(0, Ordering::Relaxed);
    MISSES.store(0, Ordering::Relaxed);
    DEFERRED.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
    warning
}

/// Opens the cache dir and reads the cache: the index to start from, why an existing cache was
/// not used (for a warning), and whether to write the cache at exit (not when the directory is
/// refused or unusable, nor over a file that is not a loadscan cache: the warning given here is
/// the only one).
fn load_cache(c: &Cache, dlext: &[u8]) -> (Index, Option<String>, bool) {
    let dir = match CacheDir::open(&c.dir, c.uid) {
        Ok(Some(dir)) => dir,
        // Created when the cache is first written.
        Ok(None) => return (Index::new(dlext), None, true),
        Err(e) => {
            let why = format!("not using the cache dir {}: {e}; booting without a cache", c.dir.display());
            return (Index::new(dlext), Some(why), false);
        }
    };
    let path = c.dir.join(CACHE_FILE);
    match dir.load(CACHE_FILE, &c.env) {
        Ok(snapshot) => (Index::from_snapshot(dlext, snapshot), None, true),
        // No cache yet, or one from another loadscan or Ruby (an upgrade): nothing is
        // wrong, the boot lists what it needs and the file is rewritten at exit.
        Err(LoadError::Missing | LoadError::Stale(_)) => (Index::new(dlext), None, true),
        Err(e) => match dir.replaceable(CACHE_FILE) {
            Ok(true) => (Index::new(dlext), Some(format!("{e}: {}; scanning instead", path.display())), true),
            _ => {
                (Index::new(dlext), Some(format!("{e}: {}; scanning instead, not replacing it", path.display())), false)
            }
        },
    }
}

/// What `save` did.
pub enum Saved {
    /// Nothing changed since the cache was read.
    Clean,
    /// Written.
    Written,
    /// No cache configured, or loadscan is stopped or busy.
    Skipped,
    /// The write failed (the reason, for a warning).
    Failed(String),
}

/// Writes the cache if anything changed. `pause` is the test hook that stops mid-write.
pub fn save(pause: Option<std::time::Duration>) -> Saved {
    let mut guard = match STATE.try_lock() {
        Ok(g) => g,
        Err(_) => return Saved::Skipped,
    };
    let Some(state) = guard.as_mut() else { return Saved::Skipped };
    let Some(cache) = &state.cache else { return Saved::Skipped };
    if !state.index.is_dirty() {
        return Saved::Clean;
    }
    let (index, on_path) = (&state.index, state.load_path.entries());
    let result = without_gvl(|| {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let mut records = index.records(now, now - PRUNE_AFTER_S);
        bound_dead_roots(&mut records, on_path);
        let bytes = encode(&records, &cache.env);
        let dir = CacheDir::create(&cache.dir, cache.uid).map_err(|e| e.to_string())?;
        dir.write_atomic(CACHE_FILE, &bytes, pause).map_err(|e| e.to_string())
    });
    match result {
        Ok(_) => {
            state.index.mark_clean();
            Saved::Written
        }
        Err(e) => Saved::Failed(format!("could not write the cache in {}: {e}", cache.dir.display())),
    }
}

/// Stops: every later resolve answers `Unknown`.
pub fn stop() {
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

impl State {
    /// Mirrors `$LOAD_PATH`; scans entries never seen. `Ok(false)` when it cannot be mirrored,
    /// `Err` when an entry's `to_path` raised (to be raised once the lock is released).
    fn sync(&mut self) -> Result<bool, Error> {
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
        }
        self.fresh_roots += report.fresh;
        self.absorb(report.problems);
        Ok(true)
    }

    /// Keeps problems for `Loadscan.problems` and the next warning.
    fn absorb(&mut self, problems: Vec<ScanProblem>) {
        for p in problems {
            if self.problems.len() < MAX_PROBLEMS {
                self.problems.push((p.kind, p.to_string()));
                UNREPORTED.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Where `feature` is, as Ruby's search would find it now: its file, `None` for a miss the
    /// index is sure of (every volatile root asked, `Index::confirm_missing`), or why Ruby's own
    /// search must answer. The one lookup behind `require`, `resolve_feature_path` and `lookup`.
    fn find(&mut self, feature: &[u8]) -> Result<Lookup, Reason> {
        let q = self.index.parse(feature).ok_or(Reason::NotFeature)?;
        let located = locate(&mut self.index, &q);
        self.absorb_lazy();
        let index = &self.index;
        let found = settle(located, || without_gvl(|| index.confirm_missing(&q.stem)))?;
        Ok((q.want, found.map(|(root, kind)| (index.path_of(root, &q.stem, kind), kind))))
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
fn try_synced<T>(f: impl FnOnce(&mut State) -> T) -> Result<Option<T>, Error> {
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
fn with_synced<T>(f: impl FnOnce(&mut State) -> T) -> Option<T> {
    try_synced(f).unwrap_or_else(|e| raise_now(e))
}

/// Raises `e` (the lock must not be held).
fn raise_now(e: Error) -> ! {
    unsafe { magnus::rb_sys::resume_error(e) }
}

/// Where a parsed feature is, listing the deferred directories it depends on with the GVL
/// released (the state lock stays held: other threads find it busy and go to Ruby).
fn locate(index: &mut Index, q: &Query) -> Located {
    index.locate_with(q, &mut |root, rel, opts| without_gvl(|| list_deferred(root, rel, opts)))
}

/// The key of a Ractor-local value set in the Ractor that started loadscan (the main one).
static MAIN_RACTOR_KEY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn mark_main_ractor() {
    let key = *MAIN_RACTOR_KEY.get_or_init(|| unsafe { rb_sys::rb_ractor_local_storage_value_newkey() } as usize);
    unsafe { rb_sys::rb_ractor_local_storage_value_set(key as _, rb_sys::Qtrue as VALUE) };
}

/// Whether the running Ractor is the one that started loadscan. Others are left to Ruby: the
/// state is not theirs, and Ruby's own `require` decides what they may load.
fn in_main_ractor() -> bool {
    let Some(&key) = MAIN_RACTOR_KEY.get() else { return true };
    let mut v: VALUE = rb_sys::Qnil as VALUE;
    unsafe { rb_sys::rb_ractor_local_storage_value_lookup(key as _, &mut v) && v == rb_sys::Qtrue as VALUE }
}

/// The index's answer for `feature`, ignoring `$LOADED_FEATURES` (what
/// `$LOAD_PATH.resolve_feature_path` computes); what Ruby raised meanwhile as an `Err`.
pub fn try_lookup(feature: &[u8]) -> Result<Answer, Error> {
    Ok(match try_synced(|s| s.find(feature))? {
        Some(Ok((_, Some((path, _))))) => Answer::Path(path),
        Some(Ok((_, None)) | Err(Reason::Missing)) => Answer::Missing,
        _ => Answer::Unknown,
    })
}

/// Counts a require left to Ruby (the binding also calls this for arguments it never hands
/// to `resolve`).
pub fn count_deferred(reason: Reason) {
    DEFERRED[reason as usize].fetch_add(1, Ordering::Relaxed);
}

/// Ruby's `rb_feature_provided`: `Some(true)` when provided and not being loaded right now,
/// `Some(false)` when not provided, `None` when it is being loaded; `Err` what Ruby raised (it
/// expands `$LOAD_PATH` itself, running entries' `to_path`).
fn provided(feature: &[u8]) -> Result<Option<bool>, Error> {
    let Some(answer) = with_cstr(feature, |c| {
        magnus::rb_sys::protect(|| unsafe {
            let mut loading: *const std::os::raw::c_char = std::ptr::null();
            let p = rb_sys::rb_feature_provided(c, &mut loading) != 0;
            match (p, loading.is_null()) {
                (false, _) => rb_sys::Qfalse as VALUE,
                (true, true) => rb_sys::Qtrue as VALUE,
                (true, false) => rb_sys::Qnil as VALUE,
            }
        })
    }) else {
        return Ok(None);
    };
    Ok(match answer? {
        v if v == rb_sys::Qtrue as VALUE => Some(true),
        v if v == rb_sys::Qfalse as VALUE => Some(false),
        _ => None,
    })
}

/// Calls `f` with `bytes` as a NUL-terminated C string (on the stack when short).
fn with_cstr<R>(bytes: &[u8], f: impl FnOnce(*const std::os::raw::c_char) -> R) -> Option<R> {
    if bytes.contains(&0) {
        return None;
    }
    let mut stack = [0u8; 512];
    if bytes.len() < stack.len() {
        stack[..bytes.len()].copy_from_slice(bytes);
        return Some(f(stack.as_ptr().cast()));
    }
    let owned = CString::new(bytes).ok()?;
    Some(f(owned.as_ptr()))
}

/// What `require(feature)` should do ([`resolve`]). What Ruby raised meanwhile (an
/// entry's `to_path`, an interrupt) comes back as an `Err` for the caller to raise once its own
/// frames are done.
pub fn try_resolve(feature: &[u8]) -> Result<Resolved, Error> {
    let find = || Ok(try_synced(|s| s.find(feature))?.unwrap_or(Err(Reason::Unavailable)));
    let answer = resolve(feature, find, provided)?;
    match answer {
        Resolved::Probe => {
            PROBES.fetch_add(1, Ordering::Relaxed);
        }
        Resolved::Defer(reason) => count_deferred(reason),
        Resolved::Missing => {
            MISSES.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            HITS.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(answer)
}

/// A file and its kind, `None` for a sure miss, or `Err(())`: Ruby's own search must answer.
pub type FeaturePath = Result<Option<(Kind, Vec<u8>)>, ()>;

/// The index's answer to `$LOAD_PATH.resolve_feature_path(feature)` (which ignores
/// `$LOADED_FEATURES`): the file and its kind, `Ok(None)` for a miss the index is sure of (see
/// `Index::confirm_missing`), or `Err(())` when Ruby's own search must answer; what Ruby raised
/// meanwhile as the outer `Err`.
pub fn try_feature_path(feature: &[u8]) -> Result<FeaturePath, Error> {
    Ok(match try_synced(|s| s.find(feature))? {
        Some(Ok((_, found))) => Ok(found.map(|(path, kind)| (kind, path))),
        _ => Err(()),
    })
}

/// How many times `PROBE` reached `resolve` in this process.
pub fn probes() -> usize {
    PROBES.load(Ordering::Relaxed)
}

/// Syncs now (scanning new entries); returns how many roots are known.
pub fn sync() -> Option<usize> {
    with_synced(|s| s.index.root_count())
}

/// Every problem noticed while scanning so far.
pub fn problems() -> Vec<(ProblemKind, String)> {
    match STATE.try_lock() {
        Ok(g) => g.as_ref().map(|s| s.problems.clone()).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Problems not handed out for a warning yet (the caller warns after the lock is released).
pub fn unreported_problems() -> Vec<(ProblemKind, String)> {
    if !UNREPORTED.swap(false, Ordering::Relaxed) {
        return Vec::new();
    }
    match STATE.try_lock() {
        Ok(mut g) => match g.as_mut() {
            Some(s) if s.reported < s.problems.len() => {
                let new = s.problems[s.reported..].to_vec();
                s.reported = s.problems.len();
                new
            }
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    }
}

/// Counters for `Loadscan.stats`.
pub struct Stats {
    pub roots_scanned: usize,
    pub roots_refreshed: usize,
    pub roots_from_cache: usize,
    pub features: usize,
    pub scans: usize,
    pub load_path_entries: usize,
    pub hits: usize,
    pub misses: usize,
    /// Requires left to Ruby, per `Reason` (in `Reason::ALL` order).
    pub deferred: [usize; Reason::ALL.len()],
    pub timings: Timings,
    pub lazy: LazyStats,
}

pub fn stats() -> Option<Stats> {
    let g = STATE.try_lock().ok()?;
    let s = g.as_ref()?;
    Some(Stats {
        roots_scanned: s.scanned_roots,
        roots_refreshed: s.refreshed_roots,
        roots_from_cache: s.fresh_roots,
        features: s.index.len(),
        scans: s.scans,
        load_path_entries: s.load_path.entries().len(),
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        deferred: std::array::from_fn(|i| DEFERRED[i].load(Ordering::Relaxed)),
        timings: s.timings,
        lazy: s.index.lazy_stats(),
    })
}

/// What the index holds about `feature` (`loadscan explain`); `None` when it is not a feature
/// the index answers (a path, or loadscan stopped or busy).
pub fn explain(feature: &[u8]) -> Option<loadscan_core::Explanation> {
    with_synced(|s| s.index.parse(feature).map(|q| s.index.explain(&q))).flatten()
}

/// Every stem the index holds for the current load path (`loadscan verify`).
pub fn stems() -> Vec<Vec<u8>> {
    with_synced(|s| s.index.stems()).unwrap_or_default()
}
