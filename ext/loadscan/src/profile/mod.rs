//! The boot profile's part of the binding: `speedscope.rs` hands `Profile::Tree`'s entries to
//! the one writer of its file (the `loadscan-profile` crate); `sampler.rs` samples the profiled
//! thread's stack while a profile records; `gc_clock.rs` times its GC on the wall clock.

pub mod gc_clock;
pub mod sampler;
pub mod speedscope;
