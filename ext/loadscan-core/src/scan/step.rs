//! One step of a walk (`walk.rs`): what a walk is ([`Walk`], in one of three [`Mode`]s), one
//! directory to list ([`Job`]), and listing it ([`Walk::run`]) into an [`Output`] and the
//! subdirectories to list next.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::case::Ask;
use super::listing::{DirRecord, FileEntry, ProblemKind, RootState, ScanProblem};
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

pub(super) fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

/// What a walk is for.
pub(super) enum Mode<'a> {
    /// Scanning roots whole ([`super::scan_roots`]).
    Scan,
    /// Listing one deferred directory ([`super::list_deferred`]): if it is gone, it is simply empty now.
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

/// What listing one directory gave.
pub(super) struct Output {
    pub(super) root: usize,
    pub(super) rel: Vec<u8>,
    /// Every subdirectory found (descended into or kept from an earlier listing); filled only
    /// for a refresh, the one reader.
    pub(super) children: Vec<Vec<u8>>,
    /// A refreshed directory that no longer exists (its parent's relisting drops it).
    pub(super) gone: bool,
    pub(super) dir: Option<DirRecord>,
    pub(super) files: Vec<FileEntry>,
    pub(super) blind: Vec<Vec<u8>>,
    pub(super) deferred: Vec<Vec<u8>>,
    pub(super) problems: Vec<ScanProblem>,
    pub(super) state: Option<RootState>,
}

impl Output {
    /// Nothing found yet at `rel` of root number `root`.
    pub(super) fn new(root: usize, rel: Vec<u8>) -> Output {
        Output {
            root,
            rel,
            children: Vec::new(),
            gone: false,
            dir: None,
            files: Vec::new(),
            blind: Vec::new(),
            deferred: Vec::new(),
            problems: Vec::new(),
            state: None,
        }
    }
}

/// What a directory's entries gave besides the files, blind spots and problems they add to
/// the [`Output`].
#[derive(Default)]
struct Entries {
    /// The directory's digest (see [`DirRecord::digest`]).
    digest: u64,
    /// An entry may become loadable without this directory changing (see `DirStamp`).
    unsettled: bool,
    /// Its subdirectories, not ignored.
    subdirs: Vec<Vec<u8>>,
}

fn problem(kind: ProblemKind, path: PathBuf, error: Option<io::Error>) -> ScanProblem {
    ScanProblem { kind, path, error }
}

