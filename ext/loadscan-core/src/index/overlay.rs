//! The overlay: what this process listed, indexed for lookups beside the snapshot (which serves
//! the cached roots in place) — which roots have each stem, and the gaps at each directory
//! prefix, the deferred directories among them.
//!
//! ```text
//! features: "rails/all" => Postings { rb: [7], ext: [] }       root ids having rails/all.rb
//!           "json/ext"  => Postings { rb: [], ext: [2, 31] }
//! gaps:     "rails"     => Gaps { blind: [], deferred: [7, 12], lifted: [] }
//! ```
//!
//! Invariant: the overlay indexes exactly the listings the roots hold (a scanned root's whole
//! listing, a cached root's `listed_since`): a listing is added when a root takes it and
//! forgotten when the root is retired, and nothing else writes it. [`Overlay`] is the one writer
//! of `features`; the gaps are written through it by [`GapTable`]'s verbs.

use rustc_hash::FxHashMap;

use super::gaps::GapTable;
use super::ids::{IdList, RootId};
use crate::scan::{Kind, Listing};

/// Which roots have a feature's stem, as a `.rb` and as a native extension.
#[derive(Default)]
struct Postings {
    rb: IdList,
    ext: IdList,
}

/// Stem => [`Postings`] and directory prefix => gaps, for the listings of this process.
#[derive(Default)]
pub(super) struct Overlay {
    features: FxHashMap<Box<[u8]>, Postings>,
    gaps: GapTable,
}

impl Overlay {
    /// Adds a listing's files, blind spots and deferred directories, as root `id`'s.
    pub(super) fn add(&mut self, id: RootId, listing: &Listing) {
        for f in &listing.files {
            let p = self.features.entry(f.stem.as_slice().into()).or_default();
            match f.kind {
                Kind::Rb => p.rb.insert(id),
                Kind::Ext => p.ext.insert(id),
            }
        }
        self.gaps.add(id, listing);
    }

    /// Drops what was added for root `id` from `listing` (its listing, or what was listed
    /// lazily), the root being retired.
    pub(super) fn forget(&mut self, id: RootId, listing: &Listing) {
        for f in &listing.files {
            if let Some(p) = self.features.get_mut(f.stem.as_slice()) {
                p.rb.remove(id);
                p.ext.remove(id);
                if p.rb.is_empty() && p.ext.is_empty() {
                    self.features.remove(f.stem.as_slice());
                }
            }
        }
        self.gaps.forget(id, listing);
    }

    /// Root `id`'s deferred directory `rel` is listed now (its listing added already).
    pub(super) fn listed(&mut self, id: RootId, rel: &[u8]) {
        self.gaps.listed(id, rel);
    }

    /// The roots having `stem.rb` and `stem.<dlext>` in what this process listed.
    pub(super) fn postings(&self, stem: &[u8]) -> Option<(&IdList, &IdList)> {
        self.features.get(stem).map(|p| (&p.rb, &p.ext))
    }

    /// Every stem with the roots having it (either kind).
    pub(super) fn stems(&self) -> impl Iterator<Item = (&[u8], impl Iterator<Item = RootId> + '_)> {
        self.features.iter().map(|(stem, p)| (&stem[..], p.rb.iter().chain(p.ext.iter())))
    }

    /// How many distinct stems it holds.
    pub(super) fn len(&self) -> usize {
        self.features.len()
    }

    /// The gaps of what this process listed.
    pub(super) fn gaps(&self) -> &GapTable {
        &self.gaps
    }
}
