//! A `Session` driven as the binding drives it: started with the settings loadscan ships (lazy
//! listing), synced with `$LOAD_PATH` (a `LoadPath` source standing for the Ruby array) before
//! each question, asked `find` for each require (the production lookup, with its sure-miss
//! check), saved to a real cache dir with its last boot's record, and started again from it.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{euid, is_root, LoadPath, TempTree, ENV};
use loadscan_core::internals::{CACHE_FILE, LAST_BOOT_FILE};
use loadscan_core::{
    Answer, CacheFile, Counters, FoundFile, InPlace, Json, Kind, Polled, ProblemKind, Reason, Resolved, Saved, Session,
    Settings, Validation, Want,
};

fn settings(cache: Option<CacheFile>) -> Settings {
    Settings { policy: common::lazy_policy(), cache }
}

fn cache_in(t: &TempTree) -> CacheFile {
    CacheFile { dir: t.path("cache"), env: ENV.to_vec(), uid: euid() }
}

/// Starts a session following `$LOAD_PATH` = `order`, synced.
fn started(order: &[PathBuf], cache: Option<CacheFile>) -> (Session, LoadPath) {
    let (mut session, warning) = Session::start(settings(cache), &InPlace);
    assert_eq!(warning, None);
    let mut load_path = LoadPath::new(order);
    session.sync(&mut load_path, &InPlace).unwrap();
    (session, load_path)
}

/// The answer for a file found.
fn file(want: Want, path: PathBuf, kind: Kind) -> Result<Answer, Reason> {
    Ok(Answer {
        want,
        file: Some(FoundFile { path: path.into_os_string().into_encoded_bytes(), kind }),
        maybe_linked_in: false,
    })
}

/// The answer for a sure miss.
/// No entry has it, and Ruby's table of extensions without a file may: Ruby must tell.
fn maybe_linked_in(want: Want) -> Result<Answer, Reason> {
    Ok(Answer { want, file: None, maybe_linked_in: true })
}

fn sure_miss(want: Want) -> Result<Answer, Reason> {
    Ok(Answer { want, file: None, maybe_linked_in: false })
}

