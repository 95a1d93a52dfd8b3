//! The figures of `Loadscan.stats` and the last boot's record: require counters (atomics,
//! bumped on every `require` without a trip through any lock), timings, and one list of named
//! fields ([`Stats::fields`]) that both the Ruby Hash and the JSON record are made from.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::index::{LazyStats, Reason, Resolved};

/// Where the time went.
#[derive(Default, Clone, Copy, Debug, PartialEq)]
pub struct Timings {
    /// Reading and checking the cache file.
    pub load: Duration,
    /// Expanding load-path entries (realpath), over all syncs.
    pub expand: Duration,
    /// Revalidating, scanning and ranking, over all syncs.
    pub sync: Duration,
    /// The start: the cache read and the first sync ([`crate::Session::start`]).
    pub setup: Duration,
}

/// What `require` was told, counted process-wide (a `static` of the binding's).
pub struct Counters {
    /// Requires answered by the index (a path, or `false`).
    hits: AtomicUsize,
    /// Requires answered with a `LoadError` (a sure miss).
    misses: AtomicUsize,
    /// Requires left to Ruby, per [`Reason`] (in `Reason::ALL` order).
    deferred: [AtomicUsize; Reason::ALL.len()],
    /// Probes that reached the decorator (see `PROBE`): for the whole process.
    probes: AtomicUsize,
}

/// The require counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requires {
    /// Requires answered by the index.
    pub hits: usize,
    /// Sure misses.
    pub misses: usize,
    /// Requires left to Ruby, per [`Reason`] (in `Reason::ALL` order).
    pub deferred: [usize; Reason::ALL.len()],
}

impl Counters {
    /// All zero.
    #[allow(clippy::declare_interior_mutable_const)] // only copied into `deferred`
    pub const fn new() -> Self {
        const ZERO: AtomicUsize = AtomicUsize::new(0);
        Counters { hits: ZERO, misses: ZERO, deferred: [ZERO; Reason::ALL.len()], probes: ZERO }
    }

    /// Counts what `require` was told.
    pub fn count(&self, answer: &Resolved) {
        let counter = match answer {
            Resolved::Probe => &self.probes,
            Resolved::Defer(reason) => &self.deferred[*reason as usize],
            Resolved::LoadError => &self.misses,
            Resolved::Path(_) | Resolved::Loaded => &self.hits,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a require left to Ruby before any lookup (an argument that is not a String).
    pub fn count_deferred(&self, reason: Reason) {
        self.deferred[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the probe reached the decorator in this process.
    pub fn probes(&self) -> usize {
        self.probes.load(Ordering::Relaxed)
    }

    /// Zeroes the require counters (a new session; probes count for the whole process).
    pub fn reset(&self) {
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
        self.deferred.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }

    /// The counters now.
    pub fn read(&self) -> Requires {
        Requires {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            deferred: std::array::from_fn(|i| self.deferred[i].load(Ordering::Relaxed)),
        }
    }
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

/// Everything `Loadscan.stats` tells.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    /// Roots listed whole.
    pub roots_scanned: usize,
    /// Cached roots whose changed directories were listed again.
    pub roots_refreshed: usize,
    /// Cached roots confirmed unchanged.
    pub roots_from_cache: usize,
    /// Features the index holds.
    pub features: usize,
    /// Syncs that scanned something.
    pub scans: usize,
    /// Expanded load-path entries, as last synced.
    pub load_path_entries: usize,
    /// The require counters.
    pub requires: Requires,
    /// Where the time went.
    pub timings: Timings,
    /// What lazy listing did.
    pub lazy: LazyStats,
}

/// One value of [`Stats::fields`].
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    /// A count.
    Count(usize),
    /// Milliseconds, rounded to hundredths.
    Ms(f64),
    /// Counts by name (requires left to Ruby, by reason).
    Counts(Vec<(&'static str, usize)>),
}

impl Stats {
    /// Every figure under its name in `Loadscan.stats` and the last boot's record, in order.
    pub fn fields(&self) -> Vec<(&'static str, Figure)> {
        let ms = |d: Duration| Figure::Ms((d.as_secs_f64() * 1e5).round() / 100.0);
        let r = &self.requires;
        let by_reason = Reason::ALL.iter().zip(r.deferred).map(|(reason, n)| (reason.name(), n)).collect();
        vec![
            ("roots_scanned", Figure::Count(self.roots_scanned)),
            ("roots_refreshed", Figure::Count(self.roots_refreshed)),
            ("roots_from_cache", Figure::Count(self.roots_from_cache)),
            ("features", Figure::Count(self.features)),
            ("scans", Figure::Count(self.scans)),
            ("load_path_entries", Figure::Count(self.load_path_entries)),
            ("hits", Figure::Count(r.hits)),
            ("misses", Figure::Count(r.misses)),
            ("deferred", Figure::Count(r.deferred.iter().sum())),
            ("left_to_ruby", Figure::Counts(by_reason)),
            ("cache_load_ms", ms(self.timings.load)),
            ("expand_ms", ms(self.timings.expand)),
            ("sync_ms", ms(self.timings.sync)),
            ("setup_ms", ms(self.timings.setup)),
            ("dirs_listed_lazily", Figure::Count(self.lazy.listed)),
            ("lazy_ms", ms(self.lazy.time)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_each_answer_once_and_reset_all_but_probes() {
        let c = Counters::new();
        c.count(&Resolved::Path(b"/a.rb".to_vec()));
        c.count(&Resolved::Loaded);
        c.count(&Resolved::LoadError);
        c.count(&Resolved::Defer(Reason::BlindSpot));
        c.count_deferred(Reason::NotString);
        c.count(&Resolved::Probe);
        let r = c.read();
        assert_eq!((r.hits, r.misses, r.deferred.iter().sum::<usize>(), c.probes()), (2, 1, 2, 1));
        assert_eq!(r.deferred[Reason::BlindSpot as usize], 1);
        c.reset();
        assert_eq!((c.read(), c.probes()), (Requires::default(), 1));
    }
}
