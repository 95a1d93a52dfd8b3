//! `Loadscan::Native::Decorator#require`: the method loadscan puts in place of every binding of
//! Ruby's C `require` (`Loadscan::CoreExt` in lib/loadscan/core_ext/kernel.rb decides where).
//!
//! It is a C function, like the one it replaces, and calls Ruby's `rb_f_require` directly, so a
//! `require` through loadscan adds no frame to a backtrace: an error raised while loading a file,
//! or a `LoadError`, shows `caller.rb:4:in 'require'` on top, exactly as without loadscan. Its
//! name as Ruby knows it (`original_name`, the backtrace label) is `require`, whatever binding it
//! stands in for, as Ruby's own function's is.

use std::ffi::CString;

use magnus::{prelude::*, Error, RString, Ruby, Value};
use rb_sys::VALUE;

use loadscan_core::{resolve, Reason, Resolved};

use crate::convert::{feature_bytes, feature_path, path_string};
use crate::hooks::{report_deferral, report_pending};
use crate::nogvl::NoGvl;
use crate::state::{try_state, try_synced_in_require, COUNTERS, RECENT};

/// Ruby's own `require`, called as a function (no method dispatch, no frame). Whatever it raises
/// or throws comes back as an `Err` and is raised again once the Rust frames are gone.
fn c_require(rb_self: Value, feature: Value) -> Result<Value, Error> {
    use magnus::rb_sys::{AsRawValue, FromRawValue};
    let (s, f) = (rb_self.as_raw(), feature.as_raw());
    magnus::rb_sys::protect(|| unsafe { rb_sys::rb_f_require(s, f) }).map(|v: VALUE| unsafe { Value::from_raw(v) })
}

/// Whether `error` is the `LoadError` Ruby raises when `path` itself cannot be loaded (not one
/// raised by a `require` inside that file).
fn fails_to_load(ruby: &Ruby, error: &Error, path: RString) -> bool {
    let Some(exception) = error.value() else { return false };
    if !exception.is_kind_of(ruby.exception_load_error()) {
        return false;
    }
    match exception.funcall::<_, _, Option<RString>>("path", ()) {
        Ok(Some(p)) => unsafe { p.as_slice() == path.as_slice() },
        _ => false,
    }
}

/// The `LoadError` Ruby's `require` raises when no entry has `feature`: the same class, message
/// and `path` (RubyGems retries with `Gem.try_activate` when `path` is the feature it asked for).
/// The message is built as Ruby's is: a binary string the feature is appended to, so it stays
/// ASCII-8BIT for an ASCII-only feature and takes the feature's encoding otherwise.
fn load_error(ruby: &Ruby, feature: Value) -> Error {
    let built = (|| -> Result<magnus::Exception, Error> {
        let message = ruby.str_from_slice(b"cannot load such file -- ");
        message.buf_append(RString::from_value(feature).unwrap_or_else(|| ruby.str_new("")))?;
        let error: magnus::Exception = ruby.exception_load_error().funcall("new", (message,))?;
        let _: Value = error.funcall("instance_variable_set", ("@path", feature))?;
        Ok(error)
    })();
    match built {
        Ok(exception) => Error::from(exception),
        Err(e) => e,
    }
}

/// `require(feature)`: resolves `feature` from the index and has Ruby require the absolute path,
/// so Ruby still does the loading, the locking, `$LOADED_FEATURES` and the `true`/`false`
/// result; answers `false` itself where Ruby would without loading anything; hands everything
/// else to Ruby untouched.
pub fn require(ruby: &Ruby, rb_self: Value, feature: Value) -> Result<Value, Error> {
    let Some(bytes) = feature_bytes(feature) else {
        COUNTERS.count_deferred(Reason::NotString);
        report_deferral(ruby, feature, Reason::NotString)?;
        return c_require(rb_self, feature);
    };
    let answer = try_resolve(&bytes)?;
    report_pending(ruby)?;
    match answer {
        Resolved::Path(p) => {
            let path = path_string(ruby, &p, feature);
            match c_require(rb_self, path.as_value()) {
                // The indexed file vanished or became unreadable since it was listed: Ruby
                // decides, as it would have without loadscan.
                Err(e) if fails_to_load(ruby, &e, path) => c_require(rb_self, feature),
                result => result,
            }
        }
        Resolved::Loaded => Ok(ruby.qfalse().as_value()),
        Resolved::LoadError => Err(load_error(ruby, feature)),
        Resolved::Defer(reason) => {
            report_deferral(ruby, feature, reason)?;
            let required = c_require(rb_self, feature);
            if let (Err(e), Some(s)) = (&required, RString::from_value(feature)) {
                // No entry had it, nor Ruby's table of extensions without a file: a later miss
                // of it can be sure (the core's `linked_in`).
                if fails_to_load(ruby, e, s) {
                    try_state(|f| f.session.learn_not_linked_in(&bytes));
                }
            }
            required
        }
        Resolved::Probe => Err(Error::new(ruby.exception_load_error(), "loadscan: probe reached the decorator")),
    }
}

