//! The reloader: the daemon's decisions, without I/O.

mod edit;
mod inputs;
mod load;
mod poll;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lqos_model::devices_index::{DevicesEdit, DevicesIndex};
use lqos_model::Network;
use lqos_tc::replan::{known_diff, PlanIndex, Replan};
use lqos_tc::tree::TcTree;
use lqos_tc::{Allocation, DiffSummary, Plan, PlanConfig, TcOp};

use super::event::{Applied, Breakdown, Event, Fallback, LoadPath, Record};
use super::ingest::{partial_file, FileEvent, Readiness, Ready};
use super::known::KnownKernel;
use crate::backend::{IfaceOps, LoadReport};
use crate::engine::{plan_change, plan_changes, LoadKind};
use crate::error::{ApplyError, Result};
use crate::input_file::InputFile;
use crate::inputs::{given_queues, interface_names, Inputs, PlanOverrides, QueueCount, RawInputs};
use crate::journal::InputSet;
use crate::lazy::{self, LeafTracker};
use crate::live::LinkSummary;
use crate::memory::{check_memory, MemInfo};
use crate::stats::{PollRequest, Polled, Snapshot, StatsPoll};
use crate::watch::{Outcome, Trigger};
use load::summarize;

/// What the daemon is configured to do (the CLI's flags).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// Planner settings on top of lqos.conf.
    pub overrides: PlanOverrides,
    /// Lazy leaves on whatever lqos.conf says (`[lqos] lazy_leaves` can
    /// also turn them on, read at start).
    pub lazy_leaves: bool,
    /// Poll per-circuit statistics ([`Reloader::statistics`]), with lazy
    /// leaves from the same dumps.
    pub statistics: bool,
    /// Time between two polls (lazy leaves, statistics).
    pub poll: Duration,
    /// With lazy leaves: time without traffic before a leaf is removed.
    pub idle: Duration,
    /// Time between two verify-and-repair runs (`None`: never).
    pub verify_every: Option<Duration>,
    /// Time before retrying a load that failed.
    pub retry: Duration,
    /// Time after a close or rename of an input file before it is read.
    pub debounce: Duration,
    /// Time without events after which a file written but never closed is
    /// read anyway (and a file cut short is read as it is).
    pub quiet: Duration,
    /// Time before reading again inputs that changed while being read.
    pub stable_retry: Duration,
    /// The removal guard's limit instead of lqos.conf's `[lqos]
    /// max_removals`.
    pub max_removals: Option<lqos_model::config::RemovalLimit>,
    /// Edits of a few ShapedDevices.csv rows take the incremental path.
    pub incremental: bool,
    /// Refuse loads whose new leaves would not fit in memory.
    pub memory_check: bool,
}

impl Default for Settings {
    /// The CLI's defaults.
    fn default() -> Settings {
        Settings {
            overrides: PlanOverrides::default(),
            lazy_leaves: false,
            statistics: false,
            poll: Duration::from_secs(5),
            idle: Duration::from_secs(300),
            verify_every: Some(Duration::from_secs(600)),
            retry: Duration::from_secs(10),
            debounce: Duration::ZERO,
            quiet: Duration::from_secs(2),
            stable_retry: Duration::from_millis(20),
            max_removals: None,
            incremental: true,
            memory_check: true,
        }
    }
}

