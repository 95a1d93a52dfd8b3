//! The measurement behind the cache format (see `store/mod.rs`): the same index — feature stem
//! → roots with `.rb`, roots with the extension — as loadscan's flat format and as an rkyv
//! archive (`HashMap<String, (Vec<u32>, Vec<u32>)>`, validated with bytecheck, as a cache that
//! anyone could have written must be). Prints µs for write-to-disk-then-load + first lookup.
//!
//! `cargo run --release --example format_compare -p loadscan-core [FEATURES]`
use loadscan_core::internals::{encode, RootRecord, Snapshot};
use loadscan_core::internals::{FileEntry, Listing, RootState};
use loadscan_core::internals::{Index, Located};
use loadscan_core::Kind;
use loadscan_core::SyncPolicy;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

type Table = HashMap<String, (Vec<u32>, Vec<u32>)>;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let roots = 250;
    let mut records = Vec::new();
    let mut table: Table = HashMap::new();
    for r in 0..roots {
        let mut l = Listing::empty(PathBuf::from(format!("/gems/g{r}/lib")), RootState::Dir);
        for i in 0..n / roots {
            let stem = format!("g{r}/d{}/f{i}", i / 40);
            l.files.push(FileEntry { stem: stem.clone().into_bytes(), kind: Kind::Rb });
            table.entry(stem).or_default().0.push(r as u32);
        }
        records.push(RootRecord { listing: l, volatile: false, scanned_at_ns: 0, last_used_s: 0 });
    }
    let dir = std::env::temp_dir().join(format!("loadscan-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ours = dir.join("flat");
    let theirs = dir.join("rkyv");
    std::fs::write(&ours, encode(&records, &[], b"env")).unwrap();
    std::fs::write(&theirs, rkyv::to_bytes::<rkyv::rancor::Error>(&table).unwrap()).unwrap();
    let probe = format!("g{}/d0/f0", roots / 2);
    let order: Vec<PathBuf> = (0..roots).map(|r| PathBuf::from(format!("/gems/g{r}/lib"))).collect();
    let mut flat_us = Vec::new();
    let mut rkyv_us = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        let bytes = std::fs::read(&ours).unwrap();
        let mut index = Index::from_snapshot(SyncPolicy::default(), Snapshot::parse(bytes, b"env").unwrap());
        index.set_order(&order);
        assert!(matches!(index.locate_feature(probe.as_bytes()), Located::Found(..)));
        flat_us.push(t.elapsed().as_micros());

        let t = Instant::now();
        let raw = std::fs::read(&theirs).unwrap();
        let mut bytes = rkyv::util::AlignedVec::<16>::with_capacity(raw.len());
        bytes.extend_from_slice(&raw);
        let archived = rkyv::access::<rkyv::Archived<Table>, rkyv::rancor::Error>(&bytes).unwrap();
        assert!(archived.get(probe.as_str()).is_some());
        rkyv_us.push(t.elapsed().as_micros());
    }
    flat_us.sort_unstable();
    rkyv_us.sort_unstable();
    println!(
        "{n} features: flat {} µs ({} bytes), rkyv+bytecheck {} µs ({} bytes)  [median of 9; load + first lookup]",
        flat_us[4],
        std::fs::metadata(&ours).unwrap().len(),
        rkyv_us[4],
        std::fs::metadata(&theirs).unwrap().len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
