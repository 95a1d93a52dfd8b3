//! Expanding load-path entries as Ruby 3.1 does: the `realpath` of each entry, or, for an entry
//! that does not exist, its lexical expansion.
//!
//! A load path of a few hundred gem dirs shares most of its prefixes, so [`RealPaths`]
//! resolves a path as `realpath(parent) + "/" + name` with every resolved directory memoized:
//! each distinct directory costs one `lstat`, instead of a `readlink` per component per entry
//! as `realpath(3)` makes. A component that is a symlink is resolved by `realpath(3)` itself.

use rustc_hash::FxHashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Memoized realpaths (valid for the life of the process: loadscan assumes the directories
/// above load-path entries are not re-linked while it runs).
#[derive(Default)]
pub struct RealPaths {
    /// Every path resolved so far, keyed by its bytes (each poll of a changed `$LOAD_PATH` looks
    /// every entry up here; hashing a `Path` would parse its components every time).
    memo: FxHashMap<Vec<u8>, Option<PathBuf>>,
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

impl RealPaths {
    /// The expanded form of an absolute entry: its realpath, or its lexical form when it
    /// cannot be resolved (Ruby then searches that path, where nothing is found).
    pub fn expand(&mut self, abs: &Path) -> PathBuf {
        self.resolve(abs).unwrap_or_else(|| lexical(abs))
    }

    /// The realpath of an absolute path, or `None` when it does not resolve.
    pub fn resolve(&mut self, path: &Path) -> Option<PathBuf> {
        let bytes = path.as_os_str().as_bytes();
        if let Some(hit) = self.memo.get(bytes) {
            return hit.clone();
        }
        let resolved = if !is_plain(bytes) {
            std::fs::canonicalize(path).ok()
        } else if bytes.len() == 1 {
            Some(path.to_path_buf()) // "/"
        } else {
            let cut = bytes.iter().rposition(|&b| b == b'/').unwrap_or(0);
            let parent = Path::new(OsStr::from_bytes(if cut == 0 { b"/" } else { &bytes[..cut] }));
            let name = OsStr::from_bytes(&bytes[cut + 1..]);
            self.resolve(parent).and_then(|real_parent| {
                let candidate = real_parent.join(name);
                match std::fs::symlink_metadata(&candidate) {
                    Ok(md) if md.file_type().is_symlink() => std::fs::canonicalize(&candidate).ok(),
                    Ok(_) => Some(candidate),
                    Err(_) => None,
                }
            })
        };
        self.memo.insert(bytes.to_vec(), resolved.clone());
        resolved
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
    fn lexical_folds_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c//d")), PathBuf::from("/a/c/d"));
        assert_eq!(lexical(Path::new("/..")), PathBuf::from("/"));
    }
}
