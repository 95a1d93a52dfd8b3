//! The compile cache's side of the binding (the store: `loadscan_core::compile_cache`):
//! `Loadscan::Native::CompileCache#load_iseq`, the method Ruby calls (through the module
//! prepended to `RubyVM::InstructionSequence`'s singleton class) before it compiles a file it
//! loads, and the calls lib/loadscan/compile_cache.rb makes at setup and at exit.
//!
//! This file holds the cache's life and its statics: the state behind one lock, `start`, the
//! flags, `stop`, the figures, and what runs at exit (`pending`, `source`, `finish`, `stats`).
//! The hot path, `load_iseq` and the `compiled` TracePoint's block that keeps a miss's compile,
//! is in [`load`].

mod load;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use loadscan_core::compile_cache::{self, CompileCache, Id};
use loadscan_core::CacheFile;
use magnus::value::{Lazy, LazyId, ReprValue};
use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby, Value};

use crate::convert::bytes;
use crate::state;

pub use load::{compiled, load_iseq};

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
