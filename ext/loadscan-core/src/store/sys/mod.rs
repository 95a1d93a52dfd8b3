//! What `store/` asks of the system, one file per platform: `linux.rs` works relative to
//! directory fds (rustix); `portable.rs` (other systems: macOS) does the same checks by path with
//! std only, and is compiled on Linux too with `portable-readdir`, so that `cargo check` covers
//! it. `cache_dir.rs` and `file.rs` say what is checked and why.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(any(not(target_os = "linux"), feature = "portable-readdir"))]
#[allow(dead_code)] // compiled on Linux with `portable-readdir` so that `cargo check` covers it
mod portable;

#[cfg(target_os = "linux")]
pub(super) use linux::*;
#[cfg(not(target_os = "linux"))]
pub(super) use portable::*;
