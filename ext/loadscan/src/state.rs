//! Every piece of process-wide state of the binding, and the one lock policy.
//!
//! The [`Session`] (with the `$LOAD_PATH` array it follows) sits in a `Mutex`; the require
//! counters, the recently answered paths and the "something to report" flags are atomics
//! beside it, read on every `require` without the lock; the callables given to `start` are a
//! GC-marked array; the `$LOAD_PATH` arrays followed and the hidden snapshot compared with
//! them are registered with the GC once per process. (Interned symbols live where they are
//! used; `nogvl.rs` keeps its per-thread "interrupt check owed" flag; `ticker.rs` and
//! `ticker/deferral.rs` keep the GC deferral's own: its native ticker's and the deferral's state,
//! behind locks of their own.)
//!
//! Locking: a thread never waits for the lock while it holds the GVL. Starting and stopping
//! wait for it with the GVL released between tries; every other use *tries* it, and a busy
//! lock (another thread is scanning or listing with the GVL released) means:
//! - a lookup gets no answer: Ruby's own `require` runs instead ([`try_synced`]);
//! - a question (`save`, `stats`, `problems`) gets none ([`try_state`]);
//! - a report of pending problems or rescans is left for the next call: its flag is set again
//!   ([`take_pending`], the core's `Pending`), so nothing found is ever lost.
//!
//! No lock of ours is held while Ruby code runs, and no Ruby exception unwinds through a frame
//! that holds it: Ruby code run under it (an entry's `to_path`) runs under `rb_protect`, and
//! what it raised, threw or was interrupted with comes back as an `Err`; GVL-free work never
//! raises (see `nogvl`). Either is raised once the lock is released.
//!
//! Fork: a child has only the thread that forked, so a lock another thread held at the fork
//! would stay held in the child for good. `Process._fork` (lib/loadscan/core_ext/process.rb)
//! takes the lock first ([`hold_for_fork`]) and lets it go in parent and child alike
//! ([`release_after_fork`]): the child inherits a state no thread was changing, unlocked.
//!
//! Ractors: only the Ractor that started loadscan is served; others go to Ruby's own `require`.

use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::Duration;

use loadscan_core::{Counters, Pending, RecentPaths, Session};
use magnus::value::Lazy;
use magnus::{prelude::*, Error, RArray};
use rb_sys::VALUE;

use crate::load_path::{LoadPath, SyncError};
use crate::nogvl::{leave_pending, raise_pending, without_gvl, NoGvl};

/// A session and the `$LOAD_PATH` it follows (read by [`Session::sync`]).
pub struct Followed {
    pub session: Session,
    pub load_path: LoadPath,
}

type Guard = MutexGuard<'static, Option<Followed>>;

static STATE: Mutex<Option<Followed>> = Mutex::new(None);
/// What `require` was told (`Loadscan.stats`), counted without the lock.
pub static COUNTERS: Counters = Counters::new();
/// The paths `require` was recently answered with (which question goes first).
pub static RECENT: RecentPaths = RecentPaths::new();
/// Raised while the session holds problems not handed out for a warning yet.
pub static PENDING_PROBLEMS: Pending = Pending::new();
/// Raised while the session holds a rescan not reported yet.
pub static PENDING_RESCAN: Pending = Pending::new();
/// The callables given to `start` (`hooks.rs`), kept alive by the GC mark `Lazy` gives them.
pub static HOOKS: Lazy<RArray> = Lazy::new(|ruby| ruby.ary_new_from_values(&[ruby.qnil().as_value(); 3]));
/// The arrays followed as `$LOAD_PATH` (their addresses), each registered with the GC once
/// per process (`load_path.rs`).
pub static PINNED_LOAD_PATHS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// The one hidden snapshot array every session's `$LOAD_PATH` mirror compares with (its
/// address; registered with the GC once, `load_path.rs`).
pub static LOAD_PATH_SNAPSHOT: OnceLock<usize> = OnceLock::new();
/// The key of a Ractor-local value set in the Ractor that started loadscan.
static MAIN_RACTOR_KEY: OnceLock<usize> = OnceLock::new();

thread_local! {
    /// The state lock while this thread forks (between [`hold_for_fork`] and
    /// [`release_after_fork`]).
    static HELD_FOR_FORK: RefCell<Option<Guard>> = const { RefCell::new(None) };
}

