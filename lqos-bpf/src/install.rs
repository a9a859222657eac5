//! The calls a front-end makes: install (or upgrade) the data path for a
//! plan, update its maps for a new plan, check them, look an address up,
//! remove everything.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use lqos_tc::ipmap::IpMap;
use lqos_tc::Plan;

use crate::attach::{self, AttachOptions, IfaceReport, XdpChoice};
use crate::error::Result;
use crate::index::Indexed;
use crate::layout::{addr_bytes, CircuitValue, DEFAULT_FLOW_TABLE};
use crate::loader::{DataPath, DEFAULT_PIN_DIR};
use crate::maps::{ApplyCounts, Maps};
use crate::model::{diff, exact, value_of, Entries, MapDiff};
use crate::plan::{entries, interfaces, CpuPolicy};
use crate::preflight::{preflight, Preflight};
use crate::sys;

/// Options of [`install`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstallOptions {
    /// bpffs directory of the pins (default [`DEFAULT_PIN_DIR`]).
    pub pin_dir: PathBuf,
    /// Network namespace of the interfaces (`/run/netns/NAME`).
    pub netns: Option<String>,
    /// XDP mode.
    pub xdp: XdpChoice,
    /// Which CPU owns which TX queue (None: the online CPUs in order).
    pub cpus: Option<CpuPolicy>,
    /// Entries of the TCP flow table (default [`DEFAULT_FLOW_TABLE`]).
    pub flow_table_size: u32,
}

impl Default for InstallOptions {
    fn default() -> Self {
        InstallOptions {
            pin_dir: PathBuf::from(DEFAULT_PIN_DIR),
            netns: None,
            xdp: XdpChoice::Auto,
            cpus: None,
            flow_table_size: DEFAULT_FLOW_TABLE,
        }
    }
}

/// What [`install`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Installed {
    /// The preflight's findings (warnings included).
    pub preflight: Preflight,
    /// Map entries written and removed.
    pub entries: ApplyCounts,
    /// Per interface: XDP mode, tc filter, XPS.
    pub interfaces: Vec<IfaceReport>,
    /// Interfaces detached because the plan no longer has them.
    pub detached: Vec<String>,
    /// Maps of older layout versions unpinned.
    pub stale_maps: Vec<String>,
}

/// Installs the data path for `plan`, or upgrades a running one in place:
/// preflight (refuses before any change), load the programs (reusing the
/// pinned maps), bring the maps to the plan's addresses by difference,
/// attach to the plan's interfaces (replacing running programs
/// atomically), detach interfaces the plan dropped, unpin maps of older
/// layouts, forget the TCP statistics of circuits the plan dropped. Packets of known circuits stay classified throughout.
pub fn install(plan: &Plan, opts: &InstallOptions) -> Result<Installed> {
    let ifs = interfaces(&plan.config)?;
    let names: Vec<&str> = ifs.iter().map(|i| i.name.as_str()).collect();
    let pre = preflight(&opts.pin_dir, opts.netns.as_deref(), &names)?;
    install_checked(plan, opts, pre).map(|(done, _)| done)
}

/// [`install`] after its preflight ran (`pre`, for the same pin directory,
/// namespace and interfaces): everything but the checks. Returns the
/// report and a [`MapSync`] holding the entries the maps now hold, for a
/// process that goes on updating them (the reload daemon).
pub fn install_checked(
    plan: &Plan,
    opts: &InstallOptions,
    pre: Preflight,
) -> Result<(Installed, MapSync)> {
    let ifs = interfaces(&plan.config)?;
    let cpus = match &opts.cpus {
        Some(c) => c.clone(),
        None => CpuPolicy::online()?,
    };
    // The addresses are placed on a thread while the programs load and
    // the maps are created (preallocated: the longer of the two).
    let (want, dp) = std::thread::scope(|s| {
        let placing = s.spawn(|| entries(plan, &cpus));
        let dp = DataPath::load_with(&opts.pin_dir, crate::loader::OBJECT, opts.flow_table_size);
        let want = placing
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (want, dp)
    });
    let (want, mut dp) = (want?, dp?);
    // MapSync::sync also forgets the TCP statistics of circuits not in `want`.
    let mut sync = MapSync::open(&opts.pin_dir)?;
    let counts = sync.sync_owned(want)?;
    let attach_opts = AttachOptions {
        xdp: if pre.xdp { opts.xdp } else { XdpChoice::Off },
        disable_xps: true,
        cpus: cpus.cpus().to_vec(),
    };
    let pin_dir = opts.pin_dir.clone();
    let (reports, detached) = sys::in_netns(opts.netns.as_deref(), || {
        let reports = dp.attach(&ifs, &attach_opts)?;
        let mut detached = Vec::new();
        let maps = Maps::open(&pin_dir)?;
        for (ifindex, _) in maps.ifaces()? {
            if reports.iter().any(|r| r.ifindex == ifindex) {
                continue;
            }
            if let Ok(name) = nix::net::if_::if_indextoname(ifindex) {
                let name = name.to_string_lossy().into_owned();
                attach::detach(&pin_dir, &name)?;
                detached.push(name);
            } else {
                // The interface is gone: only its configuration remains.
                Maps::open(&pin_dir)?.remove_iface(ifindex)?;
            }
        }
        Ok((reports, detached))
    })?;
    let stale_maps = attach::remove_stale_layouts(&opts.pin_dir)?;
    let done = Installed {
        preflight: pre,
        entries: counts,
        interfaces: reports,
        detached,
        stale_maps,
    };
    Ok((done, sync))
}