/// What the driver must do next for the reloader. Each request is
/// answered with the [`Response`] of the same name (`Continue` with
/// [`Response::Continue`]: it only lets the driver read its clock between
/// two computations, so their times can be reported).
#[derive(Debug)]
#[non_exhaustive]
pub enum Request<'a> {
    /// Read the input files ([`Inputs::read`]).
    ReadInputs,
    /// Look up these interfaces (their TX queue count plans the queues).
    Links(&'a [String]),
    /// Check the plan against the kernel before changing anything
    /// ([`crate::load::preflight`]).
    Preflight(&'a Plan),
    /// Read these interfaces' trees back.
    ReadTrees(&'a [String]),
    /// Read the machine's memory ([`MemInfo::read`]).
    MemInfo,
    /// Load these streams ([`crate::backend::load_deletes_first`]).
    Send(&'a [IfaceOps<'static>]),
    /// Poll the counters ([`crate::live::LiveSource::poll`]).
    Poll(&'a PollRequest),
    /// Nothing: answer with [`Response::Continue`].
    Continue,
}

/// The answer to a [`Request`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Response {
    /// To [`Request::ReadInputs`].
    Inputs(Result<RawInputs>),
    /// To [`Request::ReadInputs`]: this file changed while it was read
    /// (size, mtime or inode): read again later.
    InputsChanging(std::path::PathBuf),
    /// To [`Request::Links`]: the interfaces in the order asked (a missing
    /// one is [`ApplyError::NoInterface`]).
    Links(Result<Vec<LinkSummary>>),
    /// To [`Request::Preflight`].
    Preflight(Result<()>),
    /// To [`Request::ReadTrees`].
    Trees(Result<BTreeMap<String, TcTree>>),
    /// To [`Request::MemInfo`].
    MemInfo(Option<MemInfo>),
    /// To [`Request::Send`].
    Sent(LoadReport),
    /// To [`Request::Poll`].
    Polled(Polled),
    /// To [`Request::Continue`].
    Continue,
}

/// What the reloader reports, in order.
#[derive(Debug)]
#[non_exhaustive]
pub enum Output {
    /// Something to log.
    Event(Event),
    /// Save the current plan ([`Reloader::plan`]) as the last good one.
    SaveLastGood,
    /// The outcome of a trigger: stamp it and write the status file.
    Record(Record),
    /// The removal guard refused inputs (`Some`), or what it refused is
    /// no longer pending (`None`): stamp it and keep it in the status.
    Pending(Option<Refused>),
    /// Record the inputs just applied ([`Reloader::applied`]) in the
    /// journal.
    Journal,
}

/// Inputs the removal guard refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Their sha256 ([`crate::journal::InputSet::sha256`]): what a
    /// confirmation names.
    pub sha256: String,
    /// Why.
    pub refusal: crate::guard::Refusal,
}

/// The status numbers of the daemon (for the status file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// Whether leaves are lazy.
    pub lazy_leaves: bool,
    /// Circuits in the plan it runs.
    pub circuits: usize,
    /// Circuits with their leaf loaded.
    pub active_leaves: usize,
}

/// The plan the daemon runs, with the index of its inputs for
/// incremental edits (when they could be indexed). The two are always of
/// the same inputs: they are replaced together.
#[derive(Debug)]
struct Current {
    plan: Plan,
    index: Option<InputsIndex>,
    /// The inputs, when there is no index to hold them.
    raw: Option<RawInputs>,
}

impl Current {
    fn applied(&self) -> Option<InputSet<'_>> {
        match (&self.index, &self.raw) {
            (Some(i), _) => Some(InputSet {
                network: &i.network_text,
                devices: i.devices.bytes(),
                config: i.config_text.as_deref(),
            }),
            (None, Some(r)) => Some(r.into()),
            (None, None) => None,
        }
    }
}

/// What the incremental edit path keeps of the inputs of the current
/// plan: the bytes of `network.json` and `lqos.conf` (an edit of either is
/// planned in full), the model read from them, `ShapedDevices.csv`
/// indexed by record, and where every class and leaf is in the plan.
#[derive(Debug)]
struct InputsIndex {
    network_text: String,
    config_text: Option<String>,
    net: Network,
    devices: DevicesIndex,
    plan: PlanIndex,
}

impl InputsIndex {
    /// The inputs handed back if ShapedDevices.csv cannot be indexed.
    fn new(
        inputs: &Inputs,
        raw: RawInputs,
        net: Network,
        plan: &Plan,
    ) -> std::result::Result<InputsIndex, RawInputs> {
        let Some(devices) = DevicesIndex::new(&inputs.devices_label(), raw.devices.clone(), &net)
        else {
            return Err(raw);
        };
        Ok(InputsIndex {
            network_text: raw.network,
            config_text: raw.config,
            net,
            devices,
            plan: PlanIndex::new(plan),
        })
    }
}

