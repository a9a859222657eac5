//! Switching XPS off on a shaped interface's TX queues.
//!
//! The tc program picks a packet's TX queue by writing
//! `skb->queue_mapping = queue + 1`. The stack then still chooses the queue
//! in `netdev_pick_tx`: first XPS (the sending CPU's queues), and only
//! without an XPS map `skb_tx_hash`, which takes a non-zero mapping as a
//! recorded RX queue and transmits on `mapping - 1`. So with XPS on, a
//! packet leaves on its CPU's queue, not its circuit's: XPS must be off
//! (`xps_cpus` and `xps_rxqs` of every TX queue set to 0).
//!
//! sysfs shows the interfaces of the network namespace that mounted it, so
//! the writes happen on a helper thread with a private mount of sysfs made
//! in the caller's network namespace.

use std::io;

use crate::error::{BpfError, Result};
use crate::sys::{queues_dir, tx_queues, with_private_sysfs};

fn xps_err(name: &str, path: impl Into<std::path::PathBuf>) -> impl FnOnce(io::Error) -> BpfError {
    let (interface, path) = (name.to_string(), path.into());
    move |source| BpfError::Xps {
        interface,
        path,
        source,
    }
}

/// Switches XPS off on every TX queue of `name`, an interface in the
/// calling thread's network namespace. Returns the number of TX queues.
pub fn disable_xps_here(name: &str) -> Result<u32> {
    let dir = queues_dir(name)?;
    with_private_sysfs(|| {
        let queues = tx_queues(&dir).map_err(xps_err(name, &dir))?;
        for (_, q) in &queues {
            for f in ["xps_cpus", "xps_rxqs"] {
                let path = q.join(f);
                match std::fs::write(&path, "0\n") {
                    // No XPS in this kernel or for this device: nothing to
                    // switch off.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    r => r.map_err(xps_err(name, &path))?,
                }
            }
        }
        Ok(queues.len() as u32)
    })
}

/// The TX queues of `name` (calling thread's namespace) whose XPS CPU map
/// is not empty, as `(queue, mask)`.
pub fn xps_enabled_here(name: &str) -> Result<Vec<(u32, String)>> {
    let dir = queues_dir(name)?;
    with_private_sysfs(|| {
        let mut v = Vec::new();
        for (q, path) in tx_queues(&dir).map_err(xps_err(name, &dir))? {
            let mask = std::fs::read_to_string(path.join("xps_cpus")).unwrap_or_default();
            let mask = mask.trim().to_string();
            if mask.chars().any(|c| c.is_ascii_hexdigit() && c != '0') {
                v.push((q, mask));
            }
        }
        Ok(v)
    })
}
