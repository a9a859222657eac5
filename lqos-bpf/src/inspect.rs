//! What is attached to an interface, as the kernel reports it: the BPF
//! programs of its XDP slot and the `bpf` filters of its clsact egress
//! hook, lqos's or another loader's (LibreQoS's `lqosd` attaches its XDP
//! program through netlink and its tc program at pref `0xC02F`, handle 1).
//! Used by verify (is lqos's filter there, does it decide first) and
//! status. Acts in the calling thread's network namespace.

use std::io;
use std::path::Path;

use crate::attach::{TC_HANDLE, TC_PREF};
use crate::error::{BpfError, Result};
use crate::layout::programs;

/// One `bpf` filter of a clsact egress hook.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EgressFilter {
    /// Its preference (lower decides first).
    pub pref: u16,
    /// Its handle.
    pub handle: u32,
    /// The name the loader gave it (`TCA_BPF_NAME`; lqos's is `lqos_tc`).
    pub name: String,
    /// The program's id.
    pub prog_id: Option<u32>,
}

impl EgressFilter {
    /// Whether this is lqos's filter (pref [`TC_PREF`], handle
    /// [`TC_HANDLE`], program `lqos_tc`).
    pub fn is_lqos(&self) -> bool {
        self.pref == TC_PREF && self.handle == TC_HANDLE && self.name.starts_with(programs::TC)
    }
}

/// The XDP slot of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct XdpSlot {
    /// `native`, `generic`, `offload`, `multi`, or `None` when empty.
    pub mode: Option<&'static str>,
    /// The program's id.
    pub prog_id: Option<u32>,
    /// The program's name, when it could be read.
    pub prog_name: Option<String>,
    /// The program is the one of lqos's XDP link pinned for this interface
    /// (another loader's program of the same name is not).
    pub lqos: bool,
}

impl XdpSlot {
    /// Whether lqos's XDP program holds the slot through its pinned link.
    pub fn is_lqos(&self) -> bool {
        self.lqos
    }
}

/// The program id of lqos's XDP link pinned for interface `name` under
/// `pin_dir`, if there is one.
pub fn pinned_xdp_program(pin_dir: &Path, name: &str) -> Option<u32> {
    let path = crate::attach::xdp_link_path(pin_dir, name);
    let pinned = aya::programs::links::PinnedLink::from_pin(&path).ok()?;
    let link = aya::programs::links::FdLink::from(pinned);
    link.info().ok().map(|i| i.program_id())
}

/// What is attached to one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attached {
    /// Interface name.
    pub name: String,
    /// Its XDP slot.
    pub xdp: XdpSlot,
    /// Every `bpf` filter on its clsact egress hook, lowest pref first
    /// (empty without clsact).
    pub egress: Vec<EgressFilter>,
}

impl Attached {
    /// lqos's tc filter, when it is there.
    pub fn lqos_tc(&self) -> Option<&EgressFilter> {
        self.egress.iter().find(|f| f.is_lqos())
    }

    /// Whether lqos's tc filter is there and decides before every other
    /// `bpf` filter of the hook (a direct-action program's verdict ends
    /// the classification: later filters never see the packet).
    pub fn lqos_decides_first(&self) -> bool {
        self.egress.first().is_some_and(EgressFilter::is_lqos)
    }
}

/// What is attached to interface `name` (in the calling thread's network
/// namespace); lqos's XDP link is looked for under `pin_dir`.
pub fn attached(name: &str, pin_dir: &Path) -> Result<Attached> {
    let ifindex = crate::attach::ifindex(name)?;
    let err = |what: &'static str| {
        let name = name.to_string();
        move |e: io::Error| BpfError::Interface {
            interface: name,
            what: what.into(),
            message: e.to_string(),
        }
    };
    let sock = Netlink::open().map_err(err("opening a netlink socket"))?;
    let mut egress = Vec::new();
    for msg in sock
        .request(&filter_dump(ifindex))
        .map_err(err("listing the egress filters"))?
    {
        if let Some(f) = parse_filter(&msg) {
            egress.push(f);
        }
    }
    egress.sort_by_key(|f| (f.pref, f.handle));
    let mut xdp = XdpSlot::default();
    for msg in sock
        .request(&link_get(ifindex))
        .map_err(err("reading its XDP slot"))?
    {
        if let Some(x) = parse_xdp(&msg) {
            xdp = x;
        }
    }
    if let Some(id) = xdp.prog_id {
        xdp.prog_name = program_name(id);
        xdp.lqos = pinned_xdp_program(pin_dir, name) == Some(id);
    }
    Ok(Attached {
        name: name.to_string(),
        xdp,
        egress,
    })
}

/// The name of loaded program `id`.
fn program_name(id: u32) -> Option<String> {
    aya::programs::loaded_programs()
        .flatten()
        .find(|p| p.id() == id)
        .and_then(|p| p.name_as_str().map(str::to_string))
}

const RTM_GETLINK: u16 = 18;
const RTM_NEWTFILTER: u16 = 44;
const RTM_GETTFILTER: u16 = 46;
const RTM_NEWLINK: u16 = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
/// `TC_H_CLSACT | TC_H_MIN_EGRESS`.
const EGRESS_PARENT: u32 = 0xffff_fff3;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_BPF_NAME: u16 = 7;
const TCA_BPF_ID: u16 = 11;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_PROG_ID: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

fn header(buf: &mut Vec<u8>, kind: u16, flags: u16) {
    buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set below
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id
}

fn finish(mut buf: Vec<u8>) -> Vec<u8> {
    let n = buf.len() as u32;
    buf[0..4].copy_from_slice(&n.to_ne_bytes());
    buf
}

