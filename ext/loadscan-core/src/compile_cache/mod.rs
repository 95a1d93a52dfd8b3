//! loadscan's compile cache: the instruction sequences Ruby compiled for the files it loaded,
//! kept in one file beside the index (`iseq.bin`, `format.rs`) and served by the binding through
//! `RubyVM::InstructionSequence.load_iseq`.
//!
//! An entry is found by what decides a compile: the file's contents (xxh3-128 of the bytes read
//! now, never its mtime), the path Ruby asked for and the real path the kernel gives for the
//! open file (both are baked into the instruction sequence), and the compile's settings (a
//! digest the binding makes of the compile options, the parser and the Ruby build). The file is
//! mapped, checked whole when opened (header, length, the table's CRC, every record's ranges)
//! and each blob by its own CRC before it is served; the env key is the index's. It is written
//! at exit under the index's write rule (`Session::writes`), merging the entries of the file read
//! at start, and only when this process compiled something new.

mod format;

pub use format::{encode, merge, Entry, Found, Id, Refused, Table, MAGIC, VERSION};

use std::io::{self, Read};
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;

use crate::store::{CacheDir, LoadErrorKind, ISEQ_FILE};
use crate::CacheFile;

/// The largest compile cache read: a large app's is tens of megabytes.
pub const MAX_LEN: u64 = 1 << 30;

