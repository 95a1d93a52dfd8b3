//! Every conversion between Ruby values and the core's types: feature names and paths as
//! bytes (with Ruby's encodings), and each answer, problem list, figure and explanation as the
//! Ruby value `Loadscan::Native` returns.

use magnus::{prelude::*, Error, IntoValue, RArray, RHash, RString, Ruby, Symbol, Value};

use loadscan_core::{Answer, Explanation, Figure, FoundFile, Json, Kind, Problem, Reason, Saved, Stats};

/// A copy of a String argument's bytes (Ruby code run during a lookup — a `to_path` of a
/// `$LOAD_PATH` entry — could otherwise change them under us). Only real Strings take the fast
/// path; anything else (to_path / to_str objects, wrong types) goes to Ruby's require, which
/// converts or raises exactly as it always does.
///
/// A name Ruby's `require` would not look for byte for byte goes to Ruby too: one in an
/// ASCII-incompatible encoding (UTF-16…: Ruby raises), and one that `rb_get_path`'s
/// `file_path_convert` transcodes (`Encoding.default_internal` set, non-ASCII, in an encoding
/// other than the file system's). The indexed path built for such a name would carry the
/// name's encoding and be transcoded again by Ruby's `require`.
pub fn feature_bytes(v: Value) -> Option<Vec<u8>> {
    use magnus::rb_sys::AsRawValue;
    let s = RString::from_value(v)?;
    let raw = s.as_raw();
    unsafe {
        let idx = rb_sys::rb_enc_get_index(raw);
        if idx != rb_sys::rb_usascii_encindex() && idx != rb_sys::rb_ascii8bit_encindex() {
            let enc = rb_sys::rb_enc_from_index(idx);
            if enc.is_null() || (*enc).min_enc_len != 1 || rb_sys::rb_enc_dummy_p(enc) != 0 {
                return None;
            }
            let fs = rb_sys::rb_filesystem_encindex();
            if fs != idx
                && !rb_sys::rb_default_internal_encoding().is_null()
                && rb_sys::rb_enc_str_asciionly_p(raw) == 0
            {
                return None;
            }
        }
    }
    Some(unsafe { s.as_slice() }.to_vec())
}

/// A String's bytes (directory names, options: they need not be UTF-8).
pub fn bytes(s: RString) -> Vec<u8> {
    unsafe { s.as_slice() }.to_vec()
}

/// A found file's path in the encoding Ruby's search gives it (`File.expand_path` of the feature
/// against the entry): the feature's own encoding, except that an ASCII-8BIT or US-ASCII
/// feature gives the file system's encoding (the entry's).
pub fn path_string(ruby: &Ruby, path: &[u8], like: Value) -> RString {
    use magnus::rb_sys::AsRawValue;
    let s = ruby.str_from_slice(path);
    unsafe {
        let idx = rb_sys::rb_enc_get_index(like.as_raw());
        let idx = if idx == rb_sys::rb_ascii8bit_encindex() || idx == rb_sys::rb_usascii_encindex() {
            rb_sys::rb_filesystem_encindex()
        } else {
            idx
        };
        rb_sys::rb_enc_associate_index(s.as_raw(), idx);
    }
    s
}

fn kind_symbol(ruby: &Ruby, kind: Kind) -> Symbol {
    ruby.to_symbol(if kind == Kind::Rb { "rb" } else { "so" })
}

/// `Native.lookup`'s answer: the path, `:missing` (no entry has it) or `:unknown` (Ruby's
/// `require` must decide); `None` for no lookup (stopped, busy, not a String).
pub fn lookup_answer(ruby: &Ruby, found: Option<Result<Answer, Reason>>, feature: Value) -> Value {
    match found {
        Some(Ok(Answer { file: Some(file), .. })) => path_string(ruby, &file.path, feature).as_value(),
        Some(Ok(Answer { file: None, .. }) | Err(Reason::UnsureMiss)) => ruby.to_symbol("missing").as_value(),
        _ => ruby.to_symbol("unknown").as_value(),
    }
}

/// `resolve_feature_path`'s answer from the index: `[:rb | :so, path]`, nil for a sure miss, or
/// `None` when Ruby's own method must answer.
pub fn feature_path(ruby: &Ruby, found: Option<Result<Answer, Reason>>, feature: Value) -> Option<Value> {
    match found? {
        Ok(Answer { file: Some(FoundFile { path, kind }), .. }) => {
            let pair = [kind_symbol(ruby, kind).as_value(), path_string(ruby, &path, feature).as_value()];
            Some(ruby.ary_new_from_values(&pair).as_value())
        }
        Ok(Answer { file: None, maybe_linked_in: false, .. }) => Some(ruby.qnil().as_value()),
        Ok(Answer { file: None, maybe_linked_in: true, .. }) | Err(_) => None,
    }
}

