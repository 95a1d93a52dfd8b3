//! The feature index: which file `require` would load for a feature, given the ordered list of
//! load-path entries, with Ruby's precedence (extension by extension, then entry by entry).
//!
//! Listings are kept per entry (a *root*) and merged at lookup time through small posting
//! lists, so reordering or inserting entries (RubyGems' `insert`) only recomputes ranks and
//! never rescans or rebuilds:
//!
//! ```text
//! features: "rails/all" => Postings { rb: [7], ext: [] }       root ids having rails/all.rb
//!           "json/ext"  => Postings { rb: [], ext: [2, 31] }
//! rank:     [root id] => position of that root in $LOAD_PATH (or NOT_ON_PATH)
//! ```

mod feature;
mod ids;

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

pub use feature::{suffix, Query, Want};
use ids::IdList;

use crate::scan::{Kind, Listing};

const NOT_ON_PATH: u32 = u32::MAX;

/// Identifies a scanned root inside one [`Index`].
pub type RootId = u32;

/// The answer to "which file would `require` load?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// This file, exactly as Ruby would name it: `root/stem.ext`.
    Found {
        /// Root the file lives in.
        root: RootId,
        /// Canonical stem, relative to the root.
        stem: Vec<u8>,
        /// Extension kind.
        kind: Kind,
    },
    /// No entry has it: Ruby's `require` will raise or go to RubyGems.
    Missing,
    /// The index cannot answer exactly (unsupported spelling, or a blind spot of an entry
    /// that comes first): leave it to Ruby.
    Unknown,
}

#[derive(Default)]
struct Postings {
    rb: IdList,
    ext: IdList,
}

struct Root {
    path: Vec<u8>,
    listing: Listing,
}

/// The merged index over every root scanned so far.
pub struct Index {
    dlext: Vec<u8>,
    roots: Vec<Root>,
    ids: FxHashMap<Vec<u8>, RootId>,
    rank: Vec<u32>,
    features: FxHashMap<Box<[u8]>, Postings>,
    blind: FxHashMap<Box<[u8]>, IdList>,
}

fn bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

impl Index {
    /// An empty index for native extensions named `*.<dlext>`.
    pub fn new(dlext: &[u8]) -> Self {
        Index {
            dlext: dlext.to_vec(),
            roots: Vec::new(),
            ids: FxHashMap::default(),
            rank: Vec::new(),
            features: FxHashMap::default(),
            blind: FxHashMap::default(),
        }
    }

    /// The roots of `order` that have not been added yet (to scan them before `add`).
    pub fn unknown_roots(&self, order: &[PathBuf]) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = order
            .iter()
            .filter(|p| !self.ids.contains_key(bytes(p)))
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Adds a scanned root (replacing an earlier listing of the same path).
    pub fn add(&mut self, listing: Listing) -> RootId {
        let path = bytes(&listing.root).to_vec();
        if let Some(&id) = self.ids.get(&path) {
            self.forget(id);
            self.index(id, &listing);
            self.roots[id as usize].listing = listing;
            return id;
        }
        let id = self.roots.len() as RootId;
        self.index(id, &listing);
        self.ids.insert(path.clone(), id);
        self.roots.push(Root { path, listing });
        self.rank.push(NOT_ON_PATH);
        id
    }

    fn index(&mut self, id: RootId, listing: &Listing) {
        for f in &listing.files {
            let p = self.features.entry(f.stem.as_slice().into()).or_default();
            match f.kind {
                Kind::Rb => p.rb.insert(id),
                Kind::Ext => p.ext.insert(id),
            }
        }
        for b in &listing.blind {
            self.blind
                .entry(b.as_slice().into())
                .or_default()
                .insert(id);
        }
    }

    fn forget(&mut self, id: RootId) {
        let listing = &self.roots[id as usize].listing;
        for f in &listing.files {
            if let Some(p) = self.features.get_mut(f.stem.as_slice()) {
                p.rb.remove(id);
                p.ext.remove(id);
                if p.rb.is_empty() && p.ext.is_empty() {
                    self.features.remove(f.stem.as_slice());
                }
            }
        }
        for b in &listing.blind {
            if let Some(l) = self.blind.get_mut(b.as_slice()) {
                l.remove(id);
                if l.is_empty() {
                    self.blind.remove(b.as_slice());
                }
            }
        }
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

    /// Which file `require(feature)` would load, ignoring what is already loaded.
    pub fn lookup(&self, feature: &[u8]) -> Resolution {
        match Query::parse(feature, &self.dlext) {
            Some(q) => self.lookup_query(q),
            None => Resolution::Unknown,
        }
    }

    fn best(&self, ids: &IdList) -> Option<(u32, RootId)> {
        ids.iter()
            .map(|id| (self.rank[id as usize], id))
            .filter(|&(r, _)| r != NOT_ON_PATH)
            .min()
    }

    /// The first rank at which a blind spot could hide a file for this stem.
    fn first_blind(&self, stem: &[u8]) -> u32 {
        if self.blind.is_empty() {
            return NOT_ON_PATH;
        }
        let mut first = NOT_ON_PATH;
        let mut check = |prefix: &[u8]| {
            if let Some(ids) = self.blind.get(prefix) {
                for id in ids.iter() {
                    first = first.min(self.rank[id as usize]);
                }
            }
        };
        check(b"");
        for (i, &c) in stem.iter().enumerate() {
            if c == b'/' {
                check(&stem[..i]);
            }
        }
        first
    }

    fn lookup_query(&self, q: Query) -> Resolution {
        let postings = self.features.get(q.stem.as_slice());
        let rb = postings.and_then(|p| self.best(&p.rb));
        let ext = postings.and_then(|p| self.best(&p.ext));
        let blind = self.first_blind(&q.stem);
        let found = |(rank, root): (u32, RootId), kind| {
            if rank < blind {
                Resolution::Found {
                    root,
                    stem: q.stem.clone(),
                    kind,
                }
            } else {
                Resolution::Unknown
            }
        };
        let unseen = if blind == NOT_ON_PATH {
            Resolution::Missing
        } else {
            Resolution::Unknown
        };
        match q.want {
            Want::Rb => rb.map_or(unseen, |w| found(w, Kind::Rb)),
            Want::Ext => ext.map_or(unseen, |w| found(w, Kind::Ext)),
            Want::Bare => match (rb, ext) {
                (Some(w), _) => found(w, Kind::Rb),
                // A `.rb` hidden in any blind spot would beat the native extension.
                (None, Some(w)) if blind == NOT_ON_PATH => found(w, Kind::Ext),
                (None, Some(_)) => Resolution::Unknown,
                (None, None) => unseen,
            },
        }
    }

    /// The absolute path of a found file, as Ruby would spell it.
    pub fn path_of(&self, root: RootId, stem: &[u8], kind: Kind) -> Vec<u8> {
        let base = &self.roots[root as usize].path;
        let ext = suffix(kind, &self.dlext);
        let mut out = Vec::with_capacity(base.len() + 1 + stem.len() + ext.len());
        out.extend_from_slice(base);
        if !base.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(stem);
        out.extend_from_slice(&ext);
        out
    }

    /// The listing of every root added, with its id.
    pub fn listings(&self) -> impl Iterator<Item = (RootId, &Listing)> {
        self.roots
            .iter()
            .enumerate()
            .map(|(i, r)| (i as RootId, &r.listing))
    }

    /// How many distinct feature stems are indexed.
    pub fn len(&self) -> usize {
        self.features.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }
}
