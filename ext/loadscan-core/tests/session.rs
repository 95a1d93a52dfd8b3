//! A `Session` driven as the binding drives it: started with the settings loadscan ships (lazy
//! listing), synced with `$LOAD_PATH` (a `LoadPath` source standing for the Ruby array) before
//! each question, asked `find` for each require (the production lookup, with its sure-miss
//! check), saved to a real cache dir with its last boot's record, and started again from it.

mod common;

use common::session::{age, cache_in, file, maybe_linked_in, started, sure_miss};
use common::{is_root, TempTree};
use loadscan_core::{Counters, InPlace, Kind, ProblemKind, Reason, Saved, SyncError, Want};

#[test]
fn finds_files_with_rubys_precedence_and_is_sure_of_a_miss_only_while_nothing_changed() {
    let t = TempTree::new("session-find");
    t.file("app/lib/deep/a.rb").file("gems/x/lib/deep/a.rb").file("gems/x/lib/b.so");
    let order = vec![t.path("app/lib"), t.path("gems/x/lib")];
    age(&t.root);
    let (mut s, _) = started(&order, None);
    assert_eq!(s.find(b"deep/a", &InPlace), file(Want::Bare, t.path("app/lib/deep/a.rb"), Kind::Rb));
    assert_eq!(s.find(b"b", &InPlace), file(Want::Bare, t.path("gems/x/lib/b.so"), Kind::Ext));
    assert_eq!(s.find(b"/abs/path", &InPlace), Err(Reason::NotFeature));
    // A miss every root vouches for, once Ruby said its table of extensions without a file
    // lacks it, is sure: Ruby's LoadError without a search.
    s.learn_not_linked_in(b"deep/nope");
    assert_eq!(s.find(b"deep/nope", &InPlace), sure_miss(Want::Bare));
    // A file appears where a listed directory was: no longer sure, Ruby searches.
    t.file("app/lib/deep/nope.rb");
    assert_eq!(s.find(b"deep/nope", &InPlace), Err(Reason::UnsureMiss));
}

#[test]
fn a_native_spelling_nobody_has_is_searched_again_as_a_bare_feature() {
    let t = TempTree::new("session-fallback");
    t.file("lib/foo.so.rb");
    age(&t.root);
    let (mut s, _) = started(&[t.path("lib")], None);
    assert_eq!(s.find(b"foo.so", &InPlace), file(Want::Ext, t.path("lib/foo.so.rb"), Kind::Rb));
    s.learn_not_linked_in(b"bar.so");
    assert_eq!(s.find(b"bar.so", &InPlace), sure_miss(Want::Ext));
}

#[test]
fn a_miss_ruby_may_provide_without_a_file_is_sure_once_ruby_said_so_and_the_cache_keeps_that() {
    let t = TempTree::new("session-linked-in");
    t.dir("lib");
    let order = vec![t.path("lib")];
    age(&t.root);
    let (mut s, _) = started(&order, Some(cache_in(&t)));
    // Ruby's table of extensions without a file (Prism's `prism/prism.so`, every extension of
    // a static build) may hold a bare or native spelling: only Ruby's search can tell.
    assert_eq!(s.find(b"prism/prism", &InPlace), maybe_linked_in(Want::Bare));
    assert_eq!(s.find(b"zlib.so", &InPlace), maybe_linked_in(Want::Ext));
    // The table is never asked for a `.rb` spelling.
    assert_eq!(s.find(b"zlib.rb", &InPlace), sure_miss(Want::Rb));
    // Ruby's own search raised LoadError for these spellings: their misses are sure now, and
    // only for the spelling Ruby was asked (`zlib` is not `zlib.so`).
    s.learn_not_linked_in(b"zlib.so");
    s.learn_not_linked_in(b"zlib.rb");
    assert_eq!(s.find(b"zlib.so", &InPlace), sure_miss(Want::Ext));
    assert_eq!(s.find(b"zlib", &InPlace), maybe_linked_in(Want::Bare));
    assert_eq!(s.find(b"prism/prism", &InPlace), maybe_linked_in(Want::Bare));
    // Learning makes the cache worth writing; the next boot of this Ruby knows it.
    assert_eq!(s.save(&InPlace), Saved::Written);
    let (mut warm, _) = started(&order, Some(cache_in(&t)));
    assert_eq!(warm.find(b"zlib.so", &InPlace), sure_miss(Want::Ext));
    assert_eq!(warm.find(b"zlib", &InPlace), maybe_linked_in(Want::Bare));
    // Learning what it knows changes nothing to write.
    warm.learn_not_linked_in(b"zlib.so");
    assert_eq!(warm.save(&InPlace), Saved::Clean);
}

#[test]
fn problems_are_kept_and_handed_out_for_a_warning_once() {
    if is_root() {
        return; // root reads any directory
    }
    let t = TempTree::new("session-problems");
    t.file("lib/locked/x.rb").file("lib/ok.rb");
    let locked = t.path("lib/locked");
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    age(&t.root);
    let (mut s, _) = started(&[t.path("lib")], None);
    assert!(!s.has_unreported(), "lazy: the locked directory is not listed before a lookup needs it");
    assert_eq!(s.find(b"locked/x", &InPlace), Err(Reason::BlindSpot));
    assert!(s.has_unreported());
    let new = s.take_unreported();
    assert_eq!(new.iter().map(|p| p.kind).collect::<Vec<_>>(), vec![ProblemKind::Unreadable]);
    assert!(!s.has_unreported() && s.take_unreported().is_empty());
    assert_eq!(s.problems(), &new[..], "still listed for Loadscan.problems");
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn a_sync_that_scans_is_a_rescan_to_report() {
    let t = TempTree::new("session-rescan");
    t.file("a/x.rb").file("b/y.rb");
    let (mut s, mut load_path) = started(&[t.path("a")], None);
    assert_eq!(s.take_rescan(), None, "the first sync is the start's, reported as the cache load");
    load_path.replace(&[t.path("a"), t.path("b")]);
    s.sync(&mut load_path, &InPlace).unwrap();
    let r = s.take_rescan().expect("a new entry was listed");
    assert_eq!((r.scanned, r.refreshed), (1, 0));
    assert_eq!(s.take_rescan(), None);
    assert_eq!(s.stats(&Counters::new()).load_path_entries, 2);
}

#[test]
fn a_load_path_ruby_must_expand_itself_is_left_to_ruby_until_it_changes_again() {
    let t = TempTree::new("session-opaque");
    t.file("a/x.rb");
    let (mut s, mut load_path) = started(&[t.path("a")], None);
    load_path.unshift(b"~/lib");
    assert!(matches!(s.sync(&mut load_path, &InPlace), Err(SyncError::Opaque)));
    assert!(matches!(s.sync(&mut load_path, &InPlace), Err(SyncError::Opaque)), "and stays so while unchanged");
    load_path.replace(&[t.path("a")]);
    s.sync(&mut load_path, &InPlace).unwrap();
    assert_eq!(s.find(b"x", &InPlace), file(Want::Bare, t.path("a/x.rb"), Kind::Rb));
}
