//! Reading the kernel: links, live trees, and which qdisc kinds exist.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use lqos_tc::{Qdisc, QdiscKind, TcHandle, TcOp, TcTree};

use crate::error::{ApplyError, Result};
use crate::netns::{unique_name, ScratchNetns};

/// What preflight needs to know about an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSummary {
    /// Kernel interface index.
    pub ifindex: u32,
    /// Number of TX queues (`num_tx_queues`).
    pub num_tx_queues: u32,
}

/// Where live state comes from: the kernel over netlink
/// ([`NetlinkLive`]), or a fake ([`crate::backend::Recording`]).
pub trait LiveSource: Sync {
    /// The interface, or `None` if it does not exist.
    fn link(&self, dev: &str) -> Result<Option<LinkSummary>>;
    /// The interface's qdiscs and classes.
    fn dump(&self, dev: &str) -> Result<TcTree>;
    /// Whether this kernel accepts a qdisc of `kind` (with those options),
    /// checked without touching any real interface. `Ok(Err(msg))` carries
    /// the kernel's refusal.
    fn probe_qdisc(&self, kind: &QdiscKind) -> Result<std::result::Result<(), String>>;
}

/// Reads the live trees of `devs` from `source`.
pub fn read_live(source: &dyn LiveSource, devs: &[&str]) -> Result<BTreeMap<String, TcTree>> {
    devs.iter()
        .map(|d| Ok((d.to_string(), source.dump(d)?)))
        .collect()
}

/// Probes qdisc kinds in a throwaway namespace with a veth pair, once per
/// kind per value of this type (cache the value for a run).
#[derive(Debug, Default)]
pub struct KindProbe {
    cache: Mutex<HashMap<String, std::result::Result<(), String>>>,
}

impl KindProbe {
    /// An empty cache.
    pub fn new() -> KindProbe {
        KindProbe::default()
    }

    /// Tries `qdisc add dev p0 root handle 1: KIND ...` in a scratch
    /// namespace (created and deleted here). The options are the ones given,
    /// so a kernel that has the kind but rejects the options also fails.
    pub fn probe(&self, kind: &QdiscKind) -> Result<std::result::Result<(), String>> {
        let name = kind.name().to_string();
        if let Some(r) = self.cache.lock().expect("probe cache").get(&name) {
            return Ok(r.clone());
        }
        let ns = ScratchNetns::with_veth(&unique_name("lqos-probe", &name), "p0", "p1", 1)?;
        let op = TcOp::AddQdisc(Qdisc {
            parent: TcHandle::ROOT,
            handle: TcHandle::new(1, 0),
            kind: kind.clone(),
        });
        let r = probe_send(ns.name(), "p0", &op)?;
        drop(ns);
        self.cache
            .lock()
            .expect("probe cache")
            .insert(name, r.clone());
        Ok(r)
    }
}

/// Sends one op to `dev` in `netns`; `Ok(Err(kernel message))` if refused.
fn probe_send(netns: &str, dev: &str, op: &TcOp) -> Result<std::result::Result<(), String>> {
    use crate::backend::{Backend, IfaceOps, NoProgress, RootDelete, TcBatch, TcMode};
    let tc = TcBatch::new(Some(netns.to_string()), TcMode::Serial);
    let rep = tc.load(
        &[IfaceOps {
            dev: dev.to_string(),
            ops: vec![op.clone()],
        }],
        RootDelete::None,
        &NoProgress,
    );
    match rep.into_result() {
        Ok(_) => Ok(Ok(())),
        Err(ApplyError::OpFailed { message, .. }) => Ok(Err(message)),
        Err(e) => Err(e),
    }
}

/// Live state from the kernel over rtnetlink, optionally inside a network
/// namespace, with a per-run [`KindProbe`].
#[derive(Debug, Default)]
pub struct NetlinkLive {
    /// Namespace to read (None = the current one).
    pub netns: Option<String>,
    probe: KindProbe,
}

impl NetlinkLive {
    /// Reads the current namespace, or `netns`.
    pub fn new(netns: Option<String>) -> NetlinkLive {
        NetlinkLive {
            netns,
            probe: KindProbe::new(),
        }
    }
}

impl LiveSource for NetlinkLive {
    fn link(&self, _dev: &str) -> Result<Option<LinkSummary>> {
        Err(ApplyError::Netlink {
            dev: None,
            context: "link".into(),
            message: "netlink module not merged yet".into(),
        })
    }

    fn dump(&self, _dev: &str) -> Result<TcTree> {
        Err(ApplyError::Netlink {
            dev: None,
            context: "dump".into(),
            message: "netlink module not merged yet".into(),
        })
    }

    fn probe_qdisc(&self, kind: &QdiscKind) -> Result<std::result::Result<(), String>> {
        self.probe.probe(kind)
    }
}
