//! Attaching the programs so they outlive the process, replacing running
//! ones atomically, and removing everything lqos attached and pinned.
//!
//! - XDP: a bpf_link pinned at `PIN_DIR/links/xdp_IFNAME`. A new program
//!   replaces the old one in place (`BPF_LINK_UPDATE`); the link lives as
//!   long as its pin. Native mode where the driver has it, else generic.
//!   Where another program holds the interface's XDP slot, classification
//!   still works from tc and the report says so.
//! - tc: a `cls_bpf` filter in direct-action mode on the interface's
//!   `clsact` egress hook at pref [`TC_PREF`], handle [`TC_HANDLE`]. A new
//!   program replaces the filter's program in place (an `RTM_NEWTFILTER`
//!   without `NLM_F_EXCL` on the same pref and handle). The filter belongs
//!   to the interface, not to the process. Pref 900 is below the range of
//!   lqos's `flower` filters (1000-2328), so on an interface that still
//!   has them this classifier decides first.
//!
//! Everything here acts in the calling thread's network namespace; wrap it
//! in [`crate::sys::in_netns`] for interfaces in another one.

use std::path::{Path, PathBuf};

use aya::programs::links::{FdLink, PinnedLink};
use aya::programs::tc::{NlOptions, SchedClassifierLink, TcAttachOptions, TcHandle as AyaTcHandle};
use aya::programs::xdp::XdpLink;
use aya::programs::{ProgramError, TcAttachType, XdpMode};

use crate::error::{BpfError, Result};
use crate::layout::{programs, IfaceConfig};
use crate::loader::DataPath;
use crate::maps::Maps;

/// Filter priority (`tc filter ... pref 900`) of lqos's cls_bpf filter on
/// clsact egress.
pub const TC_PREF: u16 = 900;
/// Filter handle of lqos's cls_bpf filter.
pub const TC_HANDLE: u32 = 1;
/// Frames queued per CPU in the cpumap.
pub const CPUMAP_QSIZE: u32 = 2048;

/// How to attach XDP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XdpChoice {
    /// Native where the driver supports it, generic otherwise.
    #[default]
    Auto,
    /// Native only (fail over to tc-only with a warning).
    Native,
    /// Generic (skb) mode only.
    Generic,
    /// No XDP: classification from tc alone, no CPU steering.
    Off,
}

/// What XDP ended up as on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum XdpStatus {
    /// Newly attached in the driver (native XDP).
    Native,
    /// Newly attached in generic (skb) mode: steering works, at the cost
    /// of an skb per packet before XDP runs. Holds why native mode was
    /// refused (empty when generic was asked for).
    Generic(String),
    /// An existing lqos link was updated in place to the new program (its
    /// mode unchanged).
    Replaced,
    /// Not attached, by choice.
    Off,
    /// Not attached: the reason (e.g. another program holds the slot).
    /// Classification still works from tc.
    Unavailable(String),
}

/// What tc ended up as on one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TcStatus {
    /// A new filter.
    Attached,
    /// The existing lqos filter now runs the new program.
    Replaced,
}

/// One interface to attach to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Interface name (in the namespace attaching runs in).
    pub name: String,
    /// Its configuration for the programs.
    pub config: IfaceConfig,
}

/// Options of [`DataPath::attach`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttachOptions {
    /// XDP mode.
    pub xdp: XdpChoice,
    /// Switch XPS off on every TX queue (needed for the TX queue choice to
    /// hold; see [`crate::xps`]).
    pub disable_xps: bool,
    /// CPUs XDP may redirect to (each gets a cpumap entry).
    pub cpus: Vec<u32>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            xdp: XdpChoice::Auto,
            disable_xps: true,
            cpus: Vec::new(),
        }
    }
}

/// The outcome on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IfaceReport {
    /// Interface name.
    pub name: String,
    /// Its index.
    pub ifindex: u32,
    /// XDP.
    pub xdp: XdpStatus,
    /// tc.
    pub tc: TcStatus,
    /// TX queues whose XPS was switched off.
    pub xps_off: u32,
}

