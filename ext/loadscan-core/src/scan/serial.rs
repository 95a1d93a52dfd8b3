//! The serial walker: the simplest correct walker, with a `stat` per entry through `std::fs`.
//! Slow on purpose and independent of `readdir.rs`/`step.rs`; every test case checks the fast
//! walker against it (the reference, as walkdir's tests use theirs).

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::listing::{DirRecord, DirStamp, FileEntry, Listing, ProblemKind, RootState, ScanProblem};
use super::options::ScanOptions;
use super::readdir::errno;
use crate::relpath;

/// Scans one root serially with `stat` per entry; what it worked around comes beside.
pub fn scan_serial(root: &Path, opts: &ScanOptions) -> (Listing, Vec<ScanProblem>) {
    let mut listing = Listing::empty(root.to_path_buf(), RootState::Dir);
    let mut problems = Vec::new();
    match std::fs::metadata(root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => listing.state = RootState::Missing,
        Ok(md) if !md.is_dir() => listing.state = RootState::NotDir,
        _ if opts.skips_root(root) => listing.blind.push(Vec::new()),
        _ => {
            let mut dirs = 0;
            visit(root, Vec::new(), 0, &mut Vec::new(), opts, (&mut listing, &mut problems), &mut dirs);
        }
    }
    if listing.files.len() > opts.max_files {
        listing.files.clear();
        listing.blind.push(Vec::new());
    }
    if listing.blind.iter().any(|b| b.is_empty()) {
        listing.blind.retain(|b| b.is_empty());
    }
    listing.normalize();
    (listing, problems)
}

fn visit(
    dir: &Path,
    rel: Vec<u8>,
    depth: usize,
    ancestors: &mut Vec<(u64, u64)>,
    opts: &ScanOptions,
    (out, problems): (&mut Listing, &mut Vec<ScanProblem>),
    dirs: &mut usize,
) {
    *dirs += 1;
    if *dirs > opts.max_dirs {
        out.blind.push(Vec::new());
        return;
    }
    let md = match std::fs::metadata(dir) {
        Ok(md) => md,
        Err(e) => return unreadable(dir, rel, e, (out, problems)),
    };
    let id = (md.dev(), md.ino());
    let asked = rel.is_empty() || ancestors.last().is_some_and(|&(dev, _)| dev != md.dev());
    if asked && super::case::folds_at(dir) {
        problems.push(ScanProblem { kind: ProblemKind::CaseFolding, path: dir.to_path_buf(), error: None });
        out.blind.push(rel);
        return;
    }
    if ancestors.contains(&id) {
        out.blind.push(rel);
        return;
    }
    let entries = match std::fs::read_dir(dir).and_then(|it| it.collect::<io::Result<Vec<_>>>()) {
        Ok(entries) => entries,
        Err(e) => return unreadable(dir, rel, e, (out, problems)),
    };
    out.dirs.push(record(rel.clone(), &md, &entries, opts));
    let subdirs = take_entries(dir, &rel, entries, opts, out);
    if depth >= opts.max_depth {
        out.blind.extend(subdirs.into_iter().map(|(_, r)| r));
        return;
    }
    ancestors.push(id);
    for (path, sub) in subdirs {
        visit(&path, sub, depth + 1, ancestors, opts, (&mut *out, &mut *problems), dirs);
    }
    ancestors.pop();
}

/// The directory `dir` (`rel`) could not be read: a blind spot, recorded unsettled.
fn unreadable(dir: &Path, rel: Vec<u8>, e: io::Error, (out, problems): (&mut Listing, &mut Vec<ScanProblem>)) {
    out.dirs.push(DirRecord::unlisted(rel.clone(), dir));
    out.blind.push(rel);
    problems.push(ScanProblem { kind: ProblemKind::Unreadable, path: dir.to_path_buf(), error: Some(e) });
}

/// The record of a directory (metadata `md`) holding `entries`: its stamp, unsettled by a
/// dangling symlink named like a loadable file or an entry that cannot be asked (the listing
/// can go stale unnoticed), and the digest of its entries, each asked with its own `stat`.
fn record(rel: Vec<u8>, md: &std::fs::Metadata, entries: &[std::fs::DirEntry], opts: &ScanOptions) -> DirRecord {
    let mut stamp = DirStamp::of(md);
    let digest = entries.iter().fold(0u64, |acc, e| {
        let tag: u64 = match std::fs::metadata(e.path()) {
            Ok(md) if md.is_dir() => 1,
            Ok(md) if md.is_file() || md.file_type().is_fifo() || md.file_type().is_char_device() => 2,
            Ok(_) => 3,
            Err(err) if errno::not_found(&err) || errno::is_loop(&err) => 4,
            Err(_) => 5,
        };
        let name = crate::hash::unseeded_hash(e.file_name().as_bytes());
        acc.wrapping_add(name.wrapping_add(tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
    });
    let unsettles = |e: &std::fs::DirEntry| match std::fs::metadata(e.path()) {
        Ok(_) => false,
        Err(err) if errno::not_found(&err) || errno::is_loop(&err) => opts.classify(e.file_name().as_bytes()).is_some(),
        Err(_) => true,
    };
    if entries.iter().any(unsettles) {
        stamp = stamp.unsettled();
    }
    DirRecord { rel, stamp, digest }
}

/// Adds the loadable files and the blind spots among `entries` of `dir` (`rel`) to `out`, and
/// returns its subdirectories to visit (path and rel).
fn take_entries(
    dir: &Path,
    rel: &[u8],
    entries: Vec<std::fs::DirEntry>,
    opts: &ScanOptions,
    out: &mut Listing,
) -> Vec<(PathBuf, Vec<u8>)> {
    let mut subdirs = Vec::new();
    for entry in entries {
        let name = entry.file_name();
        let name = name.as_bytes();
        let path = entry.path();
        let md = match std::fs::metadata(&path) {
            Ok(md) => md,
            Err(e) if errno::not_found(&e) || errno::is_loop(&e) => continue, // dangling / a loop
            Err(_) => {
                out.blind.push(relpath::child(rel, name));
                continue;
            }
        };
        let ft = md.file_type();
        if ft.is_dir() {
            if opts.skips(dir, name) {
                out.blind.push(relpath::child(rel, name));
            } else {
                subdirs.push((path, relpath::child(rel, name)));
            }
        } else if ft.is_file() || ft.is_fifo() || ft.is_char_device() {
            if let Some((kind, stem_len)) = opts.classify(name) {
                out.files.push(FileEntry { stem: relpath::child(rel, &name[..stem_len]), kind });
            }
        }
    }
    subdirs
}
