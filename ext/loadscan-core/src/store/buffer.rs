//! The memory a cache file is read into.
//!
//! A multi-megabyte `Vec` is fresh memory that the kernel faults in page by page while `read`
//! fills it: about half of a cold load of a 50k-feature cache. On Linux, files of 256 KiB or
//! more are read into an anonymous mapping created with `MAP_POPULATE`, which allocates all its
//! pages in one call (measured: 0.63 ms instead of 0.8–1.4 ms to load a 1.8 MB cache in a fresh
//! process; transparent huge pages were erratic, 0.5–2.5 ms, and are not used). It is private
//! anonymous memory, not a mapping of the file itself, so another process truncating the file
//! cannot make a later access fault (SIGBUS).

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;

/// Bytes of a cache file.
pub enum Bytes {
    /// Small files, tests.
    Heap(Vec<u8>),
    /// A prefaulted anonymous mapping (Linux, large files).
    #[cfg(target_os = "linux")]
    Mapped(Mapping),
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes::Heap(v)
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Heap(v) => v,
            #[cfg(target_os = "linux")]
            Bytes::Mapped(m) => m.as_slice(),
        }
    }
}

/// Files from this size on are read into a prefaulted mapping (Linux).
#[cfg(target_os = "linux")]
const MAPPED_FROM: usize = 256 << 10;

/// Reads exactly `len` bytes of `file` (its size from `fstat`).
pub fn read_all(file: &mut File, len: usize) -> io::Result<Bytes> {
    #[cfg(target_os = "linux")]
    if len >= MAPPED_FROM {
        if let Ok(mut m) = Mapping::new(len) {
            file.read_exact(m.as_mut_slice())?;
            let mut probe = [0u8; 1];
            if file.read(&mut probe)? != 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the file grew while being read"));
            }
            return Ok(Bytes::Mapped(m));
        }
    }
    let mut v = Vec::with_capacity(len);
    // Never more than was sized for: one byte more says the file grew.
    file.take(len as u64 + 1).read_to_end(&mut v)?;
    if v.len() > len {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "the file grew while being read"));
    }
    Ok(Bytes::Heap(v))
}

/// A private anonymous mapping, unmapped on drop.
#[cfg(target_os = "linux")]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value (like a Box<[u8]>).
#[cfg(target_os = "linux")]
unsafe impl Send for Mapping {}
#[cfg(target_os = "linux")]
unsafe impl Sync for Mapping {}

#[cfg(target_os = "linux")]
impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        use rustix::mm::{mmap_anonymous, MapFlags, ProtFlags};
        // The kernel maps whole pages (the last one zero-filled past `len`) and unmaps them all.
        // SAFETY: a fresh private anonymous mapping, not aliased by anything else.
        let flags = MapFlags::PRIVATE | MapFlags::POPULATE;
        let ptr = unsafe { mmap_anonymous(std::ptr::null_mut(), len, ProtFlags::READ | ProtFlags::WRITE, flags)? };
        Ok(Mapping { ptr: ptr.cast(), len })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes for the life of `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

#[cfg(target_os = "linux")]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `new`, once.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}
