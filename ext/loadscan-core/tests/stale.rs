//! What a listing cannot vouch for, in this process and on later boots: a dangling symlink whose
//! target appears, a file added deep inside a stable root, a directory that was unreadable once.
//! None of them may give a sure miss (`Index::confirm_missing`) or stay hidden on later boots.

mod common;

use common::{answer, cold, is_root, lazy_policy, policy, settled_records, warm, TempTree, ENV};
use loadscan_core::internals::{encode, scan_roots, scan_serial};
use loadscan_core::{ScanOptions, SyncPolicy};

#[test]
fn a_dangling_symlink_is_never_a_sure_miss_and_is_listed_again_next_boot() {
    for (label, p, dir) in [("eager", policy(), ""), ("lazy", lazy_policy(), "sub/")] {
        let t = TempTree::new("dangling");
        let target = t.path("config/settings.rb");
        t.file(&format!("app/{dir}other.rb")).link(&format!("app/{dir}settings.rb"), target.to_str().unwrap());
        let link = t.path(&format!("app/{dir}settings.rb"));
        let feature = format!("{dir}settings");
        let order = vec![t.path("app")];
        let (mut index, _) = cold(&order, &p, false);
        assert_eq!(answer(&mut index, &feature), "missing", "{label}");
        assert!(!index.confirm_missing(feature.as_bytes()), "{label}: a dangling link could satisfy it");
        let bytes = encode(&settled_records(&index), &[], ENV);
        // The target appears: the directory holding the link does not change.
        t.file("config/settings.rb");
        assert!(!index.confirm_missing(feature.as_bytes()), "{label}: still not sure in this process");
        let (mut index, report) = warm(&bytes, &order, &p);
        assert_eq!(report.refreshed, 1, "{label}: the directory with the link is listed again: {report:?}");
        assert_eq!(answer(&mut index, &feature), link.to_str().unwrap(), "{label}");
        // Once settled, the directory is trusted again: a miss there is sure.
        let bytes = encode(&settled_records(&index), &[], ENV);
        let (mut index, report) = warm(&bytes, &order, &p);
        assert_eq!(report.fresh, 1, "{label}: {report:?}");
        assert_eq!(answer(&mut index, &format!("{dir}nope")), "missing", "{label}");
        assert!(index.confirm_missing(format!("{dir}nope").as_bytes()), "{label}");
    }
}

#[test]
fn both_walkers_mark_a_directory_with_a_dangling_link_unsettled() {
    let t = TempTree::new("unsettled");
    t.file("lib/a.rb").file("lib/ok/b.rb").link("lib/bad/x.rb", "missing.rb").link("lib/bad/loop", "loop");
    // Not loadable as a file (Debian's `vendor_ruby/psych.jar`, rdoc's fonts): as a directory,
    // a miss through it is seen by `confirm_missing`; no reason to list `ok` again every boot.
    t.link("lib/ok/psych.jar", "missing.jar").link("lib/ok/font.ttf", "font.ttf");
    let opts = ScanOptions { threads: 2, eager_depth: ScanOptions::EAGER, ..ScanOptions::default() };
    let fast = scan_roots(&[t.path("lib")], &opts).0.remove(0);
    assert_eq!(fast.dirs, scan_serial(&t.path("lib"), &opts).0.dirs);
    let unsettled: Vec<_> = fast
        .dirs
        .iter()
        .filter(|d| d.stamp.is_unsettled())
        .map(|d| String::from_utf8_lossy(&d.rel).into_owned())
        .collect();
    assert_eq!(unsettled, vec!["bad".to_string()]);
}

