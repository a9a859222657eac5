//! lqos's eBPF classifier (`classifier = "bpf"`, the `lqos-bpf` crate) as
//! an apply, a verify and the reload daemon drive it.
//!
//! The tree and the maps change in an order that never steers a packet
//! into a class that does not exist: before a load only the map entries
//! that can go first are removed ([`lqos_bpf::model::MapDiff::early_removals`]:
//! their addresses go straight to no circuit, or to a covering entry that
//! keeps its class); after the load the programs are installed (or
//! upgraded in place) and the maps brought to the plan. A plan with
//! another classifier removes the data path before its load.
//!
//! [`DataPath`] is that kernel side as the engine and the daemon see it:
//! [`PinnedDataPath`] drives the real one (maps and links pinned under
//! [`NetnsState::bpf_pin_dir`]), keeping a [`lqos_bpf::MapSync`] open so
//! an edit of a few circuits writes only their addresses; [`InMemory`]
//! stands for it in tests.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ipnet::IpNet;
use lqos_bpf::attach::XdpChoice;
use lqos_bpf::index::Indexed;
use lqos_bpf::layout::{CircuitValue, Stats};
use lqos_bpf::maps::Maps;
use lqos_bpf::model::MapDiff;
use lqos_bpf::model::{diff, Entries, MapKey};
use lqos_bpf::plan::{entries, interfaces, CpuPolicy};
use lqos_bpf::preflight::Preflight;
use lqos_bpf::MapSync;
use lqos_tc::ipmap::IpMap;
use lqos_tc::Plan;
use serde::Serialize;

pub use lqos_bpf::maps::ApplyCounts;
pub use lqos_bpf::Installed;

use crate::error::{ApplyError, BpfStep, Result};
use crate::state::NetnsState;

/// Which addresses a map update covers.
#[derive(Debug, Clone, Copy)]
pub enum MapChange<'a> {
    /// Every address of the plan.
    Plan(&'a Plan),
    /// Only these addresses and prefixes, set to what `ip_map` says of
    /// exactly them (none: removed): the old and new prefixes of the
    /// circuits an edit changed.
    Prefixes {
        /// The new plan's IP map.
        ip_map: &'a IpMap,
        /// The prefixes to set.
        nets: &'a [IpNet],
    },
}

/// The kernel side of lqos's eBPF classifier. Methods take `&self` (the
/// engine and the daemon share the handle); an implementation keeps its
/// state behind a lock.
pub trait DataPath: Send + Sync {
    /// Where the maps and links are pinned.
    fn pin_dir(&self) -> &Path;
    /// Whether lqos's data path is installed there.
    fn installed(&self) -> bool;
    /// Checks, before any change, that this machine can run the data path
    /// for `plan` (refusal: [`ApplyError::BpfUnsupported`]); returns the
    /// warnings (e.g. no XDP: no CPU steering).
    fn preflight(&self, plan: &Plan) -> Result<Vec<String>>;
    /// Before a load: removes the entries of `change` that may go first
    /// (nothing when the data path is not installed).
    fn before_load(&self, change: MapChange<'_>) -> Result<ApplyCounts>;
    /// After a load: loads (or upgrades in place) the programs, brings the
    /// maps to `plan` and attaches to its interfaces (detaching any the
    /// plan dropped).
    fn install(&self, plan: &Plan) -> Result<Installed>;
    /// After a load that keeps the interfaces: the maps only.
    fn after_load(&self, change: MapChange<'_>) -> Result<ApplyCounts>;
    /// The live maps and attachments against `plan`, read from the
    /// kernel.
    fn check(&self, plan: &Plan) -> Result<DataPathVerify>;
    /// Removes everything lqos attached and pinned; returns the interfaces
    /// it was attached to.
    fn remove(&self) -> Result<Vec<String>>;
}

/// One difference between the live maps and a plan, by address or prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum MapDrift {
    /// The plan's address is not in the maps (its packets go to a
    /// default class).
    Missing {
        /// Address or prefix.
        net: IpNet,
        /// Its circuit in the plan.
        circuit: String,
    },
    /// The maps hold an address the plan does not have.
    Extra {
        /// Address or prefix.
        net: IpNet,
    },
    /// The maps steer the address elsewhere than the plan.
    Differs {
        /// Address or prefix.
        net: IpNet,
        /// Its circuit in the plan.
        circuit: String,
        /// What the maps hold (`classid/queue` down, up).
        live: String,
        /// What the plan says.
        planned: String,
    },
}

impl fmt::Display for MapDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapDrift::Missing { net, circuit } => write!(
                f,
                "missing map entry {net} (circuit {})",
                circuit.escape_debug()
            ),
            MapDrift::Extra { net } => write!(f, "extra map entry {net}"),
            MapDrift::Differs {
                net,
                circuit,
                live,
                planned,
            } => write!(
                f,
                "map entry {net} (circuit {}) is {live}, plan says {planned}",
                circuit.escape_debug()
            ),
        }
    }
}

