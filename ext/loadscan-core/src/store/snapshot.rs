//! Reading a cache file in place: every access is a bounds-checked slice read, so any byte
//! sequence that passes the header checks can at worst give "not found", never a panic or an
//! out-of-bounds read. Nothing is rebuilt on load.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::buffer::Bytes;
use super::file::LoadError;
use super::format::*;
use crate::hash::stable_hash;
use crate::scan::{DirRecord, DirStamp, FileEntry, Kind, Listing, RootState};

/// A loaded, checked cache file.
pub struct Snapshot {
    bytes: Bytes,
    n_roots: usize,
    n_feats: usize,
    n_slots: usize,
    n_prefixes: usize,
    n_prefix_slots: usize,
    roots: usize,
    dirs: usize,
    spots: usize,
    feats: usize,
    slots: usize,
    ids: usize,
    n_ids: usize,
    prefixes: usize,
    prefix_slots: usize,
    strings: usize,
    strings_len: usize,
    /// Whether the listings may be rebuilt from the file (see `check_expansion`), found out the
    /// first time they are.
    expandable: OnceLock<bool>,
}

/// One root of a snapshot.
#[derive(Clone, Copy, Debug)]
pub struct RootView<'a> {
    /// The root's absolute path.
    pub path: &'a [u8],
    /// What the root was when scanned.
    pub state: RootState,
    /// Whether it is revalidated directory by directory.
    pub volatile: bool,
    /// When its scan started (ns since the epoch).
    pub scanned_at_ns: i64,
    /// When it was last on a load path that wrote the cache (s since the epoch).
    pub last_used_s: i64,
    dirs: (usize, usize),
    spots: (usize, usize),
}

impl RootView<'_> {
    /// The root as a path.
    pub fn path_buf(&self) -> PathBuf {
        PathBuf::from(OsStr::from_bytes(self.path))
    }

    /// How many directories the root recorded.
    pub fn dir_count(&self) -> usize {
        self.dirs.1
    }
}

/// Checks a file's header (its first `HEADER_LEN` bytes at least) against the file's length:
/// magic, format version, body length. The CRC and the environment key need the body.
pub(crate) fn check_header(header: &[u8], file_len: u64) -> Result<(), LoadError> {
    if header.len() < HEADER_LEN || &header[..8] != MAGIC {
        return Err(LoadError::Corrupt("not a loadscan cache (bad magic or too short)"));
    }
    if read_u32(header, 8) != Some(FORMAT_VERSION) {
        return Err(LoadError::Stale("cache format version differs"));
    }
    let body_len = read_u64(header, 16).unwrap_or(u64::MAX);
    if body_len.checked_add(HEADER_LEN as u64) != Some(file_len) {
        return Err(LoadError::Corrupt("truncated or padded"));
    }
    Ok(())
}

