//! The overlay's gap table: for each directory prefix, the roots whose contents there are not
//! (yet) known. The one writer of it: a listing's gaps are added ([`GapTable::add`]) and
//! forgotten ([`GapTable::forget`]) with the listing, and a deferred directory listed on demand
//! is marked listed ([`GapTable::listed`]); everything else only reads it.

use rustc_hash::FxHashMap;

use super::ids::{IdList, RootId};
use crate::scan::Listing;

/// A *gap* at one directory prefix: the roots whose contents there are not (yet) known.
#[derive(Default)]
pub(super) struct Gaps {
    /// Blind spots: Ruby answers below them.
    blind: IdList,
    /// Deferred directories of roots scanned in this process.
    deferred: IdList,
    /// *Lifted deferrals*: cached roots whose directory here the snapshot records as deferred
    /// but this process has listed since. The snapshot cannot be changed, so this masks its
    /// record until the cache is written again.
    lifted: IdList,
}

impl Gaps {
    /// The roots with a blind spot here.
    pub(super) fn blind(&self) -> &IdList {
        &self.blind
    }

    /// The roots scanned in this process with a deferred directory here.
    pub(super) fn deferred(&self) -> &IdList {
        &self.deferred
    }

    /// The cached roots whose deferral here is lifted.
    pub(super) fn lifted(&self) -> &IdList {
        &self.lifted
    }

    fn is_empty(&self) -> bool {
        self.blind.is_empty() && self.deferred.is_empty() && self.lifted.is_empty()
    }
}

/// Directory prefix => [`Gaps`]; a prefix no root has a gap at has no entry.
#[derive(Default)]
pub(super) struct GapTable(FxHashMap<Box<[u8]>, Gaps>);

impl GapTable {
    /// The gaps at `prefix`, if any root has one there.
    pub(super) fn get(&self, prefix: &[u8]) -> Option<&Gaps> {
        self.0.get(prefix)
    }

    /// Whether no root has a gap anywhere.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds root `id`'s blind spots and deferred directories from `listing`.
    pub(super) fn add(&mut self, id: RootId, listing: &Listing) {
        for b in &listing.blind {
            self.0.entry(b.as_slice().into()).or_default().blind.insert(id);
        }
        for d in &listing.deferred {
            self.0.entry(d.as_slice().into()).or_default().deferred.insert(id);
        }
    }

    /// Drops every gap of root `id` at the prefixes of `listing` (its gaps and its directories,
    /// where a lifted deferral may be).
    pub(super) fn forget(&mut self, id: RootId, listing: &Listing) {
        let prefixes = listing.blind.iter().chain(&listing.deferred).chain(listing.dirs.iter().map(|d| &d.rel));
        for prefix in prefixes {
            if let Some(g) = self.0.get_mut(prefix.as_slice()) {
                g.blind.remove(id);
                g.deferred.remove(id);
                g.lifted.remove(id);
                if g.is_empty() {
                    self.0.remove(prefix.as_slice());
                }
            }
        }
    }

    /// Root `id`'s deferred directory `rel` is listed now. A root's own `deferred` list keeps
    /// the name until the cache is written (`records` drops it then); deferred in the snapshot,
    /// which cannot be changed, it is masked by a lifted deferral.
    pub(super) fn listed(&mut self, id: RootId, rel: &[u8]) {
        match self.0.get_mut(rel) {
            Some(gap) if gap.deferred.contains(id) => gap.deferred.remove(id),
            Some(gap) => gap.lifted.insert(id),
            None => {
                self.0.insert(rel.into(), Gaps { lifted: IdList::One(id), ..Gaps::default() });
            }
        }
    }
}
