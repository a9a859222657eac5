//! A fake kernel for tests of everything above the socket: records every op
//! per interface, keeps a simulated tree per interface (so it can also serve
//! as the [`crate::live::LiveSource`] for readback), and fails on request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use lqos_tc::ops::QdiscKind;
use lqos_tc::tree::TcTree;
use lqos_tc::{TcHandle, TcOp};

use super::{
    as_sent, delete_placement, is_root_delete, Backend, IfaceOps, IfaceReport, LoadReport,
    Progress, RootDelete,
};
use crate::error::{ApplyError, ClassifierMissing, QdiscRefusal, Result};
use crate::live::{KindSupport, LinkSummary, LiveSource};
use crate::netlink::{ClassSample, Counters, LeafXstats, QdiscSample};
use crate::stats::{IfaceSamples, PollRequest, Polled};
use crate::timing::Timing;

/// A planned failure: the `op_index`-th op sent to `dev` (counting every op
/// this recorder has received for `dev`, across loads) fails with `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordingFailure {
    /// Interface.
    dev: String,
    /// 0-based index among all ops ever sent to `dev`.
    op_index: usize,
    /// The "kernel" message.
    message: String,
}

#[derive(Debug, Default)]
struct State {
    sent: Vec<(String, TcOp)>,
    per_dev: BTreeMap<String, usize>,
    trees: BTreeMap<String, TcTree>,
    links: BTreeMap<String, u32>,
    unsupported: BTreeSet<String>,
    failures: Vec<RecordingFailure>,
    meminfo: Option<crate::meminfo::MemInfo>,
    /// Bytes and packets sent per class (what a poll reports).
    counts: BTreeMap<(String, TcHandle), (u64, u64)>,
    /// The eBPF data path's TCP statistics a poll reports when asked.
    tcp: Option<lqos_bpf::tcp::TcpRead>,
}

/// Records ops instead of sending them. Interfaces must be declared with
/// [`Recording::with_link`].
#[derive(Debug, Default)]
pub struct Recording {
    state: Mutex<State>,
}

impl Recording {
    /// An empty recorder with no interfaces.
    pub fn new() -> Recording {
        Recording::default()
    }

    /// Declares an interface with `tx_queues` TX queues and an empty tree.
    pub fn with_link(self, dev: &str, tx_queues: u32) -> Recording {
        {
            let mut s = self.state.lock().expect("recording lock");
            s.links.insert(dev.to_string(), tx_queues);
            s.trees.entry(dev.to_string()).or_default();
        }
        self
    }

    /// Gives the fake machine this much memory (the memory preflight is
    /// skipped without).
    pub fn with_meminfo(self, mem: crate::meminfo::MemInfo) -> Recording {
        self.state.lock().expect("recording lock").meminfo = Some(mem);
        self
    }

    /// Makes qdisc kind `kind` (e.g. `cake`) unsupported by the fake kernel.
    pub fn without_qdisc_kind(self, kind: &str) -> Recording {
        self.state
            .lock()
            .expect("recording lock")
            .unsupported
            .insert(kind.to_string());
        self
    }

    /// Schedules a failure: the `op_index`-th op sent to `dev` (counting
    /// every op this recorder has received for `dev`, across loads) fails
    /// with `message`.
    pub fn fail_at(&self, dev: &str, op_index: usize, message: &str) {
        self.state
            .lock()
            .expect("recording lock")
            .failures
            .push(RecordingFailure {
                dev: dev.to_string(),
                op_index,
                message: message.to_string(),
            });
    }

    /// Every op received (including failed ones), in order, with its interface.
    pub fn sent(&self) -> Vec<(String, TcOp)> {
        self.state.lock().expect("recording lock").sent.clone()
    }

    /// Ops received for `dev`.
    pub fn sent_for(&self, dev: &str) -> Vec<TcOp> {
        self.sent()
            .into_iter()
            .filter(|(d, _)| d == dev)
            .map(|(_, op)| op)
            .collect()
    }

    /// Forgets the recorded ops (trees and links stay).
    pub fn clear_sent(&self) {
        self.state.lock().expect("recording lock").sent.clear();
    }

    /// Counts `bytes` (in packets of up to 1,500 bytes) through class
    /// `class` of `dev`: what the next statistics poll reports for it
    /// (counters start at 0 and only grow).
    pub fn count(&self, dev: &str, class: TcHandle, bytes: u64) {
        let mut s = self.state.lock().expect("recording lock");
        let c = s.counts.entry((dev.to_string(), class)).or_default();
        c.0 += bytes;
        c.1 += bytes.div_ceil(1500);
    }

