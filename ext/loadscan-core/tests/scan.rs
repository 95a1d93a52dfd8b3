//! The parallel d_type walker against the serial stat-per-entry walker, on real trees.

mod common;

use common::{random_tree, TempTree};
use loadscan_core::internals::{scan_roots, scan_serial, FileEntry, Listing, RootState};
use loadscan_core::{Kind, ProblemKind, ScanOptions};
use std::path::PathBuf;

fn opts(threads: usize) -> ScanOptions {
    ScanOptions { threads, eager_depth: ScanOptions::EAGER, ..ScanOptions::default() }
}

fn files(l: &Listing) -> Vec<(String, Kind)> {
    l.files.iter().map(|FileEntry { stem, kind }| (String::from_utf8_lossy(stem).into_owned(), *kind)).collect()
}

fn blind(l: &Listing) -> Vec<String> {
    l.blind.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect()
}

/// Scans `roots` serially and with 1, 2 and 4 threads; all must agree. Returns the listings.
fn scan_all_ways(roots: &[PathBuf]) -> Vec<Listing> {
    let serial: Vec<Listing> = roots.iter().map(|r| scan_serial(r, &opts(1)).0).collect();
    for threads in [1, 2, 4] {
        let (fast, _) = scan_roots(roots, &opts(threads));
        assert_eq!(fast.len(), serial.len());
        for (f, o) in fast.iter().zip(&serial) {
            assert_eq!(f.root, o.root);
            assert_eq!(f.state, o.state, "state of {:?}", o.root);
            assert_eq!(files(f), files(o), "files of {:?} with {threads} threads", o.root);
            assert_eq!(blind(f), blind(o), "blind spots of {:?} with {threads} threads", o.root);
            assert_eq!(f.dirs, o.dirs, "dirs of {:?} with {threads} threads", o.root);
        }
    }
    serial
}

#[test]
fn lists_loadable_files_with_their_kind() {
    let t = TempTree::new("kinds");
    t.file("a.rb").file("a.so").file("b/c.rb").file("b/d.txt").file("e.o").file("f.bundle").file(".rb").file("g.rb.so");
    t.dir("x.rb/inner");
    t.file("x.rb/inner/y.rb");
    let l = &scan_all_ways(std::slice::from_ref(&t.root))[0];
    assert_eq!(
        files(l),
        vec![
            ("".into(), Kind::Rb),
            ("a".into(), Kind::Rb),
            ("a".into(), Kind::Ext),
            ("b/c".into(), Kind::Rb),
            ("g.rb".into(), Kind::Ext),
            ("x.rb/inner/y".into(), Kind::Rb),
        ]
    );
    assert_eq!(l.state, RootState::Dir);
    assert!(l.blind.is_empty());
}

#[test]
fn symlinks_are_followed_and_loops_become_blind_spots() {
    let t = TempTree::new("links");
    t.file("real/x.rb").file("real/sub/y.rb");
    t.link("real/to_x.rb", "x.rb");
    t.link("real/up", "..");
    t.link("real/self", ".");
    t.link("real/dangling.rb", "nowhere.rb");
    t.link("real/sub_again", "sub");
    t.file("outside/o.rb");
    t.link("real/out", "../outside");
    let root = t.path("real");
    let l = &scan_all_ways(std::slice::from_ref(&root))[0];
    let f = files(l);
    assert!(f.contains(&("to_x".into(), Kind::Rb)));
    assert!(
        f.contains(&("sub_again/y".into(), Kind::Rb)),
        "a link to a dir listed elsewhere is listed under its own name"
    );
    assert!(f.contains(&("out/o".into(), Kind::Rb)), "a link out of the root is followed");
    assert!(f.contains(&("up/outside/o".into(), Kind::Rb)), "a link to the root's parent is followed");
    assert!(!f.iter().any(|(s, _)| s.starts_with("dangling")));
    // `up/real` is `real` again: the loop is cut there, not at `up`.
    assert_eq!(blind(l), vec!["self".to_string(), "up/real".to_string()]);
    let (_, problems) = scan_roots(&[root], &opts(2));
    assert!(problems.iter().any(|p| p.kind == ProblemKind::Loop));
    assert!(problems.iter().any(|p| p.kind == ProblemKind::Dangling));
}