/// Lazy leaves or not, decided at the first read of the inputs.
#[derive(Debug)]
enum Leaves {
    /// Every planned leaf is loaded.
    All,
    /// Leaves follow traffic; the tracker exists once there is a plan.
    Lazy(Option<LeafTracker>),
}

/// A reload, verify or poll in progress.
#[derive(Debug)]
struct Job {
    trigger: Trigger,
    /// When its trigger happened (first file event, signal, timer).
    since: Instant,
    /// The `now` of the last call (a step's start).
    at: Instant,
    /// When the job started (its inputs were asked for).
    read_at: Instant,
    /// How the edit of a file-change job became ready.
    ready: Option<Ready>,
    step: Step,
}

#[derive(Debug)]
enum Step {
    /// Waiting for the inputs.
    Inputs { readback: bool },
    /// Waiting for the links that give the queue count.
    Links {
        readback: bool,
        raw: RawInputs,
        loaded: Box<crate::inputs::LoadedInputs>,
    },
    /// Planned; the next call ends the plan's time.
    Planned {
        readback: bool,
        raw: RawInputs,
        network: Network,
        plan: Plan,
    },
    /// Indexed; the next call ends the index's time.
    Indexed { readback: bool, cand: Candidate },
    /// Incremental edit: the changed rows read; the next call re-plans.
    Patch {
        raw: RawInputs,
        patch: Box<lqos_model::devices_index::DevicesPatch>,
        b: Breakdown,
    },
    /// Incremental edit: re-planned; the next call diffs.
    Replanned {
        cand: Candidate,
        at: Vec<(usize, usize)>,
        b: Breakdown,
    },
    /// Incremental edit: diffed; the next call loads.
    Diffed { ld: Box<Loading>, b: Breakdown },
    /// Waiting for the kernel's trees to find the leaves it has (lazy
    /// leaves, first plan).
    LeafTrees { readback: bool, cand: Candidate },
    /// Waiting for the preflight.
    Preflight { ld: Box<Loading> },
    /// Waiting for the trees to diff against.
    Trees { ld: Box<Loading> },
    /// Waiting for the machine's memory.
    Memory { ld: Box<Loading> },
    /// Waiting for the load.
    Send { ld: Box<Loading> },
    /// A load failed: waiting for the trees to resync the leaves.
    Resync { record: Record },
    /// A poll: waiting for the counters.
    Poll,
    /// A poll: waiting for the machine's memory.
    PollMemory { poll: Box<Poll> },
    /// A poll: waiting for its leaf ops to load.
    PollSend { poll: Box<Poll> },
}

/// Whether an edit takes the incremental path.
enum Incremental {
    /// It does: continue with this step.
    Continue(Box<Step>),
    /// The inputs' bytes are what was last applied.
    Unchanged,
    /// It does not (why), the inputs handed back for the full path.
    Full(Fallback, Result<RawInputs>),
}

/// What a load is for: the plan to run once it succeeds, the index of its
/// inputs, and how it was computed.
#[derive(Debug)]
struct Candidate {
    plan: Plan,
    index: Option<InputsIndex>,
    /// The inputs, when not indexed.
    raw: Option<RawInputs>,
    kind: CandidateKind,
}

#[derive(Debug, Clone, Copy)]
enum CandidateKind {
    /// Planned from all inputs, in `plan`.
    Full { plan: Duration },
    /// An incremental edit, with its times so far.
    Incremental(Breakdown),
    /// The current plan, verified.
    Verify,
}

/// A load in progress.
#[derive(Debug)]
struct Loading {
    cand: Candidate,
    /// The plan as loaded: with lazy leaves, without the idle circuits'
    /// leaves (`None`: the candidate's plan itself).
    eff: Option<Plan>,
    readback: bool,
    /// The trees the streams were diffed against, when read back (the
    /// memory check's base); `None`: the known state.
    live: Option<BTreeMap<String, TcTree>>,
    streams: Vec<IfaceOps<'static>>,
    /// When the load began (preflight, or an edit's memory check).
    started: Instant,
}

