//! What `require(feature)` does with a lookup's result: require a path, return `false`
//! (already loaded), raise Ruby's `LoadError` (a sure miss), or leave it to Ruby's own
//! `require` for a [`Reason`]. Pure logic: what Ruby knows (`rb_feature_provided`) and what the
//! index found come in as arguments, so the tables below test every case without Ruby.

use super::{Located, RootId, Want};
use crate::scan::Kind;

/// The feature `Loadscan::CoreExt` requires to find out whether a plain `require` still reaches
/// loadscan: a bare feature, so that it takes the way of every searching require (a layer in
/// front that answers features itself — Bootsnap's load path cache — answers this one too and
/// so shows that it stands in the way), with a newline in a directory name, so that no
/// load-path entry has it if it reaches Ruby's own search instead.
pub const PROBE: &[u8] = b"loadscan\n/probe";

/// What `require(feature)` should do now.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Require this absolute path: it is the file stock Ruby would load.
    Path(Vec<u8>),
    /// Stock Ruby would return `false` without loading anything (already loaded).
    Loaded,
    /// No entry has the feature, and none can have gained it since it was listed: stock Ruby
    /// would search every entry and raise its `LoadError`.
    Missing,
    /// Ask Ruby's own `require`, for this reason.
    Defer(Reason),
    /// The feature was [`PROBE`]: the decorator is reached.
    Probe,
}

/// Why a require was left to Ruby (`Loadscan.stats[:left_to_ruby]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Not a String (`to_path`/`to_str` objects, wrong types: Ruby converts or raises).
    NotString,
    /// A path, not a feature to search for: absolute, `./`, `../`, `~`, empty, or with a NUL.
    NotFeature,
    /// No entry had it, but an application directory where it would be changed since it was
    /// listed (Ruby searches, and finds it or raises its `LoadError`).
    Missing,
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
        Reason::Missing,
        Reason::BlindSpot,
        Reason::Loaded,
        Reason::Unavailable,
    ];

    /// The reason's name in `Loadscan.stats`.
    pub fn name(self) -> &'static str {
        match self {
            Reason::NotString => "not_string",
            Reason::NotFeature => "not_feature",
            Reason::Missing => "missing",
            Reason::BlindSpot => "blind_spot",
            Reason::Loaded => "loaded",
            Reason::Unavailable => "unavailable",
        }
    }
}

/// A [`Located`] answer as `require` takes it: the file, `None` for a *sure miss* (`sure_miss`
/// is asked only for a miss: [`super::Index::confirm_missing`]), or why Ruby must search.
pub fn settle(located: Located, sure_miss: impl FnOnce() -> bool) -> Result<Option<(RootId, Kind)>, Reason> {
    match located {
        Located::Found(root, kind) => Ok(Some((root, kind))),
        Located::Missing if sure_miss() => Ok(None),
        Located::Missing => Err(Reason::Missing),
        Located::Unknown => Err(Reason::BlindSpot),
    }
}

