//! Ruby's precedence over real scanned trees: extension by extension, then entry by entry.

mod common;

use common::{answer, policy, TempTree};
use loadscan_core::internals::scan_roots;
use loadscan_core::internals::Index;
use loadscan_core::ScanOptions;
use std::path::PathBuf;

fn index_for(order: &[PathBuf]) -> Index {
    let mut index = Index::new(policy());
    index.sync(order);
    index
}

#[test]
fn rb_in_a_later_entry_beats_so_in_an_earlier_one() {
    let t = TempTree::new("prec");
    t.file("e1/foo.so").file("e2/foo.rb").file("e1/bar.so").file("e2/bar.so").file("e1/baz.rb").file("e2/baz.rb");
    let (e1, e2) = (t.path("e1"), t.path("e2"));
    let mut index = index_for(&[e1.clone(), e2.clone()]);
    let p = |root: &PathBuf, f: &str| format!("{}/{f}", root.display());
    assert_eq!(answer(&mut index, "foo"), p(&e2, "foo.rb"));
    assert_eq!(answer(&mut index, "foo.so"), p(&e1, "foo.so"));
    assert_eq!(answer(&mut index, "foo.o"), p(&e1, "foo.so"));
    assert_eq!(answer(&mut index, "foo.rb"), p(&e2, "foo.rb"));
    assert_eq!(answer(&mut index, "bar"), p(&e1, "bar.so"));
    assert_eq!(answer(&mut index, "baz"), p(&e1, "baz.rb"));
    assert_eq!(answer(&mut index, "bar.rb"), "missing");
    assert_eq!(answer(&mut index, "./foo"), "unknown");
}

#[test]
fn reordering_changes_answers_without_rescanning() {
    let t = TempTree::new("order");
    t.file("e1/x.rb").file("e2/x.rb");
    let (e1, e2) = (t.path("e1"), t.path("e2"));
    let mut index = index_for(&[e1.clone(), e2.clone()]);
    assert_eq!(answer(&mut index, "x"), format!("{}/x.rb", e1.display()));
    let order = vec![e2.clone(), e1.clone(), e2.clone()];
    let report = index.sync(&order);
    assert_eq!((report.scanned, report.refreshed), (0, 0), "nothing rescanned");
    assert_eq!(answer(&mut index, "x"), format!("{}/x.rb", e2.display()));
    index.set_order(std::slice::from_ref(&e1));
    assert_eq!(answer(&mut index, "x"), format!("{}/x.rb", e1.display()));
    index.set_order(&[]);
    assert_eq!(answer(&mut index, "x"), "missing");
}

#[test]
fn blind_spots_in_earlier_entries_make_the_answer_unknown() {
    let t = TempTree::new("blind");
    t.file("e1/.hidden/x.rb").file("e2/.hidden/x.rb").file("e2/y.so").file("e3/loop/z.rb");
    t.link("e3/loop/again", "..");
    let (e1, e2, e3) = (t.path("e1"), t.path("e2"), t.path("e3"));
    let mut index = index_for(&[e1.clone(), e2.clone(), e3.clone()]);
    assert_eq!(answer(&mut index, ".hidden/x"), "unknown");
    assert_eq!(answer(&mut index, "loop/again/x"), "unknown");
    assert_eq!(answer(&mut index, "loop/z"), format!("{}/loop/z.rb", e3.display()));
    assert_eq!(answer(&mut index, "y"), format!("{}/y.so", e2.display()));
    // A blind spot only matters when it comes before the answer.
    let mut index = index_for(&[e2.clone(), e1.clone()]);
    assert_eq!(answer(&mut index, "y"), format!("{}/y.so", e2.display()));
}

#[test]
fn non_canonical_spellings_resolve_to_the_canonical_path() {
    let t = TempTree::new("canon");
    t.file("e/a/b.rb").file("e/foo/.rb");
    let e = t.path("e");
    let mut index = index_for(std::slice::from_ref(&e));
    let want = format!("{}/a/b.rb", e.display());
    for f in ["a/b", "a//b", "a/./b", "a/../a/b", "a/b.rb", "x/../a/b"] {
        assert_eq!(answer(&mut index, f), want, "{f}");
    }
    assert_eq!(answer(&mut index, "foo/"), format!("{}/foo/.rb", e.display()));
}

#[test]
fn rescanning_a_root_replaces_its_listing() {
    let t = TempTree::new("rescan");
    t.file("e/old.rb");
    let e = t.path("e");
    let mut index = index_for(std::slice::from_ref(&e));
    std::fs::remove_file(t.path("e/old.rb")).unwrap();
    t.file("e/new.rb");
    for l in
        scan_roots(std::slice::from_ref(&e), &ScanOptions { eager_depth: ScanOptions::EAGER, ..ScanOptions::default() })
            .0
    {
        index.add(l);
    }
    index.set_order(std::slice::from_ref(&e));
    assert_eq!(answer(&mut index, "old"), "missing");
    assert_eq!(answer(&mut index, "new"), format!("{}/new.rb", e.display()));
}
