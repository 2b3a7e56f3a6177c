//! The one counting allocator of the tests and examples: the system's allocator, counting
//! what a binary that installs it (`#[global_allocator]`) allocates. It owns the counts:
//! - allocations made by the process (every `alloc`, `alloc_zeroed` and `realloc`: each is a
//!   call into malloc), for the figures of allocations per event or per call;
//! - live heap bytes and live blocks of the process (a `realloc` moves the bytes, not the
//!   blocks), for the floors of what the store keeps;
//! - the largest single request made on this thread since the last look, for the fuzz: an
//!   allocation sized from a length field instead of from the bytes received.
//!
//! Built with [`CountingAlloc::refusing_above`] it also answers a request above a size with
//! null (Rust then aborts the process), rather than risk the machine's memory. In a binary that
//! does not install it every count stays 0.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};

static MADE: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_BLOCKS: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting. See the module's documentation for what it counts.
pub struct CountingAlloc {
    refuse_above: usize,
}

impl CountingAlloc {
    /// Counts; refuses nothing the system allocator would give.
    pub const fn new() -> CountingAlloc {
        CountingAlloc {
            refuse_above: usize::MAX,
        }
    }

    /// Counts, and answers a single request above `bytes` with null.
    pub const fn refusing_above(bytes: usize) -> CountingAlloc {
        CountingAlloc {
            refuse_above: bytes,
        }
    }

    /// Counts a request of `size` bytes; whether it may be made.
    fn request(&self, size: usize) -> bool {
        // `try_with`: thread-local storage may already be gone while a thread exits.
        let _ = LARGEST.try_with(|l| {
            if size > l.get() {
                l.set(size);
            }
        });
        if size > self.refuse_above {
            return false;
        }
        MADE.fetch_add(1, Ordering::Relaxed);
        true
    }
}

impl Default for CountingAlloc {
    fn default() -> CountingAlloc {
        CountingAlloc::new()
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !self.request(layout.size()) {
            return std::ptr::null_mut();
        }
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !self.request(layout.size()) {
            return std::ptr::null_mut();
        }
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.request(new_size) {
            return std::ptr::null_mut();
        }
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations the process has made (`alloc`, `alloc_zeroed` and `realloc` calls).
pub fn allocations_made() -> u64 {
    MADE.load(Ordering::Relaxed)
}

/// Live heap bytes of the process.
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Live heap blocks (allocations not yet freed) of the process.
pub fn live_blocks() -> isize {
    LIVE_BLOCKS.load(Ordering::Relaxed)
}

/// The largest single request made on this thread since the last call (refused ones included).
pub fn take_largest_allocation() -> usize {
    LARGEST.with(|l| l.replace(0))
}
