//! What a scan looks for and how far it goes.

/// Options of a scan. `ScanOptions::default()` is what `require` on Linux needs. A boot's come
/// from Ruby's `Loadscan::Config`, which sets `skip_dirs` and `eager_depth` always (defaulting to
/// these, read as `Loadscan::Native::DEFAULT_IGNORE_DIRS` and `DEFAULT_LAZY`); the binding falls back to these for `dlext` (no RbConfig:
/// `--disable-gems`) and `threads` (0) alone. The core's tests and examples use them all.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// The native extension's suffix without the dot (`RbConfig::CONFIG["DLEXT"]`).
    pub dlext: Vec<u8>,
    /// Skip directories whose name starts with a dot (`.git`): they become blind spots.
    pub skip_dot_dirs: bool,
    /// Directory names never descended into (they become blind spots): `LOADSCAN_IGNORE_DIRS`'s
    /// names, `node_modules` by default.
    pub skip_dirs: Vec<Vec<u8>>,
    /// Absolute directories never listed (`LOADSCAN_IGNORE_DIRS`'s paths): a root or a directory
    /// reached at exactly that path (root joined with the names listed) is a blind spot.
    pub skip_paths: Vec<std::path::PathBuf>,
    /// Deepest directory level listed below a root.
    pub max_depth: usize,
    /// Deepest directory level listed up front; deeper directories are recorded as
    /// [`super::Listing::deferred`] and listed when a lookup needs them.
    /// [`ScanOptions::LAZY`] (the default, as loadscan ships: `LOADSCAN_LAZY=0` changes it)
    /// lists only each root's own entries; [`ScanOptions::EAGER`] lists everything up front.
    pub eager_depth: usize,
    /// Most directories listed under one root before the whole root is left to Ruby.
    pub max_dirs: usize,
    /// Most loadable files kept for one root before the whole root is left to Ruby.
    pub max_files: usize,
    /// Worker threads for a scan (1 means the calling thread alone; threads that cannot be
    /// started are done without).
    pub threads: usize,
    /// Called with each directory's path right before it is listed (tests inject faults here:
    /// a panic blinds that directory).
    pub before_list: ListHook,
}

/// What [`ListHook`] calls, with the directory's path.
pub type ListFn = dyn Fn(&std::path::Path) + Send + Sync;

/// A function called before each directory is listed ([`ScanOptions::before_list`]).
#[derive(Clone, Default)]
pub struct ListHook(pub Option<std::sync::Arc<ListFn>>);

impl std::fmt::Debug for ListHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "ListHook(Some)" } else { "ListHook(None)" })
    }
}

impl ScanOptions {
    /// The [`ScanOptions::eager_depth`] that lists only each root's own entries up front, the
    /// rest as lookups need them: the default.
    pub const LAZY: usize = 0;
    /// The [`ScanOptions::eager_depth`] that lists every directory up front.
    pub const EAGER: usize = usize::MAX;

    /// Lists lazily ([`ScanOptions::LAZY`]) or every directory up front ([`ScanOptions::EAGER`]).
    pub fn set_lazy(&mut self, lazy: bool) {
        self.eager_depth = if lazy { Self::LAZY } else { Self::EAGER };
    }
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            dlext: if cfg!(target_os = "macos") { b"bundle".to_vec() } else { b"so".to_vec() },
            skip_dot_dirs: true,
            skip_dirs: vec![b"node_modules".to_vec()],
            skip_paths: Vec::new(),
            max_depth: 48,
            eager_depth: Self::LAZY,
            max_dirs: 100_000,
            max_files: 1_000_000,
            threads: cpu_count(),
            before_list: ListHook::default(),
        }
    }
}

/// The CPUs this process may use, at most 8, asked once: `available_parallelism` reads the
/// cgroup quota files on Linux (about ten syscalls), and options are built on every start.
fn cpu_count() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get().min(8)).unwrap_or(1))
}

impl ScanOptions {
    /// The kind of a file name by its extension, and the length of the stem.
    pub(crate) fn classify(&self, name: &[u8]) -> Option<(super::Kind, usize)> {
        if let Some(stem) = name.strip_suffix(b".rb") {
            return Some((super::Kind::Rb, stem.len()));
        }
        let dl = &self.dlext;
        if name.len() > dl.len() && name.ends_with(dl) && name[name.len() - dl.len() - 1] == b'.' {
            return Some((super::Kind::Ext, name.len() - dl.len() - 1));
        }
        None
    }

    /// Whether the directory `name` in `parent` is skipped (no allocation: compared in place).
    pub(crate) fn skips(&self, parent: &std::path::Path, name: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        (self.skip_dot_dirs && name.first() == Some(&b'.'))
            || self.skip_dirs.iter().any(|s| s == name)
            || self
                .skip_paths
                .iter()
                .any(|p| p.file_name().map(OsStrExt::as_bytes) == Some(name) && p.parent() == Some(parent))
    }

    /// Whether a root is one of the skipped paths (then it is not listed at all).
    pub(crate) fn skips_root(&self, root: &std::path::Path) -> bool {
        self.skip_paths.iter().any(|p| p == root)
    }
}
