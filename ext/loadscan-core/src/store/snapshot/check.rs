//! What a file must pass before it is looked up in place, beside the checksum and the section
//! sizes that [`Snapshot::parse`](super::Snapshot::parse) checks: its header, and its root records.

use crate::store::error::LoadErrorKind;
use crate::store::format::{FORMAT_VERSION, MAGIC, MAX_EXPANDED};
use crate::store::layout::{header, read_pair, read_u32, read_u64, root};

/// Checks a file's header (its first `header::LEN` bytes at least) against the file's length:
/// magic, format version, body length. The CRC and the environment key need the body.
pub(crate) fn check_header(head: &[u8], file_len: u64) -> Result<(), LoadErrorKind> {
    if head.len() < header::LEN || head.get(header::MAGIC..header::MAGIC + MAGIC.len()) != Some(MAGIC) {
        return Err(LoadErrorKind::Corrupt("not a loadscan cache (bad magic or too short)"));
    }
    if read_u32(head, header::VERSION) != Some(FORMAT_VERSION) {
        return Err(LoadErrorKind::Stale("cache format version differs"));
    }
    let body_len = read_u64(head, header::BODY_LEN).unwrap_or(u64::MAX);
    if body_len.checked_add(header::LEN as u64) != Some(file_len) {
        return Err(LoadErrorKind::Corrupt("truncated or padded"));
    }
    Ok(())
}

/// Roots own consecutive, disjoint ranges of the dirs and gaps that cover them exactly (as
/// `encode` writes them), and their paths fit the budget: so revalidating every root reads each
/// directory record once, and the boot copies no more than `MAX_EXPANDED` bytes of root paths,
/// whatever a file with a valid checksum says. One pass over the root records (a few hundred).
pub(super) fn check_roots(
    b: &[u8],
    roots: usize,
    n_roots: usize,
    n_dirs: usize,
    n_gaps: usize,
    strings_len: usize,
) -> Result<(), LoadErrorKind> {
    let bad = || LoadErrorKind::Corrupt("inconsistent root records");
    let (mut next_dir, mut next_gap, mut paths) = (0usize, 0usize, 0usize);
    for i in 0..n_roots {
        let r = roots + i * root::LEN;
        let pair = |k: usize| read_pair(b, r + k).ok_or_else(bad);
        let ((path_off, path_len), (dir_start, dir_len)) = (pair(root::PATH)?, pair(root::DIRS)?);
        let (gap_start, gap_len) = pair(root::GAPS)?;
        if dir_start != next_dir || gap_start != next_gap || path_off.saturating_add(path_len) > strings_len {
            return Err(bad());
        }
        next_dir += dir_len;
        next_gap += gap_len;
        paths += path_len;
        if next_dir > n_dirs || next_gap > n_gaps || paths > MAX_EXPANDED {
            return Err(bad());
        }
    }
    if next_dir != n_dirs || next_gap != n_gaps {
        return Err(bad());
    }
    Ok(())
}
