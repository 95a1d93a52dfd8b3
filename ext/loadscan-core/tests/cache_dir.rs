//! The cache file on disk: owner and mode, the cache directory (planted symlinks, shared and
//! foreign directories), and atomic writes that replace only loadscan's own files.

mod common;

use common::{cold, euid, is_root, load, policy, write_atomic, TempTree, ENV};
use loadscan_core::internals::{
    CacheDir, DirError, DirErrorKind, LoadError, LoadErrorKind, LAST_BOOT_FILE, MAX_LAST_BOOT_LEN,
};
use loadscan_core::CacheFile;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// What was wrong with the cache file, if anything was.
fn failure<T>(r: Result<T, LoadError>) -> Option<LoadErrorKind> {
    r.err().map(LoadError::into_kind)
}

#[test]
fn files_are_trusted_only_when_owned_by_us_or_root_and_not_shared() {
    let t = TempTree::new("trust");
    t.file("e/a.rb");
    let (_, bytes) = cold(&[t.path("e")], &policy(), false);
    let dir = t.path("cache");
    let path = write_atomic(&dir, "loadscan.cache", &bytes).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    let uid = meta.uid();
    assert!(load(&path, ENV, uid).is_ok());
    assert_eq!(meta.mode() & 0o022, 0, "never writable by others");
    // Readable as the umask allows (a cache built as root serves other users): as a file made
    // with mode 0644 here.
    let probe = t.path("probe");
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&probe).unwrap();
    assert_eq!(meta.mode() & 0o777, std::fs::metadata(&probe).unwrap().mode() & 0o777);
    // Another user trusts a file only when root owns it (root can change anything anyway).
    let other = load(&path, ENV, uid + 1);
    if uid == 0 {
        assert!(other.is_ok());
    } else {
        assert!(matches!(failure(other), Some(LoadErrorKind::Untrusted(_))));
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(matches!(failure(load(&path, ENV, uid)), Some(LoadErrorKind::Untrusted(_))));
    assert!(matches!(failure(load(&path, b"other-env", uid)), Some(LoadErrorKind::Untrusted(_))));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(matches!(failure(load(&path, b"other-env", uid)), Some(LoadErrorKind::Stale(_))));
    // The error names the file, in one line, as a warning shows it.
    let Err(stale) = load(&path, b"other-env", uid) else { panic!("loaded") };
    assert_eq!(stale.path(), path);
    assert_eq!(
        stale.to_string(),
        format!("outdated cache (written by another Ruby or loadscan version): {}", path.display())
    );
    assert!(matches!(failure(load(&dir.join("none"), ENV, uid)), Some(LoadErrorKind::Missing)));
    assert!(matches!(failure(load(&dir, ENV, uid)), Some(LoadErrorKind::NotAFile("directory"))));
    std::os::unix::fs::symlink(&path, dir.join("link")).unwrap();
    assert!(matches!(failure(load(&dir.join("link"), ENV, uid)), Some(LoadErrorKind::NotAFile("symlink"))));
    t.fifo("cache/fifo");
    assert!(matches!(failure(load(&t.path("cache/fifo"), ENV, uid)), Some(LoadErrorKind::NotAFile("fifo"))));
}

// ---- The cache directory: planted symlinks, shared and foreign directories ----

