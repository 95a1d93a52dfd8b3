//! The paths `require` was recently answered with, for the order of the questions the core's
//! `resolve` asks Ruby ([`Hint`]): a re-require asks for its file's absolute path first (one
//! entry of Ruby's features index), a first require for the name as written. Never an answer:
//! Ruby's `rb_feature_provided` decides either way, so the table is a fixed array of path
//! hashes, overwritten freely, that nothing needs to keep in step with `$LOADED_FEATURES`.

use std::sync::atomic::{AtomicU64, Ordering};

use loadscan_core::{stable_hash, Hint};

/// Slots of the table (a power of two): a path's hash picks its slot and is kept in it.
const SLOTS: usize = 4096;
#[allow(clippy::declare_interior_mutable_const)] // only used to initialise TABLE
const EMPTY: AtomicU64 = AtomicU64::new(0);
static TABLE: [AtomicU64; SLOTS] = [EMPTY; SLOTS];

/// The process-wide table (requires hold the GVL; a lost update only changes an order).
pub(super) struct Recent;

impl Recent {
    fn slot(path: &[u8]) -> (&'static AtomicU64, u64) {
        let h = stable_hash(path) | 1; // never 0, the empty slot
        (&TABLE[h as usize & (SLOTS - 1)], h)
    }
}

impl Hint for Recent {
    fn likely_loaded(&self, path: &[u8]) -> bool {
        let (slot, h) = Self::slot(path);
        slot.load(Ordering::Relaxed) == h
    }

    fn answered(&self, path: &[u8]) {
        let (slot, h) = Self::slot(path);
        slot.store(h, Ordering::Relaxed);
    }
}
