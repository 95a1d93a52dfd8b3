//! `Loadscan::Native`'s functions: each converts its arguments, asks the state (`state.rs`)
//! under the lock policy there, and converts the result (`convert.rs`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby, Value};

use loadscan_core::{CacheFile, Saved, Session};

use crate::convert::{self, bytes, feature_bytes};
use crate::hooks::{self, report_pending};
use crate::load_path::LoadPath;
use crate::nogvl::{raise_pending, NoGvl};
use crate::options;
use crate::state::{self, try_state, try_synced, with_synced, Followed, COUNTERS};

/// `start(load_path, **options)` (see `options::parse` for the keys): starts following
/// `load_path` with an optional cache (dropping any earlier session). Returns nil, or why an
/// existing cache could not be used (for one warning).
pub fn start(ruby: &Ruby, load_path: RArray, opts: RHash) -> Result<Option<String>, Error> {
    let start = options::parse(ruby, opts)?;
    let (session, warning) = Session::start(start.settings, &NoGvl);
    let load_path = LoadPath::new(magnus::rb_sys::AsRawValue::as_raw(load_path));
    raise_pending()?;
    state::replace(Some(Followed { session, load_path }))?;
    // Only once the new session is in place (an interrupted start changes nothing); no other
    // Ruby thread runs in between, since the GVL is held from here on.
    hooks::set(ruby, start.hooks)?;
    Ok(warning)
}

/// `stop`: every later require goes to Ruby's own.
pub fn stop() -> Result<(), Error> {
    state::replace(None)
}

/// `save`: `:written`, `:clean` (nothing changed), `:skipped` (no cache, or busy), or the
/// reason the write failed (a String).
pub fn save(ruby: &Ruby) -> Value {
    let saved = try_state(|f| f.session.save(&NoGvl)).unwrap_or(Saved::Skipped);
    convert::saved(ruby, saved)
}

/// `relist_racy`: lists the racy directories of what this process listed again, once their
/// window has passed (`loadscan build`, before it saves): nil when done (or nothing was racy, or
/// busy), else the seconds to wait first (a Float).
pub fn relist_racy() -> Result<Option<f64>, Error> {
    let wait = try_state(|f| f.session.relist_racy(&NoGvl)).flatten();
    raise_pending()?;
    Ok(wait.map(|w| w.as_secs_f64()))
}

/// `record_last_boot(fields)`: writes this boot's figures, with `fields` (a Hash of Strings,
/// Integers and booleans) first, beside the cache. nil, or why it could not (a String).
pub fn record_last_boot(ruby: &Ruby, fields: RHash) -> Result<Option<String>, Error> {
    let extra = convert::json_fields(ruby, fields)?;
    let written = try_state(|f| f.session.record_last_boot(&COUNTERS, &extra, &NoGvl));
    raise_pending()?;
    Ok(written.and_then(Result::err))
}

/// `clear_cache(dir, uid)`: deletes the cache and the last boot's figures in `dir` (which must
/// pass the cache dir's checks for `uid`): the paths removed, or why nothing was (a String).
pub fn clear_cache(ruby: &Ruby, dir: RString, uid: u32) -> Value {
    let cache = cache_in(dir, uid);
    match cache.clear() {
        Ok(removed) => {
            convert::strings(ruby, removed.iter().map(|p| p.as_os_str().as_bytes().to_vec()).collect()).as_value()
        }
        Err(why) => ruby.str_new(&why).as_value(),
    }
}

/// `read_last_boot(dir, uid)`: the last boot's record in `dir`, read as the cache is (the cache
/// dir's checks for `uid`, then the file's): `[text, nil]` (UTF-8), `[nil, nil]` when none was recorded,
/// or `[nil, why]` (one line for a warning).
pub fn read_last_boot(ruby: &Ruby, dir: RString, uid: u32) -> (Option<RString>, Option<String>) {
    let cache = cache_in(dir, uid);
    match cache.read_last_boot() {
        Ok(record) => (record.map(|text| ruby.str_new(&text)), None),
        Err(why) => (None, Some(why)),
    }
}

/// The cache files in `dir` for `uid`, for what touches them without a session.
fn cache_in(dir: RString, uid: u32) -> CacheFile {
    CacheFile { dir: PathBuf::from(OsStr::from_bytes(&bytes(dir))), env: Vec::new(), uid }
}

/// `lookup(feature)`: the index's answer, ignoring `$LOADED_FEATURES` (what
/// `$LOAD_PATH.resolve_feature_path` computes): a path, `:missing` or `:unknown`.
pub fn lookup(ruby: &Ruby, feature: Value) -> Result<Value, Error> {
    let found = match feature_bytes(feature) {
        Some(bytes) => try_synced(|s| s.find(&bytes, &NoGvl))?,
        None => None,
    };
    report_pending(ruby)?;
    Ok(convert::lookup_answer(ruby, found, feature))
}

/// `sync`: syncs now (scanning new entries); how many roots are known. What it scanned is the
/// caller's to report (setup reports it as `:cache_load`), not a rescan.
pub fn sync(ruby: &Ruby) -> Result<Option<usize>, Error> {
    let roots = with_synced(|s| {
        s.forget_rescan();
        s.root_count()
    });
    report_pending(ruby)?;
    Ok(roots)
}

/// `problems`: everything scans worked around so far, `[[kind, message], …]`.
pub fn problems(ruby: &Ruby) -> RArray {
    let list = try_state(|f| f.session.problems().to_vec()).unwrap_or_default();
    convert::problems(ruby, &list)
}

/// `stats`: the figures (`Loadscan.stats`), or nil when stopped or busy.
pub fn stats(ruby: &Ruby) -> Result<Option<RHash>, Error> {
    try_state(|f| f.session.stats(&COUNTERS)).map(|s| convert::stats(ruby, &s)).transpose()
}

/// `probes`: how many times `PROBE` reached the decorator in this process.
pub fn probes() -> usize {
    COUNTERS.probes()
}

/// `explain(feature)`: what the index holds about `feature`, or nil.
pub fn explain(ruby: &Ruby, feature: RString) -> Result<Option<RHash>, Error> {
    let feature = bytes(feature);
    with_synced(|s| s.explain(&feature)).flatten().map(|e| convert::explanation(ruby, e)).transpose()
}

/// `stems`: every stem the index holds for the current load path.
pub fn stems(ruby: &Ruby) -> RArray {
    convert::strings(ruby, with_synced(|s| s.stems()).unwrap_or_default())
}

/// `stable_hash(string)`: 16 hex digits, the same in every process and on every machine (names
/// the per-program cache directory of a script outside any app).
pub fn stable_hash(s: RString) -> String {
    format!("{:016x}", loadscan_core::stable_hash(&bytes(s)))
}

/// `hold_for_fork`, `release_after_fork`: the state lock around a `fork` (`state.rs`).
pub fn hold_for_fork() -> bool {
    state::hold_for_fork()
}

pub fn release_after_fork() {
    state::release_after_fork()
}
