//! The *find*, the one lookup behind `require`, `$LOAD_PATH.resolve_feature_path` and
//! `Loadscan.lookup`: parse the feature, locate it (listing the deferred directories its answer
//! depends on), decide a miss (is it sure? [`Index::confirm_missing`]), and give the [`Answer`]
//! — the file, or a sure miss — or why Ruby's own search must answer.

use rustc_hash::FxHashMap;

use super::{now_ns, path_of_bytes, Index, Located, Query, Reason, RootId, SeenAt, Want};
use crate::blocking::Blocking;
use crate::relpath;
use crate::scan::{dir_digest, list_deferred, DirRecord, DirStamp, Kind};
use crate::store::{stamp_differs, Validation};

/// What [`Index::find`] answers when the index is sure of every entry: how the feature was
/// spelled, and the file Ruby's search would load, or `None` when no entry has it — a *sure
/// miss* (Ruby's `LoadError`) unless `maybe_linked_in`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The spelling: bare, `.rb` or the native extension.
    pub want: Want,
    /// The file, or `None` when no entry has it.
    pub file: Option<FoundFile>,
    /// No entry has it, and Ruby's table of extensions it provides without a file may (a
    /// spelling Ruby has not said it lacks, `linked_in`): unless the feature is provided already,
    /// only Ruby's search can tell.
    pub maybe_linked_in: bool,
}

/// A file [`Index::find`] found: the live root joined with the query's canonical stem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundFile {
    /// Its absolute path.
    pub path: Vec<u8>,
    /// `.rb` or a native extension.
    pub kind: Kind,
}

impl Index {
    /// Where `feature` is, as Ruby's search would find it now: its file, `None` for a miss the
    /// index is sure of (every root asked, [`Index::confirm_missing`]), or why Ruby's own
    /// search must answer. `foo.so` that no entry has is searched again as a bare feature
    /// ([`Query::fallback`]), as `search_required` does. No miss of a spelling that Ruby's table
    /// of extensions without a file may hold is sure until Ruby said it does not (`linked_in`).
    /// Listings and `stat`s run through `blocking`; what listings worked around is kept for
    /// [`Index::take_problems`].
    pub fn find(&mut self, feature: &[u8], blocking: &impl Blocking) -> Result<Answer, Reason> {
        let q = self.parse(feature).ok_or(Reason::NotFeature)?;
        let bare = q.fallback(feature);
        let searches = [Some(&q), bare.as_ref()].into_iter().flatten();
        let found = decide_in_turn(searches, |s| self.find_one(s, blocking))?;
        // Ruby asks its table only once every search missed every entry.
        let maybe_linked_in = found.is_none() && self.not_linked_in.may_hold(feature, q.want);
        Ok(Answer { want: q.want, file: found, maybe_linked_in })
    }

    /// One search of [`Index::find`]: the file, `None` for a miss every entry is sure of, or why
    /// Ruby must search.
    fn find_one(&mut self, q: &Query, blocking: &impl Blocking) -> Result<Option<FoundFile>, Reason> {
        let located =
            self.locate_with(q, &mut |root, rel, dev, opts| blocking.run(|| list_deferred(root, rel, dev, opts)));
        let found = decide(located, || blocking.run(|| self.confirm_missing(&q.stem)))?;
        Ok(found.map(|(root, kind)| FoundFile { path: self.path_of(root, &q.stem, kind), kind }))
    }

    /// Whether a miss that [`Index::locate`] found still holds on disk. Every root on the load
    /// path is checked with one `stat` of the directory where `stem` would be: it must not exist
    /// (then neither does the file), or be the very directory that was listed, unchanged since
    /// (same device, inode, mtime and size, not changed within `RACY_NS` of the listing, and
    /// settled: no dangling symlink in it whose target may have appeared). Anything else — a
    /// directory that appeared, changed, holds a dangling symlink or cannot be asked — is
    /// `false`: Ruby's own search decides. Stable roots are asked too: a stable root is
    /// revalidated at boot by its top directory alone, so a file added deeper in an installed
    /// gem (`bundle open`, a distribution update) shows only here. Validated by listing
    /// ([`Validation::Listing`]: another checkout of the app, a CI job's restored cache), a
    /// directory whose stamp differs is still the one listed when its names are (its digest, as
    /// revalidation compares it). A miss is rare and raises; hits never pay for this.
    pub fn confirm_missing(&mut self, stem: &[u8]) -> bool {
        let rel = relpath::parent(stem);
        // Out of `self` while the roots are walked: what has the names listed is recorded in it.
        let mut same_names = std::mem::take(&mut self.same_names);
        let sure = self.roots.iter().enumerate().all(|(id, root)| {
            if root.is_retired() || self.ranked(id as RootId).is_none() {
                return true;
            }
            let mut dir = root.path.clone();
            if !rel.is_empty() {
                dir.push(b'/');
                dir.extend_from_slice(rel);
            }
            match std::fs::metadata(path_of_bytes(&dir)) {
                // Absent, not a directory, or unreachable (EACCES, ELOOP): Ruby's `open` of a
                // file in it fails the same way.
                Err(_) => true,
                Ok(md) if !md.is_dir() => true,
                Ok(md) => self.dir_record(id as RootId, rel).is_some_and(|rec| {
                    !stamp_differs(&md, &rec, root.scanned_at_ns)
                        || self.has_names_listed(&mut same_names, id as RootId, &dir, rec, &md)
                }),
            }
        });
        self.same_names = same_names;
        sure
    }

