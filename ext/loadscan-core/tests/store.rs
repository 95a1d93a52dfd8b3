//! The cache across boots: round trips, revalidation of every kind of change, and pruning.

mod common;

use common::{answer, cold, policy, settled_cache, warm, TempTree, ENV};
use loadscan_core::internals::Index;
use loadscan_core::internals::{bound_dead_roots, encode, RootRecord, Snapshot, DEAD_ROOTS_MIN, RACY_NS};
use loadscan_core::ScanOptions;
use loadscan_core::SyncPolicy;
use loadscan_core::Validation;
use std::path::{Path, PathBuf};

#[test]
fn a_warm_index_answers_like_the_cold_one_without_scanning() {
    let t = TempTree::new("roundtrip");
    t.file("app/a.rb")
        .file("app/sub/b.rb")
        .file("gems/g/lib/a.rb")
        .file("gems/g/lib/c.so")
        .file("gems/g/lib/.hidden/x.rb");
    let order = vec![t.path("app"), t.path("gems/g/lib")];
    let p = SyncPolicy { stable: vec![t.path("gems")], ..policy() };
    let (mut cold_index, bytes) = cold(&order, &p, false);
    let (mut warm_index, report) = warm(&bytes, &order, &p);
    assert_eq!((report.scanned, report.refreshed, report.fresh), (0, 0, 2));
    for f in ["a", "sub/b", "c", "c.so", "a.rb", "nope", ".hidden/x", "sub//b"] {
        assert_eq!(answer(&mut warm_index, f), answer(&mut cold_index, f), "{f}");
    }
    assert!(!warm_index.is_dirty());
    // Files are stored once, in the feature table: a rewrite rebuilds the same listings.
    assert_eq!(encode(&warm_index.records(1_000, 0), &[], ENV), bytes);
}

#[test]
fn every_change_between_boots_is_caught() {
    let t = TempTree::new("changes");
    t.file("e1/keep.rb").file("e1/deep/x.rb").file("e2/shadow.rb").file("e2/moved/y.rb").file("e2/z.rb");
    let order = vec![t.path("e1"), t.path("e2")];
    let p = policy();
    let (_, bytes) = cold(&order, &p, false);
    // a file in a new subdirectory, a shadowing file in an earlier entry, a directory replaced
    // as `git checkout` does (new inode), a removed file
    t.file("e1/newdir/n.rb").file("e1/shadow.rb");
    std::fs::rename(t.path("e2/moved"), t.path("e2/old")).unwrap();
    t.file("e2/moved/y.rb").file("e2/moved/w.rb");
    std::fs::remove_file(t.path("e2/z.rb")).unwrap();
    let (mut index, report) = warm(&bytes, &order, &p);
    assert_eq!(report.scanned, 0, "only directories are listed again");
    assert_eq!(report.refreshed, 2);
    let (e1, e2) = (t.path("e1"), t.path("e2"));
    assert_eq!(answer(&mut index, "newdir/n"), format!("{}/newdir/n.rb", e1.display()));
    assert_eq!(answer(&mut index, "shadow"), format!("{}/shadow.rb", e1.display()));
    assert_eq!(answer(&mut index, "moved/w"), format!("{}/moved/w.rb", e2.display()));
    assert_eq!(answer(&mut index, "old/y"), format!("{}/old/y.rb", e2.display()));
    assert_eq!(answer(&mut index, "z"), "missing");
    assert_eq!(answer(&mut index, "deep/x"), format!("{}/deep/x.rb", e1.display()));
    // And the refreshed index equals a fresh one on every feature of the tree.
    let mut fresh = Index::new(p.clone());
    fresh.sync(&order);
    for f in ["keep", "deep/x", "shadow", "moved/y", "moved/w", "old/y", "z", "newdir/n"] {
        assert_eq!(answer(&mut index, f), answer(&mut fresh, f), "{f}");
    }
}