/// `Native.save`'s answer: `:written`, `:clean`, `:skipped`, or why the write failed (a String).
pub fn saved(ruby: &Ruby, saved: Saved) -> Value {
    match saved {
        Saved::Written => ruby.to_symbol("written").as_value(),
        Saved::Clean => ruby.to_symbol("clean").as_value(),
        Saved::Skipped => ruby.to_symbol("skipped").as_value(),
        Saved::Failed(why) => ruby.str_new(&why).as_value(),
    }
}

/// `[[kind, message], …]`; kind is a [`loadscan_core::ProblemKind::name`] (`:loop`,
/// `:dangling`, …: `Native::PROBLEM_KINDS`).
pub fn problems(ruby: &Ruby, problems: &[Problem]) -> RArray {
    let out = ruby.ary_new_capa(problems.len());
    for p in problems {
        let pair = [ruby.to_symbol(p.kind.name()).as_value(), ruby.str_new(&p.message).as_value()];
        let _ = out.push(ruby.ary_new_from_values(&pair));
    }
    out
}

/// `Native.stats`: a Hash of [`Stats::fields`] with Symbol keys.
pub fn stats(ruby: &Ruby, stats: &Stats) -> Result<RHash, Error> {
    let h = ruby.hash_new();
    for (name, figure) in stats.fields() {
        let value = match figure {
            Figure::Count(n) => n.into_value_with(ruby),
            Figure::Ms(ms) => ms.into_value_with(ruby),
            Figure::Counts(list) => {
                let by_name = ruby.hash_new();
                for (name, n) in list {
                    by_name.aset(ruby.to_symbol(name), n)?;
                }
                by_name.as_value()
            }
        };
        h.aset(ruby.to_symbol(name), value)?;
    }
    Ok(h)
}

/// `Native.explain`: `{candidates: [[rank, root, :rb | :so], …], blind: [[rank, root, dir], …],
/// deferred: [[rank, root, dir], …]}` (ranks are load-path positions).
pub fn explanation(ruby: &Ruby, e: Explanation) -> Result<RHash, Error> {
    let h = ruby.hash_new();
    let candidates = ruby.ary_new();
    for (rank, root, kind) in e.candidates {
        candidates.push((rank, ruby.str_from_slice(&root), kind_symbol(ruby, kind)))?;
    }
    h.aset(ruby.to_symbol("candidates"), candidates)?;
    for (name, gaps) in [("blind", e.blind), ("deferred", e.deferred)] {
        let list = ruby.ary_new();
        for (rank, root, dir) in gaps {
            list.push((rank, ruby.str_from_slice(&root), ruby.str_from_slice(&dir)))?;
        }
        h.aset(ruby.to_symbol(name), list)?;
    }
    Ok(h)
}

/// Strings as an Array.
pub fn strings(ruby: &Ruby, list: Vec<Vec<u8>>) -> RArray {
    let out = ruby.ary_new_capa(list.len());
    for s in list {
        let _ = out.push(ruby.str_from_slice(&s));
    }
    out
}

/// A Hash of String or Symbol keys to Strings, Symbols, Integers, Floats, true, false, nil,
/// Arrays and Hashes of those, as the fields a record adds (`Native.finish`).
pub fn json_fields(ruby: &Ruby, hash: RHash) -> Result<Vec<(String, Json)>, Error> {
    json_fields_at(ruby, hash, 0)
}

/// How deep a record's values may nest (an Array that holds itself must not recurse for ever).
const MAX_DEPTH: usize = 8;

fn json_fields_at(ruby: &Ruby, hash: RHash, depth: usize) -> Result<Vec<(String, Json)>, Error> {
    let mut out = Vec::new();
    hash.foreach(|key: Value, value: Value| {
        let key = match Symbol::from_value(key) {
            Some(sym) => sym.name()?.into_owned(),
            None => String::try_convert(key)?,
        };
        out.push((key, json_value(ruby, value, depth)?));
        Ok(magnus::r_hash::ForEach::Continue)
    })?;
    Ok(out)
}

fn json_value(ruby: &Ruby, value: Value, depth: usize) -> Result<Json, Error> {
    Ok(if let Some(s) = RString::from_value(value) {
        Json::Str(bytes(s))
    } else if let Some(sym) = Symbol::from_value(value) {
        Json::Str(sym.name()?.as_bytes().to_vec())
    } else if value.is_kind_of(ruby.class_integer()) {
        Json::Int(i64::try_convert(value)?)
    } else if value.is_kind_of(ruby.class_float()) {
        Json::Float(f64::try_convert(value)?)
    } else if value.is_nil() || depth >= MAX_DEPTH {
        Json::Null
    } else if let Some(list) = RArray::from_value(value) {
        Json::Array(list.into_iter().map(|v| json_value(ruby, v, depth + 1)).collect::<Result<_, _>>()?)
    } else if let Some(h) = RHash::from_value(value) {
        Json::Object(json_fields_at(ruby, h, depth + 1)?)
    } else {
        Json::Bool(value.to_bool())
    })
}