    /// Validated by listing, whether the directory `dir` (root `id`'s record `rec`, whose stamp
    /// differs: another checkout's) still has the names listed, by its digest. Once it has, the
    /// stamp seen just before is remembered with the time, and a later miss there is settled by
    /// [`stamp_differs`] against it (a `stat`, not a listing), as against a listing's record.
    fn has_names_listed(
        &self,
        same_names: &mut FxHashMap<(RootId, Vec<u8>), SeenAt>,
        id: RootId,
        dir: &[u8],
        rec: DirRecord,
        md: &std::fs::Metadata,
    ) -> bool {
        if self.policy.validation != Validation::Listing || rec.stamp.is_unsettled() {
            return false;
        }
        let key = (id, rec.rel.clone());
        let seen = same_names.get(&key).copied();
        if let Some((stamp, at)) = seen {
            if !stamp_differs(md, &DirRecord { stamp, ..rec.clone() }, at) {
                return true;
            }
        }
        let at = now_ns(); // before the listing: a change in the same tick counts as one
        let same = dir_digest(path_of_bytes(dir)).is_ok_and(|d| d == rec.digest);
        if same {
            same_names.insert(key, (DirStamp::of(md), at));
        }
        same
    }

    /// The record of the directory `rel` of root `id`, from whichever listing holds it.
    fn dir_record(&self, id: RootId, rel: &[u8]) -> Option<DirRecord> {
        let root = &self.roots[id as usize];
        if let Some(rec) = root.listed_here().into_iter().flat_map(|l| &l.dirs).find(|d| d.rel == rel) {
            return Some(rec.clone());
        }
        if !root.is_cached() {
            return None;
        }
        let snapshot = self.snapshot.as_ref()?;
        snapshot.find_dir(&snapshot.root(id as usize)?, rel)
    }
}

/// A [`Located`] answer as `require` takes it: the file, `None` for a *sure miss* (`sure_miss`
/// is asked only for a miss: [`Index::confirm_missing`]), or why Ruby must search.
pub fn decide(located: Located, sure_miss: impl FnOnce() -> bool) -> Result<Option<(RootId, Kind)>, Reason> {
    match located {
        Located::Found(root, kind) => Ok(Some((root, kind))),
        Located::Nowhere if sure_miss() => Ok(None),
        Located::Nowhere => Err(Reason::UnsureMiss),
        Located::Unknown => Err(Reason::BlindSpot),
    }
}

/// The answer over the searches `search_required` makes in turn for one feature (the query,
/// then its [`Query::fallback`]): the first file found; a sure miss only when every search is
/// one; the first doubt (a [`Reason`]) ends it, since a file that search may find would come
/// first.
pub fn decide_in_turn<Q, T>(
    queries: impl IntoIterator<Item = Q>,
    mut decide_one: impl FnMut(&Q) -> Result<Option<T>, Reason>,
) -> Result<Option<T>, Reason> {
    for q in queries {
        if let Some(found) = decide_one(&q)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_in_turn_stop_at_a_file_or_a_doubt() {
        let answers = |list: Vec<Result<Option<u8>, Reason>>| {
            let mut asked = 0;
            let r = decide_in_turn(list, |a| {
                asked += 1;
                *a
            });
            (r, asked)
        };
        assert_eq!(answers(vec![Ok(Some(1)), Ok(Some(2))]), (Ok(Some(1)), 1));
        assert_eq!(answers(vec![Ok(None), Ok(Some(2))]), (Ok(Some(2)), 2));
        assert_eq!(answers(vec![Ok(None), Ok(None)]), (Ok(None), 2));
        assert_eq!(answers(vec![Err(Reason::UnsureMiss), Ok(Some(2))]), (Err(Reason::UnsureMiss), 1));
        assert_eq!(answers(vec![Ok(None), Err(Reason::BlindSpot)]), (Err(Reason::BlindSpot), 2));
    }

    #[test]
    fn decide_tells_a_sure_miss_from_a_doubtful_one() {
        #[rustfmt::skip]
        let table = [
            (Located::Found(3, Kind::Ext), false, Ok(Some((3, Kind::Ext)))),
            (Located::Nowhere, true, Ok(None)),
            (Located::Nowhere, false, Err(Reason::UnsureMiss)),
            (Located::Unknown, true, Err(Reason::BlindSpot)),
        ];
        for (located, confirmed, expected) in table {
            assert_eq!(decide(located, || confirmed), expected, "{located:?} confirmed={confirmed}");
        }
    }
}
