//! User private groups: on Debian, Ubuntu and Fedora each user gets a group of their own and the
//! umask 002 (`USERGROUPS_ENAB yes`), so what they create (`rails new`'s `tmp/`) is group-
//! writable, yet no one else can write it. A group-writable directory is trusted when its group
//! is such a group, by OpenSSH's rule for `StrictModes` on those systems: every account whose
//! primary group it is, and every member listed for it, is the user, and there is at least one.
//! Accounts and groups are read from `/etc/passwd` and `/etc/group` only: a group or a user
//! known only through another name service (LDAP) is not proven private, so it is refused.

use std::path::Path;

/// Where accounts and groups are listed.
const PASSWD: &str = "/etc/passwd";
const GROUP: &str = "/etc/group";

/// Whether the group `gid` is private to the user `uid` (see the module docs).
pub(super) fn is_private_group(gid: u32, uid: u32) -> bool {
    let read = |path: &str| std::fs::read(Path::new(path)).ok();
    match (read(PASSWD), read(GROUP)) {
        (Some(passwd), Some(group)) => sole_member(&passwd, &group, gid, uid),
        _ => false,
    }
}

/// The group's name as `/etc/group` lists it, for a refusal's message.
pub(super) fn group_name(gid: u32) -> Option<String> {
    let group = std::fs::read(Path::new(GROUP)).ok()?;
    let name = records(&group).find(|f| number(f.get(2)) == Some(gid))?[0];
    Some(String::from_utf8_lossy(name).into_owned())
}

/// The rule on the files' contents: `uid` has an account, the group is listed, and its only
/// member, by primary group or by listing, is `uid` (under any of its account names).
fn sole_member(passwd: &[u8], group: &[u8], gid: u32, uid: u32) -> bool {
    let mut names = Vec::new();
    let mut primary = 0;
    for fields in records(passwd) {
        let (Some(account_uid), Some(account_gid)) = (number(fields.get(2)), number(fields.get(3))) else {
            continue;
        };
        if account_uid == uid {
            names.push(fields[0]);
        }
        if account_gid == gid {
            if account_uid != uid {
                return false;
            }
            primary += 1;
        }
    }
    if names.is_empty() {
        return false;
    }
    let mut listed = records(group).filter(|f| number(f.get(2)) == Some(gid));
    let (Some(entry), None) = (listed.next(), listed.next()) else { return false };
    let members: Vec<&[u8]> =
        entry.get(3).map_or(Vec::new(), |m| m.split(|&b| b == b',').filter(|n| !n.is_empty()).collect());
    if members.iter().any(|m| !names.contains(m)) {
        return false;
    }
    primary + members.len() > 0
}

/// The records of a colon-separated database, each split into its fields; comments, blank
/// lines and NIS `+`/`-` lines are left out.
fn records(text: &[u8]) -> impl Iterator<Item = Vec<&[u8]>> {
    text.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty() && !matches!(line[0], b'#' | b'+' | b'-'))
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line).split(|&b| b == b':').collect())
}

fn number(field: Option<&&[u8]>) -> Option<u32> {
    std::str::from_utf8(field?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::sole_member;

    const PASSWD: &[u8] = b"root:x:0:0:root:/root:/bin/bash\n\
        alice:x:1000:1000::/home/alice:/bin/bash\n\
        bob:x:1001:1001::/home/bob:/bin/bash\n\
        carol:x:1002:100::/home/carol:/bin/bash\n\
        dave:x:1003:100::/home/dave:/bin/bash\n\
        # a comment\n+@nis\n";
    const GROUP: &[u8] = b"root:x:0:\nusers:x:100:\nalice:x:1000:\nbob:x:1001:alice\n\
        devs:x:2000:alice,bob\nsolo:x:2001:alice\nempty:x:2002:\n";

    #[test]
    fn only_a_group_whose_one_member_is_the_user_is_private() {
        let private = |gid, uid| sole_member(PASSWD, GROUP, gid, uid);
        assert!(private(1000, 1000), "alice's own group, by primary membership");
        assert!(private(2001, 1000), "a group listing alice alone");
        assert!(!private(1000, 1001), "alice's group is not bob's");
        assert!(!private(1001, 1001), "bob's group also lists alice");
        assert!(!private(2000, 1000), "a shared group");
        assert!(!private(100, 1002), "two accounts have it as their primary group");
        assert!(!private(2002, 1000), "no member at all (a setgid program's group)");
        assert!(!private(4242, 1000), "not listed in the group file");
        assert!(!private(1000, 4242), "no account for the user");
        assert!(!private(0, 1000), "root's group");
        assert!(private(0, 0), "root's group, for root");
        let twice = [GROUP, b"alice:x:1000:\n"].concat();
        assert!(!sole_member(PASSWD, &twice, 1000, 1000), "listed twice: not proven");
    }
}
