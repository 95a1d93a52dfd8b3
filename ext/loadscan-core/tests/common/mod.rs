//! What the tests share: real file trees in temp dirs (removed on drop), the sync policies, cold
//! and warm boots through a cache, the trust of this test process, and answers as strings.
#![allow(dead_code)]

pub mod session;

use loadscan_core::internals::Index;
use loadscan_core::internals::{encode, CacheDir, LoadError, LoadErrorKind, RootRecord, Snapshot, SyncReport};
use loadscan_core::ScanOptions;
use loadscan_core::Validation;
use loadscan_core::{Answer, Entries, Entry, InPlace, Reason, SyncPolicy};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct TempTree {
    pub root: PathBuf,
}

impl TempTree {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "loadscan-core-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        TempTree { root: std::fs::canonicalize(root).unwrap() }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Creates a file (and its parents).
    pub fn file(&self, rel: &str) -> &Self {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
        self
    }

    pub fn dir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.path(rel)).unwrap();
        self
    }

    /// Creates a symlink at `rel` pointing to `target` (taken literally).
    pub fn link(&self, rel: &str, target: &str) -> &Self {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
        self
    }

    pub fn fifo(&self, rel: &str) -> &Self {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let status = std::process::Command::new("mkfifo").arg(&p).status().unwrap();
        assert!(status.success());
        self
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A tiny deterministic PRNG (xorshift64*), so random trees need no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A random tree over the entries `e0`, `e1` and `e2` of `t`, which share `names` (so entries
/// shadow each other): in `steps` steps, a name under a random directory made so far becomes, one
/// time in `odds.1`, a directory (`odds.0` times), a symlink to a directory (loops included), a
/// dangling symlink, or else a file with one of `exts`. Returns the load path (the three entries
/// and a missing one) and every path tried, relative to its entry.
pub fn random_tree(
    t: &TempTree,
    seed: u64,
    names: &[&str],
    exts: &[&str],
    steps: usize,
    odds: (usize, usize),
) -> (Vec<PathBuf>, Vec<String>) {
    let mut rng = Rng::new(seed);
    let mut dirs = vec![String::from("e0"), String::from("e1"), String::from("e2")];
    for d in &dirs {
        t.dir(d);
    }
    let mut tried = Vec::new();
    for _ in 0..steps {
        let parent = rng.pick(&dirs).clone();
        let name = rng.pick(names);
        let p = format!("{parent}/{name}");
        tried.push(p.split_once('/').map_or(String::new(), |(_, rel)| rel.to_string()));
        if t.path(&p).symlink_metadata().is_ok() {
            continue;
        }
        let (dir_odds, of) = odds;
        match rng.below(of) {
            k if k < dir_odds => {
                t.dir(&p);
                dirs.push(p);
            }
            k if k == dir_odds => {
                let target = rng.pick(&dirs).clone();
                t.link(&p, t.path(&target).to_str().unwrap());
            }
            k if k == dir_odds + 1 => {
                t.link(&p, "../missing");
            }
            _ => {
                t.file(&format!("{p}{}", rng.pick(exts)));
            }
        }
    }
    (["e0", "e1", "e2", "nope"].iter().map(|r| t.path(r)).collect(), tried)
}

pub fn is_root() -> bool {
    // SAFETY-free: read from /proc, which every Linux test machine has.
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

pub fn rel(p: &Path, root: &Path) -> String {
    p.strip_prefix(root).unwrap().to_string_lossy().into_owned()
}

/// `$LOAD_PATH` of Strings as a `Session` follows it (the binding's source is the Ruby array):
/// every change of the array bumps a version, as an unshared buffer tells the binding.
#[derive(Default)]
pub struct LoadPath {
    entries: Vec<Vec<u8>>,
    version: u64,
    remembered: Option<u64>,
}

impl LoadPath {
    pub fn new(paths: &[PathBuf]) -> Self {
        let mut load_path = LoadPath::default();
        load_path.replace(paths);
        load_path
    }

    /// `$LOAD_PATH.replace(paths)`.
    pub fn replace(&mut self, paths: &[PathBuf]) {
        self.entries = paths.iter().map(|p| p.as_os_str().as_bytes().to_vec()).collect();
        self.version += 1;
    }

    /// `$LOAD_PATH.unshift(entry)`, RubyGems' way.
    pub fn unshift(&mut self, entry: &[u8]) {
        self.entries.insert(0, entry.to_vec());
        self.version += 1;
    }
}

impl Entries for LoadPath {
    type Error = std::convert::Infallible;

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn entry(&mut self, i: usize) -> Result<Entry<'_>, Self::Error> {
        Ok(Entry::String(&self.entries[i]))
    }

    fn is_unchanged(&self) -> bool {
        self.remembered == Some(self.version)
    }

    fn remember(&mut self) {
        self.remembered = Some(self.version);
    }
}

/// The environment key of the caches the tests write.
pub const ENV: &[u8] = b"test-env";

/// How the tests sync: two scan threads, every directory listed up front, validation by
/// mtime, no stable directories. Vary it with `SyncPolicy { stable, ..policy() }`.
pub fn policy() -> SyncPolicy {
    SyncPolicy {
        scan: ScanOptions {
            dlext: b"so".to_vec(),
            threads: 2,
            eager_depth: ScanOptions::EAGER,
            ..ScanOptions::default()
        },
        validation: Validation::Mtime,
        stable: vec![],
    }
}

/// [`policy`] listing only each root's own entries up front (`eager_depth` 0): lazily.
pub fn lazy_policy() -> SyncPolicy {
    let mut p = policy();
    p.scan.set_lazy(true);
    p
}

/// What `require(feature)` would load according to `index`, through the production lookup
/// (`Index::find`, with its sure-miss check): the absolute path, `"missing"` (no entry has it,
/// sure or not, as `Loadscan.lookup` says) or `"unknown"` (Ruby's search must answer).
pub fn answer(index: &mut Index, feature: &str) -> String {
    match index.find(feature.as_bytes(), &InPlace) {
        Ok(Answer { file: Some(file), .. }) => String::from_utf8(file.path).unwrap(),
        Ok(Answer { file: None, .. }) | Err(Reason::UnsureMiss) => "missing".into(),
        Err(_) => "unknown".into(),
    }
}

/// The cache records of `index`, each scanned long enough ago that no directory counts as
/// racy (changed within `RACY_NS` of its listing) on the next boot.
pub fn settled_records(index: &Index) -> Vec<RootRecord> {
    let mut records = index.records(1_000, 0);
    records.iter_mut().for_each(|r| r.scanned_at_ns = i64::MAX / 2);
    records
}

/// The cache `index` would write, out of the racy window ([`settled_records`]).
pub fn settled_cache(index: &Index) -> Vec<u8> {
    encode(&settled_records(index), &[], ENV)
}

/// Cold boot: scan everything, encode (backdating scan times past the racy window unless
/// `racy`), return the bytes.
pub fn cold(order: &[PathBuf], p: &SyncPolicy, racy: bool) -> (Index, Vec<u8>) {
    let mut index = Index::new(p.clone());
    index.sync(order);
    let bytes = if racy { encode(&index.records(1_000, 0), &[], ENV) } else { settled_cache(&index) };
    (index, bytes)
}

/// Warm boot: an index on the snapshot of `bytes`, synced to `order`, and its report.
pub fn warm(bytes: &[u8], order: &[PathBuf], p: &SyncPolicy) -> (Index, SyncReport) {
    let snapshot = Snapshot::parse(bytes.to_vec(), ENV).expect("valid snapshot");
    let mut index = Index::from_snapshot(p.clone(), snapshot);
    let report = index.sync(order);
    (index, report)
}

/// The effective uid of this test process (the owner of what it creates).
pub fn euid() -> u32 {
    let t = TempTree::new("euid");
    std::fs::metadata(&t.root).unwrap().uid()
}

/// Loads the cache file at `path` for the user `uid`, as a boot does (the directory checked
/// first, a refusal of it reported as an untrusted file).
pub fn load(path: &Path, env: &[u8], uid: u32) -> Result<Snapshot, LoadError> {
    let fail = |kind| Err(LoadError::new(path.to_path_buf(), kind));
    let (dir, name) = (path.parent().unwrap(), path.file_name().unwrap().to_str().unwrap());
    match CacheDir::open(dir, uid) {
        Ok(Some(d)) => d.load(name, env),
        Ok(None) => fail(LoadErrorKind::Missing),
        Err(e) => fail(LoadErrorKind::Untrusted(e.to_string())),
    }
}

/// Writes `bytes` to `dir/name` as this test process's user, creating `dir` if needed.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    CacheDir::create(dir, euid())?.write_atomic(name, bytes)
}
