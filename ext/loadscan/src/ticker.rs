//! The GC deferral's clock (`Loadscan::BootGC`): a native thread, not a Ruby one (no
//! `Thread.list` entry, no part in Ruby's deadlock check, nothing for Puma's thread warning), that
//! asks Ruby every `tick` to run `Loadscan::BootGC.tick` through a postponed job, where the
//! program's own code runs: the main Ractor's thread holding the GVL, at its next interrupt check.
//! The thread touches nothing of Ruby's but `rb_postponed_job_trigger`, which Ruby 3.3 and later
//! allow from any thread; both functions are looked up when started (`dlsym`), so a Ruby without
//! them (3.1) gets `false` from `start` and no deferral. A thread that cannot be made (a thread
//! or process limit) is `false` too: the program runs as it would without loadscan.

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rb_sys::{ID, VALUE};

type Job = unsafe extern "C" fn(*mut c_void);
type Preregister = unsafe extern "C" fn(c_uint, Job, *mut c_void) -> c_uint;
type Trigger = unsafe extern "C" fn(c_uint);

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// `RTLD_DEFAULT` on glibc and musl (macOS's is -2, and it has no /proc: BootGC never starts there).
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();
/// What `rb_postponed_job_preregister` answers when Ruby's table of jobs is full.
const INVALID_HANDLE: c_uint = c_uint::MAX;

/// Whether a thread runs; GENERATION is bumped by `stop`: a thread started for an earlier
/// generation ends at its next tick.
static TICKER: Mutex<bool> = Mutex::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static HANDLE: AtomicU64 = AtomicU64::new(INVALID_HANDLE as u64);
/// `Loadscan::BootGC`, registered with Ruby's GC (a module: never freed, its address pinned).
static mut RECEIVER: VALUE = rb_sys::Qnil as VALUE;
static mut TICK_ID: ID = 0;

fn symbol<T>(name: &[u8]) -> Option<T> {
    let name = CStr::from_bytes_with_nul(name).ok()?;
    let p = unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// The postponed job: `receiver.tick`, any exception dropped (the deferral must never fail the
/// program; `tick` rescues its own).
unsafe extern "C" fn job(_: *mut c_void) {
    unsafe extern "C" fn call(_: VALUE) -> VALUE {
        rb_sys::rb_funcallv(RECEIVER, TICK_ID, 0, std::ptr::null())
    }
    let mut state = 0;
    rb_sys::rb_protect(Some(call), rb_sys::Qnil as VALUE, &mut state);
    if state != 0 {
        rb_sys::rb_set_errinfo(rb_sys::Qnil as VALUE);
    }
}

/// Starts the clock: `receiver.tick` every `tick_ms` (with the GVL). True when it runs.
pub fn start(receiver: VALUE, tick_ms: u64) -> bool {
    let mut ticker = TICKER.lock().unwrap_or_else(|e| e.into_inner());
    if *ticker {
        return true;
    }
    let (Some(preregister), Some(trigger)) =
        (symbol::<Preregister>(b"rb_postponed_job_preregister\0"), symbol::<Trigger>(b"rb_postponed_job_trigger\0"))
    else {
        return false;
    };
    unsafe {
        if TICK_ID == 0 {
            RECEIVER = receiver;
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(RECEIVER));
            TICK_ID = rb_sys::rb_intern(b"tick\0".as_ptr() as *const c_char);
        }
        RECEIVER = receiver;
    }
    if HANDLE.load(Ordering::Acquire) == INVALID_HANDLE as u64 {
        let h = unsafe { preregister(0, job, std::ptr::null_mut()) };
        if h == INVALID_HANDLE {
            return false;
        }
        HANDLE.store(h as u64, Ordering::Release);
    }
    let handle = HANDLE.load(Ordering::Acquire) as c_uint;
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    let spawned = std::thread::Builder::new().name("loadscan-gc".into()).stack_size(64 << 10).spawn(move || {
        while GENERATION.load(Ordering::Acquire) == generation {
            std::thread::sleep(Duration::from_millis(tick_ms));
            if GENERATION.load(Ordering::Acquire) != generation {
                break;
            }
            // Every tick, even when the last one has not run yet: Ruby asks the thread's running
            // fiber, and a fiber that ends first takes the request with it.
            unsafe { trigger(handle) };
        }
    });
    if spawned.is_err() {
        return false;
    }
    *ticker = true;
    true
}

/// Stops the clock: the thread ends at its next tick, unwaited (a job it triggered meanwhile
/// runs `tick`, which then finds the deferral over). In a forked child there is no thread.
pub fn stop() {
    let mut ticker = TICKER.lock().unwrap_or_else(|e| e.into_inner());
    if std::mem::take(&mut *ticker) {
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}
