//! The rtnetlink backend: one socket per interface worker, many requests
//! per `sendmsg`, ACKs matched by sequence number.

use lqos_tc::TcOp;

use super::{
    delete_placement, is_root_delete, root_delete_found_nothing, Backend, IfaceOps, IfaceReport,
    LoadReport, Parallelism, Progress, RootDelete,
};
use crate::error::{ApplyError, NetlinkAction, Stopped};
use crate::live::{netlink_error, open_socket};
use crate::netlink::{NetlinkSocket, SendOptions};
use crate::timing::{CpuScope, Stopwatch};

/// Netlink loader: serial, or one thread (with its own socket) per
/// interface.
#[derive(Debug, Clone)]
pub struct NetlinkBackend {
    /// Run inside this network namespace (each worker enters it to open
    /// its socket).
    pub netns: Option<String>,
    /// Serial or one worker per interface.
    pub parallelism: Parallelism,
    /// Pipelining (requests per `sendmsg`, in flight).
    pub send: SendOptions,
}

impl NetlinkBackend {
    /// A loader for `netns` (None = current namespace) with default
    /// pipelining.
    pub fn new(netns: Option<String>, parallelism: Parallelism) -> NetlinkBackend {
        NetlinkBackend {
            netns,
            parallelism,
            send: SendOptions::default(),
        }
    }

    /// Sends `ops`, skipping a root delete that found nothing to delete.
    /// Returns (ops applied, first real failure). Failed-op indexes are
    /// counted from `offset` (the ops of the stream sent before `ops`).
    fn send_stream(
        &self,
        sock: &mut NetlinkSocket,
        ifindex: i32,
        dev: &str,
        ops: &[TcOp],
        offset: usize,
        progress: &dyn Progress,
    ) -> (usize, Option<ApplyError>) {
        let mut applied = 0;
        let mut start = 0;
        while start < ops.len() {
            if progress.cancelled() {
                return (applied, Some(cancelled(dev)));
            }
            // A root delete goes alone: when it finds nothing to delete, the
            // ops behind it in the same sendmsg would still be applied.
            let end = if is_root_delete(&ops[start]) {
                start + 1
            } else {
                ops[start..]
                    .iter()
                    .position(is_root_delete)
                    .map_or(ops.len(), |p| start + p)
            };
            let mut last = 0usize;
            let mut report = |n: usize| {
                if n > last {
                    progress.advance(dev, n - last);
                    last = n;
                }
            };
            let stop = || progress.cancelled();
            match sock.send_ops_until(ifindex, &ops[start..end], &self.send, &mut report, &stop) {
                Ok(stats) if stats.not_sent > 0 => {
                    applied += stats.acked;
                    return (applied, Some(cancelled(dev)));
                }
                Ok(stats) => {
                    applied += stats.acked;
                    start = end;
                }
                Err(f) if root_delete_found_nothing(&f.op, Some(f.errno), &f.message) => {
                    applied += f.succeeded + 1;
                    start += f.index + 1;
                }
                Err(f) => {
                    applied += f.applied();
                    return (
                        applied,
                        Some(ApplyError::OpFailed {
                            dev: dev.to_string(),
                            index: offset + start + f.index,
                            op: Box::new(f.op),
                            message: f.message,
                            errno: Some(f.errno),
                        }),
                    );
                }
            }
        }
        (applied, None)
    }