/// Whether lqos's data path is installed under `pin_dir`: any map of any
/// layout version, or an XDP link, is pinned there.
pub fn installed(pin_dir: &Path) -> bool {
    std::fs::read_dir(pin_dir).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n == "links" || attach::is_lqos_map(n))
        })
    })
}

/// Brings the maps of a running data path to `plan`'s addresses by
/// difference (for a reload that keeps the interfaces), and forgets the
/// TCP statistics of circuits the plan no longer has.
pub fn update(pin_dir: &Path, plan: &Plan, cpus: &CpuPolicy) -> Result<ApplyCounts> {
    let want = entries(plan, cpus)?;
    let n = Maps::open(pin_dir)?.sync(&want)?;
    crate::tcp::prune_for(pin_dir, &want)?;
    Ok(n)
}

/// The changes that would bring the live maps to `plan` (empty: in sync).
/// Applying it ([`Maps::apply`]) repairs drift.
pub fn check(pin_dir: &Path, plan: &Plan, cpus: &CpuPolicy) -> Result<MapDiff> {
    let live = Maps::open(pin_dir)?.read()?;
    Ok(diff(&live, &entries(plan, cpus)?))
}

/// What the live maps decide for `addr`, as the programs do (exact entry,
/// else longest prefix). `None`: a default class.
pub fn lookup(pin_dir: &Path, addr: IpAddr) -> Result<Option<CircuitValue>> {
    Maps::open(pin_dir)?.lookup(addr)
}

/// Removes everything lqos attached (XDP links, tc filters) in network
/// namespace `netns` and everything it pinned under `pin_dir`.
pub fn remove(pin_dir: &Path, netns: Option<&str>) -> Result<Vec<String>> {
    sys::in_netns(netns, || attach::remove_all(pin_dir))
}

/// The maps and the entries they hold, kept in memory (with an index of
/// their prefixes), for a process that changes them often, such as the
/// reload daemon: [`MapSync::sync`] brings them to a whole new set by
/// difference, [`MapSync::set`] and [`MapSync::sync_prefixes`] change a
/// few addresses at a cost that does not grow with the set.
#[derive(Debug)]
pub struct MapSync {
    maps: Maps,
    current: Indexed,
}

impl MapSync {
    /// Opens the pinned maps and reads their entries once.
    pub fn open(pin_dir: &Path) -> Result<MapSync> {
        let maps = Maps::open(pin_dir)?;
        let current = Indexed::new(maps.read()?);
        Ok(MapSync { maps, current })
    }

    /// The entries the maps hold.
    pub fn current(&self) -> &Entries {
        self.current.entries()
    }

    /// Brings the maps to `desired` (placed, as [`Entries::from_ip_map`]
    /// makes it): a diff of the whole set in memory, then only the
    /// difference written; the TCP statistics of circuits not in
    /// `desired` are forgotten.
    pub fn sync(&mut self, desired: &Entries) -> Result<ApplyCounts> {
        self.sync_cow(std::borrow::Cow::Borrowed(desired))
    }

    /// [`MapSync::sync`] keeping `desired` as the entries held (a cold load
    /// then copies nothing).
    pub fn sync_owned(&mut self, desired: Entries) -> Result<ApplyCounts> {
        self.sync_cow(std::borrow::Cow::Owned(desired))
    }

