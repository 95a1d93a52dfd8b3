//! What a session's life takes and gives: the [`Settings`] it is started with, what the start
//! found ([`Started`]), and what the end did with the cache ([`Saved`]) and the last boot's
//! record ([`Finished`]).

use super::Session;
use crate::index::SyncPolicy;
use crate::store::CacheFile;

/// What a session is started with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How to scan and revalidate (the DLEXT of native extensions in its scan options).
    pub policy: SyncPolicy,
    /// Where the cache lives, if anywhere.
    pub cache: Option<CacheFile>,
    /// Read the cache, never write it nor the last boot's record (`readonly: true`); changed
    /// later with [`Session::set_readonly`].
    pub readonly: bool,
}

/// A session just started ([`Session::start`]), and what it found in the cache directory.
pub struct Started {
    /// The session, synced once with the load path.
    pub session: Session,
    /// Why an existing cache or its directory was not used (for one warning; then neither the
    /// cache nor the record is written).
    pub warning: Option<String>,
    /// The last boot's record, read from the directory just opened (`None`: none, or not one to
    /// trust; no warning, the command line's reading warns).
    pub last_boot: Option<String>,
}

/// What [`Session::finish`] did.
#[derive(Debug, PartialEq, Eq)]
pub struct Finished {
    /// What became of the cache.
    pub saved: Saved,
    /// Why this boot's record could not be written (one line for a warning).
    pub unrecorded: Option<String>,
}

/// What [`Session::save`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Saved {
    /// Nothing changed since the cache was read.
    Clean,
    /// Written.
    Written,
    /// No cache (none configured, or refused at the start).
    Skipped,
    /// The write failed (one line, for a warning).
    Failed(String),
}

impl Saved {
    /// Its name in the last boot's record (`"cache"`) and in Ruby (a Symbol).
    pub fn name(&self) -> &'static str {
        match self {
            Saved::Clean => "clean",
            Saved::Written => "written",
            Saved::Skipped => "skipped",
            Saved::Failed(_) => "failed",
        }
    }
}
