//! Ruby's precedence over what is listed now: extension by extension, then entry by entry, and
//! the blind spots and deferred directories that could change the answer. Pure logic: nothing
//! here touches the file system (listing what a lookup needs is `lazy`'s job).

use super::feature::{prefix_lens, Query, Want};
use super::ids::RootId;
use super::overlay::Overlay;
use super::roots::{Roots, NOT_ON_PATH};
use crate::scan::Kind;
use crate::store::Snapshot;

/// A root with its load-path position: `(rank, id)`, compared rank first.
type Ranked = (u32, RootId);

/// Where a feature is (the caller has its stem, in its [`Query`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Located {
    /// In this root, with this extension.
    Found(RootId, Kind),
    /// No entry has it.
    Nowhere,
    /// The index cannot answer exactly (unsupported spelling, or a blind spot of an entry
    /// that comes first): leave it to Ruby.
    Unknown,
}

/// A deferred directory that could change an answer: root `root`'s directory named by the
/// first `prefix_len` bytes of the stem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Deferred {
    root: RootId,
    prefix_len: usize,
}

impl Deferred {
    /// The root whose directory it is.
    pub(super) fn root(&self) -> RootId {
        self.root
    }

    /// The directory, relative to the root: a prefix of `stem`, the stem looked up.
    pub(super) fn rel<'s>(&self, stem: &'s [u8]) -> &'s [u8] {
        &stem[..self.prefix_len]
    }
}

/// One step of a lookup: an answer, or a deferred directory to list first.
pub(super) enum Step {
    Done(Located),
    ListFirst(Deferred),
}

/// What a lookup reads: the roots' ranks, and what is listed (the overlay, and the snapshot
/// for the roots it still speaks for). Borrowed from the index for one question.
#[derive(Clone, Copy)]
pub(super) struct Tables<'a> {
    roots: &'a Roots,
    overlay: &'a Overlay,
    snapshot: Option<&'a Snapshot>,
}

impl<'a> Tables<'a> {
    pub(super) fn new(roots: &'a Roots, overlay: &'a Overlay, snapshot: Option<&'a Snapshot>) -> Self {
        Tables { roots, overlay, snapshot }
    }

    /// The roots, ranked.
    pub(super) fn roots(&self) -> &'a Roots {
        self.roots
    }

    /// What this process listed.
    pub(super) fn overlay(&self) -> &'a Overlay {
        self.overlay
    }

    /// The cache snapshot, if one was read.
    pub(super) fn snapshot(&self) -> Option<&'a Snapshot> {
        self.snapshot
    }

    /// Calls `rb` and `ext` with each root having `stem.rb` and `stem.<dlext>` (overlay and
    /// snapshot, ranked or not).
    pub(super) fn for_each_posting(&self, stem: &[u8], mut rb: impl FnMut(RootId), mut ext: impl FnMut(RootId)) {
        if let Some((prb, pext)) = self.overlay.postings(stem) {
            prb.iter().for_each(&mut rb);
            pext.iter().for_each(&mut ext);
        }
        if let Some(s) = self.snapshot {
            if let Some((prb, pext)) = s.postings(stem) {
                s.for_each_id(prb, rb);
                s.for_each_id(pext, ext);
            }
        }
    }

    /// The best-ranked roots having `stem.rb` and `stem.<dlext>`.
    fn best(&self, stem: &[u8]) -> (Option<Ranked>, Option<Ranked>) {
        let consider = |slot: &mut Option<Ranked>, id: RootId| {
            if let Some(c) = self.roots.ranked(id) {
                *slot = Some(slot.map_or(c, |s: Ranked| s.min(c)));
            }
        };
        let (mut rb, mut ext) = (None, None);
        self.for_each_posting(stem, |id| consider(&mut rb, id), |id| consider(&mut ext, id));
        (rb, ext)
    }

    /// Calls `blind` and `deferred` with each root that has a blind spot or a deferred
    /// directory at `prefix` (snapshot and overlay; a lifted deferral is not one).
    pub(super) fn for_each_gap(&self, prefix: &[u8], mut blind: impl FnMut(RootId), mut deferred: impl FnMut(RootId)) {
        let overlay = self.overlay.gaps().get(prefix);
        if let Some(o) = overlay {
            o.blind().iter().for_each(&mut blind);
            o.deferred().iter().for_each(&mut deferred);
        }
        let Some(s) = self.snapshot.filter(|s| s.has_gaps()) else { return };
        if let Some((pb, pd)) = s.gaps(prefix) {
            s.for_each_id(pb, blind);
            s.for_each_id(pd, |id| {
                if self.roots.is_cached(id) && !overlay.is_some_and(|o| o.lifted().contains(id)) {
                    deferred(id)
                }
            });
        }
    }

    /// For the directory prefixes of `stem` (the root itself included): the first rank at
    /// which a blind spot could hide a file, and the first-ranked deferred directory.
    fn first_gaps(&self, stem: &[u8]) -> (u32, Option<(u32, Deferred)>) {
        let (mut blind, mut deferred) = (NOT_ON_PATH, None::<(u32, Deferred)>);
        if self.overlay.gaps().is_empty() && !self.snapshot.is_some_and(|s| s.has_gaps()) {
            return (blind, deferred);
        }
        let rank = |id: RootId| self.roots.rank(id);
        for prefix_len in prefix_lens(stem) {
            self.for_each_gap(
                &stem[..prefix_len],
                |id| blind = blind.min(rank(id)),
                |id| {
                    let r = rank(id);
                    if r != NOT_ON_PATH && deferred.map_or(true, |(d, _)| r < d) {
                        deferred = Some((r, Deferred { root: id, prefix_len }));
                    }
                },
            );
        }
        (blind, deferred)
    }

    /// The answer from what is listed now, or the deferred directory that could change it.
    pub(super) fn step(&self, q: &Query) -> Step {
        let (rb, ext) = self.best(&q.stem);
        let (blind, deferred) = self.first_gaps(&q.stem);
        // Gaps ranked before `limit` can change the answer: before the winning `.rb`, or
        // anywhere when a `.rb` is still possible (a bare feature found only as an extension).
        let winner = match q.want {
            Want::Rb => rb.map(|w| (w, Kind::Rb)),
            Want::Ext => ext.map(|w| (w, Kind::Ext)),
            Want::Bare => rb.map(|w| (w, Kind::Rb)).or(ext.map(|w| (w, Kind::Ext))),
        };
        let limit = match (q.want, winner) {
            (Want::Bare, Some((_, Kind::Ext))) => NOT_ON_PATH,
            (_, Some(((rank, _), _))) => rank,
            (_, None) => NOT_ON_PATH,
        };
        match deferred {
            Some((rank, d)) if rank < limit && rank < blind => return Step::ListFirst(d),
            _ => {}
        }
        // A blind spot in the winner's own root counts too (it may hide nothing, but is unknown).
        let hidden = if limit == NOT_ON_PATH { blind != NOT_ON_PATH } else { blind <= limit };
        Step::Done(match winner {
            _ if hidden => Located::Unknown,
            Some(((_, root), kind)) => Located::Found(root, kind),
            None => Located::Nowhere,
        })
    }
}