    fn sync_cow(&mut self, desired: std::borrow::Cow<'_, Entries>) -> Result<ApplyCounts> {
        let d = diff(self.current.entries(), &desired);
        // A diff of a large part of the set (a cold load): the maps now
        // hold `desired`, and indexing it anew costs less than recording
        // each change.
        let n = if d.len() > self.current.entries().len() / 2 {
            let n = self.apply_maps(&d)?;
            self.current = Indexed::with_lens(desired.into_owned(), d.fast_after);
            n
        } else {
            self.apply(&d)?
        };
        // The entries held are `desired` now, either way.
        crate::tcp::prune_for(self.maps.pin_dir(), self.current.entries())?;
        Ok(n)
    }

    /// The ordered changes from the entries held to `desired` (nothing is
    /// written).
    pub fn diff_to(&self, desired: &Entries) -> MapDiff {
        diff(self.current.entries(), desired)
    }

    /// The ordered changes [`MapSync::sync_prefixes`] would make (nothing
    /// is written).
    pub fn diff_prefixes(
        &self,
        ip_map: &IpMap,
        nets: &[IpNet],
        cpus: &CpuPolicy,
    ) -> Result<MapDiff> {
        Ok(self.current.edit(&prefix_changes(ip_map, nets, cpus)?))
    }

    /// Reads the maps' entries again (after something else may have
    /// changed them: a verify), so the next update starts from the truth.
    pub fn reload(&mut self) -> Result<()> {
        self.current = Indexed::new(self.maps.read()?);
        Ok(())
    }

    /// Sets each listed address or prefix to its value (`None`: removes
    /// it), placing them as [`Indexed::edit`] does.
    pub fn set(&mut self, changes: &[(IpNet, Option<CircuitValue>)]) -> Result<ApplyCounts> {
        let d = self.current.edit(changes);
        self.apply(&d)
    }

    /// Makes the listed addresses and prefixes what `ip_map` says of them:
    /// the value of its entry for exactly that prefix, or none. For an
    /// edit of a few circuits, pass their old and new prefixes.
    pub fn sync_prefixes(
        &mut self,
        ip_map: &IpMap,
        nets: &[IpNet],
        cpus: &CpuPolicy,
    ) -> Result<ApplyCounts> {
        let changes = prefix_changes(ip_map, nets, cpus)?;
        self.set(&changes)
    }

    /// Applies a diff computed by the caller. On an error the in-memory
    /// copy is read again from the kernel, so the next call starts from
    /// the truth.
    pub fn apply(&mut self, d: &MapDiff) -> Result<ApplyCounts> {
        let n = self.apply_maps(d)?;
        self.current.apply(d);
        Ok(n)
    }

    /// Applies `d` to the maps only; on an error the in-memory copy is
    /// read again from the kernel.
    fn apply_maps(&mut self, d: &MapDiff) -> Result<ApplyCounts> {
        self.maps.apply(d).inspect_err(|_| {
            if let Ok(now) = self.maps.read() {
                self.current = Indexed::new(now);
            }
        })
    }

    /// The maps.
    pub fn maps(&mut self) -> &mut Maps {
        &mut self.maps
    }
}

/// Each listed prefix with the value `ip_map` gives exactly that prefix
/// (`None`: no entry).
fn prefix_changes(
    ip_map: &IpMap,
    nets: &[IpNet],
    cpus: &CpuPolicy,
) -> Result<Vec<(IpNet, Option<CircuitValue>)>> {
    nets.iter()
        .map(|n| {
            let v = match exact(ip_map, *n) {
                Some(e) => Some(value_of(e, |q| cpus.cpu_of(q))?),
                None => None,
            };
            Ok((n.trunc(), v))
        })
        .collect()
}

impl Maps {
    /// What the programs decide for `addr`: its exact entry, else the
    /// longest prefix containing it.
    pub fn lookup(&self, addr: IpAddr) -> Result<Option<CircuitValue>> {
        let a = addr_bytes(addr);
        if let Some(v) = self.get(&crate::model::MapKey::Host(a))? {
            return Ok(Some(v));
        }
        let lens = self.fast_lens()?;
        let lens = if addr.is_ipv4() { lens.v4 } else { lens.v6 };
        for len in lens.into_iter().take_while(|l| *l > 0) {
            let mask = u128::MAX << (128 - u32::from(len));
            let net = (u128::from_be_bytes(a) & mask).to_be_bytes();
            let key = crate::model::MapKey::Fast {
                prefix_len: len,
                addr: net,
            };
            if let Some(v) = self.get(&key)? {
                return Ok(Some(v));
            }
        }
        self.longest_prefix(a)
    }
}
