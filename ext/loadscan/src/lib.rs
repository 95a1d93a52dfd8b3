//! `loadscan.so`: the Ruby binding of `loadscan-core`. It converts Ruby values to the core's
//! types and back, and holds the process-wide state; every decision (answers, the cache file,
//! `$LOAD_PATH` entry rules) is the core's.
//!
//! - `native.rs`: `Loadscan::Native`'s functions; `decorator.rs`: `Decorator#require` and
//!   `#resolve_feature_path`, the methods put in place of Ruby's C `require` and of
//!   `$LOAD_PATH.resolve_feature_path`;
//! - `state.rs`: every static and the one lock policy; `load_path.rs`: the `$LOAD_PATH` mirror;
//! - `convert.rs`: every conversion of an answer, figure or problem to Ruby; `options.rs`:
//!   `start`'s keywords; `hooks.rs`: the callables told what happens; `nogvl.rs`: the GVL; `ticker.rs`: the GC
//!   deferral's clock (its decisions in `ticker/deferral.rs`); `profile/`: the boot profile's file,
//!   from its entries, its stack sampler and its GC clock.

mod compile_cache;
mod convert;
mod decorator;
mod hooks;
mod load_path;
mod native;
mod nogvl;
mod options;
mod profile;
mod state;
mod sys;
mod ticker;

