//! What the cache is written from: one record per live root, its listing rebuilt from the
//! snapshot where the snapshot speaks for it, with what this process listed since.

use super::gaps::GapTable;
use super::roots::{Life, Roots, NOT_ON_PATH};
use crate::scan::Listing;
use crate::store::{RootRecord, Snapshot};

/// A stable root is revalidated by its top directory alone (its other records serve
/// `find::confirm_missing`): an unsettled directory anywhere in it (unreadable, or holding a
/// dangling `*.rb` symlink) unsettles the top one, so the next boot scans the root again.
fn unsettle_top(listing: &mut Listing) {
    if listing.dirs.iter().any(|d| d.stamp.is_unsettled()) {
        if let Some(top) = listing.dirs.first_mut().filter(|d| d.rel.is_empty()) {
            top.stamp = top.stamp.unsettled();
        }
    }
}

/// Every live root as a record to write, dropping roots that are not on the current load path
/// and were last used before `prune_before_s`: a listing rebuilt from the snapshot where it
/// speaks for the root, with what this process listed since, less the deferrals lifted since.
pub(super) fn records(
    roots: &Roots,
    gaps: &GapTable,
    snapshot: Option<&Snapshot>,
    now_s: i64,
    prune_before_s: i64,
) -> Vec<RootRecord> {
    let mut out = Vec::new();
    let mut snapshot_files = match snapshot {
        Some(s) if roots.any_cached() => s.files_by_root(None),
        _ => Vec::new(),
    };
    for (id, r) in roots.iter() {
        let on_path = roots.rank(id) != NOT_ON_PATH;
        let last_used_s = if on_path { now_s } else { r.last_used_s() };
        if !on_path && last_used_s < prune_before_s {
            continue;
        }
        // A directory listed since it was deferred is no longer deferred.
        let still_deferred = |d: &Vec<u8>| gaps.get(d.as_slice()).is_some_and(|g| g.deferred().contains(id));
        let lifted = |d: &Vec<u8>| gaps.get(d.as_slice()).is_some_and(|g| g.lifted().contains(id));
        let listing = match (r.life(), snapshot) {
            (Life::Scanned(l), _) => {
                let mut l = l.clone();
                l.deferred.retain(still_deferred);
                Some(l)
            }
            (Life::Cached { listed_since, .. }, Some(s)) => {
                let slot = id as usize;
                s.root(slot).and_then(|v| s.listing_without_files(&v)).map(|mut l| {
                    l.files = snapshot_files.get_mut(slot).map(std::mem::take).unwrap_or_default();
                    if let Some(since) = listed_since {
                        l.deferred.retain(|d| !lifted(d));
                        l.files.extend(since.files.iter().cloned());
                        l.dirs.extend(since.dirs.iter().cloned());
                        l.blind.extend(since.blind.iter().cloned());
                        l.deferred.extend(since.deferred.iter().filter(|d| still_deferred(d)).cloned());
                    }
                    l
                })
            }
            _ => None,
        };
        if let Some(mut listing) = listing {
            listing.normalize();
            if !r.is_volatile() {
                unsettle_top(&mut listing);
            }
            let (volatile, scanned_at_ns) = (r.is_volatile(), r.scanned_at_ns());
            out.push(RootRecord { listing, volatile, scanned_at_ns, last_used_s });
        }
    }
    out
}
