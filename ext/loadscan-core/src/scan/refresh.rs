//! Refreshing a listing: the directories that revalidation found changed are listed again
//! (the walker in [`Mode::Refresh`]) and merged with what the earlier listing had.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::AtomicUsize;

use super::listing::{Listing, RootState, ScanProblem};
use super::options::ScanOptions;
use super::step::{join, Job, Mode, Output, Walk};
use super::walk::{assemble, failed, finish, run_jobs, scan_roots};
use crate::relpath::{is_under, parent};

fn rescan_whole(old: &Listing, opts: &ScanOptions) -> (Listing, Vec<ScanProblem>) {
    let (mut listings, problems) = scan_roots(std::slice::from_ref(&old.root), opts);
    match listings.pop() {
        Some(listing) => (listing, problems),
        None => failed(&old.root, b""),
    }
}

/// Lists the directories of `old` that changed (`changed`, relative paths) again and returns
/// the updated listing: files and blind spots directly in a changed directory are replaced,
/// new subdirectories are scanned whole, vanished ones are dropped with everything below
/// them, and every other directory keeps what `old` had (their own stamps vouch for them).
/// What the relisting worked around comes beside the listing.
pub fn refresh(old: &Listing, changed: &[Vec<u8>], opts: &ScanOptions) -> (Listing, Vec<ScanProblem>) {
    let roots = std::slice::from_ref(&old.root);
    let recorded: HashMap<&[u8], (u64, u64)> =
        old.dirs.iter().map(|d| (d.rel.as_slice(), (d.stamp.dev, d.stamp.ino))).collect();
    let changed_set: HashSet<&[u8]> = changed.iter().map(Vec::as_slice).collect();
    // Identities of changed ancestors as they are now, asked once each (see below).
    let mut now: HashMap<&[u8], (u64, u64)> = HashMap::new();
    let mut jobs = Vec::new();
    for rel in changed {
        let prefixes: Vec<&[u8]> = std::iter::once(&rel[..0])
            .chain(rel.iter().enumerate().filter(|&(_, &c)| c == b'/').map(|(i, _)| &rel[..i]))
            .filter(|p| p.len() < rel.len())
            .collect();
        if old.state != RootState::Dir || !prefixes.iter().all(|p| recorded.contains_key(p)) {
            return rescan_whole(old, opts);
        }
        let depth = prefixes.len();
        // The loop check compares a directory with its ancestors. Deeper than the eager depth
        // it was listed lazily, without that check (see `list_deferred`), and is listed again
        // the same way (its subdirectories deferred, not walked). Otherwise an unchanged
        // ancestor's recorded identity was just validated by the caller, while a changed one
        // may have been replaced and its old inode handed to another directory (a `git
        // checkout`, a reinstall) — which would then pass for its own ancestor, a loop that is
        // not there: it is asked again. One that is gone gets an identity no directory has.
        let ancestors = if depth > opts.eager_depth {
            Vec::new()
        } else {
            prefixes
                .iter()
                .map(|p| match changed_set.contains(p) {
                    false => recorded[p],
                    true => *now.entry(*p).or_insert_with(|| {
                        std::fs::metadata(join(&old.root, p)).map_or((u64::MAX, u64::MAX), |m| (m.dev(), m.ino()))
                    }),
                })
                .collect()
        };
        jobs.push(Job { root: 0, rel: rel.clone(), depth, ancestors });
    }
    let kept: HashSet<Vec<u8>> = old.dirs.iter().map(|d| d.rel.clone()).collect();
    let walk = Walk {
        roots,
        opts,
        // The directories kept from `old` count toward the cap, as in a full scan.
        dirs_seen: vec![AtomicUsize::new(old.dirs.len())],
        mode: Mode::Refresh {
            kept: &kept,
            // Jobs relisted lazily (no ancestors) compare their device with the root's record.
            root_dev: old.dirs.iter().find(|d| d.rel.is_empty()).map(|d| d.stamp.dev),
        },
    };
    let outputs = run_jobs(&walk, jobs, 1, opts.threads);
    if outputs.iter().any(|o| o.rel.is_empty() && matches!(o.state, Some(RootState::Missing | RootState::NotDir))) {
        return rescan_whole(old, opts);
    }
    merge(old, outputs, opts)
}

fn merge(old: &Listing, outputs: Vec<Output>, opts: &ScanOptions) -> (Listing, Vec<ScanProblem>) {
    let mut relisted: HashSet<Vec<u8>> = HashSet::new();
    let mut gone: Vec<Vec<u8>> = Vec::new();
    let mut children: HashMap<Vec<u8>, HashSet<Vec<u8>>> = HashMap::new();
    for o in &outputs {
        if o.gone {
            gone.push(o.rel.clone());
        } else if o.dir.is_some() {
            // Listed now (a changed directory or a new one below it), with its children.
            relisted.insert(o.rel.clone());
            children.insert(o.rel.clone(), o.children.iter().cloned().collect());
        } else {
            // Unreadable now, or a loop: everything below it becomes unknown.
            relisted.insert(o.rel.clone());
            gone.push(o.rel.clone());
        }
    }
    for d in &old.dirs {
        let p = parent(&d.rel);
        if !d.rel.is_empty() && relisted.contains(p) && !children.get(p).is_some_and(|c| c.contains(&d.rel)) {
            gone.push(d.rel.clone());
        }
    }
    let dead = |rel: &[u8]| gone.iter().any(|g| is_under(rel, g));
    let mut listing = Listing::empty(old.root.clone(), old.state);
    listing.files =
        old.files.iter().filter(|f| !relisted.contains(parent(&f.stem)) && !dead(&f.stem)).cloned().collect();
    listing.dirs = old.dirs.iter().filter(|d| !relisted.contains(&d.rel) && !dead(&d.rel)).cloned().collect();
    listing.blind = old
        .blind
        .iter()
        .filter(|b| !relisted.contains(b.as_slice()) && !relisted.contains(parent(b)) && !dead(b))
        .cloned()
        .collect();
    listing.deferred = old.deferred.iter().filter(|d| !relisted.contains(parent(d)) && !dead(d)).cloned().collect();
    let mut outs = outputs;
    for o in &mut outs {
        o.state = None;
    }
    let (mut merged, mut problems) = assemble(std::slice::from_ref(&old.root), opts, outs);
    let fresh = merged.pop().unwrap_or_else(|| Listing::empty(old.root.clone(), old.state));
    listing.files.extend(fresh.files);
    listing.dirs.extend(fresh.dirs);
    listing.blind.extend(fresh.blind);
    listing.deferred.extend(fresh.deferred);
    finish(&mut listing, opts, &mut problems);
    (listing, problems)
}
