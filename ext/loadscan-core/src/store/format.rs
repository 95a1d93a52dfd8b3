//! Encoding a snapshot (see the module docs for the layout).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::layout::{dir, gap, header, keyed, root, Counts, Record};
use crate::hash::unseeded_hash;
use crate::scan::{Kind, Listing, RootState};

/// Bumped whenever the layout changes; older files are ignored and rewritten.
/// 4: every key lies within `MAX_PROBE` slots of its home slot.
pub const FORMAT_VERSION: u32 = 5;
pub(crate) const MAGIC: &[u8; 8] = b"LOADSCAN";
pub(crate) const NONE: u32 = u32::MAX;
/// How many slots past its home slot a key may lie: `encode` grows a table until none is
/// farther, and a lookup never probes more (a crafted file's full slot table made every lookup
/// walk all of it). Linear probing at 3/4 full displaces keys by a few dozen slots even in
/// tables of millions, so real tables never grow for this.
pub(crate) const MAX_PROBE: usize = 1024;
/// The most bytes of listings (paths, stems, directory and file records) a file may expand to
/// when its roots are rebuilt for a rescan or a write. A fully listed 800-gem app expands to
/// about 10 MB; without a bound, a crafted file whose records all point at one long string
/// (or one posting list) made the write at exit allocate gigabytes.
pub(crate) const MAX_EXPANDED: usize = 256 << 20;
/// A posting value with this bit set is an index into the `ids` section (a count, then the ids);
/// without it, a root id. `NONE`: no root.
pub(crate) const MANY: u32 = 0x8000_0000;

/// One root as stored: its listing plus what revalidation needs.
#[derive(Debug)]
pub struct RootRecord {
    /// The listing (root path, state, files, dirs with stamps and digests, blind spots,
    /// deferred directories).
    pub listing: Listing,
    /// Volatile roots (the app's own dirs) are revalidated directory by directory.
    pub volatile: bool,
    /// When the scan that produced the listing started (ns since the epoch).
    pub scanned_at_ns: i64,
    /// When the root was last on a load path that wrote the cache (s since the epoch).
    pub last_used_s: i64,
}

/// At most this many roots that are not on the load path are kept in the cache, or as many as
/// there are roots on it if that is more (a `rails server` keeps the test group's gems for the
/// next `rails test`), the most recently used first.
pub const DEAD_ROOTS_MIN: usize = 64;

/// Bounds what roots no longer on the load path cost the cache: the roots `on_path` are all
/// kept; of the others, the most recently used `max(DEAD_ROOTS_MIN, on_path.len())`. Without
/// it a program putting a fresh temp dir on `$LOAD_PATH` on each run grew its cache with every
/// run for the 30 days before a root is pruned by age. Order is kept.
pub fn bound_dead_roots(records: &mut Vec<RootRecord>, on_path: &[PathBuf]) {
    let live: HashSet<&Path> = on_path.iter().map(PathBuf::as_path).collect();
    let keep = DEAD_ROOTS_MIN.max(on_path.len());
    let mut dead: Vec<(i64, usize)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| !live.contains(r.listing.root.as_path()))
        .map(|(i, r)| (r.last_used_s, i))
        .collect();
    if dead.len() <= keep {
        return;
    }
    // Newest first; among roots last used in the same second, the later records (the later
    // scans) first.
    dead.sort_unstable_by(|a, b| b.cmp(a));
    let mut drop = vec![false; records.len()];
    for &(_, i) in &dead[keep..] {
        drop[i] = true;
    }
    let mut i = 0;
    records.retain(|_| {
        i += 1;
        !drop[i - 1]
    });
}

pub(crate) fn state_code(s: RootState) -> u8 {
    match s {
        RootState::Dir => 0,
        RootState::Missing => 1,
        RootState::NotDir => 2,
    }
}

/// How full a keyed table's slots may get. With linear probing a hit inspects about
/// (1 + 1/(1−α))/2 slots and a miss (1 + 1/(1−α)²)/2: 2.5 and 8.5 at α = 3/4, 1.5 and 2.5 at
/// 1/2. Feature lookups nearly all hit, so that table stays at 3/4 (4 bytes a slot, in the
/// biggest table); most directory-prefix lookups miss, so that small table is kept half empty
/// (at 3/4 a prefix probe cost 455 instructions in the 200-gem boot, at 1/2 200).
#[derive(Clone, Copy)]
pub(crate) enum Fill {
    /// At most 3/4 of the slots used.
    Dense,
    /// At most 1/2.
    Sparse,
}

/// Slots for `keys` keys.
pub(crate) fn slot_count(keys: usize, fill: Fill) -> usize {
    match fill {
        Fill::Dense => keys + keys / 3 + 8,
        Fill::Sparse => 2 * keys + 8,
    }
}

/// The first slot to probe for a hash: `hash * n / 2^64`, uniform for any table size.
pub(crate) fn home_slot(hash: u64, n_slots: usize) -> usize {
    ((hash as u128 * n_slots as u128) >> 64) as usize
}

