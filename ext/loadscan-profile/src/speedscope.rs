//! The boot profile's file (`LOADSCAN_PROFILE`, `loadscan profile`): speedscope's evented format
//! with loadscan's figures beside (lib/loadscan/profile/speedscope.rb says what each part means
//! and reads it back). Its one writer, in one pass with no object per event: the profile is
//! written at the exit of the boot it measured, and this is most of what that costs.

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use loadscan_core::json_string as string;

/// The `"loadscan"` part's format (`Speedscope::VERSION` in Ruby).
pub const SPEEDSCOPE_VERSION: u32 = 2;

/// speedscope's schema, named by the document.
const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// One entry of a finished profile (a `Profile::Tree::Entry`): times in milliseconds from the
/// boot's start, each figure the entry's with its entries'. Entries come in the order they
/// started, each after its parent (the first is the boot's own, with no parent).
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileEntry<'a> {
    /// The index of the entry open around this one.
    pub parent: Option<usize>,
    /// `boot`, `startup`, `require`, `require_relative`, `load`, `phase`, `initializer`.
    pub kind: &'a str,
    /// What the entry loaded or ran, as the summary names it.
    pub label: &'a [u8],
    /// The file it loaded (or its initializer's), when known.
    pub file: Option<&'a [u8]>,
    /// The gem it belongs to.
    pub gem: Option<&'a [u8]>,
    /// When it started.
    pub start: f64,
    /// Wall time.
    pub wall: f64,
    /// Process CPU time.
    pub cpu: f64,
    /// Objects allocated.
    pub allocated: i64,
    /// GC time.
    pub gc: f64,
}

/// The profile named `name` (the boot's command) as speedscope's JSON: frames `label [gem]` (the
/// boot's: its label) with their file, one open and one close event per entry in microseconds,
/// and under `"loadscan"` one array per figure speedscope has no place for. `exporter` names the
/// writer (`loadscan 0.1.0`).
/// `samples`: how many stack samples the profile took (none when it took none).
pub fn speedscope_json(name: &[u8], exporter: &[u8], entries: &[ProfileEntry], samples: Option<u64>) -> String {
    // The frames: one per name, and a name seen with another file gets a frame of its own.
    let mut frames: Vec<(Vec<u8>, Option<&[u8]>)> = Vec::new();
    let mut frame_of: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
    let mut frame_ids = Vec::with_capacity(entries.len());
    let mut frame_name = Vec::new();
    for e in entries {
        frame_name.clear();
        frame_name.extend_from_slice(e.label);
        if e.kind != "boot" {
            frame_name.extend_from_slice(b" [");
            frame_name.extend_from_slice(e.gem.unwrap_or_default());
            frame_name.push(b']');
        }
        let frame = match frame_of.get_mut(frame_name.as_slice()) {
            Some(f) if frames[*f].1 == e.file => *f,
            Some(f) => {
                *f = frames.len();
                frames.push((frame_name.clone(), e.file));
                *f
            }
            None => {
                frame_of.insert(frame_name.clone(), frames.len());
                frames.push((frame_name.clone(), e.file));
                frames.len() - 1
            }
        };
        frame_ids.push(frame);
    }

    let text: usize = frames.iter().map(|(n, f)| n.len() + f.map_or(0, <[u8]>::len)).sum();
    let mut out = String::with_capacity(text + 120 * entries.len() + 1024);
    out.push_str("{\"$schema\":");
    string(&mut out, SCHEMA.as_bytes());
    out.push_str(",\"shared\":{\"frames\":[");
    for (i, (frame_name, file)) in frames.iter().enumerate() {
        out.push_str(if i == 0 { "{\"name\":" } else { ",{\"name\":" });
        string(&mut out, frame_name);
        if let Some(file) = file {
            out.push_str(",\"file\":");
            string(&mut out, file);
        }
        out.push('}');
    }
    out.push_str("]},\"profiles\":[{\"type\":\"evented\",\"name\":");
    string(&mut out, name);
    let end = entries.first().map_or(0, |root| (root.wall * 1000.0).round() as i64);
    let _ = write!(out, ",\"unit\":\"microseconds\",\"startValue\":0,\"endValue\":{end},\"events\":[");
    // The entries open now (innermost last), with their close events' frame and time.
    let mut open: Vec<(usize, usize, i64)> = Vec::new();
    for (id, (e, &frame)) in entries.iter().zip(&frame_ids).enumerate() {
        while let Some(&(top, closing, at)) = open.last() {
            if Some(top) == e.parent {
                break;
            }
            open.pop();
            event(&mut out, "C", closing, at);
        }
        let start = e.start * 1000.0;
        event(&mut out, "O", frame, start.round() as i64);
        // (its end never past its parent's: the clocks are read one after the other)
        open.push((id, frame, (start + e.wall * 1000.0).round() as i64));
    }
    while let Some((_, frame, at)) = open.pop() {
        event(&mut out, "C", frame, at);
    }
    if out.ends_with(',') {
        out.pop();
    }
    out.push_str("]}],\"name\":");
    let mut title = b"boot profile: ".to_vec();
    title.extend_from_slice(name);
    string(&mut out, &title);
    out.push_str(",\"activeProfileIndex\":0,\"exporter\":");
    string(&mut out, exporter);
    let _ = write!(out, ",\"loadscan\":{{\"version\":{SPEEDSCOPE_VERSION},\"name\":");
    string(&mut out, name);
    out.push_str(",\"kind\":");
    list(&mut out, entries, |out, e| string(out, e.kind.as_bytes()));
    out.push_str(",\"gem\":");
    list(&mut out, entries, |out, e| match e.gem {
        Some(gem) => string(out, gem),
        None => out.push_str("null"),
    });
    out.push_str(",\"cpu\":");
    list(&mut out, entries, |out, e| number(out, (e.cpu * 1000.0).round() as i64));
    out.push_str(",\"allocated\":");
    list(&mut out, entries, |out, e| number(out, e.allocated));
    out.push_str(",\"gc\":");
    list(&mut out, entries, |out, e| number(out, (e.gc * 1000.0).round() as i64));
    if let Some(samples) = samples {
        out.push_str(",\"samples\":");
        number(&mut out, samples as i64);
    }
    out.push_str("}}");
    out
}

