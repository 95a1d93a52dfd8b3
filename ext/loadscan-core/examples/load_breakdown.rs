//! Where cache loading time goes (read, checksum, parse), for tuning. Prints microseconds.
//! `target/release/examples/load_breakdown CACHE_FILE ENV_KEY`
use loadscan_core::store::Snapshot;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    for _ in 0..5 {
        let t = Instant::now();
        let bytes = std::fs::read(&a[1]).expect("cache file");
        let read = t.elapsed();
        let crc = crc32fast::hash(&bytes[64..]);
        let crc_t = t.elapsed() - read;
        let s = Snapshot::parse(bytes, a[2].as_bytes()).expect("valid");
        let total = t.elapsed();
        println!("read {:?} crc {:?} ({crc:x}) read+parse {:?} features {}", read, crc_t, total, s.feature_count());
    }
}
