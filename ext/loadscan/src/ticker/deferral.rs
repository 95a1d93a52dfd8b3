//! The GC deferral's decisions (`Loadscan::BootGC`): the job the clock in [`super`] has Ruby run
//! at every tick, and the deferral's state (its limits, the budget runs, the end it made) with its
//! statics.
//!
//! The job is native from end to end and runs no Ruby method: Ruby checks interrupts when a Ruby
//! method returns, so any Ruby code in it would take an exception raised into the thread
//! (`Thread#raise`, `Timeout`) that Ruby's runner of postponed jobs then drops, and its IO would go
//! through the program's Fiber scheduler (which may switch fibers there). It reads GC's figures
//! (`rb_gc_stat`), the anonymous resident size and the open descriptors with their soft limit
//! ([`super::process`]), the clock and two instance variables; it may run one `rb_gc_start` (a
//! budget run, with GC enabled for it: finalizers run inside it with interrupts held back, as Ruby
//! runs them) and, when it ends the deferral, `rb_gc_enable`. What is left of the end for Ruby
//! (GC's own methods back) is done by `BootGC` at its next call, from [`state`].

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rb_sys::{ID, VALUE};

use super::process::{fd_limit, open_fds, rss};

/// The limits `BootGC.start` gives (its constants) and where its budget counts from.
struct Deferral {
    /// Objects allocated at which the boot ends (the mark), or 0.
    mark: u64,
    started: Instant,
    /// `BootGC::MAX_SECONDS` when started (the constant is read at every tick: a benchmark's
    /// counted boots raise it after setup).
    max_seconds: f64,
    budget: i64,
    cap: i64,
    page_size: i64,
    setup_rss: i64,
    /// Descriptors that must stay free below the soft limit, or 0 (a Ruby that collects for an
    /// `open` that ran out of them while GC is disabled: 3.4 and later).
    headroom: i64,
    /// At the last GC: `GC.count`, the resident size, heap pages, open descriptors.
    count: u64,
    rss: i64,
    pages: i64,
    fds: i64,
    /// Budget runs in a row that Ruby's own allocation did not call for.
    unaccounted: u32,
}

/// The deferral while it goes on (the job and `BootGC`'s calls, all with the GVL: never waited for).
static DEFERRAL: Mutex<Option<Deferral>> = Mutex::new(None);
static BUDGET_RUNS: AtomicU64 = AtomicU64::new(0);
/// Descriptors opened since the last GC that make a budget run.
const FD_BUDGET: i64 = 256;
/// `Loadscan::BootGC`, `Loadscan`, and the end the job made, `[why, GC.stat, GC.latest_gc_info,
/// monotonic seconds]` or nil: registered with Ruby's GC (the modules are never freed).
static mut RECEIVER: VALUE = rb_sys::Qnil as VALUE;
static mut LOADSCAN: VALUE = rb_sys::Qnil as VALUE;
static mut ENDED: VALUE = rb_sys::Qnil as VALUE;
static mut REGISTERED: bool = false;

/// The names the tick looks up, interned once each (by the literal's address): a name interned
/// from C is never freed, and the tick asks for some ten at each of its runs.
static IDS: Mutex<Vec<(usize, ID)>> = Mutex::new(Vec::new());

fn id(name: &'static CStr) -> ID {
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let key = name.as_ptr() as usize;
    if let Some(&(_, id)) = ids.iter().find(|(k, _)| *k == key) {
        return id;
    }
    let id = unsafe { rb_sys::rb_intern(name.as_ptr()) };
    ids.push((key, id));
    id
}

fn sym(name: &'static CStr) -> VALUE {
    unsafe { rb_sys::rb_id2sym(id(name)) }
}

