//! The names of the files loadscan keeps in a cache directory, and how each is recognised as
//! loadscan's (the only files it ever replaces or deletes there). The one place they are
//! spelled: Ruby gets them as `Loadscan::Native::CACHE_FILE` and `LAST_BOOT_FILE`.

/// The cache file's name: one of loadscan's own, never one another tool may use (the name
/// used before, `index`, became a victim's `.git/index` through a planted symlink). Old `index`
/// files are left alone.
pub const CACHE_FILE: &str = "loadscan.cache";
/// The last boot's figures (one JSON object: `loadscan stats`, `loadscan doctor`).
pub const LAST_BOOT_FILE: &str = "last_boot.json";
/// The compile cache (`compile_cache/format.rs`).
pub const ISEQ_FILE: &str = "iseq.bin";
/// Every file loadscan keeps in a cache directory.
pub const CACHE_FILES: [&str; 3] = [CACHE_FILE, LAST_BOOT_FILE, ISEQ_FILE];

/// The first bytes a file of ours starts with (an empty file is ours too: a writer killed
/// mid-way): what may be replaced under each name.
pub(super) fn signature(name: &str) -> &'static [u8] {
    if name == LAST_BOOT_FILE {
        b"{"
    } else if name == ISEQ_FILE {
        crate::compile_cache::MAGIC
    } else {
        super::format::MAGIC
    }
}
