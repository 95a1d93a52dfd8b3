//! "Something to report": a flag read on every `require` without any lock (two atomic loads
//! when there is nothing), raised while the session holds what to report (new problems, a
//! rescan), and cleared when that is taken. Taking needs the lock; when it is busy the flag is
//! raised again, so what was found is reported on a later call, never lost.

use std::sync::atomic::{AtomicBool, Ordering};

/// A pending-report flag (a `static` of the binding's).
pub struct Pending(AtomicBool);

impl Pending {
    /// Nothing pending.
    pub const fn new() -> Self {
        Pending(AtomicBool::new(false))
    }

    /// Something waits to be reported.
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether something may wait (a hint: [`Pending::take`] decides).
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Takes what waits: clears the flag, then gets the lock with `lock` (`None`: busy) and
    /// hands it to `take`. A busy lock raises the flag again and gives `None`.
    pub fn take<G, T>(&self, lock: impl FnOnce() -> Option<G>, take: impl FnOnce(G) -> Option<T>) -> Option<T> {
        if !self.0.swap(false, Ordering::Relaxed) {
            return None;
        }
        match lock() {
            Some(guard) => take(guard),
            None => {
                self.raise();
                None
            }
        }
    }
}

impl Default for Pending {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Barrier, Mutex};

    #[test]
    fn a_busy_lock_leaves_the_report_for_the_next_call() {
        let pending = Pending::new();
        let state = Mutex::new(vec!["unreadable: /app/lib/locked"]);
        let take = || pending.take(|| state.try_lock().ok(), |mut s| Some(std::mem::take(&mut *s)));
        assert_eq!(take(), None, "nothing raised, nothing taken");
        pending.raise();
        let (held, done) = (Barrier::new(2), Barrier::new(2));
        let (busy, still_raised) = std::thread::scope(|scope| {
            scope.spawn(|| {
                let _guard = state.lock().unwrap(); // another thread scanning under the lock
                held.wait();
                done.wait();
            });
            held.wait();
            let seen = (take(), pending.is_raised());
            done.wait();
            seen
        });
        assert_eq!(busy, None, "busy: nothing taken now");
        assert!(still_raised, "and the report waits for the next call");
        assert_eq!(take(), Some(vec!["unreadable: /app/lib/locked"]));
        assert!(!pending.is_raised());
    }
}
