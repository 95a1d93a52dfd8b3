//! A `Session`'s cache across boots, driven as the binding drives it: saved to a real cache dir
//! with its last boot's record and started again from it, damaged, racy, restored into another
//! checkout, and the one rule for whether a boot writes either.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::session::{age, cache_in, file, maybe_linked_in, settings, start_with, started, sure_miss};
use common::{LoadPath, TempTree};
use loadscan_core::{
    CacheFile, Counters, Finished, InPlace, Json, Kind, Reason, Resolved, Saved, Session, Started, Validation, Want,
    CACHE_FILE, LAST_BOOT_FILE,
};

#[test]
fn a_boot_follows_load_path_saves_and_records_its_figures_and_the_next_one_starts_from_the_cache() {
    let t = TempTree::new("session-cache");
    t.file("lib/a/b.rb").file("lib/c.rb").file("gem/lib/g.rb");
    age(&t.root);
    // `$LOAD_PATH` as a boot builds it: the app's lib, then a gem RubyGems puts first.
    let mut load_path = LoadPath::new(&[t.path("lib")]);
    let Started { session: mut s, warning, last_boot } =
        Session::start(settings(Some(cache_in(&t))), &mut load_path, &InPlace).unwrap();
    assert_eq!((warning, last_boot), (None, None), "no cache yet is no warning");
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
    let finished = s.finish(&counters, &[("program".into(), Json::Str(b"t".to_vec()))], &InPlace);
    assert_eq!(finished, Finished { saved: Saved::Clean, unrecorded: None });
    let recorded = std::fs::read_to_string(t.path("cache").join(LAST_BOOT_FILE)).unwrap();
    assert!(
        recorded.starts_with("{\"program\":\"t\",\"cache\":\"clean\",") && recorded.contains("\"hits\":1,"),
        "{recorded}"
    );
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
    let (mut bare, _) = started(&[t.path("lib")], None);
    assert_eq!(bare.finish(&counters, &[], &InPlace), Finished { saved: Saved::Skipped, unrecorded: None });
    assert_eq!(std::fs::read_dir(t.path("cache")).unwrap().count(), 0);
}

#[test]
fn a_damaged_cache_is_one_warning_and_a_foreign_file_is_never_replaced() {
    let t = TempTree::new("session-damaged");
    t.file("lib/a.rb").dir("cache");
    let order = vec![t.path("lib")];
    std::fs::write(t.path("cache").join(CACHE_FILE), b"LOADSCAN garbage").unwrap();
    age(&t.root);
    let start = || Session::start(settings(Some(cache_in(&t))), &mut LoadPath::new(&order), &InPlace).unwrap();
    let Started { session: mut s, warning, .. } = start();
    assert!(warning.unwrap().ends_with("; scanning instead"));
    assert_eq!(s.save(&InPlace), Saved::Written, "our own damaged cache is replaced");
    std::fs::write(t.path("cache").join(CACHE_FILE), b"someone else's notes").unwrap();
    let Started { session: mut s, warning, .. } = start();
    assert!(warning.unwrap().ends_with("not replacing it"));
    assert_eq!(s.save(&InPlace), Saved::Skipped);
    assert_eq!(std::fs::read(t.path("cache").join(CACHE_FILE)).unwrap(), b"someone else's notes");
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
        start_with(settings, &order).session
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
    assert_eq!(next.find(b"a/nope.rb", &InPlace), Err(Reason::UnsureMiss));
}

/// A boot's life as the binding drives it, one call at setup and one at exit: `start` (the
/// cache dir opened once: the cache, and the last boot's record handed back), requires,
/// `finish` (the cache, then the record). One rule says whether a boot writes them
/// ([`Session::writes`]): a normal boot writes both; a read-only one (from the start, or made
/// so by a later setup) or one whose cache was cleared writes neither.
#[test]
fn a_boots_life_is_start_requires_finish_and_only_a_boot_that_may_write_writes() {
    let t = TempTree::new("session-life");
    t.file("lib/a.rb").file("lib/b/c.rb");
    age(&t.root);
    let order = vec![t.path("lib")];
    let record = || std::fs::read_to_string(t.path("cache").join(LAST_BOOT_FILE)).ok();
    let life = |boot: &str| {
        let mut settings = settings(Some(cache_in(&t)));
        settings.readonly = boot == "readonly";
        let Started { session: mut s, last_boot, .. } = start_with(settings, &order);
        let counters = Counters::new();
        let found = s.find(b"b/c", &InPlace);
        counters.count(&Resolved::Path(b"/x.rb".to_vec()));
        assert_eq!(found, file(Want::Bare, t.path("lib/b/c.rb"), Kind::Rb), "{boot}");
        match boot {
            "readonly later" => s.set_readonly(true),
            "cleared" => assert_eq!(s.clear().map(|removed| removed.len()), Ok(2)),
            _ => {}
        }
        let finished = s.finish(&counters, &[("program".into(), Json::Str(boot.as_bytes().to_vec()))], &InPlace);
        (last_boot, finished, s.stats(&counters))
    };
    let skipped = Finished { saved: Saved::Skipped, unrecorded: None };
    let (last_boot, finished, _) = life("readonly");
    assert_eq!((last_boot, finished, record()), (None, skipped, None), "read-only, with no cache yet");
    assert!(!t.path("cache").exists());

    let (last_boot, finished, stats) = life("normal");
    assert_eq!((last_boot, finished), (None, Finished { saved: Saved::Written, unrecorded: None }));
    let written = record().expect("recorded");
    let text = &written;
    assert!(
        text.starts_with("{\"program\":\"normal\",\"cache\":\"written\",") && text.contains("\"hits\":1,"),
        "{text}"
    );
    assert!(stats.timings.setup >= stats.timings.load + stats.timings.sync, "setup is the start: read and first sync");
    assert!(text.contains("\"setup_ms\":"), "{text}");

    for boot in ["readonly", "readonly later"] {
        let (last_boot, finished, _) = life(boot);
        assert_eq!(last_boot.as_ref(), Some(&written), "{boot}: the record is handed back from the dir opened");
        assert_eq!((finished, record()), (Finished { saved: Saved::Skipped, unrecorded: None }, Some(written.clone())));
    }

    let (last_boot, finished, _) = life("normal");
    assert_eq!((last_boot.as_ref(), finished), (Some(&written), Finished { saved: Saved::Clean, unrecorded: None }));
    let clean = record().unwrap();
    assert!(clean.contains("\"cache\":\"clean\""), "recorded again");

    let (last_boot, finished, _) = life("cleared");
    assert_eq!((last_boot, finished), (Some(clean), Finished { saved: Saved::Skipped, unrecorded: None }));
    assert_eq!(std::fs::read_dir(t.path("cache")).unwrap().count(), 0, "nothing written after the clear");
}
