//! The TCP round-trip and retransmit statistics the tc program keeps per
//! circuit (`lqos1_tcp`) and its flow table (`lqos1_flows`): read in
//! batches for the statistics poll, and pruned of circuits a plan no
//! longer has.
//!
//! Everything is counted in the kernel since the circuit's entry was made
//! (on its first TCP flow); readers take differences between polls. An
//! entry is keyed by the circuit's download classid and [`circuit_tag`]
//! (a hash of its ID), so a classid handed to another circuit starts a new
//! entry instead of continuing the old one, and a circuit that moves to
//! another classid starts over too.
//!
//! [`circuit_tag`]: crate::layout::circuit_tag

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use aya::maps::{MapData, PerCpuArray};

use crate::error::{BpfError, Result};
use crate::layout::{names, Stats, TcpCircuit, TcpKey, MAX_TCP_CIRCUITS};
use crate::model::Entries;

/// `BPF_MAP_LOOKUP_BATCH`.
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
/// Entries asked for per batch call.
const BATCH: usize = 1024;

/// The data path's own health as far as TCP tracking goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TcpHealth {
    /// Entries of the flow table.
    pub flow_table_size: u32,
    /// Flows entered in it (since the data path was first loaded).
    pub flows_new: u64,
    /// Flows taken out on a RST or a FIN both ways.
    pub flows_closed: u64,
    /// Flows that could not be entered.
    pub flows_failed: u64,
    /// RTT samples taken.
    pub samples: u64,
    /// Circuits that found the statistics map full.
    pub circuits_full: u64,
    /// Circuits with an entry now.
    pub circuits: u32,
    /// Capacity of the statistics map.
    pub circuit_capacity: u32,
}

impl TcpHealth {
    /// Flows in the table: those entered and not closed, at most its size
    /// (the LRU evicts the least recently used flow for a new one; flows
    /// that end without a RST or FINs both ways stay until then).
    pub fn flows_tracked(&self) -> u64 {
        self.flows_new
            .saturating_sub(self.flows_closed)
            .min(u64::from(self.flow_table_size))
    }

    /// Flows the LRU evicted for new ones: those entered and neither
    /// closed nor still in the table (an estimate: the kernel counts no
    /// evictions; exact once the table has been full).
    pub fn evictions(&self) -> u64 {
        self.flows_new
            .saturating_sub(self.flows_closed)
            .saturating_sub(u64::from(self.flow_table_size))
    }

    /// Fill of the flow table, 0 to 1.
    pub fn flow_fill(&self) -> f64 {
        if self.flow_table_size == 0 {
            0.0
        } else {
            self.flows_tracked() as f64 / f64::from(self.flow_table_size)
        }
    }
}

/// One read of the TCP statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpRead {
    /// Every circuit with an entry, by key.
    pub circuits: Vec<(TcpKey, TcpCircuit)>,
    /// The counters of the tracking itself.
    pub health: TcpHealth,
}

impl TcpRead {
    /// A read of `circuits` with the tracking's counters `health`.
    pub fn new(circuits: Vec<(TcpKey, TcpCircuit)>, health: TcpHealth) -> TcpRead {
        TcpRead { circuits, health }
    }
}

/// Handles on the TCP maps of one pin directory.
pub struct TcpMaps {
    pin_dir: PathBuf,
    tcp: MapData,
    flow_table_size: u32,
    stats: PerCpuArray<MapData, [u64; 16]>,
}

impl std::fmt::Debug for TcpMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpMaps")
            .field("pin_dir", &self.pin_dir)
            .finish()
    }
}

fn pinned(pin_dir: &Path, name: &'static str) -> Result<MapData> {
    let path = pin_dir.join(name);
    MapData::from_pin(&path).map_err(|e| BpfError::Pinned {
        path,
        message: format!("cannot open the pinned map ({e}); is the data path loaded?"),
    })
}

impl TcpMaps {
    /// Opens the maps pinned under `pin_dir`.
    pub fn open(pin_dir: &Path) -> Result<TcpMaps> {
        let tcp = pinned(pin_dir, names::TCP)?;
        let flows = pinned(pin_dir, names::FLOWS)?;
        let flow_table_size = flows
            .info()
            .map_err(BpfError::map(names::FLOWS, "reading its size"))?
            .max_entries();
        let stats = aya::maps::Map::from_map_data(pinned(pin_dir, names::STATS)?)
            .map_err(BpfError::map(names::STATS, "opening"))?
            .try_into()
            .map_err(BpfError::map(names::STATS, "checking key and value sizes"))?;
        Ok(TcpMaps {
            pin_dir: pin_dir.to_path_buf(),
            tcp,
            flow_table_size,
            stats,
        })
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// Every circuit's statistics and the health counters (the circuits
    /// in batches of 1,024 per system call).
    pub fn read(&self) -> Result<TcpRead> {
        let mut circuits = Vec::new();
        lookup_batch::<{ TcpKey::SIZE }, { TcpCircuit::SIZE }>(&self.tcp, |k, v| {
            circuits.push((TcpKey::decode(k), TcpCircuit::decode(v)));
        })
        .map_err(syscall_error("bpf_map_lookup_batch", "reading in batches"))?;
        let mut s = Stats::default();
        let per_cpu = self
            .stats
            .get(&0, 0)
            .map_err(BpfError::map(names::STATS, "reading"))?;
        for w in per_cpu.iter() {
            s.add(&Stats::from_words(w));
        }
        let health = TcpHealth {
            flow_table_size: self.flow_table_size,
            flows_new: s.tcp_flows_new,
            flows_closed: s.tcp_flows_closed,
            flows_failed: s.tcp_flows_failed,
            samples: s.tcp_samples,
            circuits_full: s.tcp_circuits_full,
            circuits: circuits.len() as u32,
            circuit_capacity: MAX_TCP_CIRCUITS,
        };
        Ok(TcpRead { circuits, health })
    }

    /// Writes a circuit's entry as the tc program keeps it (for tests and
    /// benchmarks of the readers; the programs own these entries).
    pub fn insert(&self, key: &TcpKey, value: &TcpCircuit) -> Result<()> {
        let what = format!("writing {key:?}");
        elem(
            &self.tcp,
            BPF_MAP_UPDATE_ELEM,
            &key.encode(),
            Some(&value.encode()),
        )
        .map_err(syscall_error("bpf_map_update_elem", what))
    }

    /// Removes the entries of circuits `keep` refuses (circuits no plan
    /// has any more, or whose classid or ID changed). Returns how many.
    pub fn prune(&self, keep: impl Fn(&TcpKey) -> bool) -> Result<usize> {
        let mut gone = Vec::new();
        lookup_batch::<{ TcpKey::SIZE }, { TcpCircuit::SIZE }>(&self.tcp, |k, _| {
            let key = TcpKey::decode(k);
            if !keep(&key) {
                gone.push(*k);
            }
        })
        .map_err(syscall_error("bpf_map_lookup_batch", "reading in batches"))?;
        for k in &gone {
            let what = format!("removing {:?}", TcpKey::decode(k));
            match elem(&self.tcp, BPF_MAP_DELETE_ELEM, k, None) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                r => r.map_err(syscall_error("bpf_map_delete_elem", what))?,
            }
        }
        Ok(gone.len())
    }
}

