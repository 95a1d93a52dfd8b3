//! Following `$LOAD_PATH`: notices every change before the next lookup and expands entries the
//! way Ruby 3.1 and 3.3 do (`realpath` of each entry, relative ones against the current directory).
//!
//! Change detection copies Ruby's own trick for its expanded-load-path cache: a hidden snapshot
//! array shares `$LOAD_PATH`'s buffer, and any mutation (`push`, `insert`, `[]=`, `replace`,
//! `shift`…) un-shares it, so an unchanged load path costs one pointer comparison. When they do
//! not share (small arrays are embedded), the elements are compared by identity.
//!
//! While `$LOAD_PATH` is unchanged, Ruby re-expands only some entries before each search
//! (`rb_get_expanded_load_path`): objects that are not Strings (`to_path` is asked again), and,
//! when the current directory changed, relative Strings. An absolute String keeps the realpath
//! it had when `$LOAD_PATH` last changed, even if a symlink on its way now points elsewhere
//! (a deploy switching `current`): [`Recheck`] follows that rule exactly.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use loadscan_core::RealPaths;

use magnus::Error;
use rb_sys::{ruby_value_type, VALUE};

/// Why [`LoadPath::poll`] gave no entries.
pub enum Polled {
    /// The load path cannot be mirrored now (see [`LoadPath::opaque`]): Ruby answers.
    Opaque,
    /// An entry's `to_path` raised (or threw): to be raised once nothing of loadscan's is held.
    Raised(Error),
}

/// What kind of entry an element of `$LOAD_PATH` is, for Ruby's re-expansion rule.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
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
enum Expanded {
    /// Empty: Ruby's search skips it.
    Skip,
    Path(PathBuf),
    /// A NUL byte or a leading `~`: see [`LoadPath::opaque`].
    Opaque,
}

/// Which entries Ruby expands again while `$LOAD_PATH` is unchanged (its
/// `load_path_check_cache`): none; the objects; or, with a relative entry, those and the `~`
/// entries, and the relative ones too when the current directory differs from this one.
#[derive(Clone, PartialEq, Eq)]
enum Recheck {
    Never,
    Objects,
    Cwd(PathBuf),
}

/// The state of `$LOAD_PATH` as last seen.
pub struct LoadPath {
    array: VALUE,
    snapshot: VALUE,
    /// Every element's kind and expansion, by position in `$LOAD_PATH`.
    slots: Vec<(Kind, Expanded)>,
    recheck: Recheck,
    /// The expanded entries (Ruby skips empty ones; they are left out here too).
    expanded: Vec<PathBuf>,
    realpaths: RealPaths,
    /// The load path cannot be mirrored right now, so Ruby must answer every require: an entry
    /// holds a NUL byte (Ruby decides what to make of it), or starts with `~` (Ruby expands it
    /// against the home dir without `realpath`).
    opaque: bool,
    fresh: bool,
}

impl LoadPath {
    /// Follows the given array (`$LOAD_PATH`). Both it and the snapshot are kept across calls as
    /// raw `VALUE`s, so both are registered with the GC, which pins them: compaction (`GC.compact`,
    /// `GC.auto_compact`) never moves them, so the pointers never dangle. `$LOAD_PATH` lives as
    /// long as the VM, so pinning it keeps nothing alive that would otherwise be freed.
    pub fn new(array: VALUE) -> Self {
        unsafe { rb_sys::rb_gc_register_mark_object(array) };
        // A hidden array (no class: invisible to ObjectSpace), made with public API only
        // (`rb_ary_tmp_new` was renamed in Ruby 3.2 and is not exported by 3.3).
        let snapshot = unsafe { rb_sys::rb_obj_hide(rb_sys::rb_ary_new_capa(0)) };
        unsafe { rb_sys::rb_gc_register_mark_object(snapshot) };
        LoadPath {
            array,
            snapshot,
            slots: Vec::new(),
            recheck: Recheck::Never,
            expanded: Vec::new(),
            realpaths: RealPaths::default(),
            opaque: false,
            fresh: true,
        }
    }

    /// Whether `$LOAD_PATH` is as last polled, mirrorable, and has no entry Ruby would expand
    /// again (then `poll` has nothing to do).
    pub fn is_unchanged(&self) -> bool {
        !self.opaque && matches!(self.recheck, Recheck::Never) && self.unchanged()
    }

    fn unchanged(&self) -> bool {
        if self.fresh {
            return false;
        }
        unsafe {
            if rb_sys::rb_ary_shared_with_p(self.snapshot, self.array) == rb_sys::Qtrue as VALUE {
                return true;
            }
            let n = rb_sys::RARRAY_LEN(self.array);
            if n != rb_sys::RARRAY_LEN(self.snapshot) {
                return false;
            }
            let a = std::slice::from_raw_parts(rb_sys::RARRAY_CONST_PTR(self.array), n as usize);
            let b = std::slice::from_raw_parts(rb_sys::RARRAY_CONST_PTR(self.snapshot), n as usize);
            a == b
        }
    }

