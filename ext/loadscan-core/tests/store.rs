//! The cache file: round trips, revalidation of every kind of change, and hostile bytes.

mod common;

use common::{Rng, TempTree};
use loadscan_core::index::{Index, Resolution, SyncPolicy};
use loadscan_core::scan::{scan_roots, ScanOptions};
use loadscan_core::store::{encode, load, write_atomic, LoadError, Snapshot, TrustPolicy, Validation, RACY_NS};
use std::path::{Path, PathBuf};

const ENV: &[u8] = b"test-env";

fn policy(validation: Validation, stable: Vec<PathBuf>) -> SyncPolicy {
    SyncPolicy { scan: ScanOptions { threads: 2, ..ScanOptions::default() }, validation, stable }
}

fn answer(index: &mut Index, feature: &str) -> String {
    match index.lookup(feature.as_bytes()) {
        Resolution::Found { root, stem, kind } => String::from_utf8(index.path_of(root, &stem, kind)).unwrap(),
        Resolution::Missing => "missing".into(),
        Resolution::Unknown => "unknown".into(),
    }
}

/// Cold boot: scan everything, encode (backdating scan times past the racy window unless
/// `racy`), return the bytes.
fn cold(order: &[PathBuf], p: &SyncPolicy, racy: bool) -> (Index, Vec<u8>) {
    let mut index = Index::new(b"so");
    index.sync(order, p);
    let mut records = index.records(1_000, 0);
    if !racy {
        for r in &mut records {
            r.scanned_at_ns = i64::MAX / 2;
        }
    }
    let bytes = encode(&records, ENV);
    (index, bytes)
}

fn warm(bytes: &[u8], order: &[PathBuf], p: &SyncPolicy) -> (Index, loadscan_core::index::SyncReport) {
    let snapshot = Snapshot::parse(bytes.to_vec(), ENV).expect("valid snapshot");
    let mut index = Index::from_snapshot(b"so", snapshot);
    let report = index.sync(order, p);
    (index, report)
}

fn features(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("f{i}")).collect()
}

#[test]
fn a_warm_index_answers_like_the_cold_one_without_scanning() {
    let t = TempTree::new("roundtrip");
    t.file("app/a.rb")
        .file("app/sub/b.rb")
        .file("gems/g/lib/a.rb")
        .file("gems/g/lib/c.so")
        .file("gems/g/lib/.hidden/x.rb");
    let order = vec![t.path("app"), t.path("gems/g/lib")];
    let p = policy(Validation::Mtime, vec![t.path("gems")]);
    let (mut cold_index, bytes) = cold(&order, &p, false);
    let (mut warm_index, report) = warm(&bytes, &order, &p);
    assert_eq!((report.scanned, report.refreshed, report.fresh), (0, 0, 2));
    for f in ["a", "sub/b", "c", "c.so", "a.rb", "nope", ".hidden/x", "sub//b"] {
        assert_eq!(answer(&mut warm_index, f), answer(&mut cold_index, f), "{f}");
    }
    assert!(!warm_index.is_dirty());
    // Files are stored once, in the feature table: a rewrite rebuilds the same listings.
    assert_eq!(encode(&warm_index.records(1_000, 0), ENV), bytes);
}

