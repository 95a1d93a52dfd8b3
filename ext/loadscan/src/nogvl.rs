//! The one place that releases the GVL: scans and disk I/O run without it so other Ruby
//! threads keep going. The closure must not touch any Ruby object. A panic inside is caught
//! and resumed once the GVL is held again (magnus turns it into a Ruby exception).
//!
//! Interrupts (`Thread#raise`, `Thread#kill`, `Timeout`, signals) never unwind through the
//! caller: Ruby is asked not to check them around the call (`RB_NOGVL_INTR_FAIL`), the
//! unblocking function only notes that one arrived, and the caller makes the check Ruby makes
//! after every blocking region with [`raise_pending`], once it holds nothing of loadscan's (the
//! state lock in particular). Stock `rb_thread_call_without_gvl` checks them when it gets the
//! GVL back and, for an exception, jumps straight over the frames holding the lock — which then
//! stays locked for good, and loadscan silently stops for the rest of the process.
//!
//! The lookups inside `require` and `$LOAD_PATH.resolve_feature_path` make no such check
//! ([`leave_pending`]): they stand in for Ruby's own search, and a check there would be a
//! blocking point the Ruby may not have. A pending interrupt is raised by Ruby's own next check,
//! where stock Ruby raises it.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};

use magnus::Error;

struct Call<F, R> {
    f: Option<F>,
    result: Option<std::thread::Result<R>>,
    /// Set by the unblocking function (from another thread) when an interrupt arrived.
    interrupted: AtomicBool,
}

thread_local! {
    /// Whether this thread ran GVL-free work since the last [`raise_pending`]: the interrupt
    /// check Ruby makes after every blocking region is still owed.
    static PENDING: Cell<bool> = const { Cell::new(false) };
}

unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) -> *mut c_void {
    let call = &mut *(data as *mut Call<F, R>);
    if let Some(f) = call.f.take() {
        call.result = Some(catch_unwind(AssertUnwindSafe(f)));
    }
    null_mut()
}

/// The unblocking function: called by Ruby (on another thread or in a signal handler, without
/// the GVL) to interrupt the work. The work is bounded (one scan, one listing) and runs to completion; the interrupt
/// is raised right after it, see [`raise_pending`].
unsafe extern "C" fn unblock(data: *mut c_void) {
    (*(data as *const AtomicBool)).store(true, Ordering::Relaxed);
}

/// Runs `f` with the GVL released and returns its result. Never raises: when an interrupt is
/// already pending, `f` runs with the GVL held instead (Ruby would not release it), and the
/// interrupt is left for [`raise_pending`] or Ruby's next check.
pub fn without_gvl<F: FnOnce() -> R, R>(f: F) -> R {
    let mut call = Call { f: Some(f), result: None, interrupted: AtomicBool::new(false) };
    unsafe {
        let flag = &call.interrupted as *const AtomicBool as *mut c_void;
        rb_sys::rb_nogvl(
            Some(trampoline::<F, R>),
            &mut call as *mut Call<F, R> as *mut c_void,
            Some(unblock),
            flag,
            // Async-signal-safe (one atomic store): without this flag, Ruby starts a helper Ruby
            // thread for every call on a single-threaded main thread, and joining it afterwards
            // is itself an interrupt check that raises.
            (rb_sys::RB_NOGVL_INTR_FAIL | rb_sys::RB_NOGVL_UBF_ASYNC_SAFE) as i32,
        );
    }
    PENDING.with(|p| p.set(true));
    if call.result.is_none() {
        // An interrupt was pending: Ruby returned without running `f`. Run it here, so that
        // no caller ever sees half-done work; the interrupt is raised afterwards.
        if let Some(f) = call.f.take() {
            call.result = Some(catch_unwind(AssertUnwindSafe(f)));
        }
    }
    match call.result {
        Some(Ok(r)) => r,
        Some(Err(panic)) => resume_unwind(panic),
        None => unreachable!("the function was run"),
    }
}

/// The interrupt check owed after [`without_gvl`] on this thread (none if it did not run): a
/// `Thread#raise`, `Thread#kill`, `Timeout` or signal that arrived comes back as an `Err`. Call
/// it with nothing of loadscan's held.
pub fn raise_pending() -> Result<(), Error> {
    if !PENDING.with(|p| p.replace(false)) {
        return Ok(());
    }
    check_interrupts()
}

/// Drops the check owed after [`without_gvl`] on this thread, for the lookups inside Ruby's
/// `require` and `resolve_feature_path`: a pending interrupt is left to Ruby's own next check.
/// Stock Ruby's blocking points inside `require` differ by version (3.4's search reaches one
/// before the file loads, so a `Thread#raise` deferred with `handle_interrupt(… => :on_blocking)`
/// comes before it; 4.0 reaches none and raises it once the block ends, the file loaded): only
/// Ruby's own checks give each Ruby's behaviour.
pub fn leave_pending() {
    PENDING.with(|p| p.set(false));
}

/// Ruby's interrupt check (`rb_thread_check_ints`): a pending `Thread#raise`, `Thread#kill`,
/// `Timeout` or signal comes back as an `Err` to be raised by the caller.
pub fn check_interrupts() -> Result<(), Error> {
    magnus::rb_sys::protect(|| {
        unsafe { rb_sys::rb_thread_check_ints() };
        rb_sys::Qnil as rb_sys::VALUE
    })
    .map(|_| ())
}

/// The core's blocking work, run with the GVL released ([`without_gvl`]).
pub struct NoGvl;

impl loadscan_core::Blocking for NoGvl {
    fn run<R>(&self, work: impl FnOnce() -> R) -> R {
        without_gvl(work)
    }
}
