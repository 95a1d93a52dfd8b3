//! The GC deferral's clock and its tick (`Loadscan::BootGC`): a native thread, not a Ruby one (no
//! `Thread.list` entry, no part in Ruby's deadlock check, nothing for Puma's thread warning), that
//! asks Ruby every `tick_ms` to run [`deferral::job`] through a postponed job: in the main
//! Ractor's running thread, holding the GVL, at its next interrupt check. The thread touches nothing of Ruby's but
//! `rb_postponed_job_trigger`, which Ruby 3.3 and later allow from any thread; both functions are
//! looked up when started (`dlsym`), so a Ruby without them (3.1) gets `false` from `start` and no
//! deferral. A thread that cannot be made (a thread or process limit) is `false` too: the program
//! runs as it would without loadscan.
//!
//! This file holds the clock: the thread, the postponed job's handle, `start`/`stop` and the
//! generation that ends a thread, with their statics. What the job decides at a tick (the
//! deferral's limits, budget runs and end, and their statics) is in [`deferral`], what it reads of
//! the process in [`process`].

mod deferral;
mod process;

use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rb_sys::VALUE;

use crate::sys::symbol;

pub use deferral::state;

type Job = unsafe extern "C" fn(*mut c_void);
type Preregister = unsafe extern "C" fn(c_uint, Job, *mut c_void) -> c_uint;
type Trigger = unsafe extern "C" fn(c_uint);

/// What `rb_postponed_job_preregister` answers when Ruby's table of jobs is full.
const INVALID_HANDLE: c_uint = c_uint::MAX;

/// Whether a thread runs; GENERATION is bumped by `stop`: a thread started for an earlier
/// generation ends at its next tick.
static TICKER: Mutex<bool> = Mutex::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static HANDLE: AtomicU64 = AtomicU64::new(INVALID_HANDLE as u64);

/// `BootGC.start`'s limits: `[tick_ms, mark (0: none), max_seconds, budget, cap, page_size,
/// headroom]` (headroom: descriptors that must stay free, 0 where Ruby collects for them itself).
pub type Limits = (u64, u64, f64, i64, i64, i64, i64);

/// Starts the clock and the deferral's tick (with the GVL). True when it runs.
pub fn start(receiver: VALUE, loadscan: VALUE, limits: Limits) -> bool {
    let (tick_ms, mark, max_seconds, budget, cap, page_size, headroom) = limits;
    let mut ticker = TICKER.lock().unwrap_or_else(|e| e.into_inner());
    if *ticker {
        return true;
    }
    let (Some(preregister), Some(trigger)) =
        (symbol::<Preregister>(b"rb_postponed_job_preregister\0"), symbol::<Trigger>(b"rb_postponed_job_trigger\0"))
    else {
        return false;
    };
    deferral::hold(receiver, loadscan);
    if HANDLE.load(Ordering::Acquire) == INVALID_HANDLE as u64 {
        let h = unsafe { preregister(0, deferral::job, std::ptr::null_mut()) };
        if h == INVALID_HANDLE {
            return false;
        }
        HANDLE.store(h as u64, Ordering::Release);
    }
    deferral::begin(mark, max_seconds, budget, cap, page_size, headroom);
    let handle = HANDLE.load(Ordering::Acquire) as c_uint;
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    let spawned = std::thread::Builder::new().name("loadscan-gc".into()).stack_size(64 << 10).spawn(move || {
        while GENERATION.load(Ordering::Acquire) == generation {
            std::thread::sleep(Duration::from_millis(tick_ms));
            if GENERATION.load(Ordering::Acquire) != generation {
                break;
            }
            // Every tick, even when the last one has not run yet: Ruby asks the thread running in
            // the main Ractor now, and one that went to sleep first takes the request with it.
            unsafe { trigger(handle) };
        }
    });
    if spawned.is_err() {
        deferral::clear();
        return false;
    }
    *ticker = true;
    true
}

fn stop_clock() {
    deferral::clear();
    let mut ticker = TICKER.lock().unwrap_or_else(|e| e.into_inner());
    if std::mem::take(&mut *ticker) {
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// Stops the clock and the tick: the thread ends at its next tick, unwaited (a job it triggered
/// meanwhile finds the deferral over and does nothing). In a forked child there is no thread.
/// Returns [`state`].
pub fn stop() -> (u64, VALUE) {
    stop_clock();
    state()
}
