//! `alloc::release_free_heap` returns freed heap to the system (its own
//! process: no other test allocates meanwhile).

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

/// Regression test for the daemon's RSS growing +24-32% over a soak: a
/// reload's freed plan stayed in the allocator's arenas.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_daemon_rss_grew_after_reloads_freed_heap_below_a_live_block_is_returned() {
    // In a worker thread's arena: ~200 MiB of small blocks, then one block
    // allocated after them that stays alive, so free() cannot shrink the
    // heap from its top and keeps the freed pages.
    std::thread::spawn(|| {
        let blocks: Vec<Vec<u8>> = (0..400_000).map(|i| vec![i as u8; 512]).collect();
        let pin = vec![1u8; 64];
        drop(std::hint::black_box(blocks));
        let held = rss_kib();
        assert!(lqos_apply::alloc::release_free_heap(), "nothing released");
        let after = rss_kib();
        assert!(
            after + 100 * 1024 < held,
            "RSS with the blocks freed {held} KiB, after release_free_heap {after} KiB"
        );
        drop(std::hint::black_box(pin));
    })
    .join()
    .unwrap();
}