/// The path of the pinned XDP link of interface `name`.
pub fn xdp_link_path(pin_dir: &Path, name: &str) -> PathBuf {
    pin_dir.join("links").join(format!("xdp_{name}"))
}

/// Index of interface `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    nix::net::if_::if_nametoindex(name).map_err(|e| BpfError::Interface {
        interface: name.to_string(),
        what: "looking up its index".into(),
        message: e.to_string(),
    })
}

fn iface_err(name: &str, what: impl Into<String>) -> impl FnOnce(String) -> BpfError + '_ {
    let what = what.into();
    move |message| BpfError::Interface {
        interface: name.to_string(),
        what,
        message,
    }
}

fn errno(e: &ProgramError) -> Option<i32> {
    match e {
        ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
        ProgramError::TcError(aya::programs::tc::TcError::NetlinkError(n)) => n.raw_os_error(),
        ProgramError::TcError(aya::programs::tc::TcError::IoError(io)) => io.raw_os_error(),
        ProgramError::XdpError(aya::programs::xdp::XdpError::NetlinkError(n)) => n.raw_os_error(),
        _ => None,
    }
}

impl DataPath {
    /// Attaches both programs to `interfaces` (or replaces the running
    /// ones in place), in an order that never leaves a packet of a known
    /// circuit unclassified: the interfaces' configuration and the cpumap
    /// first, then XPS off, then tc, then XDP. Call it after the maps hold
    /// the circuits ([`Maps::sync`]).
    pub fn attach(
        &mut self,
        interfaces: &[Interface],
        opts: &AttachOptions,
    ) -> Result<Vec<IfaceReport>> {
        let mut maps = self.maps()?;
        let mut idx = Vec::with_capacity(interfaces.len());
        for i in interfaces {
            let n = ifindex(&i.name)?;
            maps.set_iface(n, &i.config)?;
            idx.push(n);
        }
        for &cpu in &opts.cpus {
            maps.enable_cpu(cpu, CPUMAP_QSIZE)?;
        }
        let mut out = Vec::with_capacity(interfaces.len());
        for (i, &n) in interfaces.iter().zip(&idx) {
            let xps_off = if opts.disable_xps {
                crate::xps::disable_xps_here(&i.name)?
            } else {
                0
            };
            let tc = self.attach_tc(&i.name)?;
            let xdp = self.attach_xdp(&i.name, opts.xdp)?;
            out.push(IfaceReport {
                name: i.name.clone(),
                ifindex: n,
                xdp,
                tc,
                xps_off,
            });
        }
        Ok(out)
    }

    /// Attaches the tc program to `name`'s clsact egress (adding clsact),
    /// or replaces the program of lqos's existing filter there.
    pub fn attach_tc(&mut self, name: &str) -> Result<TcStatus> {
        match aya::programs::tc::qdisc_add_clsact(name) {
            Ok(()) => {}
            Err(aya::programs::tc::TcError::NetlinkError(e))
                if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(iface_err(name, "adding the clsact qdisc")(e.to_string())),
        }
        let prog = self.tc_mut();
        let opts = TcAttachOptions::Netlink(NlOptions {
            priority: TC_PREF,
            handle: AyaTcHandle::from(TC_HANDLE),
            classid: None,
        });
        let (id, status) = match prog.attach_with_options(name, TcAttachType::Egress, opts) {
            Ok(id) => (id, TcStatus::Attached),
            Err(e) if errno(&e) == Some(libc::EEXIST) => {
                let link = SchedClassifierLink::attached(
                    name,
                    TcAttachType::Egress,
                    TC_PREF,
                    AyaTcHandle::from(TC_HANDLE),
                    None,
                )
                .map_err(|e| iface_err(name, "finding lqos's tc filter")(e.to_string()))?;
                let id = prog.attach_to_link(link).map_err(|e| {
                    iface_err(name, "replacing lqos_tc in its filter")(e.to_string())
                })?;
                (id, TcStatus::Replaced)
            }
            Err(e) => {
                return Err(iface_err(
                    name,
                    format!("attaching {} to clsact egress", programs::TC),
                )(e.to_string()))
            }
        };
        // The filter belongs to the interface: keep it when this process
        // ends (dropping the link would delete it).
        let link = prog
            .take_link(id)
            .map_err(|e| iface_err(name, "taking the tc link")(e.to_string()))?;
        std::mem::forget(link);
        Ok(status)
    }

