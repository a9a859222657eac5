//! One poll of the kernel's counters, as values: what to read
//! ([`PollRequest`], per interface a [`PollTarget`]) and what was read
//! ([`Polled`]: the [`Samples`] of every interface that answered, each an
//! [`IfaceSamples`] of class and qdisc samples, and the eBPF data path's
//! per-circuit TCP statistics when asked for). A
//! [`LiveSource::poll`](crate::live::LiveSource::poll) reads them (the kernel
//! over netlink, or the fake kernel); [`crate::stats`] turns them into
//! statistics and [`crate::lazy`] into leaf changes.
//!
//! A request and its result are structs with named fields, so a poll can
//! gain sources (another dump, a BPF map) without changing its callers:
//! a new source is a field of both, read by the same call.

use std::path::{Path, PathBuf};

use lqos_tc::{Plan, TcHandle};

use crate::error::ApplyError;
use crate::netlink::{ClassSample, QdiscSample};

/// One interface of a poll: the class dumps of its HTB qdiscs, and its
/// qdisc dump when `qdiscs` (the leaves' own statistics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollTarget {
    /// The interface.
    pub dev: String,
    /// The HTB qdiscs whose classes are dumped (one dump each).
    pub htbs: Vec<TcHandle>,
    /// Whether the interface's qdiscs are dumped too.
    pub qdiscs: bool,
}

/// What one poll reads, per interface, and from the eBPF data path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollRequest {
    /// The interfaces, in plan order.
    pub interfaces: Vec<PollTarget>,
    /// The pin directory of the eBPF data path whose per-circuit TCP
    /// statistics to read too (`None`: none).
    pub tcp: Option<PathBuf>,
}

impl PollRequest {
    /// The class dumps of every HTB `plan` sets up, without qdisc dumps
    /// (what lazy leaves need).
    pub fn classes_of(plan: &Plan) -> PollRequest {
        PollRequest {
            interfaces: plan
                .interfaces
                .iter()
                .map(|ip| PollTarget {
                    dev: ip.dev.clone(),
                    htbs: ip
                        .htb_majors()
                        .into_iter()
                        .map(|m| TcHandle::new(m, 0))
                        .collect(),
                    qdiscs: false,
                })
                .collect(),
            tcp: None,
        }
    }
}

/// What one poll read: the samples of every interface that answered and
/// the error of every one that did not; the data path's TCP statistics
/// when asked for ([`Samples::tcp`]), or why they could not be read.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Polled {
    /// The samples, in the request's order.
    pub samples: Samples,
    /// The interfaces that could not be read, and why.
    pub failed: Vec<(String, ApplyError)>,
    /// The TCP statistics were asked for and could not be read.
    pub tcp_failed: Option<ApplyError>,
}

impl Polled {
    /// A result of `samples` and the failures `failed`.
    pub fn new(samples: Samples, failed: Vec<(String, ApplyError)>) -> Polled {
        Polled {
            samples,
            failed,
            tcp_failed: None,
        }
    }

    /// Reads the TCP statistics with `read` when `req` asks for them.
    pub fn with_tcp(
        mut self,
        req: &PollRequest,
        read: impl FnOnce(&Path) -> crate::error::Result<lqos_bpf::tcp::TcpRead>,
    ) -> Polled {
        if let Some(dir) = &req.tcp {
            match read(dir) {
                Ok(t) => self.samples.tcp = Some(t),
                Err(e) => self.tcp_failed = Some(e),
            }
        }
        self
    }

    /// The TCP statistics of the eBPF data path pinned at `pin_dir`, read
    /// with one batched lookup per 1,024 circuits.
    pub fn read_tcp(pin_dir: &Path) -> crate::error::Result<lqos_bpf::tcp::TcpRead> {
        lqos_bpf::tcp::TcpMaps::open(pin_dir)
            .and_then(|m| m.read())
            .map_err(|source| ApplyError::Bpf {
                step: crate::error::BpfStep::ReadTcpStats,
                source,
            })
    }

    /// Takes each interface's result of `read` in the request's order.
    pub fn collect(
        req: &PollRequest,
        mut read: impl FnMut(&PollTarget) -> crate::error::Result<IfaceSamples>,
    ) -> Polled {
        let mut out = Polled::default();
        for t in &req.interfaces {
            match read(t) {
                Ok(r) => out.samples.interfaces.push(r),
                Err(e) => out.failed.push((t.dev.clone(), e)),
            }
        }
        out
    }

    /// The samples, or the first failure (an interface's, else the TCP
    /// statistics').
    pub fn into_result(self) -> crate::error::Result<Samples> {
        match self.failed.into_iter().next() {
            Some((_, e)) => Err(e),
            None => match self.tcp_failed {
                Some(e) => Err(e),
                None => Ok(self.samples),
            },
        }
    }
}

/// One interface's samples of one poll: its class and qdisc dumps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IfaceSamples {
    /// The interface.
    pub dev: String,
    /// Every class of its planned HTBs.
    pub classes: Vec<ClassSample>,
    /// Every qdisc (empty when the poll skipped the qdisc dump).
    pub qdiscs: Vec<QdiscSample>,
}

impl IfaceSamples {
    /// An interface with nothing dumped.
    pub fn empty(dev: &str) -> IfaceSamples {
        IfaceSamples {
            dev: dev.to_string(),
            ..IfaceSamples::default()
        }
    }
}

/// One poll's samples of every planned interface, and the eBPF data
/// path's TCP statistics when they were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Samples {
    /// Per interface, in plan order.
    pub interfaces: Vec<IfaceSamples>,
    /// The data path's per-circuit TCP statistics (`None`: not read).
    pub tcp: Option<lqos_bpf::tcp::TcpRead>,
}

impl From<Vec<IfaceSamples>> for Samples {
    fn from(interfaces: Vec<IfaceSamples>) -> Samples {
        Samples {
            interfaces,
            tcp: None,
        }
    }
}

impl FromIterator<IfaceSamples> for Samples {
    fn from_iter<I: IntoIterator<Item = IfaceSamples>>(it: I) -> Samples {
        Samples::from(it.into_iter().collect::<Vec<_>>())
    }
}

impl Samples {
    /// The samples of `dev`.
    pub fn interface(&self, dev: &str) -> Option<&IfaceSamples> {
        self.interfaces.iter().find(|i| i.dev == dev)
    }
}
