//! Lazy listing: a lookup lists the deferred directories its answer depends on, one
//! `getdents` each, before answering (each at most once per index).

use std::path::Path;

use super::locate::Step;
use super::{path_of_bytes, Index, Life, Located, Query, RootId};
use crate::scan::{list_deferred, Listing, RootState, ScanOptions, ScanProblem};

/// Lists one deferred directory (`rel` below a root whose recorded device is given) with the
/// given options, as [`list_deferred`] does.
pub type Lister<'a> = dyn FnMut(&Path, &[u8], Option<u64>, &ScanOptions) -> (Listing, Vec<ScanProblem>) + 'a;

/// What lazy listing did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LazyStats {
    /// Deferred directories listed on demand.
    pub listed: usize,
    /// Time spent listing them.
    pub time: std::time::Duration,
}

impl Index {
    /// Where `feature` is, ignoring what is already loaded (deferred directories it depends on
    /// are listed first); [`Located::Unknown`] for what the index never answers.
    pub fn locate_feature(&mut self, feature: &[u8]) -> Located {
        match self.parse(feature) {
            Some(q) => self.locate(&q),
            None => Located::Unknown,
        }
    }

    /// Where a parsed feature is, without copying anything (the hot path of `require`). Lists
    /// the deferred directories the answer depends on first (each at most once per index).
    pub fn locate(&mut self, q: &Query) -> Located {
        self.locate_with(q, &mut list_deferred)
    }

    /// [`Index::locate`], listing deferred directories with `lister` ([`list_deferred`] or a
    /// wrapper of it: the binding releases the GVL around each listing).
    pub fn locate_with(&mut self, q: &Query, lister: &mut Lister) -> Located {
        let mut last = None;
        loop {
            match self.step(q) {
                Step::Done(answer) => return answer,
                // Listing a directory always clears its deferral; should it not (a bug), Ruby
                // answers rather than this loop spinning.
                Step::ListFirst(d) if last == Some(d) => return Located::Unknown,
                Step::ListFirst(d) => {
                    self.list_now(d.root, &q.stem[..d.prefix_len], lister);
                    last = Some(d);
                }
            }
        }
    }

    /// Lists the deferred directory `rel` of root `id` with `lister` and adds what it holds.
    fn list_now(&mut self, id: RootId, rel: &[u8], lister: &mut Lister) {
        let started = std::time::Instant::now();
        let root_dev = self.root_dev(id);
        let (mut part, mut problems) =
            lister(path_of_bytes(&self.roots[id as usize].path), rel, root_dev, &self.policy.scan);
        self.problems.append(&mut problems);
        self.dirty = true;
        self.add_to_tables(id, &part);
        self.gaps.listed(id, rel);
        let target = match &mut self.roots[id as usize].life {
            Life::Scanned(listing) => listing,
            Life::Cached { listed_since, .. } => {
                listed_since.get_or_insert_with(|| Listing::empty(part.root.clone(), RootState::Dir))
            }
            // A retired root is never ranked, so never listed.
            Life::Retired => return,
        };
        target.files.append(&mut part.files);
        target.dirs.append(&mut part.dirs);
        target.blind.append(&mut part.blind);
        target.deferred.append(&mut part.deferred);
        self.lazy.listed += 1;
        self.lazy.time += started.elapsed();
    }

    /// The root's device as recorded when its own directory was listed (no syscall): in its
    /// listing, or its first record in the snapshot (records are sorted, `""` first).
    fn root_dev(&self, id: RootId) -> Option<u64> {
        let first = match &self.roots[id as usize].life {
            Life::Scanned(listing) => listing.dirs.first().cloned(),
            Life::Cached { .. } => {
                let snapshot = self.snapshot.as_ref()?;
                snapshot.find_dir(&snapshot.root(id as usize)?, b"")
            }
            Life::Retired => None,
        };
        first.filter(|d| d.rel.is_empty()).map(|d| d.stamp.dev)
    }

    /// What lazy listing did so far.
    pub fn lazy_stats(&self) -> LazyStats {
        self.lazy
    }

    /// Takes what lazy listings worked around since the last call.
    pub fn take_problems(&mut self) -> Vec<ScanProblem> {
        std::mem::take(&mut self.problems)
    }
}
