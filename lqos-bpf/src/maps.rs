//! The pinned maps, opened by path: read back, update by difference,
//! interface configuration, cpumap, counters.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use aya::maps::lpm_trie::{Key as LpmKey, LpmTrie};
use aya::maps::{Array, CpuMap, HashMap, IterableMap, Map, MapData, PerCpuArray};

use crate::error::{BpfError, Result};
use crate::layout::{names, CircuitValue, FastLens, IfaceConfig, Stats, MAX_QUEUES};
use crate::model::{Entries, MapDiff, MapKey};

/// Handles on the pinned maps of one pin directory. Opening them needs no
/// program: the daemon updates a running data path with this alone.
pub struct Maps {
    pin_dir: PathBuf,
    hosts: HashMap<MapData, [u8; 16], [u8; 24]>,
    nets: LpmTrie<MapData, [u8; 16], [u8; 24]>,
    fast: HashMap<MapData, [u8; 20], [u8; 24]>,
    global: Array<MapData, [u8; 16]>,
    /// The fast lengths last written or read (saves a syscall per update).
    fast_lens: Option<FastLens>,
    ifaces: HashMap<MapData, u32, [u8; 16]>,
    cpus: CpuMap<MapData>,
    stats: PerCpuArray<MapData, [u64; 16]>,
    queues: PerCpuArray<MapData, u64>,
    redirects: PerCpuArray<MapData, u64>,
    /// Writes to the hash maps go in batches (until the kernel refuses
    /// one as unsupported).
    batches: bool,
}

impl std::fmt::Debug for Maps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Maps")
            .field("pin_dir", &self.pin_dir)
            .finish()
    }
}

/// What [`Maps::apply`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApplyCounts {
    /// Entries written (added or changed in place).
    pub written: usize,
    /// Entries removed.
    pub removed: usize,
}

/// Entries of a group at least this large are written by several threads.
const PARALLEL_MIN: usize = 8 * crate::batch::BATCH;
/// At most this many threads write one group.
const PARALLEL_MAX: usize = 4;