#[test]
fn a_file_added_deep_in_a_stable_root_is_not_a_sure_miss() {
    let t = TempTree::new("stable-deep");
    t.file("gems/g/lib/foo/a.rb").file("gems/g/lib/g.rb");
    let lib = t.path("gems/g/lib");
    let order = vec![lib.clone()];
    let p = SyncPolicy { stable: vec![t.path("gems")], ..lazy_policy() };
    let (mut index, _) = cold(&order, &p, false);
    assert_eq!(answer(&mut index, "foo/a"), format!("{}/foo/a.rb", lib.display()));
    let bytes = encode(&settled_records(&index), &[], ENV);
    let (mut index, report) = warm(&bytes, &order, &p);
    assert_eq!(report.fresh, 1);
    // Unchanged: a miss is sure, after one `stat` of the directory where the file would be.
    assert_eq!(answer(&mut index, "foo/b"), "missing");
    assert!(index.confirm_missing(b"foo/b"));
    assert!(index.confirm_missing(b"bar/b"), "no such directory");
    // `bundle open`, a distribution update: the root's top directory does not change.
    t.file("gems/g/lib/foo/b.rb");
    let (mut index, report) = warm(&bytes, &order, &p);
    assert_eq!(report.fresh, 1, "a stable root costs one stat at boot");
    assert_eq!(answer(&mut index, "foo/b"), "missing");
    assert!(!index.confirm_missing(b"foo/b"), "the directory changed since it was listed: Ruby decides");
    assert!(index.confirm_missing(b"bar/b"));
}

/// Makes `rel` under `t` unreadable as this process sees it: mode 000 for a user, a symlink
/// loop for root (whom permissions do not stop; `open` fails with `ELOOP`).
fn make_unreadable(t: &TempTree, rel: &str) {
    use std::os::unix::fs::PermissionsExt;
    if is_root() {
        std::fs::rename(t.path(rel), t.path(&format!("{rel}.away"))).unwrap();
        t.link(rel, t.path(rel).to_str().unwrap());
    } else {
        std::fs::set_permissions(t.path(rel), std::fs::Permissions::from_mode(0o000)).unwrap();
    }
}

fn make_readable(t: &TempTree, rel: &str) {
    use std::os::unix::fs::PermissionsExt;
    if is_root() {
        std::fs::remove_file(t.path(rel)).unwrap();
        std::fs::rename(t.path(&format!("{rel}.away")), t.path(rel)).unwrap();
    } else {
        std::fs::set_permissions(t.path(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn a_root_unreadable_once_is_retried_on_the_next_boot() {
    for (label, stable) in [("volatile", vec![]), ("stable", vec!["gems"])] {
        let t = TempTree::new("unreadable-root");
        t.file("gems/lib/a.rb").file("gems/lib/sub/b.rb");
        let p = SyncPolicy { stable: stable.iter().map(|s| t.path(s)).collect(), ..lazy_policy() };
        let order = vec![t.path("gems/lib")];
        make_unreadable(&t, "gems/lib");
        let (mut index, bytes) = cold(&order, &p, false);
        assert_eq!(answer(&mut index, "a"), "unknown", "{label}: blind while unreadable");
        make_readable(&t, "gems/lib");
        let (mut index, report) = warm(&bytes, &order, &p);
        assert_eq!(report.fresh, 0, "{label}: {report:?}");
        assert_eq!(answer(&mut index, "a"), format!("{}/a.rb", t.path("gems/lib").display()), "{label}");
        assert_eq!(answer(&mut index, "sub/b"), format!("{}/sub/b.rb", t.path("gems/lib").display()), "{label}");
    }
}

#[test]
fn a_subdirectory_unreadable_once_is_retried_on_the_next_boot() {
    for (label, stable) in [("volatile", vec![]), ("stable", vec!["gems"])] {
        let t = TempTree::new("unreadable-sub");
        // `sub` cannot be asked (`ENOTDIR`: its target's parent is a file): a blind spot, in a
        // directory that does not change when the target becomes readable.
        t.file("gems/lib/a.rb").file("elsewhere/x").link("gems/lib/sub", t.path("elsewhere/x/sub").to_str().unwrap());
        let p = SyncPolicy { stable: stable.iter().map(|s| t.path(s)).collect(), ..policy() };
        let order = vec![t.path("gems/lib")];
        let (mut index, bytes) = cold(&order, &p, false);
        assert_eq!(answer(&mut index, "sub/b"), "unknown", "{label}: blind while unreadable");
        std::fs::remove_file(t.path("elsewhere/x")).unwrap();
        t.file("elsewhere/x/sub/b.rb");
        let (mut index, _) = warm(&bytes, &order, &p);
        assert_eq!(answer(&mut index, "sub/b"), format!("{}/sub/b.rb", t.path("gems/lib").display()), "{label}");
    }
}