    fn load_iface(
        &self,
        iface: &IfaceOps<'_>,
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> IfaceReport {
        let sw = Stopwatch::start(CpuScope::Thread);
        let placement = delete_placement(iface, root_delete);
        let in_batch = usize::from(placement == RootDelete::InBatch);
        let mut rep = IfaceReport {
            dev: iface.dev.clone(),
            ops_total: in_batch + iface.ops.len(),
            ops_applied: 0,
            timing: None,
            root_delete: None,
            error: None,
        };
        if iface.ops.is_empty() && placement == RootDelete::None {
            // Nothing to send (an incremental reload with no change): no
            // socket, no link lookup (preflight looked the interface up).
            rep.timing = Some(sw.stop());
            return rep;
        }
        let opened = open_socket(self.netns.as_deref()).and_then(|mut s| {
            let link = s.link(&iface.dev).map_err(|e| {
                match netlink_error(Some(&iface.dev), NetlinkAction::LookUpInterface, e) {
                    ApplyError::NoInterface {
                        dev, config_key, ..
                    } => ApplyError::NoInterface {
                        dev,
                        netns: self.netns.clone(),
                        config_key,
                    },
                    e => e,
                }
            })?;
            Ok((s, link.ifindex))
        });
        let (mut sock, ifindex) = match opened {
            Ok(x) => x,
            Err(e) => {
                rep.error = Some(e);
                rep.timing = Some(sw.stop());
                return rep;
            }
        };
        if placement == RootDelete::Separate {
            let rd = Stopwatch::start(CpuScope::Thread);
            let (_, err) = self.send_stream(
                &mut sock,
                ifindex,
                &iface.dev,
                &[TcOp::delete_root()],
                0,
                &super::NoProgress,
            );
            rep.root_delete = Some(rd.stop());
            if err.is_some() {
                rep.error = err;
                rep.timing = Some(sw.stop());
                return rep;
            }
        }
        if in_batch == 1 {
            // Sent alone (send_stream does so anyway): no copy of the ops.
            let del = [TcOp::delete_root()];
            let (applied, err) =
                self.send_stream(&mut sock, ifindex, &iface.dev, &del, 0, progress);
            rep.ops_applied = applied;
            if err.is_some() {
                rep.error = err;
                rep.timing = Some(sw.stop());
                return rep;
            }
        }
        let (applied, err) = self.send_stream(
            &mut sock, ifindex, &iface.dev, &iface.ops, in_batch, progress,
        );
        rep.ops_applied += applied;
        rep.error = err;
        rep.timing = Some(sw.stop());
        rep
    }
}

/// The stop of a cancelled stream (its counts are the interface's, set by
/// [`settle`]).
fn cancelled(dev: &str) -> ApplyError {
    ApplyError::Incomplete {
        dev: dev.to_string(),
        sent: 0,
        total: 0,
        reason: Stopped::Cancelled { unsure: 0 },
        cause: None,
    }
}

/// `rep` with a cancelled stream's counts: the ops applied (each ACKed)
/// of the interface's whole stream.
fn settle(mut rep: IfaceReport) -> IfaceReport {
    if let Some(ApplyError::Incomplete { sent, total, .. }) = &mut rep.error {
        (*sent, *total) = (rep.ops_applied, rep.ops_total);
    }
    rep
}

impl Backend for NetlinkBackend {
    fn describe(&self) -> String {
        match self.parallelism {
            Parallelism::Serial => "netlink serial".into(),
            Parallelism::Parallel => "netlink parallel".into(),
        }
    }

    fn load(
        &self,
        ifaces: &[IfaceOps<'_>],
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> LoadReport {
        let sw = Stopwatch::start(CpuScope::Process);
        let interfaces = match self.parallelism {
            Parallelism::Serial => ifaces
                .iter()
                .map(|i| settle(self.load_iface(i, root_delete, progress)))
                .collect(),
            Parallelism::Parallel => std::thread::scope(|s| {
                let handles: Vec<_> = ifaces
                    .iter()
                    .map(|i| s.spawn(move || settle(self.load_iface(i, root_delete, progress))))
                    .collect();
                handles
                    .into_iter()
                    .zip(ifaces)
                    .map(|(h, i)| {
                        h.join().unwrap_or_else(|_| IfaceReport {
                            dev: i.dev.clone(),
                            ops_total: i.len(),
                            ops_applied: 0,
                            timing: None,
                            root_delete: None,
                            error: Some(ApplyError::Incomplete {
                                dev: i.dev.clone(),
                                sent: 0,
                                total: i.len(),
                                reason: crate::error::Stopped::WorkerPanicked,
                                cause: None,
                            }),
                        })
                    })
                    .collect()
            }),
        };
        LoadReport {
            backend: self.describe(),
            interfaces,
            total: sw.stop(),
        }
    }
}
