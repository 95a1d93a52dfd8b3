//! The two C library calls the binding's native threads and jobs make, declared once: a Ruby
//! function looked up by name when a feature starts (`symbol`: `dlsym`, so a Ruby without it is
//! a `None`, not a load error) and the clocks (`clock_ns`).

use std::ffi::{c_char, c_int, c_void, CStr};

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn clock_gettime(clock: c_int, ts: *mut Timespec) -> c_int;
}

/// `RTLD_DEFAULT` on glibc and musl (macOS's is -2, and it has no /proc: neither the GC deferral
/// nor the sampler starts there).
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

pub const CLOCK_MONOTONIC: c_int = 1;
pub const CLOCK_PROCESS_CPUTIME_ID: c_int = 2;

/// The function named `name` (NUL-terminated) in the process, as a `T` (a function pointer type).
pub fn symbol<T>(name: &[u8]) -> Option<T> {
    let name = CStr::from_bytes_with_nul(name).ok()?;
    let p = unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// Clock `id` now, in nanoseconds.
pub fn clock_ns(id: c_int) -> i64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    unsafe { clock_gettime(id, &mut ts) };
    ts.sec * 1_000_000_000 + ts.nsec
}
