//! The registry of roots: which are known, where their contents come from ([`Life`]), and
//! where they rank on the load path. [`Roots`] is the one writer of all three.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::ids::RootId;
use crate::relpath::bytes;
use crate::scan::{Kind, Listing, RootState};
use crate::store::Snapshot;

/// The rank of a root that is not on the load path.
pub(super) const NOT_ON_PATH: u32 = u32::MAX;

/// Now, in ns since the epoch (when a listing was made).
pub(super) fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// What a root is, and where its contents come from.
pub(super) enum Life {
    /// Listed in this process: the listing is the whole truth about it.
    Scanned(Listing),
    /// Served from the cache snapshot (revalidated the first time it is on the load path). Its
    /// id is its *slot*, its index among the snapshot's roots: [`Roots::from_snapshot`] adds one
    /// root per slot, in order, and roots are only ever appended.
    Cached {
        /// Revalidated in this process (fresh, not re-listed).
        revalidated: bool,
        /// The deferred directories listed since the snapshot was written.
        listed_since: Option<Listing>,
    },
    /// Replaced by a newer listing under another id, or unreadable in the snapshot: never
    /// ranked again.
    Retired,
}

/// One root: its path (canonical, absolute), its [`Life`], and what the cache records of it.
pub(super) struct Root {
    path: Vec<u8>,
    life: Life,
    volatile: bool,
    scanned_at_ns: i64,
    last_used_s: i64,
}

impl Root {
    /// Its canonical absolute path, as bytes.
    pub(super) fn path(&self) -> &[u8] {
        &self.path
    }

    /// Where its contents come from.
    pub(super) fn life(&self) -> &Life {
        &self.life
    }

    /// Checked directory by directory at revalidation (else stable: by its top directory).
    pub(super) fn is_volatile(&self) -> bool {
        self.volatile
    }

    /// When it was listed (ns since the epoch).
    pub(super) fn scanned_at_ns(&self) -> i64 {
        self.scanned_at_ns
    }

    /// When it was last on the load path of a process that wrote the cache (s since the epoch).
    pub(super) fn last_used_s(&self) -> i64 {
        self.last_used_s
    }

    pub(super) fn is_retired(&self) -> bool {
        matches!(self.life, Life::Retired)
    }

    /// Whether the snapshot speaks for this root.
    pub(super) fn is_cached(&self) -> bool {
        matches!(self.life, Life::Cached { .. })
    }

    /// What this process listed of it: the whole listing, or what was listed since the
    /// snapshot.
    pub(super) fn listed_here(&self) -> Option<&Listing> {
        match &self.life {
            Life::Scanned(l) => Some(l),
            Life::Cached { listed_since, .. } => listed_since.as_ref(),
            Life::Retired => None,
        }
    }
}

/// Every root known, by id, with the id of each path and each root's rank.
///
/// ```text
/// roots: [0] /gems/rails/lib  Cached   [1] /app/lib  Retired   [2] /app/lib  Scanned(listing)
/// ids:   "/gems/rails/lib" => 0, "/app/lib" => 2          a path's newest root
/// rank:  [0] => 1, [1] => NOT_ON_PATH, [2] => 0           its position in $LOAD_PATH
/// ```
///
/// Invariants: ids are indexes into `roots`, which only grows (a cached root's id is its
/// snapshot slot); `rank` has one entry per root; `ids` names a path's newest root, and every
/// older root of that path is retired; a retired root is [`NOT_ON_PATH`] and never ranked again.
#[derive(Default)]
pub(super) struct Roots {
    roots: Vec<Root>,
    ids: FxHashMap<Vec<u8>, RootId>,
    rank: Vec<u32>,
}

impl Roots {
    /// One root per slot of `snapshot`, in order (a damaged record: retired, so the path is
    /// simply unknown and scanned when needed).
    pub(super) fn from_snapshot(snapshot: &Snapshot) -> Self {
        let mut roots = Roots::default();
        for slot in 0..snapshot.root_count() {
            let Some(r) = snapshot.root(slot) else {
                roots.push(Root {
                    path: Vec::new(),
                    life: Life::Retired,
                    volatile: false,
                    scanned_at_ns: 0,
                    last_used_s: 0,
                });
                continue;
            };
            let id = roots.push(Root {
                path: r.path.to_vec(),
                life: Life::Cached { revalidated: false, listed_since: None },
                volatile: r.volatile,
                scanned_at_ns: r.scanned_at_ns,
                last_used_s: r.last_used_s,
            });
            roots.ids.entry(r.path.to_vec()).or_insert(id);
        }
        roots
    }

    fn push(&mut self, root: Root) -> RootId {
        self.roots.push(root);
        self.rank.push(NOT_ON_PATH);
        (self.roots.len() - 1) as RootId
    }

