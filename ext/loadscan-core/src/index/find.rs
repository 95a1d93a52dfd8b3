//! The *find*, the one lookup behind `require`, `$LOAD_PATH.resolve_feature_path` and
//! `Loadscan.lookup`: parse the feature, locate it (listing the deferred directories its answer
//! depends on), decide a miss (is it sure? [`confirm_missing`]), and give the [`Answer`]
//! — the file, or a sure miss — or why Ruby's own search must answer.

use rustc_hash::FxHashMap;

use super::feature::Want;
use super::ids::RootId;
use super::locate::Located;
use super::roots::{now_ns, Root, Roots};
use crate::relpath::{self, path_of_bytes};
use crate::scan::{dir_digest, DirRecord, DirStamp, Kind};
use crate::store::{stamp_differs, Snapshot, Validation};

/// What [`super::Index::find`] answers when the index is sure of every entry: how the feature was
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

/// A file [`super::Index::find`] found: the live root joined with the query's canonical stem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundFile {
    /// Its absolute path.
    pub path: Vec<u8>,
    /// `.rb` or a native extension.
    pub kind: Kind,
}

/// Why a require was left to Ruby (`Loadscan.stats[:left_to_ruby]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Not a String (`to_path`/`to_str` objects, wrong types: Ruby converts or raises).
    NotString,
    /// A path, not a feature to search for: absolute, `./`, `../`, `~`, empty, or with a NUL.
    NotFeature,
    /// No entry had it, but an application directory where it would be changed since it was
    /// listed (Ruby searches, and finds it or raises its `LoadError`). `:missing` to users.
    UnsureMiss,
    /// A blind spot (unreadable directory, cut symlink loop, …) could change the answer.
    BlindSpot,
    /// Already loaded under another spelling, or being loaded right now: Ruby's own rules
    /// (its wait, or its circular-require warning) decide.
    Loaded,
    /// Another thread was scanning, `$LOAD_PATH` could not be mirrored (an entry's `to_path`
    /// raised, a `~` entry), or loadscan is stopped.
    Unavailable,
}

impl Reason {
    /// Every reason, in the order of `Loadscan.stats`' counters.
    pub const ALL: [Reason; 6] = [
        Reason::NotString,
        Reason::NotFeature,
        Reason::UnsureMiss,
        Reason::BlindSpot,
        Reason::Loaded,
        Reason::Unavailable,
    ];

    /// The reason's name in `Loadscan.stats`.
    pub fn name(self) -> &'static str {
        match self {
            Reason::NotString => "not_string",
            Reason::NotFeature => "not_feature",
            Reason::UnsureMiss => "unsure_miss",
            Reason::BlindSpot => "blind_spot",
            Reason::Loaded => "loaded",
            Reason::Unavailable => "unavailable",
        }
    }
}

/// Validated by listing ([`Validation::Listing`]): the directories whose records carry another
/// checkout's stamps that [`confirm_missing`] found with the names listed, with the stamp it saw
/// then and when (ns since the epoch): a later miss there costs a `stat`, as after a listing of
/// this process. Only [`confirm_missing`] writes it.
#[derive(Default)]
pub(super) struct SameNames(FxHashMap<(RootId, Vec<u8>), (DirStamp, i64)>);

impl SameNames {
    /// Whether the directory `dir` (root `id`'s record `rec`, whose stamp differs: another
    /// checkout's) still has the names listed, by its digest. Once it has, the stamp seen just
    /// before is remembered with the time, and a later miss there is decided by
    /// [`stamp_differs`] against it (a `stat`, not a listing), as against a listing's record.
    fn has_names_listed(&mut self, id: RootId, dir: &[u8], rec: DirRecord, md: &std::fs::Metadata) -> bool {
        if rec.stamp.is_unsettled() {
            return false;
        }
        let key = (id, rec.rel.clone());
        let seen = self.0.get(&key).copied();
        if let Some((stamp, at)) = seen {
            if !stamp_differs(md, &DirRecord { stamp, ..rec.clone() }, at) {
                return true;
            }
        }
        let at = now_ns(); // before the listing: a change in the same tick counts as one
        let same = dir_digest(path_of_bytes(dir)).is_ok_and(|d| d == rec.digest);
        if same {
            self.0.insert(key, (DirStamp::of(md), at));
        }
        same
    }
}

/// Whether a miss that [`super::Index::locate`] found still holds on disk. Every root on the
/// load path is checked with one `stat` of the directory where `stem` would be: it must not
/// exist (then neither does the file), or be the very directory that was listed, unchanged
/// since (same device, inode, mtime and size, not changed within `RACY_NS` of the listing, and
/// settled: no dangling symlink in it whose target may have appeared). Anything else — a
/// directory that appeared, changed, holds a dangling symlink or cannot be asked — is `false`:
/// Ruby's own search decides. Stable roots are asked too: a stable root is revalidated at boot
/// by its top directory alone, so a file added deeper in an installed gem (`bundle open`, a
/// distribution update) shows only here. Validated by listing ([`Validation::Listing`]:
/// another checkout of the app, a CI job's restored cache), a directory whose stamp differs is
/// still the one listed when its names are (its digest, as revalidation compares it,
/// remembered in `same_names`). A miss is rare and raises; hits never pay for this.
pub(super) fn confirm_missing(
    roots: &Roots,
    snapshot: Option<&Snapshot>,
    validation: Validation,
    same_names: &mut SameNames,
    stem: &[u8],
) -> bool {
    let rel = relpath::parent(stem);
    roots.iter().all(|(id, root)| {
        if root.is_retired() || roots.ranked(id).is_none() {
            return true;
        }
        let mut dir = root.path().to_vec();
        if !rel.is_empty() {
            dir.push(b'/');
            dir.extend_from_slice(rel);
        }
        match std::fs::metadata(path_of_bytes(&dir)) {
            // Absent, not a directory, or unreachable (EACCES, ELOOP): Ruby's `open` of a
            // file in it fails the same way.
            Err(_) => true,
            Ok(md) if !md.is_dir() => true,
            Ok(md) => dir_record(root, id, snapshot, rel).is_some_and(|rec| {
                !stamp_differs(&md, &rec, root.scanned_at_ns())
                    || (validation == Validation::Listing && same_names.has_names_listed(id, &dir, rec, &md))
            }),
        }
    })
}

/// The record of the directory `rel` of root `id`, from whichever listing holds it.
fn dir_record(root: &Root, id: RootId, snapshot: Option<&Snapshot>, rel: &[u8]) -> Option<DirRecord> {
    if let Some(rec) = root.listed_here().into_iter().flat_map(|l| &l.dirs).find(|d| d.rel == rel) {
        return Some(rec.clone());
    }
    if !root.is_cached() {
        return None;
    }
    let snapshot = snapshot?;
    snapshot.find_dir(&snapshot.root(id as usize)?, rel)
}

/// A [`Located`] answer as `require` takes it: the file, `None` for a *sure miss* (`sure_miss`
/// is asked only for a miss: [`confirm_missing`]), or why Ruby must search.
pub fn decide(located: Located, sure_miss: impl FnOnce() -> bool) -> Result<Option<(RootId, Kind)>, Reason> {
    match located {
        Located::Found(root, kind) => Ok(Some((root, kind))),
        Located::Nowhere if sure_miss() => Ok(None),
        Located::Nowhere => Err(Reason::UnsureMiss),
        Located::Unknown => Err(Reason::BlindSpot),
    }
}

/// The answer over the searches `search_required` makes in turn for one feature (the query,
/// then its [`super::Query::fallback`]): the first file found; a sure miss only when every search is
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