/// The refusal's message, the path and what is wrong with it.
fn refused(r: Result<Option<CacheDir>, DirError>) -> String {
    match r {
        Err(e) if matches!(e.kind(), DirErrorKind::Refused { .. }) => e.kind().to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_cache_dir_is_used_only_when_no_one_else_can_change_it() {
    let t = TempTree::new("cachedir");
    let uid = euid();
    t.dir("ok/cache").file("victim/index").file("victim/loadscan.cache");
    chmod(&t.path("ok"), 0o755);
    chmod(&t.path("ok/cache"), 0o755);
    std::fs::write(t.path("victim/loadscan.cache"), b"precious").unwrap();
    assert!(CacheDir::open(&t.path("ok/cache"), uid).unwrap().is_some());
    assert!(CacheDir::open(&t.path("ok/none"), uid).unwrap().is_none(), "not there yet");
    assert!(CacheDir::open(&t.path("ok/none/deeper"), uid).unwrap().is_none());

    // The attack: the cache dir's last component is a symlink to the victim's dir.
    t.link("ok/planted", t.path("victim").to_str().unwrap());
    assert!(refused(CacheDir::open(&t.path("ok/planted"), uid)).contains("symlink"));
    let (_, bytes) = cold(&[t.path("victim")], &policy(), false);
    assert!(write_atomic(&t.path("ok/planted"), "loadscan.cache", &bytes).is_err());
    assert!(write_atomic(&t.path("ok/planted"), "index", &bytes).is_err());
    assert_eq!(std::fs::read(t.path("victim/loadscan.cache")).unwrap(), b"precious");
    assert_eq!(std::fs::read(t.path("victim/index")).unwrap(), b"");
    // A dangling one is not created through either.
    t.link("ok/dangling", t.path("nowhere").to_str().unwrap());
    refused(CacheDir::open(&t.path("ok/dangling"), uid));
    assert!(CacheDir::create(&t.path("ok/dangling"), uid).is_err());
    assert!(!t.path("nowhere").exists());
    // A symlink above the cache dir, made by this user, is followed (as `/var/run -> /run`).
    t.link("ok/up", t.path("ok").to_str().unwrap());
    assert!(CacheDir::open(&t.path("ok/up/cache"), uid).unwrap().is_some());
    t.link("ok/rel", ".");
    assert!(CacheDir::open(&t.path("ok/rel/rel/cache"), uid).unwrap().is_some());

    shared_modes_are_refused(&t, uid);

    // Not an absolute path, or no name of its own: refused.
    for p in ["", "relative/dir", "/", "/tmp/.."] {
        refused(CacheDir::open(Path::new(p), uid));
    }
    // Not a directory.
    t.file("ok/file");
    refused(CacheDir::open(&t.path("ok/file"), uid));
    refused(CacheDir::open(&t.path("ok/file/sub"), uid));
    // A symlink loop on the way: refused at the link, once past the bound.
    t.link("ok/loop", "loop");
    let why = refused(CacheDir::open(&t.path("ok/loop/cache"), uid));
    assert!(why.starts_with(&format!("{} is a symlink past the", t.path("ok/loop").display())), "{why}");

    // Owned by another user (not root): the dir, a dir above it, or a symlink on the way.
    // Only root can give files away; as another user this user's dirs are the foreign ones.
    if uid == 0 {
        let other = 65534;
        std::os::unix::fs::chown(t.path("ok/cache"), Some(other), Some(other)).unwrap();
        assert!(refused(CacheDir::open(&t.path("ok/cache"), uid)).contains("owned by uid 65534"));
        std::os::unix::fs::chown(t.path("ok/cache"), Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(t.path("ok"), Some(other), Some(other)).unwrap();
        refused(CacheDir::open(&t.path("ok/cache"), uid));
        std::os::unix::fs::chown(t.path("ok"), Some(0), Some(0)).unwrap();
        std::os::unix::fs::lchown(t.path("ok/up"), Some(other), Some(other)).unwrap();
        assert!(refused(CacheDir::open(&t.path("ok/up/cache"), uid)).contains("symlink owned by uid 65534"));
    } else {
        // Root's dirs are trusted, and so are this user's.
        assert!(CacheDir::open(Path::new("/usr"), uid).unwrap().is_some());
    }
}

/// `ok/cache` is refused while it or `ok` is group- or world-writable without the sticky bit,
/// and used again when sticky, as `/tmp` is.
fn shared_modes_are_refused(t: &TempTree, uid: u32) {
    // Group- or world-writable without the sticky bit, the dir or one above it: refused (for a
    // group with other members: `users` here, which root can give; see the private group's test).
    for (dir, mode) in [("ok/cache", 0o775), ("ok/cache", 0o777), ("ok", 0o775)] {
        if mode & 0o002 == 0 && !is_root() {
            continue;
        }
        let gid = std::fs::metadata(t.path(dir)).unwrap().gid();
        if mode & 0o002 == 0 {
            std::os::unix::fs::chown(t.path(dir), None, Some(USERS_GID)).unwrap();
        }
        chmod(&t.path(dir), mode);
        let why = refused(CacheDir::open(&t.path("ok/cache"), uid));
        let expected = if mode & 0o002 == 0 { "writable by group users" } else { "writable by others" };
        assert!(why.contains(expected), "{dir} {mode:o}: {why}");
        refused(CacheDir::open(&t.path("ok/cache/sub"), uid));
        chmod(&t.path(dir), 0o755);
        std::os::unix::fs::chown(t.path(dir), None, Some(gid)).unwrap();
    }
    // Sticky, as /tmp: fine.
    chmod(&t.path("ok/cache"), 0o1777);
    assert!(CacheDir::open(&t.path("ok/cache"), uid).unwrap().is_some());
    chmod(&t.path("ok/cache"), 0o755);
}

#[test]
fn a_cache_dir_is_created_with_safe_modes_and_only_loadscan_files_are_replaced() {
    let t = TempTree::new("create");
    let uid = euid();
    chmod(&t.root, 0o755);
    let (_, bytes) = cold(&[t.path("e")], &policy(), false);
    let dir = CacheDir::create(&t.path("a/b/cache"), uid).unwrap();
    for d in ["a", "a/b", "a/b/cache"] {
        let mode = std::fs::metadata(t.path(d)).unwrap().mode();
        assert_eq!(mode & 0o022, 0, "{d}: {mode:o}");
    }
    dir.write_atomic("loadscan.cache", &bytes).unwrap();
    assert!(dir.load("loadscan.cache", ENV).is_ok());
    dir.write_atomic("loadscan.cache", &bytes).unwrap(); // over its own: fine
                                                         // A file of the same name that is not a loadscan cache is never written over.
    std::fs::write(t.path("a/b/cache/loadscan.cache"), b"someone's notes").unwrap();
    assert!(!dir.replaceable("loadscan.cache").unwrap());
    let err = dir.write_atomic("loadscan.cache", &bytes).unwrap_err();
    assert!(err.to_string().contains("not replacing"), "{err}");
    assert_eq!(std::fs::read(t.path("a/b/cache/loadscan.cache")).unwrap(), b"someone's notes");
    std::fs::remove_file(t.path("a/b/cache/loadscan.cache")).unwrap();
    std::os::unix::fs::symlink(t.path("elsewhere"), t.path("a/b/cache/loadscan.cache")).unwrap();
    assert!(!dir.replaceable("loadscan.cache").unwrap());
    assert!(matches!(failure(dir.load("loadscan.cache", ENV)), Some(LoadErrorKind::NotAFile("symlink"))));
    assert!(dir.write_atomic("loadscan.cache", &bytes).is_err());
    assert!(!t.path("elsewhere").exists());
    // Nothing left behind by the refused writes.
    let mut names: Vec<_> = std::fs::read_dir(t.path("a/b/cache")).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, vec![std::ffi::OsString::from("loadscan.cache")]);
}

// ---- Group-writable directories: a user's private group, or a shared one ----

/// Debian's `users` group: no account has it as its primary group here, so it is never private.
const USERS_GID: u32 = 100;

/// The test accounts, made once (idempotently) with the system's own tools: `loadscan-solo` with
/// its private group (as `useradd` makes every user on Debian and Fedora), and `loadscan-mate1`,
/// `loadscan-mate2` sharing the group `loadscan-team`. `None` (the test then skips) when they
/// cannot be made: not root. Gives the solo user's uid and gid, mate1's uid and the team's gid.
fn test_accounts() -> Option<(u32, u32, u32, u32)> {
    static MADE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = MADE.lock().unwrap_or_else(|p| p.into_inner());
    let run =
        |cmd: &[&str]| std::process::Command::new(cmd[0]).args(&cmd[1..]).output().is_ok_and(|o| o.status.success());
    let id = |flag: &str, name: &str| -> Option<u32> {
        let out = std::process::Command::new("id").args([flag, name]).output().ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    if id("-u", "loadscan-mate2").is_none() {
        if !is_root() {
            eprintln!("skipped: the test accounts (loadscan-solo, loadscan-mate1/2) exist only when made as root");
            return None;
        }
        let _ = run(&["groupadd", "-f", "loadscan-team"]);
        for (user, group) in [
            ("loadscan-solo", None),
            ("loadscan-mate1", Some("loadscan-team")),
            ("loadscan-mate2", Some("loadscan-team")),
        ] {
            if id("-u", user).is_none() {
                let mut cmd = vec!["useradd", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin"];
                if let Some(g) = group {
                    cmd.extend(["--groups", g]);
                }
                cmd.push(user);
                assert!(run(&cmd), "useradd {user}");
            }
        }
    }
    Some((
        id("-u", "loadscan-solo")?,
        id("-g", "loadscan-solo")?,
        id("-u", "loadscan-mate1")?,
        gid_of("loadscan-team")?,
    ))
}

fn gid_of(group: &str) -> Option<u32> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find(|l| l.split(':').next() == Some(group))?.split(':').nth(2)?.parse().ok()
}

#[test]
fn a_group_writable_dir_is_trusted_only_when_its_group_is_the_users_private_group() {
    let Some((solo, solo_gid, mate, team_gid)) = test_accounts() else { return };
    let t = TempTree::new("usergroups");
    chmod(&t.root, 0o755);
    // An app as `rails new` makes it with umask 002: every directory mode 775, group the user's.
    t.dir("app/tmp/cache");
    for dir in ["app", "app/tmp", "app/tmp/cache"] {
        std::os::unix::fs::chown(t.path(dir), Some(solo), Some(solo_gid)).unwrap();
        chmod(&t.path(dir), 0o775);
    }
    let cache = t.path("app/tmp/cache/loadscan");
    assert!(CacheDir::open(&t.path("app/tmp/cache"), solo).unwrap().is_some());
    assert!(CacheDir::open(&cache, solo).unwrap().is_none(), "not there yet: everything above passed");
    // Not private to another user: the mate may not trust the solo user's directories (nor
    // would they, being owned by someone else).
    assert!(refused(CacheDir::open(&t.path("app/tmp/cache"), mate)).contains("owned by uid"));

    // The same app's tmp/ in a group the user shares with another: refused, naming the group.
    for dir in ["app", "app/tmp"] {
        std::os::unix::fs::chown(t.path(dir), Some(mate), Some(team_gid)).unwrap();
        let why = refused(CacheDir::open(&t.path("app/tmp/cache"), mate));
        assert!(why.contains("writable by group loadscan-team"), "{dir}: {why}");
        assert!(why.contains(&format!("{}", t.path(dir).display())), "{dir}: {why}");
        // Not group-writable: fine again.
        chmod(&t.path(dir), 0o755);
        std::os::unix::fs::chown(t.path(dir), Some(mate), Some(solo_gid)).unwrap();
    }
    // Others may write: refused whatever the group.
    chmod(&t.path("app/tmp"), 0o777);
    assert!(refused(CacheDir::open(&t.path("app/tmp/cache"), mate)).contains("writable by others"));
}

/// The last boot's record is read back with the cache's checks: each hostile file is one line
/// naming the file and why, never a read that blocks, follows a link or takes unbounded memory.
#[test]
fn the_last_boots_record_is_read_only_when_the_cache_would_be() {
    let t = TempTree::new("last-boot");
    t.dir("cache");
    let cache = CacheFile { dir: t.path("cache"), env: ENV.to_vec(), uid: euid() };
    let path = t.path("cache").join(LAST_BOOT_FILE);
    let refusal = |why: &str| Err(format!("{} is not used: {why}", path.display()));
    assert_eq!(cache.read_last_boot(), Ok(None));
    cache.record_last_boot(b"{\"hits\":1}").unwrap();
    assert_eq!(cache.read_last_boot(), Ok(Some("{\"hits\":1}".to_string())));
    // Text or nothing: bytes that are not UTF-8 (four 0xff in the middle) are refused here.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"{\"hits\"\xff\xff\xff\xff:1}").unwrap();
    chmod(&path, 0o644);
    assert_eq!(cache.read_last_boot(), refusal("not UTF-8 text (byte 7)"));
    chmod(&path, 0o666);
    assert_eq!(cache.read_last_boot(), refusal("writable by group or others (mode 666)"));
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, vec![b' '; MAX_LAST_BOOT_LEN as usize + 1]).unwrap();
    chmod(&path, 0o644);
    assert_eq!(cache.read_last_boot(), refusal(&format!("larger than {MAX_LAST_BOOT_LEN} bytes")));
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    assert_eq!(cache.read_last_boot(), refusal("it is a symlink"));
    std::fs::remove_file(&path).unwrap();
    t.fifo(&format!("cache/{LAST_BOOT_FILE}"));
    assert_eq!(cache.read_last_boot(), refusal("not a regular file (fifo)"));
    // The directory's own checks come first.
    chmod(&t.path("cache"), 0o777);
    let Err(why) = cache.read_last_boot() else { panic!("read from a directory anyone may write") };
    assert!(why.ends_with("cache is writable by others (mode 777)"), "{why}");
    assert!(why.starts_with(&format!("{} is not used: ", path.display())), "{why}");
}
