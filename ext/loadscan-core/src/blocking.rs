//! Where blocking file-system work runs. The core never decides it: the binding runs each
//! piece with Ruby's GVL released (so other Ruby threads go on meanwhile), tests run it in
//! place ([`InPlace`]). Each piece is bounded (one scan, one listing, one round of `stat`s,
//! one cache read or write) and touches nothing of the caller's but what it is given.

/// Runs a piece of blocking work and returns its result.
pub trait Blocking {
    /// Runs `work` (the binding: with the GVL released) and returns what it returned.
    fn run<R>(&self, work: impl FnOnce() -> R) -> R;
}

/// Runs blocking work on the calling thread, as it is (tests, tools, examples).
#[derive(Clone, Copy, Debug, Default)]
pub struct InPlace;

impl Blocking for InPlace {
    fn run<R>(&self, work: impl FnOnce() -> R) -> R {
        work()
    }
}
