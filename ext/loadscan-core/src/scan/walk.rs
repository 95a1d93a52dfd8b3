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

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::case::Ask;
use super::listing::{DirRecord, FileEntry, Listing, ProblemKind, RootState, ScanProblem};
use super::options::ScanOptions;
use super::readdir::{entry_digest, errno, list, Found};

/// One directory to list.
struct Job {
    root: usize,
    rel: Vec<u8>,
    depth: usize,
    /// `(dev, ino)` of the directories from the root down to the parent.
    ancestors: Vec<(u64, u64)>,
}

/// What listing one directory gave.
struct Output {
    root: usize,
    rel: Vec<u8>,
    /// Every subdirectory found (descended into or kept from an earlier listing); filled only
    /// for a refresh, the one reader.
    children: Vec<Vec<u8>>,
    /// A refreshed directory that no longer exists (its parent's relisting drops it).
    gone: bool,
    dir: Option<DirRecord>,
    files: Vec<FileEntry>,
    blind: Vec<Vec<u8>>,
    deferred: Vec<Vec<u8>>,
    problems: Vec<ScanProblem>,
    state: Option<RootState>,
}

fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

fn child_rel(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        v.extend_from_slice(rel);
        v.push(b'/');
    }
    v.extend_from_slice(name);
    v
}

