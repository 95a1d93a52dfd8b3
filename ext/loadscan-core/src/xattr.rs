//! A file's extended attributes given to another (Linux keeps a file's ACL among them, as
//! `system.posix_acl_access`): what `loadscan install` keeps of an app's file it replaces by a
//! new one, beside its mode and owner.

use std::path::Path;

/// Gives `to` exactly the extended attributes of `from` (neither a symlink): each of `from`'s
/// set on `to` with its value, and each `to` has that `from` lacks (one inherited from the
/// directory's default ACL) removed. Err: one line naming the attribute that could not be
/// kept (a file system without them, a `security.`/`trusted.` one this user cannot set).
#[cfg(unix)]
pub fn copy_xattrs(from: &Path, to: &Path) -> Result<(), String> {
    use rustix::fs::{removexattr, setxattr, XattrFlags};
    use rustix::io::Errno;

    let wanted = match names(from) {
        Ok(names) => names,
        // A file system without extended attributes: the file has none to keep.
        Err(Errno::NOTSUP) => Vec::new(),
        Err(e) => return Err(format!("could not list the extended attributes of {}: {e}", from.display())),
    };
    let present = match names(to) {
        Ok(names) => names,
        Err(Errno::NOTSUP) if wanted.is_empty() => return Ok(()),
        Err(e) => return Err(format!("could not list the extended attributes of {}: {e}", to.display())),
    };
    for name in present.iter().filter(|n| !wanted.contains(n)) {
        removexattr(to, name.as_slice())
            .map_err(|e| format!("could not remove the extended attribute {} of {}: {e}", show(name), to.display()))?;
    }
    for name in &wanted {
        let value = value(from, name)
            .map_err(|e| format!("could not read the extended attribute {} of {}: {e}", show(name), from.display()))?;
        setxattr(to, name.as_slice(), &value, XattrFlags::empty())
            .map_err(|e| format!("its extended attribute {} cannot be given to a new file: {e}", show(name)))?;
    }
    Ok(())
}

/// Not on this system: nothing to keep.
#[cfg(not(unix))]
pub fn copy_xattrs(_from: &Path, _to: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(unix)]
fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// The names of `path`'s extended attributes (a list that grows meanwhile is read again).
#[cfg(unix)]
fn names(path: &Path) -> rustix::io::Result<Vec<Vec<u8>>> {
    let list = read_sized(|| rustix::fs::listxattr_query(path), |buf| rustix::fs::listxattr(path, buf))?;
    Ok(list.split(|&b| b == 0).filter(|n| !n.is_empty()).map(<[u8]>::to_vec).collect())
}

#[cfg(unix)]
fn value(path: &Path, name: &[u8]) -> rustix::io::Result<Vec<u8>> {
    read_sized(|| rustix::fs::getxattr_query(path, name), |buf| rustix::fs::getxattr(path, name, buf))
}

/// Asks the size, then reads; again while what is read grew in between (ERANGE).
#[cfg(unix)]
fn read_sized(
    size: impl Fn() -> rustix::io::Result<usize>,
    read: impl Fn(&mut [u8]) -> rustix::io::Result<usize>,
) -> rustix::io::Result<Vec<u8>> {
    loop {
        let mut buf = vec![0u8; size()?];
        if buf.is_empty() {
            return Ok(buf);
        }
        match read(&mut buf) {
            Ok(len) => {
                buf.truncate(len);
                return Ok(buf);
            }
            Err(rustix::io::Errno::RANGE) => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rustix::fs::{getxattr_query, setxattr, XattrFlags};

    #[test]
    fn copies_every_attribute_and_removes_the_others() {
        let dir = std::env::temp_dir().join(format!("loadscan-xattr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (from, to) = (dir.join("from"), dir.join("to"));
        std::fs::write(&from, "a").unwrap();
        std::fs::write(&to, "b").unwrap();
        if setxattr(&from, "user.kept", b"v\0w", XattrFlags::empty()).is_err() {
            std::fs::remove_dir_all(&dir).unwrap();
            return; // a file system without user attributes: nothing to copy
        }
        setxattr(&to, "user.stale", b"x", XattrFlags::empty()).unwrap();
        copy_xattrs(&from, &to).unwrap();
        assert_eq!(value(&to, b"user.kept").unwrap(), b"v\0w");
        assert!(getxattr_query(&to, "user.stale").is_err());
        assert_eq!(names(&to).unwrap(), vec![b"user.kept".to_vec()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
