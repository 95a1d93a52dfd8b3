//! The paths `require` was recently answered with, for the order of the questions
//! [`super::resolve`] asks Ruby ([`Hint`]): a re-require asks for its file's absolute path first
//! (one entry of Ruby's features index), a first require for the name as written. Never an
//! answer: Ruby's `rb_feature_provided` decides either way, so the table is a fixed array of
//! path hashes, overwritten freely, that nothing needs to keep in step with `$LOADED_FEATURES`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::resolve::Hint;
use crate::hash::unseeded_hash;

/// Slots of the table (a power of two): a path's hash picks its slot and is kept in it.
const SLOTS: usize = 4096;

/// A process-wide table of recently answered paths (a `static`: requires run one at a time
/// under Ruby's GVL, and a lost update only changes the order of two questions).
pub struct RecentPaths {
    table: [AtomicU64; SLOTS],
}

impl RecentPaths {
    /// An empty table.
    #[allow(clippy::declare_interior_mutable_const)] // only copied into `table`
    pub const fn new() -> Self {
        const EMPTY: AtomicU64 = AtomicU64::new(0);
        RecentPaths { table: [EMPTY; SLOTS] }
    }

    fn slot(&self, path: &[u8]) -> (&AtomicU64, u64) {
        let h = unseeded_hash(path) | 1; // never 0, the empty slot
        (&self.table[h as usize & (SLOTS - 1)], h)
    }
}

impl Default for RecentPaths {
    fn default() -> Self {
        Self::new()
    }
}

impl Hint for RecentPaths {
    fn likely_loaded(&self, path: &[u8]) -> bool {
        let (slot, h) = self.slot(path);
        slot.load(Ordering::Relaxed) == h
    }

    fn answered(&self, path: &[u8]) {
        let (slot, h) = self.slot(path);
        slot.store(h, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_what_it_was_told_until_overwritten() {
        let recent = RecentPaths::new();
        assert!(!recent.likely_loaded(b"/lib/a.rb"));
        recent.answered(b"/lib/a.rb");
        assert!(recent.likely_loaded(b"/lib/a.rb"));
        assert!(!recent.likely_loaded(b"/lib/b.rb"));
        // Another path in the same slot takes it over: a hint, never an answer.
        let same_slot = (0..100_000)
            .map(|i| format!("/lib/x{i}.rb"))
            .find(|p| {
                (unseeded_hash(p.as_bytes()) | 1) as usize & (SLOTS - 1)
                    == (unseeded_hash(b"/lib/a.rb") | 1) as usize & (SLOTS - 1)
            })
            .expect("a colliding path");
        recent.answered(same_slot.as_bytes());
        assert!(!recent.likely_loaded(b"/lib/a.rb"));
    }
}