struct Walk<'a> {
    roots: &'a [PathBuf],
    opts: &'a ScanOptions,
    dirs_seen: Vec<AtomicUsize>,
    /// When refreshing: directories whose contents come from the earlier listing, so a
    /// relisted parent does not descend into them again.
    keep: Option<&'a HashSet<Vec<u8>>>,
    /// Listing one deferred directory: if it is gone, it is simply empty now.
    lazy: bool,
    /// Listing one deferred directory: the root's device, if it could be read (a directory on
    /// another one is asked whether it folds case, `super::case`).
    lazy_root_dev: Option<u64>,
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
        let mut subdirs: Vec<Vec<u8>> = Vec::new();
        let problem = |kind, path: PathBuf, error: Option<io::Error>| ScanProblem { kind, path, error };

        if self.dirs_seen[job.root].fetch_add(1, Ordering::Relaxed) >= self.opts.max_dirs {
            out.blind.push(Vec::new());
            out.problems.push(problem(ProblemKind::TooLarge, root.clone(), None));
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
            None => self.lazy_root_dev.map_or(Ask::Always, Ask::IfOffDevice),
        };
        let result = list(&path, ask, |name, found| {
            digest = digest.wrapping_add(entry_digest(name, &found));
            match found {
                Found::Dir => {
                    if self.opts.skips(name) {
                        out.blind.push(child_rel(&job.rel, name));
                    } else {
                        subdirs.push(child_rel(&job.rel, name));
                    }
                }
                Found::File => {
                    if let Some((kind, stem_len)) = self.opts.classify(name) {
                        out.files.push(FileEntry { stem: child_rel(&job.rel, &name[..stem_len]), kind });
                    }
                }
                Found::Ignore => {}
                Found::Dangling(e) => {
                    out.problems.push(problem(ProblemKind::Dangling, path.join(OsStr::from_bytes(name)), Some(e)));
                }
                Found::Unknown(e) => {
                    out.blind.push(child_rel(&job.rel, name));
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
                    _ if (absent || not_dir) && (self.keep.is_some() || self.lazy) => out.gone = true,
                    _ => {
                        // Whatever was gathered before the error is kept (it exists); the rest
                        // of the directory is unknown.
                        let kind = if absent || not_dir { ProblemKind::Vanished } else { ProblemKind::Unreadable };
                        out.blind.push(job.rel.clone());
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
        if listed.folds {
            out.files.clear();
            out.blind.clear();
            out.problems.clear();
            out.blind.push(job.rel.clone());
            out.problems.push(problem(ProblemKind::CaseFolding, path, None));
            return (out, Vec::new());
        }
        let stamp = listed.stamp;
        let id = (stamp.dev, stamp.ino);
        if job.ancestors.contains(&id) {
            out.files.clear();
            out.blind.clear();
            out.problems.clear();
            out.blind.push(job.rel.clone());
            out.problems.push(problem(ProblemKind::Loop, path, None));
            return (out, Vec::new());
        }
        out.dir = Some(DirRecord { rel: job.rel.clone(), stamp, digest });
        let kept = |rel: &Vec<u8>| self.keep.is_some_and(|k| k.contains(rel));
        if self.keep.is_some() {
            out.children = subdirs.clone(); // only a refresh compares them
        }
        subdirs.retain(|rel| !kept(rel));
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

/// The queue shared by the workers: pending jobs and how many are being worked on.
struct Queue {
    jobs: Vec<Job>,
    busy: usize,
}

/// Scans every root and returns one listing per root, in the same order.
pub fn scan_roots(roots: &[PathBuf], opts: &ScanOptions) -> Vec<Listing> {
    let walk = Walk {
        roots,
        opts,
        dirs_seen: roots.iter().map(|_| AtomicUsize::new(0)).collect(),
        keep: None,
        lazy: false,
        lazy_root_dev: None,
    };
    let initial: Vec<Job> =
        (0..roots.len()).rev().map(|root| Job { root, rel: Vec::new(), depth: 0, ancestors: Vec::new() }).collect();
    assemble(roots, opts, run_jobs(&walk, initial, roots.len(), opts.threads))
}

/// A listing whose scan failed at `rel` of `root` (`b""`: the whole root): blind there, so
/// Ruby answers for it.
fn failed(root: &Path, rel: &[u8]) -> Listing {
    let mut l = Listing::empty(root.to_path_buf(), RootState::Dir);
    l.blind.push(rel.to_vec());
    l.problems.push(ScanProblem { kind: ProblemKind::Failed, path: join(root, rel), error: None });
    l
}

/// Lists one directory that an earlier scan deferred (`rel` below `root`) on the calling
/// thread, and returns what it holds as a partial listing of the root: the directory's record,
/// its files, its subdirectories as new deferred ones, and any blind spot. A directory that no
/// longer exists gives an empty listing, as Ruby's `require` would find nothing there.
///
/// No loop check is made: a lazy listing only goes as deep as a feature being looked up
/// names, and through a symlink loop `require` opens the same path the listing names (the
/// depth cap still applies).
pub fn list_deferred(root: &Path, rel: &[u8], opts: &ScanOptions) -> Listing {
    let roots = vec![root.to_path_buf()];
    // One `stat` of the root per lazy listing: the device a mount point below it differs from.
    let lazy_root_dev = std::fs::metadata(root).ok().map(|md| md.dev());
    let walk =
        Walk { roots: &roots, opts, dirs_seen: vec![AtomicUsize::new(0)], keep: None, lazy: true, lazy_root_dev };
    let depth = 1 + rel.iter().filter(|&&c| c == b'/').count();
    let job = Job { root: 0, rel: rel.to_vec(), depth, ancestors: Vec::new() };
    let outputs = run_jobs(&walk, vec![job], 1, 1);
    let mut listing = assemble(&roots, opts, outputs).pop().unwrap_or_else(|| failed(root, rel));
    listing.state = RootState::Dir;
    listing
}

fn rescan_whole(old: &Listing, opts: &ScanOptions) -> Listing {
    scan_roots(std::slice::from_ref(&old.root), opts).pop().unwrap_or_else(|| failed(&old.root, b""))
}

/// Lists the directories of `old` that changed (`changed`, relative paths) again and returns
/// the updated listing: files and blind spots directly in a changed directory are replaced,
/// new subdirectories are scanned whole, vanished ones are dropped with everything below
/// them, and every other directory keeps what `old` had (their own stamps vouch for them).
pub fn refresh(old: &Listing, changed: &[Vec<u8>], opts: &ScanOptions) -> Listing {
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
    let keep: HashSet<Vec<u8>> = old.dirs.iter().map(|d| d.rel.clone()).collect();
    let walk = Walk {
        roots,
        opts,
        // The directories kept from `old` count toward the cap, as in a full scan.
        dirs_seen: vec![AtomicUsize::new(old.dirs.len())],
        keep: Some(&keep),
        lazy: false,
        // Jobs relisted lazily (no ancestors) compare their device with the root's record.
        lazy_root_dev: old.dirs.iter().find(|d| d.rel.is_empty()).map(|d| d.stamp.dev),
    };
    let outputs = run_jobs(&walk, jobs, 1, opts.threads);
    if outputs.iter().any(|o| o.rel.is_empty() && matches!(o.state, Some(RootState::Missing | RootState::NotDir))) {
        return rescan_whole(old, opts);
    }
    merge(old, outputs, opts)
}

fn parent(rel: &[u8]) -> &[u8] {
    match rel.iter().rposition(|&c| c == b'/') {
        Some(i) => &rel[..i],
        None => &rel[..0],
    }
}

fn under(rel: &[u8], prefix: &[u8]) -> bool {
    rel == prefix || (rel.len() > prefix.len() && rel.starts_with(prefix) && rel[prefix.len()] == b'/')
}

fn merge(old: &Listing, outputs: Vec<Output>, opts: &ScanOptions) -> Listing {
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
    let dead = |rel: &[u8]| gone.iter().any(|g| under(rel, g));
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
    let mut merged = assemble(std::slice::from_ref(&old.root), opts, outs);
    let fresh = merged.pop().unwrap_or_else(|| Listing::empty(old.root.clone(), old.state));
    listing.files.extend(fresh.files);
    listing.dirs.extend(fresh.dirs);
    listing.blind.extend(fresh.blind);
    listing.deferred.extend(fresh.deferred);
    listing.problems = fresh.problems;
    finish(&mut listing, opts);
    listing
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

/// Runs the jobs (and the jobs they find) to completion on up to `threads` threads, the
/// calling one included. A thread that cannot be started (a process or pids limit) is simply
/// not there: the others, down to the calling thread alone, do the work. A job that panics
/// becomes a blind spot (see [`run_one`]); the queue's count of busy workers is kept right
/// either way, so no worker waits forever.
fn run_jobs(walk: &Walk, initial: Vec<Job>, roots: usize, threads: usize) -> Vec<Output> {
    let threads = threads.max(1).min(roots.max(1) * 64);
    if threads == 1 {
        let mut stack = initial;
        let mut outs = Vec::new();
        while let Some(job) = stack.pop() {
            let (out, more) = run_one(walk, job);
            outs.push(out);
            stack.extend(more);
        }
        return outs;
    }
    let queue = Mutex::new(Queue { jobs: initial, busy: 0 });
    let ready = Condvar::new();
    let worker = || {
        let mut outs = Vec::new();
        loop {
            let job = {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(job) = q.jobs.pop() {
                        q.busy += 1;
                        break Some(job);
                    }
                    if q.busy == 0 {
                        break None;
                    }
                    q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            let Some(job) = job else {
                ready.notify_all();
                return outs;
            };
            let (out, more) = run_one(walk, job);
            outs.push(out);
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            q.busy -= 1;
            let wake = !more.is_empty() || q.busy == 0;
            q.jobs.extend(more);
            drop(q);
            if wake {
                ready.notify_all();
            }
        }
    };
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads - 1);
        for _ in 1..threads {
            match std::thread::Builder::new().spawn_scoped(s, worker) {
                Ok(h) => handles.push(h),
                Err(_) => break,
            }
        }
        let mut outs = worker();
        for h in handles {
            // A worker cannot panic (each job is caught); should one, its outputs are lost and
            // the directories it listed stay unknown to the index only if nothing else names
            // them, so the roots are marked failed below.
            match h.join() {
                Ok(part) => outs.extend(part),
                Err(_) => {
                    for root in 0..roots {
                        outs.push(panicked(walk, root, Vec::new()));
                    }
                }
            }
        }
        outs
    })
}

fn assemble(roots: &[PathBuf], opts: &ScanOptions, outputs: Vec<Output>) -> Vec<Listing> {
    let mut listings: Vec<Listing> = roots.iter().map(|r| Listing::empty(r.clone(), RootState::Missing)).collect();
    for out in outputs {
        let l = &mut listings[out.root];
        if let Some(state) = out.state {
            l.state = state;
        }
        l.dirs.extend(out.dir);
        l.files.extend(out.files);
        l.blind.extend(out.blind);
        l.deferred.extend(out.deferred);
        l.problems.extend(out.problems);
    }
    for l in &mut listings {
        finish(l, opts);
    }
    listings
}

/// Applies the caps and puts the listing in canonical order.
fn finish(l: &mut Listing, opts: &ScanOptions) {
    if l.files.len() > opts.max_files {
        l.files.clear();
        l.blind.push(Vec::new());
        l.problems.push(ScanProblem { kind: ProblemKind::TooLarge, path: l.root.clone(), error: None });
    }
    if l.blind.iter().any(|b| b.is_empty()) {
        l.blind.retain(|b| b.is_empty());
        l.deferred.clear();
    }
    l.normalize();
}
