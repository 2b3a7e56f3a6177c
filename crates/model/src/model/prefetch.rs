//! Asking the CPU for a cache line before it is needed, so that a batch's misses overlap.
//!
//! A read of the Lease watch brings a batch of renewals, and between two reads the other
//! processes on the host empty the caches: every renewal's lookups (the store's Lease, the
//! node's entry) are cache misses, and one after the other, since each
//! address comes out of the line before. Looked up renewal by renewal, a batch waits for them
//! in turn. Asked for a stage at a time over the whole batch (every index bucket, then every
//! entry those buckets name, ...), they are fetched side by side, and the renewals themselves
//! then find their lines in the cache (`Controllers::prefetch_renewals`).

/// Asks for the cache line holding `value`'s first byte. A hint only: nothing is read that the
/// program sees, and a line never fetched costs only its miss later.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    prefetch_address(std::ptr::from_ref(value).cast::<u8>());
}

/// The cache line size of the CPUs this runs on (x86-64's; where it is larger, every other
/// line asked for by [`prefetch_whole`] is asked twice, which costs nothing).
const CACHE_LINE: usize = 64;

/// Asks for every cache line `value` spans: an entry of a few lines whose fields a renewal
/// reads at both ends (a node's entry is 160 bytes, and the renewal reads its first line and,
/// on the third, whether the node is registered).
#[inline(always)]
pub(crate) fn prefetch_whole<T>(value: &T) {
    let start = std::ptr::from_ref(value).cast::<u8>();
    let size = std::mem::size_of::<T>();
    let mut offset = 0;
    while offset < size {
        prefetch_address(start.wrapping_add(offset));
        offset += CACHE_LINE;
    }
    // The last byte's line, when `value` does not start on a line and so ends on one more.
    if size > 0 {
        prefetch_address(start.wrapping_add(size - 1));
    }
}

/// Asks for a name's allocation: its bytes (what a lookup by a copy of the text compares) and
/// its counts just before them (what a clone writes), two lines when they straddle one.
#[inline(always)]
pub(crate) fn prefetch_name(name: &std::rc::Rc<str>) {
    let text = name.as_ptr();
    prefetch_address(text);
    prefetch_address(text.wrapping_sub(2 * std::mem::size_of::<usize>()));
}

/// Asks for the cache line holding `address`, which need not be valid: the CPU drops a
/// prefetch it cannot take (an `Rc`'s counts, just before its value, are asked for this way).
#[inline(always)]
pub(crate) fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch does not dereference its address for the program and never
        // faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
