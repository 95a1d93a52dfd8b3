//! What the index holds about one feature, and every stem it holds: for `loadscan explain` and
//! `loadscan verify`, never on the boot path.

use super::{prefix_lens, Index, Query, RootId, NOT_ON_PATH};
use crate::scan::Kind;

/// Why [`Index::locate`] answers what it does for one feature.
#[derive(Debug, Default)]
pub struct Explanation {
    /// Roots on the load path that have the file, `(rank, root, kind)`, best first.
    pub candidates: Vec<(u32, Vec<u8>, Kind)>,
    /// Blind spots on the feature's path, `(rank, root, directory)`: below them Ruby answers.
    pub blind: Vec<(u32, Vec<u8>, Vec<u8>)>,
    /// Directories on the feature's path not listed yet, `(rank, root, directory)`.
    pub deferred: Vec<(u32, Vec<u8>, Vec<u8>)>,
}

impl Index {
    /// Everything the index knows about `q`'s stem (without listing anything).
    pub fn explain(&self, q: &Query) -> Explanation {
        let mut out = Explanation::default();
        let ranked = |id: RootId| self.ranked(id).map(|(rank, _)| (rank, self.roots[id as usize].path.clone()));
        let mut add = |kind: Kind, id: RootId| {
            if let Some((rank, root)) = ranked(id) {
                out.candidates.push((rank, root, kind));
            }
        };
        if let Some(p) = self.features.get(q.stem.as_ref()) {
            p.rb.iter().for_each(|id| add(Kind::Rb, id));
            p.ext.iter().for_each(|id| add(Kind::Ext, id));
        }
        if let Some(s) = &self.snapshot {
            if let Some((rb, ext)) = s.postings(&q.stem) {
                s.for_each_id(rb, |id| add(Kind::Rb, id));
                s.for_each_id(ext, |id| add(Kind::Ext, id));
            }
        }
        for len in prefix_lens(&q.stem) {
            let prefix = &q.stem[..len];
            let entry = |id: RootId| ranked(id).map(|(rank, root)| (rank, root, prefix.to_vec()));
            let (mut blind, mut deferred) = (Vec::new(), Vec::new());
            self.for_each_gap(prefix, |id| blind.extend(entry(id)), |id| deferred.extend(entry(id)));
            out.blind.append(&mut blind);
            out.deferred.append(&mut deferred);
        }
        out.candidates.sort();
        out.candidates.dedup();
        out.blind.sort();
        out.deferred.sort();
        out
    }

    /// Every stem some root on the load path has a file for (snapshot and overlay), sorted.
    pub fn stems(&self) -> Vec<Vec<u8>> {
        let on_path = |id: RootId| self.rank.get(id as usize).is_some_and(|&r| r != NOT_ON_PATH);
        let mut out: Vec<Vec<u8>> = self
            .features
            .iter()
            .filter(|(_, p)| p.rb.iter().chain(p.ext.iter()).any(on_path))
            .map(|(stem, _)| stem.to_vec())
            .collect();
        if let Some(s) = &self.snapshot {
            for (id, files) in s.files_by_root(None).into_iter().enumerate() {
                if self.is_cached(id as RootId) && on_path(id as RootId) {
                    out.extend(files.into_iter().map(|f| f.stem));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}
