//! What Ruby provides with no file: its table of *linked-in extensions* (`static_ext_inits` in
//! the VM). Ruby fills it when it starts (every extension of a `--with-static-linked-ext`
//! build, Prism's `prism/prism.so` from 3.3 on) and its search asks it for a bare or native
//! spelling only after every load-path entry missed. No API reads that table, so a miss of
//! such a spelling is sure only once Ruby itself has said the table lacks it: its own search
//! raised `LoadError` for that very feature (the decorator tells, [`NotLinkedIn::learn`]).
//! The table cannot change while a Ruby runs (`ruby_init_ext` is not exported to extensions),
//! so the fact holds for every later process of the same Ruby build: the cache keeps it (its
//! key names the build) and a warm boot's misses are sure again.
//!
//! ```text
//! not_linked_in: "optional/thing", "rspec/core.so"   features Ruby's own search could not load
//! ```

use rustc_hash::FxHashSet;

use super::feature::Want;

/// At most this many features are learned (a program requiring made-up names in a loop must
/// not grow the process or the cache without bound; past it, such misses go to Ruby).
const MAX_LEARNED: usize = 10_000;

/// Features Ruby's table of linked-in extensions does not hold, by the spelling required.
#[derive(Default)]
pub(super) struct NotLinkedIn(FxHashSet<Box<[u8]>>);

impl NotLinkedIn {
    /// Whether a miss of `feature` (spelled `want`) may still be an extension Ruby provides
    /// with no file, so that only Ruby's own search can tell.
    pub(super) fn may_hold(&self, feature: &[u8], want: Want) -> bool {
        want.may_be_linked_in() && !self.0.contains(feature)
    }

    /// Ruby's own search raised `LoadError` for `feature`, spelled `want` (no entry had it, and
    /// neither did its table of linked-in extensions): from now on a miss of it can be sure.
    /// Only spellings the table may hold are kept, at most [`MAX_LEARNED`]; whether it is new
    /// (which makes the cache worth writing).
    pub(super) fn learn(&mut self, feature: &[u8], want: Want) -> bool {
        if !want.may_be_linked_in() || self.0.len() >= MAX_LEARNED {
            return false;
        }
        self.0.insert(feature.into())
    }

    /// The features learned so far (read from the cache or in this process), sorted.
    pub(super) fn names(&self) -> Vec<&[u8]> {
        let mut names: Vec<&[u8]> = self.0.iter().map(|n| &n[..]).collect();
        names.sort_unstable();
        names
    }

    /// Takes what a cache snapshot learned (at most [`MAX_LEARNED`]).
    pub(super) fn load<'a>(&mut self, names: impl Iterator<Item = &'a [u8]>) {
        self.0.extend(names.take(MAX_LEARNED).map(Box::from));
    }
}
