//! The cache file: round trips, revalidation of every kind of change, and hostile bytes.

mod common;

use common::{answer, lazy_policy, policy, settled_cache, Rng, TempTree, ENV};
use loadscan_core::{
    bound_dead_roots, encode, load, write_atomic, CacheDir, DirError, LoadError, RootRecord, Snapshot, TrustPolicy,
    Validation, DEAD_ROOTS_MIN, MAX_FILE_LEN, RACY_NS,
};
use loadscan_core::{scan_roots, ScanOptions};
use loadscan_core::{Index, SyncPolicy};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Cold boot: scan everything, encode (backdating scan times past the racy window unless
/// `racy`), return the bytes.
fn cold(order: &[PathBuf], p: &SyncPolicy, racy: bool) -> (Index, Vec<u8>) {
    let mut index = Index::new(b"so");
    index.sync(order, p);
    let bytes = if racy { encode(&index.records(1_000, 0), ENV) } else { settled_cache(&index) };
    (index, bytes)
}

fn warm(bytes: &[u8], order: &[PathBuf], p: &SyncPolicy) -> (Index, loadscan_core::SyncReport) {
    let snapshot = Snapshot::parse(bytes.to_vec(), ENV).expect("valid snapshot");
    let mut index = Index::from_snapshot(b"so", snapshot);
    let report = index.sync(order, p);
    (index, report)
}

/// The effective uid of this test process (the owner of what it creates).
fn euid() -> u32 {
    let t = TempTree::new("euid");
    std::fs::metadata(&t.root).unwrap().uid()
}

fn me() -> TrustPolicy {
    TrustPolicy { uid: euid() }
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
    let p = SyncPolicy { stable: vec![t.path("gems")], ..policy() };
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
        let base = policy();
        let p = SyncPolicy { scan: ScanOptions { eager_depth, ..base.scan.clone() }, ..base };
        let mut cold_index = Index::new(b"so");
        cold_index.sync(&order, &p);
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
    let mut index = Index::new(b"so");
    index.sync(&[t.path("old"), t.path("new")], &p);
    let bytes = encode(&index.records(1_000, 0), ENV);
    let (mut index, _) = warm(&bytes, &[t.path("new")], &p);
    index.set_order(&[t.path("new")]);
    assert_eq!(index.records(2_000, 500).len(), 2, "used recently: kept");
    assert_eq!(index.records(2_000, 1_500).len(), 1, "not used since before the cutoff: pruned");
}

#[test]
fn files_are_trusted_only_when_owned_by_us_or_root_and_not_shared() {
    let t = TempTree::new("trust");
    t.file("e/a.rb");
    let (_, bytes) = cold(&[t.path("e")], &policy(), false);
    let dir = t.path("cache");
    let path = write_atomic(&dir, "loadscan.cache", &bytes, me()).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    let uid = meta.uid();
    assert!(load(&path, ENV, TrustPolicy { uid }).is_ok());
    assert_eq!(meta.mode() & 0o022, 0, "never writable by others");
    // Readable as the umask allows (a cache built as root serves other users): as a file made
    // with mode 0644 here.
    let probe = t.path("probe");
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&probe).unwrap();
    assert_eq!(meta.mode() & 0o777, std::fs::metadata(&probe).unwrap().mode() & 0o777);
    // Another user trusts a file only when root owns it (root can change anything anyway).
    let other = load(&path, ENV, TrustPolicy { uid: uid + 1 });
    if uid == 0 {
        assert!(other.is_ok());
    } else {
        assert!(matches!(other, Err(LoadError::Untrusted(_))));
    }
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
    // (so the prefix table holds both kinds of gap).
    let p = policy();
    let (_, full) = cold(&order, &p, false);
    let mut lazy = Index::new(b"so");
    lazy.sync(&order, &lazy_policy());
    for f in ["d1/f1", "d2/f2", "d1/deep/er/y"] {
        let _ = lazy.lookup(f.as_bytes());
    }
    assert!(lazy.lazy_stats().listed >= 4);
    let lazy_bytes = encode(&lazy.records(1_000, 0), ENV);
    for (good, p) in [(full, &p), (lazy_bytes, &lazy_policy())] {
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
    // Crafted, with a valid checksum (what the file's owner could plant): counts, offsets,
    // lengths, ranges and posting values set, a few at a time, to values that point elsewhere
    // (0, 1, the file's size, anywhere in it, a posting list, u32::MAX). Each probe must stay
    // quick: bounded lookups, bounded rebuilds.
    let body = 64 + ENV.len();
    for _ in 0..300 {
        let mut bytes = good.to_vec();
        for _ in 0..1 + rng.below(3) {
            let at = body + 4 * rng.below((bytes.len() - body) / 4);
            let v = match rng.below(7) {
                0 => 0,
                1 => 1,
                2 => u32::MAX,
                3 => 0x8000_0000 | rng.below(64) as u32,
                4 => bytes.len() as u32,
                5 => rng.below(bytes.len()) as u32,
                _ => rng.next() as u32,
            };
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32fast::hash(&bytes[64..]);
        bytes[24..28].copy_from_slice(&crc.to_le_bytes());
        let started = std::time::Instant::now();
        probe(bytes);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "a crafted file took {:?}", started.elapsed());
    }
}

/// A cache big enough to be read into the prefaulted mapping (Linux), loaded from disk.
#[test]
fn large_caches_load_from_disk() {
    use loadscan_core::RootRecord;
    use loadscan_core::{FileEntry, Kind, Listing, RootState};
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
    let path = write_atomic(&t.path("cache"), "loadscan.cache", &bytes, me()).unwrap();
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

// ---- The cache directory: planted symlinks, shared and foreign directories ----

fn refused(r: Result<Option<CacheDir>, DirError>) -> String {
    match r {
        Err(DirError::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_cache_dir_is_used_only_when_no_one_else_can_change_it() {
    let t = TempTree::new("cachedir");
    let uid = euid();
    t.dir("ok/cache").file("victim/index").file("victim/loadscan.cache");
    chmod(&t.path("ok"), 0o755);
    chmod(&t.path("ok/cache"), 0o755);
    std::fs::write(t.path("victim/loadscan.cache"), b"precious").unwrap();
    assert!(CacheDir::open(&t.path("ok/cache"), uid).unwrap().is_some());
    assert!(CacheDir::open(&t.path("ok/none"), uid).unwrap().is_none(), "not there yet");
    assert!(CacheDir::open(&t.path("ok/none/deeper"), uid).unwrap().is_none());

    // The issue's attack: the cache dir's last component is a symlink to the victim's dir.
    t.link("ok/planted", t.path("victim").to_str().unwrap());
    assert!(refused(CacheDir::open(&t.path("ok/planted"), uid)).contains("symlink"));
    let (_, bytes) = cold(&[t.path("victim")], &policy(), false);
    assert!(write_atomic(&t.path("ok/planted"), "loadscan.cache", &bytes, me()).is_err());
    assert!(write_atomic(&t.path("ok/planted"), "index", &bytes, me()).is_err());
    assert_eq!(std::fs::read(t.path("victim/loadscan.cache")).unwrap(), b"precious");
    assert_eq!(std::fs::read(t.path("victim/index")).unwrap(), b"");
    // A dangling one is not created through either.
    t.link("ok/dangling", t.path("nowhere").to_str().unwrap());
    refused(CacheDir::open(&t.path("ok/dangling"), uid));
    assert!(CacheDir::create(&t.path("ok/dangling"), uid).is_err());
    assert!(!t.path("nowhere").exists());
    // A symlink above the cache dir, made by this user, is followed (as `/var/run -> /run`).
    t.link("ok/up", t.path("ok").to_str().unwrap());
    assert!(CacheDir::open(&t.path("ok/up/cache"), uid).unwrap().is_some());
    t.link("ok/rel", ".");
    assert!(CacheDir::open(&t.path("ok/rel/rel/cache"), uid).unwrap().is_some());

    // Group- or world-writable without the sticky bit, the dir or one above it: refused.
    for (dir, mode) in [("ok/cache", 0o775), ("ok/cache", 0o777), ("ok", 0o775)] {
        chmod(&t.path(dir), mode);
        let why = refused(CacheDir::open(&t.path("ok/cache"), uid));
        assert!(why.contains("writable by group or others"), "{dir} {mode:o}: {why}");
        refused(CacheDir::open(&t.path("ok/cache/sub"), uid));
        chmod(&t.path(dir), 0o755);
    }
    // Sticky, as /tmp: fine.
    chmod(&t.path("ok/cache"), 0o1777);
    assert!(CacheDir::open(&t.path("ok/cache"), uid).unwrap().is_some());
    chmod(&t.path("ok/cache"), 0o755);

    // Not an absolute path, or no name of its own: refused.
    for p in ["", "relative/dir", "/", "/tmp/.."] {
        refused(CacheDir::open(Path::new(p), uid));
    }
    // Not a directory.
    t.file("ok/file");
    refused(CacheDir::open(&t.path("ok/file"), uid));
    refused(CacheDir::open(&t.path("ok/file/sub"), uid));

    // Owned by another user (not root): the dir, a dir above it, or a symlink on the way.
    // Only root can give files away; as another user this user's dirs are the foreign ones.
    if uid == 0 {
        let other = 65534;
        std::os::unix::fs::chown(t.path("ok/cache"), Some(other), Some(other)).unwrap();
        assert!(refused(CacheDir::open(&t.path("ok/cache"), uid)).contains("owned by uid 65534"));
        std::os::unix::fs::chown(t.path("ok/cache"), Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(t.path("ok"), Some(other), Some(other)).unwrap();
        refused(CacheDir::open(&t.path("ok/cache"), uid));
        std::os::unix::fs::chown(t.path("ok"), Some(0), Some(0)).unwrap();
        std::os::unix::fs::lchown(t.path("ok/up"), Some(other), Some(other)).unwrap();
        assert!(refused(CacheDir::open(&t.path("ok/up/cache"), uid)).contains("symlink owned by uid 65534"));
    } else {
        // Root's dirs are trusted, and so are this user's.
        assert!(CacheDir::open(Path::new("/usr"), uid).unwrap().is_some());
    }
}

#[test]
fn a_cache_dir_is_created_with_safe_modes_and_only_loadscan_files_are_replaced() {
    let t = TempTree::new("create");
    let uid = euid();
    chmod(&t.root, 0o755);
    let (_, bytes) = cold(&[t.path("e")], &policy(), false);
    let dir = CacheDir::create(&t.path("a/b/cache"), uid).unwrap();
    for d in ["a", "a/b", "a/b/cache"] {
        let mode = std::fs::metadata(t.path(d)).unwrap().mode();
        assert_eq!(mode & 0o022, 0, "{d}: {mode:o}");
    }
    dir.write_atomic("loadscan.cache", &bytes).unwrap();
    assert!(dir.load("loadscan.cache", ENV).is_ok());
    dir.write_atomic("loadscan.cache", &bytes).unwrap(); // over its own: fine
                                                         // A file of the same name that is not a loadscan cache is never written over.
    std::fs::write(t.path("a/b/cache/loadscan.cache"), b"someone's notes").unwrap();
    assert!(!dir.replaceable("loadscan.cache").unwrap());
    let err = dir.write_atomic("loadscan.cache", &bytes).unwrap_err();
    assert!(err.to_string().contains("not replacing"), "{err}");
    assert_eq!(std::fs::read(t.path("a/b/cache/loadscan.cache")).unwrap(), b"someone's notes");
    std::fs::remove_file(t.path("a/b/cache/loadscan.cache")).unwrap();
    std::os::unix::fs::symlink(t.path("elsewhere"), t.path("a/b/cache/loadscan.cache")).unwrap();
    assert!(!dir.replaceable("loadscan.cache").unwrap());
    assert!(matches!(dir.load("loadscan.cache", ENV), Err(LoadError::NotAFile)));
    assert!(dir.write_atomic("loadscan.cache", &bytes).is_err());
    assert!(!t.path("elsewhere").exists());
    // Nothing left behind by the refused writes.
    let mut names: Vec<_> = std::fs::read_dir(t.path("a/b/cache")).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, vec![std::ffi::OsString::from("loadscan.cache")]);
}

// ---- Sizes: the header first, then the size against it and a bound ----

fn header(body_len: u64) -> Vec<u8> {
    let good = encode(&[], ENV);
    let mut h = good[..64].to_vec();
    h[16..24].copy_from_slice(&body_len.to_le_bytes());
    h
}

#[test]
fn a_huge_cache_file_is_refused_before_it_is_read() {
    let t = TempTree::new("huge");
    let dir = CacheDir::create(&t.path("cache"), euid()).unwrap();
    let path = t.path("cache/loadscan.cache");
    let sparse = |head: &[u8], len: u64| {
        let _ = std::fs::remove_file(&path);
        let f = std::fs::OpenOptions::new().write(true).create_new(true).mode_600().open(&path).unwrap();
        use std::io::Write;
        (&f).write_all(head).unwrap();
        f.set_len(len).unwrap(); // sparse: no disk, any size
    };
    // 50 GB: with a header that agrees, with one that does not, with no header at all. Read
    // whole (the old behaviour), each would abort the process on the failed allocation.
    let big = 50u64 << 30;
    for (head, what) in [(header(big - 64), "agreeing"), (header(12), "disagreeing"), (vec![0u8; 64], "none")] {
        sparse(&head, big);
        let started = std::time::Instant::now();
        assert!(matches!(dir.load("loadscan.cache", ENV), Err(LoadError::Corrupt(_))), "{what}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{what}: read instead of refused");
    }
    // Just over the bound, with a header that agrees: refused by size.
    sparse(&header(MAX_FILE_LEN + 1 - 64), MAX_FILE_LEN + 1);
    match dir.load("loadscan.cache", ENV) {
        Err(LoadError::Corrupt(why)) => assert!(why.contains("256 MiB"), "{why}"),
        other => panic!("{:?}", other.err()),
    }
    // Shorter than a header.
    sparse(b"LOADSCAN", 8);
    assert!(matches!(dir.load("loadscan.cache", ENV), Err(LoadError::Corrupt(_))));
}

trait Mode600 {
    fn mode_600(&mut self) -> &mut Self;
}
impl Mode600 for std::fs::OpenOptions {
    fn mode_600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

// ---- Crafted files with a valid checksum: bounded work and memory ----

/// A cache file assembled from raw sections, with a correct header and checksum whatever the
/// sections say (what only the file's owner can plant: robustness, not a privilege boundary).
#[derive(Default)]
struct Crafted {
    roots: Vec<u8>,
    dirs: Vec<u8>,
    gaps: Vec<u8>,
    feats: Vec<u8>,
    slots: Vec<u32>,
    ids: Vec<u32>,
    prefixes: Vec<u8>,
    prefix_slots: Vec<u32>,
    strings: Vec<u8>,
    n: [usize; 4], // roots, dirs, gaps, feats
}

fn le(out: &mut Vec<u8>, vals: &[u32]) {
    for v in vals {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

impl Crafted {
    fn string(&mut self, s: &[u8]) -> [u32; 2] {
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(s);
        [at, s.len() as u32]
    }
    fn root(&mut self, path: [u32; 2], dirs: [u32; 2], gaps: [u32; 2]) {
        le(&mut self.roots, &[path[0], path[1], 0, dirs[0], dirs[1], gaps[0], gaps[1]]);
        self.roots.extend_from_slice(&[0u8; 16]);
        self.n[0] += 1;
    }
    fn dir(&mut self, rel: [u32; 2]) {
        le(&mut self.dirs, &[rel[0], rel[1]]);
        self.dirs.extend_from_slice(&[0u8; 40]);
        self.n[1] += 1;
    }
    fn feat(&mut self, stem: [u32; 2], rb: u32, ext: u32) {
        le(&mut self.feats, &[stem[0], stem[1], rb, ext]);
        self.n[3] += 1;
    }
    fn bytes(&self) -> Vec<u8> {
        let mut body = ENV.to_vec();
        let counts = [
            self.n[0],
            self.n[1],
            self.n[2],
            self.n[3],
            self.slots.len(),
            self.ids.len(),
            self.prefixes.len() / 16,
            self.prefix_slots.len(),
            self.strings.len(),
        ];
        le(&mut body, &counts.map(|c| c as u32));
        for s in [&self.roots, &self.dirs, &self.gaps, &self.feats] {
            body.extend_from_slice(s);
        }
        le(&mut body, &self.slots);
        le(&mut body, &self.ids);
        body.extend_from_slice(&self.prefixes);
        le(&mut body, &self.prefix_slots);
        body.extend_from_slice(&self.strings);
        let mut out = header(body.len() as u64);
        out[24..28].copy_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

const NONE: u32 = u32::MAX;
const MANY: u32 = 0x8000_0000;

#[test]
fn a_crafted_slot_table_cannot_make_lookups_long() {
    // Every slot taken by a record that never matches: a miss used to walk all 4M slots.
    let mut c = Crafted::default();
    let path = c.string(b"/r");
    c.root(path, [0, 0], [0, 0]);
    let a = c.string(b"a");
    c.feat(a, 0, NONE);
    c.slots = vec![1; 4 << 20];
    c.prefix_slots = vec![NONE];
    let s = Snapshot::parse(c.bytes(), ENV).expect("well-formed");
    let started = std::time::Instant::now();
    for i in 0..100 {
        assert_eq!(s.lookup(format!("missing{i}").as_bytes()), None);
    }
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(1), "100 lookups took {took:?}");
}

#[test]
fn a_crafted_file_cannot_make_a_rewrite_allocate_gigabytes() {
    // 20,000 features sharing one 1,000-byte stem and one list of all 2,000 roots: expanded for
    // the write at exit, 40 GB of file entries.
    let mut c = Crafted::default();
    let path = c.string(b"/r");
    for _ in 0..2000 {
        c.root(path, [0, 0], [0, 0]);
    }
    let stem = c.string(&[b's'; 1000]);
    for _ in 0..20_000 {
        c.feat(stem, MANY, NONE);
    }
    c.ids = std::iter::once(2000).chain(0..2000).collect();
    c.slots = vec![NONE; 20_001];
    c.prefix_slots = vec![NONE];
    let s = Snapshot::parse(c.bytes(), ENV).expect("well-formed");
    assert!(s.files_by_root(None).iter().all(Vec::is_empty));
    assert!(s.listing_without_files(&s.root(0).unwrap()).is_none(), "not rebuilt: scanned again instead");
    let index = Index::from_snapshot(b"so", s);
    assert!(index.records(0, 0).is_empty(), "nothing of the file is written back");
}

#[test]
fn crafted_root_records_cannot_share_directories() {
    // 1,000 roots each claiming all 1,000 directories: a boot would stat a million of them.
    let mut c = Crafted::default();
    let path = c.string(b"/r");
    let rel = c.string(b"d");
    for _ in 0..1000 {
        c.root(path, [0, 1000], [0, 0]);
        c.dir(rel);
    }
    c.slots = vec![NONE];
    c.prefix_slots = vec![NONE];
    assert!(matches!(Snapshot::parse(c.bytes(), ENV), Err(LoadError::Corrupt(_))));
    // One long string as the path of 100,000 roots: the boot would copy 100 GB of paths.
    let mut c = Crafted::default();
    let long = c.string(&vec![b'/'; 1 << 20]);
    for _ in 0..100_000 {
        c.root(long, [0, 0], [0, 0]);
    }
    c.slots = vec![NONE];
    c.prefix_slots = vec![NONE];
    assert!(matches!(Snapshot::parse(c.bytes(), ENV), Err(LoadError::Corrupt(_))));
}

// ---- Roots no longer on the load path ----

#[test]
fn roots_off_the_load_path_are_bounded_in_number() {
    // A program that puts a fresh temp dir on $LOAD_PATH on every run.
    let t = TempTree::new("dead");
    t.file("app/a.rb");
    let p = policy();
    let mut bytes = encode(&[], ENV);
    let mut sizes = Vec::new();
    for run in 0..(DEAD_ROOTS_MIN + 40) {
        t.file(&format!("tmp{run}/t.rb"));
        let order = vec![t.path("app"), t.path(&format!("tmp{run}"))];
        let (mut index, _) = warm(&bytes, &order, &p);
        let now = 1_000 + run as i64;
        let mut records = index.records(now, now - 30 * 24 * 3600);
        bound_dead_roots(&mut records, &order);
        bytes = encode(&records, ENV);
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
                let l = loadscan_core::Listing::empty(
                    PathBuf::from(format!("/r{used}-{i}")),
                    loadscan_core::RootState::Missing,
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
