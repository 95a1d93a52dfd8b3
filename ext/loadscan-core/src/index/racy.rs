//! Racy directories (PROJECT_RULES.md) of the roots this process listed: one whose mtime is
//! within `RACY_NS` of the scan that recorded it counts as changed at every revalidation. A
//! boot that writes the cache lists it again once and records it out of its window; a cache that is only
//! ever read (a Docker image's, written by `loadscan build` right after a `COPY`) would have
//! it listed again on every boot. [`relist`] lists such directories again once
//! their window has passed, so that the records written next hold.

use std::time::Duration;

use super::ids::RootId;
use super::roots::{now_ns, Life, Roots};
use super::sync::Relisted;
use crate::scan::{refresh, DirRecord, ScanOptions, ScanProblem};
use crate::store::RACY_NS;

/// A root's racy directories (relative paths).
type RacyDirs = (RootId, Vec<Vec<u8>>);

fn is_racy(d: &DirRecord, scanned_at_ns: i64) -> bool {
    !d.stamp.is_unsettled() && d.stamp.mtime_ns.saturating_add(RACY_NS) >= scanned_at_ns
}

/// The racy directories of each root this process listed, and when the last window closes
/// (ns since the epoch).
fn racy(roots: &Roots) -> (Vec<RacyDirs>, i64) {
    let mut until = i64::MIN;
    let mut out = Vec::new();
    for (id, r) in roots.iter() {
        let Life::Scanned(listing) = r.life() else { continue };
        let racy: Vec<&DirRecord> = listing.dirs.iter().filter(|d| is_racy(d, r.scanned_at_ns())).collect();
        if let Some(last) = racy.iter().map(|d| d.stamp.mtime_ns.saturating_add(RACY_NS)).max() {
            until = until.max(last);
            out.push((id, racy.into_iter().map(|d| d.rel.clone()).collect()));
        }
    }
    (out, until)
}

/// Lists the racy directories of the roots this process listed again, once the last of their
/// windows has closed: `Err(wait)` while a window is still open (nothing done), else what the
/// listings worked around and the new listings, for the index to add (none: nothing to do). A
/// directory that changed in the meantime is racy again.
pub(super) fn relist(roots: &Roots, scan: &ScanOptions) -> Result<(Vec<ScanProblem>, Vec<Relisted>), Duration> {
    let (racy, until) = racy(roots);
    if racy.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let now = now_ns();
    if now <= until {
        return Err(Duration::from_nanos((until - now) as u64 + 1_000_000));
    }
    let mut problems = Vec::new();
    let mut relisted = Vec::new();
    for (id, dirs) in racy {
        let root = roots.get(id);
        let Life::Scanned(old) = root.life() else { continue };
        let started = now_ns();
        let (listing, mut found) = refresh(old, &dirs, scan);
        problems.append(&mut found);
        relisted.push((listing, root.is_volatile(), started));
    }
    Ok((problems, relisted))
}