    /// Sets the TCP statistics a poll that asks for them reads (`None`: as
    /// if no data path were loaded, the read fails).
    pub fn set_tcp(&self, tcp: Option<lqos_bpf::tcp::TcpRead>) {
        self.state.lock().expect("recording lock").tcp = tcp;
    }

    /// The simulated tree of `dev`.
    pub fn tree(&self, dev: &str) -> Option<TcTree> {
        self.state
            .lock()
            .expect("recording lock")
            .trees
            .get(dev)
            .cloned()
    }

    fn load_one(&self, dev: &str, ops: &[TcOp], progress: &dyn Progress) -> IfaceReport {
        let mut rep = IfaceReport {
            dev: dev.to_string(),
            ops_total: ops.len(),
            ops_applied: 0,
            timing: Some(Timing::default()),
            root_delete: None,
            error: None,
        };
        let mut s = self.state.lock().expect("recording lock");
        if !s.links.contains_key(dev) {
            rep.error = Some(ApplyError::NoInterface {
                dev: dev.to_string(),
                netns: None,
                config_key: None,
            });
            return rep;
        }
        let n0 = *s.per_dev.get(dev).unwrap_or(&0);
        // Where a scheduled failure or an unsupported kind stops the stream.
        let stop = ops.iter().enumerate().find_map(|(i, op)| {
            let planned = s
                .failures
                .iter()
                .find(|f| f.dev == dev && f.op_index == n0 + i)
                .map(|f| f.message.clone());
            let unsupported = match op {
                TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => s.unsupported.contains(q.kind.name()),
                _ => false,
            };
            planned
                .or_else(|| unsupported.then(|| "Specified qdisc kind is unknown.".to_string()))
                .map(|m| (i, m))
        });
        let upto = stop.as_ref().map_or(ops.len(), |(i, _)| *i);
        // The tree model enforces the kernel's rules; apply in runs between
        // root deletes (a root delete on an empty device is a no-op here).
        let tree = s.trees.entry(dev.to_string()).or_default();
        let mut failure = None;
        let mut cancelled = false;
        let mut i = 0;
        while i < upto {
            // A batch of a netlink load: cancellation is honoured between.
            if i % RECORDING_BATCH == 0 && progress.cancelled() {
                cancelled = true;
                break;
            }
            if is_root_delete(&ops[i]) {
                // The kernel answers ENOENT (benign) when only its own
                // handle-0 default root is there.
                if tree.root().is_some() {
                    if let Err(e) = tree.apply(&ops[i]) {
                        failure = Some((i, e.to_string()));
                        break;
                    }
                }
                progress.advance(dev, 1);
                i += 1;
                continue;
            }
            let j = ops[i..upto]
                .iter()
                .position(is_root_delete)
                .map_or(upto, |p| i + p)
                .min((i / RECORDING_BATCH + 1) * RECORDING_BATCH);
            if let Err((k, e)) = tree.apply_all(&ops[i..j]) {
                failure = Some((i + k, e.to_string()));
                break;
            }
            progress.advance(dev, j - i);
            i = j;
        }
        let failure = if cancelled { failure } else { failure.or(stop) };
        let processed = match &failure {
            Some((i, _)) => i + 1,
            None if cancelled => i,
            None => ops.len(),
        };
        rep.ops_applied = failure.as_ref().map_or(processed, |(i, _)| *i);
        if cancelled && failure.is_none() {
            rep.error = Some(ApplyError::Incomplete {
                dev: dev.to_string(),
                sent: rep.ops_applied,
                total: ops.len(),
                reason: crate::error::Stopped::Cancelled { unsure: 0 },
                cause: None,
            });
        }
        if let Some((index, message)) = failure {
            rep.error = Some(ApplyError::OpFailed {
                dev: dev.to_string(),
                index,
                op: Box::new(ops[index].clone()),
                message,
                errno: Some(libc::EINVAL),
            });
        }
        s.per_dev.insert(dev.to_string(), n0 + processed);
        s.sent.extend(
            ops[..processed]
                .iter()
                .map(|op| (dev.to_string(), op.clone())),
        );
        drop(s);
        rep
    }
}

/// Ops the fake applies between two checks of [`Progress::cancelled`]
/// (as the netlink backend between two `sendmsg` batches).
pub const RECORDING_BATCH: usize = 64;