/// Forgets the TCP statistics of every circuit not in `entries` (what
/// the maps hold after a sync): called by [`crate::install()`],
/// [`crate::update`] and [`crate::MapSync::sync`]. A data path without TCP
/// maps (loaded by an older lqos) has nothing to forget.
pub fn prune_for(pin_dir: &Path, entries: &Entries) -> Result<usize> {
    if !pin_dir.join(names::TCP).exists() {
        return Ok(0);
    }
    // The set of circuits to keep is built only when the map holds an
    // entry to check (after a cold load it holds none).
    let keep = std::cell::OnceCell::new();
    TcpMaps::open(pin_dir)?.prune(|k| {
        keep.get_or_init(|| {
            entries
                .iter()
                .map(|(_, v)| v.tcp_key())
                .collect::<HashSet<TcpKey>>()
        })
        .contains(k)
    })
}

/// An error of a raw `bpf()` call on `lqos1_tcp`.
fn syscall_error(
    call: &'static str,
    what: impl Into<String>,
) -> impl FnOnce(std::io::Error) -> BpfError {
    let what = what.into();
    move |io_error| BpfError::Map {
        map: names::TCP,
        what,
        source: Box::new(aya::maps::MapError::SyscallError(aya::sys::SyscallError {
            call,
            io_error,
        })),
    }
}

#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Every entry of hash map `map` (key `K` bytes, value `V` bytes), read
/// with `BPF_MAP_LOOKUP_BATCH`, `BATCH` per call.
fn lookup_batch<const K: usize, const V: usize>(
    map: &MapData,
    mut each: impl FnMut(&[u8; K], &[u8; V]),
) -> std::io::Result<()> {
    let fd = map.fd().as_fd().as_raw_fd();
    let mut keys = vec![[0u8; K]; BATCH];
    let mut values = vec![[0u8; V]; BATCH];
    // The hash map's batch token is a u32 bucket index.
    let mut token_in = [0u8; 8];
    let mut token_out = [0u8; 8];
    let mut first = true;
    loop {
        let mut attr = BatchAttr {
            in_batch: if first {
                0
            } else {
                token_in.as_mut_ptr() as u64
            },
            out_batch: token_out.as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: BATCH as u32,
            map_fd: fd as u32,
            ..BatchAttr::default()
        };
        // SAFETY: attr points at buffers of `count` keys and values of the
        // map's sizes and two 8-byte tokens, all alive for the call. (aya
        // 0.14 has no batch operations; one call per entry would take a
        // system call per circuit.)
        #[allow(unsafe_code)]
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &mut attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        let err = (r < 0).then(std::io::Error::last_os_error);
        let n = (attr.count as usize).min(BATCH);
        for i in 0..n {
            each(&keys[i], &values[i]);
        }
        match err {
            None => {}
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Some(e) => return Err(e),
        }
        token_in = token_out;
        first = false;
    }
}

const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;

/// `bpf(cmd)` on one element of `map`: update (with `value`) or delete.
fn elem(map: &MapData, cmd: libc::c_long, key: &[u8], value: Option<&[u8]>) -> std::io::Result<()> {
    #[repr(C)]
    struct ElemAttr {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    let mut attr = ElemAttr {
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        pad: 0,
        key: key.as_ptr() as u64,
        value: value.map_or(0, |v| v.as_ptr() as u64),
        flags: 0,
    };
    // SAFETY: attr points at a key (and value) of the map's sizes, alive
    // for the call.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            &mut attr as *mut ElemAttr,
            std::mem::size_of::<ElemAttr>(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_tracked_and_evictions_from_the_counters() {
        let h = TcpHealth {
            flow_table_size: 100,
            flows_new: 70,
            flows_closed: 20,
            ..TcpHealth::default()
        };
        assert_eq!((h.flows_tracked(), h.evictions()), (50, 0));
        assert_eq!(h.flow_fill(), 0.5);
        let h = TcpHealth {
            flows_new: 500,
            ..h
        };
        assert_eq!((h.flows_tracked(), h.evictions()), (100, 380));
    }
}
