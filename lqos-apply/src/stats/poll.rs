//! One statistics poll, as values: what to read ([`PollRequest`]), what was
//! read ([`Polled`]), and the state that turns poll after poll into
//! statistics ([`StatsPoll`], pure). The reading itself is a
//! [`LiveSource::poll`](crate::LiveSource::poll) (the kernel over netlink,
//! or the fake kernel); the daemon asks for it through its request table
//! ([`crate::daemon::Request::Poll`]) and `lqos stats` calls it directly.
//!
//! A request and its result are structs with named fields, so a poll can
//! gain sources (another dump, a BPF map) without changing its callers:
//! a new source is a field of both, read by the same call.
//!
//! ```
//! use lqos_apply::stats::StatsPoll;
//! use lqos_apply::{LiveSource, Recording};
//! use std::time::Duration;
//!
//! let g = lqos_model::generate(&lqos_model::GenParams { circuits: 4, ..Default::default() });
//! let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 2);
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//! let kernel = Recording::new().with_link("ens19", 2).with_link("ens20", 2);
//! lqos_apply::apply_plan(&plan, &kernel, &kernel, Default::default(), &lqos_apply::NoProgress).unwrap();
//! let c = &plan.allocation.circuits[0];
//! let class = lqos_tc::TcHandle::new(plan.major(lqos_tc::Direction::Download, c.queue), c.minor);
//!
//! let mut poll = StatsPoll::new(&plan);
//! let first = poll.observe(&kernel.poll(&poll.request(true)), Duration::ZERO);
//! kernel.count("ens19", class, 125_000);
//! let second = poll.observe(&kernel.poll(&poll.request(true)), Duration::from_secs(1));
//! assert_eq!(first.stats.interval_secs, None);
//! assert_eq!(second.stats.circuits[0].download.rate_bps, 1e6);
//! ```

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lqos_tc::{Plan, TcHandle};

use super::openmetrics::Labels;
use super::{RawIface, RawStats, Stats, StatsIndex, StatsTracker};
use crate::error::ApplyError;

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

/// What one poll read: the dumps of every interface that answered and the
/// error of every one that did not; the data path's TCP statistics when
/// asked for ([`RawStats::tcp`]), or why they could not be read.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Polled {
    /// The dumps, in the request's order.
    pub raw: RawStats,
    /// The interfaces that could not be read, and why.
    pub failed: Vec<(String, ApplyError)>,
    /// The TCP statistics were asked for and could not be read.
    pub tcp_failed: Option<ApplyError>,
}

impl Polled {
    /// A result of the dumps `raw` and the failures `failed`.
    pub fn new(raw: RawStats, failed: Vec<(String, ApplyError)>) -> Polled {
        Polled {
            raw,
            failed,
            tcp_failed: None,
        }
    }

    /// Reads the TCP statistics with `read` when `req` asks for them.
    pub fn with_tcp(
        mut self,
        req: &PollRequest,
        read: impl FnOnce(&std::path::Path) -> crate::Result<lqos_bpf::TcpRead>,
    ) -> Polled {
        if let Some(dir) = &req.tcp {
            match read(dir) {
                Ok(t) => self.raw.tcp = Some(t),
                Err(e) => self.tcp_failed = Some(e),
            }
        }
        self
    }

    /// The TCP statistics of the eBPF data path pinned at `pin_dir`, read
    /// with one batched lookup per 1,024 circuits.
    pub fn read_tcp(pin_dir: &std::path::Path) -> crate::Result<lqos_bpf::TcpRead> {
        lqos_bpf::TcpMaps::open(pin_dir)
            .and_then(|m| m.read())
            .map_err(|source| ApplyError::Bpf {
                step: "reading the TCP statistics",
                source,
            })
    }

    /// Takes each interface's result of `read` in the request's order.
    pub fn collect(
        req: &PollRequest,
        mut read: impl FnMut(&PollTarget) -> crate::Result<RawIface>,
    ) -> Polled {
        let mut out = Polled::default();
        for t in &req.interfaces {
            match read(t) {
                Ok(r) => out.raw.interfaces.push(r),
                Err(e) => out.failed.push((t.dev.clone(), e)),
            }
        }
        out
    }

    /// The dumps, or the first failure (an interface's, else the TCP
    /// statistics').
    pub fn into_result(self) -> crate::Result<RawStats> {
        match self.failed.into_iter().next() {
            Some((_, e)) => Err(e),
            None => match self.tcp_failed {
                Some(e) => Err(e),
                None => Ok(self.raw),
            },
        }
    }
}