impl Walk<'_> {
    /// Lists one directory; returns its output and the subdirectories to list next.
    pub(super) fn run(&self, job: Job) -> (Output, Vec<Job>) {
        let path = join(&self.roots[job.root], &job.rel);
        let mut out = Output::new(job.root, job.rel.clone());
        if self.not_listed(&job, &mut out) {
            return (out, Vec::new());
        }
        if let Some(hook) = &self.opts.before_list.0 {
            hook(&path);
        }
        let mut entries = Entries::default();
        let listed = match list(&path, self.ask(&job), |name, found| {
            self.entry(&job.rel, &path, name, found, &mut entries, &mut out)
        }) {
            Ok(listed) => listed,
            Err(e) => {
                self.unlistable(&job, path, e, &mut out);
                return (out, Vec::new());
            }
        };
        if job.rel.is_empty() {
            out.state = Some(RootState::Dir);
        }
        let stamp = if entries.unsettled { listed.stamp.unsettled() } else { listed.stamp };
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
        out.dir = Some(DirRecord { rel: job.rel.clone(), stamp, digest: entries.digest });
        let jobs = self.next_jobs(&job, path, id, entries.subdirs, &mut out);
        (out, jobs)
    }

    /// Whether the directory is left unlisted on purpose: over the root's cap on directories,
    /// or an ignored root (a blind spot either way).
    fn not_listed(&self, job: &Job, out: &mut Output) -> bool {
        let root = &self.roots[job.root];
        if self.dirs_seen[job.root].fetch_add(1, Ordering::Relaxed) >= self.opts.max_dirs {
            out.blind.push(Vec::new());
            out.problems.push(problem(ProblemKind::TooLarge, root.clone(), None));
            return true;
        }
        if job.rel.is_empty() && self.opts.skips_root(root) {
            out.state = Some(RootState::Dir);
            out.blind.push(Vec::new());
            return true;
        }
        false
    }

    /// Whether to ask the directory if its names fold case. A root is asked; below it, only a
    /// mount point (another device than the parent's, or for a lazily listed directory, than
    /// the root's).
    fn ask(&self, job: &Job) -> Ask {
        match job.ancestors.last() {
            _ if job.rel.is_empty() => Ask::Always,
            Some(&(dev, _)) => Ask::IfOffDevice(dev),
            None => match self.mode {
                Mode::Scan => Ask::Always,
                Mode::Deferred { root_dev } | Mode::Refresh { root_dev, .. } => {
                    root_dev.map_or(Ask::Always, Ask::IfOffDevice)
                }
            },
        }
    }

    /// Takes in one entry `name` of the directory `rel` (at `path`).
    fn entry(&self, rel: &[u8], path: &Path, name: &[u8], found: Entry, entries: &mut Entries, out: &mut Output) {
        entries.digest = entries.digest.wrapping_add(entry_digest(name, &found));
        match found {
            Entry::Dir => {
                if self.opts.skips(path, name) {
                    out.blind.push(relpath::child(rel, name));
                } else {
                    entries.subdirs.push(relpath::child(rel, name));
                }
            }
            Entry::File => {
                if let Some((kind, stem_len)) = self.opts.classify(name) {
                    out.files.push(FileEntry { stem: relpath::child(rel, &name[..stem_len]), kind });
                }
            }
            Entry::Ignore => {}
            Entry::Dangling(e) => {
                // Named like a loadable file: its target may appear. (Any other name matters
                // only as a directory, which `Index::confirm_missing` sees appear.)
                entries.unsettled |= self.opts.classify(name).is_some();
                out.problems.push(problem(ProblemKind::Dangling, path.join(OsStr::from_bytes(name)), Some(e)));
            }
            Entry::Unknown(e) => {
                entries.unsettled = true;
                out.blind.push(relpath::child(rel, name));
                out.problems.push(problem(ProblemKind::Unreadable, path.join(OsStr::from_bytes(name)), Some(e)));
            }
        }
    }

    /// The directory could not be listed (`e`): a root that is missing or not a directory, a
    /// directory gone since a refresh or lazy listing was planned, or else a blind spot.
    fn unlistable(&self, job: &Job, path: PathBuf, e: io::Error, out: &mut Output) {
        let top = job.rel.is_empty();
        let (absent, not_dir) = (errno::not_found(&e), errno::not_dir(&e));
        match () {
            _ if absent && top => out.state = Some(RootState::Missing),
            _ if not_dir && top => out.state = Some(RootState::NotDir),
            _ if (absent || not_dir) && !matches!(self.mode, Mode::Scan) => out.gone = true,
            _ => {
                // Whatever was gathered before the error is kept (it exists); the rest of the
                // directory is unknown.
                let kind = if absent || not_dir { ProblemKind::Vanished } else { ProblemKind::Unreadable };
                out.blind.push(job.rel.clone());
                out.dir = Some(DirRecord::unlisted(job.rel.clone(), &path));
                out.problems.push(problem(kind, path, Some(e)));
                if top {
                    out.state = Some(RootState::Dir);
                }
            }
        }
    }

    /// The subdirectories of a listed directory (identity `id`) to list next; those past the
    /// depth cap are blind spots, those past the eager depth deferred.
    fn next_jobs(
        &self,
        job: &Job,
        path: PathBuf,
        id: (u64, u64),
        mut subdirs: Vec<Vec<u8>>,
        out: &mut Output,
    ) -> Vec<Job> {
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
        jobs
    }
}
