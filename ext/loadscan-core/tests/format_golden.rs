//! The cache format, pinned: the hash the tables are keyed by, and the exact bytes `encode`
//! writes for fixed records. A file written by one build is read by another (an upgrade keeps
//! the cache dir), so any change here must come with a new `FORMAT_VERSION`, which makes older
//! files be ignored and rewritten instead of misread.
//!
//! To accept a deliberate change: bump `FORMAT_VERSION` (ext/loadscan-core/src/store/format.rs),
//! then regenerate the golden file with
//! `LOADSCAN_BLESS=1 cargo test -p loadscan-core --test format_golden` and commit it.

use loadscan_core::internals::{encode, RootRecord, Snapshot, FORMAT_VERSION};
use loadscan_core::internals::{DirRecord, DirStamp, FileEntry, Listing, RootState};
use loadscan_core::unseeded_hash;
use loadscan_core::Kind;
use std::path::{Path, PathBuf};

const ENV: &[u8] = b"loadscan 0.0.0|ruby-rev|x86_64-linux|so";

#[test]
fn the_hash_is_pinned() {
    // Literal values: the feature and prefix tables are laid out by them.
    let pinned: [(&[u8], u64); 5] = [
        (b"", 0x0000_0000_0000_0000),
        (b"json", 0xaadd_e633_2614_fe05),
        (b"rails/all", 0x32d2_0ef0_f28d_ae3f),
        (b"active_support/core_ext/object/blank", 0x8067_5b32_3a5b_1d6a),
        (b"a\0", 0xc83e_dfc8_9c53_b0d9),
    ];
    for (key, want) in pinned {
        let got = unseeded_hash(key);
        assert_eq!(
            got,
            want,
            "unseeded_hash({:?}) is {got:#018x}, was {want:#018x}: the cache format changed, bump FORMAT_VERSION",
            String::from_utf8_lossy(key)
        );
    }
}

fn stamp(n: u64) -> DirStamp {
    DirStamp { dev: 0x801, ino: 1000 + n, mtime_ns: 1_700_000_000_000_000_000 + n as i64, size: 4096 }
}

fn dir(rel: &str, n: u64) -> DirRecord {
    DirRecord { rel: rel.as_bytes().to_vec(), stamp: stamp(n), digest: 0xdead_beef_0000 + n }
}

fn file(stem: &str, kind: Kind) -> FileEntry {
    FileEntry { stem: stem.as_bytes().to_vec(), kind }
}

/// Every kind of record: volatile and stable roots, missing and not-a-directory roots, files of
/// both kinds (one stem in several roots, so a posting list), directories, blind spots and
/// deferred directories.
fn records() -> Vec<RootRecord> {
    let mut app = Listing::empty(PathBuf::from("/srv/app/lib"), RootState::Dir);
    app.files = vec![file("app", Kind::Rb), file("app/models/user", Kind::Rb), file("json", Kind::Rb)];
    app.dirs = vec![dir("", 0), dir("app", 1), dir("app/models", 2)];
    app.blind = vec![b"locked".to_vec()];
    app.deferred = vec![b"app/views".to_vec()];
    let mut gem = Listing::empty(PathBuf::from("/usr/lib/ruby/gems/3.1.0/gems/json-2.6/lib"), RootState::Dir);
    gem.files = vec![file("json", Kind::Rb), file("json/ext/parser", Kind::Ext), file("json/version", Kind::Rb)];
    gem.dirs = vec![dir("", 3)];
    gem.deferred = vec![b"json/add".to_vec()];
    let mut std = Listing::empty(PathBuf::from("/usr/lib/ruby/3.1.0"), RootState::Dir);
    std.files = vec![file("json", Kind::Rb), file("set", Kind::Rb), file("etc", Kind::Ext)];
    std.dirs = vec![dir("", 4)];
    vec![
        RootRecord {
            listing: app,
            volatile: true,
            scanned_at_ns: 1_700_000_100_000_000_000,
            last_used_s: 1_700_000_100,
        },
        RootRecord {
            listing: gem,
            volatile: false,
            scanned_at_ns: 1_700_000_000_000_000_000,
            last_used_s: 1_700_000_000,
        },
        RootRecord {
            listing: std,
            volatile: false,
            scanned_at_ns: 1_600_000_000_000_000_000,
            last_used_s: 1_700_000_100,
        },
        RootRecord {
            listing: Listing::empty(PathBuf::from("/srv/app/missing"), RootState::Missing),
            volatile: true,
            scanned_at_ns: 1,
            last_used_s: 2,
        },
        RootRecord {
            listing: Listing::empty(PathBuf::from("/srv/app/Gemfile"), RootState::NotDir),
            volatile: true,
            scanned_at_ns: 3,
            last_used_s: 4,
        },
    ]
}

#[test]
fn encoding_is_byte_for_byte_the_golden_file() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/cache-v{FORMAT_VERSION}.bin"));
    let bytes = encode(&records(), &[b"optional/thing", b"rspec/core.so"], ENV);
    if std::env::var_os("LOADSCAN_BLESS").is_some() {
        std::fs::write(&golden, &bytes).unwrap();
    }
    let want = std::fs::read(&golden).unwrap_or_else(|e| {
        panic!(
            "{}: {e}. A new FORMAT_VERSION needs its golden file: LOADSCAN_BLESS=1 cargo test -p loadscan-core --test format_golden",
            golden.display()
        )
    });
    if bytes != want {
        let at = bytes.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(bytes.len().min(want.len()));
        panic!(
            "the cache format changed (first difference at byte {at}; {} bytes now, {} in {}): bump FORMAT_VERSION \
             in ext/loadscan-core/src/store/format.rs, then write the new golden file deliberately with \
             LOADSCAN_BLESS=1 cargo test -p loadscan-core --test format_golden",
            bytes.len(),
            want.len(),
            golden.display()
        );
    }
    // And the golden file reads back to the same records.
    let s = Snapshot::parse(want, ENV).expect("the golden file parses");
    assert_eq!(s.root_count(), 5);
    assert_eq!(s.feature_count(), 7);
    let v = s.root(1).unwrap();
    assert_eq!(v.path, b"/usr/lib/ruby/gems/3.1.0/gems/json-2.6/lib");
    assert_eq!(s.files_by_root(Some(1)).pop().unwrap(), records()[1].listing.files);
}
