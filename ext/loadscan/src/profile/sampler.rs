//! The boot profile's sampler (`Loadscan::Profile::Sampler`): while a profile records, a native
//! thread (no Ruby thread: nothing in `Thread.list`, no GVL wanted) asks Ruby every `interval_us`
//! to run a postponed job, which runs on the thread holding the GVL at its next interrupt check.
//! On the profiled thread the job reads its stack with `rb_profile_frames` and keeps, in one
//! Ruby Array registered with the GC (so the frames it holds stay alive), the clocks and the
//! Ruby frames above the innermost frame of one of the profile's own files (the hook of the
//! entry open now): `[wall_ns, cpu_ns, allocated, gc_ns, n, frame × n]` per sample, frames
//! innermost first. Nothing is allocated by a sample but the Array's room (malloc, not objects).
//! `stop` ends the thread and gives the samples with each frame as `[label, path]`
//! (lib/loadscan/profile/samples.rb reads them). The thread touches nothing of Ruby's but
//! `rb_postponed_job_trigger` (Ruby 3.3 and later, looked up when started: `start` is false
//! without it, and the profile has no samples).

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{prelude::*, Error, RArray, RString, Ruby, Value};
use rb_sys::{ID, VALUE};

type Job = unsafe extern "C" fn(*mut c_void);
type Preregister = unsafe extern "C" fn(c_uint, Job, *mut c_void) -> c_uint;
type Trigger = unsafe extern "C" fn(c_uint);

extern "C" {
    fn rb_profile_frames(start: c_int, limit: c_int, buff: *mut VALUE, lines: *mut c_int) -> c_int;
    fn rb_profile_frame_path(frame: VALUE) -> VALUE;
    fn rb_profile_frame_absolute_path(frame: VALUE) -> VALUE;
    fn rb_profile_frame_full_label(frame: VALUE) -> VALUE;
    fn rb_gc_stat(key: VALUE) -> usize;
}

/// What `rb_profile_frames` reads of a stack at most (a deeper one's sample is dropped when its
/// boundary lies beyond).
const DEPTH: usize = 512;
/// The Ruby frames kept per sample at most: the outermost above the boundary.
const KEEP: usize = 48;
/// The buffer's size at most (32 MiB of VALUEs: some 100,000 samples): a profile that records
/// for hours (LOADSCAN_PROFILE on a server) keeps its first.
const MAX_VALUES: usize = 1 << 22;
const INVALID_HANDLE: c_uint = c_uint::MAX;
const QNIL: VALUE = rb_sys::Qnil as VALUE;

static ACTIVE: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static HANDLE: AtomicU64 = AtomicU64::new(INVALID_HANDLE as u64);
// Touched only with the GVL (start, the job, stop), each registered with the GC once.
static mut BUFFER: VALUE = QNIL;
static mut THREAD: VALUE = QNIL;
static mut BOUNDARIES: VALUE = QNIL;
static mut ALLOCATED: VALUE = QNIL;
static mut TOTAL_TIME: ID = 0;
static mut REGISTERED: bool = false;

use crate::sys::{clock_ns as clock, symbol, CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID};

/// A whole number as a Fixnum (every figure here is far below 2^62).
fn fixnum(n: i64) -> VALUE {
    ((n << 1) | 1) as VALUE
}

unsafe fn bytes<'a>(s: VALUE) -> &'a [u8] {
    std::slice::from_raw_parts(rb_sys::RSTRING_PTR(s) as *const u8, rb_sys::RSTRING_LEN(s) as usize)
}

/// Whether `path` (a String) is one of the profile's own files.
unsafe fn boundary(path: VALUE) -> bool {
    let path = bytes(path);
    let list = RArray::from_value(Value::from_raw(BOUNDARIES)).expect("an Array");
    list.into_iter().any(|b| bytes(b.as_raw()) == path)
}

/// The postponed job: one sample of the profiled thread.
unsafe extern "C" fn job(_: *mut c_void) {
    if !ACTIVE.load(Ordering::Acquire) || rb_sys::rb_thread_current() != THREAD {
        return;
    }
    let mut frames = [0 as VALUE; DEPTH];
    let n = rb_profile_frames(0, DEPTH as c_int, frames.as_mut_ptr(), std::ptr::null_mut()).max(0) as usize;
    let mut ruby = [0 as VALUE; DEPTH];
    let mut count = 0;
    let mut found = false;
    for &frame in &frames[..n] {
        let path = rb_profile_frame_path(frame);
        if path == QNIL {
            continue; // a C function: its Ruby caller stands for it
        }
        if boundary(path) {
            found = true;
            break;
        }
        ruby[count] = frame;
        count += 1;
    }
    if !found || rb_sys::RARRAY_LEN(BUFFER) as usize > MAX_VALUES {
        return; // outside any entry's hook (the boot's own code), deeper than DEPTH, or full
    }
    let kept = &ruby[count.saturating_sub(KEEP)..count];
    let wall = clock(CLOCK_MONOTONIC);
    let cpu = clock(CLOCK_PROCESS_CPUTIME_ID);
    let allocated = rb_gc_stat(ALLOCATED) as i64;
    let gc = if super::gc_clock::running() {
        fixnum(super::gc_clock::now()) // the profile's own GC clock (gc_clock.rs), where it runs
    } else {
        let gc = rb_sys::rb_funcallv(rb_sys::rb_mGC, TOTAL_TIME, 0, std::ptr::null());
        if gc & 1 == 1 {
            gc
        } else {
            fixnum(0)
        }
    };
    for v in [fixnum(wall), fixnum(cpu), fixnum(allocated), gc, fixnum(kept.len() as i64)] {
        rb_sys::rb_ary_push(BUFFER, v);
    }
    for &frame in kept {
        rb_sys::rb_ary_push(BUFFER, frame);
    }
}

