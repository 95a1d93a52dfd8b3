//! The compile cache's side of the binding (the store: `loadscan_core::compile_cache`):
//! `Loadscan::Native::CompileCache#load_iseq`, the method Ruby calls (through the module
//! prepended to `RubyVM::InstructionSequence`'s singleton class) before it compiles a file it
//! loads, and the calls lib/loadscan/compile_cache.rb makes at setup and at exit.
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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use loadscan_core::compile_cache::{self, CompileCache, Entry, Id};
use loadscan_core::CacheFile;
use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::value::{Lazy, LazyId, ReprValue};
use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby, Value};

use crate::convert::bytes;
use crate::state;

/// A compile Ruby is doing now, on a miss: the thread, the path, what was read.
struct Miss {
    thread: usize,
    path: Vec<u8>,
    realpath: Vec<u8>,
    id: Id,
    state: u32,
}

struct State {
    cache: CompileCache,
    misses: Vec<Miss>,
    /// The warning state of each pending entry (`pending_mut`'s order).
    states: Vec<u32>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// The compile settings' digest (`compile_option`, parser, build), set by Ruby.
static FLAGS: AtomicU64 = AtomicU64::new(0);
static ON: AtomicBool = AtomicBool::new(false);
/// [TracePoint, Warning, categories (Array of Symbols), RubyVM::InstructionSequence,
/// Loadscan::CompileCache].
static REFS: Lazy<RArray> = Lazy::new(|ruby| ruby.ary_new_from_values(&[ruby.qnil().as_value(); 5]));
static LOAD_FROM_BINARY: LazyId = LazyId::new("load_from_binary");
static TO_BINARY: LazyId = LazyId::new("to_binary");
static PATH: LazyId = LazyId::new("path");
static AREF: LazyId = LazyId::new("[]");
static STATE_ID: LazyId = LazyId::new("state");
static COVERAGE: LazyId = LazyId::new("Coverage");

fn lock() -> Option<MutexGuard<'static, Option<State>>> {
    match STATE.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

pub fn init(ruby: &Ruby) {
    Lazy::force(&REFS, ruby);
}

/// `compile_cache_start(dir, env_key, tracepoint, categories)`: opens `iseq.bin` in `dir` (nil:
/// no cache dir, nothing is kept); once per process. The warning (damage) or nil.
pub fn start(
    ruby: &Ruby,
    dir: Option<RString>,
    env: RString,
    tracepoint: Value,
    categories: RArray,
) -> Result<Option<String>, Error> {
    let refs = ruby.get_inner(&REFS);
    refs.store(0, tracepoint)?;
    refs.store(1, ruby.class_object().const_get::<_, Value>("Warning")?)?;
    refs.store(2, categories)?;
    let loadscan = ruby.class_object().const_get::<_, magnus::RModule>("Loadscan")?;
    refs.store(4, loadscan.const_get::<_, Value>("CompileCache")?)?;
    refs.store(
        3,
        ruby.class_object().const_get::<_, magnus::RClass>("RubyVM")?.const_get::<_, Value>("InstructionSequence")?,
    )?;
    let Some(mut guard) = lock() else { return Ok(None) };
    if guard.is_some() {
        ON.store(true, Ordering::Relaxed);
        return Ok(None);
    }
    let Some(dir) = dir else { return Ok(None) };
    let file = CacheFile {
        dir: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&bytes(dir))),
        env: bytes(env),
        uid: CacheFile::trusted_uid(),
    };
    let (cache, warning) = file.open_iseq();
    *guard = Some(State { cache, misses: Vec::new(), states: Vec::new() });
    ON.store(true, Ordering::Relaxed);
    Ok(warning)
}

use std::os::unix::ffi::OsStrExt;

/// `compile_cache_flags=(digest)`.
pub fn set_flags(digest: u64) {
    FLAGS.store(digest, Ordering::Relaxed);
}

/// `compile_cache_stop`: every load compiles from now on (what was kept is still written).
pub fn stop() {
    ON.store(false, Ordering::Relaxed);
}

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