#[test]
fn a_directory_moved_below_its_old_place_is_not_taken_for_a_loop() {
    // `git checkout` or a reinstall can hand a replaced directory an inode that an ancestor had
    // when the cache was written. Here e1/a/b gets the old e1/a's inode: judged by the cached
    // identities it would be its own ancestor, a symlink loop, left blind with a warning.
    use std::os::unix::fs::MetadataExt;
    let t = TempTree::new("moved-inode");
    t.file("e1/a/b/x.rb").file("e1/a/y.rb");
    let order = vec![t.path("e1")];
    let ino = |rel: &str| std::fs::metadata(t.path(rel)).unwrap().ino();
    for eager_depth in [usize::MAX, 0] {
        let base = policy();
        let p = SyncPolicy { scan: ScanOptions { eager_depth, ..base.scan.clone() }, ..base };
        let mut cold_index = Index::new(p.clone());
        cold_index.sync(&order);
        for f in ["a/b/x", "a/y"] {
            answer(&mut cold_index, f); // listed lazily (eager_depth 0), so cached too
        }
        let bytes = settled_cache(&cold_index);
        let a = ino("e1/a");
        std::fs::rename(t.path("e1/a"), t.path("e1/moving")).unwrap();
        std::fs::create_dir(t.path("e1/a")).unwrap();
        std::fs::rename(t.path("e1/moving"), t.path("e1/a/b")).unwrap();
        assert_eq!(ino("e1/a/b"), a);
        let (mut index, report) = warm(&bytes, &order, &p);
        assert!(report.problems.is_empty(), "eager_depth {eager_depth}: {:?}", report.problems);
        let e1 = t.path("e1").display().to_string();
        assert_eq!(answer(&mut index, "a/b/b/x"), format!("{e1}/a/b/b/x.rb"), "eager_depth {eager_depth}");
        assert_eq!(answer(&mut index, "a/b/y"), format!("{e1}/a/b/y.rb"), "eager_depth {eager_depth}");
        assert_eq!(answer(&mut index, "a/y"), "missing", "eager_depth {eager_depth}");
        assert!(index.take_problems().is_empty(), "eager_depth {eager_depth}");
        // The tree as it was, for the other mode.
        std::fs::rename(t.path("e1/a/b"), t.path("e1/moving")).unwrap();
        std::fs::remove_dir(t.path("e1/a")).unwrap();
        std::fs::rename(t.path("e1/moving"), t.path("e1/a")).unwrap();
    }
}

#[test]
fn a_file_added_within_the_racy_window_is_caught() {
    let t = TempTree::new("racy");
    t.file("e1/other.rb").file("e2/f.rb");
    let order = vec![t.path("e1"), t.path("e2")];
    let p = policy();
    let (_, bytes) = cold(&order, &p, true);
    // Same second as the cache write; the directory stamp may not even change on a
    // coarse-clock file system, so restore it exactly to simulate the worst case.
    let md = std::fs::metadata(t.path("e1")).unwrap();
    t.file("e1/f.rb");
    let atime = std::time::SystemTime::now();
    let f = std::fs::File::open(t.path("e1")).unwrap();
    f.set_times(std::fs::FileTimes::new().set_accessed(atime).set_modified(md.modified().unwrap())).unwrap();
    let (mut index, report) = warm(&bytes, &order, &p);
    assert!(report.refreshed >= 1, "{report:?}");
    assert_eq!(answer(&mut index, "f"), format!("{}/f.rb", t.path("e1").display()));
    const _: () = assert!(RACY_NS >= 1_000_000_000, "the racy window must cover 1 s file systems");
}

#[test]
fn stable_roots_cost_one_stat_and_volatile_ones_are_checked_per_directory() {
    let t = TempTree::new("stable");
    t.file("gems/g/lib/a.rb").file("gems/g/lib/deep/b.rb");
    let order = vec![t.path("gems/g/lib")];
    let p = SyncPolicy { stable: vec![t.path("gems")], ..policy() };
    let (_, bytes) = cold(&order, &p, false);
    t.file("gems/g/lib/deep/c.rb"); // a deep change in an installed gem is not looked for
    let (mut index, report) = warm(&bytes, &order, &p);
    assert_eq!(report.fresh, 1);
    assert_eq!(answer(&mut index, "deep/c"), "missing");
    // Cached as stable, only its top directory was recorded: turned volatile, it is rescanned.
    let (mut index, report) = warm(&bytes, &order, &policy());
    assert_eq!(report.scanned, 1);
    assert_eq!(answer(&mut index, "deep/c"), format!("{}/deep/c.rb", t.path("gems/g/lib").display()));
}

fn touch_all(dir: &Path, when: std::time::SystemTime) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            touch_all(&e.path(), when);
        }
    }
    let f = std::fs::File::open(dir).unwrap();
    f.set_times(std::fs::FileTimes::new().set_modified(when)).unwrap();
}

