//! Ruby's `$LOAD_PATH` entry rules (`ExpandedLoadPath`) on real trees: which entries count,
//! what they expand to, and which ones are expanded again while `$LOAD_PATH` is unchanged. The
//! `Array` source stands for the Ruby array; it records which elements were asked for.

mod common;

use common::TempTree;
use loadscan_core::internals::ExpandedLoadPath;
use loadscan_core::{Entries, Entry, SyncError};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An element: a String, or an object whose `to_path` answers a path or raises.
#[derive(Clone)]
enum Item {
    Str(Vec<u8>),
    Obj(Result<Vec<u8>, String>),
}

fn s(p: impl AsRef<Path>) -> Item {
    Item::Str(p.as_ref().as_os_str().as_bytes().to_vec())
}

fn obj(p: impl AsRef<Path>) -> Item {
    Item::Obj(Ok(p.as_ref().as_os_str().as_bytes().to_vec()))
}

/// `$LOAD_PATH`: its elements, and a version that every change of the array bumps.
#[derive(Default)]
struct Array {
    items: Vec<Item>,
    version: u64,
    remembered: Option<u64>,
    /// Which elements were asked for since the last poll.
    asked: Vec<usize>,
    /// Asking element `i` pushes this item (once): a `to_path` that changes `$LOAD_PATH`.
    on_ask: Option<(usize, Item)>,
}

impl Array {
    fn new(items: Vec<Item>) -> Self {
        Array { items, ..Array::default() }
    }

    /// A change of the array itself (`$LOAD_PATH[i] = ..`, `push`).
    fn set(&mut self, i: usize, item: Item) {
        if i == self.items.len() {
            self.items.push(item);
        } else {
            self.items[i] = item;
        }
        self.version += 1;
    }

    /// A change of the array: elements from `n` on are dropped.
    fn truncate(&mut self, n: usize) {
        self.items.truncate(n);
        self.version += 1;
    }

    /// What the object at `i` answers now; the array is unchanged.
    fn answer(&mut self, i: usize, to_path: Result<&Path, &str>) {
        let to_path = to_path.map(|p| p.as_os_str().as_bytes().to_vec());
        self.items[i] = Item::Obj(to_path.map_err(str::to_string));
    }
}

impl Entries for Array {
    type Error = String;

    fn len(&self) -> usize {
        self.items.len()
    }

    fn entry(&mut self, i: usize) -> Result<Entry<'_>, String> {
        self.asked.push(i);
        if self.on_ask.as_ref().is_some_and(|(at, _)| *at == i) {
            let (n, (_, item)) = (self.items.len(), self.on_ask.take().unwrap());
            self.set(n, item);
        }
        match &self.items[i] {
            Item::Str(b) => Ok(Entry::String(b)),
            Item::Obj(Ok(b)) => Ok(Entry::Object(b)),
            Item::Obj(Err(e)) => Err(e.clone()),
        }
    }

    fn is_unchanged(&self) -> bool {
        self.remembered == Some(self.version)
    }

    fn remember(&mut self) {
        self.remembered = Some(self.version);
    }
}

/// What a poll gave.
#[derive(Debug, PartialEq)]
enum Got {
    Changed(Vec<PathBuf>),
    Same,
    Opaque,
    Raised(String),
}

/// Polls, and says what came out and which elements were asked for.
fn poll(lp: &mut ExpandedLoadPath, array: &mut Array) -> (Got, Vec<usize>) {
    let got = match lp.poll(array) {
        Ok(Some(entries)) => Got::Changed(entries.to_vec()),
        Ok(None) => Got::Same,
        Err(SyncError::Opaque) => Got::Opaque,
        Err(SyncError::Raised(e)) => Got::Raised(e),
    };
    (got, std::mem::take(&mut array.asked))
}

/// Tests that change the current directory take turns, and put it back.
static CWD: Mutex<()> = Mutex::new(());

