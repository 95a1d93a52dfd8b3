//! Following `$LOAD_PATH`: notices every change before the next lookup and expands entries the
//! way Ruby 3.1 and 3.3 do (`realpath` of each entry, relative ones against the current directory).
//!
//! Change detection copies Ruby's own trick for its expanded-load-path cache: a hidden snapshot
//! array shares `$LOAD_PATH`'s buffer, and any mutation (`push`, `insert`, `[]=`, `replace`,
//! `shift`…) un-shares it, so an unchanged load path costs one pointer comparison. When they do
//! not share (small arrays are embedded), the elements are compared by identity.

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

/// The state of `$LOAD_PATH` as last seen.
pub struct LoadPath {
    array: VALUE,
    snapshot: VALUE,
    /// Some entry is not a String or is relative: Ruby re-expands those on every require.
    dynamic: bool,
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
            dynamic: false,
            expanded: Vec::new(),
            realpaths: RealPaths::default(),
            opaque: false,
            fresh: true,
        }
    }

    /// Whether `$LOAD_PATH` is as last polled and mirrorable (then `poll` has nothing to do).
    pub fn is_unchanged(&self) -> bool {
        !self.opaque && self.unchanged()
    }

    fn unchanged(&self) -> bool {
        if self.fresh || self.dynamic {
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
        if self.unchanged() {
            return if self.opaque { Err(Polled::Opaque) } else { Ok(None) };
        }
        // Ruby takes the realpath of every entry again after each change; the memo answers
        // for an entry only while the symlinks it went through still point where they did.
        self.realpaths.revalidate();
        let expanded = self.expand();
        unsafe { rb_sys::rb_ary_replace(self.snapshot, self.array) };
        let (expanded, dynamic, opaque) = match expanded {
            Ok(e) => e,
            Err(e) => {
                // Expanded again next time, as Ruby will on its own require.
                self.fresh = true;
                self.opaque = false;
                return Err(Polled::Raised(e));
            }
        };
        self.fresh = false;
        self.dynamic = dynamic;
        self.opaque = opaque;
        if self.opaque {
            return Err(Polled::Opaque);
        }
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

    /// Expands the entries as Ruby's `rb_construct_expanded_load_path` does: the length is read
    /// again before each element, since an entry's `to_path` may change `$LOAD_PATH` itself.
    /// Returns the entries, whether some are dynamic, and whether the load path is opaque.
    fn expand(&mut self) -> Result<(Vec<PathBuf>, bool, bool), Error> {
        let mut out = Vec::with_capacity(unsafe { rb_sys::RARRAY_LEN(self.array) } as usize);
        let mut dynamic = false;
        let mut cwd: Option<PathBuf> = None;
        let mut i = 0;
        while i < unsafe { rb_sys::RARRAY_LEN(self.array) } {
            let entry = unsafe { rb_sys::RARRAY_AREF(self.array, i as isize) };
            i += 1;
            let is_string = unsafe { rb_sys::RB_TYPE_P(entry, ruby_value_type::RUBY_T_STRING) };
            let s = if is_string {
                entry
            } else {
                dynamic = true;
                // Whatever `to_path` raises, throws or is interrupted with goes back to Ruby.
                magnus::rb_sys::protect(|| unsafe { rb_sys::rb_get_path(entry) })?
            };
            let bytes = unsafe {
                std::slice::from_raw_parts(rb_sys::RSTRING_PTR(s) as *const u8, rb_sys::RSTRING_LEN(s) as usize)
            };
            if bytes.contains(&0) {
                return Ok((out, dynamic, true));
            }
            match bytes.first() {
                None => continue,
                Some(b'~') => return Ok((out, dynamic, true)),
                Some(b'/') => {}
                Some(_) => dynamic = true,
            }
            let raw = Path::new(OsStr::from_bytes(bytes));
            let abs = if raw.is_absolute() {
                raw.to_path_buf()
            } else {
                let cwd = cwd.get_or_insert_with(|| std::env::current_dir().unwrap_or_default());
                cwd.join(raw)
            };
            out.push(self.realpaths.expand(&abs));
        }
        Ok((out, dynamic, false))
    }
}