/// The statistics of one poll with what they need to be served: their
/// plan's index and label sets (built on first use, once per plan, by
/// whoever renders first, not by the poll).
#[derive(Debug)]
pub struct Snapshot {
    /// The statistics.
    pub stats: Stats,
    index: Arc<StatsIndex>,
    labels: Arc<OnceLock<Labels>>,
}

impl Snapshot {
    /// Statistics of `index`'s plan, with their own label sets.
    pub fn new(stats: Stats, index: Arc<StatsIndex>) -> Snapshot {
        Snapshot {
            stats,
            index,
            labels: Arc::default(),
        }
    }

    /// The index of the plan the statistics are of.
    pub fn index(&self) -> &StatsIndex {
        &self.index
    }

    /// The plan's label sets for the exposition (escaped once per plan and
    /// shared by every snapshot of it).
    pub fn labels(&self) -> &Labels {
        self.labels.get_or_init(|| Labels::new(&self.index))
    }
}

/// The statistics of one plan, poll after poll (pure: dumps and a
/// monotonic time in, a [`Snapshot`] out). What the daemon keeps between
/// its polls and what `lqos stats` and `lqos top` poll with.
#[derive(Debug)]
pub struct StatsPoll {
    index: Arc<StatsIndex>,
    tracker: StatsTracker,
    labels: Arc<OnceLock<Labels>>,
    tcp: Option<PathBuf>,
}

impl StatsPoll {
    /// The statistics of `plan`, from no poll yet.
    pub fn new(plan: &Plan) -> StatsPoll {
        let index = StatsIndex::new(plan);
        StatsPoll {
            tracker: StatsTracker::new(&index),
            index: Arc::new(index),
            labels: Arc::default(),
            tcp: None,
        }
    }

    /// Reads the TCP statistics of the eBPF data path pinned at `pin_dir`
    /// with every poll (`None`: none).
    pub fn with_tcp(mut self, pin_dir: Option<PathBuf>) -> StatsPoll {
        self.tcp = pin_dir;
        self
    }

    /// Follows a reload to `plan`: the counters of the circuits and nodes
    /// both plans have carry over (they stay monotonic).
    pub fn replan(&mut self, plan: &Plan) {
        let index = StatsIndex::new(plan);
        self.tracker = self.tracker.rebase(&self.index, &index);
        self.index = Arc::new(index);
        self.labels = Arc::default();
    }

    /// The index of the plan.
    pub fn index(&self) -> &StatsIndex {
        &self.index
    }

    /// What a poll reads: every planned HTB's class dump and, with
    /// `leaves`, each interface's qdisc dump where a planned leaf keeps
    /// statistics of its own ([`StatsIndex::leaf_dump_needed`]).
    pub fn request(&self, leaves: bool) -> PollRequest {
        PollRequest {
            interfaces: self
                .index
                .htbs()
                .map(|(dev, htbs)| PollTarget {
                    dev: dev.to_string(),
                    htbs: htbs.to_vec(),
                    qdiscs: leaves && self.index.leaf_dump_needed(dev),
                })
                .collect(),
            tcp: self.tcp.clone(),
        }
    }

    /// Polls `live` ([`StatsPoll::request`] with `leaves`) and observes the
    /// result at `now`: what `lqos stats` and `lqos top` do. Fails on the
    /// first interface that cannot be read, or on TCP statistics asked for
    /// and not read (nothing is observed then).
    pub fn poll(
        &mut self,
        live: &dyn crate::LiveSource,
        leaves: bool,
        now: Duration,
    ) -> crate::Result<Snapshot> {
        let mut polled = live.poll(&self.request(leaves));
        if let Some((_, e)) = polled.failed.drain(..).next() {
            return Err(e);
        }
        if let Some(e) = polled.tcp_failed.take() {
            return Err(e);
        }
        Ok(self.observe(&polled, now))
    }

    /// The statistics of the poll `polled` taken at `now` (any monotonic
    /// clock); an interface that failed keeps its counters.
    pub fn observe(&mut self, polled: &Polled, now: Duration) -> Snapshot {
        Snapshot {
            stats: self.tracker.observe(&self.index, &polled.raw, now),
            index: self.index.clone(),
            labels: self.labels.clone(),
        }
    }
}
