//! The boot profile's GC clock: the wall time Ruby spends in GC while a profile records, from
//! Ruby's internal events on GC's entry and exit (two TracePoints, made when the first profile
//! starts and enabled only while one records). `GC.total_time` is the process's CPU time in GC:
//! subtracted from an entry's wall time, a loaded machine's pauses during GC (and other threads'
//! CPU then) landed in the entry's own time. The hooks read the monotonic clock and touch
//! atomics only: nothing of Ruby's runs inside GC.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use magnus::Ruby;
use rb_sys::VALUE;

use crate::sys::{clock_ns, CLOCK_MONOTONIC};

const QNIL: VALUE = rb_sys::Qnil as VALUE;
type Hook = unsafe extern "C" fn(VALUE, *mut c_void);

static RUNNING: AtomicBool = AtomicBool::new(false);
/// GC's time so far (ns): the base given to `start`, then each GC's wall time once it exits.
static TOTAL: AtomicI64 = AtomicI64::new(0);
/// When the GC under way entered (0: none).
static ENTERED: AtomicI64 = AtomicI64::new(0);
// The two TracePoints (registered with the GC once; touched only with the GVL).
static mut ENTER: VALUE = QNIL;
static mut EXIT: VALUE = QNIL;

unsafe extern "C" fn entered(_tp: VALUE, _: *mut c_void) {
    ENTERED.store(clock_ns(CLOCK_MONOTONIC), Ordering::Relaxed);
}

unsafe extern "C" fn exited(_tp: VALUE, _: *mut c_void) {
    let since = ENTERED.swap(0, Ordering::Relaxed);
    if since != 0 {
        TOTAL.fetch_add((clock_ns(CLOCK_MONOTONIC) - since).max(0), Ordering::Relaxed);
    }
}

/// Starts the clock at `base_ns` (the GC time before it, as `GC.total_time` has it). True when
/// it runs; false where Ruby made no TracePoint.
pub fn start(_ruby: &Ruby, base_ns: i64) -> bool {
    unsafe {
        if ENTER == QNIL {
            let new = |event: u32, hook: Hook| {
                rb_sys::rb_tracepoint_new(QNIL, event as rb_sys::rb_event_flag_t, Some(hook), std::ptr::null_mut())
            };
            let enter = new(rb_sys::RUBY_INTERNAL_EVENT_GC_ENTER, entered);
            let exit = new(rb_sys::RUBY_INTERNAL_EVENT_GC_EXIT, exited);
            if enter == QNIL || exit == QNIL {
                return false;
            }
            ENTER = enter;
            EXIT = exit;
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(ENTER));
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(EXIT));
        }
        TOTAL.store(base_ns, Ordering::Relaxed);
        ENTERED.store(0, Ordering::Relaxed);
        if !RUNNING.swap(true, Ordering::AcqRel) {
            rb_sys::rb_tracepoint_enable(ENTER);
            rb_sys::rb_tracepoint_enable(EXIT);
        }
    }
    true
}

/// Whether the clock runs (a profile records with it).
pub fn running() -> bool {
    RUNNING.load(Ordering::Acquire)
}

/// GC's time so far, in nanoseconds (outside GC: Ruby's code never runs inside it).
pub fn now() -> i64 {
    TOTAL.load(Ordering::Relaxed)
}

/// Stops the clock (its figure stays where it ended); idempotent.
pub fn stop() {
    if RUNNING.swap(false, Ordering::AcqRel) {
        unsafe {
            rb_sys::rb_tracepoint_disable(ENTER);
            rb_sys::rb_tracepoint_disable(EXIT);
        }
    }
}
