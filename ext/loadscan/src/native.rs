//! `Loadscan::Native`'s functions: each converts its arguments, asks the state (`state.rs`)
//! under the lock policy there, and converts the result (`convert.rs`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby, Value};

use loadscan_core::{CacheFile, Counters, Saved, Session, Started};

use crate::convert::{self, bytes, feature_bytes};
use crate::hooks::{self, report_pending};
use crate::load_path::LoadPath;
use crate::nogvl::{raise_pending, NoGvl};
use crate::options;
use crate::state::{self, try_state, try_synced, with_synced, Followed, COUNTERS};

/// `start(load_path, **options)` (see `options::parse` for the keys): a session's start, in one
/// call: opens the cache dir, reads the cache and the last boot's record, syncs with
/// `load_path` and puts the session in place of any earlier one. Returns `[warning, last_boot,
/// stats]`: why an existing cache could not be used (for one warning) or nil, the last boot's
/// record (a String) or nil, and the figures as `stats` gives them. What an entry's `to_path`
/// raised is raised, with nothing changed.
pub fn start(ruby: &Ruby, load_path: RArray, opts: RHash) -> Result<(Option<String>, Option<RString>, RHash), Error> {
    let start = options::parse(ruby, opts)?;
    let mut load_path = LoadPath::new(magnus::rb_sys::AsRawValue::as_raw(load_path));
    let started = Session::start(start.settings, &mut load_path, &NoGvl);
    raise_pending()?;
    let Started { session, warning, last_boot } = started?;
    let stats = convert::stats(ruby, &session.stats(&Counters::new()))?;
    state::replace(Some(Followed { session, load_path }))?;
    // Only once the new session is in place (an interrupted start changes nothing); no other
    // Ruby thread runs in between, since the GVL is held from here on.
    hooks::set(ruby, start.hooks)?;
    // What the first sync worked around is warned now, from setup, as any sync's is.
    report_pending(ruby)?;
    Ok((warning, last_boot.map(|text| ruby.str_new(&text)), stats))
}

/// `finish(fields)`: a session's end (at exit), in one call: saves the cache and records this
/// boot beside it (`fields`, a Hash of Strings, Integers, booleans and nil, Arrays and Hashes of
/// them, first), under the core's one rule (`Session::writes`: never read-only, cleared or a
/// refused dir). `[saved, unrecorded, stats]`: what `save` returns, why the record could not be
/// written (a String) or nil, and the figures as `stats` gives them; nil when stopped or busy.
pub fn finish(ruby: &Ruby, fields: RHash) -> Result<Option<(Value, Option<String>, RHash)>, Error> {
    let extra = convert::json_fields(ruby, fields)?;
    let finished = try_state(|f| (f.session.finish(&COUNTERS, &extra, &NoGvl), f.session.stats(&COUNTERS)));
    raise_pending()?;
    let Some((finished, stats)) = finished else { return Ok(None) };
    Ok(Some((convert::saved(ruby, finished.saved), finished.unrecorded, convert::stats(ruby, &stats)?)))
}

/// `set_readonly(flag)`: the session reads its cache but writes neither it nor its record from
/// now on (or does again): a later setup's `readonly:`.
pub fn set_readonly(flag: bool) -> Result<(), Error> {
    state::wait_state(|f| f.session.set_readonly(flag)).map(drop)
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

/// `clear_cache(dir)`: deletes the cache and the last boot's figures in `dir` (which must pass
/// the cache dir's checks for this user): the paths removed, or why nothing was (a String).
/// The session's own cache dir: the session writes neither again (`Session::clear`).
pub fn clear_cache(ruby: &Ruby, dir: RString) -> Result<Value, Error> {
    let dir = path(dir);
    let own = state::wait_state(|f| (f.session.cache_dir() == Some(dir.as_path())).then(|| f.session.clear()))?;
    let cleared = own.flatten().unwrap_or_else(|| CacheFile::clear_in(&dir, CacheFile::trusted_uid()));
    Ok(match cleared {
        Ok(removed) => {
            convert::strings(ruby, removed.iter().map(|p| p.as_os_str().as_bytes().to_vec()).collect()).as_value()
        }
        Err(why) => ruby.str_new(&why).as_value(),
    })
}

/// `copy_xattrs(from, to)`: `to` gets exactly `from`'s extended attributes (its ACL among them);
/// nil, or why not (one line).
pub fn copy_xattrs(from: RString, to: RString) -> Option<String> {
    loadscan_core::copy_xattrs(&path(from), &path(to)).err()
}

/// `read_last_boot(dir)`: the last boot's record in `dir`, read as the cache is (the cache
/// dir's checks for this user, then the file's): `[text, nil]` (UTF-8), `[nil, nil]` when none
/// was recorded, or `[nil, why]` (one line for a warning).
pub fn read_last_boot(ruby: &Ruby, dir: RString) -> (Option<RString>, Option<String>) {
    match CacheFile::read_last_boot_in(&path(dir), CacheFile::trusted_uid()) {
        Ok(record) => (record.map(|text| ruby.str_new(&text)), None),
        Err(why) => (None, Some(why)),
    }
}

/// A directory Ruby names.
fn path(dir: RString) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&bytes(dir)))
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

/// `unseeded_hash(string)`: 16 hex digits, the same in every process and on every machine (names
/// the per-program cache directory of a script outside any app).
pub fn unseeded_hash(s: RString) -> String {
    format!("{:016x}", loadscan_core::unseeded_hash(&bytes(s)))
}

/// `hold_for_fork`, `release_after_fork`: the state lock around a `fork` (`state.rs`).
pub fn hold_for_fork() -> bool {
    state::hold_for_fork()
}

pub fn release_after_fork() {
    state::release_after_fork()
}
