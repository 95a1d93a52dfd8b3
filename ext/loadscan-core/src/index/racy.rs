//! Racy directories (PROJECT_RULES.md) of the roots this process listed: one whose mtime is
//! within `RACY_NS` of the scan that recorded it counts as changed at every revalidation. A
//! boot that writes the cache lists it again once and records it settled; a cache that is only
//! ever read (a Docker image's, written by `loadscan build` right after a `COPY`) would have
//! it listed again on every boot. [`Index::relist_racy`] lists such directories again once
//! their window has passed, so that the records written next hold.

use std::path::PathBuf;
use std::time::Duration;

use super::{now_ns, Index, Life, RootId};
use crate::scan::{refresh, DirRecord, ScanProblem};
use crate::store::RACY_NS;

/// A root's racy directories (relative paths).
type RacyDirs = (RootId, Vec<Vec<u8>>);

fn is_racy(d: &DirRecord, scanned_at_ns: i64) -> bool {
    !d.stamp.is_unsettled() && d.stamp.mtime_ns.saturating_add(RACY_NS) >= scanned_at_ns
}

impl Index {
    /// The racy directories of each root this process listed, and when the last window closes
    /// (ns since the epoch).
    fn racy(&self) -> (Vec<RacyDirs>, i64) {
        let mut until = i64::MIN;
        let mut out = Vec::new();
        for (id, r) in self.roots.iter().enumerate() {
            let Life::Scanned(listing) = &r.life else { continue };
            let racy: Vec<&DirRecord> = listing.dirs.iter().filter(|d| is_racy(d, r.scanned_at_ns)).collect();
            if let Some(last) = racy.iter().map(|d| d.stamp.mtime_ns.saturating_add(RACY_NS)).max() {
                until = until.max(last);
                out.push((id as RootId, racy.into_iter().map(|d| d.rel.clone()).collect()));
            }
        }
        (out, until)
    }

    /// Lists the racy directories of the roots this process listed again, once the last of their
    /// windows has closed, and ranks the roots by `order` (the load path as last synced):
    /// `Err(wait)` while a window is still open (nothing done), else what the listings worked
    /// around (nothing to do: none). A directory that changed in the meantime is racy again.
    pub fn relist_racy(&mut self, order: &[PathBuf]) -> Result<Vec<ScanProblem>, Duration> {
        let (racy, until) = self.racy();
        if racy.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ns();
        if now <= until {
            return Err(Duration::from_nanos((until - now) as u64 + 1_000_000));
        }
        let mut problems = Vec::new();
        for (id, dirs) in racy {
            let root = &self.roots[id as usize];
            let Life::Scanned(old) = &root.life else { continue };
            let (old, volatile, started) = (old.clone(), root.volatile, now_ns());
            let (listing, mut found) = refresh(&old, &dirs, &self.policy.scan);
            problems.append(&mut found);
            self.add_scanned(listing, volatile, started);
        }
        self.set_order(order);
        Ok(problems)
    }
}
