//! Scan throughput of the loadscan_core scanner, for bench/scan.rb.
//!
//! ```sh
//! cargo build --release --example scan -p loadscan-core
//! target/release/examples/scan ROOTS_FILE MODE REPS
//! ```
//!
//! `ROOTS_FILE`: one absolute directory per line (a fixture's load-path entries).
//! `MODE`: `walk1` (`scan_roots`, threads = 1), `walk2` (`scan_roots`, threads = 2), `walkN`,
//! or `serial` (`scan_serial`, the stat-per-entry reference walker, root by root).
//! Prints one line per repetition: `scan_ns index_ns files dirs roots` — the wall time of the
//! scan, the time to build an `Index` from its listings (feature table), the loadable files and
//! the directories listed. Only the public API is used.
use loadscan_core::internals::Index;
use loadscan_core::internals::{scan_roots, scan_serial, Listing};
use loadscan_core::ScanOptions;
use loadscan_core::SyncPolicy;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: scan ROOTS_FILE walk1|walk2|walkN|serial REPS");
        std::process::exit(2);
    }
    let roots: Vec<PathBuf> = std::fs::read_to_string(&args[1])
        .expect("roots file")
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    let mode = args[2].as_str();
    let reps: usize = args[3].parse().expect("REPS");
    let mut opts = ScanOptions { eager_depth: ScanOptions::EAGER, ..ScanOptions::default() };
    let serial = mode == "serial";
    if !serial {
        opts.threads =
            mode.strip_prefix("walk").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("unknown mode {mode}"));
    }
    for _ in 0..reps {
        let t0 = Instant::now();
        let listings: Vec<Listing> =
            if serial { roots.iter().map(|r| scan_serial(r, &opts).0).collect() } else { scan_roots(&roots, &opts).0 };
        let scan_ns = t0.elapsed().as_nanos();
        let files: usize = listings.iter().map(|l| l.files.len()).sum();
        let dirs: usize = listings.iter().map(|l| l.dirs.len()).sum();
        let t1 = Instant::now();
        let mut index = Index::new(SyncPolicy { scan: opts.clone(), ..SyncPolicy::default() });
        for l in listings {
            index.add(l);
        }
        index.set_order(&roots);
        let index_ns = t1.elapsed().as_nanos();
        println!("{scan_ns} {index_ns} {files} {dirs} {}", index.len());
    }
}