    /// Brings the expanded entries up to date. Returns `Some(entries)` when they changed, and
    /// `Err` when the load path cannot be mirrored (an entry Ruby itself would choke on), or an
    /// entry's `to_path` raised (or threw, or was interrupted): that comes back as
    /// [`Polled::Raised`], for the caller to raise once it holds nothing of loadscan's.
    pub fn poll(&mut self) -> Result<Option<&[PathBuf]>, Polled> {
        let changed = if self.unchanged() { self.expand_again() } else { self.expand_all() };
        let changed = match changed {
            Ok(changed) => changed,
            Err(e) => {
                // Expanded again next time, as Ruby will on its own require.
                self.fresh = true;
                self.opaque = false;
                return Err(Polled::Raised(e));
            }
        };
        if changed {
            self.opaque = self.slots.iter().any(|(_, e)| *e == Expanded::Opaque);
        }
        if self.opaque {
            return Err(Polled::Opaque);
        }
        if !changed {
            return Ok(None);
        }
        let expanded: Vec<PathBuf> = self
            .slots
            .iter()
            .filter_map(|(_, e)| match e {
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

    /// `$LOAD_PATH` changed: every entry is expanded, as Ruby's `rb_construct_expanded_load_path`
    /// does (`EXPAND_ALL`). The length is read again before each element, since an entry's
    /// `to_path` may change `$LOAD_PATH` itself.
    fn expand_all(&mut self) -> Result<bool, Error> {
        // Ruby takes the realpath of every entry again after each change; the memo answers
        // for an entry only while the symlinks it went through still point where they did.
        self.realpaths.revalidate();
        let mut slots = Vec::with_capacity(unsafe { rb_sys::RARRAY_LEN(self.array) } as usize);
        let mut cwd: Option<PathBuf> = None;
        let mut i = 0;
        while i < unsafe { rb_sys::RARRAY_LEN(self.array) } {
            let entry = unsafe { rb_sys::RARRAY_AREF(self.array, i as isize) };
            i += 1;
            slots.push(expand_entry(entry, &mut cwd, |abs| self.realpaths.expand(abs))?);
        }
        unsafe { rb_sys::rb_ary_replace(self.snapshot, self.array) };
        // An object whose path is relative needs no check of its own: objects are expanded
        // again before every search anyway.
        let relative = slots.iter().any(|(k, _)| matches!(k, Kind::Relative | Kind::Home));
        self.recheck = if relative {
            Recheck::Cwd(cwd.unwrap_or_else(current_dir))
        } else if slots.iter().any(|(k, _)| *k == Kind::Object) {
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
    /// as Ruby's. Returns whether any expansion changed.
    fn expand_again(&mut self) -> Result<bool, Error> {
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
            let again = match self.slots[i].0 {
                Kind::Absolute => false,
                Kind::Relative => relative_too,
                Kind::Home | Kind::Object => true,
            };
            if !again || i as std::os::raw::c_long >= unsafe { rb_sys::RARRAY_LEN(self.array) } {
                continue;
            }
            let entry = unsafe { rb_sys::RARRAY_AREF(self.array, i as isize) };
            let slot = expand_entry(entry, &mut cwd, fresh_realpath)?;
            if slot != self.slots[i] {
                self.slots[i] = slot;
                changed = true;
            }
        }
        if !self.unchanged() {
            // A `to_path` changed `$LOAD_PATH`: all of it is expanded on the next poll.
            self.fresh = true;
        }
        Ok(changed)
    }
}

/// One element of `$LOAD_PATH`, expanded with `realpath` (relative ones against the current
/// directory, read once per pass into `cwd`).
fn expand_entry(
    entry: VALUE,
    cwd: &mut Option<PathBuf>,
    mut realpath: impl FnMut(&Path) -> PathBuf,
) -> Result<(Kind, Expanded), Error> {
    let is_string = unsafe { rb_sys::RB_TYPE_P(entry, ruby_value_type::RUBY_T_STRING) };
    let s = if is_string {
        entry
    } else {
        // Whatever `to_path` raises, throws or is interrupted with goes back to Ruby.
        magnus::rb_sys::protect(|| unsafe { rb_sys::rb_get_path(entry) })?
    };
    let bytes =
        unsafe { std::slice::from_raw_parts(rb_sys::RSTRING_PTR(s) as *const u8, rb_sys::RSTRING_LEN(s) as usize) };
    let kind = match (is_string, bytes.first()) {
        (false, _) => Kind::Object,
        (true, Some(b'/')) => Kind::Absolute,
        (true, Some(b'~')) => Kind::Home,
        (true, _) => Kind::Relative,
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
    Ok((kind, expanded))
}

fn current_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_default()
}

/// An entry's `realpath` asked again, as Ruby does before each search for the entries it
/// expands every time: no memo.
fn fresh_realpath(abs: &Path) -> PathBuf {
    RealPaths::expand_uncached(abs)
}