/// What lqos's programs are attached as on one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AttachState {
    /// Interface.
    pub dev: String,
    /// lqos's tc filter is on the clsact egress hook.
    pub tc: bool,
    /// Another `bpf` filter decides before lqos's (its pref and name).
    pub before: Option<(u16, String)>,
    /// The XDP slot: `native`/`generic` with lqos's program, `other NAME`
    /// with another loader's, `empty`.
    pub xdp: String,
}

/// lqos's eBPF classifier against a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DataPathVerify {
    /// Where its pins are.
    pub pin_dir: PathBuf,
    /// Whether it is installed there at all.
    pub installed: bool,
    /// Entries in the maps.
    pub live_entries: usize,
    /// Entries the plan needs.
    pub planned_entries: usize,
    /// Map differences (at most [`MAP_DRIFT_LISTED`]; `map_drift` counts
    /// them all).
    pub maps: Vec<MapDrift>,
    /// Map differences in all.
    pub map_drift: usize,
    /// Per interface of the plan.
    pub interfaces: Vec<AttachState>,
}

/// Map differences listed one by one in a [`DataPathVerify`].
pub const MAP_DRIFT_LISTED: usize = 100;

impl DataPathVerify {
    /// Nothing differs: installed, every entry as planned, lqos's filter
    /// first on every interface. (An XDP slot held by another program is
    /// reported, not drift: classification works from tc.)
    pub fn is_clean(&self) -> bool {
        self.installed
            && self.map_drift == 0
            && self.interfaces.iter().all(|i| i.tc && i.before.is_none())
    }

    /// Number of differences.
    pub fn drift_count(&self) -> usize {
        usize::from(!self.installed)
            + self.map_drift
            + self
                .interfaces
                .iter()
                .filter(|i| !i.tc || i.before.is_some())
                .count()
    }
}

impl fmt::Display for DataPathVerify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.installed {
            return writeln!(
                f,
                "bpf classifier: not installed ({}): 1 difference(s)",
                self.pin_dir.display()
            );
        }
        writeln!(
            f,
            "bpf classifier ({}): plan {} map entries, live {}: {}",
            self.pin_dir.display(),
            self.planned_entries,
            self.live_entries,
            if self.is_clean() {
                "in sync".to_string()
            } else {
                format!("{} difference(s)", self.drift_count())
            }
        )?;
        for d in &self.maps {
            writeln!(f, "  bpf: {d}")?;
        }
        if self.map_drift > self.maps.len() {
            writeln!(
                f,
                "  bpf: ... and {} more map entries",
                self.map_drift - self.maps.len()
            )?;
        }
        for i in &self.interfaces {
            let tc = match (&i.before, i.tc) {
                (_, false) => "lqos's tc filter is missing".to_string(),
                (Some((pref, name)), true) => format!(
                    "bpf filter {} at pref {pref} decides before lqos's",
                    name.escape_debug()
                ),
                (None, true) => "tc filter first".to_string(),
            };
            writeln!(f, "  {}: {tc}, XDP {}", i.dev, i.xdp)?;
        }
        Ok(())
    }
}

