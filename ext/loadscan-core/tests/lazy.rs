//! Lazy listing (`eager_depth: 0`): answers equal what `require` would load, directories are
//! listed only when a lookup needs them, and caches carry exactly what was listed.

mod common;

use common::{answer, lazy_policy, policy, settled_cache, TempTree, ENV};
use loadscan_core::internals::Snapshot;
use loadscan_core::internals::{Index, Located};
use loadscan_core::SyncPolicy;
use loadscan_core::{Kind, ScanOptions};
use std::path::{Path, PathBuf};

/// What `require` would load, by trying every entry as Ruby does: `.rb` in every entry first,
/// then the extension (something loadable: not a directory, reachable through symlinks).
fn brute_force(order: &[PathBuf], feature: &str) -> String {
    let loadable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_dir());
    let first = |ext: &str| {
        order.iter().map(|r| r.join(format!("{feature}{ext}"))).find(|p| loadable(p)).map(|p| p.display().to_string())
    };
    let (stem_rb, stem_so) = (first(".rb"), first(".so"));
    stem_rb.or(stem_so).unwrap_or_else(|| "missing".into())
}

/// A random tree with deep directories, shared names, loops and dangling links, and every
/// feature worth asking for: each path tried, and one name below it.
fn random_tree(t: &TempTree, seed: u64) -> (Vec<PathBuf>, Vec<String>) {
    let names = ["a", "b", "c", "core_ext", "x-y", ".dot", "node_modules", "z.rb"];
    let (order, tried) = common::random_tree(t, seed, &names, &[".rb", ".so", ".txt", ""], 150, (4, 12));
    let features =
        tried.iter().enumerate().flat_map(|(i, rel)| [rel.clone(), format!("{rel}/{}", names[i % names.len()])]);
    (order, features.collect())
}

#[test]
fn lazy_answers_are_what_require_would_load_and_never_less_than_eager_ones() {
    for seed in 0..20 {
        let t = TempTree::new("lazy-random");
        let (order, stems) = random_tree(&t, seed);
        let mut eager = Index::new(policy());
        eager.sync(&order);
        let mut lazy = Index::new(lazy_policy());
        lazy.sync(&order);
        for stem in &stems {
            for f in [stem.clone(), format!("{stem}.rb"), format!("{stem}.so")] {
                let truth = brute_force(&order, f.strip_suffix(".rb").or(f.strip_suffix(".so")).unwrap_or(&f));
                let truth = match (f.ends_with(".rb"), f.ends_with(".so")) {
                    (true, _) => brute_force_ext(&order, &f),
                    (_, true) => brute_force_ext(&order, &f),
                    _ => truth,
                };
                let (e, l) = (answer(&mut eager, &f), answer(&mut lazy, &f));
                assert!(e == truth || e == "unknown", "seed {seed}, {f}: eager {e}, require {truth}");
                assert!(l == truth || l == "unknown", "seed {seed}, {f}: lazy {l}, require {truth}");
                assert!(l != "unknown" || e == "unknown", "seed {seed}, {f}: lazy unknown, eager {e}");
            }
        }
        assert!(lazy.lazy_stats().listed > 0, "seed {seed}: lookups below the top must list directories");
    }
}

/// [`brute_force`] for a feature spelled with its extension: only that extension counts.
fn brute_force_ext(order: &[PathBuf], feature: &str) -> String {
    let loadable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_dir());
    order.iter().map(|r| r.join(feature)).find(|p| loadable(p)).map_or("missing".into(), |p| p.display().to_string())
}

