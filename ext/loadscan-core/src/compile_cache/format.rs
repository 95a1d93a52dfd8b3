//! The compile cache's file (`iseq.bin`): one file holding every cached instruction sequence,
//! looked up in place (mapped, never copied), each blob checked by its own CRC32 before it is
//! handed to Ruby.
//!
//! ```text
//! header  32 bytes: magic "LOADSCNI", version, entry count, env key length, CRC32 of the env key
//!         and the table, the file's length
//! env     the env key (as the index's: loadscan version, RUBY_REVISION, RUBY_PLATFORM…), padded to 8
//! table   one 64-byte record per entry, sorted by (content hash, flags, key):
//!         hash lo, hash hi, flags, silent, key offset, key length, blob CRC32, blob offset, blob length
//! data    keys (the path Ruby asked for, NUL, the file's real path) and blobs (16-aligned)
//! ```
//!
//! Everything a lookup reads is checked when the file is opened (header, length, the CRC of the
//! table, every record's ranges), except the blobs, whose CRC is checked when one is served: a
//! damaged blob is never handed to `load_from_binary`.
//!
//! This file holds the layout's constants, the types, the writer (`encode`, `merge`) and the
//! tests of both; the reader (`Table`: opening and checking a file, lookups) is in [`read`].

mod read;

pub use read::Table;

/// The first bytes of the file (also how a file of loadscan's is recognised before replacing it).
pub const MAGIC: &[u8; 8] = b"LOADSCNI";
/// The layout's version: another one is a stale file, rewritten.
pub const VERSION: u32 = 1;

const HEADER: usize = 32;
const RECORD: usize = 64;
const BLOB_ALIGN: usize = 16;

/// What identifies one cached compile: the file's contents, what the compile depended on, and
/// the key (`path\0realpath`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id {
    /// xxh3-128 of the file's contents.
    pub hash: u128,
    /// A digest of the compile's settings (compile options, parser, Ruby build).
    pub flags: u64,
}

/// One entry to write.
#[derive(Clone, Debug)]
pub struct Entry {
    /// What identifies the compile.
    pub id: Id,
    /// The path Ruby asked for, a NUL, the file's real path.
    pub key: Vec<u8>,
    /// The warning states (bits: see the binding's `warning_state`) in which compiling this file
    /// is known to warn nothing: served only in those.
    pub silent: u64,
    /// `RubyVM::InstructionSequence#to_binary`'s output.
    pub blob: Vec<u8>,
}

/// An entry found in the file.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    /// The warning states in which the entry may be served.
    pub silent: u64,
    /// The blob, or `None` when its CRC does not match (damage: never handed to Ruby).
    pub blob: Option<&'a [u8]>,
}

