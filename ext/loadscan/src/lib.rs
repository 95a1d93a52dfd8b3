//! `loadscan.so`: the Ruby binding of `loadscan-core`. It only converts types and maps the
//! core's answers to Ruby values; the logic lives in the core crate.
//!
//! Defines `Loadscan::Native`:
//! - `start(load_path, **options)`, `stop` — follow `$LOAD_PATH` with an optional cache (or stop
//!   doing so); new scan problems go to the `on_problems:` callable (`options.rs`);
//! - `save` — write the cache if anything changed;
//! - `resolve(feature)` — the path `require` would load now, or `nil` (Ruby decides);
//! - `lookup(feature)` — the index's answer: a path, `:missing` or `:unknown`;
//! - `sync`, `problems`, `stats`;
//! - `hold_for_fork`, `release_after_fork` — the state lock around a `fork` (core_ext/process.rb);
//! - `probes`, `PROBE` — how many times the probe feature reached `resolve` (is loadscan engaged?);
//! - `Decorator#require`, `Decorator#resolve_feature_path` — the methods put in place of Ruby's
//!   C `require` and of `$LOAD_PATH.resolve_feature_path` (decorator.rs).

mod decorator;
mod load_path;
mod nogvl;
mod options;
mod resolver;

use loadscan_core::{Kind, ProblemKind};
use magnus::value::{Lazy, LazyId};
use magnus::{function, prelude::*, Error, RArray, RHash, RString, Ruby, Value};
use resolver::Answer;

/// A copy of a String argument's bytes (Ruby code run during a lookup — a `to_path` of a
/// `$LOAD_PATH` entry — could otherwise change them under us). Only real Strings take the fast
/// path; anything else (to_path / to_str objects, wrong types) goes to Ruby's require, which
/// converts or raises exactly as it always does.
///
/// A name Ruby's `require` would not look for byte for byte goes to Ruby too: one in an
/// ASCII-incompatible encoding (UTF-16…: Ruby raises), and one that `rb_get_path`'s
/// `file_path_convert` transcodes (`Encoding.default_internal` set, non-ASCII, in an encoding
/// other than the file system's). The indexed path built for such a name would carry the
/// name's encoding and be transcoded again by Ruby's `require`.
pub(crate) fn string_bytes(v: Value) -> Option<Vec<u8>> {
    use magnus::rb_sys::AsRawValue;
    let s = RString::from_value(v)?;
    let raw = s.as_raw();
    unsafe {
        let idx = rb_sys::rb_enc_get_index(raw);
        if idx != rb_sys::rb_usascii_encindex() && idx != rb_sys::rb_ascii8bit_encindex() {
            let enc = rb_sys::rb_enc_from_index(idx);
            if enc.is_null() || (*enc).min_enc_len != 1 || rb_sys::rb_enc_dummy_p(enc) != 0 {
                return None;
            }
            let fs = rb_sys::rb_filesystem_encindex();
            if fs != idx
                && !rb_sys::rb_default_internal_encoding().is_null()
                && rb_sys::rb_enc_str_asciionly_p(raw) == 0
            {
                return None;
            }
        }
    }
    Some(unsafe { s.as_slice() }.to_vec())
}

/// A found file's path in the encoding Ruby's search gives it (`File.expand_path` of the feature
/// against the entry): the feature's own encoding, except that an ASCII-8BIT or US-ASCII
/// feature gives the file system's encoding (the entry's).
pub(crate) fn path_string(ruby: &Ruby, path: &[u8], like: Value) -> RString {
    use magnus::rb_sys::AsRawValue;
    let s = ruby.str_from_slice(path);
    unsafe {
        let idx = rb_sys::rb_enc_get_index(like.as_raw());
        let idx = if idx == rb_sys::rb_ascii8bit_encindex() || idx == rb_sys::rb_usascii_encindex() {
            rb_sys::rb_filesystem_encindex()
        } else {
            idx
        };
        rb_sys::rb_enc_associate_index(s.as_raw(), idx);
    }
    s
}