    /// Attaches the XDP program to `name` through a pinned bpf_link, or
    /// updates lqos's existing link in place.
    pub fn attach_xdp(&mut self, name: &str, choice: XdpChoice) -> Result<XdpStatus> {
        let path = xdp_link_path(self.pin_dir(), name);
        if choice == XdpChoice::Off {
            return Ok(XdpStatus::Off);
        }
        let prog = self.xdp_mut();
        if path.exists() {
            let pinned = PinnedLink::from_pin(&path).map_err(|e| {
                iface_err(name, format!("opening {}", path.display()))(e.to_string())
            })?;
            let link = XdpLink::try_from(FdLink::from(pinned))
                .map_err(|e| iface_err(name, "reading the pinned XDP link")(e.to_string()))?;
            match prog.attach_to_link(link) {
                // The pin keeps the link; the program's handle on it goes
                // (an fd link's drop only closes the descriptor), so
                // unpinning later destroys it.
                Ok(id) => {
                    drop(
                        prog.take_link(id)
                            .map_err(|e| iface_err(name, "taking the XDP link")(e.to_string()))?,
                    );
                    return Ok(XdpStatus::Replaced);
                }
                // The interface the link was made for is gone (ENOLINK: a
                // re-created interface has a new index): attach afresh.
                Err(e) if errno(&e) == Some(libc::ENOLINK) => {
                    std::fs::remove_file(&path)
                        .map_err(BpfError::io(&path, "unpinning a dead XDP link"))?;
                }
                Err(e) => return Err(iface_err(name, "updating the XDP link")(e.to_string())),
            }
        }
        let modes: &[XdpMode] = match choice {
            XdpChoice::Auto => &[XdpMode::Driver, XdpMode::Skb],
            XdpChoice::Native => &[XdpMode::Driver],
            XdpChoice::Generic => &[XdpMode::Skb],
            XdpChoice::Off => &[],
        };
        let mut why = Vec::new();
        for mode in modes {
            match prog.attach(name, *mode) {
                Ok(id) => {
                    let link = prog
                        .take_link(id)
                        .map_err(|e| iface_err(name, "taking the XDP link")(e.to_string()))?;
                    let fd = FdLink::try_from(link).map_err(|e| {
                        iface_err(name, "XDP attached through netlink, not a bpf_link")(
                            e.to_string(),
                        )
                    })?;
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir).map_err(BpfError::io(dir, "creating"))?;
                    }
                    fd.pin(&path).map_err(|e| {
                        iface_err(name, format!("pinning {}", path.display()))(e.to_string())
                    })?;
                    return Ok(match mode {
                        XdpMode::Driver => XdpStatus::Native,
                        _ => XdpStatus::Generic(why.join("; ")),
                    });
                }
                Err(e) => why.push(format!(
                    "{} mode: {e}{}",
                    if *mode == XdpMode::Driver {
                        "native"
                    } else {
                        "generic"
                    },
                    errno(&e)
                        .map(|n| format!(" ({})", std::io::Error::from_raw_os_error(n)))
                        .unwrap_or_default()
                )),
            }
        }
        Ok(XdpStatus::Unavailable(why.join("; ")))
    }
}

/// Detaches both programs from interface `name` (the tc filter at
/// [`TC_PREF`]/[`TC_HANDLE`] and the XDP link pinned under `pin_dir`) and
/// removes its configuration from the maps. Its packets are then left
/// alone. Absent pieces are skipped.
pub fn detach(pin_dir: &Path, name: &str) -> Result<()> {
    let mut maps = Maps::open(pin_dir).ok();
    detach_here(pin_dir, name, maps.as_mut())
}

