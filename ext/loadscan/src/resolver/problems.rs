//! What scans worked around: kept for `Loadscan.problems`, handed out once for a warning.

use std::sync::atomic::{AtomicBool, Ordering};

use loadscan_core::{ProblemKind, ScanProblem};

use super::state::{in_main_ractor, State, STATE};

/// Set when a scan found problems not yet handed out for a warning (checked on every require,
/// so it is an atomic rather than a trip through the lock).
static UNREPORTED: AtomicBool = AtomicBool::new(false);
const MAX_PROBLEMS: usize = 1000;

impl State {
    /// Keeps problems for `Loadscan.problems` and the next warning.
    pub(super) fn absorb(&mut self, problems: Vec<ScanProblem>) {
        for p in problems {
            if self.problems.len() < MAX_PROBLEMS {
                self.problems.push((p.kind, p.to_string()));
                UNREPORTED.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Every problem noticed while scanning so far.
pub fn problems() -> Vec<(ProblemKind, String)> {
    match STATE.try_lock() {
        Ok(g) => g.as_ref().map(|s| s.problems.clone()).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Problems not handed out for a warning yet (the caller warns after the lock is released);
/// only in the Ractor that started loadscan (the `on_problems` callable is one of its objects).
pub fn unreported_problems() -> Vec<(ProblemKind, String)> {
    // The flag first: this runs on every require, and the Ractor check is a table lookup.
    if !UNREPORTED.load(Ordering::Relaxed) || !in_main_ractor() || !UNREPORTED.swap(false, Ordering::Relaxed) {
        return Vec::new();
    }
    match STATE.try_lock() {
        Ok(mut g) => match g.as_mut() {
            Some(s) if s.reported < s.problems.len() => {
                let new = s.problems[s.reported..].to_vec();
                s.reported = s.problems.len();
                new
            }
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    }
}
