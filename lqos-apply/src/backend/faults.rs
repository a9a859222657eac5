//! A fault-injecting [`Backend`] wrapper for tests: the `k`-th op sent
//! (counted over every load, root deletes included) fails with a chosen
//! errno, or the socket is cut there.

use std::borrow::Cow;
use std::sync::Mutex;

use super::{
    as_sent, delete_placement, Backend, IfaceOps, IfaceReport, LoadReport, Progress, RootDelete,
};
use crate::error::ApplyError;
use crate::timing::Timing;

/// What goes wrong at the chosen op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The kernel refuses the op with this errno (`ENOMEM`, `EBUSY`,
    /// `EINVAL`, `ENOBUFS`, ...) and the message it gives for it; the ops
    /// before it were applied, the ones after it are not sent.
    Errno(i32),
    /// The socket is cut after the op reached the kernel: the op was
    /// applied but its ACK never arrives, and nothing after it is sent.
    CutSocket,
}

/// Wraps a backend and injects one [`Fault`] at op `k` (see
/// [`Faulty::fail_at`]); every other op goes to the wrapped backend.
#[derive(Debug)]
pub struct Faulty<B> {
    inner: B,
    state: Mutex<FaultState>,
}

#[derive(Debug, Default)]
struct FaultState {
    /// Ops sent so far, over all loads.
    sent: usize,
    /// The armed fault: `(op number, fault)`, fired once.
    armed: Option<(usize, Fault)>,
    /// Faults fired so far.
    fired: usize,
}

impl<B: Backend> Faulty<B> {
    /// `inner`, with no fault armed.
    pub fn new(inner: B) -> Faulty<B> {
        Faulty {
            inner,
            state: Mutex::new(FaultState::default()),
        }
    }

    /// Arms `fault` for the `k`-th op from now on (0 = the next op sent).
    pub fn fail_at(&self, k: usize, fault: Fault) {
        let mut s = self.state.lock().expect("fault state");
        s.armed = Some((s.sent + k, fault));
    }

    /// Faults fired so far.
    pub fn fired(&self) -> usize {
        self.state.lock().expect("fault state").fired
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Loads one interface's stream as sent, the fault applied if it falls
    /// in it.
    fn load_one(&self, iface: &IfaceOps<'_>, progress: &dyn Progress) -> LoadReport {
        let ops: Vec<_> = iface.sent().map(Cow::into_owned).collect();
        let hit = {
            let mut s = self.state.lock().expect("fault state");
            let first = s.sent;
            s.sent += ops.len();
            match s.armed {
                Some((at, fault)) if at >= first && at < first + ops.len() => {
                    s.armed = None;
                    s.fired += 1;
                    Some((at - first, fault))
                }
                _ => None,
            }
        };
        let Some((k, fault)) = hit else {
            return self.inner.load(
                &[IfaceOps::new(iface.dev.clone(), ops)],
                RootDelete::None,
                progress,
            );
        };
        // The ops the kernel applies: before the fault, and the cut op itself.
        let applied = match fault {
            Fault::Errno(_) => k,
            Fault::CutSocket => k + 1,
        };
        let prefix = IfaceOps::new(iface.dev.clone(), ops[..applied].to_vec());
        let mut report = self.inner.load(&[prefix], RootDelete::None, progress);
        let mut rep = report
            .interfaces
            .pop()
            .unwrap_or_else(|| IfaceReport::new(iface.dev.clone(), ops.len()));
        rep.ops_total = ops.len();
        if rep.error.is_none() {
            rep.error = Some(match fault {
                Fault::Errno(errno) => {
                    rep.ops_applied = k;
                    ApplyError::OpFailed {
                        dev: iface.dev.clone(),
                        index: k,
                        op: Box::new(ops[k].clone()),
                        message: nix::errno::Errno::from_raw(errno).desc().to_string(),
                        errno: Some(errno),
                    }
                }
                Fault::CutSocket => {
                    // The cut op's ACK is lost: the loader cannot count it.
                    rep.ops_applied = k;
                    ApplyError::Netlink {
                        dev: Some(iface.dev.clone()),
                        action: crate::error::NetlinkAction::Load,
                        source: crate::netlink::NetlinkError::Io {
                            what: crate::netlink::Request::Ack { op: k },
                            source: std::io::Error::from_raw_os_error(libc::ECONNRESET),
                        },
                    }
                }
            });
        }
        report.interfaces.push(rep);
        report
    }
}

impl<B: Backend> Backend for Faulty<B> {
    fn describe(&self) -> String {
        format!("{} (faults injected)", self.inner.describe())
    }

    /// Interfaces one after another, each as its backend would send it.
    fn load(
        &self,
        ifaces: &[IfaceOps<'_>],
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> LoadReport {
        let mut interfaces = Vec::with_capacity(ifaces.len());
        let mut total = Timing::default();
        for iface in ifaces {
            let mut sent = as_sent(iface, root_delete);
            sent.delete_root = delete_placement(iface, root_delete) != RootDelete::None;
            let r = self.load_one(&sent, progress);
            total = total + r.total;
            interfaces.extend(r.interfaces);
        }
        LoadReport::new(self.describe(), interfaces, total)
    }
}
