//! The lookups behind `Loadscan::Native` and the decorator: they run the core's answer logic
//! on the process-wide state (`state.rs`: the lock, `$LOAD_PATH`, Ractors), with Ruby's own
//! `rb_feature_provided`. Besides: the cache file (`cache.rs`), scan problems (`problems.rs`),
//! counters (`counters.rs`).

mod cache;
mod counters;
mod problems;
mod state;

use std::ffi::CString;

use loadscan_core::{resolve, Kind};
pub use loadscan_core::{Reason, Resolved, PROBE};
use magnus::Error;
use rb_sys::VALUE;

pub use cache::{save, Cache, Saved};
pub use counters::{count_deferred, probes, stats, take_rescan};
pub use problems::{problems, unreported_problems};
pub use state::{hold_for_fork, in_main_ractor, release_after_fork, start, stop};
use state::{try_synced, with_synced};

/// What a lookup gives back to Ruby.
pub enum Answer {
    /// The absolute path of the file `require` would find.
    Path(Vec<u8>),
    /// No entry has the feature.
    Missing,
    /// loadscan does not know: Ruby's `require` must decide.
    Unknown,
}

/// The index's answer for `feature`, ignoring `$LOADED_FEATURES` (what
/// `$LOAD_PATH.resolve_feature_path` computes); what Ruby raised meanwhile as an `Err`.
pub fn try_lookup(feature: &[u8]) -> Result<Answer, Error> {
    Ok(match try_synced(|s| s.find(feature))? {
        Some(Ok((_, Some((path, _))))) => Answer::Path(path),
        Some(Ok((_, None)) | Err(Reason::Missing)) => Answer::Missing,
        _ => Answer::Unknown,
    })
}

/// Ruby's `rb_feature_provided`: `Some(true)` when provided and not being loaded right now,
/// `Some(false)` when not provided, `None` when it is being loaded; `Err` what Ruby raised (it
/// expands `$LOAD_PATH` itself, running entries' `to_path`).
fn provided(feature: &[u8]) -> Result<Option<bool>, Error> {
    let Some(answer) = with_cstr(feature, |c| {
        magnus::rb_sys::protect(|| unsafe {
            let mut loading: *const std::os::raw::c_char = std::ptr::null();
            let p = rb_sys::rb_feature_provided(c, &mut loading) != 0;
            match (p, loading.is_null()) {
                (false, _) => rb_sys::Qfalse as VALUE,
                (true, true) => rb_sys::Qtrue as VALUE,
                (true, false) => rb_sys::Qnil as VALUE,
            }
        })
    }) else {
        return Ok(None);
    };
    Ok(match answer? {
        v if v == rb_sys::Qtrue as VALUE => Some(true),
        v if v == rb_sys::Qfalse as VALUE => Some(false),
        _ => None,
    })
}

/// Calls `f` with `bytes` as a NUL-terminated C string (on the stack when short).
fn with_cstr<R>(bytes: &[u8], f: impl FnOnce(*const std::os::raw::c_char) -> R) -> Option<R> {
    if bytes.contains(&0) {
        return None;
    }
    let mut stack = [0u8; 512];
    if bytes.len() < stack.len() {
        stack[..bytes.len()].copy_from_slice(bytes);
        return Some(f(stack.as_ptr().cast()));
    }
    let owned = CString::new(bytes).ok()?;
    Some(f(owned.as_ptr()))
}

/// What `require(feature)` should do ([`resolve`]). What Ruby raised meanwhile (an
/// entry's `to_path`, an interrupt) comes back as an `Err` for the caller to raise once its own
/// frames are done.
pub fn try_resolve(feature: &[u8]) -> Result<Resolved, Error> {
    let find = || Ok(try_synced(|s| s.find(feature))?.unwrap_or(Err(Reason::Unavailable)));
    let answer = resolve(feature, find, provided)?;
    counters::count(&answer);
    Ok(answer)
}

/// A file and its kind, `None` for a sure miss, or `Err(())`: Ruby's own search must answer.
pub type FeaturePath = Result<Option<(Kind, Vec<u8>)>, ()>;

/// The index's answer to `$LOAD_PATH.resolve_feature_path(feature)` (which ignores
/// `$LOADED_FEATURES`): the file and its kind, `Ok(None)` for a miss the index is sure of (see
/// `Index::confirm_missing`), or `Err(())` when Ruby's own search must answer; what Ruby raised
/// meanwhile as the outer `Err`.
pub fn try_feature_path(feature: &[u8]) -> Result<FeaturePath, Error> {
    Ok(match try_synced(|s| s.find(feature))? {
        Some(Ok((_, found))) => Ok(found.map(|(path, kind)| (kind, path))),
        _ => Err(()),
    })
}

/// Syncs now (scanning new entries); returns how many roots are known. What it scanned is the
/// caller's to report (setup reports it as `:cache_load`), not a rescan.
pub fn sync() -> Option<usize> {
    with_synced(|s| {
        s.rescanned = None;
        s.index.root_count()
    })
}

/// What the index holds about `feature` (`loadscan explain`); `None` when it is not a feature
/// the index answers (a path, or loadscan stopped or busy).
pub fn explain(feature: &[u8]) -> Option<loadscan_core::Explanation> {
    with_synced(|s| s.index.parse(feature).map(|q| s.index.explain(&q))).flatten()
}

/// Every stem the index holds for the current load path (`loadscan verify`).
pub fn stems() -> Vec<Vec<u8>> {
    with_synced(|s| s.index.stems()).unwrap_or_default()
}