impl Backend for Recording {
    fn describe(&self) -> String {
        "recording".into()
    }

    fn load(
        &self,
        ifaces: &[IfaceOps<'_>],
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> LoadReport {
        let interfaces = ifaces
            .iter()
            .map(|i| {
                let root = delete_placement(i, root_delete) == RootDelete::Separate;
                let mut ops: Vec<TcOp> = as_sent(i, root_delete)
                    .sent()
                    .map(|o| o.into_owned())
                    .collect();
                if root {
                    ops.insert(0, TcOp::delete_root());
                }
                self.load_one(&i.dev, &ops, progress)
            })
            .collect();
        LoadReport {
            backend: self.describe(),
            interfaces,
            total: Timing::default(),
        }
    }
}

impl LiveSource for Recording {
    /// The classes of the simulated trees' HTBs with what
    /// [`Recording::count`] counted, and their qdiscs (kinds, no
    /// statistics of their own); the TCP statistics of
    /// [`Recording::set_tcp`] when asked.
    fn poll(&self, req: &PollRequest) -> Polled {
        let s = self.state.lock().expect("recording lock");
        Polled::collect(req, |t| {
            let tree = s.trees.get(&t.dev).filter(|_| s.links.contains_key(&t.dev));
            let Some(tree) = tree else {
                return Err(ApplyError::NoInterface {
                    dev: t.dev.clone(),
                    netns: None,
                    config_key: None,
                });
            };
            let mut r = IfaceSamples::empty(&t.dev);
            for &classid in tree.classes.keys() {
                if !t.htbs.iter().any(|h| h.major() == classid.major()) {
                    continue;
                }
                let (bytes, packets) = s
                    .counts
                    .get(&(t.dev.clone(), classid))
                    .copied()
                    .unwrap_or_default();
                r.classes.push(ClassSample {
                    classid,
                    counters: Counters {
                        bytes,
                        packets,
                        ..Counters::default()
                    },
                    htb: None,
                });
            }
            if t.qdiscs {
                for q in tree.qdiscs.values() {
                    r.qdiscs.push(QdiscSample {
                        handle: q.handle,
                        parent: q.parent,
                        kind: q.kind.name().to_string(),
                        counters: Counters::default(),
                        xstats: LeafXstats::None,
                    });
                }
            }
            Ok(r)
        })
        .with_tcp(req, |dir| {
            s.tcp.clone().ok_or_else(|| ApplyError::Bpf {
                step: crate::error::BpfStep::ReadTcpStats,
                source: lqos_bpf::BpfError::Pinned {
                    path: dir.to_path_buf(),
                    message: "no data path (the recording has no TCP statistics)".into(),
                },
            })
        })
    }

    fn link(&self, dev: &str) -> Result<Option<LinkSummary>> {
        let s = self.state.lock().expect("recording lock");
        let names: Vec<&String> = s.links.keys().collect();
        Ok(s.links.get(dev).map(|q| LinkSummary {
            ifindex: 1 + names.iter().position(|n| *n == dev).unwrap_or(0) as i32,
            num_tx_queues: *q,
        }))
    }

    fn dump(&self, dev: &str) -> Result<TcTree> {
        self.tree(dev).ok_or_else(|| ApplyError::NoInterface {
            dev: dev.to_string(),
            netns: None,
            config_key: None,
        })
    }

    fn probe_qdiscs(&self, kinds: &[QdiscKind]) -> Result<Vec<KindSupport>> {
        let s = self.state.lock().expect("recording lock");
        Ok(kinds
            .iter()
            .map(|k| {
                if s.unsupported.contains(k.name()) {
                    Err(QdiscRefusal::new(
                        libc::ENOENT,
                        "Specified qdisc kind is unknown.",
                    ))
                } else {
                    Ok(())
                }
            })
            .collect())
    }

    /// Supported unless `flower` or `skbedit` was marked unsupported.
    fn probe_classifier(&self) -> Result<std::result::Result<(), ClassifierMissing>> {
        let s = self.state.lock().expect("recording lock");
        Ok(
            match ["flower", "skbedit"]
                .iter()
                .find(|k| s.unsupported.contains(**k))
            {
                Some(k) => Err(ClassifierMissing::Refused {
                    op: format!("filter replace ... {k}"),
                    message: "unknown".to_string(),
                }),
                None => Ok(()),
            },
        )
    }

    fn meminfo(&self) -> Option<crate::meminfo::MemInfo> {
        self.state.lock().expect("recording lock").meminfo
    }
}
