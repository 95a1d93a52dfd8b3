//! The registry of roots: which are known, where their contents come from ([`Life`]), where
//! they rank on the load path, and the overlay tables their listings feed.

use std::path::PathBuf;

use super::{bytes, now_ns, Index, Life, Root, RootId, SyncPolicy, NOT_ON_PATH};
use crate::scan::{Kind, Listing};
use crate::store::Snapshot;

impl Index {
    /// An empty index, synced and listed under `policy` (native extensions are named
    /// `*.<policy.scan.dlext>`).
    pub fn new(policy: SyncPolicy) -> Self {
        Index {
            roots: Vec::new(),
            ids: Default::default(),
            rank: Vec::new(),
            snapshot: None,
            features: Default::default(),
            gaps: Default::default(),
            dirty: false,
            policy,
            problems: Vec::new(),
            lazy: Default::default(),
            not_linked_in: Default::default(),
            same_names: Default::default(),
        }
    }

    /// An index serving the roots of a cache snapshot (each revalidated on first use).
    pub fn from_snapshot(policy: SyncPolicy, snapshot: Snapshot) -> Self {
        let mut index = Index::new(policy);
        for slot in 0..snapshot.root_count() {
            // Every slot gets a root, so a cached root's id is its slot (see `Life::Cached`).
            let Some(r) = snapshot.root(slot) else {
                // A damaged record: the root is simply unknown and gets scanned when needed.
                index.push_root(Root {
                    path: Vec::new(),
                    life: Life::Retired,
                    volatile: false,
                    scanned_at_ns: 0,
                    last_used_s: 0,
                });
                continue;
            };
            let id = index.push_root(Root {
                path: r.path.to_vec(),
                life: Life::Cached { revalidated: false, listed_since: None },
                volatile: r.volatile,
                scanned_at_ns: r.scanned_at_ns,
                last_used_s: r.last_used_s,
            });
            index.ids.entry(r.path.to_vec()).or_insert(id);
        }
        index.load_not_linked_in(snapshot.not_linked_in());
        index.snapshot = Some(snapshot);
        index
    }

    fn push_root(&mut self, root: Root) -> RootId {
        self.roots.push(root);
        self.rank.push(NOT_ON_PATH);
        (self.roots.len() - 1) as RootId
    }

    /// Whether something changed since the snapshot was loaded (worth writing a new one).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// What is held now has been written: the next write is worth making only after a change.
    pub fn mark_clean(&mut self) {
        self.dirty = false;
    }

    /// Adds a scanned root (replacing an earlier listing of the same path).
    pub fn add(&mut self, listing: Listing) -> RootId {
        self.add_scanned(listing, false, now_ns())
    }

    pub(super) fn add_scanned(&mut self, listing: Listing, volatile: bool, scanned_at_ns: i64) -> RootId {
        self.dirty = true;
        let path = bytes(&listing.root).to_vec();
        if let Some(&old) = self.ids.get(&path) {
            self.forget(old);
            self.roots[old as usize].life = Life::Retired;
            self.rank[old as usize] = NOT_ON_PATH;
        }
        let id = self.roots.len() as RootId;
        self.add_to_tables(id, &listing);
        self.ids.insert(path.clone(), id);
        self.push_root(Root { path, life: Life::Scanned(listing), volatile, scanned_at_ns, last_used_s: 0 })
    }

    /// Adds a listing's files, blind spots and deferred directories to the overlay tables.
    pub(super) fn add_to_tables(&mut self, id: RootId, listing: &Listing) {
        for f in &listing.files {
            let p = self.features.entry(f.stem.as_slice().into()).or_default();
            match f.kind {
                Kind::Rb => p.rb.insert(id),
                Kind::Ext => p.ext.insert(id),
            }
        }
        self.gaps.add(id, listing);
    }

    /// Drops what the overlay tables hold for a root (its listing, or what was listed lazily).
    fn forget(&mut self, id: RootId) {
        let listing = match &mut self.roots[id as usize].life {
            Life::Scanned(l) => std::mem::replace(l, Listing::empty(PathBuf::new(), l.state)),
            Life::Cached { listed_since, .. } => match listed_since.take() {
                Some(l) => l,
                None => return,
            },
            Life::Retired => return,
        };
        for f in &listing.files {
            if let Some(p) = self.features.get_mut(f.stem.as_slice()) {
                p.rb.remove(id);
                p.ext.remove(id);
                if p.rb.is_empty() && p.ext.is_empty() {
                    self.features.remove(f.stem.as_slice());
                }
            }
        }
        self.gaps.forget(id, &listing);
    }

    /// Sets the load-path order (expanded entries; roots not added are treated as empty).
    /// Duplicates rank at their first position. Costs O(entries): nothing is rescanned.
    pub fn set_order(&mut self, order: &[PathBuf]) {
        self.rank.iter_mut().for_each(|r| *r = NOT_ON_PATH);
        for (pos, p) in order.iter().enumerate() {
            if let Some(&id) = self.ids.get(bytes(p)) {
                let r = &mut self.rank[id as usize];
                *r = (*r).min(pos as u32);
            }
        }
    }

    /// `(rank, id)` for a root on the load path.
    pub(super) fn ranked(&self, id: RootId) -> Option<(u32, RootId)> {
        let r = *self.rank.get(id as usize)?;
        (r != NOT_ON_PATH).then_some((r, id))
    }

    /// Whether the snapshot still speaks for root `id` (it is neither rescanned nor retired).
    pub(super) fn is_cached(&self, id: RootId) -> bool {
        self.roots.get(id as usize).is_some_and(Root::is_cached)
    }

    /// The absolute path of a found file, as Ruby would spell it.
    pub fn path_of(&self, root: RootId, stem: &[u8], kind: Kind) -> Vec<u8> {
        let base = &self.roots[root as usize].path;
        let mut out = Vec::with_capacity(base.len() + stem.len() + self.policy.scan.dlext.len() + 2);
        out.extend_from_slice(base);
        if !base.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(stem);
        match kind {
            Kind::Rb => out.extend_from_slice(b".rb"),
            Kind::Ext => {
                out.push(b'.');
                out.extend_from_slice(&self.policy.scan.dlext);
            }
        }
        out
    }

    /// How many roots are known (scanned here or served from the snapshot).
    pub fn root_count(&self) -> usize {
        self.roots.iter().filter(|r| !r.is_retired()).count()
    }

    /// How many distinct feature stems are indexed (snapshot and overlay, overlaps counted twice).
    pub fn len(&self) -> usize {
        self.features.len() + self.snapshot.as_ref().map_or(0, |s| s.feature_count())
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