/// `start(load_path, **options)` (see `options::parse` for the keys): starts following
/// `load_path` with an optional cache. Returns nil, or why an existing cache could not be used.
fn start(ruby: &Ruby, load_path: RArray, opts: RHash) -> Result<Option<String>, Error> {
    let start = options::parse(ruby, opts)?;
    ruby.get_inner(&HOOKS).store(0, start.on_problems)?;
    ruby.get_inner(&HOOKS).store(1, start.on_defer)?;
    ruby.get_inner(&HOOKS).store(2, start.on_rescan)?;
    let raw = magnus::rb_sys::AsRawValue::as_raw(load_path);
    Ok(resolver::start(raw, &start.dlext, start.policy, start.cache, start.static_ext))
}

/// `save`: `:written`, `:clean` (nothing changed), `:skipped` (no cache), or the reason the
/// write failed (a String).
fn save(ruby: &Ruby) -> Value {
    match resolver::save() {
        resolver::Saved::Written => ruby.to_symbol("written").as_value(),
        resolver::Saved::Clean => ruby.to_symbol("clean").as_value(),
        resolver::Saved::Skipped => ruby.to_symbol("skipped").as_value(),
        resolver::Saved::Failed(why) => ruby.str_new(&why).as_value(),
    }
}

/// The `on_problems` (index 0), `on_defer` (1) and `on_rescan` (2) callables given to `start`
/// (nil for none), kept alive by the GC mark that `Lazy` gives them.
static HOOKS: Lazy<RArray> = Lazy::new(|ruby| ruby.ary_new_from_values(&[ruby.qnil().as_value(); 3]));
static CALL: LazyId = LazyId::new("call");

/// Hands what syncs and scans since the last report did to the callables given to `start`:
/// rescans to `on_rescan`, problems to `on_problems` (called with no lock of ours held, during
/// the `require` whose scan found them; what they raise is ignored: a failure to warn never
/// fails a require). Two atomic loads when there is nothing to report.
pub(crate) fn report_pending(ruby: &Ruby) {
    report_rescan(ruby);
    let new = resolver::unreported_problems();
    if new.is_empty() {
        return;
    }
    let Ok(hook) = ruby.get_inner(&HOOKS).entry::<Value>(0) else { return };
    if !hook.is_nil() {
        let _: Result<Value, Error> = hook.funcall(LazyId::get_inner_with(&CALL, ruby), (problem_array(ruby, new),));
    }
}

/// Tells the `on_rescan` callable given to `start` what syncs since the last report scanned:
/// `(roots_scanned, roots_refreshed, ms)` (a `$LOAD_PATH` change during the boot); what it
/// raises is ignored.
fn report_rescan(ruby: &Ruby) {
    let Some((scanned, refreshed, ms)) = resolver::take_rescan() else { return };
    let Ok(hook) = ruby.get_inner(&HOOKS).entry::<Value>(2) else { return };
    if !hook.is_nil() {
        let _: Result<Value, Error> = hook.funcall(LazyId::get_inner_with(&CALL, ruby), (scanned, refreshed, ms));
    }
}

/// Tells the `on_defer` callable given to `start` that `feature` goes to Ruby's own `require`,
/// and why (a `Loadscan.stats[:left_to_ruby]` key). Only in the Ractor that started loadscan
/// (the callable is one of its objects); what it raises is ignored, as for `report_pending`.
pub(crate) fn report_deferral(ruby: &Ruby, feature: Value, reason: resolver::Reason) {
    if !resolver::in_main_ractor() {
        return;
    }
    let Ok(hook) = ruby.get_inner(&HOOKS).entry::<Value>(1) else { return };
    if !hook.is_nil() {
        let why = ruby.to_symbol(reason.name());
        let _: Result<Value, Error> = hook.funcall(LazyId::get_inner_with(&CALL, ruby), (feature, why));
    }
}