/// One event and a comma after it.
fn event(out: &mut String, kind: &str, frame: usize, at: i64) {
    out.push_str("{\"type\":\"");
    out.push_str(kind);
    out.push_str("\",\"frame\":");
    number(out, frame as i64);
    out.push_str(",\"at\":");
    number(out, at);
    out.push_str("},");
}

/// A whole number's digits (no `fmt` machinery: the document has some 20,000 of them).
fn number(out: &mut String, n: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.push('-');
    }
    out.extend(digits[at..].iter().map(|&d| d as char));
}

/// A JSON array of one value per entry.
fn list(out: &mut String, entries: &[ProfileEntry], mut value: impl FnMut(&mut String, &ProfileEntry)) {
    out.push('[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        value(out, e);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(
        parent: Option<usize>,
        kind: &'a str,
        label: &'a str,
        file: Option<&'a str>,
        gem: &'a str,
        start: f64,
        wall: f64,
    ) -> ProfileEntry<'a> {
        ProfileEntry {
            parent,
            kind,
            label: label.as_bytes(),
            file: file.map(str::as_bytes),
            gem: Some(gem.as_bytes()),
            start,
            wall,
            cpu: wall / 2.0,
            allocated: 7,
            gc: 0.0004,
        }
    }

    #[test]
    fn events_nest_as_the_entries_and_frames_are_shared_by_name_and_file() {
        let entries = [
            entry(None, "boot", "bin/rails runner nil", None, "(outside any require)", 0.0, 10.0),
            entry(Some(0), "require", "json", Some("/g/json.rb"), "json", 1.0, 4.0),
            entry(Some(1), "require", "json/common", Some("/g/json/common.rb"), "json", 1.5, 1.0),
            entry(Some(0), "require", "json", Some("/g/json.rb"), "json", 6.0, 0.002),
            entry(Some(0), "require", "json", Some("/h/json.rb"), "json", 7.0, 1.0),
        ];
        let json = speedscope_json(b"bin/rails runner nil", b"loadscan 0.1.0", &entries, None);
        assert!(json.starts_with("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[{\"name\":\"bin/rails runner nil\"},{\"name\":\"json [json]\",\"file\":\"/g/json.rb\"},{\"name\":\"json/common [json]\",\"file\":\"/g/json/common.rb\"},{\"name\":\"json [json]\",\"file\":\"/h/json.rb\"}]}"), "{json}");
        let events = [
            ("O", 0, 0),
            ("O", 1, 1000),
            ("O", 2, 1500),
            ("C", 2, 2500),
            ("C", 1, 5000),
            ("O", 1, 6000),
            ("C", 1, 6002),
            ("O", 3, 7000),
            ("C", 3, 8000),
            ("C", 0, 10000),
        ];
        let events: Vec<String> =
            events.iter().map(|(t, f, at)| format!("{{\"type\":\"{t}\",\"frame\":{f},\"at\":{at}}}")).collect();
        assert!(json.contains(&format!("\"endValue\":10000,\"events\":[{}]}}]", events.join(","))), "{json}");
        assert!(json.ends_with(",\"name\":\"boot profile: bin/rails runner nil\",\"activeProfileIndex\":0,\"exporter\":\"loadscan 0.1.0\",\"loadscan\":{\"version\":2,\"name\":\"bin/rails runner nil\",\"kind\":[\"boot\",\"require\",\"require\",\"require\",\"require\"],\"gem\":[\"(outside any require)\",\"json\",\"json\",\"json\",\"json\"],\"cpu\":[5000,2000,500,1,500],\"allocated\":[7,7,7,7,7],\"gc\":[0,0,0,0,0]}}"), "{json}");
    }

    #[test]
    fn labels_and_files_are_escaped_and_bytes_that_are_not_utf8_replaced() {
        let mut odd = entry(Some(0), "load", "a \"q\" \\ \t\u{1} é", Some("/x/é.rb"), "app", 1.0, 1.0);
        odd.file = Some(b"/x/\xff.rb");
        odd.gem = None;
        let entries = [entry(None, "boot", "ruby -e 1", None, "(outside any require)", 0.0, 2.0), odd];
        let json = speedscope_json(b"ruby -e \"1\"", b"loadscan", &entries, Some(12));
        assert!(json.contains("{\"name\":\"a \\\"q\\\" \\\\ \\t\\u0001 é []\",\"file\":\"/x/\u{fffd}.rb\"}"), "{json}");
        assert!(json.contains("\"name\":\"boot profile: ruby -e \\\"1\\\"\""), "{json}");
        assert!(json.contains("\"gem\":[\"(outside any require)\",null]"), "{json}");
        assert!(json.ends_with(",\"samples\":12}}"), "{json}");
    }
}