use loadscan_core::{ProblemKind, ScanOptions, Validation};
use magnus::rb_sys::AsRawValue;
use magnus::{function, method, prelude::*, Error, RModule, RString, Ruby, Value};

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let native = ruby.define_module("Loadscan")?.define_module("Native")?;
    options::intern(ruby);
    hooks::init(ruby);
    compile_cache::init(ruby);
    native.define_module_function("start", function!(native::start, 2))?;
    native.define_module_function("stop", function!(native::stop, 0))?;
    native.define_module_function("save", function!(native::save, 0))?;
    native.define_module_function("relist_racy", function!(native::relist_racy, 0))?;
    native.define_module_function("finish", function!(native::finish, 1))?;
    native.define_module_function("set_readonly", function!(native::set_readonly, 1))?;
    native.define_module_function("clear_cache", function!(native::clear_cache, 1))?;
    native.define_module_function("read_last_boot", function!(native::read_last_boot, 1))?;
    native.define_module_function("lookup", function!(native::lookup, 1))?;
    native.define_module_function("problems", function!(native::problems, 0))?;
    native.define_module_function("stats", function!(native::stats, 0))?;
    native.define_module_function("probes", function!(native::probes, 0))?;
    native.define_module_function("explain", function!(native::explain, 1))?;
    native.define_module_function("stems", function!(native::stems, 0))?;
    native.define_module_function("unseeded_hash", function!(native::unseeded_hash, 1))?;
    native.define_module_function("hold_for_fork", function!(native::hold_for_fork, 0))?;
    native.define_module_function("release_after_fork", function!(native::release_after_fork, 0))?;
    native.define_module_function(
        "start_ticker",
        function!(
            |gc: Value, loadscan: Value, limits: ticker::Limits| ticker::start(gc.as_raw(), loadscan.as_raw(), limits),
            3
        ),
    )?;
    native.define_module_function("stop_ticker", function!(|| ticker_state(ticker::stop()), 0))?;
    native.define_module_function("ticker_state", function!(|| ticker_state(ticker::state()), 0))?;
    native.define_module_function("speedscope", function!(profile::speedscope::speedscope, 4))?;
    native.define_module_function("start_sampler", function!(profile::sampler::start, 2))?;
    native.define_module_function("stop_sampler", function!(profile::sampler::stop, 0))?;
    native.define_module_function("start_gc_clock", function!(profile::gc_clock::start, 1))?;
    native.define_module_function("gc_clock", function!(profile::gc_clock::now, 0))?;
    native.define_module_function("stop_gc_clock", function!(profile::gc_clock::stop, 0))?;
    native.define_module_function("copy_xattrs", function!(native::copy_xattrs, 2))?;
    native.define_module_function("compile_cache_start", function!(compile_cache::start, 4))?;
    native.define_module_function("compile_cache_flags=", function!(compile_cache::set_flags, 1))?;
    native.define_module_function("compile_cache_stop", function!(compile_cache::stop, 0))?;
    native.define_module_function("compile_cache_compiled", function!(compile_cache::compiled, 1))?;
    native.define_module_function("compile_cache_pending", function!(compile_cache::pending, 0))?;
    native.define_module_function("compile_cache_source", function!(compile_cache::source, 1))?;
    native.define_module_function("compile_cache_finish", function!(compile_cache::finish, 1))?;
    native.define_module_function("compile_cache_stats", function!(compile_cache::stats, 0))?;
    // Prepended to RubyVM::InstructionSequence's singleton class (lib/loadscan/compile_cache.rb).
    let iseq_hook = native.define_module("CompileCache")?;
    unsafe { rb_sys::rb_ext_ractor_safe(true) };
    let defined = iseq_hook.define_method("load_iseq", method!(compile_cache::load_iseq, 1));
    unsafe { rb_sys::rb_ext_ractor_safe(false) };
    defined?;
    let decorator = native.define_module("Decorator")?;
    // Ractor-safe: called in any Ractor, it serves only the one that started loadscan and sends
    // the others to Ruby's own require (state.rs).
    unsafe { rb_sys::rb_ext_ractor_safe(true) };
    let defined = decorator.define_method("require", method!(decorator::require, 1));
    unsafe { rb_sys::rb_ext_ractor_safe(false) };
    defined?;
    decorator.define_method("resolve_feature_path", method!(decorator::resolve_feature_path, 1))?;
    let probe = ruby.str_from_slice(loadscan_core::PROBE);
    probe.freeze();
    native.const_set("PROBE", probe)?;
    let string = |s: &str| ruby.str_new(s).as_value();
    let symbol = |s: &str| ruby.to_symbol(s).as_value();
    native.const_set("CACHE_FILE", frozen(ruby, loadscan_core::CACHE_FILE))?;
    native.const_set("LAST_BOOT_FILE", frozen(ruby, loadscan_core::LAST_BOOT_FILE))?;
    native.const_set("ISEQ_FILE", frozen(ruby, loadscan_core::ISEQ_FILE))?;
    native.const_set("SPEEDSCOPE_VERSION", loadscan_profile::SPEEDSCOPE_VERSION)?;
    frozen_list(ruby, native, "VALIDATIONS", Validation::ALL.iter().map(|v| string(v.name())))?;
    // The core's scan defaults, which `Loadscan::Config` reads instead of spelling them again.
    let defaults = ScanOptions::default();
    let ignored = defaults.skip_dirs.iter().map(|d| ruby.str_from_slice(d).as_value());
    frozen_list(ruby, native, "DEFAULT_IGNORE_DIRS", ignored)?;
    native.const_set("DEFAULT_LAZY", defaults.eager_depth == ScanOptions::LAZY)?;
    frozen_list(ruby, native, "PROBLEM_KINDS", ProblemKind::ALL.iter().map(|k| symbol(k.name())))?;
    let quiet = ProblemKind::ALL.into_iter().filter(|k| !k.warns());
    frozen_list(ruby, native, "QUIET_PROBLEM_KINDS", quiet.map(|k| symbol(k.name())))
}

/// A frozen String of the core's (a name Ruby reads instead of spelling it again).
fn frozen(ruby: &Ruby, s: &str) -> RString {
    let s = ruby.str_new(s);
    s.freeze();
    s
}

/// Sets `module::name` to a frozen Array of `values` (frozen Strings or Symbols): the core's
/// names, which Ruby reads instead of spelling them again.
fn frozen_list(ruby: &Ruby, module: RModule, name: &str, values: impl Iterator<Item = Value>) -> Result<(), Error> {
    let list = ruby.ary_from_iter(values.inspect(|v| v.freeze()));
    list.freeze();
    module.const_set(name, list)
}

/// `[budget runs, the end the tick made or nil]` (ticker.rs).
fn ticker_state((runs, ended): (u64, rb_sys::VALUE)) -> (u64, Value) {
    (runs, unsafe { <Value as magnus::rb_sys::FromRawValue>::from_raw(ended) })
}
