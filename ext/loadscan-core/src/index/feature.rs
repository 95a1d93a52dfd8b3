//! How `require` reads a feature name: which extensions it will try, and the canonical
//! relative path it will open (`Kernel#require` expands `a//b`, `a/./b`, `a/../a/b` textually
//! against each load-path entry before opening).

use std::borrow::Cow;

/// Which files a feature name can match, following `load.c`'s `search_required`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// No known extension: `.rb` in any entry, then the native extension in any entry.
    /// (`foo.txt` and `foo.bundle` on Linux are bare: Ruby tries `foo.txt.rb`, `foo.txt.so`.)
    Bare,
    /// `foo.rb`: only a Ruby file.
    Rb,
    /// `foo.so`, `foo.o` or `foo.<DLEXT>`: the native extension; when no entry has it, Ruby
    /// searches the name as a bare feature ([`Query::fallback`]).
    Ext,
}

impl Want {
    /// Whether Ruby's table of extensions it provides without a file (`linked_in`) may hold
    /// this spelling: when its search finds nothing, `load.c` looks the feature up there (`foo.so`
    /// for a bare `foo`, the name as written otherwise), except for a `.rb` spelling.
    pub fn may_be_linked_in(self) -> bool {
        self != Want::Rb
    }
}

/// A feature parsed for lookup: the canonical stem (relative path without extension).
#[derive(Debug, PartialEq, Eq)]
pub struct Query<'a> {
    /// Canonical relative path without the extension (`a//b/../c.rb` gives `a/c`); borrowed
    /// from the feature when it is canonical already (almost always).
    pub stem: Cow<'a, [u8]>,
    /// Which extensions apply.
    pub want: Want,
}

impl<'a> Query<'a> {
    /// Parses a feature as `require` would see it. `None` for what the index never answers:
    /// absolute paths, `~`, `./` and `../` (resolved against the cwd or home, not the load
    /// path), NUL bytes (Ruby raises), and `..` climbing above the entry.
    pub fn parse(feature: &'a [u8], dlext: &[u8]) -> Option<Query<'a>> {
        match feature {
            [] | [b'/', ..] | [b'~', ..] | [b'.', b'/', ..] | [b'.', b'.', b'/', ..] => return None,
            _ if feature.contains(&0) => return None,
            _ => {}
        }
        let (base, want) = match feature.iter().rposition(|&c| c == b'.') {
            Some(dot) if !feature[dot..].contains(&b'/') => {
                let ext = &feature[dot + 1..];
                if ext == b"rb" {
                    (&feature[..dot], Want::Rb)
                } else if ext == b"so" || ext == b"o" || ext == dlext {
                    (&feature[..dot], Want::Ext)
                } else {
                    (feature, Want::Bare)
                }
            }
            _ => (feature, Want::Bare),
        };
        Some(Query { stem: canonical(base)?, want })
    }

    /// The search Ruby falls through to when no entry has the native extension that `feature`
    /// (this query's name) asks for: `search_required` then looks for `foo.so` as a bare
    /// feature, `foo.so.rb` in any entry, then `foo.so.so`. (`foo.rb` has no such second
    /// search: a miss is a miss.) `None` for the other queries.
    pub fn fallback(&self, feature: &'a [u8]) -> Option<Query<'a>> {
        match self.want {
            Want::Ext => Some(Query { stem: canonical(feature)?, want: Want::Bare }),
            Want::Bare | Want::Rb => None,
        }
    }
}

/// Canonical form of `base`, given that an extension will be appended to its last component:
/// every component but the last is folded (`""` and `.` dropped, `..` pops); the last one is
/// kept as is (`foo/` + `.rb` names a file called `.rb`).
fn canonical(base: &[u8]) -> Option<Cow<'_, [u8]>> {
    let (dirs, last) = match base.iter().rposition(|&c| c == b'/') {
        Some(i) => (&base[..i], &base[i + 1..]),
        None => return Some(Cow::Borrowed(base)),
    };
    if !dirs.is_empty() && dirs.split(|&c| c == b'/').all(|p| !matches!(p, b"" | b"." | b"..")) {
        return Some(Cow::Borrowed(base));
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in dirs.split(|&c| c == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    let mut stem = Vec::with_capacity(base.len());
    for p in parts {
        stem.extend_from_slice(p);
        stem.push(b'/');
    }
    stem.extend_from_slice(last);
    Some(Cow::Owned(stem))
}

/// The directory prefixes of `stem` a lookup depends on, as lengths: the root itself (`0`),
/// then every prefix ending before a `/`.
pub(super) fn prefix_lens(stem: &[u8]) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0).chain(stem.iter().enumerate().filter(|(_, &c)| c == b'/').map(|(i, _)| i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(f: &str) -> Option<(String, Want)> {
        Query::parse(f.as_bytes(), b"so").map(|q| (String::from_utf8(q.stem.into_owned()).unwrap(), q.want))
    }

    #[test]
    fn extensions_follow_search_required() {
        assert_eq!(q("foo"), Some(("foo".into(), Want::Bare)));
        assert_eq!(q("foo.rb"), Some(("foo".into(), Want::Rb)));
        assert_eq!(q("foo.so"), Some(("foo".into(), Want::Ext)));
        assert_eq!(q("foo.o"), Some(("foo".into(), Want::Ext)));
        assert_eq!(q("foo.bundle"), Some(("foo.bundle".into(), Want::Bare)));
        assert_eq!(q("foo.txt"), Some(("foo.txt".into(), Want::Bare)));
        assert_eq!(q("a.d/foo"), Some(("a.d/foo".into(), Want::Bare)));
    }

    #[test]
    fn a_missing_native_extension_falls_back_to_a_bare_search() {
        let fallback = |f: &'static str| {
            let q = Query::parse(f.as_bytes(), b"so").unwrap();
            q.fallback(f.as_bytes()).map(|b| (String::from_utf8(b.stem.into_owned()).unwrap(), b.want))
        };
        assert_eq!(fallback("foo.so"), Some(("foo.so".into(), Want::Bare)));
        assert_eq!(fallback("a//b/bar.o"), Some(("a/b/bar.o".into(), Want::Bare)));
        assert_eq!(fallback("foo.rb"), None);
        assert_eq!(fallback("foo"), None);
        assert_eq!(fallback("foo.txt"), None);
    }

    #[test]
    fn non_canonical_spellings_fold_textually() {
        assert_eq!(q("a//b"), Some(("a/b".into(), Want::Bare)));
        assert_eq!(q("a/./b.rb"), Some(("a/b".into(), Want::Rb)));
        assert_eq!(q("a/../a/b"), Some(("a/b".into(), Want::Bare)));
        assert_eq!(q("foo/"), Some(("foo/".into(), Want::Bare)));
        assert_eq!(q("a/../../b"), None);
    }

    #[test]
    fn paths_outside_the_load_path_are_not_answered() {
        for f in ["/abs", "./x", "../x", "~/x", "~x", "", "a\0b"] {
            assert_eq!(q(f), None, "{f:?}");
        }
        assert_eq!(q(".x"), Some((".x".into(), Want::Bare)));
    }
}
