//! `Loadscan::Native::Decorator#require`: the method loadscan puts in place of every binding of
//! Ruby's C `require` (`Loadscan::CoreExt` in lib/loadscan/core_ext/kernel.rb decides where).
//!
//! It is a C function, like the one it replaces, and calls Ruby's `rb_f_require` directly, so a
//! `require` through loadscan adds no frame to a backtrace: an error raised while loading a file,
//! or a `LoadError`, shows `caller.rb:4:in 'require'` on top, exactly as without loadscan. Its
//! name as Ruby knows it (`original_name`, the backtrace label) is `require`, whatever binding it
//! stands in for, as Ruby's own function's is.

use magnus::{prelude::*, Error, RString, Ruby, Value};
use rb_sys::VALUE;

use loadscan_core::Kind;

use crate::resolver::{self, Reason, Resolved};
use crate::{path_string, report_deferral, report_pending, string_bytes};

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
    let Some(bytes) = string_bytes(feature) else {
        resolver::count_deferred(Reason::NotString);
        report_deferral(ruby, feature, Reason::NotString);
        return c_require(rb_self, feature);
    };
    let answer = resolver::try_resolve(&bytes)?;
    report_pending(ruby);
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
        Resolved::Missing => Err(load_error(ruby, feature)),
        Resolved::Defer(reason) => {
            report_deferral(ruby, feature, reason);
            c_require(rb_self, feature)
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
    if let Some(bytes) = string_bytes(feature) {
        let answer = resolver::try_feature_path(&bytes)?;
        report_pending(ruby);
        match answer {
            Ok(Some((kind, p))) => {
                let kind = ruby.to_symbol(if kind == Kind::Rb { "rb" } else { "so" });
                let found = ruby.ary_new_from_values(&[kind.as_value(), path_string(ruby, &p, feature).as_value()]);
                return Ok(found.as_value());
            }
            Ok(None) => return Ok(ruby.qnil().as_value()),
            Err(()) => {}
        }
    }
    rb_self.funcall("loadscan_resolve_feature_path", (feature,))
}
