//! A writer killed (SIGKILL) in the middle of writing the cache: readers meanwhile only ever see
//! a whole file, the file left behind is a whole one, and the next write and load work. The
//! writer is this test binary run again as a child (`writer_child`), writing in a loop.

mod common;

use common::{load, TempTree};
use loadscan_core::internals::{encode, CacheDir};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ENV: &[u8] = b"test-env";
const NAME: &str = "loadscan.cache";
/// Set (to the cache dir) in the child: it writes there until killed.
const CHILD: &str = "LOADSCAN_CORE_CRASH_WRITER";

/// Two whole files, long enough that a write takes a while: a cache header (what makes the
/// file one `write_atomic` may replace) followed by one byte repeated.
fn payloads() -> [Vec<u8>; 2] {
    [b'a', b'b'].map(|fill| {
        let mut bytes = encode(&[], &[], ENV);
        bytes.resize(bytes.len() + (4 << 20), fill);
        bytes
    })
}

fn euid(dir: &Path) -> u32 {
    std::fs::metadata(dir).unwrap().uid()
}

/// The writer: does nothing in a normal test run; in the child, writes both payloads in turn
/// until it is killed.
#[test]
fn writer_child() {
    let Some(dir) = std::env::var_os(CHILD) else { return };
    let dir = Path::new(&dir);
    let cache = CacheDir::create(dir, euid(dir)).unwrap();
    for bytes in payloads().iter().cycle() {
        cache.write_atomic(NAME, bytes).unwrap();
    }
}

fn temp_files(dir: &Path) -> usize {
    let prefix = format!(".{NAME}.tmp.");
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(&prefix))
        .count()
}

#[test]
fn a_writer_killed_mid_write_leaves_a_whole_cache() {
    let t = TempTree::new("crash");
    let dir = t.path("cache");
    std::fs::create_dir(&dir).unwrap();
    let uid = euid(&dir);
    let whole = payloads();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_child", "--test-threads=1"])
        .env(CHILD, &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Read while it writes: every read is one whole file or none yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reads = 0;
    while reads < 20 && Instant::now() < deadline {
        match std::fs::read(dir.join(NAME)) {
            Ok(bytes) => {
                assert!(whole.contains(&bytes), "a reader saw a partial cache ({} bytes)", bytes.len());
                reads += 1;
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        }
    }
    assert_eq!(reads, 20, "the writer never wrote");
    // Kill it while a temp file is being written (as a crash or kill -9 would).
    while temp_files(&dir) == 0 && Instant::now() < deadline {}
    child.kill().unwrap();
    child.wait().unwrap();
    let left = std::fs::read(dir.join(NAME)).unwrap();
    assert!(whole.contains(&left), "a killed writer left a partial cache ({} bytes)", left.len());
    // The next process writes and reads a real cache over it.
    let bytes = encode(&[], &[], ENV);
    CacheDir::create(&dir, uid).unwrap().write_atomic(NAME, &bytes).unwrap();
    assert!(load(&dir.join(NAME), ENV, uid).is_ok());
}