/// `classid/queue` of both directions.
fn describe(v: &CircuitValue) -> String {
    let c = |x: u32| format!("{:x}:{:x}", x >> 16, x & 0xffff);
    format!(
        "down {} queue {}, up {} queue {}",
        c(v.down.classid),
        v.down.queue,
        c(v.up.classid),
        v.up.queue
    )
}

/// The differences between `live` and `want` by address (where each
/// entry is placed, hash, fast map or trie, is not drift).
pub fn map_drift(plan: &Plan, live: &Entries, want: &Entries) -> (Vec<MapDrift>, usize) {
    let logical = |e: &Entries| -> std::collections::HashMap<MapKey, CircuitValue> {
        e.iter().map(|(k, v)| (k.logical(), *v)).collect()
    };
    let (l, w) = (logical(live), logical(want));
    let circuit = |v: &CircuitValue| {
        plan.allocation
            .circuits
            .get(v.circuit as usize)
            .map_or_else(|| format!("#{}", v.circuit), |c| c.id.to_string())
    };
    let mut out = Vec::new();
    for (k, v) in &w {
        match l.get(k) {
            None => out.push(MapDrift::Missing {
                net: k.net(),
                circuit: circuit(v),
            }),
            Some(lv) if lv != v => out.push(MapDrift::Differs {
                net: k.net(),
                circuit: circuit(v),
                live: describe(lv),
                planned: describe(v),
            }),
            Some(_) => {}
        }
    }
    for k in l.keys() {
        if !w.contains_key(k) {
            out.push(MapDrift::Extra { net: k.net() });
        }
    }
    out.sort_by_key(|d| match d {
        MapDrift::Missing { net, .. } | MapDrift::Extra { net } | MapDrift::Differs { net, .. } => {
            *net
        }
    });
    let n = out.len();
    out.truncate(MAP_DRIFT_LISTED);
    (out, n)
}

fn bpf(step: BpfStep) -> impl FnOnce(lqos_bpf::BpfError) -> ApplyError {
    move |source| ApplyError::Bpf { step, source }
}

/// The real data path, pinned under a directory (one per network
/// namespace: [`crate::state::NetnsState::bpf_pin_dir`]).
#[derive(Debug)]
pub struct PinnedDataPath {
    pin_dir: PathBuf,
    netns: Option<String>,
    xdp: XdpChoice,
    cpus: Option<CpuPolicy>,
    /// The online CPUs' policy (without `cpus`): read at the first use and
    /// again at each install, so the values written agree with the cpumap
    /// the install enabled, and an edit reads no file for it.
    online: Mutex<Option<CpuPolicy>>,
    state: Mutex<Pinned>,
}

#[derive(Debug, Default)]
struct Pinned {
    /// The last preflight, for the install that follows it.
    preflight: Option<Preflight>,
    /// The maps and their entries, once opened.
    sync: Option<MapSync>,
}

impl PinnedDataPath {
    /// The data path of the interfaces of `state`'s network namespace,
    /// pinned under its [`NetnsState::bpf_pin_dir`].
    pub fn new(state: &NetnsState) -> PinnedDataPath {
        PinnedDataPath::at(state.bpf_pin_dir(), state.netns())
    }

    /// The same, pinned under `pin_dir`.
    pub fn at(pin_dir: PathBuf, netns: Option<&str>) -> PinnedDataPath {
        PinnedDataPath {
            pin_dir,
            netns: netns.map(str::to_string),
            xdp: XdpChoice::Auto,
            cpus: None,
            online: Mutex::new(None),
            state: Mutex::new(Pinned::default()),
        }
    }

    /// The same with XDP attached as `xdp` says (default: native where
    /// the driver has it, else generic).
    pub fn with_xdp(mut self, xdp: XdpChoice) -> PinnedDataPath {
        self.xdp = xdp;
        self
    }

