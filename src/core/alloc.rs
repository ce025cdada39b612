//! The allocator of fragscope's binary (and of its benchmarks): the system
//! allocator for small blocks; on Linux, blocks of 4 MiB and more mapped on
//! their own, aligned to 2 MiB and marked for transparent huge pages.
//!
//! Decoding a large snapshot writes hundreds of megabytes of events, each
//! page of them new to the process. On 4 KiB pages that is one page fault
//! per 4 KiB, and on a virtual machine each fault costs microseconds: a
//! third of the decoder's time went to the kernel. Where the system's
//! transparent huge pages are in `madvise` mode (the common default), the
//! kernel backs a marked mapping with 2 MiB pages instead, 512 times fewer
//! faults. Where they are `never`, the mark is a no-op; where they are
//! `always`, it changes nothing.
//!
//! The system allocator maps large blocks too, but anywhere, and moves them
//! anywhere as they grow: the kernel then splits their huge pages and backs
//! the unaligned ends of each new mapping with small pages. Here a block
//! starts on a 2 MiB boundary and, when it cannot grow where it is, moves
//! (without a copy) to another boundary. The kernel backs only the 2 MiB
//! extents a program writes: a growing vector's memory reaches at most one
//! extent past what it has written.
//!
//! Declare it where a process starts:
//!
//!     #[global_allocator]
//!     static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, with large blocks on huge pages.
pub struct HugePages;

#[cfg(target_os = "linux")]
mod big {
    /// The size of a transparent huge page on x86-64 and most aarch64
    /// kernels, and the alignment of every large block.
    pub const HUGE: usize = 2 << 20;

    /// Blocks from this size on (and aligned to at most [`HUGE`]) are
    /// mapped here: below it a block rarely holds a whole extent.
    pub const FROM: usize = 4 << 20;

    const PAGE: usize = 4 << 10;

    pub fn is_big(size: usize, align: usize) -> bool {
        size >= FROM && align <= HUGE
    }

    fn pages(size: usize) -> Option<usize> {
        size.checked_next_multiple_of(PAGE)
    }