    /// Adds a root listed in this process, retiring the earlier root of the same path: its
    /// id, and the retired root's id with what this process had listed of it (which the
    /// overlay tables must forget).
    pub(super) fn add(
        &mut self,
        listing: Listing,
        volatile: bool,
        scanned_at_ns: i64,
    ) -> (RootId, Option<(RootId, Listing)>) {
        let path = bytes(&listing.root).to_vec();
        let retired = self.ids.get(&path).copied().and_then(|old| Some((old, self.retire(old)?)));
        let id = self.roots.len() as RootId;
        self.ids.insert(path.clone(), id);
        self.push(Root { path, life: Life::Scanned(listing), volatile, scanned_at_ns, last_used_s: 0 });
        (id, retired)
    }

    /// Retires root `id` (never ranked again), giving what this process had listed of it.
    fn retire(&mut self, id: RootId) -> Option<Listing> {
        self.rank[id as usize] = NOT_ON_PATH;
        match std::mem::replace(&mut self.roots[id as usize].life, Life::Retired) {
            Life::Scanned(l) => Some(l),
            Life::Cached { listed_since, .. } => listed_since,
            Life::Retired => None,
        }
    }

    /// Adds `part`, the listing of one of root `id`'s deferred directories, to what the root
    /// holds (false for a retired root, which is never ranked, so never listed).
    pub(super) fn add_listed(&mut self, id: RootId, mut part: Listing) -> bool {
        let target = match &mut self.roots[id as usize].life {
            Life::Scanned(listing) => listing,
            Life::Cached { listed_since, .. } => {
                listed_since.get_or_insert_with(|| Listing::empty(part.root.clone(), RootState::Dir))
            }
            Life::Retired => return false,
        };
        target.files.append(&mut part.files);
        target.dirs.append(&mut part.dirs);
        target.blind.append(&mut part.blind);
        target.deferred.append(&mut part.deferred);
        true
    }

    /// A cached root found fresh: the snapshot speaks for it in this process.
    pub(super) fn mark_revalidated(&mut self, id: RootId) {
        if let Life::Cached { revalidated, .. } = &mut self.roots[id as usize].life {
            *revalidated = true;
        }
    }

    /// Sets the load-path order (expanded entries; roots not added are treated as empty).
    /// Duplicates rank at their first position. Costs O(entries): nothing is rescanned.
    pub(super) fn set_order(&mut self, order: &[PathBuf]) {
        self.rank.iter_mut().for_each(|r| *r = NOT_ON_PATH);
        for (pos, p) in order.iter().enumerate() {
            if let Some(&id) = self.ids.get(bytes(p)) {
                let r = &mut self.rank[id as usize];
                *r = (*r).min(pos as u32);
            }
        }
    }

    /// The id of the newest root of `path`.
    pub(super) fn id_of(&self, path: &Path) -> Option<RootId> {
        self.ids.get(bytes(path)).copied()
    }

    /// Root `id`.
    pub(super) fn get(&self, id: RootId) -> &Root {
        &self.roots[id as usize]
    }

    /// Every root with its id, retired ones included.
    pub(super) fn iter(&self) -> impl Iterator<Item = (RootId, &Root)> {
        self.roots.iter().enumerate().map(|(id, r)| (id as RootId, r))
    }

    /// Root `id`'s position on the load path, or [`NOT_ON_PATH`].
    pub(super) fn rank(&self, id: RootId) -> u32 {
        self.rank.get(id as usize).copied().unwrap_or(NOT_ON_PATH)
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

    /// Whether any root is served from the snapshot.
    pub(super) fn any_cached(&self) -> bool {
        self.roots.iter().any(Root::is_cached)
    }

    /// The absolute path of a found file, as Ruby would spell it (native extensions are named
    /// `*.<dlext>`).
    pub(super) fn path_of(&self, root: RootId, stem: &[u8], kind: Kind, dlext: &[u8]) -> Vec<u8> {
        let base = &self.roots[root as usize].path;
        let mut out = Vec::with_capacity(base.len() + stem.len() + dlext.len() + 2);
        out.extend_from_slice(base);
        if !base.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(stem);
        match kind {
            Kind::Rb => out.extend_from_slice(b".rb"),
            Kind::Ext => {
                out.push(b'.');
                out.extend_from_slice(dlext);
            }
        }
        out
    }

    /// How many roots are live (scanned here or served from the snapshot).
    pub(super) fn live_count(&self) -> usize {
        self.roots.iter().filter(|r| !r.is_retired()).count()
    }

    /// The root's device as recorded when its own directory was listed (no syscall): in its
    /// listing, or its first record in the snapshot (records are sorted, `""` first).
    pub(super) fn dev(&self, id: RootId, snapshot: Option<&Snapshot>) -> Option<u64> {
        let first = match &self.roots[id as usize].life {
            Life::Scanned(listing) => listing.dirs.first().cloned(),
            Life::Cached { .. } => {
                let snapshot = snapshot?;
                snapshot.find_dir(&snapshot.root(id as usize)?, b"")
            }
            Life::Retired => None,
        };
        first.filter(|d| d.rel.is_empty()).map(|d| d.stamp.dev)
    }
}
