//! Expanding load-path entries as Ruby 3.1 does: the `realpath` of each entry, or, for an entry
//! that does not exist, its lexical expansion.
//!
//! A load path of a few hundred gem dirs shares most of its prefixes, so [`RealPaths`]
//! resolves a path as `realpath(parent) + "/" + name` with every resolved directory memoized:
//! each distinct directory costs one `lstat`, instead of a `readlink` per component per entry
//! as `realpath(3)` makes. A component that is a symlink is resolved by `realpath(3)` itself.

use rustc_hash::FxHashMap;
use std::path::{Component, Path, PathBuf};

/// Memoized realpaths (valid for the life of the process: loadscan assumes the directories
/// above load-path entries are not re-linked while it runs).
#[derive(Default)]
pub struct RealPaths {
    /// Every path resolved so far (each poll of a changed `$LOAD_PATH` looks every entry up here,
    /// so the hash is the fast one).
    memo: FxHashMap<PathBuf, Option<PathBuf>>,
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

impl RealPaths {
    /// The expanded form of an absolute entry: its realpath, or its lexical form when it
    /// cannot be resolved (Ruby then searches that path, where nothing is found).
    pub fn expand(&mut self, abs: &Path) -> PathBuf {
        self.resolve(abs).unwrap_or_else(|| lexical(abs))
    }

    /// The realpath of an absolute path, or `None` when it does not resolve.
    pub fn resolve(&mut self, path: &Path) -> Option<PathBuf> {
        if let Some(hit) = self.memo.get(path) {
            return hit.clone();
        }
        let simple = path.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        let resolved = match (path.parent(), path.file_name()) {
            _ if !simple => std::fs::canonicalize(path).ok(),
            (None, _) => Some(path.to_path_buf()), // "/"
            (Some(parent), Some(name)) => self.resolve(parent).and_then(|real_parent| {
                let candidate = real_parent.join(name);
                match std::fs::symlink_metadata(&candidate) {
                    Ok(md) if md.file_type().is_symlink() => std::fs::canonicalize(&candidate).ok(),
                    Ok(_) => Some(candidate),
                    Err(_) => None,
                }
            }),
            (Some(_), None) => std::fs::canonicalize(path).ok(),
        };
        self.memo.insert(path.to_path_buf(), resolved.clone());
        resolved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_folds_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c//d")), PathBuf::from("/a/c/d"));
        assert_eq!(lexical(Path::new("/..")), PathBuf::from("/"));
    }
}
