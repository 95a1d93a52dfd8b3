//! The callables `Native.start` is given, and when they are called: `on_problems` with new scan
//! problems, `on_rescan` with what a `$LOAD_PATH` change had listed, `on_defer` with each
//! `require` left to Ruby's own. Each is called with no lock of ours held, during the `require`
//! that found something to tell. Whatever comes out of one — an exception, a `throw`, a
//! `Thread#kill`, an interrupt that arrived while it ran (`Timeout`, `Thread#raise`, a signal's
//! `SignalException`) — comes back as an `Err` that the caller returns, so it is raised from the
//! `require` once the Rust frames are done, as the program would see it without loadscan. The
//! callables themselves keep a failure of their own work from failing the require
//! (`Loadscan::Warnings.guarded`: a subscriber's bug is one warning).

use magnus::value::{Lazy, LazyId};
use magnus::{prelude::*, Error, Ruby, Value};

use loadscan_core::Reason;

use crate::convert;
use crate::state::{in_main_ractor, take_pending, HOOKS, PENDING_PROBLEMS, PENDING_RESCAN};

/// The callables given to `start` (nil for none).
pub struct Hooks {
    /// Called with `[[kind, message], …]` when scans work around something new.
    pub on_problems: Value,
    /// Called with `(feature, reason)` for each `require` left to Ruby's own.
    pub on_defer: Value,
    /// Called with `(roots_scanned, roots_refreshed, ms)` after syncs that scanned.
    pub on_rescan: Value,
}

/// Where each hook is kept in [`HOOKS`] (`state.rs`).
#[derive(Clone, Copy)]
enum Hook {
    Problems = 0,
    Defer = 1,
    Rescan = 2,
}

static CALL: LazyId = LazyId::new("call");

/// Makes the statics (from `init`, so that no later use can fail).
pub fn init(ruby: &Ruby) {
    LazyId::force(&CALL, ruby);
    Lazy::force(&HOOKS, ruby);
}

/// Keeps the hooks of a new `start`.
pub fn set(ruby: &Ruby, hooks: Hooks) -> Result<(), Error> {
    let array = ruby.get_inner(&HOOKS);
    array.store(Hook::Problems as isize, hooks.on_problems)?;
    array.store(Hook::Defer as isize, hooks.on_defer)?;
    array.store(Hook::Rescan as isize, hooks.on_rescan)
}

/// Calls `hook` with `args`, if it is set; `Err` is what came out of it (see the module doc).
fn call(ruby: &Ruby, hook: Hook, args: impl magnus::ArgList) -> Result<(), Error> {
    let callable = ruby.get_inner(&HOOKS).entry::<Value>(hook as isize)?;
    if callable.is_nil() {
        return Ok(());
    }
    callable.funcall::<_, _, Value>(LazyId::get_inner_with(&CALL, ruby), args).map(drop)
}

/// Hands what syncs and scans found since the last report to the hooks: rescans to
/// `on_rescan`, problems to `on_problems`. Two atomic loads when there is nothing to report.
/// `Err`: what came out of a hook (problems not handed out yet stay pending for the next call).
pub fn report_pending(ruby: &Ruby) -> Result<(), Error> {
    if let Some(Some(r)) = take_pending(&PENDING_RESCAN, |s| s.take_rescan()) {
        call(ruby, Hook::Rescan, (r.scanned, r.refreshed, r.took.as_secs_f64() * 1000.0))?;
    }
    if let Some(new) = take_pending(&PENDING_PROBLEMS, |s| s.take_unreported()).filter(|new| !new.is_empty()) {
        call(ruby, Hook::Problems, (convert::problems(ruby, &new),))?;
    }
    Ok(())
}

/// Tells `on_defer` that `feature` goes to Ruby's own `require`, and why (a
/// `Loadscan.stats[:left_to_ruby]` key). Only in the Ractor that started loadscan. `Err`: what
/// came out of the hook.
pub fn report_deferral(ruby: &Ruby, feature: Value, reason: Reason) -> Result<(), Error> {
    if !in_main_ractor() {
        return Ok(());
    }
    call(ruby, Hook::Defer, (feature, ruby.to_symbol(reason.name())))
}
