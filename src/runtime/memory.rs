//! Giving memory back to the system after a burst (an initial sync, a relist).
//!
//! glibc's allocator keeps freed heap pages for reuse, so after a sync's transient buffers (LIST
//! pages, decoded batches) are dropped the process still holds them: peak RSS would stay the
//! steady RSS forever. `malloc_trim(0)` returns free pages at the top of the heap and, since
//! glibc 2.8, free whole pages inside it (`MADV_DONTNEED`). It costs a walk of the free lists,
//! a few milliseconds, once per full state: never on the per-event path.

/// Returns free heap pages to the system (a no-op where the allocator is not glibc's).
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            /// glibc, `<malloc.h>`: `int malloc_trim(size_t pad)`.
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim takes no pointers and only walks the allocator's own state,
        // under its own lock; any `pad` is valid.
        unsafe {
            malloc_trim(0);
        }
    }
}