#[derive(Clone, Copy)]
enum Figure {
    Hit,
    Miss,
    Bypass,
    BytesRead,
}

static COUNTS: [AtomicU64; 4] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

impl Figure {
    fn add(self, n: u64) {
        COUNTS[self as usize].fetch_add(n, Ordering::Relaxed);
    }
    fn get(self) -> u64 {
        COUNTS[self as usize].load(Ordering::Relaxed)
    }
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

/// `compile_cache_pending`: `[[path, realpath, state], …]` of the compiles kept, for the check
/// at exit of whether each compile warns in its state.
pub fn pending(ruby: &Ruby) -> Result<RArray, Error> {
    let out = ruby.ary_new();
    let Some(mut guard) = lock() else { return Ok(out) };
    let Some(st) = guard.as_mut() else { return Ok(out) };
    let states = st.states.clone();
    for (e, s) in st.cache.pending_mut().iter().zip(states) {
        let mut parts = e.key.splitn(2, |&b| b == 0);
        let path = parts.next().unwrap_or_default();
        let realpath = parts.next().unwrap_or_default();
        out.push((ruby.str_from_slice(path), ruby.str_from_slice(realpath), s))?;
    }
    Ok(out)
}

/// `compile_cache_source(path)`: the file's contents if they still hash as pending entry `i`'s,
/// else nil.
pub fn source(ruby: &Ruby, i: usize) -> Option<RString> {
    let mut guard = lock()?;
    let st = guard.as_mut()?;
    let e = st.cache.pending_mut().get(i)?;
    let path = e.key.split(|&b| b == 0).next()?.to_vec();
    let s = compile_cache::read_source(&path)?;
    (s.hash == e.id.hash).then(|| ruby.str_from_slice(&s.bytes))
}

/// `compile_cache_finish(silent)`: `silent[i]` says whether pending entry `i` compiles without a
/// warning in its state; writes the file under the index's write rule. `:written`, `:clean`,
/// `:skipped` or why the write failed (a String).
pub fn finish(ruby: &Ruby, silent: RArray) -> Result<Value, Error> {
    let writes = state::try_state(|f| f.session.writes().cloned()).flatten();
    let Some(mut guard) = lock() else { return Ok(ruby.to_symbol("skipped").as_value()) };
    let Some(st) = guard.as_mut() else { return Ok(ruby.to_symbol("skipped").as_value()) };
    let states = std::mem::take(&mut st.states);
    for (i, (e, s)) in st.cache.pending_mut().iter_mut().zip(states).enumerate() {
        let quiet: Value = silent.entry(i as isize)?;
        if quiet.to_bool() {
            e.silent = 1 << s;
        }
    }
    let Some(file) = writes else {
        st.cache.pending_mut().clear();
        return Ok(ruby.to_symbol("skipped").as_value());
    };
    Ok(match st.cache.save(&file) {
        Ok(true) => ruby.to_symbol("written").as_value(),
        Ok(false) => ruby.to_symbol("clean").as_value(),
        Err(why) => ruby.str_new(&why).as_value(),
    })
}

/// `compile_cache_stats`: `{hits:, misses:, bypasses:, bytes_read:, bytes_written:, entries:}`.
pub fn stats(ruby: &Ruby) -> Result<RHash, Error> {
    let h = ruby.hash_new();
    let (entries, written, pending) = lock()
        .and_then(|g| {
            g.as_ref().map(|s| (s.cache.figures.entries, s.cache.figures.bytes_written, s.cache.figures.pending))
        })
        .unwrap_or_default();
    h.aset(ruby.to_symbol("hits"), Figure::Hit.get())?;
    h.aset(ruby.to_symbol("misses"), Figure::Miss.get())?;
    h.aset(ruby.to_symbol("bypasses"), Figure::Bypass.get())?;
    h.aset(ruby.to_symbol("bytes_read"), Figure::BytesRead.get())?;
    h.aset(ruby.to_symbol("bytes_written"), written)?;
    h.aset(ruby.to_symbol("entries"), entries)?;
    h.aset(ruby.to_symbol("pending"), pending)?;
    Ok(h)
}
