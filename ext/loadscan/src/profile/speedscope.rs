//! `speedscope(entries, name, exporter, samples)`: the boot profile's file, from `Profile::Tree`'s
//! entries (Structs whose first members are `ENTRY_MEMBERS`), written by
//! `loadscan_profile::speedscope_json`. Entries of another layout (a `loadscan profile` of
//! another version of loadscan than the app's) raise ArgumentError, and a member of another type
//! TypeError: Ruby's writer takes them.

use std::borrow::Cow;

use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{prelude::*, Error, Float, Integer, RArray, RString, RStruct, Ruby, Symbol, Value};
use rb_sys::VALUE;

use loadscan_profile::{speedscope_json, ProfileEntry};

/// The members the writer reads, in this order, at the start of each entry.
const ENTRY_MEMBERS: [&str; 11] =
    ["id", "parent", "kind", "label", "file", "gem", "start", "wall", "cpu", "allocated", "gc"];

/// One entry's members, its strings still Ruby's: the writer borrows their bytes.
struct Members {
    parent: Option<usize>,
    kind: Cow<'static, str>,
    label: Option<RString>,
    file: Option<RString>,
    gem: Option<RString>,
    start: f64,
    wall: f64,
    cpu: f64,
    allocated: i64,
    gc: f64,
}

pub fn speedscope(
    ruby: &Ruby,
    entries: RArray,
    name: RString,
    exporter: RString,
    samples: Option<u64>,
) -> Result<RString, Error> {
    // First the layout, class by class (asking a class its members allocates)...
    let mut checked = None;
    for value in entries.into_iter() {
        let entry = RStruct::from_value(value).ok_or_else(|| layout_error(ruby, "an entry is not a Struct"))?;
        let class = entry.class().as_raw();
        if checked != Some(class) {
            let names = entry.members()?;
            if names.len() < ENTRY_MEMBERS.len() || names.iter().zip(ENTRY_MEMBERS).any(|(m, want)| m != want) {
                return Err(layout_error(ruby, &format!("entries have the members {names:?}")));
            }
            checked = Some(class);
        }
    }
    // ...then the members, with no Ruby code run and nothing allocated: no GC can run (nor move
    // a string) from here until the writer has read the strings' bytes. The entries hold them, and
    // `entries` is on this stack.
    let mut members = Vec::with_capacity(entries.len());
    // The kinds' names by Symbol (a handful): looked up once each.
    let mut kinds: Vec<(VALUE, Cow<'static, str>)> = Vec::new();
    for (index, value) in entries.into_iter().enumerate() {
        let entry = value.as_raw();
        // An index below the members' count is a plain read, which cannot raise.
        let at = |i: i64| unsafe { Value::from_raw(rb_sys::rb_struct_aref(entry, ruby.integer_from_i64(i).as_raw())) };
        if integer(ruby, at(0), "id")? != index as i64 {
            return Err(layout_error(ruby, "entries are not in the order of their ids"));
        }
        members.push(Members {
            parent: if at(1).is_nil() { None } else { Some(integer(ruby, at(1), "parent")? as usize) },
            kind: match kinds.iter().find(|(k, _)| *k == at(2).as_raw()) {
                Some((_, name)) => name.clone(),
                None => {
                    let name = Symbol::from_value(at(2)).ok_or_else(|| type_error(ruby, "kind"))?.name()?;
                    kinds.push((at(2).as_raw(), name.clone()));
                    name
                }
            },
            label: string(ruby, at(3), "label")?,
            file: string(ruby, at(4), "file")?,
            gem: string(ruby, at(5), "gem")?,
            start: float(ruby, at(6), "start")?,
            wall: float(ruby, at(7), "wall")?,
            cpu: float(ruby, at(8), "cpu")?,
            allocated: integer(ruby, at(9), "allocated")?,
            gc: float(ruby, at(10), "gc")?,
        });
    }
    let list: Vec<ProfileEntry> = members
        .iter()
        .map(|m| ProfileEntry {
            parent: m.parent,
            kind: &m.kind,
            label: bytes(&m.label).unwrap_or_default(),
            file: bytes(&m.file),
            gem: bytes(&m.gem),
            start: m.start,
            wall: m.wall,
            cpu: m.cpu,
            allocated: m.allocated,
            gc: m.gc,
        })
        .collect();
    let json = speedscope_json(unsafe { name.as_slice() }, unsafe { exporter.as_slice() }, &list, samples);
    Ok(ruby.str_new(&json))
}

/// A string's bytes, borrowed for as long as `s` is (see `speedscope`: nothing runs meanwhile).
fn bytes(s: &Option<RString>) -> Option<&[u8]> {
    s.as_ref().map(|s| unsafe { s.as_slice() })
}

/// A String or nil, as it is (no `to_str`: that would run Ruby code).
fn string(ruby: &Ruby, value: Value, member: &str) -> Result<Option<RString>, Error> {
    if value.is_nil() {
        return Ok(None);
    }
    RString::from_value(value).map(Some).ok_or_else(|| type_error(ruby, member))
}

/// An Integer, as it is (no `to_int`).
fn integer(ruby: &Ruby, value: Value, member: &str) -> Result<i64, Error> {
    Integer::from_value(value).ok_or_else(|| type_error(ruby, member))?.to_i64()
}

/// A Float or an Integer, as it is (no `to_f`).
fn float(ruby: &Ruby, value: Value, member: &str) -> Result<f64, Error> {
    match Float::from_value(value) {
        Some(f) => Ok(f.to_f64()),
        None => Ok(integer(ruby, value, member)? as f64),
    }
}

fn type_error(ruby: &Ruby, member: &str) -> Error {
    Error::new(ruby.exception_type_error(), format!("not Profile::Tree entries: a {member} of another type"))
}

fn layout_error(ruby: &Ruby, what: &str) -> Error {
    Error::new(ruby.exception_arg_error(), format!("not Profile::Tree entries: {what}"))
}
