//! The one place that releases the GVL: scans and disk I/O run without it so other Ruby
//! threads keep going. The closure must not touch any Ruby object. A panic inside is caught
//! and resumed once the GVL is held again (magnus turns it into a Ruby exception).

use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

struct Call<F, R> {
    f: Option<F>,
    result: Option<std::thread::Result<R>>,
}

unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) -> *mut c_void {
    let call = &mut *(data as *mut Call<F, R>);
    if let Some(f) = call.f.take() {
        call.result = Some(catch_unwind(AssertUnwindSafe(f)));
    }
    null_mut()
}

/// Runs `f` with the GVL released and returns its result.
pub fn without_gvl<F: FnOnce() -> R, R>(f: F) -> R {
    let mut call = Call { f: Some(f), result: None };
    unsafe {
        rb_sys::rb_thread_call_without_gvl(
            Some(trampoline::<F, R>),
            &mut call as *mut Call<F, R> as *mut c_void,
            None,
            null_mut(),
        );
    }
    match call.result {
        Some(Ok(r)) => r,
        Some(Err(panic)) => resume_unwind(panic),
        None => unreachable!("rb_thread_call_without_gvl did not run the function"),
    }
}
