//! What the session tests share: a session started as the binding starts it, the answers a
//! `find` gives, and trees made to look as if they had not changed for an hour.

use std::path::PathBuf;
use std::time::Duration;

use super::{euid, LoadPath, TempTree, ENV};
use loadscan_core::{Answer, CacheFile, FoundFile, InPlace, Kind, Reason, Session, Settings, Started, Want};

pub fn settings(cache: Option<CacheFile>) -> Settings {
    Settings { policy: super::lazy_policy(), cache, readonly: false }
}

pub fn cache_in(t: &TempTree) -> CacheFile {
    CacheFile { dir: t.path("cache"), env: ENV.to_vec(), uid: euid() }
}

/// Starts a session following `$LOAD_PATH` = `order`, synced.
pub fn started(order: &[PathBuf], cache: Option<CacheFile>) -> (Session, LoadPath) {
    let mut load_path = LoadPath::new(order);
    let started = Session::start(settings(cache), &mut load_path, &InPlace).unwrap();
    assert_eq!(started.warning, None);
    (started.session, load_path)
}

/// A session started with `settings` on `$LOAD_PATH` = `order`, without a warning.
pub fn start_with(settings: Settings, order: &[PathBuf]) -> Started {
    let started = Session::start(settings, &mut LoadPath::new(order), &InPlace).unwrap();
    assert_eq!(started.warning, None);
    started
}

/// The answer for a file found.
pub fn file(want: Want, path: PathBuf, kind: Kind) -> Result<Answer, Reason> {
    Ok(Answer {
        want,
        file: Some(FoundFile { path: path.into_os_string().into_encoded_bytes(), kind }),
        maybe_linked_in: false,
    })
}

/// The answer for a sure miss.
/// No entry has it, and Ruby's table of extensions without a file may: Ruby must tell.
pub fn maybe_linked_in(want: Want) -> Result<Answer, Reason> {
    Ok(Answer { want, file: None, maybe_linked_in: true })
}

pub fn sure_miss(want: Want) -> Result<Answer, Reason> {
    Ok(Answer { want, file: None, maybe_linked_in: false })
}

/// Sets the mtime of `dir` and every directory below it an hour back: a directory listed within
/// `RACY_NS` of its last change vouches for no miss, as on a real boot right after an edit.
pub fn age(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            age(&e.path());
        }
    }
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(dir).and_then(|f| f.set_modified(hour_ago)).unwrap();
}