    /// The same with TX queues owned by `cpus` (default: the online CPUs).
    pub fn with_cpus(mut self, cpus: CpuPolicy) -> PinnedDataPath {
        self.cpus = Some(cpus);
        self
    }

    fn cpus(&self) -> Result<CpuPolicy> {
        if let Some(c) = &self.cpus {
            return Ok(c.clone());
        }
        let mut online = self.online.lock().unwrap_or_else(|p| p.into_inner());
        match &*online {
            Some(c) => Ok(c.clone()),
            None => {
                let c = CpuPolicy::online().map_err(bpf(BpfStep::OnlineCpus))?;
                *online = Some(c.clone());
                Ok(c)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pinned> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The open maps (opened and read on first use).
    fn sync<'a>(&self, st: &'a mut Pinned) -> Result<&'a mut MapSync> {
        if st.sync.is_none() {
            st.sync = Some(MapSync::open(&self.pin_dir).map_err(bpf(BpfStep::OpenMaps))?);
        }
        Ok(st.sync.as_mut().expect("just opened"))
    }

    fn desired(&self, plan: &Plan) -> Result<Entries> {
        entries(plan, &self.cpus()?).map_err(bpf(BpfStep::PlaceAddresses))
    }
}

impl DataPath for PinnedDataPath {
    fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    fn installed(&self) -> bool {
        lqos_bpf::installed(&self.pin_dir)
    }

    fn preflight(&self, plan: &Plan) -> Result<Vec<String>> {
        let ifs =
            interfaces(&plan.config).map_err(|source| ApplyError::BpfUnsupported { source })?;
        let names: Vec<&str> = ifs.iter().map(|i| i.name.as_str()).collect();
        let pre = lqos_bpf::preflight::preflight(&self.pin_dir, self.netns.as_deref(), &names)
            .map_err(|source| ApplyError::BpfUnsupported { source })?;
        // Every address fits the maps' fields.
        self.desired(plan)?;
        let warnings = pre.warnings.clone();
        self.lock().preflight = Some(pre);
        Ok(warnings)
    }

    fn before_load(&self, change: MapChange<'_>) -> Result<ApplyCounts> {
        // Maps this process opened are installed; otherwise look.
        if self.lock().sync.is_none() && !self.installed() {
            return Ok(ApplyCounts::default());
        }
        let want = match change {
            MapChange::Plan(p) => Some(self.desired(p)?),
            MapChange::Prefixes { .. } => None,
        };
        let cpus = self.cpus()?;
        let mut st = self.lock();
        let sync = self.sync(&mut st)?;
        let d = match (change, want) {
            (MapChange::Prefixes { ip_map, nets }, _) => sync
                .diff_prefixes(ip_map, nets, &cpus)
                .map_err(bpf(BpfStep::PlaceAddresses))?,
            (_, Some(want)) => sync.diff_to(&want),
            (MapChange::Plan(_), None) => unreachable!("computed above"),
        };
        sync.apply(&d.early_removals())
            .map_err(bpf(BpfStep::RemoveEarly))
    }

    fn install(&self, plan: &Plan) -> Result<Installed> {
        let pre = self.lock().preflight.take();
        let pre = match pre {
            Some(p) => p,
            None => {
                self.preflight(plan)?;
                self.lock().preflight.take().expect("just set")
            }
        };
        let mut opts = lqos_bpf::InstallOptions::default();
        opts.pin_dir = self.pin_dir.clone();
        opts.netns = self.netns.clone();
        opts.xdp = self.xdp;
        // The CPUs online now: the install enables them in the cpumap.
        *self.online.lock().unwrap_or_else(|p| p.into_inner()) = None;
        opts.cpus = Some(self.cpus()?);
        // The maps may be created anew (first install, new layout): the
        // open handle is replaced by the one the install synced.
        let mut st = self.lock();
        st.sync = None;
        let (done, sync) =
            lqos_bpf::install_checked(plan, &opts, pre).map_err(bpf(BpfStep::Install))?;
        st.sync = Some(sync);
        Ok(done)
    }

