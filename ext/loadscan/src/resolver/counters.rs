//! Counters for `Loadscan.stats`: requires answered, sure misses, requires left to Ruby by
//! reason, probes (atomics, bumped on every require without a trip through the lock).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use loadscan_core::{LazyStats, Reason, Resolved};

use super::state::{Timings, STATE};

/// Requires answered by the index (a path, or `false`), and requires left to Ruby, by reason.
static HITS: AtomicUsize = AtomicUsize::new(0);
/// Requires answered with a `LoadError` (a miss the index is sure of).
static MISSES: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)] // only used to initialise DEFERRED
const ZERO: AtomicUsize = AtomicUsize::new(0);
static DEFERRED: [AtomicUsize; Reason::ALL.len()] = [ZERO; Reason::ALL.len()];
/// Probes that reached the decorator (see `PROBE`).
static PROBES: AtomicUsize = AtomicUsize::new(0);
/// Set when a sync scanned roots not reported yet (checked on every require, so an atomic).
static RESCANNED: AtomicBool = AtomicBool::new(false);

/// A sync scanned or refreshed roots (`State::rescanned` holds the figures).
pub(super) fn note_rescan() {
    RESCANNED.store(true, Ordering::Relaxed);
}

/// Roots scanned and refreshed, and milliseconds, by syncs since the last call; `None` when
/// there were none (or the lock is busy: reported next time). Only in the main Ractor.
pub fn take_rescan() -> Option<(usize, usize, f64)> {
    // The flag first: this runs on every require, and the Ractor check is a table lookup.
    if !RESCANNED.load(Ordering::Relaxed)
        || !super::state::in_main_ractor()
        || !RESCANNED.swap(false, Ordering::Relaxed)
    {
        return None;
    }
    let mut guard = match STATE.try_lock() {
        Ok(g) => g,
        Err(_) => {
            RESCANNED.store(true, Ordering::Relaxed);
            return None;
        }
    };
    let (scanned, refreshed, took) = guard.as_mut()?.rescanned.take()?;
    Some((scanned, refreshed, took.as_secs_f64() * 1000.0))
}

/// Zeroes the require counters (a new `start`; probes count for the whole process).
pub(super) fn reset() {
    HITS.store(0, Ordering::Relaxed);
    MISSES.store(0, Ordering::Relaxed);
    DEFERRED.iter().for_each(|c| c.store(0, Ordering::Relaxed));
}

/// Counts what `require` was told.
pub(super) fn count(answer: &Resolved) {
    match answer {
        Resolved::Probe => {
            PROBES.fetch_add(1, Ordering::Relaxed);
        }
        Resolved::Defer(reason) => count_deferred(*reason),
        Resolved::Missing => {
            MISSES.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            HITS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts a require left to Ruby (the binding also calls this for arguments it never hands
/// to `resolve`).
pub fn count_deferred(reason: Reason) {
    DEFERRED[reason as usize].fetch_add(1, Ordering::Relaxed);
}

/// How many times `PROBE` reached `resolve` in this process.
pub fn probes() -> usize {
    PROBES.load(Ordering::Relaxed)
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
