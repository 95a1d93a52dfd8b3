//! JSON's one rule the writers here need: a string, escaped (the last boot's record, the boot
//! profile's document).

/// Appends `bytes` as a JSON string: bytes that are not UTF-8 replaced (U+FFFD), `"` and `\`
/// escaped, control characters as Ruby's JSON writes them (`\n`, or `\u001f`); the rest as is
/// (UTF-8).
pub fn string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    // (valid, as most are, at the speed of a check; else each bad byte found)
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    };
    let mut rest: &str = &text;
    // Runs that need no escape are copied whole (paths and labels mostly are one run).
    while let Some(at) = rest.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&rest[..at]);
        let b = rest.as_bytes()[at];
        let short = match b {
            b'\n' => Some('n'),
            b'\t' => Some('t'),
            b'\r' => Some('r'),
            0x08 => Some('b'),
            0x0c => Some('f'),
            _ => None,
        };
        if let Some(c) = short {
            out.push('\\');
            out.push(c);
        } else if b < 0x20 {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push('\\');
            out.push(b as char);
        }
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::string;

    fn json(bytes: &[u8]) -> String {
        let mut out = String::new();
        string(&mut out, bytes);
        out
    }

    #[test]
    fn escapes_as_rubys_json_does() {
        // JSON.generate(["a\nb\t\u0001\u001f\b\f\r\u2028/</\"\\"]) on Ruby 3.1 to 3.4
        assert_eq!(
            json("a\nb\t\u{1}\u{1f}\u{8}\u{c}\r\u{2028}/</\"\\".as_bytes()),
            "\"a\\nb\\t\\u0001\\u001f\\b\\f\\r\u{2028}/</\\\"\\\\\""
        );
        assert_eq!(json(b"plain path/to/file.rb"), "\"plain path/to/file.rb\"");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced() {
        assert_eq!(json(b"caf\xe9"), "\"caf\u{fffd}\"");
    }
}
