//! Reading the kernel: links, live trees, and which qdisc kinds exist.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use lqos_tc::ops::{Qdisc, QdiscKind};
use lqos_tc::tree::TcTree;
use lqos_tc::{TcHandle, TcOp};
use serde::{Deserialize, Serialize};

use crate::error::{ApplyError, ClassifierMissing, NetlinkAction, QdiscRefusal, Result};
use crate::netlink::{NetlinkError, NetlinkSocket, SendOptions};
use crate::netns::{unique_name, ScratchNetns};
use crate::stats::{IfaceSamples, PollRequest, Polled};

/// What preflight needs to know about an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkSummary {
    /// Kernel interface index.
    pub ifindex: i32,
    /// Number of TX queues (`num_tx_queues`).
    pub num_tx_queues: u32,
}

/// Whether this kernel accepts a qdisc kind: `Ok(())` or the refusal.
pub type KindSupport = std::result::Result<(), QdiscRefusal>;

/// Where live state comes from: the kernel over netlink
/// ([`NetlinkLive`]), or a fake ([`crate::backend::Recording`]).
pub trait LiveSource: Sync {
    /// The network namespace read (for messages); `None` = the current one.
    fn netns(&self) -> Option<&str> {
        None
    }
    /// The interface, or `None` if it does not exist.
    fn link(&self, dev: &str) -> Result<Option<LinkSummary>>;
    /// The interface's qdiscs and classes.
    fn dump(&self, dev: &str) -> Result<TcTree>;
    /// Whether this kernel accepts a qdisc of each kind (with those
    /// options), checked without touching any real interface. `Ok(Err(r))`
    /// carries the kernel's refusal.
    fn probe_qdiscs(&self, kinds: &[QdiscKind]) -> Result<Vec<KindSupport>>;
    /// Whether this kernel can run the `tc` classifier: Linux >= 6.0 (skbedit
    /// `queue_mapping` on egress), `clsact`, `cls_flower` and `act_skbedit`,
    /// checked without touching any real interface. `Ok(Err(why))` says
    /// what is missing.
    fn probe_classifier(&self) -> Result<std::result::Result<(), ClassifierMissing>>;
    /// The machine's memory for the memory preflight
    /// ([`crate::memory::check_memory`]); `None` (the default) skips it.
    fn meminfo(&self) -> Option<crate::meminfo::MemInfo> {
        None
    }
    /// One statistics poll ([`crate::stats`]): per interface of `req` the
    /// class dumps of its HTBs and, where asked, its qdisc dump. An
    /// interface that cannot be read is in [`Polled::failed`]; the others
    /// are still read.
    fn poll(&self, req: &PollRequest) -> Polled;
}

/// `(major, minor)` of a kernel release string (`6.1.0-18-cloud-amd64`).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// The oldest kernel whose skbedit honours `queue_mapping` on egress.
pub const CLASSIFIER_MIN_KERNEL: (u32, u32) = (6, 0);

/// Probe cache key of the classifier check.
const CLASSIFIER_KEY: &str = "classifier:clsact+flower+skbedit";

/// Reads the live trees of `devs` from `source`.
pub fn read_live(source: &dyn LiveSource, devs: &[&str]) -> Result<BTreeMap<String, TcTree>> {
    devs.iter()
        .map(|d| Ok((d.to_string(), source.dump(d)?)))
        .collect()
}

/// Probes qdisc kinds in a throwaway namespace with a veth pair, once per
/// kind per value of this type (keep the value for a run). With a cache
/// file, kinds found supported are remembered until the next reboot, so a
/// reload does not create a namespace at all.
#[derive(Debug, Default)]
pub struct KindProbe {
    cache: Mutex<HashMap<String, KindSupport>>,
    classifier: Mutex<Option<std::result::Result<(), ClassifierMissing>>>,
    file: Option<PathBuf>,
}