/// Starts sampling the current thread every `interval_us`, the frames above the innermost one
/// of a file in `boundaries` (the profile's own files). True when it runs.
pub fn start(ruby: &Ruby, interval_us: u64, boundaries: RArray) -> Result<bool, Error> {
    if ACTIVE.load(Ordering::Acquire) {
        return Ok(false);
    }
    let (Some(preregister), Some(trigger)) =
        (symbol::<Preregister>(b"rb_postponed_job_preregister\0"), symbol::<Trigger>(b"rb_postponed_job_trigger\0"))
    else {
        return Ok(false);
    };
    for b in boundaries.into_iter() {
        RString::from_value(b).ok_or_else(|| Error::new(ruby.exception_type_error(), "boundaries: Strings"))?;
    }
    unsafe {
        if !REGISTERED {
            REGISTERED = true;
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(BUFFER));
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(THREAD));
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(BOUNDARIES));
            rb_sys::rb_gc_register_address(std::ptr::addr_of_mut!(ALLOCATED));
            ALLOCATED = rb_sys::rb_id2sym(rb_sys::rb_intern(b"total_allocated_objects\0".as_ptr() as *const c_char));
            TOTAL_TIME = rb_sys::rb_intern(b"total_time\0".as_ptr() as *const c_char);
        }
        BUFFER = rb_sys::rb_ary_new_capa(1 << 16);
        THREAD = rb_sys::rb_thread_current();
        BOUNDARIES = rb_sys::rb_ary_dup(boundaries.as_raw());
    }
    if HANDLE.load(Ordering::Acquire) == INVALID_HANDLE as u64 {
        let h = unsafe { preregister(0, job, std::ptr::null_mut()) };
        if h == INVALID_HANDLE {
            return Ok(false);
        }
        HANDLE.store(h as u64, Ordering::Release);
    }
    let handle = HANDLE.load(Ordering::Acquire) as c_uint;
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    let interval = Duration::from_micros(interval_us.max(100));
    ACTIVE.store(true, Ordering::Release);
    let spawned = std::thread::Builder::new().name("loadscan-profile".into()).stack_size(64 << 10).spawn(move || {
        while GENERATION.load(Ordering::Acquire) == generation {
            std::thread::sleep(interval);
            if GENERATION.load(Ordering::Acquire) != generation {
                break;
            }
            unsafe { trigger(handle) };
        }
    });
    if spawned.is_err() {
        ACTIVE.store(false, Ordering::Release);
        return Ok(false);
    }
    Ok(true)
}

/// Stops sampling (the thread ends at its next tick, unwaited; a job it triggered meanwhile
/// does nothing) and gives `[samples, frames]`: the samples as one Array of whole numbers
/// (`wall_ns, cpu_ns, allocated, gc_ns, n`, then `n` frame numbers, innermost first), the frames
/// by number as `[label, path]`. Nil when not sampling.
pub fn stop(ruby: &Ruby) -> Result<Value, Error> {
    if !ACTIVE.swap(false, Ordering::AcqRel) {
        return Ok(ruby.qnil().as_value());
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let buffer = unsafe { BUFFER };
    let len = unsafe { rb_sys::RARRAY_LEN(buffer) } as usize;
    // First the numbers (nothing allocated: the frames stay in the registered buffer)...
    let mut numbers: Vec<i64> = Vec::with_capacity(len);
    let mut frames: Vec<VALUE> = Vec::new();
    let mut ids: std::collections::HashMap<VALUE, i64> = std::collections::HashMap::new();
    let at = |i: usize| unsafe { rb_sys::rb_ary_entry(buffer, i as std::os::raw::c_long) };
    let mut i = 0;
    while i + 5 <= len {
        for k in 0..5 {
            numbers.push((at(i + k) as i64) >> 1);
        }
        let n = (at(i + 4) as i64 >> 1) as usize;
        i += 5;
        for _ in 0..n.min(len - i) {
            let frame = at(i);
            let next = frames.len() as i64;
            let id = *ids.entry(frame).or_insert_with(|| {
                frames.push(frame);
                next
            });
            numbers.push(id);
            i += 1;
        }
    }
    // ...then Ruby's objects.
    let samples = ruby.ary_from_iter(numbers.into_iter().map(|n| ruby.integer_from_i64(n)));
    let names = ruby.ary_new_capa(frames.len());
    for frame in frames {
        let (label, path) = unsafe {
            let path = rb_profile_frame_absolute_path(frame);
            let path = if path == QNIL { rb_profile_frame_path(frame) } else { path };
            (Value::from_raw(rb_profile_frame_full_label(frame)), Value::from_raw(path))
        };
        names.push(ruby.ary_from_iter([label, path]))?;
    }
    unsafe {
        BUFFER = QNIL;
        THREAD = QNIL;
    }
    Ok(ruby.ary_from_iter([samples.as_value(), names.as_value()]).as_value())
}
