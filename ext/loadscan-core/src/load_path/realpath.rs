//! Expanding an absolute load-path entry as Ruby 3.1, 3.3 and 3.4 do: its `realpath`, or, for
//! an entry that does not exist, its lexical expansion.
//!
//! A load path of a few hundred gem dirs shares most of its prefixes, so [`RealPaths`]
//! resolves a path as `realpath(parent) + "/" + name` with every resolved directory memoized:
//! each distinct directory costs one `lstat`, instead of a `readlink` per component per entry
//! as `realpath(3)` makes. A component that is a symlink is followed through its target, and
//! the link is remembered with where it pointed.
//!
//! Ruby takes the realpath of every entry again after each change of `$LOAD_PATH`; a deploy
//! that switches `current -> releases/A` to `releases/B` mid-process then sends `current/lib`
//! to B. [`RealPaths::revalidate`] (one `readlink` per symlink the memo went through) drops
//! the memo when any of them points elsewhere now. What it cannot see is a plain directory
//! on the way being replaced by a symlink (README, Limits).

use rustc_hash::FxHashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed deeper than this are left to `realpath(3)` (which reports `ELOOP`).
const MAX_LINKS: usize = 40;

/// Memoized realpaths, valid while the symlinks they went through are unchanged.
#[derive(Default)]
pub struct RealPaths {
    /// Every path resolved so far, keyed by its bytes (each poll of a changed `$LOAD_PATH` looks
    /// every entry up here; hashing a `Path` would parse its components every time). Paths
    /// that do not resolve are not kept: Ruby asks again, and they may appear.
    memo: FxHashMap<Vec<u8>, PathBuf>,
    /// Every symlink an answer in `memo` went through (or that a path not memoized went
    /// through), and its target then: each link once, so [`RealPaths::revalidate`] costs one
    /// `readlink` per distinct symlink however often entries are expanded.
    links: FxHashMap<PathBuf, PathBuf>,
}

/// `path` with `.`, `..` and repeated separators folded textually (what Ruby's
/// `File.expand_path` does to a path that cannot be resolved).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Whether an absolute path is already in the form `realpath` returns when nothing in it is a
/// link: no empty, `.` or `..` component and no trailing separator.
fn is_plain(path: &[u8]) -> bool {
    path.first() == Some(&b'/')
        && (path.len() == 1 || path[1..].split(|&b| b == b'/').all(|c| !c.is_empty() && c != b"." && c != b".."))
}

/// Where a symlink in the real directory `real_parent` leads: its target, absolute or joined to
/// that directory. Leading `.` and `..` components of a relative target are folded here (the
/// directory holds no symlink, so `..` is its parent), so that a `../shared` link resolves
/// through the memo; a `..` further in is left for `realpath(3)` (`next` is then not plain).
fn follow(real_parent: &Path, target: &Path) -> PathBuf {
    let mut out = real_parent.to_path_buf();
    let mut rest = target.components().peekable();
    while let Some(c) = rest.peek() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            _ => break,
        }
        rest.next();
    }
    out.extend(rest); // a `RootDir` (absolute target) replaces `out`
    out
}

impl RealPaths {
    /// The expanded form of an absolute entry: its realpath, or its lexical form when it
    /// cannot be resolved (Ruby then searches that path, where nothing is found).
    pub fn expand(&mut self, abs: &Path) -> PathBuf {
        self.resolve(abs).unwrap_or_else(|| lexical(abs))
    }

    /// [`RealPaths::expand`] without the memo: `realpath(3)` asked now, as Ruby does for the
    /// entries it expands before every search.
    pub fn expand_uncached(abs: &Path) -> PathBuf {
        std::fs::canonicalize(abs).unwrap_or_else(|_| lexical(abs))
    }

    /// Drops every memoized answer if a symlink any of them went through points elsewhere now
    /// (or is gone): one `readlink` per symlink seen. Call it whenever the load path changed.
    pub fn revalidate(&mut self) {
        let moved = self.links.iter().any(|(link, target)| std::fs::read_link(link).ok().as_ref() != Some(target));
        if moved {
            self.memo.clear();
            self.links.clear();
        }
    }

    /// The realpath of an absolute path, or `None` when it does not resolve.
    pub fn resolve(&mut self, path: &Path) -> Option<PathBuf> {
        self.resolve_at(path, 0).0
    }