    /// Maps `len` bytes (whole pages) on a 2 MiB boundary, marked for huge
    /// pages; null when the system has no room.
    fn map(len: usize) -> *mut u8 {
        let Some(reserve) = len.checked_add(HUGE) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a new private anonymous mapping; nothing else is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserve,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let p = p as usize;
        let start = p.next_multiple_of(HUGE);
        // SAFETY: the head and the tail of the mapping just made, which no
        // one else knows of; the kernel's advice changes how the rest is
        // backed, never its contents (a failure leaves small pages).
        unsafe {
            if start > p {
                libc::munmap(p as *mut libc::c_void, start - p);
            }
            let tail = start + len;
            if p + reserve > tail {
                libc::munmap(tail as *mut libc::c_void, p + reserve - tail);
            }
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
        start as *mut u8
    }

    /// A new block of `size` bytes, zeroed (as every new mapping is).
    pub fn alloc(size: usize) -> *mut u8 {
        match pages(size) {
            Some(len) => map(len),
            None => std::ptr::null_mut(),
        }
    }

    /// # Safety
    /// `p` and `size` are a block [`alloc`] or [`realloc`] gave.
    pub unsafe fn dealloc(p: *mut u8, size: usize) {
        let len = pages(size).expect("the size of a mapped block");
        // SAFETY: the block's own pages, per the caller's contract.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }

    /// # Safety
    /// `p` and `old` are a block [`alloc`] or [`realloc`] gave; on success
    /// it is `new` bytes at the address returned, its contents kept.
    pub unsafe fn realloc(p: *mut u8, old: usize, new: usize) -> *mut u8 {
        let old_len = pages(old).expect("the size of a mapped block");
        let Some(new_len) = pages(new) else {
            return std::ptr::null_mut();
        };
        let addr = p as *mut libc::c_void;
        if new_len <= old_len {
            if new_len < old_len {
                // SAFETY: the block's pages past its new end.
                unsafe { libc::munmap(p.add(new_len) as *mut libc::c_void, old_len - new_len) };
            }
            return p;
        }
        // Grown where it stands when the pages after it are free.
        // SAFETY: the block's own mapping, per the caller's contract.
        let q = unsafe { libc::mremap(addr, old_len, new_len, 0) };
        if q != libc::MAP_FAILED {
            return p;
        }
        // Otherwise its pages move to a new aligned mapping, which the
        // move replaces; no byte is copied.
        let dest = map(new_len);
        if dest.is_null() {
            return dest;
        }
        // SAFETY: moves the block's mapping over `dest`, a mapping of
        // `new_len` bytes made above that no one else knows of.
        let q = unsafe {
            libc::mremap(
                addr,
                old_len,
                new_len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                dest as *mut libc::c_void,
            )
        };
        if q == libc::MAP_FAILED {
            // SAFETY: `dest` is ours and unused; the block is untouched.
            unsafe {
                libc::munmap(dest as *mut libc::c_void, new_len);
            }
            return std::ptr::null_mut();
        }
        dest
    }
}

#[cfg(not(target_os = "linux"))]
mod big {
    pub fn is_big(_size: usize, _align: usize) -> bool {
        false
    }
    pub fn alloc(_size: usize) -> *mut u8 {
        unreachable!()
    }
    pub unsafe fn dealloc(_p: *mut u8, _size: usize) {
        unreachable!()
    }
    pub unsafe fn realloc(_p: *mut u8, _old: usize, _new: usize) -> *mut u8 {
        unreachable!()
    }
}

/// Hands the free memory the system allocator keeps back to the system.
///
/// glibc keeps what a thread frees in that thread's arena, and gives back
/// only what lies at the top of its heap: after work spread over threads
/// (the what-if model's runs, a replay beside the report) megabytes of it
/// stay resident. A phase that takes much memory of its own calls this
/// first, so that the peak is not the two together. Elsewhere a no-op.
pub fn give_back_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: releases free pages of glibc's arenas only; no live block is
    // touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

// SAFETY: a block is large ([`big::is_big`]) or not by its layout alone, which
// the caller passes unchanged to every call on it: large blocks go to the
// mappings of `big` from allocation to release, the others to `System`. A
// block that changes class in `realloc` is copied from one to the other.
unsafe impl GlobalAlloc for HugePages {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if big::is_big(layout.size(), layout.align()) {
            big::alloc(layout.size())
        } else {
            // SAFETY: the caller's contract for `alloc`, passed on.
            unsafe { System.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if big::is_big(layout.size(), layout.align()) {
            big::alloc(layout.size())
        } else {
            // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if big::is_big(layout.size(), layout.align()) {
            // SAFETY: a large block, mapped by `big` (see above).
            unsafe { big::dealloc(ptr, layout.size()) }
        } else {
            // SAFETY: the caller's contract for `dealloc`, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let was = big::is_big(layout.size(), layout.align());
        let will = big::is_big(new_size, layout.align());
        match (was, will) {
            // SAFETY: the caller's contract for `realloc`, passed on.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // SAFETY: a large block, mapped by `big` (see above).
            (true, true) => unsafe { big::realloc(ptr, layout.size(), new_size) },
            _ => {
                // SAFETY: `new_size` is non-zero and, rounded up to the
                // alignment, does not overflow (the caller's contract).
                let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                // SAFETY: a fresh block of the other class, then the old
                // one's bytes that fit, then the old one released.
                unsafe {
                    let q = self.alloc(new);
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path of the allocator on blocks of both classes: contents kept
    /// through growth (in place or moved), shrinking and a change of class.
    #[test]
    fn blocks_keep_their_bytes_through_every_change_of_size() {
        let a = HugePages;
        let sizes = [100, 5 << 20, 9 << 20, 64 << 20, 6 << 20, 3 << 20, 1 << 10];
        let layout = Layout::from_size_align(sizes[0], 8).unwrap();
        // SAFETY: each call gets the block and layout the previous returned.
        unsafe {
            let mut p = a.alloc(layout);
            assert!(!p.is_null());
            let mut size = sizes[0];
            std::ptr::write_bytes(p, 7, size);
            for &next in &sizes[1..] {
                let q = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), next);
                assert!(!q.is_null(), "{size} -> {next}");
                let kept = size.min(next);
                let bytes = std::slice::from_raw_parts(q, kept);
                assert!(bytes.iter().all(|&b| b == 7), "{size} -> {next}");
                if big::is_big(next, 8) {
                    #[cfg(target_os = "linux")]
                    assert_eq!(q as usize % big::HUGE, 0, "a large block is aligned");
                }
                std::ptr::write_bytes(q, 7, next);
                p = q;
                size = next;
            }
            a.dealloc(p, Layout::from_size_align(size, 8).unwrap());
            let z = Layout::from_size_align(8 << 20, 64).unwrap();
            let p = a.alloc_zeroed(z);
            assert!(
                std::slice::from_raw_parts(p, z.size())
                    .iter()
                    .all(|&b| b == 0)
            );
            a.dealloc(p, z);
        }
    }
}
