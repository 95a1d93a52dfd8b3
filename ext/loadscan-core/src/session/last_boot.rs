//! The last boot's record: one JSON object of the session's [`Stats`] and what the caller adds
//! (when, which program, which Ruby, what the cache did), written beside the cache by
//! [`crate::store::CacheFile::record_last_boot`] and read back by the command line.

use super::{Figure, Stats};
use crate::json::string;

/// A value the caller adds to the record.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// A string (bytes that are not UTF-8 are replaced).
    Str(Vec<u8>),
    /// An integer.
    Int(i64),
    /// A number that is not whole (`null` when it is not finite).
    Float(f64),
    /// true or false.
    Bool(bool),
    /// null.
    Null,
    /// A list.
    Array(Vec<Json>),
    /// An object, its fields in order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Appends this value as JSON.
    fn write(&self, out: &mut String) {
        match self {
            Json::Str(s) => string(out, s),
            Json::Int(n) => out.push_str(&n.to_string()),
            Json::Float(x) if x.is_finite() => out.push_str(&x.to_string()),
            Json::Float(_) | Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Array(list) => {
                out.push('[');
                for (i, value) in list.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    value.write(out);
                }
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    string(out, name.as_bytes());
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

impl Stats {
    /// The record: `extra`'s fields first, then every figure of [`Stats::fields`].
    pub fn last_boot_json(&self, extra: &[(String, Json)]) -> Vec<u8> {
        let mut fields = extra.to_vec();
        for (name, figure) in self.fields() {
            let value = match figure {
                Figure::Count(n) => Json::Int(n as i64),
                Figure::Ms(ms) => Json::Float(ms),
                Figure::Counts(list) => {
                    Json::Object(list.into_iter().map(|(name, n)| (name.to_string(), Json::Int(n as i64))).collect())
                }
            };
            fields.push((name.to_string(), value));
        }
        let mut out = String::new();
        Json::Object(fields).write(&mut out);
        out.into_bytes()
    }
}

/// A JSON string: quotes, backslashes and control characters escaped, invalid UTF-8 replaced.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::LazyStats;
    use crate::session::{Requires, Timings};

    #[test]
    fn the_record_is_one_json_object_with_escaped_strings() {
        let stats = Stats {
            roots_scanned: 3,
            roots_refreshed: 0,
            roots_from_cache: 2,
            features: 40,
            scans: 1,
            load_path_entries: 5,
            requires: Requires { hits: 7, misses: 1, deferred: [0, 2, 0, 0, 1, 0] },
            timings: Timings::default(),
            lazy: LazyStats::default(),
        };
        let gc = Json::Object(vec![
            ("runs".into(), Json::Int(9)),
            ("ended_by".into(), Json::Null),
            ("heaps".into(), Json::Array(vec![Json::Object(vec![("live".into(), Json::Int(3))]), Json::Array(vec![])])),
            ("ratio".into(), Json::Float(0.5)),
            ("nan".into(), Json::Float(f64::NAN)),
        ]);
        let json = stats.last_boot_json(&[
            ("program".into(), Json::Str(b"bin/\"x\"\n\xff".to_vec())),
            ("engaged".into(), Json::Bool(true)),
            ("gc".into(), gc),
        ]);
        let json = String::from_utf8(json).unwrap();
        assert!(
            json.starts_with(concat!(
                "{\"program\":\"bin/\\\"x\\\"\\n\u{fffd}\",\"engaged\":true,",
                "\"gc\":{\"runs\":9,\"ended_by\":null,\"heaps\":[{\"live\":3},[]],\"ratio\":0.5,\"nan\":null},",
                "\"roots_scanned\":3,"
            )),
            "{json}"
        );
        assert!(json.contains("\"deferred\":3,\"left_to_ruby\":{\"not_string\":0,\"not_feature\":2,"), "{json}");
        assert!(json.ends_with("\"lazy_ms\":0}"), "{json}");
    }
}