/// Writes `run` (entries of the hash map `fd`, of one group) in batches:
/// split into equal chunks, one thread each, when it is large. Returns the
/// chunk size and, per chunk, how many entries from its start were
/// written, with the error that stopped the rest.
fn write_parallel(
    fd: BorrowedFd<'_>,
    run: &[(MapKey, CircuitValue)],
) -> (usize, Vec<(usize, std::io::Result<()>)>) {
    let threads = if run.len() >= PARALLEL_MIN {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(PARALLEL_MAX))
    } else {
        1
    };
    let chunk = run.len().div_ceil(threads).max(1);
    if threads == 1 {
        return (chunk, vec![write_run(fd, run)]);
    }
    let done = std::thread::scope(|s| {
        let handles: Vec<_> = run
            .chunks(chunk)
            .map(|c| s.spawn(move || write_run(fd, c)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    (chunk, done)
}

/// Writes `run` (entries of the hash map `fd`: hosts or fast) with
/// `BPF_MAP_UPDATE_BATCH`, `batch::BATCH` per call. Returns how many it
/// wrote from the start, with the error that stopped it.
fn write_run(fd: BorrowedFd<'_>, run: &[(MapKey, CircuitValue)]) -> (usize, std::io::Result<()>) {
    let mut done = 0;
    for b in run.chunks(crate::batch::BATCH) {
        let values: Vec<[u8; 24]> = b.iter().map(|(_, v)| v.encode()).collect();
        let (n, r) = match b[0].0 {
            MapKey::Host(_) => {
                let keys: Vec<[u8; 16]> = b.iter().map(|(k, _)| k.lpm().1).collect();
                crate::batch::update(fd, &keys, &values)
            }
            MapKey::Fast { .. } => {
                let keys: Vec<[u8; 20]> = b.iter().map(|(k, _)| fast_key(k)).collect();
                crate::batch::update(fd, &keys, &values)
            }
            MapKey::Net { .. } => return (done, Ok(())),
        };
        done += n;
        if r.is_err() {
            return (done, r);
        }
    }
    (done, Ok(()))
}

/// The fast map's key (`struct lqos_net_key`): length, then address.
fn fast_key(key: &MapKey) -> [u8; 20] {
    let (len, addr) = key.lpm();
    let mut k = [0u8; 20];
    k[0..4].copy_from_slice(&len.to_ne_bytes());
    k[4..].copy_from_slice(&addr);
    k
}

fn fast_key_parts(k: &[u8; 20]) -> (u32, [u8; 16]) {
    let mut a = [0u8; 16];
    a.copy_from_slice(&k[4..]);
    (u32::from_ne_bytes([k[0], k[1], k[2], k[3]]), a)
}

fn open(pin_dir: &Path, name: &'static str) -> Result<Map> {
    let path = pin_dir.join(name);
    let data = MapData::from_pin(&path).map_err(|e| BpfError::Pinned {
        path: path.clone(),
        message: format!("cannot open the pinned map ({e}); is the data path loaded?"),
    })?;
    Map::from_map_data(data).map_err(BpfError::map(name, "opening"))
}

macro_rules! typed {
    ($pin:expr, $name:expr) => {
        open($pin, $name)?
            .try_into()
            .map_err(BpfError::map($name, "checking key and value sizes"))?
    };
}

impl Maps {
    /// Opens the maps pinned under `pin_dir` (by the data path's loader).
    pub fn open(pin_dir: &Path) -> Result<Maps> {
        Ok(Maps {
            pin_dir: pin_dir.to_path_buf(),
            hosts: typed!(pin_dir, names::HOSTS),
            nets: typed!(pin_dir, names::NETS),
            fast: typed!(pin_dir, names::FAST),
            global: typed!(pin_dir, names::GLOBAL),
            fast_lens: None,
            ifaces: typed!(pin_dir, names::IFACES),
            cpus: typed!(pin_dir, names::CPUS),
            stats: typed!(pin_dir, names::STATS),
            queues: typed!(pin_dir, names::QUEUES),
            redirects: typed!(pin_dir, names::REDIRECTS),
            batches: true,
        })
    }

    /// Kernel memory charged to each map (`memlock` in its fdinfo), in
    /// bytes: what the maps cost at their current size.
    pub fn memlock(&self) -> Result<Vec<(&'static str, u64)>> {
        use std::os::fd::{AsFd, AsRawFd};
        let mut out = Vec::with_capacity(names::ALL.len());
        for name in names::ALL {
            let pin = self.pin_dir.join(name);
            let data = MapData::from_pin(&pin).map_err(BpfError::map(name, "opening"))?;
            let path = format!("/proc/self/fdinfo/{}", data.fd().as_fd().as_raw_fd());
            let text = std::fs::read_to_string(&path).map_err(BpfError::io(&path, "reading"))?;
            let bytes = text
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            out.push((name, bytes));
        }
        Ok(out)
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// Every address and prefix the maps hold (one pass over each map).
    pub fn read(&self) -> Result<Entries> {
        let mut out = Entries::default();
        for kv in self.hosts.iter() {
            let (k, v) = kv.map_err(BpfError::map(names::HOSTS, "reading"))?;
            out.insert(MapKey::Host(k), CircuitValue::decode(&v));
        }
        for kv in self.nets.iter() {
            let (k, v) = kv.map_err(BpfError::map(names::NETS, "reading"))?;
            let key =
                MapKey::from_lpm(k.prefix_len(), k.data()).ok_or_else(|| BpfError::Pinned {
                    path: self.pin_dir.join(names::NETS),
                    message: format!("prefix length {} is over 128", k.prefix_len()),
                })?;
            out.insert(key, CircuitValue::decode(&v));
        }
        for kv in self.fast.iter() {
            let (k, v) = kv.map_err(BpfError::map(names::FAST, "reading"))?;
            let (len, addr) = fast_key_parts(&k);
            match MapKey::from_lpm(len, addr) {
                Some(MapKey::Net { prefix_len, addr }) => {
                    out.insert(MapKey::Fast { prefix_len, addr }, CircuitValue::decode(&v));
                }
                _ => {
                    return Err(BpfError::Pinned {
                        path: self.pin_dir.join(names::FAST),
                        message: format!("prefix length {len} is not a prefix's"),
                    })
                }
            }
        }
        Ok(out)
    }

    /// The fast lengths the programs use now.
    pub fn fast_lens(&self) -> Result<FastLens> {
        let b = self
            .global
            .get(&0, 0)
            .map_err(BpfError::map(names::GLOBAL, "reading"))?;
        Ok(FastLens::decode(&b))
    }

    /// Sets the fast lengths (skipped when they are already these).
    pub fn set_fast_lens(&mut self, lens: &FastLens) -> Result<()> {
        if self.fast_lens.is_none() {
            self.fast_lens = Some(self.fast_lens()?);
        }
        if self.fast_lens.as_ref() == Some(lens) {
            return Ok(());
        }
        self.global
            .set(0, lens.encode(), 0)
            .map_err(BpfError::map(names::GLOBAL, "writing the fast lengths"))?;
        self.fast_lens = Some(*lens);
        Ok(())
    }

    /// The value the maps hold for `key`.
    pub fn get(&self, key: &MapKey) -> Result<Option<CircuitValue>> {
        let r = match key {
            MapKey::Host(a) => self.hosts.get(a, 0),
            MapKey::Net { .. } => {
                let (len, addr) = key.lpm();
                self.nets.get(&LpmKey::new(len, addr), 0)
            }
            MapKey::Fast { .. } => self.fast.get(&fast_key(key), 0),
        };
        match r {
            Ok(v) => Ok(Some(CircuitValue::decode(&v))),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(BpfError::map(key.map_name(), format!("reading {key}"))(e)),
        }
    }

    /// The longest prefix in the LPM trie containing `addr` (the trie's
    /// own lookup).
    pub fn longest_prefix(&self, addr: [u8; 16]) -> Result<Option<CircuitValue>> {
        match self.nets.get(&LpmKey::new(128, addr), 0) {
            Ok(v) => Ok(Some(CircuitValue::decode(&v))),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(BpfError::map(names::NETS, "looking up")(e)),
        }
    }

    /// Writes one entry (added, or overwritten in place: an address moving
    /// to another circuit is never missing from the map).
    pub fn write(&mut self, key: &MapKey, value: &CircuitValue) -> Result<()> {
        let v = value.encode();
        match key {
            MapKey::Host(a) => self.hosts.insert(a, v, 0),
            MapKey::Net { .. } => {
                let (len, addr) = key.lpm();
                self.nets.insert(&LpmKey::new(len, addr), v, 0)
            }
            MapKey::Fast { .. } => self.fast.insert(fast_key(key), v, 0),
        }
        .map_err(|e| {
            let what = format!("writing {key}");
            match e {
                aya::maps::MapError::SyscallError(ref s)
                    if s.io_error.raw_os_error() == Some(libc::E2BIG) =>
                {
                    BpfError::Map {
                        map: key.map_name(),
                        what: format!("{what}: the map is full ({} entries)", key.capacity()),
                        source: Box::new(e),
                    }
                }
                e => BpfError::map(key.map_name(), what)(e),
            }
        })
    }

    /// Removes one entry (absent: nothing to do).
    pub fn remove(&mut self, key: &MapKey) -> Result<()> {
        let r = match key {
            MapKey::Host(a) => self.hosts.remove(a),
            MapKey::Net { .. } => {
                let (len, addr) = key.lpm();
                self.nets.remove(&LpmKey::new(len, addr))
            }
            MapKey::Fast { .. } => self.fast.remove(&fast_key(key)),
        };
        match r {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(aya::maps::MapError::SyscallError(s))
                if s.io_error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            Err(e) => Err(BpfError::map(key.map_name(), format!("removing {key}"))(e)),
        }
    }

    /// Applies `diff` in its order (the fast lengths of both sets, writes,
    /// longest prefixes first, the target's fast lengths, removals,
    /// shortest first): at every step each address is classified either as
    /// before or as after. Stops at the first error; the maps
    /// then hold a mix of old and new entries, never an address of neither,
    /// and a new diff against [`Maps::read`] finishes the job.
    pub fn apply(&mut self, diff: &MapDiff) -> Result<ApplyCounts> {
        let mut n = ApplyCounts::default();
        if diff.is_empty() {
            return Ok(n);
        }
        self.set_fast_lens(&diff.fast_before)?;
        // Groups of writes of one map and prefix length: their entries are
        // disjoint, so they may land in any order. A hash map's group goes
        // in batches (one system call per `batch::BATCH` entries), a large
        // one split over threads; the groups go in the diff's order.
        let mut i = 0;
        while i < diff.writes.len() {
            let k = diff.writes[i].0;
            let end = diff.writes[i..]
                .iter()
                .position(|(w, _)| {
                    std::mem::discriminant(w) != std::mem::discriminant(&k)
                        || w.prefix_len() != k.prefix_len()
                })
                .map_or(diff.writes.len(), |p| i + p);
            let group = &diff.writes[i..end];
            let fd = match k {
                _ if !self.batches => None,
                MapKey::Host(_) => Some(self.hosts.map().fd().as_fd()),
                MapKey::Fast { .. } => Some(self.fast.map().fd().as_fd()),
                MapKey::Net { .. } => None,
            };
            let (chunk, done) = match fd {
                Some(fd) => write_parallel(fd, group),
                None => (group.len().max(1), vec![(0, Ok(()))]),
            };
            for (c, (done, r)) in group.chunks(chunk).zip(done) {
                if let Err(e) = r {
                    if done == 0 && crate::batch::unsupported(&e) {
                        self.batches = false;
                    }
                }
                // What a batch did not write goes one by one, which names
                // the entry when it fails again.
                for (k, v) in &c[done..] {
                    self.write(k, v)?;
                }
            }
            n.written += group.len();
            i = end;
        }
        self.set_fast_lens(&diff.fast_after)?;
        for k in &diff.removes {
            self.remove(k)?;
            n.removed += 1;
        }
        Ok(n)
    }

    /// Brings the maps to `desired`: reads them back, diffs, applies.
    pub fn sync(&mut self, desired: &Entries) -> Result<ApplyCounts> {
        let current = self.read()?;
        self.apply(&crate::model::diff(&current, desired))
    }

    /// Sets the configuration of interface `ifindex`.
    pub fn set_iface(&mut self, ifindex: u32, cfg: &IfaceConfig) -> Result<()> {
        self.ifaces
            .insert(ifindex, cfg.encode(), 0)
            .map_err(BpfError::map(
                names::IFACES,
                format!("writing ifindex {ifindex}"),
            ))
    }

    /// Removes the configuration of interface `ifindex` (its packets are
    /// then left alone).
    pub fn remove_iface(&mut self, ifindex: u32) -> Result<()> {
        match self.ifaces.remove(&ifindex) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(aya::maps::MapError::SyscallError(s))
                if s.io_error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            Err(e) => Err(BpfError::map(
                names::IFACES,
                format!("removing ifindex {ifindex}"),
            )(e)),
        }
    }

    /// The configured interfaces, by ifindex.
    pub fn ifaces(&self) -> Result<Vec<(u32, IfaceConfig)>> {
        let mut v = Vec::new();
        for kv in self.ifaces.iter() {
            let (k, b) = kv.map_err(BpfError::map(names::IFACES, "reading"))?;
            if let Some(c) = IfaceConfig::decode(&b) {
                v.push((k, c));
            }
        }
        v.sort_by_key(|(k, _)| *k);
        Ok(v)
    }

    /// Entries in the cpumap (its size: the possible CPUs).
    pub fn cpumap_len(&self) -> u32 {
        self.cpus.len()
    }

    /// Lets XDP redirect to `cpu`, with a queue of `qsize` frames.
    pub fn enable_cpu(&mut self, cpu: u32, qsize: u32) -> Result<()> {
        self.cpus.set(cpu, qsize, None, 0).map_err(|e| {
            let what = format!("enabling CPU {cpu} (queue size {qsize})");
            match e {
                aya::maps::xdp::XdpMapError::MapError(e) => BpfError::map(names::CPUS, what)(e),
                other => BpfError::Pinned {
                    path: self.pin_dir.join(names::CPUS),
                    message: format!("{what}: {other}"),
                },
            }
        })
    }

    /// The counters, per CPU (index = CPU).
    pub fn stats_per_cpu(&self) -> Result<Vec<Stats>> {
        let v = self
            .stats
            .get(&0, 0)
            .map_err(BpfError::map(names::STATS, "reading"))?;
        Ok(v.iter().map(Stats::from_words).collect())
    }

    /// The counters, summed over CPUs.
    pub fn stats(&self) -> Result<Stats> {
        let mut s = Stats::default();
        for c in self.stats_per_cpu()? {
            s.add(&c);
        }
        Ok(s)
    }

    /// Packets the tc program put on queue `queue` of direction `upload`,
    /// per CPU that ran it (index = CPU). Queues >= 1024 are not counted.
    pub fn queue_packets(&self, upload: bool, queue: u32) -> Result<Vec<u64>> {
        if queue >= MAX_QUEUES {
            return Ok(Vec::new());
        }
        let key = queue + if upload { MAX_QUEUES } else { 0 };
        let v = self.queues.get(&key, 0).map_err(BpfError::map(
            names::QUEUES,
            format!("reading queue {queue}"),
        ))?;
        Ok(v.iter().copied().collect())
    }

    /// Packets XDP redirected to `cpu`, per CPU that received them.
    pub fn redirects_to(&self, cpu: u32) -> Result<Vec<u64>> {
        let v = self.redirects.get(&cpu, 0).map_err(BpfError::map(
            names::REDIRECTS,
            format!("reading CPU {cpu}"),
        ))?;
        Ok(v.iter().copied().collect())
    }
}
