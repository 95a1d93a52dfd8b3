//! Paths as bytes, the shape listings keep them in: a *rel* is relative to a root,
//! `/`-separated, without a leading or trailing slash, and `""` is the root itself (a
//! [`crate::DirRecord`]'s `rel`, a [`crate::FileEntry`]'s `stem`); roots are canonical
//! absolute paths.

/// A path's bytes.
pub(crate) fn bytes(p: &std::path::Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

/// The path of these bytes.
pub(crate) fn path_of_bytes(p: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(p))
}

/// The rel of `name` in the directory `rel`.
pub(crate) fn child(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        v.extend_from_slice(rel);
        v.push(b'/');
    }
    v.extend_from_slice(name);
    v
}

/// The rel of the directory holding `rel` (`""` for a name directly in the root).
pub(crate) fn parent(rel: &[u8]) -> &[u8] {
    match rel.iter().rposition(|&c| c == b'/') {
        Some(i) => &rel[..i],
        None => &rel[..0],
    }
}

/// Whether `path` is `dir` or lies below it, compared as whole components; both rels, or both
/// canonical absolute paths (as realpaths are: `Path::starts_with` would parse every component
/// of both on each call). `""` holds only itself among rels, `/` every absolute path.
pub(crate) fn is_under(path: &[u8], dir: &[u8]) -> bool {
    let dir = match dir {
        [rest @ .., b'/'] if !rest.is_empty() => rest,
        d => d,
    };
    path.starts_with(dir) && (path.len() == dir.len() || dir.ends_with(b"/") || path[dir.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_joined_with_one_slash() {
        assert_eq!(child(b"", b"a.rb"), b"a.rb");
        assert_eq!(child(b"a", b"b"), b"a/b");
        assert_eq!(child(b"a/b", b"c"), b"a/b/c");
    }

    #[test]
    fn the_parent_of_a_top_name_is_the_root() {
        assert_eq!(parent(b"a/b/c"), b"a/b");
        assert_eq!(parent(b"a"), b"");
        assert_eq!(parent(b""), b"");
        assert_eq!(parent(child(b"x/y", b"z").as_slice()), b"x/y");
    }

    #[test]
    fn is_under_compares_whole_components() {
        for (path, dir) in [("/a/b", "/a"), ("/a", "/a"), ("/a/b", "/a/"), ("/a", "/"), ("/", "/"), ("/a/b/c", "/a/b")]
        {
            assert!(is_under(path.as_bytes(), dir.as_bytes()), "{path} under {dir}");
        }
        for (path, dir) in [("/ab", "/a"), ("/a", "/a/b"), ("/b", "/a"), ("/a.rb", "/a")] {
            assert!(!is_under(path.as_bytes(), dir.as_bytes()), "{path} not under {dir}");
        }
    }

    #[test]
    fn is_under_takes_rels_too() {
        for (path, dir) in [("a/b", "a"), ("a", "a"), ("a/b/c", "a/b"), ("", "")] {
            assert!(is_under(path.as_bytes(), dir.as_bytes()), "{path} under {dir}");
        }
        // The root's rel is a prefix of every rel, but holds only itself.
        for (path, dir) in [("ab", "a"), ("a", "a/b"), ("a", ""), ("b/a", "a")] {
            assert!(!is_under(path.as_bytes(), dir.as_bytes()), "{path} not under {dir}");
        }
    }
}