/// The answer over the searches `search_required` makes in turn for one feature (the query,
/// then its [`super::Query::fallback`]): the first file found; a sure miss only when every
/// search is one; the first doubt (a [`Reason`]) ends it, since a file that search may find
/// would come first.
pub fn settle_in_turn<Q, T>(
    queries: impl IntoIterator<Item = Q>,
    mut settle_one: impl FnMut(&Q) -> Result<Option<T>, Reason>,
) -> Result<Option<T>, Reason> {
    for q in queries {
        if let Some(found) = settle_one(&q)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// What a lookup found for `require`: how the feature was spelled, and its absolute path and
/// kind, or `None` for a sure miss ([`settle`]).
pub type Lookup = (Want, Option<(Vec<u8>, Kind)>);

/// What `require(feature)` should do, mirroring `load.c`'s `search_required`. `find` is the
/// index's answer (called unless `feature` is [`PROBE`]); `provided` is Ruby's
/// `rb_feature_provided`: `Some(true)` when provided and not being loaded right now,
/// `Some(false)` when not provided, `None` when it is being loaded. What either raised comes
/// back as the `Err`.
///
/// - not provided: require the indexed path, or raise `LoadError` for a sure miss;
/// - provided as `foo.rb` / `foo.so` spelled with the extension: Ruby returns `false`;
/// - provided, bare `foo`: Ruby returns `false` unless its search would reach a file not yet
///   loaded. It searches `.rb` first (then the extension), so when the `.rb` the index finds
///   is loaded, or there is none and the extension it finds is loaded (or there is neither),
///   the answer is `false` — this spares the failed probe of every entry that stock Ruby makes
///   when a native extension is required again. Anything else goes to Ruby.
///
/// A bare feature being loaded right now (by this or another thread) is required by its indexed
/// path, where Ruby waits or warns about the circular require exactly as after its own search;
/// with an extension, Ruby takes the loading path itself (no search), so it goes to Ruby.
pub fn resolve<E>(
    feature: &[u8],
    find: impl FnOnce() -> Result<Result<Lookup, Reason>, E>,
    mut provided: impl FnMut(&[u8]) -> Result<Option<bool>, E>,
) -> Result<Resolved, E> {
    if feature == PROBE {
        return Ok(Resolved::Probe);
    }
    let (want, file) = match find()? {
        Ok(lookup) => lookup,
        Err(reason) => return Ok(Resolved::Defer(reason)),
    };
    Ok(match (provided(feature)?, want, file) {
        (Some(false), _, Some((p, _))) => Resolved::Path(p),
        (Some(false), _, None) => Resolved::Missing,
        // Being loaded (by this thread: a circular require; or by another). For a bare feature
        // Ruby's own `require` then searches anyway (`rb_feature_p` gives no type for it) and
        // takes the load lock of the file its search finds: the same file the index found, so
        // requiring that path gives the same wait, circular-require warning or load.
        (None, Want::Bare, Some((p, _))) => Resolved::Path(p),
        (Some(true), Want::Rb | Want::Ext, _) => Resolved::Loaded,
        (Some(true), Want::Bare, None) => Resolved::Loaded,
        (Some(true), Want::Bare, Some((p, _))) if provided(&p)? == Some(true) => Resolved::Loaded,
        _ => Resolved::Defer(Reason::Loaded),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &[u8] = b"/lib/foo.rb";

    /// `rb_feature_provided` for the feature as written, and for the found file's path.
    #[derive(Clone, Copy, Debug)]
    struct Ruby {
        feature: Option<bool>,
        file: Option<bool>,
    }

    const NOT: Option<bool> = Some(false);
    const YES: Option<bool> = Some(true);
    const LOADING: Option<bool> = None;

    fn run(feature: &str, found: Result<Lookup, Reason>, ruby: Ruby) -> Resolved {
        let provided = |f: &[u8]| -> Result<Option<bool>, ()> { Ok(if f == FILE { ruby.file } else { ruby.feature }) };
        resolve(feature.as_bytes(), || Ok(found), provided).unwrap()
    }

    fn at(want: Want, kind: Kind) -> Result<Lookup, Reason> {
        Ok((want, Some((FILE.to_vec(), kind))))
    }

    fn sure_miss(want: Want) -> Result<Lookup, Reason> {
        Ok((want, None))
    }

    #[test]
    fn answers_follow_search_required() {
        let path = || Resolved::Path(FILE.to_vec());
        #[rustfmt::skip]
        let table: Vec<(&str, Result<Lookup, Reason>, Ruby, Resolved)> = vec![
            // Not provided: the file, or Ruby's LoadError for a sure miss.
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: NOT, file: NOT }, path()),
            ("foo.so", at(Want::Ext, Kind::Ext), Ruby { feature: NOT, file: NOT }, path()),
            ("foo", sure_miss(Want::Bare), Ruby { feature: NOT, file: NOT }, Resolved::Missing),
            // Provided, spelled with its extension: false.
            ("foo.rb", at(Want::Rb, Kind::Rb), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            ("foo.so", sure_miss(Want::Ext), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            // Provided, bare: false when the file the search reaches is loaded, or there is none.
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: YES, file: YES }, Resolved::Loaded),
            ("foo", at(Want::Bare, Kind::Ext), Ruby { feature: YES, file: YES }, Resolved::Loaded),
            ("foo", sure_miss(Want::Bare), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: YES, file: NOT }, Resolved::Defer(Reason::Loaded)),
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: YES, file: LOADING }, Resolved::Defer(Reason::Loaded)),
            // Being loaded: a bare feature takes the found path (Ruby waits or warns there).
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: LOADING, file: NOT }, path()),
            ("foo.rb", at(Want::Rb, Kind::Rb), Ruby { feature: LOADING, file: NOT }, Resolved::Defer(Reason::Loaded)),
            ("foo", sure_miss(Want::Bare), Ruby { feature: LOADING, file: NOT }, Resolved::Defer(Reason::Loaded)),
            // What the index could not settle goes to Ruby, whatever Ruby has loaded.
            ("foo", Err(Reason::BlindSpot), Ruby { feature: YES, file: YES }, Resolved::Defer(Reason::BlindSpot)),
            ("foo", Err(Reason::Missing), Ruby { feature: NOT, file: NOT }, Resolved::Defer(Reason::Missing)),
        ];
        for (feature, found, ruby, expected) in table {
            let label = format!("{feature} {found:?} {ruby:?}");
            assert_eq!(run(feature, found, ruby), expected, "{label}");
        }
    }

    #[test]
    fn the_probe_is_answered_without_a_lookup() {
        let answer = resolve::<()>(PROBE, || panic!("no lookup for the probe"), |_| panic!("nor Ruby"));
        assert_eq!(answer, Ok(Resolved::Probe));
    }

    #[test]
    fn what_ruby_raises_comes_back() {
        let raised = resolve(b"foo", || Ok(at(Want::Bare, Kind::Rb)), |_| Err("interrupt"));
        assert_eq!(raised, Err("interrupt"));
        let raised = resolve(b"foo", || Err::<Result<Lookup, Reason>, _>("to_path raised"), |_| Ok(NOT));
        assert_eq!(raised, Err("to_path raised"));
    }

    #[test]
    fn searches_in_turn_stop_at_a_file_or_a_doubt() {
        let answers = |list: Vec<Result<Option<u8>, Reason>>| {
            let mut asked = 0;
            let r = settle_in_turn(list, |a| {
                asked += 1;
                *a
            });
            (r, asked)
        };
        assert_eq!(answers(vec![Ok(Some(1)), Ok(Some(2))]), (Ok(Some(1)), 1));
        assert_eq!(answers(vec![Ok(None), Ok(Some(2))]), (Ok(Some(2)), 2));
        assert_eq!(answers(vec![Ok(None), Ok(None)]), (Ok(None), 2));
        assert_eq!(answers(vec![Err(Reason::Missing), Ok(Some(2))]), (Err(Reason::Missing), 1));
        assert_eq!(answers(vec![Ok(None), Err(Reason::BlindSpot)]), (Err(Reason::BlindSpot), 2));
    }

    #[test]
    fn settle_tells_a_sure_miss_from_a_doubtful_one() {
        #[rustfmt::skip]
        let table = [
            (Located::Found(3, Kind::Ext), false, Ok(Some((3, Kind::Ext)))),
            (Located::Missing, true, Ok(None)),
            (Located::Missing, false, Err(Reason::Missing)),
            (Located::Unknown, true, Err(Reason::BlindSpot)),
        ];
        for (located, confirmed, expected) in table {
            assert_eq!(settle(located, || confirmed), expected, "{located:?} confirmed={confirmed}");
        }
    }
}