impl Loading {
    fn eff(&self) -> &Plan {
        self.eff.as_ref().unwrap_or(&self.cand.plan)
    }

    fn devs(&self) -> Vec<String> {
        self.eff()
            .interfaces
            .iter()
            .map(|i| i.dev.clone())
            .collect()
    }

    fn summary(&self) -> DiffSummary {
        summarize(&self.streams)
    }
}

/// A lazy-leaf poll in progress: the changes decided per interface.
#[derive(Debug)]
struct Poll {
    changes: Vec<(String, lazy::LeafChanges)>,
    streams: Vec<IfaceOps<'static>>,
}

/// The statistics poll's state: the poll of the plan of generation `gen`
/// and its latest result.
#[derive(Debug)]
struct Statistics {
    poll: StatsPoll,
    gen: u64,
    latest: Option<Arc<Snapshot>>,
}

/// The reloader: owns the plan the daemon runs, the model of the kernel
/// ([`KnownKernel`]), the lazy-leaf tracker, the statistics and the
/// timers (one table: [`Reloader::poll_timeout`]); takes triggers
/// and answers with `now` values, and says what to read, send, log and
/// record. It reads no file, socket or clock itself: a driver does
/// ([`super::Driver`]).
#[derive(Debug)]
pub struct Reloader {
    settings: Settings,
    inputs: Inputs,
    known: KnownKernel,
    current: Option<Current>,
    /// The saved plan's allocation, until there is a current plan.
    previous: Option<Allocation>,
    leaves: Option<Leaves>,
    status: Status,
    job: Option<Job>,
    out: VecDeque<Output>,
    /// Asked for and not yet started.
    start_at: Option<Instant>,
    hup_at: Option<Instant>,
    /// The pending edit of the input files.
    ready: Readiness,
    /// A reload to start again at a time (its inputs were changing).
    again: Option<(Trigger, Instant, bool, Instant)>,
    /// What the removal guard refused last (until applied or replaced).
    refused: Option<Refused>,
    /// The outcome of the last trigger recorded (what the status file and
    /// the health say).
    reported: Option<Outcome>,
    /// The squashed nodes last reported ([`Event::Squashed`]).
    squashed: Vec<lqos_tc::rates::Squashed>,
    /// A confirmation of `refused` (its sha256), and when it came.
    confirmed: Option<(String, Instant)>,
    /// The sha256 the guard lets through once (during a confirm's job).
    allow_once: Option<String>,
    retry_at: Option<Instant>,
    next_poll: Option<Instant>,
    next_verify: Option<Instant>,
    /// Links asked for (kept for [`Request::Links`]'s borrow).
    asked: Vec<String>,
    /// What the poll in progress reads.
    poll_req: PollRequest,
    /// Bumped whenever the current plan is replaced.
    plan_gen: u64,
    statistics: Option<Statistics>,
    /// The first `now` seen: statistics' times are measured from it.
    origin: Option<Instant>,
    /// Bytes of `ShapedDevices.csv` no longer needed (replaced by an edit,
    /// or read and found unchanged), for the next read to reuse.
    spare: Option<Vec<u8>>,
}

