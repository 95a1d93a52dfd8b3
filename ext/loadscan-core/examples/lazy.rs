//! Lazy against eager listing over a recorded boot, for bench/scan.rb.
//!
//! ```sh
//! cargo build --release --example lazy -p loadscan-core
//! target/release/examples/lazy ROOTS_FILE FEATURES_FILE lazy|eager THREADS REPS
//! ```
//!
//! `ROOTS_FILE`: one absolute directory per line (the boot's load path, in order);
//! `FEATURES_FILE`: one feature per line, in the order the boot required them. Each repetition
//! builds a fresh index (`sync`, listing only the entries' own directories when `lazy`), then
//! looks every feature up, listing deferred directories on demand. Prints one line per
//! repetition: `sync_ns lookups_ns dirs_listed_lazily answered records_ns encode_ns bytes
//! warm_ns_per_lookup lazy_listing_ns` (writing the cache's records, encoding them, and the mean lookup time of
//! the same features in an index served from that cache).
use loadscan_core::internals::{Index, Located};
use loadscan_core::ScanOptions;
use loadscan_core::SyncPolicy;
use loadscan_core::Validation;
use std::path::PathBuf;
use std::time::Instant;

fn lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(path).expect("readable list").lines().filter(|l| !l.is_empty()).map(String::from).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: lazy ROOTS_FILE FEATURES_FILE lazy|eager THREADS REPS");
        std::process::exit(2);
    }
    let roots: Vec<PathBuf> = lines(&args[1]).into_iter().map(PathBuf::from).collect();
    let features = lines(&args[2]);
    let eager_depth = if args[3] == "lazy" { 0 } else { ScanOptions::EAGER };
    let threads: usize = args[4].parse().expect("THREADS");
    let reps: usize = args[5].parse().expect("REPS");
    let scan = ScanOptions { eager_depth, threads, ..ScanOptions::default() };
    let policy = SyncPolicy { scan, validation: Validation::Mtime, stable: Vec::new() };
    for _ in 0..reps {
        let t0 = Instant::now();
        let mut index = Index::new(policy.clone());
        index.sync(&roots);
        let sync_ns = t0.elapsed().as_nanos();
        let t1 = Instant::now();
        let answered =
            features.iter().filter(|f| matches!(index.locate_feature(f.as_bytes()), Located::Found(..))).count();
        let lookups_ns = t1.elapsed().as_nanos();
        let t2 = Instant::now();
        let records = index.records(0, 0);
        let records_ns = t2.elapsed().as_nanos();
        if std::env::var_os("LAZY_COUNTS").is_some() {
            let sum = |f: &dyn Fn(&loadscan_core::internals::Listing) -> usize| {
                records.iter().map(|r| f(&r.listing)).sum::<usize>()
            };
            eprintln!(
                "files {} dirs {} deferred {} blind {}",
                sum(&|l| l.files.len()),
                sum(&|l| l.dirs.len()),
                sum(&|l| l.deferred.len()),
                sum(&|l| l.blind.len())
            );
        }
        let t3 = Instant::now();
        let bytes = loadscan_core::internals::encode(&records, &[], b"env");
        let encode_ns = t3.elapsed().as_nanos();
        // The next boot: the same lookups from the cache just written.
        let snapshot = loadscan_core::internals::Snapshot::parse(bytes.clone(), b"env").expect("own cache");
        let mut warm = Index::from_snapshot(policy.clone(), snapshot);
        warm.sync(&roots);
        let t4 = Instant::now();
        for f in &features {
            std::hint::black_box(warm.locate_feature(f.as_bytes()));
        }
        let warm_ns = t4.elapsed().as_nanos() / features.len().max(1) as u128;
        println!(
            "{sync_ns} {lookups_ns} {} {answered} {records_ns} {encode_ns} {} {warm_ns} {}",
            index.lazy_stats().listed,
            bytes.len(),
            index.lazy_stats().time.as_nanos()
        );
    }
}