/// Supported qdisc kinds as saved in the probe cache file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ProbeFile {
    /// `/proc/sys/kernel/random/boot_id` when written.
    boot_id: String,
    /// Kinds the kernel accepted.
    supported: BTreeSet<String>,
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl KindProbe {
    /// An empty cache.
    pub fn new() -> KindProbe {
        KindProbe::default()
    }

    /// A probe that reads and updates `file` (kinds found supported since
    /// the last boot). Unreadable or stale files are ignored; write errors
    /// too (the cache is only an optimisation).
    pub fn with_cache_file(file: PathBuf) -> KindProbe {
        let mut cache = HashMap::new();
        let mut classifier = None;
        if let Ok(text) = std::fs::read(&file) {
            if let Ok(pf) = serde_json::from_slice::<ProbeFile>(&text) {
                if !pf.boot_id.is_empty() && pf.boot_id == boot_id() {
                    for k in pf.supported {
                        if k == CLASSIFIER_KEY {
                            classifier = Some(Ok(()));
                        } else {
                            cache.insert(k, Ok(()));
                        }
                    }
                }
            }
        }
        KindProbe {
            cache: Mutex::new(cache),
            classifier: Mutex::new(classifier),
            file: Some(file),
        }
    }

    fn save(&self) {
        let Some(file) = &self.file else { return };
        let mut supported: BTreeSet<String> = self
            .cache
            .lock()
            .expect("probe cache")
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(k, _)| k.clone())
            .collect();
        if matches!(*self.classifier.lock().expect("probe cache"), Some(Ok(()))) {
            supported.insert(CLASSIFIER_KEY.to_string());
        }
        let pf = ProbeFile {
            boot_id: boot_id(),
            supported,
        };
        if let Ok(bytes) = serde_json::to_vec(&pf) {
            let _ = crate::state::write_atomic(file, &bytes);
        }
    }

    /// [`KindProbe::probe_many`] for one kind.
    pub fn probe(&self, kind: &QdiscKind) -> Result<KindSupport> {
        Ok(self
            .probe_many(std::slice::from_ref(kind))?
            .pop()
            .unwrap_or(Ok(())))
    }

    /// For each kind: `qdisc add dev p0 root handle 1: KIND ...` over
    /// netlink in one scratch namespace (created and deleted here, only if
    /// some kind is not cached yet), then the root delete. The options are
    /// the ones given, so a kernel that has the kind but rejects the
    /// options also fails. `Ok(Err(r))` carries the kernel's refusal.
    pub fn probe_many(&self, kinds: &[QdiscKind]) -> Result<Vec<KindSupport>> {
        let todo: Vec<&QdiscKind> = {
            let cache = self.cache.lock().expect("probe cache");
            kinds
                .iter()
                .filter(|k| !cache.contains_key(k.name()))
                .collect()
        };
        if !todo.is_empty() {
            // Probe namespaces of killed runs.
            let _ = crate::netns::cleanup_stale("lqos-probe");
            let ns = ScratchNetns::with_veth(&unique_name("lqos-probe", "kinds"), "p0", "p1", 1)?;
            let mut sock = NetlinkSocket::open_in_netns(ns.name())
                .map_err(|e| netlink_error(None, NetlinkAction::OpenProbeSocket, e))?;
            let link = sock
                .link("p0")
                .map_err(|e| netlink_error(Some("p0"), NetlinkAction::ProbeLink, e))?;
            for kind in todo {
                let ops = [
                    TcOp::AddQdisc(Qdisc {
                        parent: TcHandle::ROOT,
                        handle: TcHandle::new(1, 0),
                        kind: kind.clone(),
                    }),
                    TcOp::delete_root(),
                ];
                let r =
                    match sock.send_ops(link.ifindex, &ops, &SendOptions::default(), &mut |_| {}) {
                        Ok(_) => Ok(()),
                        Err(f) if f.index == 0 => Err(QdiscRefusal::new(f.errno, f.message)),
                        Err(_) => Ok(()), // added fine; the cleanup does not matter
                    };
                self.cache
                    .lock()
                    .expect("probe cache")
                    .insert(kind.name().to_string(), r);
            }
            drop(sock);
            drop(ns);
            self.save();
        }
        let cache = self.cache.lock().expect("probe cache");
        Ok(kinds.iter().map(|k| cache[k.name()].clone()).collect())
    }
}

