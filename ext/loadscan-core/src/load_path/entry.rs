//! One element of `$LOAD_PATH`: what kind of entry it is for Ruby's re-expansion rule, and
//! what it expands to.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One element of `$LOAD_PATH`, as an [`Entries`](super::Entries) source reads it.
#[derive(Clone, Copy, Debug)]
pub enum Entry<'a> {
    /// A String: its bytes.
    String(&'a [u8]),
    /// Any other object: the bytes of the path its `to_path` gave now.
    Object(&'a [u8]),
}

/// What kind of entry an element is, for Ruby's re-expansion rule.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An absolute String: expanded again only when `$LOAD_PATH` changes.
    Absolute,
    /// A relative String: expanded again when the current directory changed too.
    Relative,
    /// A String starting with `~`: expanded again before every search.
    Home,
    /// Not a String: `to_path` is asked again before every search.
    Object,
}

/// An entry as expanded.
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Expanded {
    /// Empty: Ruby's search skips it.
    Skip,
    Path(PathBuf),
    /// A NUL byte (Ruby decides what to make of it) or a leading `~` (Ruby expands it against
    /// the home dir without `realpath`): the load path cannot be mirrored, Ruby must answer.
    Opaque,
}

/// An element's kind and expansion.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Slot {
    pub(super) kind: Kind,
    pub(super) expanded: Expanded,
}

/// Expands `entry` with `realpath` (relative ones against the current directory, read once per
/// pass into `cwd`).
pub(super) fn expand(entry: Entry<'_>, cwd: &mut Option<PathBuf>, mut realpath: impl FnMut(&Path) -> PathBuf) -> Slot {
    let (bytes, kind) = match entry {
        Entry::Object(bytes) => (bytes, Kind::Object),
        Entry::String(bytes) => match bytes.first() {
            Some(b'/') => (bytes, Kind::Absolute),
            Some(b'~') => (bytes, Kind::Home),
            _ => (bytes, Kind::Relative),
        },
    };
    let expanded = match bytes.first() {
        _ if bytes.contains(&0) => Expanded::Opaque,
        None => Expanded::Skip,
        Some(b'~') => Expanded::Opaque,
        Some(b'/') => Expanded::Path(realpath(Path::new(OsStr::from_bytes(bytes)))),
        Some(_) => {
            let cwd = cwd.get_or_insert_with(current_dir);
            Expanded::Path(realpath(&cwd.join(OsStr::from_bytes(bytes))))
        }
    };
    Slot { kind, expanded }
}

pub(super) fn current_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_default()
}
