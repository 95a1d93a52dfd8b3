//! The `$LOAD_PATH` mirror: the Ruby array as the core's [`Entries`] source, read by the
//! session's `sync` (the core's `ExpandedLoadPath` decides what each entry expands to and which
//! ones are expanded again while `$LOAD_PATH` is unchanged), which notices every change before
//! the next lookup.
//!
//! Change detection copies Ruby's own trick for its expanded-load-path cache: a hidden snapshot
//! array shares `$LOAD_PATH`'s buffer, and any mutation (`push`, `insert`, `[]=`, `replace`,
//! `shift`…) un-shares it, so an unchanged load path costs one pointer comparison. When they do
//! not share (small arrays are embedded), the elements are compared by identity.

use loadscan_core::{Entries, Entry};

use magnus::Error;
use rb_sys::{ruby_value_type, VALUE};

use crate::state::{LOAD_PATH_SNAPSHOT, PINNED_LOAD_PATHS};

/// Why the session's `sync` could not follow `$LOAD_PATH`: `Opaque` (Ruby answers), or
/// `Raised` with what an entry's `to_path` raised (or threw), to be raised once nothing of
/// loadscan's is held.
pub type SyncError = loadscan_core::SyncError<Error>;

/// `$LOAD_PATH` and the snapshot of it taken when every entry was last expanded.
pub struct LoadPath {
    array: VALUE,
    snapshot: VALUE,
}

impl LoadPath {
    /// Follows the given array (`$LOAD_PATH`). Both it and the snapshot are kept across calls as
    /// raw `VALUE`s, so both are registered with the GC, which pins them: compaction (`GC.compact`,
    /// `GC.auto_compact`) never moves them, so the pointers never dangle. Each is registered
    /// once per process, not once per `start`: `$LOAD_PATH` lives as long as the VM, and the
    /// one hidden snapshot array serves every session (a new one expands every entry, and so
    /// takes a new snapshot, before it compares anything).
    pub fn new(array: VALUE) -> Self {
        let mut pinned = PINNED_LOAD_PATHS.lock().unwrap_or_else(|p| p.into_inner());
        if !pinned.contains(&(array as usize)) {
            unsafe { rb_sys::rb_gc_register_mark_object(array) };
            pinned.push(array as usize);
        }
        // A hidden array (no class: invisible to ObjectSpace), made with public API only
        // (`rb_ary_tmp_new` was renamed in Ruby 3.2 and is not exported by 3.3).
        let snapshot = *LOAD_PATH_SNAPSHOT.get_or_init(|| unsafe {
            let snapshot = rb_sys::rb_obj_hide(rb_sys::rb_ary_new_capa(0));
            rb_sys::rb_gc_register_mark_object(snapshot);
            snapshot as usize
        }) as VALUE;
        LoadPath { array, snapshot }
    }
}

impl Entries for LoadPath {
    type Error = Error;

    fn len(&self) -> usize {
        unsafe { rb_sys::RARRAY_LEN(self.array) as usize }
    }

    /// The element at `i`, a String's bytes or an object's `to_path`, borrowed from the Ruby
    /// string: the core is done with them before it calls into Ruby again, so no GC runs while
    /// they are in use.
    fn entry(&mut self, i: usize) -> Result<Entry<'_>, Error> {
        let entry = unsafe { rb_sys::RARRAY_AREF(self.array, i as isize) };
        let is_string = unsafe { rb_sys::RB_TYPE_P(entry, ruby_value_type::RUBY_T_STRING) };
        let s = if is_string {
            entry
        } else {
            // Whatever `to_path` raises, throws or is interrupted with goes back to Ruby.
            magnus::rb_sys::protect(|| unsafe { rb_sys::rb_get_path(entry) })?
        };
        let bytes =
            unsafe { std::slice::from_raw_parts(rb_sys::RSTRING_PTR(s) as *const u8, rb_sys::RSTRING_LEN(s) as usize) };
        Ok(if is_string { Entry::String(bytes) } else { Entry::Object(bytes) })
    }

    fn is_unchanged(&self) -> bool {
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

    fn remember(&mut self) {
        unsafe { rb_sys::rb_ary_replace(self.snapshot, self.array) };
    }
}
