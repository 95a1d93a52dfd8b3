//! Lazy listing: a lookup lists the deferred directories its answer depends on, one
//! `getdents` each, before answering (each at most once per index): what lists one, and what
//! the listings did.

use std::path::Path;
use std::time::Instant;

use crate::scan::{Listing, ScanOptions, ScanProblem};

/// Lists one deferred directory (`rel` below a root whose recorded device is given) with the
/// given options, as [`crate::scan::list_deferred`] does.
pub type Lister<'a> = dyn FnMut(&Path, &[u8], Option<u64>, &ScanOptions) -> (Listing, Vec<ScanProblem>) + 'a;

/// What lazy listing did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LazyStats {
    /// Deferred directories listed on demand.
    pub listed: usize,
    /// Time spent listing them.
    pub time: std::time::Duration,
}

impl LazyStats {
    /// One more directory listed on demand, since `started`.
    pub(super) fn count(&mut self, started: Instant) {
        self.listed += 1;
        self.time += started.elapsed();
    }
}
