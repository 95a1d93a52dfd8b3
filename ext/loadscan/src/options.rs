//! `Native.start`'s keyword options, read with keys interned once (as wasmtime-rb's `config.rs`
//! does) and converted to the core's types. Unknown keys raise an `ArgumentError` naming them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use loadscan_core::{CacheFile, ScanOptions, Settings, SyncPolicy, Validation};
use magnus::r_hash::ForEach;
use magnus::value::LazyId;
use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby, Symbol, TryConvert, Value};

use crate::convert::bytes;
use crate::hooks::Hooks;

/// Declares each key once: a static per key, and [`KEYS`], every one of them.
macro_rules! keys {
    ($($name:ident = $symbol:literal),* $(,)?) => {
        $(static $name: LazyId = LazyId::new($symbol);)*
        /// Every key `start` reads.
        static KEYS: &[&LazyId] = &[$(&$name),*];
    };
}

keys! {
    DLEXT = "dlext",
    THREADS = "threads",
    CACHE_DIR = "cache_dir",
    ENV_KEY = "env_key",
    VALIDATE = "validate",
    STABLE_DIRS = "stable_dirs",
    LAZY = "lazy",
    READONLY = "readonly",
    ON_PROBLEMS = "on_problems",
    ON_DEFER = "on_defer",
    ON_RESCAN = "on_rescan",
    IGNORE_NAMES = "ignore_names",
    IGNORE_PATHS = "ignore_paths",
}

/// Interns every key (called from `init`, so that no later comparison can panic).
pub fn intern(ruby: &Ruby) {
    for id in KEYS {
        LazyId::force(id, ruby);
    }
}

/// What `start` was asked to do.
pub struct Start {
    /// The session's settings.
    pub settings: Settings,
    /// The callables to tell what happens.
    pub hooks: Hooks,
}

/// Reads `{dlext:, threads:, cache_dir:, env_key:, validate:, stable_dirs:, lazy:,
/// readonly:, on_problems:, on_defer:, on_rescan:, ignore_names:, ignore_paths:}`; every key is optional.
///
/// - `dlext` (String): native extensions' extension, empty or absent for the core's default;
/// - `threads` (Integer): scan threads, 0 or absent for the core's default;
/// - `cache_dir` (String or nil): where the cache lives, nil or absent for no cache;
/// - `env_key` (String): what a cache must have been written for (see `CacheFile::env`);
/// - `validate` (a [`Validation::name`]: `"mtime"`, the default, or `"listing"`): how cached
///   roots are checked (LOADSCAN_VALIDATE);
/// - `stable_dirs` (Array of String): directories checked with one `stat`;
/// - `lazy` (true/false, absent for the core's default, lazy): false lists every directory up
///   front (LOADSCAN_LAZY=0);
/// - `readonly` (true/false, absent: false): read the cache, write neither it nor the last
///   boot's record ([`Settings::readonly`]);
/// - `on_problems`, `on_defer`, `on_rescan` (callable or nil): see [`Hooks`];
/// - `ignore_names` (Array of String): directory names never listed (default `node_modules`);
/// - `ignore_paths` (Array of String): absolute directories never listed;
pub fn parse(ruby: &Ruby, opts: RHash) -> Result<Start, Error> {
    let mut scan = ScanOptions::default();
    let mut validation = Validation::default();
    let mut stable = Vec::new();
    let (mut dir, mut env): (Option<PathBuf>, Vec<u8>) = (None, Vec::new());
    let mut on_problems = ruby.qnil().as_value();
    let mut on_defer = ruby.qnil().as_value();
    let mut on_rescan = ruby.qnil().as_value();
    let mut readonly = false;
    let mut unknown = Vec::new();
    opts.foreach(|key: Value, value: Value| {
        let Some(k) = Symbol::from_value(key) else {
            unknown.push(key.inspect());
            return Ok(ForEach::Continue);
        };
        if k == DLEXT {
            let dlext = bytes(RString::try_convert(value)?);
            if !dlext.is_empty() {
                scan.dlext = dlext;
            }
        } else if k == THREADS {
            let threads = usize::try_convert(value)?;
            if threads > 0 {
                scan.threads = threads;
            }
        } else if k == CACHE_DIR {
            dir = Option::<RString>::try_convert(value)?.map(|d| PathBuf::from(OsStr::from_bytes(&bytes(d))));
        } else if k == ENV_KEY {
            env = bytes(RString::try_convert(value)?);
        } else if k == VALIDATE {
            let name = String::try_convert(value)?;
            validation = Validation::named(&name).ok_or_else(|| {
                let names: Vec<String> = Validation::ALL.iter().map(|v| format!("{:?}", v.name())).collect();
                let message = format!("validate: must be {}, not {name:?}", names.join(" or "));
                Error::new(ruby.exception_arg_error(), message)
            })?;
        } else if k == STABLE_DIRS {
            stable = Vec::<String>::try_convert(value)?.into_iter().map(PathBuf::from).collect();
        } else if k == LAZY {
            scan.set_lazy(value.to_bool());
        } else if k == READONLY {
            readonly = value.to_bool();
        } else if k == IGNORE_NAMES {
            scan.skip_dirs = byte_strings(value)?;
        } else if k == IGNORE_PATHS {
            scan.skip_paths = byte_strings(value)?.into_iter().map(|p| PathBuf::from(OsStr::from_bytes(&p))).collect();
        } else if k == ON_PROBLEMS {
            on_problems = value;
        } else if k == ON_DEFER {
            on_defer = value;
        } else if k == ON_RESCAN {
            on_rescan = value;
        } else {
            unknown.push(key.inspect());
        }
        Ok(ForEach::Continue)
    })?;
    if !unknown.is_empty() {
        let s = if unknown.len() > 1 { "s" } else { "" };
        return Err(Error::new(ruby.exception_arg_error(), format!("unknown keyword{s}: {}", unknown.join(", "))));
    }
    // The cache belongs to this process's user (`CacheFile::trusted_uid`).
    let cache = dir.map(|dir| CacheFile { dir, env, uid: CacheFile::trusted_uid() });
    let policy = SyncPolicy { scan, validation, stable };
    let settings = Settings { policy, cache, readonly };
    Ok(Start { settings, hooks: Hooks { on_problems, on_defer, on_rescan } })
}

/// An Array of Strings as bytes (directory names need not be UTF-8).
fn byte_strings(value: Value) -> Result<Vec<Vec<u8>>, Error> {
    let array = RArray::try_convert(value)?;
    (0..array.len()).map(|i| array.entry::<RString>(i as isize).map(bytes)).collect()
}