#[test]
fn dot_dirs_and_node_modules_are_skipped_as_blind_spots_but_dot_files_are_listed() {
    let t = TempTree::new("skip");
    t.file("lib/.hidden.rb").file("lib/.git/x.rb").file("lib/node_modules/y.rb").file("lib/ok/z.rb");
    let l = &scan_all_ways(&[t.path("lib")])[0];
    assert_eq!(files(l), vec![(".hidden".into(), Kind::Rb), ("ok/z".into(), Kind::Rb)]);
    assert_eq!(blind(l), vec![".git".to_string(), "node_modules".to_string()]);
}

#[test]
fn missing_roots_files_and_fifos() {
    let t = TempTree::new("roots");
    t.file("plain.rb");
    t.fifo("d/pipe.rb");
    let ls = scan_all_ways(&[t.path("nope"), t.path("plain.rb"), t.path("d")]);
    assert_eq!(ls[0].state, RootState::Missing);
    assert_eq!(ls[1].state, RootState::NotDir);
    assert_eq!(files(&ls[2]), vec![("pipe".into(), Kind::Rb)], "Ruby's rb_file_load_ok accepts a fifo");
}

#[test]
fn unreadable_dirs_are_blind_spots() {
    if common::is_root() {
        eprintln!("skipped: permissions do not apply to root (covered by the Ruby suite as nobody)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = TempTree::new("perm");
    t.file("lib/locked/x.rb").file("lib/open.rb");
    std::fs::set_permissions(t.path("lib/locked"), std::fs::Permissions::from_mode(0o111)).unwrap();
    let l = &scan_all_ways(&[t.path("lib")])[0];
    std::fs::set_permissions(t.path("lib/locked"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(blind(l), vec!["locked".to_string()]);
}

#[test]
fn caps_make_the_root_blind_instead_of_running_away() {
    let t = TempTree::new("caps");
    let mut deep = String::from("lib");
    for i in 0..6 {
        deep.push_str(&format!("/d{i}"));
    }
    t.file(&format!("{deep}/x.rb"));
    let shallow = ScanOptions { max_depth: 3, threads: 2, ..opts(2) };
    let l = &scan_roots(&[t.path("lib")], &shallow).0[0];
    assert_eq!(blind(l), vec!["d0/d1/d2/d3".to_string()]);
    let tiny = ScanOptions { max_files: 0, ..opts(2) };
    let l = &scan_roots(&[t.path("lib")], &tiny).0[0];
    assert_eq!(blind(l), vec!["".to_string()]);
    assert!(l.files.is_empty());
}

#[test]
fn random_trees_agree_with_the_serial_walker() {
    let names = ["a", "b", "c", "café", "日本", "with space", "x-y", ".dot", "node_modules", "z.rb"];
    let exts = [".rb", ".so", ".o", ".txt", ""];
    for seed in 0..25 {
        let t = TempTree::new("random");
        let (roots, _) = random_tree(&t, seed, &names, &exts, 120, (3, 10));
        scan_all_ways(&roots);
    }
}

/// Runs `f` on another thread and fails (rather than hanging the suite) if it does not return.
fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()).ok());
    rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| panic!("{what} hung"))
}

#[test]
fn a_panicking_listing_blinds_one_directory_and_never_hangs() {
    let t = TempTree::new("panic");
    t.file("r/top.rb").file("r/boom/hidden.rb").file("r/boom/deeper/x.rb").file("r/fine/y.rb");
    t.file("s/z.rb");
    let roots = vec![t.path("r"), t.path("s")];
    let hook: std::sync::Arc<dyn Fn(&std::path::Path) + Send + Sync> =
        std::sync::Arc::new(|p: &std::path::Path| assert!(!p.ends_with("boom"), "injected fault"));
    for threads in [1, 2, 4] {
        let opts =
            ScanOptions { threads, before_list: loadscan_core::internals::ListHook(Some(hook.clone())), ..opts(1) };
        let roots = roots.clone();
        let (listings, problems) = within_a_minute("a scan with a panicking worker", move || scan_roots(&roots, &opts));
        assert_eq!(files(&listings[0]), vec![("fine/y".into(), Kind::Rb), ("top".into(), Kind::Rb)], "{threads}");
        assert_eq!(blind(&listings[0]), vec!["boom"], "{threads}");
        assert!(problems.iter().any(|p| p.kind == ProblemKind::Failed && p.path.ends_with("boom")));
        assert_eq!(files(&listings[1]), vec![("z".into(), Kind::Rb)]);
    }
}
