//! `$LOAD_PATH` expanded as Ruby 3.1, 3.3 and 3.4 expand it (`rb_get_expanded_load_path` in
//! Ruby's load.c): the `realpath` of each entry ([`RealPaths`]), relative ones against the
//! current directory; empty entries skipped; one with a NUL byte or a leading `~` makes the
//! whole load path opaque (Ruby must answer every `require`).
//!
//! While `$LOAD_PATH` is unchanged, Ruby expands again before each search only some entries
//! (its `load_path_check_cache`): objects that are not Strings (`to_path` is asked again), and,
//! when the current directory changed, relative Strings. An absolute String keeps the realpath
//! it had when `$LOAD_PATH` last changed, even if a symlink on its way now points elsewhere
//! (a deploy switching `current`). [`ExpandedLoadPath`] follows that rule exactly, over an
//! [`Entries`] source: the binding's reads the Ruby array, the tests' a `Vec`.

mod entry;
mod realpath;

pub use entry::Entry;

use entry::{current_dir, expand, Expanded, Kind, Slot};
use realpath::RealPaths;
use std::path::PathBuf;

/// The elements of `$LOAD_PATH`, read by [`ExpandedLoadPath::poll`].
pub trait Entries {
    /// What asking an object for its path may fail with (Ruby: what `to_path` raised).
    type Error;
    /// How many elements there are now (asked again before each one: a `to_path` may change
    /// `$LOAD_PATH` itself).
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The element at `i < len()`; an object is asked for its path now.
    fn entry(&mut self, i: usize) -> Result<Entry<'_>, Self::Error>;
    /// Whether the elements are the ones there were at the last [`Entries::remember`].
    fn is_unchanged(&self) -> bool;
    /// Notes the elements as they are now (after every one was expanded).
    fn remember(&mut self);
}

/// Why [`ExpandedLoadPath::poll`] gave no entries.
#[derive(Debug)]
pub enum SyncError<E> {
    /// The load path cannot be mirrored now (an entry with a NUL byte or a leading `~`): Ruby
    /// answers.
    Opaque,
    /// Asking an element for its path failed (Ruby: `to_path` raised, threw or was
    /// interrupted): for the caller to raise once it holds nothing of its own.
    Raised(E),
}

/// Which entries Ruby expands again while `$LOAD_PATH` is unchanged: none; the objects; or,
/// with a relative entry, those and the `~` entries, and the relative ones too when the current
/// directory differs from this one.
#[derive(Clone, PartialEq, Eq)]
enum Recheck {
    Never,
    Objects,
    Cwd(PathBuf),
}

/// `$LOAD_PATH` as last expanded.
pub struct ExpandedLoadPath {
    /// Every element's kind and expansion, by position in `$LOAD_PATH`.
    slots: Vec<Slot>,
    recheck: Recheck,
    /// The expanded entries (Ruby skips empty ones; they are left out here too).
    expanded: Vec<PathBuf>,
    realpaths: RealPaths,
    /// An element cannot be mirrored (see [`SyncError::Opaque`]).
    opaque: bool,
    /// Every element is to be expanded on the next poll, changed or not.
    fresh: bool,
}

impl Default for ExpandedLoadPath {
    fn default() -> Self {
        ExpandedLoadPath {
            slots: Vec::new(),
            recheck: Recheck::Never,
            expanded: Vec::new(),
            realpaths: RealPaths::default(),
            opaque: false,
            fresh: true,
        }
    }
}

impl ExpandedLoadPath {
    /// Whether, as long as the source is unchanged, [`ExpandedLoadPath::poll`] has nothing to do:
    /// the last poll mirrored it and no entry is one Ruby expands again. A few field reads, for
    /// the check before every `require`.
    #[inline]
    pub fn is_mirrored(&self) -> bool {
        !self.opaque && !self.fresh && matches!(self.recheck, Recheck::Never)
    }

