//! What `require(feature)` does with a lookup's result: require a path, return `false`
//! (already loaded), raise Ruby's `LoadError` (a sure miss), or leave it to Ruby's own
//! `require` for a [`Reason`]. Pure logic: what Ruby knows (`rb_feature_provided`) and what the
//! index found come in as arguments, so the tables below test every case without Ruby.

use super::feature::Want;
use super::find::{Answer, FoundFile, Reason};

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
    /// would search every entry and raise its `LoadError`: a *sure miss*.
    LoadError,
    /// Ask Ruby's own `require`, for this reason.
    Defer(Reason),
    /// The feature was [`PROBE`]: the decorator is reached.
    Probe,
}

/// Which question [`resolve`] asks Ruby first about a found file; never what it answers. Both
/// orders give stock's answer: asking for the file's absolute path first makes a re-require
/// cost one entry of Ruby's features index, and adds that question to a first require, where
/// the name as written must be asked anyway. The binding keeps the paths it recently answered
/// (a fixed table of hashes, overwritten freely): a path missing from it, or loaded some other
/// way, is only asked in the other order.
pub trait Hint {
    /// Whether `path` was probably loaded: ask for it first.
    fn likely_loaded(&self, path: &[u8]) -> bool;
    /// `require` was answered with `path` (it is being loaded, or is loaded).
    fn answered(&self, path: &[u8]);
}