struct InDir {
    was: PathBuf,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl InDir {
    fn new(dir: &Path) -> Self {
        let turn = CWD.lock().unwrap_or_else(|p| p.into_inner());
        let was = std::env::current_dir().unwrap();
        std::env::set_current_dir(dir).unwrap();
        InDir { was, _turn: turn }
    }
}

impl Drop for InDir {
    fn drop(&mut self) {
        std::env::set_current_dir(&self.was).unwrap();
    }
}

#[test]
fn empty_entries_are_skipped_and_missing_ones_expand_lexically() {
    let t = TempTree::new("lp-empty");
    t.dir("a").dir("b");
    let _cwd = InDir::new(&t.root); // an empty entry counts as relative, as in Ruby
    let mut array = Array::new(vec![s(""), s(t.path("a")), obj(""), s(t.path("nope/../b")), s(t.path("x/./y"))]);
    let mut lp = ExpandedLoadPath::default();
    let all = vec![t.path("a"), t.path("b"), t.path("x/y")];
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(all.clone()), vec![0, 1, 2, 3, 4]));
    assert_eq!(lp.entries(), all);
    assert!(!lp.is_mirrored(), "the object is asked again, the cwd checked");
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![2]));
    array.set(2, s(""));
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![0, 1, 2, 3, 4]), "the same entries");
    array.set(0, s(t.path("a")));
    array.set(2, s(t.path("a")));
    assert_eq!(poll(&mut lp, &mut array).0, Got::Changed([&all[..1], &all[..1], &all].concat()));
    assert!(lp.is_mirrored(), "all Strings, none relative");
}

#[test]
fn a_nul_byte_or_a_leading_tilde_makes_the_path_opaque() {
    let t = TempTree::new("lp-opaque");
    t.dir("a");
    let a = t.path("a");
    let nul = [a.as_os_str().as_bytes(), b"\0x"].concat();
    for odd in [Item::Str(nul.clone()), Item::Obj(Ok(nul)), s("~/lib"), s("~"), obj("~nobody/lib")] {
        let mut array = Array::new(vec![s(&a), odd]);
        let mut lp = ExpandedLoadPath::default();
        assert_eq!(poll(&mut lp, &mut array).0, Got::Opaque);
        assert!(!lp.is_mirrored());
        assert_eq!(poll(&mut lp, &mut array).0, Got::Opaque, "as long as it is there");
        array.set(1, s(&a));
        assert_eq!(poll(&mut lp, &mut array), (Got::Changed(vec![a.clone(), a.clone()]), vec![0, 1]));
        assert!(lp.is_mirrored());
    }
}

#[test]
fn relative_entries_are_expanded_again_only_when_the_cwd_moved() {
    let t = TempTree::new("lp-relative");
    t.dir("one/lib").dir("two/lib").dir("abs");
    let _cwd = InDir::new(&t.path("one"));
    let mut array = Array::new(vec![s("lib"), s(t.path("abs")), s("./lib/../lib")]);
    let mut lp = ExpandedLoadPath::default();
    let in_one = vec![t.path("one/lib"), t.path("abs"), t.path("one/lib")];
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(in_one.clone()), vec![0, 1, 2]));
    assert!(!lp.is_mirrored(), "the cwd is checked before every search");
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![]), "same cwd: nothing asked");
    std::env::set_current_dir(t.path("two")).unwrap();
    let in_two = vec![t.path("two/lib"), t.path("abs"), t.path("two/lib")];
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(in_two), vec![0, 2]), "the relative ones only");
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![]));
    std::env::set_current_dir(t.path("one")).unwrap();
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(in_one), vec![0, 2]));

    // A `~` entry is asked again before every search, the relative ones when the cwd moved.
    array.set(1, s("~/lib"));
    assert_eq!(poll(&mut lp, &mut array), (Got::Opaque, vec![0, 1, 2]));
    assert_eq!(poll(&mut lp, &mut array), (Got::Opaque, vec![1]));
    std::env::set_current_dir(t.path("two")).unwrap();
    assert_eq!(poll(&mut lp, &mut array), (Got::Opaque, vec![0, 1, 2]));
}