/// `tc filter show dev IFINDEX egress`: a dump of the egress hook.
fn filter_dump(ifindex: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(36);
    header(&mut b, RTM_GETTFILTER, NLM_F_REQUEST | NLM_F_DUMP);
    // struct tcmsg: family, 3 pad, ifindex, handle, parent, info.
    b.extend_from_slice(&[0, 0, 0, 0]);
    b.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&EGRESS_PARENT.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    finish(b)
}

/// `ip link show dev IFINDEX`.
fn link_get(ifindex: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(32);
    header(&mut b, RTM_GETLINK, NLM_F_REQUEST);
    // struct ifinfomsg: family, pad, type, index, flags, change.
    b.extend_from_slice(&[0, 0, 0, 0]);
    b.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    finish(b)
}

/// Netlink attributes of `data`: (type, payload).
fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        let kind = u16::from_ne_bytes([data[2], data[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > data.len() {
            return None;
        }
        let payload = &data[4..len];
        data = &data[((len + 3) & !3).min(data.len())..];
        Some((kind, payload))
    })
}

fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(..4)?.try_into().ok()?))
}

fn string_of(p: &[u8]) -> String {
    let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

/// A `bpf` filter from one `RTM_NEWTFILTER` message (type, then payload).
fn parse_filter((kind, body): &(u16, Vec<u8>)) -> Option<EgressFilter> {
    if *kind != RTM_NEWTFILTER || body.len() < 20 {
        return None;
    }
    let handle = u32_of(&body[8..12])?;
    let info = u32_of(&body[16..20])?;
    let mut is_bpf = false;
    let mut name = String::new();
    let mut prog_id = None;
    for (t, p) in attrs(&body[20..]) {
        match t {
            TCA_KIND => is_bpf = string_of(p) == "bpf",
            TCA_OPTIONS => {
                for (t, p) in attrs(p) {
                    match t {
                        TCA_BPF_NAME => name = string_of(p),
                        TCA_BPF_ID => prog_id = u32_of(p),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    // A dump also lists each preference's chain head without a handle.
    (is_bpf && handle != 0).then_some(EgressFilter {
        pref: (info >> 16) as u16,
        handle,
        name,
        prog_id,
    })
}

/// The XDP slot from one `RTM_NEWLINK` message.
fn parse_xdp((kind, body): &(u16, Vec<u8>)) -> Option<XdpSlot> {
    if *kind != RTM_NEWLINK || body.len() < 16 {
        return None;
    }
    let mut slot = XdpSlot::default();
    for (t, p) in attrs(&body[16..]) {
        if t != IFLA_XDP {
            continue;
        }
        for (t, p) in attrs(p) {
            match t {
                IFLA_XDP_ATTACHED => {
                    slot.mode = match p.first() {
                        Some(1) => Some("native"),
                        Some(2) => Some("generic"),
                        Some(3) => Some("offload"),
                        Some(4) => Some("multi"),
                        _ => None,
                    }
                }
                IFLA_XDP_PROG_ID => slot.prog_id = u32_of(p),
                _ => {}
            }
        }
    }
    Some(slot)
}

/// A rtnetlink socket that sends one request and reads its answers.
struct Netlink {
    fd: std::os::fd::OwnedFd,
}

impl Netlink {
    fn open() -> io::Result<Netlink> {
        use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )?;
        Ok(Netlink { fd })
    }

    /// Sends `req` and collects the answers (type, payload) until the
    /// dump ends or the one answer of a plain request came.
    fn request(&self, req: &[u8]) -> io::Result<Vec<(u16, Vec<u8>)>> {
        use nix::sys::socket::{recv, send, MsgFlags};
        use std::os::fd::AsRawFd;
        let fd = self.fd.as_raw_fd();
        send(fd, req, MsgFlags::empty())?;
        let dump = u16::from_ne_bytes([req[6], req[7]]) & NLM_F_DUMP != 0;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = recv(fd, &mut buf, MsgFlags::empty())?;
            let mut data = &buf[..n];
            while data.len() >= 16 {
                let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
                let kind = u16::from_ne_bytes([data[4], data[5]]);
                if len < 16 || len > data.len() {
                    break;
                }
                let body = &data[16..len];
                match kind {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => {
                        let code = body
                            .get(..4)
                            .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        // No clsact (EINVAL, ENOENT): nothing is attached there.
                        if code != 0 && code != -libc::EINVAL && code != -libc::ENOENT {
                            return Err(io::Error::from_raw_os_error(-code));
                        }
                        return Ok(out);
                    }
                    _ => out.push((kind, body.to_vec())),
                }
                data = &data[((len + 3) & !3).min(data.len())..];
            }
            if !dump && !out.is_empty() {
                return Ok(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(t: u16, p: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&t.to_ne_bytes());
        v.extend_from_slice(p);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn a_bpf_filter_message_gives_pref_handle_and_name() {
        let mut body = vec![0u8; 8];
        body.extend_from_slice(&1u32.to_ne_bytes());
        body.extend_from_slice(&EGRESS_PARENT.to_ne_bytes());
        body.extend_from_slice(&((900u32 << 16) | 0x0300).to_ne_bytes());
        body.extend(attr(TCA_KIND, b"bpf\0"));
        let mut opts = attr(TCA_BPF_NAME, b"lqos_tc:[12]\0");
        opts.extend(attr(TCA_BPF_ID, &42u32.to_ne_bytes()));
        body.extend(attr(TCA_OPTIONS | 0x8000, &opts));
        let f = parse_filter(&(RTM_NEWTFILTER, body)).unwrap();
        assert_eq!(
            f,
            EgressFilter {
                pref: 900,
                handle: 1,
                name: "lqos_tc:[12]".into(),
                prog_id: Some(42),
            }
        );
        assert!(f.is_lqos());
    }
}