impl Reloader {
    /// A reloader for `inputs` (their paths label problems), planning
    /// with `previous`'s classids until it has a plan of its own.
    pub fn new(settings: Settings, inputs: Inputs, previous: Option<Allocation>) -> Reloader {
        let (settings_quiet, settings_settle) = (settings.quiet, settings.debounce);
        Reloader {
            settings,
            inputs,
            known: KnownKernel::unknown(),
            current: None,
            previous,
            leaves: None,
            status: Status::default(),
            job: None,
            out: VecDeque::new(),
            start_at: None,
            hup_at: None,
            ready: Readiness::new(settings_quiet, settings_settle),
            again: None,
            refused: None,
            reported: None,
            squashed: Vec::new(),
            confirmed: None,
            allow_once: None,
            retry_at: None,
            next_poll: None,
            next_verify: None,
            asked: Vec::new(),
            poll_req: PollRequest::default(),
            plan_gen: 0,
            statistics: None,
            origin: None,
            spare: None,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The plan the daemon runs (all leaves), once one was planned.
    pub fn plan(&self) -> Option<&Plan> {
        self.current.as_ref().map(|c| &c.plan)
    }

    /// The network model [`plan`](Self::plan) was planned from (kept in
    /// step with incremental edits), when the inputs could be indexed.
    pub fn network(&self) -> Option<&Network> {
        self.current.as_ref()?.index.as_ref().map(|i| &i.net)
    }

    /// A buffer of `ShapedDevices.csv` bytes the reloader no longer needs
    /// (the old bytes an edit replaced, or an unchanged read), to read the
    /// next [`Response::Inputs`] into: a large file's fresh buffer costs
    /// its page faults on every edit. `None` when there is none.
    pub fn take_spare(&mut self) -> Option<Vec<u8>> {
        self.spare.take()
    }

    /// The model of the kernel.
    pub fn known(&self) -> &KnownKernel {
        &self.known
    }

    /// The numbers for the status file.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Whether a reload, verify or poll is in progress.
    pub fn busy(&self) -> bool {
        self.job.is_some()
    }

    /// The first apply: read everything, read the kernel back, load.
    pub fn start(&mut self, now: Instant) {
        self.start_at = Some(now);
    }

    /// Apply now, reading the kernel back (SIGHUP); a pending edit is part
    /// of it.
    pub fn reload_now(&mut self, now: Instant) {
        self.ready.clear();
        self.hup_at = Some(now);
    }

    /// Something happened to an input file at `now` (the edit is read
    /// once complete: after a close or a rename, or a quiet period).
    pub fn file_event(&mut self, file: InputFile, e: FileEvent, now: Instant) {
        self.ready.event(file, e, now);
    }

    /// An operator confirmed the refused inputs with sha256 `sha`: they
    /// are applied once (if the files still hold them).
    pub fn confirm(&mut self, sha: &str, now: Instant) {
        match &self.refused {
            Some(r) if r.sha256 == sha => self.confirmed = Some((sha.to_string(), now)),
            Some(_) => self.emit(Event::ConfirmIgnored {
                sha256: sha.to_string(),
                pending: true,
            }),
            None => self.emit(Event::ConfirmIgnored {
                sha256: sha.to_string(),
                pending: false,
            }),
        }
    }

    /// What the removal guard refused last, until applied or replaced.
    pub fn refused(&self) -> Option<&Refused> {
        self.refused.as_ref()
    }

    /// The inputs of the plan the daemon runs (for the journal).
    pub fn applied(&self) -> Option<InputSet<'_>> {
        self.current.as_ref().and_then(Current::applied)
    }

    /// The statistics of the latest poll (with [`Settings::statistics`],
    /// once a plan was polled): every circuit's and node's counters and
    /// rates, kept monotonic across reloads.
    pub fn statistics(&self) -> Option<&Arc<Snapshot>> {
        self.statistics.as_ref()?.latest.as_ref()
    }

    /// Whether the daemon polls: lazy leaves (once decided) or statistics,
    /// with a plan.
    fn polls(&self) -> bool {
        matches!(self.leaves, Some(Leaves::Lazy(Some(_))))
            || (self.settings.statistics && self.current.is_some())
    }

    /// When [`Reloader::handle_timeout`] has something to start (`None`:
    /// nothing is waiting). Every timer of the daemon is in this table.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let polls = self.polls();
        [
            self.start_at,
            self.hup_at,
            self.confirmed.as_ref().map(|(_, t)| *t),
            self.again.map(|(_, _, _, at)| at),
            self.ready.deadline(),
            self.retry_at,
            self.next_poll.filter(|_| polls),
            self.next_verify,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Starts the first job that is due at `now` (start, reload, edit,
    /// retry, poll, verify, in that order), if none is running. Returns
    /// whether one started.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        if self.job.is_some() {
            return false;
        }
        if let Some(t) = self.start_at.take() {
            self.begin_reload(Trigger::Start, t, now, true);
        } else if let Some(t) = self.hup_at.take() {
            self.begin_reload(Trigger::Sighup, t, now, true);
        } else if let Some((sha, t)) = self.confirmed.take() {
            self.allow_once = Some(sha);
            self.begin_reload(Trigger::Confirm, t, now, false);
        } else if let Some((trigger, since, readback, _)) =
            self.again.filter(|(_, _, _, at)| now >= *at)
        {
            self.again = None;
            self.begin_reload(trigger, since, now, readback);
        } else if let Some((first, how)) = self.ready.take(now) {
            self.begin_reload(Trigger::FileChange, first, now, false);
            if let Some(j) = self.job.as_mut() {
                j.ready = Some(how);
            }
        } else if self.retry_at.is_some_and(|r| now >= r) {
            self.retry_at = None;
            self.begin_reload(Trigger::Retry, now, now, true);
        } else if self.next_poll.is_some_and(|p| now >= p) && self.polls() {
            self.next_poll = None;
            self.begin_poll(now);
        } else if self.next_verify.is_some_and(|v| now >= v) {
            self.next_verify = self.settings.verify_every.map(|v| now + v);
            self.begin_verify(now);
        } else {
            return false;
        }
        true
    }

    /// What the driver must do next (`None`: nothing; the job, if any,
    /// has ended).
    pub fn next_request(&self) -> Option<Request<'_>> {
        let job = self.job.as_ref()?;
        Some(match &job.step {
            Step::Inputs { .. } => Request::ReadInputs,
            Step::Links { .. } => Request::Links(&self.asked),
            Step::Planned { .. }
            | Step::Indexed { .. }
            | Step::Patch { .. }
            | Step::Replanned { .. }
            | Step::Diffed { .. } => Request::Continue,
            Step::LeafTrees { .. } | Step::Trees { .. } | Step::Resync { .. } => {
                Request::ReadTrees(&self.asked)
            }
            Step::Preflight { ld } => Request::Preflight(ld.eff()),
            Step::Memory { .. } | Step::PollMemory { .. } => Request::MemInfo,
            Step::Send { ld } => Request::Send(&ld.streams),
            Step::PollSend { poll } => Request::Send(&poll.streams),
            Step::Poll => Request::Poll(&self.poll_req),
        })
    }