/// What `require(feature)` should do, mirroring `load.c`'s `search_required`. `find` is the
/// index's answer (called unless `feature` is [`PROBE`]); `provided` is Ruby's
/// `rb_feature_provided`: `Some(true)` when provided and not being loaded right now,
/// `Some(false)` when not provided, `None` when it is being loaded. What either raised comes
/// back as the `Err`.
///
/// - the file the index found is itself loaded (asked by its absolute path: Ruby's features
///   index answers that from one hash entry, without the load path): Ruby returns `false`,
///   however the feature is spelled;
/// - not provided: require the indexed path, or raise `LoadError` for a sure miss;
/// - provided as `foo.rb` / `foo.so` spelled with the extension: Ruby returns `false`;
/// - provided, bare `foo`: Ruby returns `false` unless its search would reach a file not yet
///   loaded. It searches `.rb` first (then the extension), so when there is no such file
///   (or neither), the answer is `false` — this spares the failed probe of every entry that
///   stock Ruby makes when a native extension is required again. Anything else goes to Ruby.
///
/// A bare feature being loaded right now (by this or another thread) is required by its indexed
/// path, where Ruby waits or warns about the circular require exactly as after its own search;
/// with an extension, Ruby takes the loading path itself (no search), so it goes to Ruby.
pub fn resolve<E>(
    feature: &[u8],
    find: impl FnOnce() -> Result<Result<Answer, Reason>, E>,
    mut provided: impl FnMut(&[u8]) -> Result<Option<bool>, E>,
    hint: &impl Hint,
) -> Result<Resolved, E> {
    if feature == PROBE {
        return Ok(Resolved::Probe);
    }
    let Answer { want, file, maybe_linked_in } = match find()? {
        Ok(answer) => answer,
        Err(reason) => return Ok(Resolved::Defer(reason)),
    };
    let file = file.map(|f: FoundFile| f.path);
    // The file found, loaded (and not being loaded): stock returns `false` for every spelling.
    // Stock `search_required` returns `false` when the feature is provided under the spelling
    // written (`rb_feature_p` through the expanded load path) and not being loaded, or else when
    // the file its search reaches is in `$LOADED_FEATURES`. That file is `root/stem.ext`, `root`
    // an expanded entry: when it is loaded, the first check finds it (or stops at a "distractor"
    // such as `root/foo.txt` loaded before it, or misses a non-canonical spelling such as
    // `d//c`; then the second finds it), and both look in Ruby's features index before its
    // loading table. Ruby rebuilds that index when `$LOADED_FEATURES` was edited, replaced or
    // cleared (its snapshot no longer matches), so this is never stale.
    let mut file_loaded = None;
    if let Some(p) = file.as_ref().filter(|p| hint.likely_loaded(p)) {
        match provided(p)? {
            Some(true) => return Ok(Resolved::Loaded),
            other => file_loaded = Some(other),
        }
    }
    let answer = match (provided(feature)?, want, file) {
        (Some(false), _, Some(p)) => Resolved::Path(p),
        // No entry has it: Ruby's `LoadError`, unless its table of extensions without a file
        // may still provide it (then only Ruby's search can tell).
        (Some(false), _, None) if maybe_linked_in => Resolved::Defer(Reason::UnsureMiss),
        (Some(false), _, None) => Resolved::LoadError,
        // Being loaded (by this thread: a circular require; or by another). For a bare feature
        // Ruby's own `require` then searches anyway (`rb_feature_p` gives no type for it) and
        // takes the load lock of the file its search finds: the same file the index found, so
        // requiring that path gives the same wait, circular-require warning or load.
        (None, Want::Bare, Some(p)) => Resolved::Path(p),
        (Some(true), Want::Rb | Want::Ext, _) => Resolved::Loaded,
        (Some(true), Want::Bare, None) => Resolved::Loaded,
        // Provided under some spelling: `false` when the file the search reaches is loaded too;
        // otherwise Ruby decides.
        (Some(true), Want::Bare, Some(p)) => match file_loaded.map_or_else(|| provided(&p), Ok)? {
            Some(true) => {
                hint.answered(&p);
                Resolved::Loaded
            }
            _ => Resolved::Defer(Reason::Loaded),
        },
        _ => Resolved::Defer(Reason::Loaded),
    };
    if let Resolved::Path(p) = &answer {
        hint.answered(p);
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Kind;

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

    /// A hint that says every path is, or none is, likely loaded, and records what it was told.
    struct Always(bool, std::cell::RefCell<Vec<Vec<u8>>>);

    impl Hint for Always {
        fn likely_loaded(&self, _: &[u8]) -> bool {
            self.0
        }
        fn answered(&self, path: &[u8]) {
            self.1.borrow_mut().push(path.to_vec());
        }
    }

    fn hint(likely: bool) -> Always {
        Always(likely, Default::default())
    }

    /// The answer with the file asked for first. Asked the other way, it must be the same unless
    /// the file is loaded, where asking first answers `false` at once (see `resolve`: stock's
    /// answer; the other order hands Ruby the loaded path, or the name, and Ruby says `false`).
    fn run(feature: &str, found: Result<Answer, Reason>, ruby: Ruby) -> Resolved {
        let provided = |f: &[u8]| -> Result<Option<bool>, ()> { Ok(if f == FILE { ruby.file } else { ruby.feature }) };
        let first = resolve(feature.as_bytes(), || Ok(found.clone()), provided, &hint(true)).unwrap();
        let second = resolve(feature.as_bytes(), || Ok(found), provided, &hint(false)).unwrap();
        let same = first == second || (first == Resolved::Loaded && ruby.file == YES);
        assert!(same, "{feature} {ruby:?}: {first:?} with the file asked first, {second:?} without");
        first
    }

    fn at(want: Want, kind: Kind) -> Result<Answer, Reason> {
        Ok(Answer { want, file: Some(FoundFile { path: FILE.to_vec(), kind }), maybe_linked_in: false })
    }

    fn sure_miss(want: Want) -> Result<Answer, Reason> {
        Ok(Answer { want, file: None, maybe_linked_in: false })
    }

    /// No entry has it, and Ruby's table of extensions without a file may.
    fn maybe_linked_in(want: Want) -> Result<Answer, Reason> {
        Ok(Answer { want, file: None, maybe_linked_in: true })
    }

    #[test]
    fn answers_follow_search_required() {
        let path = || Resolved::Path(FILE.to_vec());
        #[rustfmt::skip]
        let table: Vec<(&str, Result<Answer, Reason>, Ruby, Resolved)> = vec![
            // Not provided: the file, or Ruby's LoadError for a sure miss.
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: NOT, file: NOT }, path()),
            ("foo.so", at(Want::Ext, Kind::Ext), Ruby { feature: NOT, file: NOT }, path()),
            ("foo", sure_miss(Want::Bare), Ruby { feature: NOT, file: NOT }, Resolved::LoadError),
            // No entry has it and Ruby's table of extensions without a file may: Ruby searches,
            // unless it is provided already (`thread`, `fiber.so`: false, as Ruby answers first).
            ("foo", maybe_linked_in(Want::Bare), Ruby { feature: NOT, file: NOT }, Resolved::Defer(Reason::UnsureMiss)),
            ("foo.so", maybe_linked_in(Want::Ext), Ruby { feature: NOT, file: NOT }, Resolved::Defer(Reason::UnsureMiss)),
            ("thread", maybe_linked_in(Want::Bare), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            ("fiber.so", maybe_linked_in(Want::Ext), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            ("foo", maybe_linked_in(Want::Bare), Ruby { feature: LOADING, file: NOT }, Resolved::Defer(Reason::Loaded)),
            // Provided, spelled with its extension: false.
            ("foo.rb", at(Want::Rb, Kind::Rb), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            ("foo.so", sure_miss(Want::Ext), Ruby { feature: YES, file: NOT }, Resolved::Loaded),
            // The file found is loaded: false, whatever the spelling and the name as written say.
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: NOT, file: YES }, Resolved::Loaded),
            ("foo", at(Want::Bare, Kind::Rb), Ruby { feature: LOADING, file: YES }, Resolved::Loaded),
            ("foo.rb", at(Want::Rb, Kind::Rb), Ruby { feature: NOT, file: YES }, Resolved::Loaded),
            ("foo.so", at(Want::Ext, Kind::Ext), Ruby { feature: LOADING, file: YES }, Resolved::Loaded),
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
            // What the index could not decide goes to Ruby, whatever Ruby has loaded.
            ("foo", Err(Reason::BlindSpot), Ruby { feature: YES, file: YES }, Resolved::Defer(Reason::BlindSpot)),
            ("foo", Err(Reason::UnsureMiss), Ruby { feature: NOT, file: NOT }, Resolved::Defer(Reason::UnsureMiss)),
        ];
        for (feature, found, ruby, expected) in table {
            let label = format!("{feature} {found:?} {ruby:?}");
            assert_eq!(run(feature, found, ruby), expected, "{label}");
        }
    }

    #[test]
    fn a_loaded_file_is_answered_without_asking_for_the_name_as_written() {
        let mut asked = Vec::new();
        let provided = |f: &[u8]| -> Result<Option<bool>, ()> {
            asked.push(f.to_vec());
            Ok(YES)
        };
        let answer = resolve(b"foo", || Ok(at(Want::Bare, Kind::Rb)), provided, &hint(true));
        assert_eq!(answer, Ok(Resolved::Loaded));
        assert_eq!(asked, vec![FILE.to_vec()], "one question, by the file's absolute path");
    }

    #[test]
    fn the_hint_learns_the_paths_required_and_found_loaded() {
        let h = hint(false);
        let not_loaded = |_: &[u8]| -> Result<Option<bool>, ()> { Ok(NOT) };
        assert_eq!(resolve(b"foo", || Ok(at(Want::Bare, Kind::Rb)), not_loaded, &h), Ok(Resolved::Path(FILE.to_vec())));
        let loaded = |_: &[u8]| -> Result<Option<bool>, ()> { Ok(YES) };
        assert_eq!(resolve(b"foo", || Ok(at(Want::Bare, Kind::Rb)), loaded, &h), Ok(Resolved::Loaded));
        assert_eq!(*h.1.borrow(), vec![FILE.to_vec(), FILE.to_vec()]);
    }

    #[test]
    fn the_probe_is_answered_without_a_lookup() {
        let answer = resolve::<()>(PROBE, || panic!("no lookup for the probe"), |_| panic!("nor Ruby"), &hint(true));
        assert_eq!(answer, Ok(Resolved::Probe));
    }

    #[test]
    fn what_ruby_raises_comes_back() {
        let raised = resolve(b"foo", || Ok(at(Want::Bare, Kind::Rb)), |_| Err("interrupt"), &hint(true));
        assert_eq!(raised, Err("interrupt"));
        let raised = resolve(b"foo", || Err::<Result<Answer, Reason>, _>("to_path raised"), |_| Ok(NOT), &hint(true));
        assert_eq!(raised, Err("to_path raised"));
    }
}