    fn after_load(&self, change: MapChange<'_>) -> Result<ApplyCounts> {
        let want = match change {
            MapChange::Plan(p) => Some(self.desired(p)?),
            MapChange::Prefixes { .. } => None,
        };
        let cpus = self.cpus()?;
        let mut st = self.lock();
        let sync = self.sync(&mut st)?;
        match (change, want) {
            (MapChange::Prefixes { ip_map, nets }, _) => sync
                .sync_prefixes(ip_map, nets, &cpus)
                .map_err(bpf(BpfStep::UpdateMaps)),
            (_, Some(want)) => sync.sync_owned(want).map_err(bpf(BpfStep::UpdateMaps)),
            (MapChange::Plan(_), None) => unreachable!("computed above"),
        }
    }

    fn check(&self, plan: &Plan) -> Result<DataPathVerify> {
        let want = self.desired(plan)?;
        let mut v = DataPathVerify {
            pin_dir: self.pin_dir.clone(),
            installed: self.installed(),
            live_entries: 0,
            planned_entries: want.len(),
            maps: Vec::new(),
            map_drift: 0,
            interfaces: Vec::new(),
        };
        if !v.installed {
            return Ok(v);
        }
        let live = Maps::open(&self.pin_dir)
            .and_then(|m| m.read())
            .map_err(bpf(BpfStep::ReadMaps))?;
        v.live_entries = live.len();
        (v.maps, v.map_drift) = map_drift(plan, &live, &want);
        // What follows starts from what the kernel holds.
        if let Some(s) = self.lock().sync.as_mut() {
            s.reload().map_err(bpf(BpfStep::ReadMaps))?;
        }
        let ifs = interfaces(&plan.config).map_err(bpf(BpfStep::ReadInterfaces))?;
        v.interfaces = lqos_bpf::sys::in_netns(self.netns.as_deref(), || {
            ifs.iter()
                .map(|i| {
                    let a = lqos_bpf::inspect::attached(&i.name, &self.pin_dir)?;
                    let lqos = a.egress.iter().position(|f| f.is_lqos());
                    let before = match lqos {
                        Some(at) => a.egress[..at].first().map(|f| (f.pref, f.name.clone())),
                        None => None,
                    };
                    let xdp = match (&a.xdp.mode, a.xdp.is_lqos()) {
                        (None, _) => "empty".to_string(),
                        (Some(m), true) => (*m).to_string(),
                        (Some(m), false) => format!(
                            "held by another program ({}, {m})",
                            a.xdp.prog_name.as_deref().unwrap_or("?")
                        ),
                    };
                    Ok(AttachState {
                        dev: i.name.clone(),
                        tc: lqos.is_some(),
                        before,
                        xdp,
                    })
                })
                .collect()
        })
        .map_err(bpf(BpfStep::ReadAttachments))?;
        Ok(v)
    }

    fn remove(&self) -> Result<Vec<String>> {
        let mut st = self.lock();
        st.sync = None;
        lqos_bpf::remove(&self.pin_dir, self.netns.as_deref()).map_err(bpf(BpfStep::Remove))
    }
}

/// The data path's own counters (per CPU, from its per-CPU maps): what
/// the programs did with the packets they saw, and which CPU ran the tc
/// program for each TX queue's packets (with CPU steering every queue's
/// packets are handled by the CPU that owns it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Counters {
    /// Summed over CPUs.
    pub total: CpuCounters,
    /// Per CPU that counted anything.
    pub per_cpu: Vec<CpuCounters>,
    /// Per TX queue that carried a packet: its packets per CPU.
    pub queues: Vec<QueueCounters>,
    /// The share of the queues' packets handled by the CPU that owns
    /// their queue (1.0 with full CPU steering).
    pub on_owner_share: Option<f64>,
}

