//! Rebuilding listings from a snapshot (for rescans and writes, never on a boot's lookups),
//! within bounds whatever the file says.

use super::{dir, gap, keyed, RootView, Snapshot, MANY, MAX_EXPANDED, NONE};
use crate::scan::{DirRecord, FileEntry, Kind, Listing};

impl Snapshot {
    /// The full listing of a root, rebuilt from the file (for rescans): its directories and
    /// gaps, and the features whose postings name it (one pass over the table).
    pub fn listing(&self, root: &RootView<'_>, id: u32) -> Option<Listing> {
        let mut l = self.listing_without_files(root)?;
        l.files = self.files_by_root(Some(id)).pop().unwrap_or_default();
        Some(l)
    }

    /// A root's listing rebuilt from the file's records without its files (those are in the
    /// feature table: `files_by_root`): its directories and gaps (blind spots and deferred
    /// directories).
    pub fn listing_without_files(&self, root: &RootView<'_>) -> Option<Listing> {
        if !self.expandable() {
            return None;
        }
        let mut l = Listing::empty(root.path_buf(), root.state);
        l.dirs = self.dirs(root).collect::<Option<Vec<_>>>()?;
        let (start, len) = root.gaps;
        for i in start..start.checked_add(len)? {
            let b = self.gap_rec(i)?;
            let rel = self.string_at(b + gap::REL)?.to_vec();
            match self.u32(b + gap::KIND)? {
                gap::BLIND => l.blind.push(rel),
                gap::DEFERRED => l.deferred.push(rel),
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
            let f = self.feats + i * keyed::LEN;
            let (Some(stem), Some((rb, ext))) = (self.string_at(f + keyed::KEY), self.postings_at(f)) else {
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
    /// expanded: `listing_without_files` gives `None` (the root is scanned again, and not
    /// written back) and `files_by_root` nothing. Checked once, on first use (a write or a
    /// rescan, not the lookups of a boot, which are bounded on their own).
    fn expandable(&self) -> bool {
        *self.expandable.get_or_init(|| self.check_expansion().is_some())
    }

    fn check_expansion(&self) -> Option<()> {
        let mut budget = MAX_EXPANDED;
        let mut spend = |n: usize| budget.checked_sub(n).map(|left| budget = left);
        for i in 0..self.n_dirs() {
            spend(self.string_at(self.dirs + i * dir::LEN + dir::REL)?.len() + std::mem::size_of::<DirRecord>())?;
        }
        for i in 0..self.n_gaps() {
            spend(self.string_at(self.gaps + i * gap::LEN + gap::REL)?.len() + std::mem::size_of::<Vec<u8>>())?;
        }
        let mut next = 0usize;
        for (recs, n, files) in [(self.feats, self.n_feats, true), (self.prefixes, self.n_prefixes, false)] {
            for i in 0..n {
                let rec = recs + i * keyed::LEN;
                let key = self.string_at(rec + keyed::KEY)?.len();
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
        (self.gaps - self.dirs) / dir::LEN
    }

    fn n_gaps(&self) -> usize {
        (self.feats - self.gaps) / gap::LEN
    }
}