    /// Brings the expanded entries up to date with `source`. Returns `Some(entries)` when they
    /// changed, [`SyncError::Opaque`] when the load path cannot be mirrored (an entry Ruby itself
    /// would choke on), and what asking an element failed with as [`SyncError::Raised`]: every
    /// element is then expanded again on the next poll, as Ruby does on its own next search.
    pub fn poll<S: Entries>(&mut self, source: &mut S) -> Result<Option<&[PathBuf]>, SyncError<S::Error>> {
        let changed =
            if !self.fresh && source.is_unchanged() { self.expand_again(source) } else { self.expand_all(source) };
        let changed = changed.map_err(|e| {
            self.fresh = true;
            self.opaque = false;
            SyncError::Raised(e)
        })?;
        if changed {
            self.opaque = self.slots.iter().any(|s| s.expanded == Expanded::Opaque);
        }
        if self.opaque {
            return Err(SyncError::Opaque);
        }
        if !changed {
            return Ok(None);
        }
        let expanded: Vec<PathBuf> = self
            .slots
            .iter()
            .filter_map(|s| match &s.expanded {
                Expanded::Path(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        if expanded == self.expanded {
            return Ok(None);
        }
        self.expanded = expanded;
        Ok(Some(&self.expanded))
    }

    /// The expanded entries as last polled.
    pub fn entries(&self) -> &[PathBuf] {
        &self.expanded
    }

    /// `$LOAD_PATH` changed: every element is expanded, as Ruby's
    /// `rb_construct_expanded_load_path` does (`EXPAND_ALL`). The length is read again before
    /// each element, since a `to_path` may change `$LOAD_PATH` itself.
    fn expand_all<S: Entries>(&mut self, source: &mut S) -> Result<bool, S::Error> {
        // Ruby takes the realpath of every entry again after each change; the memo answers
        // for an entry only while the symlinks it went through still point where they did.
        self.realpaths.revalidate();
        let mut slots = Vec::with_capacity(source.len());
        let mut cwd: Option<PathBuf> = None;
        let mut i = 0;
        while i < source.len() {
            let entry = source.entry(i)?;
            i += 1;
            slots.push(expand(entry, &mut cwd, |abs| self.realpaths.expand(abs)));
        }
        source.remember();
        // An object whose path is relative needs no check of its own: objects are expanded
        // again before every search anyway.
        let relative = slots.iter().any(|s| matches!(s.kind, Kind::Relative | Kind::Home));
        self.recheck = if relative {
            Recheck::Cwd(cwd.unwrap_or_else(current_dir))
        } else if slots.iter().any(|s| s.kind == Kind::Object) {
            Recheck::Objects
        } else {
            Recheck::Never
        };
        self.fresh = false;
        self.slots = slots;
        Ok(true)
    }

    /// `$LOAD_PATH` is unchanged: only the entries Ruby expands again before each search are
    /// (`EXPAND_NON_CACHE`, `EXPAND_HOME`, `EXPAND_RELATIVE`), each with a fresh `realpath`
    /// as Ruby's (no memo). Returns whether any expansion changed.
    fn expand_again<S: Entries>(&mut self, source: &mut S) -> Result<bool, S::Error> {
        let relative_too = match &self.recheck {
            Recheck::Never => return Ok(false),
            Recheck::Objects => false,
            Recheck::Cwd(was) => {
                let now = current_dir();
                let moved = &now != was;
                self.recheck = Recheck::Cwd(now);
                moved
            }
        };
        let mut cwd: Option<PathBuf> = None;
        let mut changed = false;
        for i in 0..self.slots.len() {
            let again = match self.slots[i].kind {
                Kind::Absolute => false,
                Kind::Relative => relative_too,
                Kind::Home | Kind::Object => true,
            };
            if !again || i >= source.len() {
                continue;
            }
            let slot = expand(source.entry(i)?, &mut cwd, RealPaths::expand_uncached);
            if slot != self.slots[i] {
                self.slots[i] = slot;
                changed = true;
            }
        }
        if !source.is_unchanged() {
            // A `to_path` changed `$LOAD_PATH`: all of it is expanded on the next poll.
            self.fresh = true;
        }
        Ok(changed)
    }
}
