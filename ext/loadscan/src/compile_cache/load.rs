//! The compile cache's hot path (its life and statics are in [`super`]):
//! `CompileCache#load_iseq`, and the `script_compiled` TracePoint's block that keeps a miss.
//!
//! `load_iseq(path)` reads the file once (its real path, contents and hash), and answers
//! - an instruction sequence from the file (`load_from_binary` of a blob whose CRC was checked)
//!   when it holds one for these contents, paths and compile settings that is known to warn
//!   nothing in the current warning state (`$VERBOSE` and the `Warning` categories);
//! - nil otherwise, and Ruby compiles: on a miss, the `script_compiled` TracePoint given at
//!   start is enabled until Ruby's own instruction sequence for that path comes by
//!   ([`compiled`]), which is dumped and kept for the write at exit if the file did not change
//!   in between;
//! - nil without asking (a *bypass*): coverage running, a Ractor other than the main one, a file
//!   it cannot read, the cache busy.
//!
//! No lock is held while Ruby code runs: the entry's bytes are taken out (the mapping lives as
//! long as the process) before `load_from_binary` is called.

use std::sync::atomic::Ordering;

use loadscan_core::compile_cache::{self, Entry, Id};
use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::value::{LazyId, ReprValue};
use magnus::{prelude::*, Error, RArray, RString, Ruby, Value};

use super::{lock, Figure, Miss, AREF, COVERAGE, FLAGS, LOAD_FROM_BINARY, ON, PATH, REFS, STATE_ID, TO_BINARY};
use crate::convert::bytes;
use crate::state;

/// The warning state as a bit number below 64: `$VERBOSE` (nil 0, false 1, true 2) and one bit
/// per `Warning` category given at start, enabled or not; `None` when a category past the
/// fourth is enabled (no bit for it: the load is left to Ruby).
fn warning_state(ruby: &Ruby) -> Result<Option<u32>, Error> {
    let verbose = unsafe { *rb_sys::rb_ruby_verbose_ptr() };
    let level = if verbose == rb_sys::Qnil as rb_sys::VALUE {
        0
    } else if verbose == rb_sys::Qfalse as rb_sys::VALUE {
        1
    } else {
        2
    };
    let refs = ruby.get_inner(&REFS);
    let warning: Value = refs.entry(1)?;
    let categories: RArray = refs.entry(2)?;
    let mut state = level;
    for (i, cat) in categories.into_iter().enumerate() {
        let on: Value = warning.funcall(LazyId::get_inner_with(&AREF, ruby), (cat,))?;
        if on.to_bool() {
            if i >= 4 {
                return Ok(None);
            }
            state |= 4 << i;
        }
    }
    Ok(Some(state))
}

/// Whether coverage is measuring (then nothing is served or kept: Ruby compiles with it).
fn coverage_on(ruby: &Ruby) -> Result<bool, Error> {
    let object = ruby.class_object();
    let id = LazyId::get_inner_with(&COVERAGE, ruby);
    if unsafe { rb_sys::rb_const_defined(object.as_raw(), magnus::rb_sys::AsRawId::as_raw(id)) } == 0 {
        return Ok(false);
    }
    let coverage: Value = object.const_get(id)?;
    if !coverage.respond_to(LazyId::get_inner_with(&STATE_ID, ruby), false)? {
        return Ok(false);
    }
    let s: Value = coverage.funcall(LazyId::get_inner_with(&STATE_ID, ruby), ())?;
    Ok(s.as_raw() != ruby.to_symbol("idle").as_raw() && !s.is_nil())
}

fn bypass(ruby: &Ruby) -> Result<Value, Error> {
    Figure::Bypass.add(1);
    Ok(ruby.qnil().as_value())
}