#[test]
fn listing_mode_survives_a_fresh_checkout_and_still_sees_new_files() {
    let t = TempTree::new("listing");
    t.file("app/models/user.rb").file("app/lib/x.rb");
    let order = vec![t.path("app")];
    let listing = SyncPolicy { validation: Validation::Listing, ..policy() };
    let (_, bytes) = cold(&order, &listing, false);
    touch_all(&t.path("app"), std::time::SystemTime::now() + std::time::Duration::from_secs(3600));
    let (_, report) = warm(&bytes, &order, &listing);
    assert_eq!((report.fresh, report.refreshed, report.scanned), (1, 0, 0));
    let (_, report) = warm(&bytes, &order, &policy());
    assert_eq!(report.refreshed, 1, "mtime mode sees the touched dirs");
    t.file("app/models/post.rb");
    let (mut index, report) = warm(&bytes, &order, &listing);
    assert_eq!(report.refreshed, 1);
    assert_eq!(answer(&mut index, "models/post"), format!("{}/models/post.rb", t.path("app").display()));
}

#[test]
fn roots_off_the_load_path_are_pruned_after_a_while() {
    let t = TempTree::new("prune");
    t.file("old/a.rb").file("new/b.rb");
    let p = policy();
    let mut index = Index::new(p.clone());
    index.sync(&[t.path("old"), t.path("new")]);
    let bytes = encode(&index.records(1_000, 0), &[], ENV);
    let (mut index, _) = warm(&bytes, &[t.path("new")], &p);
    index.set_order(&[t.path("new")]);
    assert_eq!(index.records(2_000, 500).len(), 2, "used recently: kept");
    assert_eq!(index.records(2_000, 1_500).len(), 1, "not used since before the cutoff: pruned");
}

// ---- Roots no longer on the load path ----

#[test]
fn roots_off_the_load_path_are_bounded_in_number() {
    // A program that puts a fresh temp dir on $LOAD_PATH on every run.
    let t = TempTree::new("dead");
    t.file("app/a.rb");
    let p = policy();
    let mut bytes = encode(&[], &[], ENV);
    let mut sizes = Vec::new();
    for run in 0..(DEAD_ROOTS_MIN + 40) {
        t.file(&format!("tmp{run}/t.rb"));
        let order = vec![t.path("app"), t.path(&format!("tmp{run}"))];
        let (mut index, _) = warm(&bytes, &order, &p);
        let now = 1_000 + run as i64;
        let mut records = index.records(now, now - 30 * 24 * 3600);
        bound_dead_roots(&mut records, &order);
        bytes = encode(&records, &[], ENV);
        sizes.push(bytes.len());
        assert!(records.len() <= 2 + DEAD_ROOTS_MIN, "run {run}: {} roots", records.len());
        assert_eq!(answer(&mut index, "t"), format!("{}/t.rb", t.path(&format!("tmp{run}")).display()));
    }
    // It stops growing (give or take the digits of the temp dirs' names).
    let (capped, last) = (sizes[DEAD_ROOTS_MIN + 5], *sizes.last().unwrap());
    assert!(last <= capped + capped / 100, "{capped} bytes once capped, {last} at the end");
    // The newest dead roots are the ones kept.
    let s = Snapshot::parse(bytes.clone(), ENV).unwrap();
    let kept: Vec<_> = (0..s.root_count()).map(|i| s.root(i).unwrap().path_buf()).collect();
    assert!(kept.contains(&t.path(&format!("tmp{}", DEAD_ROOTS_MIN + 38))));
    assert!(!kept.contains(&t.path("tmp0")));
    // As many dead roots as live ones are kept when there are more live ones than the minimum.
    let records = |n: usize, used: i64| -> Vec<RootRecord> {
        (0..n)
            .map(|i| {
                let l = loadscan_core::internals::Listing::empty(
                    PathBuf::from(format!("/r{used}-{i}")),
                    loadscan_core::internals::RootState::Missing,
                );
                RootRecord { listing: l, volatile: false, scanned_at_ns: 0, last_used_s: used }
            })
            .collect()
    };
    let mut all = records(100, 10);
    all.extend(records(150, 5));
    let on_path: Vec<PathBuf> = all[..100].iter().map(|r| r.listing.root.clone()).collect();
    bound_dead_roots(&mut all, &on_path);
    assert_eq!(all.len(), 200);
    // Last used in the same second as the roots on the path, and still dead.
    let mut all = records(150, 10); // the first 10 on the path

    bound_dead_roots(&mut all, &on_path[..10]);
    assert_eq!(all.len(), 10 + DEAD_ROOTS_MIN);
}
