//! What the GC deferral's tick reads of the process, from /proc and the C library: its anonymous
//! resident size, the descriptors it has open and their soft limit. Each is a number where
//! unreadable (0, or no limit), so a tick never fails on them.

/// The process's anonymous resident size in bytes (heap pages, malloc, fiber stacks): from
/// /proc/self/statm, its resident pages less the shared ones (RssFile + RssShmem), which is
/// /proc/self/status's RssAnon, read from one short line instead of forty; 0 where unreadable.
/// Pages of mapped files (shared libraries, the compile cache's store) are not counted: no GC
/// frees them, and the kernel can drop them.
pub(super) fn rss() -> i64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else { return 0 };
    let mut pages = statm.split_ascii_whitespace().skip(1).map(|v| v.parse::<i64>().ok());
    let (Some(Some(resident)), Some(Some(shared))) = (pages.next(), pages.next()) else { return 0 };
    (resident - shared).max(0) * page_size()
}

fn page_size() -> i64 {
    extern "C" {
        // A C long: 64 bits on the Linux targets the gem is built for (x86_64, aarch64).
        fn sysconf(name: std::ffi::c_int) -> i64;
    }
    const SC_PAGESIZE: std::ffi::c_int = 30;
    match unsafe { sysconf(SC_PAGESIZE) } {
        n if n > 0 => n,
        _ => 4096,
    }
}

/// Descriptors this process has open (/proc/self/fd's entries, less the one reading it), 0 where
/// unreadable.
pub(super) fn open_fds() -> i64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count() as i64 - 1)
}

/// The soft limit of open descriptors (RLIMIT_NOFILE), `i64::MAX` where unlimited or unknown.
pub(super) fn fd_limit() -> i64 {
    #[repr(C)]
    struct Rlimit {
        cur: u64,
        max: u64,
    }
    extern "C" {
        fn getrlimit(resource: std::ffi::c_int, rlim: *mut Rlimit) -> std::ffi::c_int;
    }
    const RLIMIT_NOFILE: std::ffi::c_int = 7;
    let mut r = Rlimit { cur: u64::MAX, max: u64::MAX };
    if unsafe { getrlimit(RLIMIT_NOFILE, &mut r) } != 0 {
        return i64::MAX;
    }
    i64::try_from(r.cur).unwrap_or(i64::MAX)
}
