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
use std::path::PathBuf;

use crate::error::{BpfError, Result};

/// Switches XPS off on every TX queue of `name`, an interface in the
/// calling thread's network namespace. Returns the number of TX queues.
pub fn disable_xps_here(name: &str) -> Result<u32> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(BpfError::Interface {
            interface: name.to_string(),
            what: "switching XPS off".into(),
            message: "invalid interface name".into(),
        });
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            crate::sys::private_sysfs().map_err(|source| BpfError::Xps {
                interface: name.to_string(),
                path: "/sys".into(),
                source,
            })?;
            write_zeroes(name)
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

fn write_zeroes(name: &str) -> Result<u32> {
    let dir = PathBuf::from(format!("/sys/class/net/{name}/queues"));
    let rd = std::fs::read_dir(&dir).map_err(|source| BpfError::Xps {
        interface: name.to_string(),
        path: dir.clone(),
        source,
    })?;
    let mut n = 0;
    for e in rd.flatten() {
        let q = e.file_name();
        let Some(q) = q.to_str() else { continue };
        if !q.starts_with("tx-") {
            continue;
        }
        n += 1;
        for f in ["xps_cpus", "xps_rxqs"] {
            let path = e.path().join(f);
            match std::fs::write(&path, "0\n") {
                Ok(()) => {}
                // No XPS in this kernel or for this device: nothing to switch off.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(BpfError::Xps {
                        interface: name.to_string(),
                        path,
                        source,
                    })
                }
            }
        }
    }
    Ok(n)
}

/// The TX queues of `name` (calling thread's namespace) whose XPS CPU map
/// is not empty, as `(queue, mask)`.
pub fn xps_enabled_here(name: &str) -> Result<Vec<(u32, String)>> {
    std::thread::scope(|s| {
        s.spawn(|| {
            crate::sys::private_sysfs().map_err(|source| BpfError::Xps {
                interface: name.to_string(),
                path: "/sys".into(),
                source,
            })?;
            let dir = PathBuf::from(format!("/sys/class/net/{name}/queues"));
            let mut v = Vec::new();
            let rd = std::fs::read_dir(&dir).map_err(|source| BpfError::Xps {
                interface: name.to_string(),
                path: dir.clone(),
                source,
            })?;
            for e in rd.flatten() {
                let q = e.file_name();
                let Some(q) = q
                    .to_str()
                    .and_then(|q| q.strip_prefix("tx-"))
                    .and_then(|q| q.parse::<u32>().ok())
                else {
                    continue;
                };
                let mask = std::fs::read_to_string(e.path().join("xps_cpus")).unwrap_or_default();
                let mask = mask.trim().to_string();
                if mask.chars().any(|c| c.is_ascii_hexdigit() && c != '0') {
                    v.push((q, mask));
                }
            }
            v.sort();
            Ok(v)
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
