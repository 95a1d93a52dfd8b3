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
//! directory, and the relisting of changed directories (`refresh.rs`).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::case::Ask;
use super::jobs::run_queue;
use super::listing::{DirRecord, FileEntry, Listing, ProblemKind, RootState, ScanProblem};
use super::options::ScanOptions;
use super::readdir::{entry_digest, errno, list, Entry};
use crate::relpath;

/// One directory to list.
pub(super) struct Job {
    pub(super) root: usize,
    pub(super) rel: Vec<u8>,
    pub(super) depth: usize,
    /// `(dev, ino)` of the directories from the root down to the parent.
    pub(super) ancestors: Vec<(u64, u64)>,
}

/// What listing one directory gave.
pub(super) struct Output {
    root: usize,
    pub(super) rel: Vec<u8>,
    /// Every subdirectory found (descended into or kept from an earlier listing); filled only
    /// for a refresh, the one reader.
    pub(super) children: Vec<Vec<u8>>,
    /// A refreshed directory that no longer exists (its parent's relisting drops it).
    pub(super) gone: bool,
    pub(super) dir: Option<DirRecord>,
    files: Vec<FileEntry>,
    blind: Vec<Vec<u8>>,
    deferred: Vec<Vec<u8>>,
    problems: Vec<ScanProblem>,
    pub(super) state: Option<RootState>,
}

pub(super) fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

/// What a walk is for.
pub(super) enum Mode<'a> {
    /// Scanning roots whole ([`scan_roots`]).
    Scan,
    /// Listing one deferred directory ([`list_deferred`]): if it is gone, it is simply empty now.
    Deferred {
        /// The root's device, if it could be read: a directory on another one is asked whether
        /// it folds case (`super::case`).
        root_dev: Option<u64>,
    },
    /// Listing changed directories of an earlier listing again (`refresh.rs`): one that is
    /// gone is dropped by its parent's relisting.
    Refresh {
        /// Directories whose contents come from the earlier listing, so a relisted parent does
        /// not descend into them again.
        kept: &'a HashSet<Vec<u8>>,
        /// The root's recorded device, for jobs relisted lazily (without ancestors).
        root_dev: Option<u64>,
    },
}

pub(super) struct Walk<'a> {
    pub(super) roots: &'a [PathBuf],
    pub(super) opts: &'a ScanOptions,
    pub(super) dirs_seen: Vec<AtomicUsize>,
    pub(super) mode: Mode<'a>,
}

