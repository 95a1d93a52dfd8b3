//! Where each field of the file lies: one description per record kind, used by `encode` to
//! write a record and by `Snapshot` to read it. All integers are little-endian; a *string* is
//! two u32s (offset and length in the string section), a *range* two u32s (first index and
//! count), a *posting* one u32 (see `NONE` and `MANY`).

/// The file header.
pub(crate) mod header {
    /// `b"LOADSCAN"`.
    pub const MAGIC: usize = 0;
    /// u32: the format version.
    pub const VERSION: usize = 8;
    /// u32: the header's own length.
    pub const HEADER_LEN: usize = 12;
    /// u64: the body's length.
    pub const BODY_LEN: usize = 16;
    /// u32: CRC32 of the body.
    pub const CRC: usize = 24;
    /// u32: the length of the environment key that opens the body.
    pub const ENV_LEN: usize = 28;
    /// The header's length (zero-padded).
    pub const LEN: usize = 64;
}

/// A root record.
pub(crate) mod root {
    /// String: the root's path.
    pub const PATH: usize = 0;
    /// u8: its state (`state_code`).
    pub const STATE: usize = 8;
    /// u8: 1 if volatile (two zero bytes follow).
    pub const VOLATILE: usize = 9;
    /// Range of its directory records.
    pub const DIRS: usize = 12;
    /// Range of its gap records.
    pub const GAPS: usize = 20;
    /// u64: when its scan started (ns since the epoch).
    pub const SCANNED_AT_NS: usize = 28;
    /// u64: when it was last on a load path that wrote the cache (s since the epoch).
    pub const LAST_USED_S: usize = 36;
    /// The record's length.
    pub const LEN: usize = 44;
}

/// A directory record.
pub(crate) mod dir {
    /// String: the directory relative to its root.
    pub const REL: usize = 0;
    /// u64s: its stamp.
    pub const DEV: usize = 8;
    pub const INO: usize = 16;
    pub const MTIME_NS: usize = 24;
    pub const SIZE: usize = 32;
    /// u64: the digest of its entries.
    pub const DIGEST: usize = 40;
    /// The record's length.
    pub const LEN: usize = 48;
}

/// A gap record (a blind spot or a deferred directory of a root).
pub(crate) mod gap {
    /// String: the directory relative to its root.
    pub const REL: usize = 0;
    /// u32: `BLIND` or `DEFERRED`.
    pub const KIND: usize = 8;
    /// The record's length.
    pub const LEN: usize = 12;
    /// Gap kinds; also which posting of a prefix record names the root.
    pub const BLIND: u32 = 0;
    pub const DEFERRED: u32 = 1;
}

/// A record of a hashed table (features, prefixes).
pub(crate) mod keyed {
    /// String: the key (a stem or a directory prefix).
    pub const KEY: usize = 0;
    /// Postings: (`.rb`, extension) for stems, (blind, deferred) for prefixes.
    pub const FIRST: usize = 8;
    pub const SECOND: usize = 12;
    /// The record's length.
    pub const LEN: usize = 16;
}

/// The counts that open the sections, in this order (u32 each).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    pub roots: usize,
    pub dirs: usize,
    pub gaps: usize,
    pub feats: usize,
    pub slots: usize,
    pub ids: usize,
    pub prefixes: usize,
    pub prefix_slots: usize,
    /// Features Ruby's own search could not load (a string each: `index::linked_in`).
    pub not_linked_in: usize,
    pub strings_len: usize,
}

impl Counts {
    /// Their length in the file.
    pub const LEN: usize = 10 * 4;

    fn fields(&self) -> [usize; 10] {
        let c = self;
        [c.roots, c.dirs, c.gaps, c.feats, c.slots, c.ids, c.prefixes, c.prefix_slots, c.not_linked_in, c.strings_len]
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        for n in self.fields() {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
    }

    pub fn read(b: &[u8], at: usize) -> Option<Counts> {
        let n = |i: usize| read_u32(b, at + 4 * i).map(|v| v as usize);
        Some(Counts {
            roots: n(0)?,
            dirs: n(1)?,
            gaps: n(2)?,
            feats: n(3)?,
            slots: n(4)?,
            ids: n(5)?,
            prefixes: n(6)?,
            prefix_slots: n(7)?,
            not_linked_in: n(8)?,
            strings_len: n(9)?,
        })
    }
}

/// A record being written: fields set at their offsets, the rest zero.
pub(crate) struct Record<const N: usize>(pub [u8; N]);

impl<const N: usize> Record<N> {
    pub fn new() -> Self {
        Record([0; N])
    }

    pub fn u8(&mut self, at: usize, v: u8) -> &mut Self {
        self.0[at] = v;
        self
    }

    pub fn u32(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
        self
    }

    /// A string or a range: two u32s.
    pub fn pair(&mut self, at: usize, (a, b): (u32, u32)) -> &mut Self {
        self.u32(at, a).u32(at + 4, b)
    }
}

pub(crate) fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

pub(crate) fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// A string or a range: two u32s.
pub(crate) fn read_pair(b: &[u8], at: usize) -> Option<(usize, usize)> {
    Some((read_u32(b, at)? as usize, read_u32(b, at.checked_add(4)?)? as usize))
}
