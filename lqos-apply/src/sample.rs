//! One poll of the kernel's counters, as values: what to read
//! ([`PollRequest`], per interface a [`PollTarget`]) and what was read
//! ([`Polled`]: the [`Samples`] of every interface that answered, each an
//! [`IfaceSamples`] of class and qdisc samples). A
//! [`LiveSource::poll`](crate::live::LiveSource::poll) reads them (the kernel
//! over netlink, or the fake kernel); [`crate::stats`] turns them into
//! statistics and [`crate::lazy`] into leaf changes.
//!
//! A request and its result are structs with named fields, so a poll can
//! gain sources (another dump, a BPF map) without changing its callers:
//! a new source is a field of both, read by the same call.

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

/// What one poll reads, per interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollRequest {
    /// The interfaces, in plan order.
    pub interfaces: Vec<PollTarget>,
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
        }
    }
}

/// What one poll read: the samples of every interface that answered and
/// the error of every one that did not.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Polled {
    /// The samples, in the request's order.
    pub samples: Samples,
    /// The interfaces that could not be read, and why.
    pub failed: Vec<(String, ApplyError)>,
}

impl Polled {
    /// A result of `samples` and the failures `failed`.
    pub fn new(samples: Samples, failed: Vec<(String, ApplyError)>) -> Polled {
        Polled { samples, failed }
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

    /// The samples, or the first failure.
    pub fn into_result(self) -> crate::error::Result<Samples> {
        match self.failed.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(self.samples),
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

/// One poll's samples of every planned interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Samples {
    /// Per interface, in plan order.
    pub interfaces: Vec<IfaceSamples>,
}

impl From<Vec<IfaceSamples>> for Samples {
    fn from(interfaces: Vec<IfaceSamples>) -> Samples {
        Samples { interfaces }
    }
}

impl FromIterator<IfaceSamples> for Samples {
    fn from_iter<I: IntoIterator<Item = IfaceSamples>>(it: I) -> Samples {
        Samples {
            interfaces: it.into_iter().collect(),
        }
    }
}

impl Samples {
    /// The samples of `dev`.
    pub fn interface(&self, dev: &str) -> Option<&IfaceSamples> {
        self.interfaces.iter().find(|i| i.dev == dev)
    }
}