/// `resolve(feature)`: the absolute path to require, `false` when Ruby would answer `false`
/// (already loaded), or `nil` when Ruby's own `require` must decide. The probe feature
/// (`Loadscan::Native::PROBE`) is counted and raises a `LoadError` without a `path`, so no
/// layer in front of loadscan does anything with it (RubyGems retries only its own path).
fn resolve(ruby: &Ruby, feature: Value) -> Result<Value, Error> {
    let answer = match string_bytes(feature) {
        Some(bytes) => match resolver::try_resolve(&bytes)? {
            resolver::Resolved::Path(p) => path_string(ruby, &p, feature).as_value(),
            resolver::Resolved::Loaded => ruby.qfalse().as_value(),
            resolver::Resolved::Defer(_) | resolver::Resolved::Missing => ruby.qnil().as_value(),
            resolver::Resolved::Probe => {
                return Err(Error::new(ruby.exception_load_error(), "loadscan: probe reached the decorator"))
            }
        },
        None => {
            resolver::count_deferred(resolver::Reason::NotString);
            ruby.qnil().as_value()
        }
    };
    report_pending(ruby);
    Ok(answer)
}

fn lookup(ruby: &Ruby, feature: Value) -> Result<Value, Error> {
    let answer = match string_bytes(feature) {
        Some(bytes) => resolver::try_lookup(&bytes)?,
        None => Answer::Unknown,
    };
    report_pending(ruby);
    Ok(match answer {
        Answer::Path(p) => path_string(ruby, &p, feature).as_value(),
        Answer::Missing => ruby.to_symbol("missing").as_value(),
        Answer::Unknown => ruby.to_symbol("unknown").as_value(),
    })
}

fn sync(ruby: &Ruby) -> Option<usize> {
    let roots = resolver::sync();
    report_pending(ruby);
    roots
}

/// `[[kind, message], …]`; kind is `:loop`, `:dangling`, `:unreadable`, `:too_large`, `:failed` or
/// `:vanished`. Only dangling links are harmless (Ruby cannot open them either); the others
/// are blind spots where lookups go to Ruby's require.
fn problems(ruby: &Ruby) -> RArray {
    problem_array(ruby, resolver::problems())
}

fn problem_array(ruby: &Ruby, problems: Vec<(ProblemKind, String)>) -> RArray {
    let out = ruby.ary_new();
    for (kind, message) in problems {
        let kind = match kind {
            ProblemKind::Loop => "loop",
            ProblemKind::Dangling => "dangling",
            ProblemKind::Unreadable => "unreadable",
            ProblemKind::TooLarge => "too_large",
            ProblemKind::Vanished => "vanished",
            ProblemKind::Failed => "failed",
            ProblemKind::CaseFolding => "case_folding",
        };
        let _ =
            out.push(ruby.ary_new_from_values(&[ruby.to_symbol(kind).as_value(), ruby.str_new(&message).as_value()]));
    }
    out
}

fn stats(ruby: &Ruby) -> Result<Option<RHash>, Error> {
    let Some(s) = resolver::stats() else {
        return Ok(None);
    };
    let h = ruby.hash_new();
    h.aset(ruby.to_symbol("roots_scanned"), s.roots_scanned)?;
    h.aset(ruby.to_symbol("roots_refreshed"), s.roots_refreshed)?;
    h.aset(ruby.to_symbol("roots_from_cache"), s.roots_from_cache)?;
    h.aset(ruby.to_symbol("features"), s.features)?;
    h.aset(ruby.to_symbol("scans"), s.scans)?;
    h.aset(ruby.to_symbol("load_path_entries"), s.load_path_entries)?;
    h.aset(ruby.to_symbol("hits"), s.hits)?;
    h.aset(ruby.to_symbol("misses"), s.misses)?;
    h.aset(ruby.to_symbol("deferred"), s.deferred.iter().sum::<usize>())?;
    let why = ruby.hash_new();
    for (reason, n) in resolver::Reason::ALL.iter().zip(s.deferred) {
        why.aset(ruby.to_symbol(reason.name()), n)?;
    }
    h.aset(ruby.to_symbol("left_to_ruby"), why)?;
    let ms = |d: std::time::Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
    h.aset(ruby.to_symbol("cache_load_ms"), ms(s.timings.load))?;
    h.aset(ruby.to_symbol("expand_ms"), ms(s.timings.expand))?;
    h.aset(ruby.to_symbol("sync_ms"), ms(s.timings.sync))?;
    h.aset(ruby.to_symbol("dirs_listed_lazily"), s.lazy.listed)?;
    h.aset(ruby.to_symbol("lazy_ms"), ms(s.lazy.time))?;
    Ok(Some(h))
}