/// `CompileCache#load_iseq(path)`: see the module doc.
pub fn load_iseq(ruby: &Ruby, _rb_self: Value, path: Value) -> Result<Value, Error> {
    let nil = ruby.qnil().as_value();
    if !ON.load(Ordering::Relaxed) || !state::in_main_ractor() {
        return bypass(ruby);
    }
    let Some(path) = RString::from_value(path) else { return bypass(ruby) };
    if coverage_on(ruby)? {
        return bypass(ruby);
    }
    let path = bytes(path);
    let Some(source) = compile_cache::read_source(&path) else { return bypass(ruby) };
    let id = Id { hash: source.hash, flags: FLAGS.load(Ordering::Relaxed) };
    let key = compile_cache::key(&path, &source.realpath);
    let Some(wstate) = warning_state(ruby)? else { return bypass(ruby) };
    let mut damaged = false;
    let blob = {
        let Some(mut guard) = lock() else { return bypass(ruby) };
        let Some(st) = guard.as_mut() else { return bypass(ruby) };
        match st.cache.get(id, &key) {
            Some(found) if found.silent & (1 << wstate) != 0 => {
                if found.blob.is_none() {
                    damaged = true;
                }
                found.blob.map(|b| (b.as_ptr(), b.len()))
            }
            _ => None,
        }
        .ok_or_else(|| {
            // A miss: Ruby compiles; its instruction sequence is caught by `compiled`.
            let thread = unsafe { rb_sys::rb_thread_current() } as usize;
            // Another load may start before Ruby compiles this one (an autoload in a warning
            // hook): misses are matched by thread and path; a compile that never came (a
            // SyntaxError) is forgotten by the next miss of the same file, or past 64.
            st.misses.retain(|m| m.thread != thread || m.path != path);
            if st.misses.len() >= 64 {
                st.misses.remove(0);
            }
            st.misses.push(Miss { thread, path: path.clone(), realpath: source.realpath.clone(), id, state: wstate });
        })
    };
    let Ok((ptr, len)) = blob else {
        Figure::Miss.add(1);
        if damaged {
            // One warning (lib/loadscan/compile_cache.rb); what it raises is not the require's.
            let module: Value = ruby.get_inner(&REFS).entry(4)?;
            let _ = module.funcall::<_, _, Value>("damaged", (ruby.str_from_slice(&path),));
        }
        let tp: Value = ruby.get_inner(&REFS).entry(0)?;
        if !tp.is_nil() {
            unsafe { rb_sys::rb_tracepoint_enable(tp.as_raw()) };
        }
        return Ok(nil);
    };
    // SAFETY: the mapping behind `ptr` lives until the process ends (the state is never dropped).
    let binary = unsafe { Value::from_raw(rb_sys::rb_str_new_static(ptr.cast(), len as _)) };
    let iseq_class: Value = ruby.get_inner(&REFS).entry(3)?;
    match iseq_class.funcall::<_, _, Value>(LazyId::get_inner_with(&LOAD_FROM_BINARY, ruby), (binary,)) {
        Ok(iseq) => {
            Figure::Hit.add(1);
            Figure::BytesRead.add(len as u64);
            Ok(iseq)
        }
        // Not expected of a blob whose CRC matched: Ruby compiles, and the cache is left alone.
        Err(_) => {
            ON.store(false, Ordering::Relaxed);
            bypass(ruby)
        }
    }
}

/// `compile_cache_compiled(iseq)`: the TracePoint's block, for each script Ruby compiled while
/// it is enabled: keeps Ruby's instruction sequence of a miss (matched by thread and path),
/// when the file still has the contents the miss read. Disables the TracePoint once no miss
/// is waiting.
pub fn compiled(ruby: &Ruby, iseq: Value) -> Result<(), Error> {
    let thread = unsafe { rb_sys::rb_thread_current() } as usize;
    let path: Value = iseq.funcall(LazyId::get_inner_with(&PATH, ruby), ())?;
    let path = RString::from_value(path).map(bytes);
    let miss = {
        let Some(mut guard) = lock() else { return Ok(()) };
        let Some(st) = guard.as_mut() else { return Ok(()) };
        let at = st.misses.iter().position(|m| m.thread == thread && Some(&m.path) == path.as_ref());
        let miss = at.map(|i| st.misses.swap_remove(i));
        if st.misses.is_empty() {
            let tp: Value = ruby.get_inner(&REFS).entry(0)?;
            unsafe { rb_sys::rb_tracepoint_disable(tp.as_raw()) };
        }
        miss
    };
    let Some(miss) = miss else { return Ok(()) };
    // Ruby read the file after the miss did: kept only when both reads agree.
    match compile_cache::read_source(&miss.path) {
        Some(again) if again.hash == miss.id.hash && again.realpath == miss.realpath => {}
        _ => return Ok(()),
    }
    // Some instruction sequences cannot be dumped (Ruby bug #18250 on 3.0): then not kept.
    let Ok(binary) = iseq.funcall::<_, _, RString>(LazyId::get_inner_with(&TO_BINARY, ruby), ()) else {
        return Ok(());
    };
    let blob = bytes(binary);
    if let Some(mut guard) = lock() {
        if let Some(st) = guard.as_mut() {
            let key = compile_cache::key(&miss.path, &miss.realpath);
            st.cache.add(Entry { id: miss.id, key, silent: 0, blob });
            st.states.push(miss.state);
        }
    }
    Ok(())
}