/// The counters of one CPU (or of all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CpuCounters {
    /// The CPU (`None`: the sum).
    pub cpu: Option<u32>,
    /// tc: a circuit's class and queue were set.
    pub classified: u64,
    /// tc: IP of no circuit: a default class.
    pub defaulted: u64,
    /// tc: not IP or truncated: a default class.
    pub unparsed: u64,
    /// XDP: redirected to the circuit's CPU.
    pub redirected: u64,
    /// XDP: already on the circuit's CPU: passed.
    pub local: u64,
    /// XDP: no circuit, not IP, or no CPU entry: passed.
    pub passed: u64,
}

impl CpuCounters {
    fn of(cpu: Option<u32>, s: &Stats) -> CpuCounters {
        CpuCounters {
            cpu,
            classified: s.tc_classified,
            defaulted: s.tc_defaulted,
            unparsed: s.tc_unparsed,
            redirected: s.xdp_redirected,
            local: s.xdp_local,
            passed: s.xdp_unknown + s.xdp_unparsed + s.xdp_nocpu,
        }
    }
}

/// One TX queue's packets, per CPU that ran the tc program for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct QueueCounters {
    /// `download` or `upload`.
    pub direction: &'static str,
    /// The TX queue.
    pub queue: u32,
    /// The CPU that owns it.
    pub owner: u32,
    /// `(cpu, packets)` for every CPU that counted any.
    pub per_cpu: Vec<(u32, u64)>,
}

/// The counters of the data path pinned under `pin_dir`, for a plan of
/// `plan`'s TX queues whose owners are `cpus`.
pub fn counters(pin_dir: &Path, plan: &Plan, cpus: &CpuPolicy) -> Result<Counters> {
    let maps = Maps::open(pin_dir).map_err(bpf(BpfStep::OpenMaps))?;
    let per = maps.stats_per_cpu().map_err(bpf(BpfStep::ReadCounters))?;
    let mut total = Stats::default();
    let mut per_cpu = Vec::new();
    for (cpu, st) in per.iter().enumerate() {
        total.add(st);
        if *st != Stats::default() {
            per_cpu.push(CpuCounters::of(Some(cpu as u32), st));
        }
    }
    let mut queues = Vec::new();
    let (mut all, mut own) = (0u64, 0u64);
    for upload in [false, true] {
        for q in 0..plan.config.queues {
            let v = maps
                .queue_packets(upload, q)
                .map_err(bpf(BpfStep::ReadCounters))?;
            let owner = u32::from(cpus.cpu_of(q));
            let per_cpu: Vec<(u32, u64)> = v
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| (c as u32, *n))
                .collect();
            if per_cpu.is_empty() {
                continue;
            }
            for (c, n) in &per_cpu {
                all += n;
                if *c == owner {
                    own += n;
                }
            }
            queues.push(QueueCounters {
                direction: if upload { "upload" } else { "download" },
                queue: q,
                owner,
                per_cpu,
            });
        }
    }
    Ok(Counters {
        total: CpuCounters::of(None, &total),
        per_cpu,
        queues,
        on_owner_share: (all > 0).then(|| own as f64 / all as f64),
    })
}

impl fmt::Display for Counters {
    /// One line: what tc and XDP did, and the queues' share on their CPUs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.total;
        write!(
            f,
            "bpf classifier: {} packets classified, {} to a default class ({} not IP); XDP {} \
             steered to their queue's CPU, {} already there",
            t.classified,
            t.defaulted + t.unparsed,
            t.unparsed,
            t.redirected,
            t.local
        )?;
        if let Some(s) = self.on_owner_share {
            write!(
                f,
                "; {:.1}% of the queues' packets handled by the CPU that owns the queue",
                s * 100.0
            )?;
        }
        Ok(())
    }
}