/// `explain(feature)`: `{candidates: [[rank, root, :rb | :so], …], blind: [[rank, root, dir], …],
/// deferred: [[rank, root, dir], …]}` (ranks are load-path positions), or nil.
fn explain(ruby: &Ruby, feature: RString) -> Result<Option<RHash>, Error> {
    let Some(e) = resolver::explain(unsafe { feature.as_slice() }) else { return Ok(None) };
    let h = ruby.hash_new();
    let kind = |k: Kind| ruby.to_symbol(if k == Kind::Rb { "rb" } else { "so" });
    let candidates = ruby.ary_new();
    for (rank, root, k) in e.candidates {
        candidates.push((rank, ruby.str_from_slice(&root), kind(k)))?;
    }
    h.aset(ruby.to_symbol("candidates"), candidates)?;
    for (name, gaps) in [("blind", e.blind), ("deferred", e.deferred)] {
        let list = ruby.ary_new();
        for (rank, root, dir) in gaps {
            list.push((rank, ruby.str_from_slice(&root), ruby.str_from_slice(&dir)))?;
        }
        h.aset(ruby.to_symbol(name), list)?;
    }
    Ok(Some(h))
}

/// `stems`: every stem the index holds for the current load path.
fn stems(ruby: &Ruby) -> RArray {
    let out = ruby.ary_new();
    for stem in resolver::stems() {
        let _ = out.push(ruby.str_from_slice(&stem));
    }
    out
}

/// `stable_hash(string)`: 16 hex digits, the same in every process and on every machine (names
/// the per-program cache directory of a script outside any app).
fn stable_hash(s: RString) -> String {
    format!("{:016x}", loadscan_core::stable_hash(unsafe { s.as_slice() }))
}

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let native = ruby.define_module("Loadscan")?.define_module("Native")?;
    options::intern(ruby);
    LazyId::force(&CALL, ruby);
    Lazy::force(&HOOKS, ruby);
    native.define_module_function("start", function!(start, 2))?;
    native.define_module_function("save", function!(save, 0))?;
    native.define_module_function("stop", function!(resolver::stop, 0))?;
    native.define_module_function("resolve", function!(resolve, 1))?;
    native.define_module_function("lookup", function!(lookup, 1))?;
    native.define_module_function("sync", function!(sync, 0))?;
    native.define_module_function("problems", function!(problems, 0))?;
    native.define_module_function("stats", function!(stats, 0))?;
    native.define_module_function("probes", function!(resolver::probes, 0))?;
    native.define_module_function("stable_hash", function!(stable_hash, 1))?;
    native.define_module_function("hold_for_fork", function!(resolver::hold_for_fork, 0))?;
    native.define_module_function("release_after_fork", function!(resolver::release_after_fork, 0))?;
    native.define_module_function("explain", function!(explain, 1))?;
    native.define_module_function("stems", function!(stems, 0))?;
    let decorator = native.define_module("Decorator")?;
    // Ractor-safe: called in any Ractor, it serves only the one that started loadscan and sends
    // the others to Ruby's own require (resolver.rs).
    unsafe { rb_sys::rb_ext_ractor_safe(true) };
    let defined = decorator.define_method("require", magnus::method!(decorator::require, 1));
    unsafe { rb_sys::rb_ext_ractor_safe(false) };
    defined?;
    decorator.define_method("resolve_feature_path", magnus::method!(decorator::resolve_feature_path, 1))?;
    let probe = ruby.str_from_slice(resolver::PROBE);
    probe.freeze();
    native.const_set("PROBE", probe)?;
    Ok(())
}
