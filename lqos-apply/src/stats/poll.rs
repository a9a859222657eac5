//! The state that turns poll after poll into statistics ([`StatsPoll`],
//! pure): what to read ([`PollRequest`]) in, what was read ([`Polled`])
//! and a time in, a [`Snapshot`] out. The reading itself is a
//! [`LiveSource::poll`](crate::live::LiveSource::poll) (the kernel over netlink,
//! or the fake kernel); the daemon asks for it through its request table
//! ([`crate::daemon::Request::Poll`]); a one-off reader calls
//! [`StatsPoll::poll`].
//!
//! ```
//! use lqos_apply::stats::StatsPoll;
//! use lqos_apply::backend::Recording;
//! use lqos_apply::live::LiveSource;
//! use std::time::Duration;
//!
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(4));
//! let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 2);
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//! let kernel = Recording::new().with_link("ens19", 2).with_link("ens20", 2);
//! lqos_apply::apply_plan(&plan, &kernel, &kernel, Default::default(), &lqos_apply::backend::NoProgress).unwrap();
//! let c = &plan.allocation.circuits[0];
//! let class = lqos_tc::TcHandle::new(plan.major(lqos_tc::allocation::Direction::Download, c.queue), c.minor);
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

use lqos_tc::Plan;

use super::openmetrics::Labels;
use super::{Stats, StatsIndex, StatsTracker};
use crate::sample::{PollRequest, PollTarget, Polled};

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
/// its polls and what a one-off reader polls with.
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
    /// result at `now` (a one-off reader's poll). Fails on the first
    /// interface that cannot be read, or on TCP statistics asked for and
    /// not read (nothing is observed then).
    pub fn poll(
        &mut self,
        live: &dyn crate::live::LiveSource,
        leaves: bool,
        now: Duration,
    ) -> crate::error::Result<Snapshot> {
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
            stats: self.tracker.observe(&self.index, &polled.samples, now),
            index: self.index.clone(),
            labels: self.labels.clone(),
        }
    }
}