/// What the engine did with the data path during an apply.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct DataPathReport {
    /// The preflight's warnings.
    pub warnings: Vec<String>,
    /// Entries removed before the load.
    pub early: ApplyCounts,
    /// The data path was removed before the load (the plan has another
    /// classifier): the interfaces it was attached to.
    pub removed: Option<Vec<String>>,
    /// The install after the load (`None`: a dry run, a failed load, or
    /// another classifier).
    pub install: Option<Result<Installed>>,
    /// Time of the map changes and the install.
    pub took: std::time::Duration,
    /// The live data path against the plan, after the load (with
    /// `verify_after`), or as it is (a dry run).
    pub verify: Option<DataPathVerify>,
}

impl DataPathReport {
    /// The install's error, if it failed.
    pub fn error(&self) -> Option<&ApplyError> {
        self.install.as_ref().and_then(|r| r.as_ref().err())
    }
}

/// A data path in memory, for tests of the engine and the daemon: the
/// maps are an [`Indexed`] set changed by the same diffs as the kernel's,
/// and every call is logged.
#[derive(Debug)]
pub struct InMemory {
    pin_dir: PathBuf,
    cpus: CpuPolicy,
    state: Mutex<MemState>,
}

#[derive(Debug, Default)]
struct MemState {
    installed: bool,
    maps: Indexed,
    interfaces: Vec<String>,
    log: Vec<String>,
    fail: Option<BpfStep>,
}

impl Default for InMemory {
    fn default() -> Self {
        InMemory {
            pin_dir: PathBuf::from("/nonexistent/lqos-test"),
            cpus: CpuPolicy::new(vec![0, 1]),
            state: Mutex::default(),
        }
    }
}

impl InMemory {
    /// Nothing installed.
    pub fn new() -> InMemory {
        InMemory::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call so far, one line each (`preflight`, `before 0 written
    /// 2 removed`, `install ens19,ens20`, `after ...`, `remove`).
    pub fn log(&self) -> Vec<String> {
        self.lock().log.clone()
    }

    /// The entries the maps hold.
    pub fn entries(&self) -> Entries {
        self.lock().maps.entries().clone()
    }

    /// What the maps decide for `addr`.
    pub fn lookup(&self, addr: IpAddr) -> Option<CircuitValue> {
        self.lock().maps.entries().program_lookup(addr).copied()
    }

    /// Changes an entry behind lqos's back (drift).
    pub fn tamper(&self, net: IpNet, value: Option<CircuitValue>) {
        let mut st = self.lock();
        let d = st.maps.edit(&[(net, value)]);
        st.maps.apply(&d);
    }

    /// Makes the next call of `step` fail: [`BpfStep::Preflight`],
    /// [`BpfStep::RemoveEarly`] (before a load), [`BpfStep::Install`] or
    /// [`BpfStep::UpdateMaps`] (after a load).
    pub fn fail_next(&self, step: BpfStep) {
        self.lock().fail = Some(step);
    }

    fn step(&self, st: &mut MemState, step: BpfStep) -> Result<()> {
        if st.fail == Some(step) {
            st.fail = None;
            st.log.push(format!("{step} failed"));
            return Err(ApplyError::Bpf {
                step,
                source: lqos_bpf::BpfError::Pinned {
                    path: self.pin_dir.clone(),
                    message: "injected failure".into(),
                },
            });
        }
        Ok(())
    }

    fn change(&self, st: &MemState, change: MapChange<'_>) -> Result<MapDiff> {
        Ok(match change {
            MapChange::Plan(p) => diff(
                st.maps.entries(),
                &entries(p, &self.cpus).map_err(bpf(BpfStep::PlaceAddresses))?,
            ),
            MapChange::Prefixes { ip_map, nets } => {
                let changes: Vec<(IpNet, Option<CircuitValue>)> = nets
                    .iter()
                    .map(|n| {
                        let v = lqos_bpf::model::exact(ip_map, *n)
                            .map(|e| lqos_bpf::model::value_of(e, |q| self.cpus.cpu_of(q)))
                            .transpose()
                            .map_err(bpf(BpfStep::PlaceAddresses))?;
                        Ok((n.trunc(), v))
                    })
                    .collect::<Result<_>>()?;
                st.maps.edit(&changes)
            }
        })
    }
}

fn counts(d: &MapDiff) -> ApplyCounts {
    let mut n = ApplyCounts::default();
    n.written = d.writes.len();
    n.removed = d.removes.len();
    n
}

impl DataPath for InMemory {
    fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    fn installed(&self) -> bool {
        self.lock().installed
    }