    /// `resolve`, `depth` symlinks deep; the flag says whether the answer may be memoized (every
    /// symlink on the way is recorded in `links`).
    fn resolve_at(&mut self, path: &Path, depth: usize) -> (Option<PathBuf>, bool) {
        let bytes = path.as_os_str().as_bytes();
        if let Some(hit) = self.memo.get(bytes) {
            return (Some(hit.clone()), true);
        }
        let (resolved, memo) = if !is_plain(bytes) || depth > MAX_LINKS {
            (std::fs::canonicalize(path).ok(), false)
        } else if bytes.len() == 1 {
            (Some(path.to_path_buf()), true) // "/"
        } else {
            let cut = bytes.iter().rposition(|&b| b == b'/').unwrap_or(0);
            let parent = Path::new(OsStr::from_bytes(if cut == 0 { b"/" } else { &bytes[..cut] }));
            let name = OsStr::from_bytes(&bytes[cut + 1..]);
            match self.resolve_at(parent, depth) {
                (None, _) => (None, false),
                (Some(real_parent), parent_memo) => {
                    let candidate = real_parent.join(name);
                    match std::fs::symlink_metadata(&candidate) {
                        Ok(md) if md.file_type().is_symlink() => match std::fs::read_link(&candidate) {
                            Ok(target) => {
                                let next = follow(&real_parent, &target);
                                self.links.insert(candidate.clone(), target);
                                if is_plain(next.as_os_str().as_bytes()) {
                                    let (r, m) = self.resolve_at(&next, depth + 1);
                                    (r, m && parent_memo)
                                } else {
                                    (std::fs::canonicalize(&candidate).ok(), false)
                                }
                            }
                            Err(_) => (None, false),
                        },
                        Ok(_) => (Some(candidate), parent_memo),
                        Err(_) => (None, false),
                    }
                }
            }
        };
        if let (Some(r), true) = (&resolved, memo) {
            self.memo.insert(bytes.to_vec(), r.clone());
        }
        (resolved, memo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_are_told_apart() {
        for p in ["/", "/a", "/a/b.c", "/a/..b/.c"] {
            assert!(is_plain(p.as_bytes()), "{p}");
        }
        for p in ["", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/.."] {
            assert!(!is_plain(p.as_bytes()), "{p}");
        }
    }

    #[test]
    fn switched_symlink_is_followed_after_revalidate() {
        let dir = std::env::temp_dir().join(format!("loadscan-realpath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for r in ["releases/A/lib", "releases/B/lib"] {
            std::fs::create_dir_all(dir.join(r)).unwrap();
        }
        let dir = std::fs::canonicalize(&dir).unwrap();
        std::os::unix::fs::symlink("releases/A", dir.join("current")).unwrap();
        let mut paths = RealPaths::default();
        let entry = dir.join("current/lib");
        assert_eq!(paths.expand(&entry), dir.join("releases/A/lib"));
        std::os::unix::fs::symlink("releases/B", dir.join("next")).unwrap();
        std::fs::rename(dir.join("next"), dir.join("current")).unwrap();
        assert_eq!(paths.expand(&entry), dir.join("releases/A/lib"), "memoized until revalidated");
        paths.revalidate();
        assert_eq!(paths.expand(&entry), dir.join("releases/B/lib"));
        // A path that did not resolve is asked again (it may have appeared).
        assert_eq!(paths.expand(&dir.join("current/new")), dir.join("current/new"));
        std::fs::create_dir(dir.join("releases/B/new")).unwrap();
        assert_eq!(paths.expand(&dir.join("current/new")), dir.join("releases/B/new"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn relative_links_are_memoized_and_recorded_once() {
        let dir = std::env::temp_dir().join(format!("loadscan-realpath-rel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("shared/lib")).unwrap();
        std::fs::create_dir_all(dir.join("app")).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        std::os::unix::fs::symlink("../shared", dir.join("app/vendor")).unwrap();
        std::os::unix::fs::symlink("./../shared/../shared/lib", dir.join("app/odd")).unwrap();
        let mut paths = RealPaths::default();
        for _ in 0..100 {
            assert_eq!(paths.expand(&dir.join("app/vendor/lib")), dir.join("shared/lib"));
            assert_eq!(paths.expand(&dir.join("app/odd")), dir.join("shared/lib"));
            paths.revalidate();
        }
        assert_eq!(paths.links.len(), 2, "each link recorded once");
        assert!(paths.memo.contains_key(dir.join("app/vendor/lib").as_os_str().as_bytes()), "`../` target memoized");
        assert_eq!(follow(Path::new("/a/b"), Path::new("../../c/./d")), PathBuf::from("/c/d"));
        assert_eq!(follow(Path::new("/a/b"), Path::new("/x/../y")), PathBuf::from("/x/../y"));
        assert_eq!(follow(Path::new("/a"), Path::new("c/../d")), PathBuf::from("/a/c/../d"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn memoized_realpath_agrees_with_realpath_3() {
        let dir = std::env::temp_dir().join(format!("loadscan-realpath-3-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["real/a/b", "real/c", "other/x"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let dir = std::fs::canonicalize(&dir).unwrap();
        let other = dir.join("other");
        let links = [("real/la", Path::new("a")), ("real/a/up", Path::new("../..")), ("abs", &other)];
        let loops = [("loop1", Path::new("loop2")), ("loop2", Path::new("loop1")), ("dangling", Path::new("nowhere"))];
        for (link, target) in links.iter().chain(&loops) {
            std::os::unix::fs::symlink(target, dir.join(link)).unwrap();
        }
        let mut memo = RealPaths::default();
        let cases = [
            "real/a/b",
            "real/la/b",
            "real/a/up/real/c",
            "abs/x",
            "abs",
            "loop1",
            "dangling",
            "nope/x",
            "real/./a/../c",
            "real//a",
            "real/la/../c",
            "real/a/",
            "real/la/",
        ];
        for _ in 0..2 {
            for c in cases {
                let p = dir.join(c);
                assert_eq!(memo.resolve(&p), std::fs::canonicalize(&p).ok(), "{c}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lexical_folds_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c//d")), PathBuf::from("/a/c/d"));
        assert_eq!(lexical(Path::new("/..")), PathBuf::from("/"));
    }
}
