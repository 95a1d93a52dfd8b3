//! The compile cache file's reader (the layout and the writer are in [`super`]): `Table`, a
//! file parsed and checked over its bytes, and its lookups. A blob's CRC is checked when it is
//! handed out, never before.

use super::{pad, u32_at, u64_at, Entry, Found, Id, Refused, HEADER, MAGIC, RECORD, VERSION};

/// A parsed, checked file over its bytes.
pub struct Table<B: AsRef<[u8]>> {
    bytes: B,
    count: usize,
    table: usize,
}

/// One record's fields, read within bounds checked at parse time.
struct Rec {
    id: Id,
    silent: u64,
    key: (usize, usize),
    crc: u32,
    blob: (usize, usize),
}

impl<B: AsRef<[u8]>> Table<B> {
    /// Checks `bytes` as a file for `env`.
    pub fn parse(bytes: B, env: &[u8]) -> Result<Table<B>, Refused> {
        let b = bytes.as_ref();
        let damaged = Refused::Damaged;
        if b.len() < HEADER || &b[..8] != MAGIC {
            return Err(damaged("not a compile cache (bad magic or too short)"));
        }
        let word = |at| u32_at(b, at).unwrap_or(0) as usize;
        if word(8) != VERSION as usize {
            return Err(Refused::Stale);
        }
        let (count, env_len, crc) = (word(12), word(16), u32_at(b, 20).unwrap_or(0));
        if u64_at(b, 24) != Some(b.len() as u64) {
            return Err(damaged("truncated or extended (its length is not the one written)"));
        }
        let table = HEADER.checked_add(pad(env_len, 8)).ok_or(damaged("bad env key length"))?;
        let end = count.checked_mul(RECORD).and_then(|n| n.checked_add(table)).ok_or(damaged("bad entry count"))?;
        if end > b.len() {
            return Err(damaged("bad entry count"));
        }
        if crc32fast::hash(&b[HEADER..end]) != crc {
            return Err(damaged("its table fails its CRC"));
        }
        if &b[HEADER..HEADER + env_len] != env {
            return Err(Refused::Stale);
        }
        let t = Table { bytes, count, table };
        for i in 0..count {
            let r = t.rec(i).ok_or(damaged("an entry points outside the file"))?;
            if i > 0 && t.rec(i - 1).map(|p| p.id) > Some(r.id) {
                return Err(damaged("its table is not sorted"));
            }
        }
        Ok(t)
    }

    /// Record `i`, when all of it lies inside the file.
    fn rec(&self, i: usize) -> Option<Rec> {
        let b = self.bytes.as_ref();
        let at = self.table + i * RECORD;
        let id =
            Id { hash: (u64_at(b, at)? as u128) | ((u64_at(b, at + 8)? as u128) << 64), flags: u64_at(b, at + 16)? };
        let key = (u64_at(b, at + 32)? as usize, u32_at(b, at + 40)? as usize);
        let blob = (u64_at(b, at + 48)? as usize, u64_at(b, at + 56)? as usize);
        let inside = |(off, len): (usize, usize)| off.checked_add(len).is_some_and(|e| e <= b.len());
        (inside(key) && inside(blob)).then_some(Rec {
            id,
            silent: u64_at(b, at + 24)?,
            key,
            crc: u32_at(b, at + 44)?,
            blob,
        })
    }

    fn slice(&self, (off, len): (usize, usize)) -> &[u8] {
        &self.bytes.as_ref()[off..off + len]
    }

    /// How many entries the file holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entry for `id` and `key`, its blob checked.
    pub fn get(&self, id: Id, key: &[u8]) -> Option<Found<'_>> {
        // The first record whose id is not below `id`.
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.rec(mid)?.id < id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        for i in lo..self.count {
            let r = self.rec(i)?;
            if r.id != id {
                return None;
            }
            if self.slice(r.key) == key {
                let blob = self.slice(r.blob);
                let blob = (crc32fast::hash(blob) == r.crc).then_some(blob);
                return Some(Found { silent: r.silent, blob });
            }
        }
        None
    }

    /// Every entry whose blob is intact, as entries to write again.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        (0..self.count).filter_map(|i| {
            let r = self.rec(i)?;
            let blob = self.slice(r.blob);
            (crc32fast::hash(blob) == r.crc).then(|| Entry {
                id: r.id,
                key: self.slice(r.key).to_vec(),
                silent: r.silent,
                blob: blob.to_vec(),
            })
        })
    }
}
