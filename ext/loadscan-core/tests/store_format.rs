//! The cache file's bytes: hostile and crafted files, bounds on size, work and memory.

mod common;

use common::{answer, cold, euid, lazy_policy, load, policy, write_atomic, Rng, TempTree, ENV};
use loadscan_core::internals::scan_roots;
use loadscan_core::internals::Index;
use loadscan_core::internals::{encode, CacheDir, LoadError, LoadErrorKind, Snapshot, MAX_FILE_LEN};
use loadscan_core::ScanOptions;
use loadscan_core::SyncPolicy;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// What was wrong with the cache file, if anything was.
fn failure<T>(r: Result<T, LoadError>) -> Option<LoadErrorKind> {
    r.err().map(LoadError::into_kind)
}

fn features(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("f{i}")).collect()
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
    let mut lazy = Index::new(lazy_policy());
    lazy.sync(&order);
    for f in ["d1/f1", "d2/f2", "d1/deep/er/y"] {
        let _ = lazy.locate_feature(f.as_bytes());
    }
    assert!(lazy.lazy_stats().listed >= 4);
    let lazy_bytes = encode(&lazy.records(1_000, 0), &[], ENV);
    for (good, p) in [(full, &p), (lazy_bytes, &lazy_policy())] {
        fuzz_cache(&good, &order, p);
    }
    let _ = scan_roots(&order, &ScanOptions { eager_depth: ScanOptions::EAGER, ..ScanOptions::default() });
}

/// Feeds truncations, bit flips (with and without a recomputed checksum) and random bytes of
/// `good` to the loader, then syncs and looks up: nothing may panic.
fn fuzz_cache(good: &[u8], order: &[PathBuf], p: &SyncPolicy) {
    let probe = |bytes: Vec<u8>| {
        if let Ok(s) = Snapshot::parse(bytes, ENV) {
            let mut index = Index::from_snapshot(p.clone(), s);
            index.sync(order);
            for f in
                features(40).iter().map(String::as_str).chain(["dup", "dup.so", ".skip/x", "d1/f1", "d1/deep/er/y"])
            {
                let _ = index.locate_feature(f.as_bytes());
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
    use loadscan_core::internals::RootRecord;
    use loadscan_core::internals::{FileEntry, Listing, RootState};
    use loadscan_core::Kind;
    let t = TempTree::new("large");
    let records: Vec<RootRecord> = (0..40)
        .map(|r| {
            let mut l = Listing::empty(t.path(&format!("g{r}")), RootState::Dir);
            l.files =
                (0..1000).map(|i| FileEntry { stem: format!("g{r}/sub/f{i}").into_bytes(), kind: Kind::Rb }).collect();
            RootRecord { listing: l, volatile: false, scanned_at_ns: 0, last_used_s: 0 }
        })
        .collect();
    let bytes = encode(&records, &[], ENV);
    assert!(bytes.len() > 512 << 10, "{} bytes", bytes.len());
    let path = write_atomic(&t.path("cache"), "loadscan.cache", &bytes).unwrap();
    let uid = std::fs::metadata(&path).unwrap().uid();
    let mut index = Index::from_snapshot(policy(), load(&path, ENV, uid).expect("loads"));
    let order: Vec<PathBuf> = (0..40).map(|r| t.path(&format!("g{r}"))).collect();
    index.set_order(&order);
    assert_eq!(answer(&mut index, "g39/sub/f999"), format!("{}/g39/sub/f999.rb", t.path("g39").display()));
    assert_eq!(answer(&mut index, "g39/sub/f1000"), "missing");
    // Truncated on disk: rejected, never read past the end.
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    assert!(matches!(failure(load(&path, ENV, uid)), Some(LoadErrorKind::Corrupt(_))));
}

// ---- Sizes: the header first, then the size against it and a bound ----

fn header(body_len: u64) -> Vec<u8> {
    let good = encode(&[], &[], ENV);
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
        assert!(matches!(failure(dir.load("loadscan.cache", ENV)), Some(LoadErrorKind::Corrupt(_))), "{what}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{what}: read instead of refused");
    }
    // Just over the bound, with a header that agrees: refused by size.
    sparse(&header(MAX_FILE_LEN + 1 - 64), MAX_FILE_LEN + 1);
    match failure(dir.load("loadscan.cache", ENV)) {
        Some(LoadErrorKind::Corrupt(why)) => assert!(why.contains("256 MiB"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Shorter than a header.
    sparse(b"LOADSCAN", 8);
    assert!(matches!(failure(dir.load("loadscan.cache", ENV)), Some(LoadErrorKind::Corrupt(_))));
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
    not_linked_in: Vec<u32>,
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
            self.not_linked_in.len() / 2,
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
        le(&mut body, &self.not_linked_in);
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
fn a_learned_feature_whose_string_lies_outside_the_file_is_left_out() {
    // The features Ruby's own search could not load: one intact, one pointing past the
    // strings. The damaged one is simply not known (its miss goes to Ruby), never read.
    let mut c = Crafted::default();
    let good = c.string(b"optional/thing");
    c.not_linked_in = vec![good[0], good[1], 3, u32::MAX];
    c.slots = vec![NONE];
    c.prefix_slots = vec![NONE];
    let s = Snapshot::parse(c.bytes(), ENV).expect("well-formed");
    assert_eq!(s.not_linked_in().collect::<Vec<_>>(), vec![&b"optional/thing"[..]]);
}

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
        assert_eq!(s.postings(format!("missing{i}").as_bytes()), None);
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
    let index = Index::from_snapshot(policy(), s);
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
    assert!(matches!(Snapshot::parse(c.bytes(), ENV), Err(LoadErrorKind::Corrupt(_))));
    // One long string as the path of 100,000 roots: the boot would copy 100 GB of paths.
    let mut c = Crafted::default();
    let long = c.string(&vec![b'/'; 1 << 20]);
    for _ in 0..100_000 {
        c.root(long, [0, 0], [0, 0]);
    }
    c.slots = vec![NONE];
    c.prefix_slots = vec![NONE];
    assert!(matches!(Snapshot::parse(c.bytes(), ENV), Err(LoadErrorKind::Corrupt(_))));
}