/// Sets the mtime of `dir` and every directory below it an hour back: a directory listed within
/// `RACY_NS` of its last change vouches for no miss, as on a real boot right after an edit.
fn age(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            age(&e.path());
        }
    }
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(dir).and_then(|f| f.set_modified(hour_ago)).unwrap();
}

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
    assert_eq!(s.find(b"deep/nope", &InPlace), Err(Reason::Missing));
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
fn a_boot_follows_load_path_saves_and_records_its_figures_and_the_next_one_starts_from_the_cache() {
    let t = TempTree::new("session-cache");
    t.file("lib/a/b.rb").file("lib/c.rb").file("gem/lib/g.rb");
    age(&t.root);
    let (mut s, warning) = Session::start(settings(Some(cache_in(&t))), &InPlace);
    assert_eq!(warning, None, "no cache yet is no warning");
    // `$LOAD_PATH` as a boot builds it: the app's lib, then a gem RubyGems puts first.
    let mut load_path = LoadPath::new(&[t.path("lib")]);
    s.sync(&mut load_path, &InPlace).unwrap();
    assert_eq!(s.find(b"a/b", &InPlace), file(Want::Bare, t.path("lib/a/b.rb"), Kind::Rb));
    assert_eq!(s.find(b"g", &InPlace), maybe_linked_in(Want::Bare));
    load_path.unshift(t.path("gem/lib").as_os_str().as_encoded_bytes());
    s.sync(&mut load_path, &InPlace).unwrap();
    assert_eq!(s.find(b"g", &InPlace), file(Want::Bare, t.path("gem/lib/g.rb"), Kind::Rb));
    let scans = s.stats(&Counters::new()).scans;
    s.sync(&mut load_path, &InPlace).unwrap();
    assert_eq!(s.stats(&Counters::new()).scans, scans, "an unchanged $LOAD_PATH is not synced again");
    assert_eq!(s.save(&InPlace), Saved::Written);
    assert_eq!(s.save(&InPlace), Saved::Clean);
    let counters = Counters::new();
    counters.count(&Resolved::Path(b"/x.rb".to_vec()));
    s.record_last_boot(&counters, &[("program".into(), Json::Str(b"t".to_vec()))], &InPlace).unwrap();
    let recorded = std::fs::read_to_string(t.path("cache").join(LAST_BOOT_FILE)).unwrap();
    assert!(recorded.starts_with("{\"program\":\"t\",") && recorded.contains("\"hits\":1,"), "{recorded}");
    assert!(recorded.contains("\"load_path_entries\":2,"), "{recorded}");
    assert_eq!(cache_in(&t).read_last_boot(), Ok(Some(recorded)), "read back as written");
    // The next boot starts from the cache: nothing listed again, the same answers.
    let (mut warm, _) = started(&[t.path("gem/lib"), t.path("lib")], Some(cache_in(&t)));
    let stats = warm.stats(&Counters::new());
    assert_eq!((stats.roots_from_cache, stats.roots_scanned), (2, 0));
    assert_eq!(warm.find(b"a/b", &InPlace), file(Want::Bare, t.path("lib/a/b.rb"), Kind::Rb));
    assert_eq!(warm.find(b"g", &InPlace), file(Want::Bare, t.path("gem/lib/g.rb"), Kind::Rb));
    assert_eq!(warm.find(b"a/nope", &InPlace), maybe_linked_in(Want::Bare));
    let removed = cache_in(&t).clear().unwrap();
    assert_eq!(removed, vec![t.path("cache").join(CACHE_FILE), t.path("cache").join(LAST_BOOT_FILE)]);
    assert_eq!(std::fs::read_dir(t.path("cache")).unwrap().count(), 0);
    assert_eq!(cache_in(&t).read_last_boot(), Ok(None), "none recorded");
    // Without a cache there is nothing to record.
    let (bare, _) = started(&[t.path("lib")], None);
    assert_eq!(bare.record_last_boot(&counters, &[], &InPlace), Ok(()));
    assert_eq!(std::fs::read_dir(t.path("cache")).unwrap().count(), 0);
}

#[test]
fn a_damaged_cache_is_one_warning_and_a_foreign_file_is_never_replaced() {
    let t = TempTree::new("session-damaged");
    t.file("lib/a.rb").dir("cache");
    let order = vec![t.path("lib")];
    std::fs::write(t.path("cache").join(CACHE_FILE), b"LOADSCAN garbage").unwrap();
    age(&t.root);
    let (mut s, warning) = Session::start(settings(Some(cache_in(&t))), &InPlace);
    assert!(warning.unwrap().ends_with("; scanning instead"));
    s.sync(&mut LoadPath::new(&order), &InPlace).unwrap();
    assert_eq!(s.save(&InPlace), Saved::Written, "our own damaged cache is replaced");
    std::fs::write(t.path("cache").join(CACHE_FILE), b"someone else's notes").unwrap();
    let (mut s, warning) = Session::start(settings(Some(cache_in(&t))), &InPlace);
    assert!(warning.unwrap().ends_with("not replacing it"));
    s.sync(&mut LoadPath::new(&order), &InPlace).unwrap();
    assert_eq!(s.save(&InPlace), Saved::Skipped);
    assert_eq!(std::fs::read(t.path("cache").join(CACHE_FILE)).unwrap(), b"someone else's notes");
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
    s.forget_rescan(); // the first sync is reported as the cache load
    assert_eq!(s.take_rescan(), None);
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
    assert!(matches!(s.sync(&mut load_path, &InPlace), Err(Polled::Opaque)));
    assert!(matches!(s.sync(&mut load_path, &InPlace), Err(Polled::Opaque)), "and stays so while unchanged");
    load_path.replace(&[t.path("a")]);
    s.sync(&mut load_path, &InPlace).unwrap();
    assert_eq!(s.find(b"x", &InPlace), file(Want::Bare, t.path("a/x.rb"), Kind::Rb));
}

