//! The cache file of the process-wide state: read at `start`, written by `save`.

use std::path::PathBuf;

use loadscan_core::{bound_dead_roots, encode, CacheDir, Index, LoadErrorKind};

use super::state::STATE;
use crate::nogvl::without_gvl;

/// Where the cache lives and what it must match.
pub struct Cache {
    /// The cache directory; the file is `dir/loadscan.cache` (see `store::CacheDir` for the
    /// checks it must pass).
    pub dir: PathBuf,
    /// Loadscan version, Ruby revision, platform, DLEXT: a file with another key is ignored.
    pub env: Vec<u8>,
    /// The uid that must own the file.
    pub uid: u32,
}

/// A name of loadscan's own, never one another tool may use (the name used before, `index`,
/// became a victim's `.git/index` through a planted symlink). Old `index` files are left alone.
const CACHE_FILE: &str = "loadscan.cache";
/// Roots off the load path this long are dropped from the cache when it is written.
const PRUNE_AFTER_S: i64 = 30 * 24 * 3600;

/// Opens the cache dir and reads the cache: the index to start from, why an existing cache was
/// not used (for a warning), and whether to write the cache at exit (not when the directory is
/// refused or unusable, nor over a file that is not a loadscan cache: the warning given here is
/// the only one).
pub(super) fn load_cache(c: &Cache, dlext: &[u8]) -> (Index, Option<String>, bool) {
    let dir = match CacheDir::open(&c.dir, c.uid) {
        Ok(Some(dir)) => dir,
        // Created when the cache is first written.
        Ok(None) => return (Index::new(dlext), None, true),
        Err(e) => {
            let why = format!("not using the cache dir {e}; booting without a cache");
            return (Index::new(dlext), Some(why), false);
        }
    };
    match dir.load(CACHE_FILE, &c.env) {
        Ok(snapshot) => (Index::from_snapshot(dlext, snapshot), None, true),
        // No cache yet, or one from another loadscan or Ruby (an upgrade): nothing is
        // wrong, the boot lists what it needs and the file is rewritten at exit.
        Err(e) if matches!(e.kind(), LoadErrorKind::Missing | LoadErrorKind::Stale(_)) => {
            (Index::new(dlext), None, true)
        }
        Err(e) => match dir.replaceable(CACHE_FILE) {
            Ok(true) => (Index::new(dlext), Some(format!("{e}; scanning instead")), true),
            _ => (Index::new(dlext), Some(format!("{e}; scanning instead, not replacing it")), false),
        },
    }
}

/// What `save` did.
pub enum Saved {
    /// Nothing changed since the cache was read.
    Clean,
    /// Written.
    Written,
    /// No cache configured, or loadscan is stopped or busy.
    Skipped,
    /// The write failed (the reason, for a warning).
    Failed(String),
}

/// Writes the cache if anything changed.
pub fn save() -> Saved {
    let mut guard = match STATE.try_lock() {
        Ok(g) => g,
        Err(_) => return Saved::Skipped,
    };
    let Some(state) = guard.as_mut() else { return Saved::Skipped };
    let Some(cache) = &state.cache else { return Saved::Skipped };
    if !state.index.is_dirty() {
        return Saved::Clean;
    }
    let (index, on_path) = (&state.index, state.load_path.entries());
    let result = without_gvl(|| {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let mut records = index.records(now, now - PRUNE_AFTER_S);
        bound_dead_roots(&mut records, on_path);
        let bytes = encode(&records, &cache.env);
        let dir = CacheDir::create(&cache.dir, cache.uid).map_err(|e| e.kind().to_string())?;
        dir.write_atomic(CACHE_FILE, &bytes).map_err(|e| e.to_string())
    });
    match result {
        Ok(_) => {
            state.index.mark_clean();
            Saved::Written
        }
        Err(e) => Saved::Failed(format!("could not write the cache in {}: {e}", cache.dir.display())),
    }
}