/// The string section, each distinct string stored once (stems, directory names and prefixes
/// overlap a lot).
struct Strings<'a> {
    bytes: Vec<u8>,
    seen: HashMap<&'a [u8], u32>,
}

impl<'a> Strings<'a> {
    fn add(&mut self, s: &'a [u8]) -> (u32, u32) {
        if let Some(&off) = self.seen.get(s) {
            return (off, s.len() as u32);
        }
        let off = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s);
        self.seen.insert(s, off);
        (off, s.len() as u32)
    }
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// An open-addressing table over keys with these hashes (record `i` at the slot its key hashes
/// to, or the next free one).
/// No key lies more than `MAX_PROBE` slots past its home (the table is doubled until so).
fn slot_table(hashes: &[u64], fill: Fill) -> Vec<u32> {
    let mut n_slots = slot_count(hashes.len(), fill);
    'sizes: loop {
        let mut slots = vec![NONE; n_slots];
        for (i, &hash) in hashes.iter().enumerate() {
            let mut slot = home_slot(hash, n_slots);
            let mut displaced = 0;
            while slots[slot] != NONE {
                slot = if slot + 1 == n_slots { 0 } else { slot + 1 };
                displaced += 1;
                if displaced > MAX_PROBE {
                    n_slots *= 2;
                    continue 'sizes;
                }
            }
            slots[slot] = i as u32;
        }
        return slots;
    }
}

/// Key -> two lists of root ids: (`.rb`, extension) for stems, (blind, deferred) for prefixes.
type Keyed<'a> = HashMap<&'a [u8], [Vec<u32>; 2]>;

/// A hashed table of `keyed`, records in (hash, key) order: its records and its slots. Posting
/// lists of more than one id go to `overflow`.
fn keyed_table<'a>(
    keyed: Keyed<'a>,
    fill: Fill,
    strings: &mut Strings<'a>,
    overflow: &mut Vec<u32>,
) -> (Vec<u8>, Vec<u32>) {
    // (hash, key) order gives the same bytes for the same keys whatever order they were listed
    // in, and most comparisons end on the u64 (keyed_table at 200 gems: 11.0 → 8.4 M
    // instructions against sorting by the keys' bytes).
    let mut list: Vec<_> = keyed.into_iter().map(|(key, ids)| (unseeded_hash(key), key, ids)).collect();
    list.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let slots = slot_table(&list.iter().map(|e| e.0).collect::<Vec<_>>(), fill);
    let mut recs = Vec::with_capacity(list.len() * keyed::LEN);
    for (_, key, [first, second]) in &list {
        let rec = Record::<{ keyed::LEN }>::new()
            .pair(keyed::KEY, strings.add(key))
            .u32(keyed::FIRST, postings(first, overflow))
            .u32(keyed::SECOND, postings(second, overflow))
            .0;
        recs.extend_from_slice(&rec);
    }
    (recs, slots)
}

fn postings(ids: &[u32], overflow: &mut Vec<u32>) -> u32 {
    match ids {
        [] => NONE,
        [one] => *one,
        many => {
            let at = overflow.len() as u32;
            overflow.push(many.len() as u32);
            overflow.extend_from_slice(many);
            MANY | at
        }
    }
}

/// Encodes roots, and the features Ruby's own search could not load (`not_linked_in`), into a
/// complete cache file (header included). `env` identifies the Ruby and loadscan that may use it.
pub fn encode(roots: &[RootRecord], not_linked_in: &[&[u8]], env: &[u8]) -> Vec<u8> {
    let mut sections = Sections::for_roots(roots);
    for (id, r) in roots.iter().enumerate() {
        sections.add_root(id as u32, r);
    }
    for name in not_linked_in {
        let at = sections.strings.add(name);
        put32(&mut sections.not_linked_in, at.0);
        put32(&mut sections.not_linked_in, at.1);
    }
    with_header(sections.body(roots.len(), env), env.len())
}

/// A file being encoded: the records of the roots added so far and the tables they feed.
struct Sections<'a> {
    strings: Strings<'a>,
    root_recs: Vec<u8>,
    dir_recs: Vec<u8>,
    gap_recs: Vec<u8>,
    /// One string (offset, length) per feature Ruby's own search could not load.
    not_linked_in: Vec<u8>,
    /// Stem -> the roots having it as a `.rb` and as a native extension.
    feats: Keyed<'a>,
    /// Directory prefix -> the roots having a blind spot and a deferred directory there.
    prefixes: Keyed<'a>,
    n_dirs: u32,
    n_gaps: u32,
}

impl<'a> Sections<'a> {
    /// Empty sections, with room for `roots`.
    fn for_roots(roots: &[RootRecord]) -> Self {
        let n_files: usize = roots.iter().map(|r| r.listing.files.len()).sum();
        let n_gaps: usize = roots.iter().map(|r| r.listing.blind.len() + r.listing.deferred.len()).sum();
        let n_strings = n_files + n_gaps + roots.iter().map(|r| r.listing.dirs.len() + 1).sum::<usize>();
        Sections {
            strings: Strings {
                bytes: Vec::with_capacity(16 * n_strings),
                seen: HashMap::with_capacity_and_hasher(n_strings, Default::default()),
            },
            root_recs: Vec::new(),
            dir_recs: Vec::new(),
            gap_recs: Vec::new(),
            not_linked_in: Vec::new(),
            feats: HashMap::with_capacity_and_hasher(n_files, Default::default()),
            prefixes: HashMap::with_capacity_and_hasher(n_gaps, Default::default()),
            n_dirs: 0,
            n_gaps: 0,
        }
    }

