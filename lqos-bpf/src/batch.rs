//! Many entries of a hash map written in one system call
//! (`BPF_MAP_UPDATE_BATCH`, Linux >= 5.6 for hash maps), which aya 0.14
//! does not offer: a cold load of 100,000 circuits is ~160 calls instead
//! of ~160,000. The batch applies its entries in order and stops at the
//! first failure, reporting how many it wrote, so a caller can fall back
//! to one call per entry (an LPM trie has no batch operation; an older
//! kernel neither).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `BPF_MAP_UPDATE_BATCH` (`enum bpf_cmd`).
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;

/// Entries per call: a bound on the buffers, not a kernel limit.
pub const BATCH: usize = 1024;

/// Writes `keys[i] -> values[i]` (`BPF_ANY`) into the map `fd` in one
/// call, in order. Returns how many the kernel wrote before it stopped
/// (all of them, or fewer with the error).
pub fn update<const K: usize, const V: usize>(
    fd: BorrowedFd<'_>,
    keys: &[[u8; K]],
    values: &[[u8; V]],
) -> (usize, io::Result<()>) {
    assert_eq!(keys.len(), values.len(), "one value per key");
    if keys.is_empty() {
        return (0, Ok(()));
    }
    let keys_flat: &[u8] = keys.as_flattened();
    let values_flat: &[u8] = values.as_flattened();
    // `union bpf_attr`'s batch part: in_batch, out_batch, keys, values
    // (u64 addresses), count and map_fd (u32 each), elem_flags, flags.
    let mut attr = [0u64; 7];
    attr[2] = keys_flat.as_ptr() as u64;
    attr[3] = values_flat.as_ptr() as u64;
    let count = u32::try_from(keys.len()).expect("a batch fits u32");
    attr[4] = u64::from(count) | (u64::from(fd.as_raw_fd() as u32) << 32);
    #[cfg(target_endian = "big")]
    {
        attr[4] = (u64::from(count) << 32) | u64::from(fd.as_raw_fd() as u32);
    }
    // SAFETY: `attr` is a valid `union bpf_attr` prefix of the size given;
    // `keys` and `values` are live for the call and hold `count` entries
    // of the map's key and value sizes (the caller's typed map checked
    // them); the kernel writes back only `attr.batch.count`, inside
    // `attr`.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_BATCH,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    #[cfg(target_endian = "little")]
    let done = (attr[4] & 0xffff_ffff) as usize;
    #[cfg(target_endian = "big")]
    let done = (attr[4] >> 32) as usize;
    if r == 0 {
        (keys.len(), Ok(()))
    } else {
        (done.min(keys.len()), Err(io::Error::last_os_error()))
    }
}

/// Whether a batch error means the kernel or the map has no batch
/// operation (then one call per entry does the same).
pub fn unsupported(e: &io::Error) -> bool {
    // ENOTSUPP (524) is the kernel's own "not supported" for map ops.
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS | 524)
    )
}