#[test]
fn only_the_directories_a_lookup_goes_through_are_listed() {
    let t = TempTree::new("lazy-need");
    for g in 0..5 {
        t.file(&format!("g{g}/lib/g{g}.rb")).file(&format!("g{g}/lib/g{g}/version.rb"));
        t.file(&format!("g{g}/lib/g{g}/deep/unused/x.rb")).file(&format!("g{g}/lib/g{g}/templates/y.rb"));
    }
    t.file("g1/lib/shared/util.so").file("g4/lib/shared/util.rb");
    let order: Vec<PathBuf> = (0..5).map(|g| t.path(&format!("g{g}/lib"))).collect();
    let mut index = Index::new(lazy_policy());
    index.sync(&order);
    assert_eq!(index.lazy_stats().listed, 0, "a sync lists only the entries themselves");
    assert_eq!(answer(&mut index, "g2"), format!("{}/g2.rb", order[2].display()));
    assert_eq!(index.lazy_stats().listed, 0, "a top-level feature needs no directory below");
    assert_eq!(answer(&mut index, "g2/version"), format!("{}/g2/version.rb", order[2].display()));
    assert_eq!(index.lazy_stats().listed, 1, "only g2/ exists in an entry: one listing");
    assert_eq!(answer(&mut index, "g2/version"), format!("{}/g2/version.rb", order[2].display()));
    assert_eq!(index.lazy_stats().listed, 1, "listed once");
    // A native extension found first must be checked against every `shared/` for a `.rb`.
    assert_eq!(answer(&mut index, "shared/util"), format!("{}/shared/util.rb", order[4].display()));
    assert_eq!(answer(&mut index, "shared/util.so"), format!("{}/shared/util.so", order[1].display()));
    assert_eq!(index.lazy_stats().listed, 3);
    assert_eq!(answer(&mut index, "g3/nope"), "missing");
    assert_eq!(index.lazy_stats().listed, 4);
}

#[test]
fn a_lazy_cache_holds_what_was_listed_and_grows_when_a_later_boot_needs_more() {
    let t = TempTree::new("lazy-cache");
    t.file("app/models/user.rb").file("app/models/admin/role.rb").file("app/unused/z.rb");
    t.file("gems/g/lib/g.rb").file("gems/g/lib/g/a.rb").file("gems/g/lib/g/b/c.rb").file("gems/g/lib/g/b/d.so");
    t.file("gems/g/lib/g/b/e/f.rb");
    let order = vec![t.path("app"), t.path("gems/g/lib")];
    let p = SyncPolicy { stable: vec![t.path("gems")], ..lazy_policy() };
    let save = settled_cache;
    let warm = |bytes: &[u8]| {
        let mut index = Index::from_snapshot(p.clone(), Snapshot::parse(bytes.to_vec(), ENV).unwrap());
        let report = index.sync(&order);
        assert_eq!((report.scanned, report.refreshed), (0, 0));
        index
    };
    let first = ["models/user", "g/a", "g"];
    let mut cold = Index::new(p.clone());
    cold.sync(&order);
    let want: Vec<String> = first.iter().map(|f| answer(&mut cold, f)).collect();
    assert_eq!(want[0], format!("{}/models/user.rb", order[0].display()));
    let bytes = save(&cold);

    let mut second = warm(&bytes);
    for (f, w) in first.iter().zip(&want) {
        assert_eq!(&answer(&mut second, f), w);
    }
    assert_eq!(second.lazy_stats().listed, 0, "what the first boot listed comes from the cache");
    assert!(!second.is_dirty());
    assert_eq!(answer(&mut second, "g/b/d"), format!("{}/g/b/d.so", order[1].display()));
    // g/b was deferred in the cache; g/b/e is deferred only in this process until listed.
    assert_eq!(answer(&mut second, "g/b/e/f"), format!("{}/g/b/e/f.rb", order[1].display()));
    assert_eq!(answer(&mut second, "models/admin/role"), format!("{}/models/admin/role.rb", order[0].display()));
    let listed = second.lazy_stats().listed;
    assert!(listed >= 2, "a feature the cache did not cover is listed on demand ({listed})");
    assert!(second.is_dirty());
    let bytes = save(&second);

    let mut third = warm(&bytes);
    for f in ["models/user", "g/a", "g", "g/b/d", "models/admin/role", "g/b/c", "g/b/e/f"] {
        let mut fresh = Index::new(policy());
        fresh.sync(&order);
        assert_eq!(answer(&mut third, f), answer(&mut fresh, f), "{f}");
    }
    assert_eq!(third.lazy_stats().listed, 0, "the second boot's listings were saved too");
}