fn stat(key: &'static CStr) -> i64 {
    unsafe { rb_sys::rb_gc_stat(sym(key)) as i64 }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Deferral>> {
    DEFERRAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seconds of `CLOCK_MONOTONIC`, as Ruby's `Process.clock_gettime(Process::CLOCK_MONOTONIC)`.
fn monotonic() -> f64 {
    crate::sys::clock_ns(crate::sys::CLOCK_MONOTONIC) as f64 / 1e9
}

/// Why the deferral ends (`BootGC`'s names).
#[derive(Clone, Copy)]
enum End {
    Allocated,
    Time,
    Rails,
    Cap,
    Memory,
    Files,
}

impl End {
    fn name(self) -> &'static CStr {
        match self {
            End::Allocated => c"allocated",
            End::Time => c"time",
            End::Rails => c"rails",
            End::Cap => c"cap",
            End::Memory => c"memory",
            End::Files => c"files",
        }
    }
}

/// The postponed job: the tick. Ends the boot or runs a budget run when due (`BootGC`'s
/// comment says which). Runs no Ruby method and raises nothing.
///
/// The deferral's lock is never held while Ruby code may run: a budget run runs finalizers,
/// which may call `GC.enable` or `Loadscan.booted!` and so end the deferral meanwhile.
pub(super) unsafe extern "C" fn job(_: *mut c_void) {
    let step = {
        let mut guard = lock();
        let Some(d) = guard.as_mut() else { return };
        check(d, app_disabled())
    };
    let why = match step {
        Step::Wait => return,
        Step::End(why) => why,
        Step::Run => {
            // GC is enabled for the run: Ruby 3.3's `rb_gc_start` does nothing while it is disabled
            // (3.4's runs). Disabled again after it unless the deferral ended meanwhile (then GC
            // is as its end left it).
            unsafe {
                rb_sys::rb_gc_enable();
                rb_sys::rb_gc_start();
            }
            let mut guard = lock();
            let Some(d) = guard.as_mut() else { return };
            unsafe { rb_sys::rb_gc_disable() };
            mark_gc(d, rss(), open_fds());
            if d.unaccounted < 2 {
                return;
            }
            End::Memory
        }
    };
    end(why, app_disabled());
}

/// What the tick does.
enum Step {
    Wait,
    /// A budget run.
    Run,
    End(End),
}

/// Whether the app has GC disabled (`BootGC`'s `@app_disabled`, its view of GC's switch).
fn app_disabled() -> bool {
    unsafe { rb_sys::rb_ivar_get(RECEIVER, id(c"@app_disabled")) == rb_sys::Qtrue as VALUE }
}

fn check(d: &mut Deferral, app_disabled: bool) -> Step {
    if d.mark > 0 && stat(c"total_allocated_objects") as u64 >= d.mark {
        return Step::End(End::Allocated);
    }
    if d.started.elapsed().as_secs_f64() > constant(c"MAX_SECONDS", d.max_seconds) {
        return Step::End(End::Time);
    }
    if rails_initialized() {
        return Step::End(End::Rails);
    }
    budget(d, app_disabled)
}

/// `BootGC::<name>` as it is now (a Float or a Fixnum), else `default`: MAX_SECONDS and
/// RESIDENT_BUDGET, which a benchmark's counted boots raise after setup.
fn constant(name: &'static CStr, default: f64) -> f64 {
    unsafe {
        let name = id(name);
        if rb_sys::rb_const_defined_at(RECEIVER, name) == 0 {
            return default;
        }
        let v = rb_sys::rb_const_get_at(RECEIVER, name);
        if rb_sys::RB_FLOAT_TYPE_P(v) {
            rb_sys::rb_float_value(v)
        } else if rb_sys::FIXNUM_P(v) {
            rb_sys::rb_num2long(v) as f64
        } else {
            default
        }
    }
}

/// Whether a Rails app has initialized (an app without the railtie): `Rails.application`'s
/// `@initialized`, read without calling anything (`Rails.application` would make the app's
/// instance and run its hooks; an autoload of `Rails` is not made to load).
fn rails_initialized() -> bool {
    unsafe {
        let object = rb_sys::rb_cObject;
        let rails = id(c"Rails");
        if rb_sys::rb_const_defined_at(object, rails) == 0
            || rb_sys::rb_autoload_p(object, rails) != rb_sys::Qnil as VALUE
        {
            return false;
        }
        let app = rb_sys::rb_ivar_get(rb_sys::rb_const_get_at(object, rails), id(c"@application"));
        if app == rb_sys::Qnil as VALUE || app == rb_sys::Qfalse as VALUE {
            return false;
        }
        rb_sys::rb_ivar_get(app, id(c"@initialized")) == rb_sys::Qtrue as VALUE
    }
}

/// One full GC when Ruby allocated `budget` since the last GC (any GC), in heap pages and malloc,
/// when the resident size grew by `budget` since then, or when FD_BUDGET more descriptors are open
/// than then (Files and sockets left to GC are closed by it); `Cap` when the resident size grew by
/// `cap` since setup; `Files` when fewer than `headroom` descriptors are left below the soft limit
/// (Ruby 3.3 does not collect for an `open` that runs out of them while GC is disabled: it would
/// fail where stock's GC would have closed the Files left to it); `Memory` after the second run in
/// a row that neither Ruby's own allocation nor the descriptors called for ([`job`]).
/// No run while the app has GC disabled (it would be a GC the app turned off).
fn budget(d: &mut Deferral, app_disabled: bool) -> Step {
    let now = rss();
    let fds = open_fds();
    if unsafe { rb_sys::rb_gc_count() } != d.count {
        mark_gc(d, now, fds);
    }
    if now - d.setup_rss >= d.cap {
        return Step::End(End::Cap);
    }
    if d.headroom > 0 && fd_limit().saturating_sub(fds) < d.headroom {
        return Step::End(End::Files);
    }
    if app_disabled {
        return Step::Wait;
    }
    let made = stat(c"malloc_increase_bytes") + (stat(c"heap_allocated_pages") - d.pages) * d.page_size;
    let files = fds - d.fds >= FD_BUDGET;
    if made < d.budget && !files && now - d.rss < constant(c"RESIDENT_BUDGET", d.budget as f64) as i64 {
        return Step::Wait;
    }
    BUDGET_RUNS.fetch_add(1, Ordering::Relaxed);
    d.unaccounted = if made < d.budget && !files { d.unaccounted + 1 } else { 0 };
    Step::Run
}

fn mark_gc(d: &mut Deferral, rss: i64, fds: i64) {
    d.count = unsafe { rb_sys::rb_gc_count() };
    d.rss = rss;
    d.fds = fds;
    d.pages = stat(c"heap_allocated_pages");
}

/// The job's end of the deferral: the clock stops, the end is kept for `BootGC` (with GC's
/// figures now), the Bootsnap variable loadscan set is taken back for a Rails app's end (as
/// `Loadscan.end_boot` does), and GC runs again unless the app has it disabled.
fn end(why: End, app_disabled: bool) {
    super::stop_clock();
    unsafe {
        let stat = rb_sys::rb_hash_new();
        rb_sys::rb_gc_stat(stat);
        let info = rb_sys::rb_gc_latest_gc_info(rb_sys::rb_hash_new());
        let record = rb_sys::rb_ary_new_capa(4);
        for v in [sym(why.name()), stat, info, rb_sys::rb_float_new(monotonic())] {
            rb_sys::rb_ary_push(record, v);
        }
        ENDED = record;
        if matches!(why, End::Rails) {
            take_back_bootsnap_var();
        }
        if !app_disabled {
            rb_sys::rb_gc_enable();
        }
    }
}

/// `Loadscan.end_boot`'s rule: DISABLE_BOOTSNAP_LOAD_PATH_CACHE goes if loadscan set it
/// (`@bootsnap == :turned_off`) and it still holds loadscan's value.
unsafe fn take_back_bootsnap_var() {
    const VAR: &CStr = c"DISABLE_BOOTSNAP_LOAD_PATH_CACHE";
    if rb_sys::rb_ivar_get(LOADSCAN, id(c"@bootsnap")) != sym(c"turned_off") {
        return;
    }
    extern "C" {
        fn getenv(name: *const c_char) -> *const c_char;
    }
    let value = getenv(VAR.as_ptr());
    if value.is_null() || CStr::from_ptr(value).to_bytes() != b"loadscan" {
        return;
    }
    unsafe extern "C" fn unset(_: VALUE) -> VALUE {
        rb_sys::ruby_unsetenv(VAR.as_ptr());
        rb_sys::Qnil as VALUE
    }
    let mut state = 0;
    rb_sys::rb_protect(Some(unset), rb_sys::Qnil as VALUE, &mut state);
    if state != 0 {
        rb_sys::rb_set_errinfo(rb_sys::Qnil as VALUE);
    }
}

/// Keeps `BootGC`, `Loadscan` and no end yet, for the deferral `start` begins (with the GVL).
pub(super) fn hold(receiver: VALUE, loadscan: VALUE) {
    unsafe {
        if !REGISTERED {
            REGISTERED = true;
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(RECEIVER));
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(LOADSCAN));
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(ENDED));
        }
        RECEIVER = receiver;
        LOADSCAN = loadscan;
        ENDED = rb_sys::Qnil as VALUE;
    }
}

/// Begins the deferral with `BootGC.start`'s limits: its budget counts from now.
pub(super) fn begin(mark: u64, max_seconds: f64, budget: i64, cap: i64, page_size: i64, headroom: i64) {
    let now = rss();
    let mut d = Deferral {
        mark,
        started: Instant::now(),
        max_seconds,
        budget,
        cap,
        page_size,
        setup_rss: now,
        headroom,
        count: 0,
        rss: 0,
        pages: 0,
        fds: 0,
        unaccounted: 0,
    };
    mark_gc(&mut d, now, open_fds());
    *lock() = Some(d);
    BUDGET_RUNS.store(0, Ordering::Relaxed);
}

/// Ends the deferral's state: a job triggered later finds it over and does nothing.
pub(super) fn clear() {
    *lock() = None;
}

/// The budget runs so far and the end the job made (`[why, GC.stat, GC.latest_gc_info, at]`), or
/// nil while the deferral goes on or `BootGC` ended it.
pub fn state() -> (u64, VALUE) {
    (BUDGET_RUNS.load(Ordering::Relaxed), unsafe { ENDED })
}