    fn preflight(&self, plan: &Plan) -> Result<Vec<String>> {
        let mut st = self.lock();
        self.step(&mut st, BpfStep::Preflight)?;
        interfaces(&plan.config).map_err(|source| ApplyError::BpfUnsupported { source })?;
        st.log.push("preflight".into());
        Ok(Vec::new())
    }

    fn before_load(&self, change: MapChange<'_>) -> Result<ApplyCounts> {
        let mut st = self.lock();
        self.step(&mut st, BpfStep::RemoveEarly)?;
        if !st.installed {
            st.log.push("before: not installed".into());
            return Ok(ApplyCounts::default());
        }
        let d = self.change(&st, change)?.early_removals();
        st.maps.apply(&d);
        let n = counts(&d);
        st.log.push(format!("before {} removed", n.removed));
        Ok(n)
    }

    fn install(&self, plan: &Plan) -> Result<Installed> {
        let mut st = self.lock();
        self.step(&mut st, BpfStep::Install)?;
        let d = self.change(&st, MapChange::Plan(plan))?;
        st.maps.apply(&d);
        let ifs = interfaces(&plan.config).map_err(bpf(BpfStep::Install))?;
        st.interfaces = ifs.iter().map(|i| i.name.clone()).collect();
        let fresh = !st.installed;
        st.installed = true;
        let n = counts(&d);
        let line = format!(
            "install {} ({} written, {} removed)",
            st.interfaces.join(","),
            n.written,
            n.removed
        );
        st.log.push(line);
        let mut done = Installed::default();
        done.preflight.cpumap_entries = 2;
        done.preflight.xdp = true;
        done.entries = n;
        done.interfaces = ifs
            .iter()
            .enumerate()
            .map(|(i, f)| {
                use lqos_bpf::attach::{IfaceReport, TcStatus, XdpStatus};
                let (xdp, tc) = if fresh {
                    (XdpStatus::Native, TcStatus::Attached)
                } else {
                    (XdpStatus::Replaced, TcStatus::Replaced)
                };
                IfaceReport::new(f.name.clone(), i as u32 + 1, xdp, tc)
            })
            .collect();
        Ok(done)
    }

    fn after_load(&self, change: MapChange<'_>) -> Result<ApplyCounts> {
        let mut st = self.lock();
        self.step(&mut st, BpfStep::UpdateMaps)?;
        let d = self.change(&st, change)?;
        st.maps.apply(&d);
        let n = counts(&d);
        st.log.push(format!(
            "after {} written, {} removed",
            n.written, n.removed
        ));
        Ok(n)
    }

    fn check(&self, plan: &Plan) -> Result<DataPathVerify> {
        let st = self.lock();
        let want = entries(plan, &self.cpus).map_err(bpf(BpfStep::PlaceAddresses))?;
        let (maps, map_drift) = map_drift(plan, st.maps.entries(), &want);
        Ok(DataPathVerify {
            pin_dir: self.pin_dir.clone(),
            installed: st.installed,
            live_entries: st.maps.entries().len(),
            planned_entries: want.len(),
            maps,
            map_drift,
            interfaces: st
                .interfaces
                .iter()
                .map(|d| AttachState {
                    dev: d.clone(),
                    tc: st.installed,
                    before: None,
                    xdp: "native".into(),
                })
                .collect(),
        })
    }

    fn remove(&self) -> Result<Vec<String>> {
        let mut st = self.lock();
        st.installed = false;
        st.maps = Indexed::default();
        st.log.push("remove".into());
        Ok(std::mem::take(&mut st.interfaces))
    }
}