impl Walk<'_> {
    /// Lists one directory; returns its output and the subdirectories to list next.
    fn run(&self, job: Job) -> (Output, Vec<Job>) {
        let root = &self.roots[job.root];
        let path = join(root, &job.rel);
        let mut out = Output {
            root: job.root,
            rel: job.rel.clone(),
            children: Vec::new(),
            gone: false,
            dir: None,
            files: Vec::new(),
            blind: Vec::new(),
            deferred: Vec::new(),
            problems: Vec::new(),
            state: None,
        };
        let mut digest = 0u64;
        // An entry that may become loadable without this directory changing (see `DirStamp`).
        let mut unsettled = false;
        let mut subdirs: Vec<Vec<u8>> = Vec::new();
        let problem = |kind, path: PathBuf, error: Option<io::Error>| ScanProblem { kind, path, error };

        if self.dirs_seen[job.root].fetch_add(1, Ordering::Relaxed) >= self.opts.max_dirs {
            out.blind.push(Vec::new());
            out.problems.push(problem(ProblemKind::TooLarge, root.clone(), None));
            return (out, Vec::new());
        }
        if job.rel.is_empty() && self.opts.skips_root(root) {
            out.state = Some(RootState::Dir);
            out.blind.push(Vec::new());
            return (out, Vec::new());
        }
        if let Some(hook) = &self.opts.before_list.0 {
            hook(&path);
        }
        // A root is asked whether its names fold case; below it, only a mount point (another
        // device than the parent's, or for a lazily listed directory, than the root's).
        let ask = match job.ancestors.last() {
            _ if job.rel.is_empty() => Ask::Always,
            Some(&(dev, _)) => Ask::IfOffDevice(dev),
            None => match self.mode {
                Mode::Scan => Ask::Always,
                Mode::Deferred { root_dev } | Mode::Refresh { root_dev, .. } => {
                    root_dev.map_or(Ask::Always, Ask::IfOffDevice)
                }
            },
        };
        let result = list(&path, ask, |name, found| {
            digest = digest.wrapping_add(entry_digest(name, &found));
            match found {
                Entry::Dir => {
                    if self.opts.skips(&path, name) {
                        out.blind.push(relpath::child(&job.rel, name));
                    } else {
                        subdirs.push(relpath::child(&job.rel, name));
                    }
                }
                Entry::File => {
                    if let Some((kind, stem_len)) = self.opts.classify(name) {
                        out.files.push(FileEntry { stem: relpath::child(&job.rel, &name[..stem_len]), kind });
                    }
                }
                Entry::Ignore => {}
                Entry::Dangling(e) => {
                    // Named like a loadable file: its target may appear. (Any other name matters
                    // only as a directory, which `Index::confirm_missing` sees appear.)
                    unsettled |= self.opts.classify(name).is_some();
                    out.problems.push(problem(ProblemKind::Dangling, path.join(OsStr::from_bytes(name)), Some(e)));
                }
                Entry::Unknown(e) => {
                    unsettled = true;
                    out.blind.push(relpath::child(&job.rel, name));
                    out.problems.push(problem(ProblemKind::Unreadable, path.join(OsStr::from_bytes(name)), Some(e)));
                }
            }
        });
        let listed = match result {
            Ok(listed) => listed,
            Err(e) => {
                let top = job.rel.is_empty();
                let (absent, not_dir) = (errno::not_found(&e), errno::not_dir(&e));
                match () {
                    _ if absent && top => out.state = Some(RootState::Missing),
                    _ if not_dir && top => out.state = Some(RootState::NotDir),
                    _ if (absent || not_dir) && !matches!(self.mode, Mode::Scan) => out.gone = true,
                    _ => {
                        // Whatever was gathered before the error is kept (it exists); the rest
                        // of the directory is unknown.
                        let kind = if absent || not_dir { ProblemKind::Vanished } else { ProblemKind::Unreadable };
                        out.blind.push(job.rel.clone());
                        out.dir = Some(DirRecord::unlisted(job.rel.clone(), &path));
                        out.problems.push(problem(kind, path, Some(e)));
                        if top {
                            out.state = Some(RootState::Dir);
                        }
                    }
                }
                return (out, Vec::new());
            }
        };
        if job.rel.is_empty() {
            out.state = Some(RootState::Dir);
        }
        let stamp = if unsettled { listed.stamp.unsettled() } else { listed.stamp };
        let id = (stamp.dev, stamp.ino);
        // Names that fold case, or a cut loop: nothing listed here counts, Ruby answers below.
        let unusable = match () {
            _ if listed.folds => Some(ProblemKind::CaseFolding),
            _ if job.ancestors.contains(&id) => Some(ProblemKind::Loop),
            _ => None,
        };
        if let Some(kind) = unusable {
            out.files.clear();
            out.blind.clear();
            out.problems.clear();
            out.blind.push(job.rel.clone());
            out.problems.push(problem(kind, path, None));
            return (out, Vec::new());
        }
        out.dir = Some(DirRecord { rel: job.rel.clone(), stamp, digest });
        if let Mode::Refresh { kept, .. } = self.mode {
            out.children = subdirs.clone(); // only a refresh compares them
            subdirs.retain(|rel| !kept.contains(rel));
        }
        let mut jobs = Vec::with_capacity(subdirs.len());
        if job.depth >= self.opts.max_depth {
            if !subdirs.is_empty() {
                out.problems.push(problem(ProblemKind::TooLarge, path, None));
                out.blind.extend(subdirs);
            }
        } else if job.depth >= self.opts.eager_depth {
            out.deferred.extend(subdirs);
        } else {
            for rel in subdirs {
                let mut ancestors = Vec::with_capacity(job.ancestors.len() + 1);
                ancestors.extend_from_slice(&job.ancestors);
                ancestors.push(id);
                jobs.push(Job { root: job.root, rel, depth: job.depth + 1, ancestors });
            }
        }
        (out, jobs)
    }
}

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
    Output {
        root,
        children: Vec::new(),
        gone: false,
        dir: None,
        files: Vec::new(),
        blind: vec![rel.clone()],
        deferred: Vec::new(),
        problems: vec![ScanProblem { kind: ProblemKind::Failed, path, error: None }],
        state: rel.is_empty().then_some(RootState::Dir),
        rel,
    }
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