/// A source file as read for one load.
#[derive(Debug)]
pub struct Source {
    /// xxh3-128 of its contents.
    pub hash: u128,
    /// Its real path, as the kernel names the open file.
    pub realpath: Vec<u8>,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// Reads `path` once: opens it, asks the kernel for its real path, checks that it is a regular
/// file, reads and hashes it. `None` when any of it fails (Ruby then does what it does).
#[cfg(target_os = "linux")]
pub fn read_source(path: &[u8]) -> Option<Source> {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;
    let path = std::ffi::OsStr::from_bytes(path);
    let mut file = File::open(path).ok()?;
    let md = file.metadata().ok()?;
    if !md.file_type().is_file() {
        return None;
    }
    let link = format!("/proc/self/fd/{}", file.as_raw_fd());
    let realpath = std::fs::read_link(link).ok()?.into_os_string().into_vec_bytes();
    // A deleted file's link says so; anything not absolute is not a path to trust.
    if !realpath.starts_with(b"/") || realpath.ends_with(b" (deleted)") {
        return None;
    }
    let mut bytes = Vec::with_capacity(md.size() as usize + 1);
    file.read_to_end(&mut bytes).ok()?;
    Some(Source { hash: xxhash_rust::xxh3::xxh3_128(&bytes), realpath, bytes })
}

/// Elsewhere, the real path from `realpath(3)` (through std).
#[cfg(not(target_os = "linux"))]
pub fn read_source(path: &[u8]) -> Option<Source> {
    let path = std::ffi::OsStr::from_bytes(path);
    let mut file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let realpath = std::fs::canonicalize(path).ok()?.into_os_string().into_vec_bytes();
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(Source { hash: xxhash_rust::xxh3::xxh3_128(&bytes), realpath, bytes })
}

trait IntoVecBytes {
    fn into_vec_bytes(self) -> Vec<u8>;
}

impl IntoVecBytes for std::ffi::OsString {
    fn into_vec_bytes(self) -> Vec<u8> {
        std::os::unix::ffi::OsStringExt::into_vec(self)
    }
}

/// The key of a compile in the file: the path Ruby asked for, a NUL, the real path.
pub fn key(path: &[u8], realpath: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(path.len() + realpath.len() + 1);
    k.extend_from_slice(path);
    k.push(0);
    k.extend_from_slice(realpath);
    k
}

/// A read-only private mapping of a whole file, unmapped on drop.
pub struct Map {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value.
unsafe impl Send for Map {}
unsafe impl Sync for Map {}

impl Map {
    fn of(file: &std::fs::File, len: usize) -> io::Result<Map> {
        use rustix::mm::{mmap, MapFlags, ProtFlags};
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty"));
        }
        // SAFETY: a fresh read-only mapping of `len` bytes of `file`; loadscan replaces the file
        // only by renaming another over it, so the mapped pages stay those of this inode.
        let ptr = unsafe { mmap(std::ptr::null_mut(), len, ProtFlags::READ, MapFlags::PRIVATE, file, 0)? };
        Ok(Map { ptr: ptr.cast(), len })
    }
}

impl AsRef<[u8]> for Map {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes for the life of `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `of`, once.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// What the compile cache did in this process (`Loadscan.stats`' `compile_cache`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Figures {
    /// Loads served from the file.
    pub hits: u64,
    /// Loads Ruby compiled (the file had no entry for them, or not for this warning state).
    pub misses: u64,
    /// Loads left to Ruby without asking the file (coverage, an unreadable file, another Ractor…).
    pub bypasses: u64,
    /// Blob bytes served.
    pub bytes_read: u64,
    /// The file's length when this process wrote it.
    pub bytes_written: u64,
    /// Entries in the file read at start.
    pub entries: u64,
    /// Compiles captured, to be written at exit.
    pub pending: u64,
}

/// One process's compile cache: the file read at start and what it compiled since.
pub struct CompileCache {
    table: Option<Table<Map>>,
    env: Vec<u8>,
    /// False when the file there is not one loadscan may replace (another's, a symlink, not
    /// loadscan's): never written.
    writable: bool,
    pending: Vec<Entry>,
    /// What it did.
    pub figures: Figures,
}

impl CompileCache {
    /// Opens `iseq.bin` in `file`'s directory for `file`'s env key. The warning is why an
    /// existing file could not be used (damaged: it is replaced at exit).
    pub fn open(file: &CacheFile) -> (CompileCache, Option<String>) {
        let mut cache = CompileCache {
            table: None,
            env: file.env.clone(),
            writable: true,
            pending: Vec::new(),
            figures: Figures::default(),
        };
        let warning = match Self::read(file) {
            Ok(table) => {
                cache.figures.entries = table.as_ref().map_or(0, |t| t.len() as u64);
                cache.table = table;
                None
            }
            Err(why) => {
                let ours = CacheDir::open(&file.dir, file.uid)
                    .ok()
                    .flatten()
                    .is_some_and(|dir| dir.replaceable(ISEQ_FILE).unwrap_or(false));
                cache.writable = ours;
                why.map(|w| if ours { w } else { format!("{w}, not replacing it") })
            }
        };
        (cache, warning)
    }

    fn read(file: &CacheFile) -> Result<Option<Table<Map>>, Option<String>> {
        let path = file.dir.join(ISEQ_FILE);
        let dir = match CacheDir::open(&file.dir, file.uid) {
            Ok(Some(dir)) => dir,
            Ok(None) => return Ok(None),
            // The index's warning says why the directory is not used.
            Err(_) => return Err(None),
        };
        let f = match dir.open_trusted(ISEQ_FILE) {
            Ok(f) => f,
            Err(LoadErrorKind::Missing) => return Ok(None),
            Err(e) => return Err(Some(format!("{}: {e}; compiling instead", path.display()))),
        };
        let damaged = |why: &str| Err(Some(format!("{} is damaged ({why}); compiling instead", path.display())));
        let len = match f.metadata() {
            Ok(md) if md.len() > MAX_LEN => return damaged("larger than a compile cache can be"),
            Ok(md) => md.len() as usize,
            Err(e) => return damaged(&e.to_string()),
        };
        let map = match Map::of(&f, len) {
            Ok(map) => map,
            Err(e) => return damaged(&e.to_string()),
        };
        match Table::parse(map, &file.env) {
            Ok(table) => Ok(Some(table)),
            Err(Refused::Stale) => Ok(None),
            Err(Refused::Damaged(why)) => damaged(why),
        }
    }

    /// The entry for `id` and `key` in the file read at start.
    pub fn get(&self, id: Id, key: &[u8]) -> Option<Found<'_>> {
        self.table.as_ref()?.get(id, key)
    }

    /// Keeps a compile to write at exit.
    pub fn add(&mut self, entry: Entry) {
        self.pending.push(entry);
        self.figures.pending = self.pending.len() as u64;
    }

    /// The compiles kept so far, to decide their silent states (the binding's check at exit).
    pub fn pending_mut(&mut self) -> &mut Vec<Entry> {
        &mut self.pending
    }

    /// Writes the file in `file`'s directory (for the uid it trusts; the key is the one this
    /// cache was opened with) when something new was compiled: the file read at start merged
    /// with this process's compiles. `Ok(false)`: nothing to write.
    pub fn save(&mut self, file: &CacheFile) -> Result<bool, String> {
        self.pending.retain(|e| e.silent != 0 && !e.blob.is_empty());
        if self.pending.is_empty() || !self.writable {
            return Ok(false);
        }
        let new = std::mem::take(&mut self.pending);
        let old = self.table.as_ref().into_iter().flat_map(|t| t.entries());
        let mut all = merge(old, new);
        let bytes = encode(&mut all, &self.env);
        let dir = CacheDir::create(&file.dir, file.uid).map_err(|e| format!("not writing the compile cache: {e}"))?;
        dir.write_atomic(ISEQ_FILE, &bytes)
            .map_err(|e| format!("could not write the compile cache in {}: {e}", file.dir.display()))?;
        self.figures.bytes_written = bytes.len() as u64;
        self.figures.pending = 0;
        Ok(true)
    }
}

impl CacheFile {
    /// [`CompileCache::open`] on this cache's directory and key.
    pub fn open_iseq(&self) -> (CompileCache, Option<String>) {
        CompileCache::open(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_source_with_its_real_path_and_hash() {
        let dir = std::env::temp_dir().join(format!("loadscan-cc-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/a.rb"), b"p 1\n").unwrap();
        let _ = std::fs::remove_file(dir.join("link.rb"));
        std::os::unix::fs::symlink(dir.join("real/a.rb"), dir.join("link.rb")).unwrap();
        let s = read_source(dir.join("link.rb").as_os_str().as_bytes()).unwrap();
        let real = std::fs::canonicalize(dir.join("real/a.rb")).unwrap();
        assert_eq!(s.realpath, real.as_os_str().as_bytes());
        assert_eq!(s.hash, xxhash_rust::xxh3::xxh3_128(b"p 1\n"));
        std::fs::write(dir.join("real/a.rb"), b"p 2\n").unwrap();
        assert_ne!(
            read_source(dir.join("link.rb").as_os_str().as_bytes()).unwrap().hash,
            s.hash,
            "same size, new contents"
        );
        assert!(read_source(dir.as_os_str().as_bytes()).is_none(), "a directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_merges_and_reads_back_and_refuses_damage_with_a_warning() {
        let dir = std::env::temp_dir().join(format!("loadscan-cc-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = CacheFile { dir: dir.clone(), env: b"env".to_vec(), uid: CacheFile::trusted_uid() };
        let (mut cc, warning) = CacheFile::open_iseq(&file);
        assert!(warning.is_none());
        let id = Id { hash: 42, flags: 1 };
        cc.add(Entry { id, key: b"/a\0/a".to_vec(), silent: 1, blob: b"iseq".to_vec() });
        assert_eq!(cc.save(&file), Ok(true));
        assert_eq!(cc.save(&file), Ok(false), "nothing new");
        let (mut cc, warning) = CacheFile::open_iseq(&file);
        assert!(warning.is_none());
        assert_eq!(cc.get(id, b"/a\0/a").unwrap().blob, Some(&b"iseq"[..]));
        cc.add(Entry { id: Id { hash: 43, flags: 1 }, key: b"/b\0/b".to_vec(), silent: 1, blob: b"b".to_vec() });
        assert_eq!(cc.save(&file), Ok(true));
        let (cc, _) = CacheFile::open_iseq(&file);
        assert_eq!(cc.figures.entries, 2, "the old entry kept");
        // Another Ruby: stale, quietly.
        let other = CacheFile { env: b"other".to_vec(), ..file.clone() };
        let (cc, warning) = CacheFile::open_iseq(&other);
        assert!(warning.is_none() && cc.figures.entries == 0);
        // Truncated: one warning, nothing served.
        let path = dir.join(ISEQ_FILE);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let (cc, warning) = CacheFile::open_iseq(&file);
        assert!(warning.unwrap().contains("damaged"));
        assert!(cc.get(id, b"/a\0/a").is_none());
        std::fs::write(&path, b"").unwrap();
        assert!(CacheFile::open_iseq(&file).1.unwrap().contains("damaged"), "empty");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
