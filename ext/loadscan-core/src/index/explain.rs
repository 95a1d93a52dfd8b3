//! What the index holds about one feature, and every stem it holds: for `loadscan explain` and
//! `loadscan verify`, never on the boot path.

use super::feature::{prefix_lens, Query};
use super::ids::RootId;
use super::locate::Tables;
use super::roots::NOT_ON_PATH;
use crate::scan::Kind;

/// Why [`super::Index::locate`] answers what it does for one feature.
#[derive(Debug, Default)]
pub struct Explanation {
    /// Roots on the load path that have the file, `(rank, root, kind)`, best first.
    pub candidates: Vec<(u32, Vec<u8>, Kind)>,
    /// Blind spots on the feature's path, `(rank, root, directory)`: below them Ruby answers.
    pub blind: Vec<(u32, Vec<u8>, Vec<u8>)>,
    /// Directories on the feature's path not listed yet, `(rank, root, directory)`.
    pub deferred: Vec<(u32, Vec<u8>, Vec<u8>)>,
}

/// Everything the tables know about `q`'s stem (without listing anything).
pub(super) fn explain(t: Tables, q: &Query) -> Explanation {
    let mut out = Explanation::default();
    let roots = t.roots();
    let ranked = |id: RootId| roots.ranked(id).map(|(rank, _)| (rank, roots.get(id).path().to_vec()));
    let (mut rb, mut ext) = (Vec::new(), Vec::new());
    t.for_each_posting(&q.stem, |id| rb.push(id), |id| ext.push(id));
    for (kind, ids) in [(Kind::Rb, rb), (Kind::Ext, ext)] {
        out.candidates.extend(ids.into_iter().filter_map(|id| ranked(id).map(|(rank, root)| (rank, root, kind))));
    }
    for len in prefix_lens(&q.stem) {
        let prefix = &q.stem[..len];
        let entry = |id: RootId| ranked(id).map(|(rank, root)| (rank, root, prefix.to_vec()));
        let (mut blind, mut deferred) = (Vec::new(), Vec::new());
        t.for_each_gap(prefix, |id| blind.extend(entry(id)), |id| deferred.extend(entry(id)));
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
pub(super) fn stems(t: Tables) -> Vec<Vec<u8>> {
    let roots = t.roots();
    let on_path = |id: RootId| roots.rank(id) != NOT_ON_PATH;
    let mut out: Vec<Vec<u8>> =
        t.overlay().stems().filter_map(|(stem, mut ids)| ids.any(on_path).then(|| stem.to_vec())).collect();
    if let Some(s) = t.snapshot() {
        for (id, files) in s.files_by_root(None).into_iter().enumerate() {
            if roots.is_cached(id as RootId) && on_path(id as RootId) {
                out.extend(files.into_iter().map(|f| f.stem));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