    /// Adds root `id`: its record, its directories' and gaps' records, its files to the
    /// features and its gaps to the prefixes.
    fn add_root(&mut self, id: u32, r: &'a RootRecord) {
        let (l, strings) = (&r.listing, &mut self.strings);
        let rec = Record::<{ root::LEN }>::new()
            .pair(root::PATH, strings.add(l.root.as_os_str().as_bytes()))
            .u8(root::STATE, state_code(l.state))
            .u8(root::VOLATILE, r.volatile as u8)
            .pair(root::DIRS, (self.n_dirs, l.dirs.len() as u32))
            .pair(root::GAPS, (self.n_gaps, (l.blind.len() + l.deferred.len()) as u32))
            .u64(root::SCANNED_AT_NS, r.scanned_at_ns as u64)
            .u64(root::LAST_USED_S, r.last_used_s as u64)
            .0;
        self.root_recs.extend_from_slice(&rec);
        for d in &l.dirs {
            let rec = Record::<{ dir::LEN }>::new()
                .pair(dir::REL, strings.add(&d.rel))
                .u64(dir::DEV, d.stamp.dev)
                .u64(dir::INO, d.stamp.ino)
                .u64(dir::MTIME_NS, d.stamp.mtime_ns as u64)
                .u64(dir::SIZE, d.stamp.size)
                .u64(dir::DIGEST, d.digest)
                .0;
            self.dir_recs.extend_from_slice(&rec);
        }
        // A root's files are not stored apart: they are the features whose postings name it.
        for f in &l.files {
            let which = match f.kind {
                Kind::Rb => 0,
                Kind::Ext => 1,
            };
            self.feats.entry(f.stem.as_slice()).or_default()[which].push(id);
        }
        for (list, kind) in [(&l.blind, gap::BLIND), (&l.deferred, gap::DEFERRED)] {
            for b in list {
                let rec = Record::<{ gap::LEN }>::new().pair(gap::REL, strings.add(b)).u32(gap::KIND, kind).0;
                self.gap_recs.extend_from_slice(&rec);
                self.prefixes.entry(b.as_slice()).or_default()[kind as usize].push(id);
            }
        }
        self.n_dirs += l.dirs.len() as u32;
        self.n_gaps += (l.blind.len() + l.deferred.len()) as u32;
    }

    /// The file's body for `n_roots` roots: the env key, the counts, then every section.
    fn body(mut self, n_roots: usize, env: &[u8]) -> Vec<u8> {
        let mut overflow: Vec<u32> = Vec::new();
        let (n_feats, n_prefixes) = (self.feats.len(), self.prefixes.len());
        let (feat_recs, slots) = keyed_table(self.feats, Fill::Dense, &mut self.strings, &mut overflow);
        let (prefix_recs, prefix_slots) = keyed_table(self.prefixes, Fill::Sparse, &mut self.strings, &mut overflow);

        let mut body = Vec::new();
        body.extend_from_slice(env);
        let counts = Counts {
            roots: n_roots,
            dirs: self.n_dirs as usize,
            gaps: self.n_gaps as usize,
            feats: n_feats,
            slots: slots.len(),
            ids: overflow.len(),
            prefixes: n_prefixes,
            prefix_slots: prefix_slots.len(),
            not_linked_in: self.not_linked_in.len() / 8,
            strings_len: self.strings.bytes.len(),
        };
        counts.write(&mut body);
        for section in [&self.root_recs, &self.dir_recs, &self.gap_recs, &feat_recs] {
            body.extend_from_slice(section);
        }
        for s in slots.iter().chain(&overflow) {
            put32(&mut body, *s);
        }
        body.extend_from_slice(&prefix_recs);
        for s in &prefix_slots {
            put32(&mut body, *s);
        }
        body.extend_from_slice(&self.not_linked_in);
        body.extend_from_slice(&self.strings.bytes);
        body
    }
}

/// The complete file: the header over `body`, whose env key is `env_len` bytes, then the body.
fn with_header(body: Vec<u8>, env_len: usize) -> Vec<u8> {
    let mut head = Record::<{ header::LEN }>::new();
    head.0[header::MAGIC..header::MAGIC + MAGIC.len()].copy_from_slice(MAGIC);
    head.u32(header::VERSION, FORMAT_VERSION)
        .u32(header::HEADER_LEN, header::LEN as u32)
        .u64(header::BODY_LEN, body.len() as u64)
        .u32(header::CRC, crc32fast::hash(&body))
        .u32(header::ENV_LEN, env_len as u32);
    let mut out = Vec::with_capacity(header::LEN + body.len());
    out.extend_from_slice(&head.0);
    out.extend_from_slice(&body);
    out
}