#[test]
fn objects_are_asked_again_before_every_poll() {
    let t = TempTree::new("lp-objects");
    t.dir("a").dir("b").dir("c");
    let mut array = Array::new(vec![s(t.path("a")), obj(t.path("b"))]);
    let mut lp = ExpandedLoadPath::default();
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(vec![t.path("a"), t.path("b")]), vec![0, 1]));
    assert!(!lp.is_mirrored());
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![1]));
    array.answer(1, Ok(&t.path("c")));
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(vec![t.path("a"), t.path("c")]), vec![1]));
    // An object's relative path is against the cwd, asked again anyway.
    array.answer(1, Ok(Path::new("")));
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(vec![t.path("a")]), vec![1]));
}

#[test]
fn an_absolute_string_keeps_its_realpath_until_the_load_path_changes() {
    let t = TempTree::new("lp-switch");
    t.dir("releases/A/lib").dir("releases/B/lib").dir("other").link("current", "releases/A");
    let mut array = Array::new(vec![s(t.path("current/lib")), obj(t.path("current/lib"))]);
    let mut lp = ExpandedLoadPath::default();
    let (a, b) = (t.path("releases/A/lib"), t.path("releases/B/lib"));
    assert_eq!(poll(&mut lp, &mut array).0, Got::Changed(vec![a.clone(), a.clone()]));
    // A deploy switches `current` mid-process.
    t.link("next", "releases/B");
    std::fs::rename(t.path("next"), t.path("current")).unwrap();
    let got = poll(&mut lp, &mut array);
    assert_eq!(got, (Got::Changed(vec![a.clone(), b.clone()]), vec![1]), "only the object follows it");
    array.truncate(1);
    assert_eq!(poll(&mut lp, &mut array).0, Got::Changed(vec![b.clone()]), "the next change does");
    assert!(lp.is_mirrored());
    array.set(1, s(t.path("other")));
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(vec![b, t.path("other")]), vec![0, 1]));
}

#[test]
fn a_raising_to_path_leaves_every_entry_to_expand_again() {
    let t = TempTree::new("lp-raise");
    t.dir("a").dir("b").dir("c");
    let mut array = Array::new(vec![s(t.path("a")), Item::Obj(Err("boom".into())), s(t.path("b"))]);
    let mut lp = ExpandedLoadPath::default();
    assert_eq!(poll(&mut lp, &mut array), (Got::Raised("boom".into()), vec![0, 1]));
    assert!(!lp.is_mirrored());
    array.answer(1, Ok(&t.path("c")));
    let all = vec![t.path("a"), t.path("c"), t.path("b")];
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(all.clone()), vec![0, 1, 2]));
    // Raising while the array is unchanged: everything is expanded again too.
    array.answer(1, Err("again"));
    assert_eq!(poll(&mut lp, &mut array), (Got::Raised("again".into()), vec![1]));
    array.answer(1, Ok(&t.path("c")));
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![0, 1, 2]), "the same entries");
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![1]));
}

#[test]
fn a_to_path_that_changes_the_load_path_makes_the_next_poll_expand_all() {
    let t = TempTree::new("lp-reentrant");
    t.dir("a").dir("b").dir("c").dir("d");
    let mut array = Array::new(vec![s(t.path("a")), obj(t.path("b"))]);
    array.on_ask = Some((1, s(t.path("c"))));
    let mut lp = ExpandedLoadPath::default();
    let abc = vec![t.path("a"), t.path("b"), t.path("c")];
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(abc), vec![0, 1, 2]), "its push is expanded too");
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![1]));
    array.on_ask = Some((1, s(t.path("d"))));
    assert_eq!(poll(&mut lp, &mut array), (Got::Same, vec![1]));
    let abcd = vec![t.path("a"), t.path("b"), t.path("c"), t.path("d")];
    assert_eq!(poll(&mut lp, &mut array), (Got::Changed(abcd), vec![0, 1, 2, 3]));
}