#[test]
fn every_change_between_boots_is_caught() {
    let t = TempTree::new("changes");
    t.file("e1/keep.rb").file("e1/deep/x.rb").file("e2/shadow.rb").file("e2/moved/y.rb").file("e2/z.rb");
    let order = vec![t.path("e1"), t.path("e2")];
    let p = policy(Validation::Mtime, vec![]);
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
    let mut fresh = Index::new(b"so");
    fresh.sync(&order, &p);
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
        let base = policy(Validation::Mtime, vec![]);
        let p = SyncPolicy { scan: ScanOptions { eager_depth, ..base.scan.clone() }, ..base };
        let mut cold_index = Index::new(b"so");
        cold_index.sync(&order, &p);
        for f in ["a/b/x", "a/y"] {
            answer(&mut cold_index, f); // listed lazily (eager_depth 0), so cached too
        }
        let mut records = cold_index.records(1_000, 0);
        records.iter_mut().for_each(|r| r.scanned_at_ns = i64::MAX / 2); // out of the racy window
        let bytes = encode(&records, ENV);
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
    let p = policy(Validation::Mtime, vec![]);
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
    let p = policy(Validation::Mtime, vec![t.path("gems")]);
    let (_, bytes) = cold(&order, &p, false);
    t.file("gems/g/lib/deep/c.rb"); // a deep change in an installed gem is not looked for
    let (mut index, report) = warm(&bytes, &order, &p);
    assert_eq!(report.fresh, 1);
    assert_eq!(answer(&mut index, "deep/c"), "missing");
    // Cached as stable, only its top directory was recorded: turned volatile, it is rescanned.
    let (mut index, report) = warm(&bytes, &order, &policy(Validation::Mtime, vec![]));
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
    let listing = policy(Validation::Listing, vec![]);
    let (_, bytes) = cold(&order, &listing, false);
    touch_all(&t.path("app"), std::time::SystemTime::now() + std::time::Duration::from_secs(3600));
    let (_, report) = warm(&bytes, &order, &listing);
    assert_eq!((report.fresh, report.refreshed, report.scanned), (1, 0, 0));
    let (_, report) = warm(&bytes, &order, &policy(Validation::Mtime, vec![]));
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
    let p = policy(Validation::Mtime, vec![]);
    let mut index = Index::new(b"so");
    index.sync(&[t.path("old"), t.path("new")], &p);
    let bytes = encode(&index.records(1_000, 0), ENV);
    let (mut index, _) = warm(&bytes, &[t.path("new")], &p);
    index.set_order(&[t.path("new")]);
    assert_eq!(index.records(2_000, 500).len(), 2, "used recently: kept");
    assert_eq!(index.records(2_000, 1_500).len(), 1, "not used since before the cutoff: pruned");
}

#[test]
fn files_are_trusted_only_when_owned_by_us_and_not_shared() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempTree::new("trust");
    t.file("e/a.rb");
    let (_, bytes) = cold(&[t.path("e")], &policy(Validation::Mtime, vec![]), false);
    let dir = t.path("cache");
    let path = write_atomic(&dir, "index", &bytes, None).unwrap();
    let me = std::fs::metadata(&path).unwrap();
    use std::os::unix::fs::MetadataExt;
    let uid = me.uid();
    assert!(load(&path, ENV, TrustPolicy { uid }).is_ok());
    assert_eq!(me.mode() & 0o777, 0o600);
    assert!(matches!(load(&path, ENV, TrustPolicy { uid: uid + 1 }), Err(LoadError::Untrusted(_))));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(matches!(load(&path, ENV, TrustPolicy { uid }), Err(LoadError::Untrusted(_))));
    assert!(matches!(load(&path, b"other-env", TrustPolicy { uid }), Err(LoadError::Untrusted(_))));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(matches!(load(&path, b"other-env", TrustPolicy { uid }), Err(LoadError::Stale(_))));
    assert!(matches!(load(&dir.join("none"), ENV, TrustPolicy { uid }), Err(LoadError::Missing)));
    assert!(matches!(load(&dir, ENV, TrustPolicy { uid }), Err(LoadError::NotAFile)));
    std::os::unix::fs::symlink(&path, dir.join("link")).unwrap();
    assert!(matches!(load(&dir.join("link"), ENV, TrustPolicy { uid }), Err(LoadError::NotAFile)));
    t.fifo("cache/fifo");
    assert!(matches!(load(&t.path("cache/fifo"), ENV, TrustPolicy { uid }), Err(LoadError::NotAFile)));
}

