//! Reading a cache file in place: every access is a bounds-checked slice read, so any byte
//! sequence that passes the header checks can at worst give "not found", never a panic or an
//! out-of-bounds read. Nothing is rebuilt on load.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::buffer::Bytes;
use super::error::LoadErrorKind;
use super::format::{home_slot, MANY, MAX_EXPANDED, MAX_PROBE, NONE};
use super::layout::{dir, gap, header, keyed, read_pair, read_u32, read_u64, root, Counts};
use crate::hash::unseeded_hash;
use crate::scan::{DirRecord, DirStamp, RootState};

mod check;
mod expand;

pub(crate) use check::check_header;
use check::check_roots;

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
    gaps: usize,
    feats: usize,
    slots: usize,
    ids: usize,
    n_ids: usize,
    prefixes: usize,
    prefix_slots: usize,
    /// Where the features Ruby's own search could not load start, and how many.
    not_linked_in: usize,
    n_not_linked_in: usize,
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
    gaps: (usize, usize),
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

impl Snapshot {
    /// Checks the header (magic, version, length, CRC32 of the body, environment key) and the
    /// section sizes. `env` must equal the key the file was written with.
    pub fn parse(bytes: impl Into<Bytes>, env: &[u8]) -> Result<Snapshot, LoadErrorKind> {
        let bytes: Bytes = bytes.into();
        let corrupt = |why: &'static str| LoadErrorKind::Corrupt(why);
        check_header(&bytes, bytes.len() as u64)?;
        let crc = read_u32(&bytes, header::CRC).unwrap_or(0);
        let body = &bytes[header::LEN..];
        if crc32fast::hash(body) != crc {
            return Err(corrupt("checksum mismatch"));
        }
        let env_len = read_u32(&bytes, header::ENV_LEN).unwrap_or(u32::MAX) as usize;
        if body.get(..env_len) != Some(env) {
            return Err(LoadErrorKind::Stale("written by another Ruby or loadscan version"));
        }
        let c = header::LEN + env_len;
        let Counts {
            roots: n_roots,
            dirs: n_dirs,
            gaps: n_gaps,
            feats: n_feats,
            slots: n_slots,
            ids: n_ids,
            prefixes: n_prefixes,
            prefix_slots: n_prefix_slots,
            not_linked_in: n_not_linked_in,
            strings_len,
        } = Counts::read(&bytes, c).ok_or(corrupt("truncated counts"))?;
        if n_slots <= n_feats || n_prefix_slots <= n_prefixes {
            return Err(corrupt("bad hash table size"));
        }
        let mut at = c + Counts::LEN;
        let mut section = |n: usize, size: usize| -> Result<usize, LoadErrorKind> {
            let start = at;
            at = n.checked_mul(size).and_then(|len| at.checked_add(len)).ok_or(corrupt("section overflow"))?;
            Ok(start)
        };
        let roots = section(n_roots, root::LEN)?;
        let dirs = section(n_dirs, dir::LEN)?;
        let gaps = section(n_gaps, gap::LEN)?;
        let feats = section(n_feats, keyed::LEN)?;
        let slots = section(n_slots, 4)?;
        let ids = section(n_ids, 4)?;
        let prefixes = section(n_prefixes, keyed::LEN)?;
        let prefix_slots = section(n_prefix_slots, 4)?;
        let not_linked_in = section(n_not_linked_in, 8)?;
        let strings = section(strings_len, 1)?;
        if at != bytes.len() {
            return Err(corrupt("section sizes do not add up"));
        }
        check_roots(&bytes, roots, n_roots, n_dirs, n_gaps, strings_len)?;
        Ok(Snapshot {
            bytes,
            n_roots,
            n_feats,
            n_slots,
            n_prefixes,
            n_prefix_slots,
            roots,
            dirs,
            gaps,
            feats,
            slots,
            ids,
            n_ids,
            prefixes,
            prefix_slots,
            not_linked_in,
            n_not_linked_in,
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

    /// The string field at `at` (a record's first field).
    fn string_at(&self, at: usize) -> Option<&[u8]> {
        let (off, len) = read_pair(&self.bytes, at)?;
        let end = off.checked_add(len).filter(|&end| end <= self.strings_len)?;
        self.bytes.get(self.strings + off..self.strings + end)
    }

    /// Where directory record `i` starts, if it lies in its section.
    fn dir_rec(&self, i: usize) -> Option<usize> {
        let d = self.dirs.checked_add(i.checked_mul(dir::LEN)?)?;
        (d + dir::LEN <= self.gaps).then_some(d)
    }

    /// Where gap record `i` starts, if it lies in its section.
    fn gap_rec(&self, i: usize) -> Option<usize> {
        let b = self.gaps.checked_add(i.checked_mul(gap::LEN)?)?;
        (b + gap::LEN <= self.feats).then_some(b)
    }

    /// The features Ruby's own search could not load when this file was written
    /// (`index::linked_in`); a damaged string is left out.
    pub fn not_linked_in(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.n_not_linked_in).filter_map(|i| self.string_at(self.not_linked_in + 8 * i))
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
        let r = self.roots + i * root::LEN;
        let state = match self.bytes.get(r + root::STATE)? {
            0 => RootState::Dir,
            1 => RootState::Missing,
            2 => RootState::NotDir,
            _ => return None,
        };
        Some(RootView {
            path: self.string_at(r + root::PATH)?,
            state,
            volatile: *self.bytes.get(r + root::VOLATILE)? != 0,
            dirs: read_pair(&self.bytes, r + root::DIRS)?,
            gaps: read_pair(&self.bytes, r + root::GAPS)?,
            scanned_at_ns: self.u64(r + root::SCANNED_AT_NS)? as i64,
            last_used_s: self.u64(r + root::LAST_USED_S)? as i64,
        })
    }

    /// The directories recorded for a root.
    pub fn dirs<'a>(&'a self, root: &RootView<'a>) -> impl Iterator<Item = Option<DirRecord>> + 'a {
        let (start, len) = root.dirs;
        (start..start.saturating_add(len)).map(move |i| {
            let d = self.dir_rec(i)?;
            Some(DirRecord {
                rel: self.string_at(d + dir::REL)?.to_vec(),
                stamp: DirStamp {
                    dev: self.u64(d + dir::DEV)?,
                    ino: self.u64(d + dir::INO)?,
                    mtime_ns: self.u64(d + dir::MTIME_NS)? as i64,
                    size: self.u64(d + dir::SIZE)?,
                },
                digest: self.u64(d + dir::DIGEST)?,
            })
        })
    }

    /// The record of the directory `rel` of a root, if it was listed (compares names before
    /// decoding a record).
    pub fn find_dir(&self, root: &RootView<'_>, rel: &[u8]) -> Option<DirRecord> {
        let (start, len) = root.dirs;
        (start..start.saturating_add(len)).find_map(|i| {
            if self.string_at(self.dir_rec(i)? + dir::REL)? != rel {
                return None;
            }
            self.dirs(&RootView { dirs: (i, 1), ..*root }).next().flatten()
        })
    }

    /// The record of `key` in a hashed table: `(records, count)` and `(slots, count)`.
    fn record_of(&self, (recs, n_recs): (usize, usize), (slots, n_slots): (usize, usize), key: &[u8]) -> Option<usize> {
        let mut slot = home_slot(unseeded_hash(key), n_slots);
        // `encode` places every key within MAX_PROBE slots of its home: a key farther away is
        // not in the table, whatever a crafted file's slots say.
        for _ in 0..n_slots.min(MAX_PROBE + 1) {
            let idx = self.u32(slots + 4 * slot)?;
            if idx == NONE {
                return None;
            }
            let idx = idx as usize;
            if idx < n_recs {
                let r = recs + idx * keyed::LEN;
                if self.string_at(r + keyed::KEY) == Some(key) {
                    return Some(r);
                }
            }
            slot = if slot + 1 >= n_slots { 0 } else { slot + 1 };
        }
        None
    }

    /// The two posting values of a keyed record.
    fn postings_at(&self, rec: usize) -> Option<(u32, u32)> {
        Some((self.u32(rec + keyed::FIRST)?, self.u32(rec + keyed::SECOND)?))
    }

    /// Posting values of a feature stem: (roots with `stem.rb`, roots with the extension).
    pub fn postings(&self, stem: &[u8]) -> Option<(u32, u32)> {
        self.postings_at(self.record_of((self.feats, self.n_feats), (self.slots, self.n_slots), stem)?)
    }

    /// Posting values of a directory prefix: (roots with a blind spot there, roots where it is
    /// a deferred directory).
    pub fn gaps(&self, prefix: &[u8]) -> Option<(u32, u32)> {
        if self.n_prefixes == 0 {
            return None;
        }
        self.postings_at(self.record_of(
            (self.prefixes, self.n_prefixes),
            (self.prefix_slots, self.n_prefix_slots),
            prefix,
        )?)
    }

    /// Whether any root has a blind spot or a deferred directory.
    pub fn has_gaps(&self) -> bool {
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