/// Why a file could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Written by another loadscan or Ruby (another env key or layout): replaced quietly.
    Stale,
    /// Damaged (for one warning).
    Damaged(&'static str),
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

fn pad(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// The file holding `entries` (sorted here; one per id and key: the caller merged them) for `env`.
pub fn encode(entries: &mut [Entry], env: &[u8]) -> Vec<u8> {
    entries.sort_by(|a, b| (a.id, &a.key).cmp(&(b.id, &b.key)));
    let table = HEADER + pad(env.len(), 8);
    let mut data = table + entries.len() * RECORD;
    let mut out = vec![0u8; data];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    out[16..20].copy_from_slice(&(env.len() as u32).to_le_bytes());
    out[HEADER..HEADER + env.len()].copy_from_slice(env);
    for (i, e) in entries.iter().enumerate() {
        let key_off = data;
        let blob_off = pad(key_off + e.key.len(), BLOB_ALIGN);
        data = blob_off + e.blob.len();
        let at = table + i * RECORD;
        let mut put = |off: usize, v: &[u8]| out[at + off..at + off + v.len()].copy_from_slice(v);
        put(0, &(e.id.hash as u64).to_le_bytes());
        put(8, &((e.id.hash >> 64) as u64).to_le_bytes());
        put(16, &e.id.flags.to_le_bytes());
        put(24, &e.silent.to_le_bytes());
        put(32, &(key_off as u64).to_le_bytes());
        put(40, &(e.key.len() as u32).to_le_bytes());
        put(44, &crc32fast::hash(&e.blob).to_le_bytes());
        put(48, &(blob_off as u64).to_le_bytes());
        put(56, &(e.blob.len() as u64).to_le_bytes());
    }
    let crc = crc32fast::hash(&out[HEADER..]);
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    for e in entries.iter() {
        out.extend_from_slice(&e.key);
        out.resize(pad(out.len(), BLOB_ALIGN), 0);
        out.extend_from_slice(&e.blob);
    }
    let len = out.len() as u64;
    out[24..32].copy_from_slice(&len.to_le_bytes());
    out
}

/// `old` entries still worth keeping merged with `new` ones: a new entry replaces an old one
/// of the same id and key (their silent states joined), and any old entry for the same key and
/// flags whose contents differ (the file changed since: that compile is stale).
pub fn merge(old: impl Iterator<Item = Entry>, new: Vec<Entry>) -> Vec<Entry> {
    use std::collections::HashMap;
    let mut by_key: HashMap<(Vec<u8>, u64), Entry> = HashMap::new();
    for e in old {
        by_key.insert((e.key.clone(), e.id.flags), e);
    }
    for mut e in new {
        if let Some(prev) = by_key.get(&(e.key.clone(), e.id.flags)) {
            if prev.id == e.id {
                e.silent |= prev.silent;
            }
        }
        by_key.insert((e.key.clone(), e.id.flags), e);
    }
    by_key.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: &[u8] = b"loadscan test env";

    fn entry(hash: u128, key: &str, blob: &[u8]) -> Entry {
        Entry { id: Id { hash, flags: 7 }, key: key.as_bytes().to_vec(), silent: 0b11, blob: blob.to_vec() }
    }

    fn file() -> Vec<u8> {
        let mut entries = vec![
            entry(3, "/a.rb\0/a.rb", b"blob a"),
            entry(1, "/b.rb\0/b.rb", b"blob b, longer"),
            entry(1, "/c.rb\0/real/c.rb", b"c"),
        ];
        encode(&mut entries, ENV)
    }

    #[test]
    fn finds_each_entry_and_nothing_else() {
        let bytes = file();
        let t = Table::parse(&bytes[..], ENV).unwrap();
        assert_eq!(t.len(), 3);
        let id = |hash| Id { hash, flags: 7 };
        assert_eq!(t.get(id(3), b"/a.rb\0/a.rb").unwrap().blob, Some(&b"blob a"[..]));
        assert_eq!(t.get(id(1), b"/b.rb\0/b.rb").unwrap().blob, Some(&b"blob b, longer"[..]));
        assert_eq!(t.get(id(1), b"/c.rb\0/real/c.rb").unwrap().silent, 0b11);
        assert!(t.get(id(2), b"/a.rb\0/a.rb").is_none());
        assert!(t.get(Id { hash: 3, flags: 8 }, b"/a.rb\0/a.rb").is_none());
        assert!(t.get(id(1), b"/c.rb\0/c.rb").is_none(), "another real path is another compile");
        assert_eq!(t.entries().count(), 3);
    }

    #[test]
    fn another_env_or_version_is_stale() {
        let bytes = file();
        assert_eq!(Table::parse(&bytes[..], b"other").err(), Some(Refused::Stale));
        let mut v = bytes.clone();
        v[8] = 9;
        assert_eq!(Table::parse(&v[..], ENV).err(), Some(Refused::Stale));
    }

    fn damaged(bytes: &[u8]) -> bool {
        matches!(Table::parse(bytes, ENV).err(), Some(Refused::Damaged(_)))
    }

    #[test]
    fn five_kinds_of_damage_are_refused_or_never_served() {
        let good = file();
        // 1. truncated, anywhere
        for len in [0, 5, HEADER, good.len() / 2, good.len() - 1] {
            assert!(damaged(&good[..len]), "truncated to {len}");
        }
        // 2. a bad header (magic)
        let mut v = good.clone();
        v[0] ^= 0xff;
        assert!(damaged(&v));
        // 3. the table changed (its CRC)
        let mut v = good.clone();
        v[HEADER + pad(ENV.len(), 8) + 20] ^= 1;
        assert!(damaged(&v));
        // 4. a blob changed: the file opens, that entry is found but never served
        let mut v = good.clone();
        let at = v.windows(6).position(|w| w == b"blob a").unwrap();
        v[at] ^= 1;
        let t = Table::parse(&v[..], ENV).unwrap();
        assert_eq!(t.get(Id { hash: 3, flags: 7 }, b"/a.rb\0/a.rb").unwrap().blob, None);
        assert_eq!(t.entries().count(), 2, "a damaged blob is not written again");
        // 5. garbage of any length, and garbage after a good header
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in [1usize, 31, 32, 64, 200, 4096] {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert!(damaged(&junk));
            let mut v = good[..HEADER].to_vec();
            v.extend_from_slice(&junk);
            assert!(damaged(&v));
        }
        // and an extended file
        let mut v = good.clone();
        v.push(0);
        assert!(damaged(&v));
    }

    #[test]
    fn merge_keeps_one_entry_per_key_and_joins_silent_states() {
        let old = vec![entry(1, "k", b"x"), entry(2, "j", b"y")];
        let mut new = entry(1, "k", b"x");
        new.silent = 0b100;
        let mut changed = entry(5, "j", b"z");
        changed.silent = 1;
        let mut merged = merge(old.into_iter(), vec![new, changed]);
        merged.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(merged.len(), 2);
        assert_eq!((merged[0].id.hash, merged[0].silent), (5, 1), "the new contents replace the old");
        assert_eq!((merged[1].id.hash, merged[1].silent), (1, 0b111));
    }
}