#[test]
fn changes_in_deferred_and_listed_directories_are_seen_by_the_next_boot() {
    let t = TempTree::new("lazy-change");
    t.file("app/a/x.rb").file("app/b/y.rb").file("app/c/z.rb");
    let order = vec![t.path("app")];
    let p = lazy_policy();
    let mut cold = Index::new(p.clone());
    cold.sync(&order);
    assert_eq!(answer(&mut cold, "a/x"), format!("{}/a/x.rb", order[0].display()));
    let bytes = settled_cache(&cold);
    // A file in a listed directory, one in a deferred one, a new directory at the top.
    t.file("app/a/new.rb").file("app/b/new.rb").file("app/d/new.rb");
    std::fs::remove_dir_all(t.path("app/c")).unwrap();
    let mut warm = Index::from_snapshot(p.clone(), Snapshot::parse(bytes, ENV).unwrap());
    let report = warm.sync(&order);
    assert_eq!((report.scanned, report.refreshed), (0, 1), "app/ and app/a/ changed: one refresh");
    for f in ["a/x", "a/new", "b/new", "b/y", "d/new", "c/z"] {
        assert_eq!(answer(&mut warm, f), brute_force(&order, f), "{f}");
    }
}

#[test]
fn a_loop_listed_lazily_stays_followed_after_a_change() {
    // Lazily, `require` is followed through a symlink loop as far as a feature names it (what
    // Ruby opens), silently. A later boot that revalidates the changed directories on that path
    // must do the same, not cut the loop it already went through (a blind spot and a warning).
    let t = TempTree::new("lazy-loop-change");
    t.file("app/a/x.rb").link("app/a/up", "..");
    let order = vec![t.path("app")];
    let p = lazy_policy();
    let mut cold = Index::new(p.clone());
    cold.sync(&order);
    let deep = "a/up/a/up/a/x";
    assert_eq!(answer(&mut cold, deep), brute_force(&order, deep));
    assert!(cold.take_problems().is_empty());
    let bytes = settled_cache(&cold);
    t.file("app/new.rb").file("app/a/new.rb"); // app/ and app/a/ (so app/a/up/) change
    let mut warm = Index::from_snapshot(p.clone(), Snapshot::parse(bytes, ENV).unwrap());
    let report = warm.sync(&order);
    assert_eq!(report.refreshed, 1);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for f in [deep, "a/up/a/new", "a/up/new", "new"] {
        assert_eq!(answer(&mut warm, f), brute_force(&order, f), "{f}");
    }
    assert!(warm.take_problems().is_empty());
}

#[test]
fn lazy_listings_go_through_the_given_lister_and_a_failing_one_blinds_only_its_directory() {
    let t = TempTree::new("lazy-lister");
    t.file("e/top.rb").file("e/a/b/x.rb").file("e/boom/y.rb").file("f/boom/y.rb");
    let order = vec![t.path("e"), t.path("f")];
    let mut index = Index::new(lazy_policy());
    index.sync(&order);
    let mut asked: Vec<String> = Vec::new();
    let mut lister = |root: &Path, rel: &[u8], dev: Option<u64>, opts: &ScanOptions| {
        asked.push(format!("{}:{}", root.file_name().unwrap().to_string_lossy(), String::from_utf8_lossy(rel)));
        loadscan_core::internals::list_deferred(root, rel, dev, opts)
    };
    let q = index.parse(b"a/b/x").unwrap();
    let found = index.locate_with(&q, &mut lister);
    assert!(matches!(found, Located::Found(_, Kind::Rb)), "{found:?}");
    assert_eq!(asked, ["e:a", "e:a/b"], "every listing went through the lister");
    // A listing that panics (a bug, or here an injected fault) blinds that directory only.
    let hook: std::sync::Arc<dyn Fn(&Path) + Send + Sync> =
        std::sync::Arc::new(|p: &Path| assert!(!p.ends_with("boom"), "injected fault"));
    let faulty = ScanOptions { before_list: loadscan_core::internals::ListHook(Some(hook)), ..lazy_policy().scan };
    let mut panicking = |root: &Path, rel: &[u8], dev: Option<u64>, _: &ScanOptions| {
        loadscan_core::internals::list_deferred(root, rel, dev, &faulty)
    };
    let q = index.parse(b"boom/y").unwrap();
    assert_eq!(index.locate_with(&q, &mut panicking), Located::Unknown);
    let q = index.parse(b"top").unwrap();
    assert!(matches!(index.locate_with(&q, &mut panicking), Located::Found(_, Kind::Rb)));
    assert_eq!(answer(&mut index, "a/b/x"), t.path("e/a/b/x.rb").display().to_string());
}