/// Decoder fuzzing with a fixed seed: truncations, random bytes, bit flips (with the checksum
/// recomputed, so the body decoder itself is exercised). Nothing may panic; every lookup on an
/// accepted file must return.
#[test]
fn hostile_bytes_never_panic() {
    let t = TempTree::new("fuzz");
    for i in 0..40 {
        t.file(&format!("e{}/d{}/f{i}.rb", i % 3, i % 5));
    }
    t.file("e0/.skip/x.rb").file("e1/dup.rb").file("e2/dup.rb").file("e2/dup.so").file("e1/d1/deep/er/y.rb");
    let order: Vec<PathBuf> = (0..3).map(|i| t.path(&format!("e{i}"))).collect();
    // A full listing, and a lazy one where some directories were listed and the rest deferred
    // (so the prefix table holds both kinds of spot).
    let p = policy(Validation::Mtime, vec![]);
    let mut lazy_policy = policy(Validation::Mtime, vec![]);
    lazy_policy.scan.eager_depth = 0;
    let (_, full) = cold(&order, &p, false);
    let mut lazy = Index::new(b"so");
    lazy.sync(&order, &lazy_policy);
    for f in ["d1/f1", "d2/f2", "d1/deep/er/y"] {
        let _ = lazy.lookup(f.as_bytes());
    }
    assert!(lazy.lazy_stats().listed >= 4);
    let lazy_bytes = encode(&lazy.records(1_000, 0), ENV);
    for (good, p) in [(full, &p), (lazy_bytes, &lazy_policy)] {
        fuzz_cache(&good, &order, p);
    }
    let _ = scan_roots(&order, &ScanOptions::default());
}

/// Feeds truncations, bit flips (with and without a recomputed checksum) and random bytes of
/// `good` to the loader, then syncs and looks up: nothing may panic.
fn fuzz_cache(good: &[u8], order: &[PathBuf], p: &SyncPolicy) {
    let probe = |bytes: Vec<u8>| {
        if let Ok(s) = Snapshot::parse(bytes, ENV) {
            let mut index = Index::from_snapshot(b"so", s);
            index.sync(order, p);
            for f in
                features(40).iter().map(String::as_str).chain(["dup", "dup.so", ".skip/x", "d1/f1", "d1/deep/er/y"])
            {
                let _ = index.lookup(f.as_bytes());
            }
            let _ = index.records(0, 0);
        }
    };
    for len in (0..good.len()).step_by(7) {
        probe(good[..len].to_vec());
    }
    let mut rng = Rng::new(7);
    for _ in 0..300 {
        let mut bytes = good.to_vec();
        for _ in 0..1 + rng.below(8) {
            let at = 64 + rng.below(bytes.len() - 64);
            bytes[at] ^= 1 << rng.below(8);
        }
        probe(bytes.clone());
        // Recompute the checksum so the damaged body gets past the header check.
        let crc = crc32fast::hash(&bytes[64..]);
        bytes[24..28].copy_from_slice(&crc.to_le_bytes());
        probe(bytes);
    }
    for n in [0usize, 1, 64, 100, 4096] {
        probe((0..n).map(|_| rng.next() as u8).collect());
    }
}

/// A cache big enough to be read into the prefaulted mapping (Linux), loaded from disk.
#[test]
fn large_caches_load_from_disk() {
    use loadscan_core::scan::{FileEntry, Kind, Listing, RootState};
    use loadscan_core::store::RootRecord;
    let t = TempTree::new("large");
    let records: Vec<RootRecord> = (0..40)
        .map(|r| {
            let mut l = Listing::empty(t.path(&format!("g{r}")), RootState::Dir);
            l.files =
                (0..1000).map(|i| FileEntry { stem: format!("g{r}/sub/f{i}").into_bytes(), kind: Kind::Rb }).collect();
            RootRecord { listing: l, volatile: false, scanned_at_ns: 0, last_used_s: 0 }
        })
        .collect();
    let bytes = encode(&records, ENV);
    assert!(bytes.len() > 512 << 10, "{} bytes", bytes.len());
    let path = write_atomic(&t.path("cache"), "index", &bytes, None).unwrap();
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(&path).unwrap().uid();
    let mut index = Index::from_snapshot(b"so", load(&path, ENV, TrustPolicy { uid }).expect("loads"));
    let order: Vec<PathBuf> = (0..40).map(|r| t.path(&format!("g{r}"))).collect();
    index.set_order(&order);
    assert_eq!(answer(&mut index, "g39/sub/f999"), format!("{}/g39/sub/f999.rb", t.path("g39").display()));
    assert_eq!(answer(&mut index, "g39/sub/f1000"), "missing");
    // Truncated on disk: rejected, never read past the end.
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    assert!(matches!(load(&path, ENV, TrustPolicy { uid }), Err(LoadError::Corrupt(_))));
}
