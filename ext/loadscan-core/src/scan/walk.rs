//! The walker: lists every directory below a set of roots, in parallel.
//!
//! Work items are directories, so one huge gem is split across threads as well as many small
//! ones. Threads are scoped to one call (`std::thread::scope`): nothing outlives a scan, which
//! matters because Ruby servers fork after boot.
//!
//! Loops are cut by checking each directory's `(dev, ino)` against the directories on its own
//! path (its ancestors), not against every directory seen: a symlink that leads to a directory
//! listed elsewhere is listed again under its own name, because `require` would find files
//! through it under that name. A cut loop becomes a blind spot. (A lazy listing of one deferred
//! directory, [`list_deferred`], has no loop to cut: it goes only as deep as a feature names.)
//!
//! With [`ScanOptions::eager_depth`] below the tree's depth, directories deeper than it are not
//! listed but recorded as deferred; the index lists them one by one when a lookup needs them.
//! Lazily, a 400-gem app's boot lists about 3,900 of its 23,000 directories, at the same cost
//! per directory as a full scan (8 µs with a warm dentry cache: `examples/lazy.rs`).
//!
//! The same walker runs in three [`Mode`]s: a full scan, the listing of one deferred
//! directory, and the relisting of changed directories (`refresh.rs`). Listing one directory is
//! one step of it (`step.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

use super::jobs::run_queue;
use super::listing::{Listing, ProblemKind, RootState, ScanProblem};
use super::options::ScanOptions;
use super::step::{join, Job, Mode, Output, Walk};

/// Scans every root and returns one listing per root, in the same order, and what the scan
/// worked around.
pub fn scan_roots(roots: &[PathBuf], opts: &ScanOptions) -> (Vec<Listing>, Vec<ScanProblem>) {
    let walk = Walk { roots, opts, dirs_seen: roots.iter().map(|_| AtomicUsize::new(0)).collect(), mode: Mode::Scan };
    let initial: Vec<Job> =
        (0..roots.len()).rev().map(|root| Job { root, rel: Vec::new(), depth: 0, ancestors: Vec::new() }).collect();
    assemble(roots, opts, run_jobs(&walk, initial, roots.len(), opts.threads))
}

/// A listing whose scan failed at `rel` of `root` (`b""`: the whole root): blind there, so
/// Ruby answers for it.
pub(super) fn failed(root: &Path, rel: &[u8]) -> (Listing, Vec<ScanProblem>) {
    let mut l = Listing::empty(root.to_path_buf(), RootState::Dir);
    l.blind.push(rel.to_vec());
    (l, vec![ScanProblem { kind: ProblemKind::Failed, path: join(root, rel), error: None }])
}

/// Lists one directory that an earlier scan deferred (`rel` below `root`) on the calling
/// thread, and returns what it holds as a partial listing of the root: the directory's record,
/// its files, its subdirectories as new deferred ones, and any blind spot. A directory that no
/// longer exists gives an empty listing, as Ruby's `require` would find nothing there.
///
/// No loop check is made: a lazy listing only goes as deep as a feature being looked up
/// names, and through a symlink loop `require` opens the same path the listing names (the
/// depth cap still applies).
///
/// `root_dev` is the root's device as recorded when it was listed (a directory on another one is
/// a mount point, asked whether it folds case: `super::case`); `None` asks every time.
pub fn list_deferred(
    root: &Path,
    rel: &[u8],
    root_dev: Option<u64>,
    opts: &ScanOptions,
) -> (Listing, Vec<ScanProblem>) {
    let roots = vec![root.to_path_buf()];
    let walk = Walk { roots: &roots, opts, dirs_seen: vec![AtomicUsize::new(0)], mode: Mode::Deferred { root_dev } };
    let depth = 1 + rel.iter().filter(|&&c| c == b'/').count();
    let job = Job { root: 0, rel: rel.to_vec(), depth, ancestors: Vec::new() };
    let outputs = run_jobs(&walk, vec![job], 1, 1);
    let (mut listings, problems) = assemble(&roots, opts, outputs);
    match listings.pop() {
        Some(mut listing) => {
            listing.state = RootState::Dir;
            (listing, problems)
        }
        None => failed(root, rel),
    }
}

/// What listing a directory gives when listing it panicked (a bug, or an injected fault): a
/// blind spot there, so Ruby answers for everything below it.
fn panicked(walk: &Walk, root: usize, rel: Vec<u8>) -> Output {
    let path = join(&walk.roots[root], &rel);
    let mut out = Output::new(root, rel.clone());
    out.blind.push(rel.clone());
    out.problems.push(ScanProblem { kind: ProblemKind::Failed, path, error: None });
    out.state = rel.is_empty().then_some(RootState::Dir);
    out
}

/// Lists one directory; a panic blinds that directory and nothing else.
fn run_one(walk: &Walk, job: Job) -> (Output, Vec<Job>) {
    let (root, rel) = (job.root, job.rel.clone());
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| walk.run(job)))
        .unwrap_or_else(|_| (panicked(walk, root, rel), Vec::new()))
}

/// Runs `walk` from the `initial` directories of its `roots` roots on up to `threads` threads
/// (see [`run_queue`]). A job that panics becomes a blind spot ([`run_one`]). A worker cannot
/// panic; should one, its outputs are lost and the directories it listed stay unknown to the
/// index only if nothing else names them, so every root is marked failed.
pub(super) fn run_jobs(walk: &Walk, initial: Vec<Job>, roots: usize, threads: usize) -> Vec<Output> {
    let threads = threads.max(1).min(roots.max(1) * 64);
    let lost = || (0..roots).map(|root| panicked(walk, root, Vec::new())).collect();
    run_queue(initial, threads, &|job| run_one(walk, job), &lost)
}

/// One listing per root from the outputs of a walk, and what the walk worked around.
pub(super) fn assemble(
    roots: &[PathBuf],
    opts: &ScanOptions,
    outputs: Vec<Output>,
) -> (Vec<Listing>, Vec<ScanProblem>) {
    let mut listings: Vec<Listing> = roots.iter().map(|r| Listing::empty(r.clone(), RootState::Missing)).collect();
    let mut problems = Vec::new();
    for out in outputs {
        let l = &mut listings[out.root];
        if let Some(state) = out.state {
            l.state = state;
        }
        l.dirs.extend(out.dir);
        l.files.extend(out.files);
        l.blind.extend(out.blind);
        l.deferred.extend(out.deferred);
        problems.extend(out.problems);
    }
    for l in &mut listings {
        finish(l, opts, &mut problems);
    }
    (listings, problems)
}

/// Applies the caps and puts the listing in canonical order.
pub(super) fn finish(l: &mut Listing, opts: &ScanOptions, problems: &mut Vec<ScanProblem>) {
    if l.files.len() > opts.max_files {
        l.files.clear();
        l.blind.push(Vec::new());
        problems.push(ScanProblem { kind: ProblemKind::TooLarge, path: l.root.clone(), error: None });
    }
    if l.blind.iter().any(|b| b.is_empty()) {
        l.blind.retain(|b| b.is_empty());
        l.deferred.clear();
    }
    l.normalize();
}
