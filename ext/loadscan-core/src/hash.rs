//! A stable 64-bit hash of bytes: the same value on every machine and in every process, so it
//! can live in the cache file (listing digests, the feature table). Not cryptographic.

const K: u64 = 0x517c_c1b7_2722_0a95;

#[inline]
fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(K)
}

/// Hashes `bytes` (length included, so `"a"` and `"a\0"` differ).
pub fn unseeded_hash(bytes: &[u8]) -> u64 {
    let mut h = mix(0, bytes.len() as u64);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = mix(h, u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(buf));
    }
    // murmur3's finalizer spreads the bits for table indexing.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::unseeded_hash;

    #[test]
    fn is_length_aware() {
        assert_ne!(unseeded_hash(b"a"), unseeded_hash(b"a\0"));
        assert_ne!(unseeded_hash(b""), unseeded_hash(b"\0"));
        // The literal values are pinned in tests/format_golden.rs, with the format.
    }
}