/// Roots own consecutive, disjoint ranges of the dirs and spots that cover them exactly (as
/// `encode` writes them), and their paths fit the budget: so revalidating every root reads each
/// directory record once, and the boot copies no more than `MAX_EXPANDED` bytes of root paths,
/// whatever a file with a valid checksum says. One pass over the root records (a few hundred).
fn check_roots(
    b: &[u8],
    roots: usize,
    n_roots: usize,
    n_dirs: usize,
    n_spots: usize,
    strings_len: usize,
) -> Result<(), LoadError> {
    let bad = || LoadError::Corrupt("inconsistent root records");
    let (mut next_dir, mut next_spot, mut paths) = (0usize, 0usize, 0usize);
    for i in 0..n_roots {
        let r = roots + i * ROOT_REC;
        let field = |k: usize| read_u32(b, r + k).map(|v| v as usize).ok_or_else(bad);
        let (path_off, path_len) = (field(0)?, field(4)?);
        let (dir_start, dir_len, spot_start, spot_len) = (field(12)?, field(16)?, field(20)?, field(24)?);
        if dir_start != next_dir || spot_start != next_spot || path_off.saturating_add(path_len) > strings_len {
            return Err(bad());
        }
        next_dir += dir_len;
        next_spot += spot_len;
        paths += path_len;
        if next_dir > n_dirs || next_spot > n_spots || paths > MAX_EXPANDED {
            return Err(bad());
        }
    }
    if next_dir != n_dirs || next_spot != n_spots {
        return Err(bad());
    }
    Ok(())
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

impl Snapshot {
    /// Checks the header (magic, version, length, CRC32 of the body, environment key) and the
    /// section sizes. `env` must equal the key the file was written with.
    pub fn parse(bytes: impl Into<Bytes>, env: &[u8]) -> Result<Snapshot, LoadError> {
        let bytes: Bytes = bytes.into();
        let corrupt = |why: &'static str| LoadError::Corrupt(why);
        check_header(&bytes, bytes.len() as u64)?;
        let crc = read_u32(&bytes, 24).unwrap_or(0);
        let body = &bytes[HEADER_LEN..];
        if crc32fast::hash(body) != crc {
            return Err(corrupt("checksum mismatch"));
        }
        let env_len = read_u32(&bytes, 28).unwrap_or(u32::MAX) as usize;
        if body.get(..env_len) != Some(env) {
            return Err(LoadError::Stale("written by another Ruby or loadscan version"));
        }
        let c = HEADER_LEN + env_len;
        let count = |i: usize| read_u32(&bytes, c + 4 * i).map(|v| v as usize).ok_or(corrupt("truncated counts"));
        let (n_roots, n_dirs, n_spots, n_feats, n_slots, n_ids, n_prefixes, n_prefix_slots, strings_len) =
            (count(0)?, count(1)?, count(2)?, count(3)?, count(4)?, count(5)?, count(6)?, count(7)?, count(8)?);
        if n_slots <= n_feats || n_prefix_slots <= n_prefixes {
            return Err(corrupt("bad hash table size"));
        }
        let mut at = c + COUNTS;
        let mut section = |n: usize, size: usize| -> Result<usize, LoadError> {
            let start = at;
            at = n.checked_mul(size).and_then(|len| at.checked_add(len)).ok_or(corrupt("section overflow"))?;
            Ok(start)
        };
        let roots = section(n_roots, ROOT_REC)?;
        let dirs = section(n_dirs, DIR_REC)?;
        let spots = section(n_spots, SPOT_REC)?;
        let feats = section(n_feats, KEYED_REC)?;
        let slots = section(n_slots, 4)?;
        let ids = section(n_ids, 4)?;
        let prefixes = section(n_prefixes, KEYED_REC)?;
        let prefix_slots = section(n_prefix_slots, 4)?;
        let strings = section(strings_len, 1)?;
        if at != bytes.len() {
            return Err(corrupt("section sizes do not add up"));
        }
        check_roots(&bytes, roots, n_roots, n_dirs, n_spots, strings_len)?;
        Ok(Snapshot {
            bytes,
            n_roots,
            n_feats,
            n_slots,
            n_prefixes,
            n_prefix_slots,
            roots,
            dirs,
            spots,
            feats,
            slots,
            ids,
            n_ids,
            prefixes,
            prefix_slots,
            strings,
            strings_len,
            expandable: OnceLock::new(),
        })
    }

    fn u32(&self, at: usize) -> Option<u32> {
        read_u32(&self.bytes, at)
    }

    fn u64(&self, at: usize) -> Option<u64> {
        read_u64(&self.bytes, at)
    }

    fn string(&self, off: u32, len: u32) -> Option<&[u8]> {
        let (off, len) = (off as usize, len as usize);
        if off.checked_add(len)? > self.strings_len {
            return None;
        }
        self.bytes.get(self.strings + off..self.strings + off + len)
    }

    fn string_at(&self, rec: usize) -> Option<&[u8]> {
        self.string(self.u32(rec)?, self.u32(rec + 4)?)
    }

    /// Size of the file in bytes.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// How many roots the file holds.
    pub fn root_count(&self) -> usize {
        self.n_roots
    }

    /// How many distinct feature stems the file holds.
    pub fn feature_count(&self) -> usize {
        self.n_feats
    }

    /// Root `i`, or `None` if its record is damaged.
    pub fn root(&self, i: usize) -> Option<RootView<'_>> {
        if i >= self.n_roots {
            return None;
        }
        let r = self.roots + i * ROOT_REC;
        let flags = self.bytes.get(r + 8..r + 10)?;
        let state = match flags[0] {
            0 => RootState::Dir,
            1 => RootState::Missing,
            2 => RootState::NotDir,
            _ => return None,
        };
        let range = |k: usize| Some((self.u32(r + 12 + 8 * k)? as usize, self.u32(r + 16 + 8 * k)? as usize));
        Some(RootView {
            path: self.string_at(r)?,
            state,
            volatile: flags[1] != 0,
            dirs: range(0)?,
            spots: range(1)?,
            scanned_at_ns: self.u64(r + 28)? as i64,
            last_used_s: self.u64(r + 36)? as i64,
        })
    }

    /// The directories recorded for a root.
    pub fn dirs<'a>(&'a self, root: &RootView<'a>) -> impl Iterator<Item = Option<DirRecord>> + 'a {
        let (start, len) = root.dirs;
        (start..start.saturating_add(len)).map(move |i| {
            let d = self.dirs.checked_add(i.checked_mul(DIR_REC)?)?;
            if d + DIR_REC > self.spots {
                return None;
            }
            Some(DirRecord {
                rel: self.string_at(d)?.to_vec(),
                stamp: DirStamp {
                    dev: self.u64(d + 8)?,
                    ino: self.u64(d + 16)?,
                    mtime_ns: self.u64(d + 24)? as i64,
                    size: self.u64(d + 32)?,
                },
                digest: self.u64(d + 40)?,
            })
        })
    }

    /// The record of the directory `rel` of a root, if it was listed (compares names before
    /// decoding a record).
    pub fn find_dir(&self, root: &RootView<'_>, rel: &[u8]) -> Option<DirRecord> {
        let (start, len) = root.dirs;
        (start..start.saturating_add(len)).find_map(|i| {
            let d = self.dirs.checked_add(i.checked_mul(DIR_REC)?)?;
            if d + DIR_REC > self.spots || self.string_at(d)? != rel {
                return None;
            }
            self.dirs(&RootView { dirs: (i, 1), ..*root }).next().flatten()
        })
    }

    /// The full listing of a root, rebuilt from the file (for rescans): its directories and
    /// blind spots, and the features whose postings name it (one pass over the table).
    pub fn listing(&self, root: &RootView<'_>, id: u32) -> Option<Listing> {
        let mut l = self.skeleton(root)?;
        l.files = self.files_by_root(Some(id)).pop().unwrap_or_default();
        Some(l)
    }

    /// A root's listing without its files: directories, blind spots and deferred directories.
    pub fn skeleton(&self, root: &RootView<'_>) -> Option<Listing> {
        if !self.expandable() {
            return None;
        }
        let mut l = Listing::empty(root.path_buf(), root.state);
        l.dirs = self.dirs(root).collect::<Option<Vec<_>>>()?;
        let (start, len) = root.spots;
        for i in start..start.checked_add(len)? {
            let b = self.spots.checked_add(i.checked_mul(SPOT_REC)?)?;
            if b + SPOT_REC > self.feats {
                return None;
            }
            let rel = self.string_at(b)?.to_vec();
            match self.u32(b + 8)? {
                SPOT_BLIND => l.blind.push(rel),
                SPOT_DEFERRED => l.deferred.push(rel),
                _ => return None,
            }
        }
        Some(l)
    }

    /// Every root's files, rebuilt from the feature table in one pass (index = root id), or
    /// only `only`'s (then the result has one element).
    pub fn files_by_root(&self, only: Option<u32>) -> Vec<Vec<FileEntry>> {
        let mut out: Vec<Vec<FileEntry>> = vec![Vec::new(); if only.is_some() { 1 } else { self.n_roots }];
        if !self.expandable() {
            return out;
        }
        for i in 0..self.n_feats {
            let f = self.feats + i * KEYED_REC;
            let (Some(stem), Some((rb, ext))) = (self.string_at(f), self.postings_at(f)) else {
                continue;
            };
            for (posting, kind) in [(rb, Kind::Rb), (ext, Kind::Ext)] {
                self.for_each_id(posting, |id| {
                    let slot = match only {
                        Some(o) if o == id => Some(0),
                        Some(_) => None,
                        None => Some(id as usize),
                    };
                    if let Some(list) = slot.and_then(|s| out.get_mut(s)) {
                        list.push(FileEntry { stem: stem.to_vec(), kind });
                    }
                });
            }
        }
        for list in &mut out {
            list.sort_unstable();
        }
        out
    }

    /// Whether the listings can be rebuilt from this file within bounds: every record's string
    /// in the string section, every posting list where `encode` puts it (one after the other,
    /// in record order, each of 2 to `n_roots` ids, none shared), and the listings they expand
    /// to within `MAX_EXPANDED` bytes. A file with a valid checksum that fails this is not
    /// expanded: `skeleton` gives `None` (the root is scanned again, and not written back) and
    /// `files_by_root` nothing. Checked once, on first use (a write or a rescan, not the
    /// lookups of a boot, which are bounded on their own).
    fn expandable(&self) -> bool {
        *self.expandable.get_or_init(|| self.check_expansion().is_some())
    }

    fn check_expansion(&self) -> Option<()> {
        let mut budget = MAX_EXPANDED;
        let mut spend = |n: usize| budget.checked_sub(n).map(|left| budget = left);
        for i in 0..self.n_dirs() {
            spend(self.string_at(self.dirs + i * DIR_REC)?.len() + std::mem::size_of::<DirRecord>())?;
        }
        for i in 0..self.n_spots() {
            spend(self.string_at(self.spots + i * SPOT_REC)?.len() + std::mem::size_of::<Vec<u8>>())?;
        }
        let mut next = 0usize;
        for (recs, n, files) in [(self.feats, self.n_feats, true), (self.prefixes, self.n_prefixes, false)] {
            for i in 0..n {
                let rec = recs + i * KEYED_REC;
                let key = self.string_at(rec)?.len();
                let (a, b) = self.postings_at(rec)?;
                for posting in [a, b] {
                    let ids = match posting {
                        NONE => 0,
                        p if p & MANY == 0 => 1,
                        p => {
                            let at = (p & !MANY) as usize;
                            let count = self.u32(self.ids + 4 * at.min(self.n_ids))? as usize;
                            if at != next || count < 2 || count > self.n_roots || at + 1 + count > self.n_ids {
                                return None;
                            }
                            next = at + 1 + count;
                            count
                        }
                    };
                    if files {
                        spend(ids.checked_mul(key + std::mem::size_of::<FileEntry>())?)?;
                    }
                }
            }
        }
        (next == self.n_ids).then_some(())
    }

    fn n_dirs(&self) -> usize {
        (self.spots - self.dirs) / DIR_REC
    }

    fn n_spots(&self) -> usize {
        (self.feats - self.spots) / SPOT_REC
    }

    /// The record of `key` in a hashed table: `(records, count, size)` and `(slots, count)`.
    fn probe(&self, recs: (usize, usize, usize), slots: (usize, usize), key: &[u8]) -> Option<usize> {
        let (recs, n_recs, size) = recs;
        let (slots, n_slots) = slots;
        let mut slot = home_slot(stable_hash(key), n_slots);
        // `encode` places every key within MAX_PROBE slots of its home: a key farther away is
        // not in the table, whatever a crafted file's slots say.
        for _ in 0..n_slots.min(MAX_PROBE + 1) {
            let idx = self.u32(slots + 4 * slot)?;
            if idx == NONE {
                return None;
            }
            let idx = idx as usize;
            if idx < n_recs {
                let r = recs + idx * size;
                if self.string_at(r) == Some(key) {
                    return Some(r);
                }
            }
            slot = if slot + 1 >= n_slots { 0 } else { slot + 1 };
        }
        None
    }

    /// The two posting values of a keyed record.
    fn postings_at(&self, rec: usize) -> Option<(u32, u32)> {
        Some((self.u32(rec + 8)?, self.u32(rec + 12)?))
    }

    /// Posting values of a feature stem: (roots with `stem.rb`, roots with the extension).
    pub fn lookup(&self, stem: &[u8]) -> Option<(u32, u32)> {
        self.postings_at(self.probe((self.feats, self.n_feats, KEYED_REC), (self.slots, self.n_slots), stem)?)
    }

    /// Posting values of a directory prefix: (roots with a blind spot there, roots where it is
    /// a deferred directory).
    pub fn spots(&self, prefix: &[u8]) -> Option<(u32, u32)> {
        if self.n_prefixes == 0 {
            return None;
        }
        self.postings_at(self.probe(
            (self.prefixes, self.n_prefixes, KEYED_REC),
            (self.prefix_slots, self.n_prefix_slots),
            prefix,
        )?)
    }

    /// Whether any root has a blind spot or a deferred directory.
    pub fn has_spots(&self) -> bool {
        self.n_prefixes > 0
    }

    /// Calls `f` with each root id of a posting value (ids beyond the root table are skipped).
    pub fn for_each_id(&self, posting: u32, mut f: impl FnMut(u32)) {
        if posting == NONE {
            return;
        }
        if posting & MANY == 0 {
            if (posting as usize) < self.n_roots {
                f(posting);
            }
            return;
        }
        let at = (posting & !MANY) as usize;
        let Some(count) = self.u32(self.ids + 4 * at.min(self.n_ids)) else { return };
        let count = (count as usize).min(self.n_roots).min(self.n_ids.saturating_sub(at + 1));
        for i in 0..count {
            match self.u32(self.ids + 4 * (at + 1 + i)) {
                Some(id) if (id as usize) < self.n_roots => f(id),
                _ => {}
            }
        }
    }
}
