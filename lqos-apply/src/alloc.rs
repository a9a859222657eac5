//! Giving freed heap back to the system.
//!
//! A reload builds a whole plan, its op streams and the netlink messages
//! next to the running plan, then drops most of it. glibc's allocator keeps
//! those freed pages in its arenas (one per thread that allocated), so a
//! long-running daemon's resident size grows to the high-water mark of its
//! largest reload and stays there. [`release_free_heap`] asks the allocator
//! to return what is free; the daemon calls it once it is idle again.

/// Returns the allocator's free heap pages to the system (glibc's
/// `malloc_trim(0)`: every arena, not just the top of the main heap).
/// A no-op where the allocator is not glibc's. Returns whether memory was
/// released.
///
/// ```
/// // Safe to call at any time, from any thread.
/// let _ = lqos_apply::alloc::release_free_heap();
/// ```
pub fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointers and only walks glibc's own
        // arenas under their locks; it is documented as thread-safe (MT-Safe
        // in glibc's manual) and may be called at any point.
        #[allow(unsafe_code)]
        let released = unsafe { libc::malloc_trim(0) };
        released == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
