//! Root ids, and a small set of them: almost every feature lives in exactly one root.

/// Identifies a root inside one index: its position among the index's roots.
pub type RootId = u32;

/// Root ids in insertion order; one id needs no allocation.
#[derive(Default, Clone, Debug)]
pub(crate) enum IdList {
    #[default]
    Empty,
    One(u32),
    Many(Vec<u32>),
}

impl IdList {
    pub(crate) fn insert(&mut self, id: u32) {
        *self = match std::mem::take(self) {
            IdList::Empty => IdList::One(id),
            IdList::One(a) if a == id => IdList::One(a),
            IdList::One(a) => IdList::Many(vec![a, id]),
            IdList::Many(mut v) => {
                if !v.contains(&id) {
                    v.push(id);
                }
                IdList::Many(v)
            }
        }
    }

    pub(crate) fn remove(&mut self, id: u32) {
        match self {
            IdList::One(a) if *a == id => *self = IdList::Empty,
            IdList::Many(v) => {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    *self = IdList::Empty;
                }
            }
            _ => {}
        }
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        match self {
            IdList::Empty => false,
            IdList::One(a) => *a == id,
            IdList::Many(v) => v.contains(&id),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, IdList::Empty)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (one, many): (Option<u32>, &[u32]) = match self {
            IdList::Empty => (None, &[]),
            IdList::One(a) => (Some(*a), &[]),
            IdList::Many(v) => (None, v.as_slice()),
        };
        one.into_iter().chain(many.iter().copied())
    }
}