impl KindProbe {
    /// [`LiveSource::probe_classifier`]: the kernel release from
    /// `/proc/sys/kernel/osrelease`, then a `clsact` and one flower +
    /// skbedit filter on a veth in a throwaway namespace (cached like the
    /// qdisc kinds).
    pub fn probe_classifier(&self) -> Result<std::result::Result<(), ClassifierMissing>> {
        // A supported classifier is remembered in the cache file like the
        // qdisc kinds.
        if let Some(r) = &*self.classifier.lock().expect("probe cache") {
            return Ok(r.clone());
        }
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let r = match kernel_version(&release) {
            Some(v) if v < CLASSIFIER_MIN_KERNEL => Err(ClassifierMissing::OldKernel {
                release: release.trim().to_string(),
                min: CLASSIFIER_MIN_KERNEL,
            }),
            _ => self.probe_filter_ops()?,
        };
        *self.classifier.lock().expect("probe cache") = Some(r.clone());
        self.save();
        Ok(r)
    }

    fn probe_filter_ops(&self) -> Result<std::result::Result<(), ClassifierMissing>> {
        let _ = crate::netns::cleanup_stale("lqos-probe");
        let ns = ScratchNetns::with_veth(&unique_name("lqos-probe", "cls"), "p0", "p1", 1)?;
        let mut sock = NetlinkSocket::open_in_netns(ns.name())
            .map_err(|e| netlink_error(None, NetlinkAction::OpenProbeSocket, e))?;
        let link = sock
            .link("p0")
            .map_err(|e| netlink_error(Some("p0"), NetlinkAction::ProbeLink, e))?;
        let net = "192.0.2.1/32".parse().expect("literal");
        let ops = [
            TcOp::ReplaceQdisc(lqos_tc::ops::Qdisc::clsact()),
            TcOp::ReplaceFilter(lqos_tc::classify::FlowerFilter::steer(
                lqos_tc::classify::MatchSide::Dst,
                net,
                1,
                0,
                TcHandle::new(1, 1),
            )),
        ];
        Ok(
            match sock.send_ops(link.ifindex, &ops, &SendOptions::default(), &mut |_| {}) {
                Ok(_) => Ok(()),
                Err(f) => Err(ClassifierMissing::Refused {
                    op: lqos_tc::render::render_line("p0", &ops[f.index.min(1)]),
                    message: f.message,
                }),
            },
        )
    }
}

/// Maps a socket-layer error to [`ApplyError`].
pub(crate) fn netlink_error(
    dev: Option<&str>,
    action: NetlinkAction,
    e: NetlinkError,
) -> ApplyError {
    match e {
        NetlinkError::NoSuchInterface { name } => ApplyError::NoInterface {
            dev: name,
            netns: None,
            config_key: None,
        },
        source => ApplyError::Netlink {
            dev: dev.map(str::to_string),
            action,
            source,
        },
    }
}

/// Opens a netlink socket in `netns` (or the current namespace).
pub(crate) fn open_socket(netns: Option<&str>) -> Result<NetlinkSocket> {
    match netns {
        Some(ns) => NetlinkSocket::open_in_netns(ns),
        None => NetlinkSocket::open(),
    }
    .map_err(|e| netlink_error(None, NetlinkAction::OpenSocket, e))
}

/// Live state from the kernel over rtnetlink, optionally inside a network
/// namespace, with a per-run [`KindProbe`]. One socket, reused.
#[derive(Debug, Default)]
pub struct NetlinkLive {
    netns: Option<String>,
    sock: Mutex<Option<NetlinkSocket>>,
    probe: KindProbe,
}

impl NetlinkLive {
    /// Reads the current namespace, or `netns`.
    pub fn new(netns: Option<String>) -> NetlinkLive {
        NetlinkLive {
            netns,
            sock: Mutex::new(None),
            probe: KindProbe::new(),
        }
    }

    /// Remembers supported qdisc kinds in `file` across runs (see
    /// [`KindProbe::with_cache_file`]).
    pub fn with_probe_cache(mut self, file: PathBuf) -> NetlinkLive {
        self.probe = KindProbe::with_cache_file(file);
        self
    }

    fn with_sock<T>(&self, f: impl FnOnce(&mut NetlinkSocket) -> Result<T>) -> Result<T> {
        let mut guard = self.sock.lock().expect("netlink socket");
        if guard.is_none() {
            *guard = Some(open_socket(self.netns.as_deref())?);
        }
        f(guard.as_mut().expect("socket just opened"))
    }

