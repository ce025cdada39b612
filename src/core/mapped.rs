//! A file mapped read-only into memory, for the decoder to read in place,
//! with no copy of its bytes out of the page cache (which a `read` makes of
//! every byte). The pages the reader is done with are released as it goes
//! ([`Mapped::release`]), so that the mapping adds about a mebibyte
//! to the process's resident memory, however large the file.
//!
//! Linux only. The loader maps regular files only; a pipe, a terminal, a
//! file that cannot be mapped or another system is read as a stream
//! instead. A file truncated by another process while it is mapped would
//! fault on the lost pages, as in every program that maps its input: input
//! files are snapshots already written.

use std::cell::Cell;

/// A whole regular file, mapped read-only and private.
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
    /// Bytes before this offset are released already.
    released: Cell<usize>,
}

const PAGE: usize = 4 << 10;

/// Released pages are this far behind the offset the reader names, and
/// released this many at once.
const KEEP: usize = 256 << 10;

impl Mapped {
    /// Maps `len` bytes (at least one) of the open regular file `fd`, which
    /// the caller has checked is one; `None` where the system will not.
    pub fn of(fd: std::os::fd::BorrowedFd<'_>, len: u64) -> Option<Mapped> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a new private read-only mapping of a file descriptor
        // that stays open for the call; the kernel checks the rest.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: a hint on the mapping just made.
        unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
        Some(Mapped {
            ptr,
            len,
            released: Cell::new(0),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` readable bytes at `ptr` for as long as `self`
        // lives; released pages read back from the file, unchanged.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    /// Starts a new read from the first byte: [`Mapped::release`] then
    /// hands back the pages that read brings in again.
    pub fn restart(&self) {
        self.released.set(0);
    }

    /// Hands the pages wholly before `offset` (less 256 KiB) back to the
    /// system. They stay readable: a read after this finds the file's bytes
    /// again, from the page cache or the disk.
    pub fn release(&self, offset: u64) {
        let upto = (offset as usize).min(self.len).saturating_sub(KEEP) / PAGE * PAGE;
        let from = self.released.get();
        if upto < from + KEEP {
            return;
        }
        // SAFETY: whole pages inside the mapping; MADV_DONTNEED on a
        // private read-only file mapping only drops this process's
        // copies of pages that the file still holds.
        unsafe {
            libc::madvise(
                (self.ptr as *mut u8).add(from) as *mut libc::c_void,
                upto - from,
                libc::MADV_DONTNEED,
            )
        };
        self.released.set(upto);
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