    /// The next output (events, state to save, records), in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The answer to the last [`Reloader::next_request`], at `now`.
    ///
    /// # Panics
    ///
    /// If `r` does not answer the request (a driver bug).
    pub fn handle(&mut self, r: Response, now: Instant) {
        let Some(mut job) = self.job.take() else {
            panic!("a response without a request: {r:?}");
        };
        let step = std::mem::replace(&mut job.step, Step::Poll);
        let t_prev = std::mem::replace(&mut job.at, now);
        let trigger = job.trigger;
        self.job = Some(job);
        match (step, r) {
            (Step::Inputs { readback }, Response::Inputs(raw)) => {
                self.got_inputs(readback, raw, now)
            }
            (Step::Inputs { readback }, Response::InputsChanging(path)) => {
                self.inputs_changing(readback, path, now)
            }
            (
                Step::Links {
                    readback,
                    raw,
                    loaded,
                },
                Response::Links(links),
            ) => match links {
                Ok(l) => {
                    let n = l.iter().map(|l| l.num_tx_queues).min().unwrap_or(0);
                    self.plan_loaded(readback, raw, *loaded, n, now)
                }
                Err(error) => {
                    let error = match PlanConfig::from_lqos_config(&loaded.config, 1) {
                        Ok(cfg) => crate::inputs::with_config_key(error, &cfg.interfaces),
                        Err(_) => error,
                    };
                    self.plan_failed(error, now)
                }
            },
            (
                Step::Planned {
                    readback,
                    raw,
                    network,
                    plan,
                },
                Response::Continue,
            ) => {
                let since_read = self.read_started();
                let kind = CandidateKind::Full {
                    plan: now.saturating_duration_since(since_read),
                };
                if self.settings.incremental {
                    let (index, raw) = match InputsIndex::new(&self.inputs, raw, network, &plan) {
                        Ok(i) => (Some(i), None),
                        Err(raw) => (None, Some(raw)),
                    };
                    let cand = Candidate {
                        plan,
                        index,
                        raw,
                        kind,
                    };
                    self.set_step(Step::Indexed { readback, cand });
                } else {
                    let cand = Candidate {
                        plan,
                        index: None,
                        raw: Some(raw),
                        kind,
                    };
                    self.begin_load(cand, readback, now);
                }
            }
            (Step::Indexed { readback, cand }, Response::Continue) => {
                self.emit(Event::Indexed {
                    took: now.saturating_duration_since(t_prev),
                    indexed: cand.index.is_some(),
                });
                self.begin_load(cand, readback, now);
            }
            (Step::Patch { raw, patch, mut b }, Response::Continue) => {
                b.parse = now.saturating_duration_since(self.read_started());
                self.replan(raw, *patch, b, now);
            }
            (Step::Replanned { cand, at, mut b }, Response::Continue) => {
                b.plan = now.saturating_duration_since(t_prev);
                self.diff_patch(cand, at, b, now);
            }
            (Step::Diffed { mut ld, mut b }, Response::Continue) => {
                b.diff = now.saturating_duration_since(t_prev);
                ld.started = now;
                ld.cand.kind = CandidateKind::Incremental(b);
                self.check_memory(ld, now);
            }
            (Step::LeafTrees { readback, cand }, Response::Trees(trees)) => {
                let active = trees
                    .as_ref()
                    .map(|t| lqos_tc::rules::present_leaves(&cand.plan, t))
                    .unwrap_or_default();
                let since = self.job.as_ref().map_or(now, |j| j.since);
                self.leaves = Some(Leaves::Lazy(Some(LeafTracker::new(
                    self.settings.idle,
                    active,
                    since,
                ))));
                self.load_with(cand, readback, trees.ok().filter(|_| readback), now);
            }
            (Step::Preflight { ld }, Response::Preflight(r)) => match r {
                Err(e) => self.load_failed(ld, e, now),
                Ok(()) => self.preflighted(ld, now),
            },
            (Step::Trees { ld }, Response::Trees(r)) => match r {
                Err(e) => self.load_failed(ld, e, now),
                Ok(trees) => self.diff_live(ld, trees, now),
            },
            (Step::Memory { ld }, Response::MemInfo(m)) => match self.memory_verdict(&ld, m) {
                Err(e) => self.load_failed(ld, e, now),
                Ok(()) => self.send(ld, now),
            },
            (Step::Send { ld }, Response::Sent(report)) => self.loaded(ld, Some(report), now),
            (Step::Resync { record }, Response::Trees(r)) => {
                self.resynced(r, now);
                self.record(record);
                self.job = None;
            }
            (Step::Poll, Response::Polled(p)) => self.polled(p, t_prev, now),
            (Step::PollMemory { poll }, Response::MemInfo(m)) => self.poll_fit(*poll, m, now),
            (Step::PollSend { poll }, Response::Sent(report)) => self.poll_sent(*poll, report, now),
            (step, r) => panic!("{trigger}: response {r:?} does not answer {step:?}"),
        }
    }

    fn set_step(&mut self, step: Step) {
        if let Some(j) = self.job.as_mut() {
            j.step = step;
        }
    }

    fn job_trigger(&self) -> Trigger {
        self.job.as_ref().map_or(Trigger::Start, |j| j.trigger)
    }

    fn job_since(&self) -> Instant {
        self.job.as_ref().expect("a job").since
    }

    /// When the current job read its inputs (its first step).
    fn read_started(&self) -> Instant {
        self.job.as_ref().expect("a job").read_at
    }

    fn emit(&mut self, e: Event) {
        self.out.push_back(Output::Event(e));
    }

    fn record(&mut self, r: Record) {
        self.reported = Some(r.outcome);
        self.out.push_back(Output::Record(r));
    }

    fn begin_reload(&mut self, trigger: Trigger, since: Instant, now: Instant, readback: bool) {
        self.job = Some(Job {
            trigger,
            since,
            at: now,
            read_at: now,
            ready: None,
            step: Step::Inputs { readback },
        });
    }
}