fn detach_here(pin_dir: &Path, name: &str, maps: Option<&mut Maps>) -> Result<()> {
    let path = xdp_link_path(pin_dir, name);
    if path.exists() {
        let pinned = PinnedLink::from_pin(&path)
            .map_err(|e| iface_err(name, format!("opening {}", path.display()))(e.to_string()))?;
        // Unpinning and dropping the last reference destroys the link,
        // which detaches the program.
        let fd = pinned
            .unpin()
            .map_err(|e| iface_err(name, format!("unpinning {}", path.display()))(e.to_string()))?;
        drop(fd);
    }
    if let Ok(link) = SchedClassifierLink::attached(
        name,
        TcAttachType::Egress,
        TC_PREF,
        AyaTcHandle::from(TC_HANDLE),
        None,
    ) {
        // Dropping the link deletes the filter (absent: nothing to do).
        drop(link);
    }
    if let (Some(m), Ok(n)) = (maps, ifindex(name)) {
        m.remove_iface(n)?;
    }
    Ok(())
}

/// Removes everything lqos attached and pinned under `pin_dir` in the
/// calling thread's namespace: for every interface in `lqos1_ifaces` and
/// every pinned XDP link, the XDP link and the tc filter; then the pinned
/// maps and the directory. Packets are left alone from then on (their
/// class falls back to each HTB's default). Safe to run twice.
pub fn remove_all(pin_dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    if let Ok(maps) = Maps::open(pin_dir) {
        for (n, _) in maps.ifaces()? {
            if let Ok(name) = nix::net::if_::if_indextoname(n) {
                names.push(name.to_string_lossy().into_owned());
            }
        }
    }
    let links = pin_dir.join("links");
    if let Ok(rd) = std::fs::read_dir(&links) {
        for e in rd.flatten() {
            if let Some(n) = e.file_name().to_str().and_then(|s| s.strip_prefix("xdp_")) {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    for n in &names {
        detach_here(pin_dir, n, None)?;
    }
    remove_pins(pin_dir)?;
    Ok(names)
}

/// Unpins every map of every layout version and the link directory.
fn remove_pins(pin_dir: &Path) -> Result<()> {
    let links = pin_dir.join("links");
    if let Ok(rd) = std::fs::read_dir(&links) {
        for e in rd.flatten() {
            let p = e.path();
            std::fs::remove_file(&p).map_err(BpfError::io(&p, "unpinning"))?;
        }
        std::fs::remove_dir(&links).map_err(BpfError::io(&links, "removing"))?;
    }
    if let Ok(rd) = std::fs::read_dir(pin_dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_lqos_map(name) {
                let p = e.path();
                std::fs::remove_file(&p).map_err(BpfError::io(&p, "unpinning"))?;
            }
        }
    }
    match std::fs::remove_dir(pin_dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        // Something else lives there, or it is a mount point: leave it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EBUSY)) => Ok(()),
        Err(e) => Err(BpfError::io(pin_dir, "removing")(e)),
    }
}

/// `lqosN_...` with N a layout version.
fn is_lqos_map(name: &str) -> bool {
    name.strip_prefix("lqos")
        .and_then(|r| r.split_once('_'))
        .is_some_and(|(v, rest)| {
            !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty()
        })
}

/// Unpins the maps of other layout versions than this one (after an
/// upgrade has attached programs that use the new maps): their memory is
/// freed once no program uses them.
pub fn remove_stale_layouts(pin_dir: &Path) -> Result<Vec<String>> {
    let mine = format!("lqos{}_", crate::layout::LAYOUT_VERSION);
    let mut gone = Vec::new();
    if let Ok(rd) = std::fs::read_dir(pin_dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_lqos_map(name) && !name.starts_with(&mine) {
                let p = e.path();
                std::fs::remove_file(&p).map_err(BpfError::io(&p, "unpinning"))?;
                gone.push(name.to_string());
            }
        }
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lqos_map_names() {
        assert!(is_lqos_map("lqos1_hosts"));
        assert!(is_lqos_map("lqos12_nets"));
        assert!(!is_lqos_map("lqos_hosts"));
        assert!(!is_lqos_map("lqosx_hosts"));
        assert!(!is_lqos_map("links"));
        assert!(!is_lqos_map("lqos1_"));
    }
}