    /// One interface of a [`LiveSource::poll`]: the class dumps of
    /// `htbs` and, with `qdiscs`, its qdisc dump.
    fn poll_iface(&self, dev: &str, htbs: &[TcHandle], qdiscs: bool) -> Result<IfaceSamples> {
        self.with_sock(|s| {
            let link = s
                .link(dev)
                .map_err(|e| netlink_error(Some(dev), NetlinkAction::LookUpInterface, e))?;
            let mut r = IfaceSamples::empty(dev);
            s.class_samples_of(link.ifindex, htbs, &mut r.classes)
                .map_err(|e| netlink_error(Some(dev), NetlinkAction::ReadClassStats, e))?;
            if qdiscs {
                s.qdisc_samples(link.ifindex, &mut r.qdiscs)
                    .map_err(|e| netlink_error(Some(dev), NetlinkAction::ReadQdiscStats, e))?;
            }
            Ok(r)
        })
        .map_err(|e| self.in_ns(e))
    }

    fn in_ns(&self, e: ApplyError) -> ApplyError {
        match e {
            ApplyError::NoInterface {
                dev, config_key, ..
            } => ApplyError::NoInterface {
                dev,
                netns: self.netns.clone(),
                config_key,
            },
            e => e,
        }
    }
}

impl LiveSource for NetlinkLive {
    fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    fn link(&self, dev: &str) -> Result<Option<LinkSummary>> {
        self.with_sock(|s| match s.link(dev) {
            Ok(l) => Ok(Some(LinkSummary {
                ifindex: l.ifindex,
                num_tx_queues: l.num_tx_queues,
            })),
            Err(NetlinkError::NoSuchInterface { .. }) => Ok(None),
            Err(e) => Err(netlink_error(Some(dev), NetlinkAction::LookUpInterface, e)),
        })
    }

    fn dump(&self, dev: &str) -> Result<TcTree> {
        self.with_sock(|s| {
            let link = s
                .link(dev)
                .map_err(|e| netlink_error(Some(dev), NetlinkAction::LookUpInterface, e))?;
            s.dump(link.ifindex)
                .map_err(|e| netlink_error(Some(dev), NetlinkAction::ReadTree, e))
        })
        .map_err(|e| self.in_ns(e))
    }

    fn probe_qdiscs(&self, kinds: &[QdiscKind]) -> Result<Vec<KindSupport>> {
        self.probe.probe_many(kinds)
    }

    fn probe_classifier(&self) -> Result<std::result::Result<(), ClassifierMissing>> {
        self.probe.probe_classifier()
    }

    /// `/proc/meminfo` (memory is the machine's, whatever the namespace).
    fn meminfo(&self) -> Option<crate::meminfo::MemInfo> {
        crate::meminfo::MemInfo::read()
    }

    /// Per interface one class dump per HTB (`tcm_parent` = the HTB:
    /// counters, 64-bit packets, HTB's statistics) and, where asked, one
    /// qdisc dump (the leaves' counters, cake's per-tin and fq_codel's
    /// statistics), on the one socket,
    /// and, where asked, the eBPF data path's TCP statistics (its pinned
    /// maps, read in batches on a thread of their own while the dumps run:
    /// both are the kernel's work, and neither waits for the other).
    fn poll(&self, req: &PollRequest) -> Polled {
        std::thread::scope(|s| {
            let tcp = req
                .tcp
                .as_deref()
                .map(|dir| s.spawn(move || Polled::read_tcp(dir)));
            let polled = Polled::collect(req, |t| self.poll_iface(&t.dev, &t.htbs, t.qdiscs));
            match tcp {
                Some(h) => polled.with_tcp(req, |_| {
                    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
                }),
                None => polled,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_cache_file_is_used_this_boot_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kinds.json");
        let write = |boot: &str| {
            let pf = ProbeFile {
                boot_id: boot.to_string(),
                supported: ["weird".to_string()].into(),
            };
            std::fs::write(&file, serde_json::to_vec(&pf).unwrap()).unwrap();
        };
        write(&boot_id());
        // Answered from the file: no namespace needed (works without root).
        let p = KindProbe::with_cache_file(file.clone());
        assert_eq!(p.probe(&QdiscKind::Other("weird".into())).unwrap(), Ok(()));
        // Another boot's file is ignored.
        write("another-boot");
        let p = KindProbe::with_cache_file(file.clone());
        assert!(p.cache.lock().unwrap().is_empty());
    }
}
