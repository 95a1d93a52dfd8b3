//! Cache load cost and lookup speed, for bench/cache.rb.
//!
//! ```sh
//! cargo build --release --example cache -p loadscan-core
//! target/release/examples/cache CACHE_FILE ENV_KEY ROOTS_FILE FEATURES_FILE REPS
//! ```
//!
//! `CACHE_FILE` is a cache written by loadscan (`LOADSCAN_CACHE_DIR/loadscan.cache`) with key `ENV_KEY`
//! (`Loadscan.config.env_key`); `ROOTS_FILE` the load path it serves (one dir per line);
//! `FEATURES_FILE` features to look up (one per line; the first is the "first lookup").
//! Prints one line per repetition: `load_ns first_lookup_ns`, then one summary line
//! `lookup_hit_ns lookup_miss_ns features bytes rss_kb`. Revalidation (a `stat` per root) is not
//! part of "load"; it is reported by `Loadscan.stats` in real boots.
use loadscan_core::internals::CacheDir;
use loadscan_core::internals::{Index, Located};
use loadscan_core::SyncPolicy;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Instant;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 6 {
        eprintln!("usage: cache CACHE_FILE ENV_KEY ROOTS_FILE FEATURES_FILE REPS");
        std::process::exit(2);
    }
    let path = PathBuf::from(&a[1]);
    let env = a[2].as_bytes();
    let order: Vec<PathBuf> = std::fs::read_to_string(&a[3]).expect("roots").lines().map(PathBuf::from).collect();
    let features: Vec<String> = std::fs::read_to_string(&a[4]).expect("features").lines().map(String::from).collect();
    let reps: usize = a[5].parse().expect("reps");
    let uid = std::fs::metadata(&path).expect("cache file").uid();
    let name = path.file_name().and_then(|n| n.to_str()).expect("a file name");
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let rss_before = rss_kb();
    let mut kept = None;
    for _ in 0..reps {
        let t = Instant::now();
        let dir = CacheDir::open(path.parent().expect("a dir"), uid).expect("a trusted dir").expect("the dir exists");
        let snapshot = dir.load(name, env).expect("a valid cache");
        let mut index = Index::from_snapshot(SyncPolicy::default(), snapshot);
        index.set_order(&order);
        let loaded = t.elapsed();
        let r = index.locate_feature(features[0].as_bytes());
        let first = t.elapsed() - loaded;
        assert!(matches!(r, Located::Found(..)), "first feature must be a hit");
        println!("{} {}", loaded.as_nanos(), first.as_nanos());
        kept = Some(index);
    }
    let mut index = kept.expect("reps > 0");
    let rss = rss_kb().saturating_sub(rss_before);
    let misses: Vec<String> = features.iter().map(|f| format!("{f}_nope")).collect();
    let mut time = |fs: &[String]| {
        let rounds = 20;
        let t = Instant::now();
        let mut found = 0usize;
        for _ in 0..rounds {
            for f in fs {
                found += matches!(index.locate_feature(f.as_bytes()), Located::Found(..)) as usize;
            }
        }
        (t.elapsed().as_nanos() as f64 / (rounds * fs.len()) as f64, found)
    };
    let (hit, found) = time(&features);
    let (miss, _) = time(&misses);
    assert_eq!(found, features.len() * 20, "every feature must be found");
    println!("{hit:.0} {miss:.0} {} {bytes} {rss}", index.len());
}