/// The lock if it is free now (`None`: busy). A lock poisoned by a panic is taken as it is
/// (the state is consistent between calls: a panic only ever cuts a GVL-free scan short).
fn try_lock() -> Option<Guard> {
    match STATE.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The lock, waited for with the GVL released between tries: the thread that holds it may be
/// finishing GVL-free work and need the GVL back before it lets go, so waiting with the GVL
/// held would deadlock. Ruby's interrupt check runs after each try (when an interrupt is
/// pending Ruby keeps the GVL, so only handling it lets the wait go on): what it raises
/// (`Thread#raise`, `Interrupt`) comes back as the `Err`, with nothing of loadscan's held.
fn wait_lock() -> Result<Guard, Error> {
    loop {
        if let Some(guard) = try_lock() {
            return Ok(guard);
        }
        without_gvl(|| std::thread::sleep(WAIT_STEP));
        raise_pending()?;
    }
}

/// How long a waiting `start` or `stop` sleeps, GVL released, before trying the lock again.
const WAIT_STEP: Duration = Duration::from_micros(200);

/// Raises the flags of what `session` has to report, while the lock is still held.
fn note_pending(session: &Session) {
    if session.has_unreported() {
        PENDING_PROBLEMS.raise();
    }
    if session.has_rescan() {
        PENDING_RESCAN.raise();
    }
}

/// Replaces the state (`start`: a new session; `stop`: none), waiting for the lock; `Err` is
/// an interrupt that arrived while waiting (then nothing changed).
pub fn replace(followed: Option<Followed>) -> Result<(), Error> {
    let mut guard = wait_lock()?;
    if followed.is_some() {
        mark_main_ractor();
        COUNTERS.reset();
    }
    *guard = followed;
    if let Some(f) = guard.as_ref() {
        note_pending(&f.session);
    }
    Ok(())
}

/// Runs `f` on the state as it is, if loadscan is started, waiting for the lock (as `replace`
/// does): what must not be lost to a busy lock (`clear_cache`, `set_readonly`).
pub fn wait_state<T>(f: impl FnOnce(&mut Followed) -> T) -> Result<Option<T>, Error> {
    let mut guard = wait_lock()?;
    Ok(guard.as_mut().map(f))
}

/// Runs `f` on the state as it is, if loadscan is started and the lock is free.
pub fn try_state<T>(f: impl FnOnce(&mut Followed) -> T) -> Option<T> {
    let mut guard = try_lock()?;
    let followed = guard.as_mut()?;
    let result = f(followed);
    note_pending(&followed.session);
    Some(result)
}

/// Runs `f` on the session after syncing it with `$LOAD_PATH`: `Ok(None)` if stopped, busy,
/// opaque or called from a Ractor other than the main one; `Err` for what Ruby raised meanwhile
/// (an entry's `to_path`, an interrupt during GVL-free work), returned after the lock is released.
pub fn try_synced<T>(f: impl FnOnce(&mut Session) -> T) -> Result<Option<T>, Error> {
    let result = synced(f);
    raise_pending()?;
    result
}

/// [`try_synced`] for the lookups inside Ruby's `require` and `resolve_feature_path` (the
/// decorator's): an interrupt that arrived during GVL-free work is left pending for Ruby's own
/// next check ([`leave_pending`]), not raised here.
pub fn try_synced_in_require<T>(f: impl FnOnce(&mut Session) -> T) -> Result<Option<T>, Error> {
    let result = synced(f);
    leave_pending();
    result
}

fn synced<T>(f: impl FnOnce(&mut Session) -> T) -> Result<Option<T>, Error> {
    if !in_main_ractor() {
        return Ok(None);
    }
    let result = try_state(|Followed { session, load_path }| match session.sync(load_path, &NoGvl) {
        Ok(()) => Ok(Some(f(session))),
        Err(SyncError::Opaque) => Ok(None),
        Err(SyncError::Raised(e)) => Err(e),
    });
    result.unwrap_or(Ok(None))
}

/// [`try_synced`] for the entry points that return no `Result` (`sync`, `explain`, `stems`):
/// the error is raised here, once the lock is released; it unwinds only through the caller's
/// frames, which hold none of loadscan's state.
pub fn with_synced<T>(f: impl FnOnce(&mut Session) -> T) -> Option<T> {
    try_synced(f).unwrap_or_else(|e| unsafe { magnus::rb_sys::resume_error(e) })
}

/// What `take` takes from the session when `flag` says there is something (a problem to warn
/// about, a rescan to report), only in the main Ractor (the callables are its objects). Two
/// atomic loads when there is nothing. A busy lock leaves it for the next call ([`Pending`]).
pub fn take_pending<T>(flag: &Pending, take: impl FnOnce(&mut Session) -> T) -> Option<T> {
    // The flag first: this runs on every require, and the Ractor check is a table lookup.
    if !flag.is_raised() || !in_main_ractor() {
        return None;
    }
    flag.take(try_lock, |mut guard| {
        let followed = guard.as_mut()?;
        let taken = take(&mut followed.session);
        note_pending(&followed.session);
        Some(taken)
    })
}

/// Takes the state lock for a `fork` about to happen on this thread: `true` when this thread
/// holds it now, `false` when another one does (the caller waits, GVL released, and asks again:
/// never a wait here).
pub fn hold_for_fork() -> bool {
    HELD_FOR_FORK.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() {
            *held = try_lock();
        }
        held.is_some()
    })
}

/// Lets go of the lock [`hold_for_fork`] took, once the fork is done (in the parent and in the
/// child, where the same thread goes on).
pub fn release_after_fork() {
    HELD_FOR_FORK.with(|held| drop(held.borrow_mut().take()));
}

fn mark_main_ractor() {
    let key = *MAIN_RACTOR_KEY.get_or_init(|| unsafe { rb_sys::rb_ractor_local_storage_value_newkey() } as usize);
    unsafe { rb_sys::rb_ractor_local_storage_value_set(key as _, rb_sys::Qtrue as VALUE) };
}

/// Whether the running Ractor is the one that started loadscan. Others are left to Ruby: the
/// state is not theirs, and Ruby's own `require` decides what they may load.
pub fn in_main_ractor() -> bool {
    let Some(&key) = MAIN_RACTOR_KEY.get() else { return true };
    let mut v: VALUE = rb_sys::Qnil as VALUE;
    unsafe { rb_sys::rb_ractor_local_storage_value_lookup(key as _, &mut v) && v == rb_sys::Qtrue as VALUE }
}
