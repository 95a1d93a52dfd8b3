//! The boot profile's file (`LOADSCAN_PROFILE`, `loadscan profile`), written in one place:
//! speedscope's evented format with loadscan's figures beside (`speedscope.rs`). Its readers are
//! `Loadscan::Profile::Speedscope.entries` (Ruby: `loadscan profile`) and the page's script
//! (lib/loadscan/profile/page.html); the binding (ext/loadscan/src/profile/) hands it
//! `Profile::Tree`'s entries. Apart from the load-path core, whose subject is `$LOAD_PATH`.
#![deny(missing_docs)]

mod speedscope;

pub use speedscope::{speedscope_json, ProfileEntry, SPEEDSCOPE_VERSION};
