//! `loadscan.so`: the Ruby binding of `loadscan-core`. It only converts types and maps the
//! core's answers to Ruby values; the logic lives in the core crate.
//!
//! Defines `Loadscan::Native`:
//! - `start(load_path, dlext, threads)`, `stop` — follow `$LOAD_PATH` (or stop doing so);
//! - `resolve(feature)` — the path `require` would load now, or `nil` (Ruby decides);
//! - `lookup(feature)` — the index's answer: a path, `:missing` or `:unknown`;
//! - `sync`, `take_problems`, `stats`.

mod load_path;
mod nogvl;
mod resolver;

use magnus::{function, prelude::*, Error, RArray, RHash, RString, Ruby, Value};
use loadscan_core::scan::ProblemKind;
use resolver::Answer;

fn string_bytes(v: Value) -> Option<Vec<u8>> {
    // Only real Strings take the fast path; anything else (to_path / to_str objects, wrong
    // types) goes to Ruby's require, which converts or raises exactly as it always does.
    let s = RString::from_value(v)?;
    Some(unsafe { s.as_slice() }.to_vec())
}

fn path_string(ruby: &Ruby, path: &[u8], like: Value) -> RString {
    let s = ruby.str_from_slice(path);
    unsafe { rb_sys::rb_enc_copy(magnus::rb_sys::AsRawValue::as_raw(s), magnus::rb_sys::AsRawValue::as_raw(like)) };
    s
}

fn start(load_path: RArray, dlext: RString, threads: usize) -> Result<(), Error> {
    let mut options = loadscan_core::scan::ScanOptions::default();
    let dlext = unsafe { dlext.as_slice() };
    if !dlext.is_empty() {
        options.dlext = dlext.to_vec();
    }
    if threads > 0 {
        options.threads = threads;
    }
    resolver::start(magnus::rb_sys::AsRawValue::as_raw(load_path), options);
    Ok(())
}

fn resolve(ruby: &Ruby, feature: Value) -> Option<RString> {
    let bytes = string_bytes(feature)?;
    resolver::resolve(&bytes).map(|p| path_string(ruby, &p, feature))
}

fn lookup(ruby: &Ruby, feature: Value) -> Value {
    let answer = match string_bytes(feature) {
        Some(bytes) => resolver::lookup(&bytes),
        None => Answer::Unknown,
    };
    match answer {
        Answer::Path(p) => path_string(ruby, &p, feature).as_value(),
        Answer::Missing => ruby.to_symbol("missing").as_value(),
        Answer::Unknown => ruby.to_symbol("unknown").as_value(),
    }
}

fn sync() -> Option<usize> {
    resolver::sync()
}

/// `[[kind, message], …]`; kind is `:loop`, `:dangling`, `:unreadable`, `:too_large` or
/// `:vanished`. Only dangling links are harmless (Ruby cannot open them either); the others
/// are blind spots where lookups go to Ruby's require.
fn take_problems(ruby: &Ruby) -> RArray {
    let out = ruby.ary_new();
    for (kind, message) in resolver::take_problems() {
        let kind = match kind {
            ProblemKind::Loop => "loop",
            ProblemKind::Dangling => "dangling",
            ProblemKind::Unreadable => "unreadable",
            ProblemKind::Skipped => "skipped",
            ProblemKind::TooLarge => "too_large",
            ProblemKind::Vanished => "vanished",
        };
        let _ = out.push(ruby.ary_new_from_values(&[ruby.to_symbol(kind).as_value(), ruby.str_new(&message).as_value()]));
    }
    out
}

fn stats(ruby: &Ruby) -> Result<Option<RHash>, Error> {
    let Some((roots, features, scans, entries)) = resolver::stats() else { return Ok(None) };
    let h = ruby.hash_new();
    h.aset(ruby.to_symbol("roots_scanned"), roots)?;
    h.aset(ruby.to_symbol("features"), features)?;
    h.aset(ruby.to_symbol("scans"), scans)?;
    h.aset(ruby.to_symbol("load_path_entries"), entries)?;
    Ok(Some(h))
}

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let native = ruby.define_module("Loadscan")?.define_module("Native")?;
    native.define_module_function("start", function!(start, 3))?;
    native.define_module_function("stop", function!(resolver::stop, 0))?;
    native.define_module_function("resolve", function!(resolve, 1))?;
    native.define_module_function("lookup", function!(lookup, 1))?;
    native.define_module_function("sync", function!(sync, 0))?;
    native.define_module_function("take_problems", function!(take_problems, 0))?;
    native.define_module_function("stats", function!(stats, 0))?;
    Ok(())
}
