//! The problems scans worked around, kept for `Loadscan.stats` and handed out once for a
//! warning.

use crate::scan::{ProblemKind, ScanProblem};

/// At most this many problems are kept (a tree full of unreadable directories must not make
/// the process grow without bound).
const MAX_PROBLEMS: usize = 1000;

/// Something a scan worked around, as reported to Ruby.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What happened.
    pub kind: ProblemKind,
    /// One line for people, with the path.
    pub message: String,
}

/// Every problem kept so far, oldest first, and how many were handed out for a warning.
/// Invariant: `reported <= list.len() <= MAX_PROBLEMS`.
#[derive(Default)]
pub(super) struct Problems {
    list: Vec<Problem>,
    reported: usize,
}

impl Problems {
    /// Keeps problems for [`Problems::all`] and the next warning (up to `MAX_PROBLEMS`).
    pub(super) fn absorb(&mut self, problems: Vec<ScanProblem>) {
        let room = MAX_PROBLEMS.saturating_sub(self.list.len());
        let kept = problems.into_iter().take(room).map(|p| Problem { kind: p.kind, message: p.to_string() });
        self.list.extend(kept);
    }

    /// Every problem kept, oldest first.
    pub(super) fn all(&self) -> &[Problem] {
        &self.list
    }

    /// Whether some problems were not handed out yet.
    pub(super) fn has_unreported(&self) -> bool {
        self.reported < self.list.len()
    }

    /// The problems not handed out yet; they count as handed out from now on.
    pub(super) fn take_unreported(&mut self) -> Vec<Problem> {
        let new = self.list[self.reported..].to_vec();
        self.reported = self.list.len();
        new
    }
}