/// `resolve_feature_path(feature)`, put on `$LOAD_PATH` in place of Ruby's own: `[:rb, path]`,
/// `[:so, path]` or `nil` from the index, exactly what Ruby's search would give; anything the
/// index cannot answer goes to Ruby's method, kept as `loadscan_resolve_feature_path`. (Ruby
/// 3.3's bundled-gems warnings ask it on every `require` of a few features.)
pub fn resolve_feature_path(ruby: &Ruby, rb_self: Value, feature: Value) -> Result<Value, Error> {
    // Ruby's conversion first (`to_path`, `to_str`, or its TypeError, raised from this frame as
    // from Ruby's own), once: the original then gets a String.
    let feature = {
        use magnus::rb_sys::{AsRawValue, FromRawValue};
        let raw = feature.as_raw();
        let path = magnus::rb_sys::protect(|| unsafe { rb_sys::rb_get_path(raw) })?;
        unsafe { Value::from_raw(path) }
    };
    if let Some(bytes) = feature_bytes(feature) {
        let found = try_synced_in_require(|s| s.find(&bytes, &NoGvl))?;
        report_pending(ruby)?;
        if let Some(answer) = feature_path(ruby, found, feature) {
            return Ok(answer);
        }
    }
    rb_self.funcall("loadscan_resolve_feature_path", (feature,))
}

/// What `require(feature)` should do (the core's [`resolve`], asking Ruby's
/// `rb_feature_provided`), counted. What Ruby raised meanwhile (an entry's `to_path`, an
/// interrupt) comes back as an `Err` for the caller to raise once its own frames are done.
fn try_resolve(feature: &[u8]) -> Result<Resolved, Error> {
    let find = || Ok(try_synced_in_require(|s| s.find(feature, &NoGvl))?.unwrap_or(Err(Reason::Unavailable)));
    let answer = resolve(feature, find, provided, &RECENT)?;
    COUNTERS.count(&answer);
    Ok(answer)
}

/// Ruby's `rb_feature_provided`: `Some(true)` when provided and not being loaded right now,
/// `Some(false)` when not provided, `None` when it is being loaded; `Err` what Ruby raised (it
/// expands `$LOAD_PATH` itself, running entries' `to_path`).
fn provided(feature: &[u8]) -> Result<Option<bool>, Error> {
    let Some(answer) = with_cstr(feature, |c| {
        magnus::rb_sys::protect(|| unsafe {
            let mut loading: *const std::os::raw::c_char = std::ptr::null();
            let p = rb_sys::rb_feature_provided(c, &mut loading) != 0;
            match (p, loading.is_null()) {
                (false, _) => rb_sys::Qfalse as VALUE,
                (true, true) => rb_sys::Qtrue as VALUE,
                (true, false) => rb_sys::Qnil as VALUE,
            }
        })
    }) else {
        return Ok(None);
    };
    Ok(match answer? {
        v if v == rb_sys::Qtrue as VALUE => Some(true),
        v if v == rb_sys::Qfalse as VALUE => Some(false),
        _ => None,
    })
}

/// Calls `f` with `bytes` as a NUL-terminated C string (on the stack when short).
fn with_cstr<R>(bytes: &[u8], f: impl FnOnce(*const std::os::raw::c_char) -> R) -> Option<R> {
    if bytes.contains(&0) {
        return None;
    }
    let mut stack = [0u8; 512];
    if bytes.len() < stack.len() {
        stack[..bytes.len()].copy_from_slice(bytes);
        return Some(f(stack.as_ptr().cast()));
    }
    let owned = CString::new(bytes).ok()?;
    Some(f(owned.as_ptr()))
}