/// Roots scanned, refreshed and served from the cache by a session started from `cache` on `order`.
fn served(order: &[PathBuf], cache: CacheFile) -> (usize, usize, usize) {
    let (s, _) = started(order, Some(cache));
    let stats = s.stats(&Counters::new());
    (stats.roots_scanned, stats.roots_refreshed, stats.roots_from_cache)
}

/// A tree listed right after it changed (a Docker `COPY`, then `loadscan build`) is racy: every
/// session started from the cache lists it again, and one that only reads the cache does so at
/// every boot. `relist_racy` says how long the window stays open, then lists those directories
/// again: the cache saved after it is served whole.
#[test]
fn racy_directories_listed_again_once_their_window_passed_make_a_cache_served_whole() {
    let t = TempTree::new("session-racy");
    t.file("app/lib/a.rb").file("app/lib/deep/b.rb");
    let order = vec![t.path("app/lib")];
    let found = file(Want::Bare, t.path("app/lib/deep/b.rb"), Kind::Rb);
    let (mut s, _) = started(&order, Some(cache_in(&t)));
    assert_eq!(s.find(b"deep/b", &InPlace), found);
    assert_eq!(s.save(&InPlace), Saved::Written);
    assert_eq!(served(&order, cache_in(&t)), (0, 1, 0), "the racy root is listed again");
    let wait = s.relist_racy(&InPlace).expect("a tree made just now is racy");
    assert!(wait <= Duration::from_millis(1200), "{wait:?}");
    std::thread::sleep(wait);
    assert_eq!(s.relist_racy(&InPlace), None);
    assert_eq!(s.relist_racy(&InPlace), None, "nothing racy is left, nothing to wait for");
    assert_eq!(s.find(b"deep/b", &InPlace), found);
    assert_eq!(s.save(&InPlace), Saved::Written);
    assert_eq!(served(&order, cache_in(&t)), (0, 0, 1));
}

/// A cache restored into another checkout of the app (the same names, new inodes and mtimes: a
/// CI job's), validated by listing: its records vouch for a miss as they vouch for a hit, as
/// long as the directory's names are still the ones listed.
#[test]
fn a_miss_in_another_checkout_validated_by_listing_is_sure_while_its_names_are_the_same() {
    let t = TempTree::new("session-listing");
    t.file("lib/a/b.rb").file("lib/c.rb");
    age(&t.root);
    let order = vec![t.path("lib")];
    let by_listing = || {
        let mut settings = settings(Some(cache_in(&t)));
        settings.policy.validation = Validation::Listing;
        let (mut s, warning) = Session::start(settings, &InPlace);
        assert_eq!(warning, None);
        s.sync(&mut LoadPath::new(&order), &InPlace).unwrap();
        s
    };
    let mut first = by_listing();
    assert_eq!(first.find(b"a/b", &InPlace), file(Want::Bare, t.path("lib/a/b.rb"), Kind::Rb));
    assert_eq!(first.find(b"a/nope.rb", &InPlace), sure_miss(Want::Rb));
    assert_eq!(first.save(&InPlace), Saved::Written);
    // The next job's checkout, at the same path.
    std::fs::remove_dir_all(t.path("lib")).unwrap();
    t.file("lib/a/b.rb").file("lib/c.rb");
    age(&t.root);
    let mut next = by_listing();
    let stats = next.stats(&Counters::new());
    assert_eq!((stats.roots_from_cache, stats.roots_scanned), (1, 0), "served from the cache");
    assert_eq!(next.find(b"a/nope.rb", &InPlace), sure_miss(Want::Rb));
    assert_eq!(next.find(b"nope.rb", &InPlace), sure_miss(Want::Rb));
    assert_eq!(next.find(b"a/nope.rb", &InPlace), sure_miss(Want::Rb), "again, from the stamp seen then");
    // A file that appears since is never missed: Ruby searches.
    t.file("lib/a/nope.rb");
    assert_eq!(next.find(b"a/nope.rb", &InPlace), Err(Reason::Missing));
}
