//! The crate's one error type.

use std::path::PathBuf;

use crate::input_file::InputFile;
use crate::netlink::NetlinkError;
use lqos_tc::memory::human_bytes;

/// Everything that can go wrong while loading, reading back or guarding a
/// plan. Each variant names the interface, the op (as `tc` text) and the
/// kernel's (or tc's) own message where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The kernel (or tc) rejected one op; the interface's load stopped there.
    #[error(
        "{dev}: op #{index} `{}` failed: {message}",
        lqos_tc::render::render_line(dev, op)
    )]
    OpFailed {
        /// Interface.
        dev: String,
        /// 0-based index of the op in the interface's stream.
        index: usize,
        /// The op (shown as its `tc -b` line).
        op: Box<lqos_tc::TcOp>,
        /// The kernel's extended-ACK text or tc's error text.
        message: String,
        /// errno, when the backend knows it.
        errno: Option<i32>,
    },
    /// The interface's stream stopped before all ops were sent (another
    /// interface's failure ended a shared batch, or the worker died).
    #[error("{dev}: only {sent} of {total} ops were applied ({reason})")]
    Incomplete {
        /// Interface.
        dev: String,
        /// Ops applied.
        sent: usize,
        /// Ops in the stream.
        total: usize,
        /// Why it stopped.
        reason: Stopped,
        /// The error that stopped it, when there is one (e.g. the `tc`
        /// process could not be run), shared by every interface it stopped.
        #[source]
        cause: Option<std::sync::Arc<ApplyError>>,
    },
    /// A planned interface does not exist.
    #[error("interface {dev} does not exist{}{}", in_netns(.netns), named_by(.config_key))]
    NoInterface {
        /// Interface.
        dev: String,
        /// Namespace searched, if not the current one.
        netns: Option<String>,
        /// The lqos.conf key that names it (`[bridge] to_network`, ...),
        /// when known ([`crate::inputs::config_key`]).
        config_key: Option<&'static str>,
    },
    /// The plan spreads circuits over more TX queues than the interface has.
    #[error("{dev}: the plan uses {needed} TX queues but the interface has {available}")]
    TooFewQueues {
        /// Interface.
        dev: String,
        /// Queues (HTB qdiscs under mq) in the plan.
        needed: usize,
        /// `num_tx_queues` of the interface.
        available: u32,
    },
    /// The plan puts an mq root on an interface with one TX queue (the
    /// kernel refuses it with EOPNOTSUPP).
    #[error("{dev} has a single TX queue, and mq needs a multiqueue device")]
    MqOnSingleQueue {
        /// Interface.
        dev: String,
    },
    /// A qdisc kind the plan needs is not available in this kernel.
    #[error("this kernel has no sch_{kind} ({refusal}); {}", works(.alternatives))]
    UnsupportedQdisc {
        /// Kind name (`cake`, `fq_codel`, ...).
        kind: String,
        /// The kernel's answer to the probe.
        refusal: QdiscRefusal,
        /// The other leaf qdiscs lqos plans (cake, fq_codel, pfifo) that
        /// this kernel accepts, in that order.
        alternatives: Vec<String>,
    },
    /// The plan has the `tc` classifier but this kernel cannot run it.
    #[error("the tc classifier (clsact, flower, skbedit) cannot run here: {reason}; nothing was changed")]
    ClassifierUnsupported {
        /// What is missing.
        reason: ClassifierMissing,
    },
    /// The plan has lqos's eBPF classifier (`classifier = "bpf"`) but this
    /// machine cannot run it (the data path's preflight; nothing was
    /// changed).
    #[error("lqos's eBPF classifier cannot run here: {source}; nothing was changed")]
    BpfUnsupported {
        /// What the preflight found missing.
        #[source]
        source: lqos_bpf::BpfError,
    },
    /// A step of lqos's eBPF classifier failed (the error names the map,
    /// program, interface or pin).
    #[error("eBPF classifier: {step}: {source}")]
    Bpf {
        /// The step that failed.
        step: BpfStep,
        /// What failed.
        #[source]
        source: lqos_bpf::BpfError,
    },
    /// The kernel has the qdisc kind but refuses the plan's options for it.
    #[error("this kernel rejects the plan's sch_{kind} options: {refusal}")]
    QdiscRejected {
        /// Kind name.
        kind: String,
        /// The kernel's answer to the probe.
        #[source]
        refusal: QdiscRefusal,
    },
    /// The load's leaf qdiscs would not fit in the kernel's memory
    /// (preflight: nothing was changed).
    #[error(
        "not enough memory: this load's {} new leaf qdiscs ({}) need about {} of kernel memory, \
         but MemAvailable {} minus a margin of {} leaves {}; loading it would run the kernel out \
         of memory mid-load. Nothing was changed",
        estimate.leaves_created(),
        estimate.describe(),
        human_bytes(*needed),
        human_bytes(mem.available),
        human_bytes(mem.margin()),
        human_bytes(mem.usable())
    )]
    NotEnoughMemory {
        /// What the load creates and frees, by the per-kind costs.
        estimate: Box<lqos_tc::memory::MemoryEstimate>,
        /// Bytes the load adds (created minus freed).
        needed: u64,
        /// This machine's memory.
        mem: crate::meminfo::MemInfo,
    },
    /// Another apply, or the reload daemon, holds the machine-wide lock.
    #[error(
        "{}{} (lock {path})",
        if *.daemon {
            "the reload daemon holds the lock: it applies every change of the input files itself"
        } else {
            "another apply is running"
        },
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid, as written in the lock file.
        holder: Option<u32>,
        /// Whether the holder is the reload daemon (it holds the lock for
        /// its whole life), as written in the lock file.
        daemon: bool,
    },
    /// A file or process operation failed.
    #[error("{}: {source}", io_context(action, path.as_deref()))]
    Io {
        /// What was being done.
        action: IoAction,
        /// The file (or directory, or program) it was done to, if any.
        path: Option<PathBuf>,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An external command (`ip`, `tc`) failed outside of an op stream.
    #[error("`{cmd}` failed: {message}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its stderr (trimmed) or exit status.
        message: String,
    },
    /// A netlink operation outside of an op stream failed (open, dump, link).
    #[error("netlink{}: {action}: {source}", .dev.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Netlink {
        /// Interface, if any.
        dev: Option<String>,
        /// What was being done.
        action: NetlinkAction,
        /// The socket layer's error (the kernel's errno and message for a
        /// refused request).
        #[source]
        source: NetlinkError,
    },
    /// A state directory or lock file others could tamper with: lqos
    /// refuses to use it.
    #[error("state {}: {what} {problem}; refusing to use it", .path.display())]
    UnsafeState {
        /// The directory or file.
        path: PathBuf,
        /// `state directory` or `lock file`.
        what: &'static str,
        /// What is wrong with it.
        problem: UnsafeState,
    },
    /// The saved state is unreadable or missing.
    #[error("state {path}: {reason}")]
    State {
        /// The state file or directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: StateProblem,
    },
    /// The plan itself is unusable.
    #[error("plan: {0}")]
    Plan(PlanProblem),
    /// LibreQoS's state files (adoption, comparison) cannot
    /// be read as LibreQoS writes them (the message names the file).
    #[error(transparent)]
    LibreQosState(lqos_tc::libreqos::StateError),
    /// LibreQoS's tc text cannot be read as a tree (file, line, command).
    #[error(transparent)]
    LibreQosTc(lqos_tc::libreqos::CompareError),
    /// The LibreQoS inputs have errors (the report lists every problem with
    /// its file, line, circuit or node).
    #[error(
        "the inputs have {} error(s) and {} warning(s)",
        report.error_count(),
        report.warning_count()
    )]
    InvalidInputs {
        /// Every problem found.
        report: Box<lqos_model::Report>,
    },
    /// `lqos.conf` (or the overrides) cannot be turned into a planner config.
    #[error("{}: {source}", .path.as_ref().map(|p| format!("config {}", p.display())).unwrap_or_else(|| "built-in config".into()))]
    Config {
        /// The config file, `None` for the built-in defaults.
        path: Option<PathBuf>,
        /// Why.
        #[source]
        source: lqos_tc::PlanError,
    },
    /// The planner refused the (valid) inputs.
    #[error("planning{}: {source}", .devices.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Planning {
        /// The devices file planned, if known.
        devices: Option<PathBuf>,
        /// Why.
        #[source]
        source: lqos_tc::PlanError,
    },
    /// A plan file is not an lqos plan.
    #[error("{} is not an lqos plan: {source}", .path.display())]
    PlanFile {
        /// The file.
        path: PathBuf,
        /// The JSON error (with line and column).
        #[source]
        source: serde_json::Error,
    },
}

fn works(alternatives: &[String]) -> String {
    match alternatives {
        [] => "no alternative leaf qdisc (cake, fq_codel, pfifo) works either".to_string(),
        [one] => format!("{one} works"),
        many => format!("{} work", many.join(" and ")),
    }
}

/// Why an interface's stream stopped before its end without an op of its
/// own failing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Stopped {
    /// The `tc` process could not run or died.
    #[error("the tc process failed")]
    TcFailed,
    /// The interface's load ran on a thread that panicked.
    #[error("the worker thread panicked")]
    WorkerPanicked,
    /// The combined `tc -b` file of all interfaces stopped at another
    /// interface's failed line.
    #[error("the combined tc batch stopped at line {line} ({dev})")]
    CombinedBatch {
        /// 1-based line of the combined file.
        line: usize,
        /// The interface of that line.
        dev: String,
    },
    /// The load was cancelled ([`crate::backend::Progress::cancelled`], e.g. on
    /// SIGTERM) and stopped between two batches.
    #[error("stopped on request{}", unsure_text(*.unsure))]
    Cancelled {
        /// Ops after the applied ones whose outcome is unknown: lines
        /// `tc -b` still held when it was killed (0 for netlink, which
        /// waits for the ACKs of the batch in flight).
        unsure: usize,
    },
}

fn unsure_text(unsure: usize) -> String {
    match unsure {
        0 => String::new(),
        n => format!("; tc was killed holding {n} more line(s), their outcome is unknown"),
    }
}

/// Why a plan cannot be applied at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanProblem {
    /// It names no interface.
    #[error("the plan has no interfaces")]
    NoInterfaces,
    /// It has lqos's eBPF classifier, and the caller gave no data path to
    /// load it with.
    #[error("the plan has the bpf classifier, but no eBPF data path was given to load it")]
    NoDataPath,
}

/// What is wrong with a file or directory of the saved state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateProblem {
    /// The state path exists but is not a directory.
    #[error("is not a directory")]
    NotADirectory,
    /// A value could not be written as JSON.
    #[error("cannot serialize: {0}")]
    Serialize(serde_json::Error),
    /// A state file is not JSON of the shape this version writes (the
    /// error has its line and column).
    #[error("not valid JSON for this version of lqos: {0}")]
    Json(serde_json::Error),
    /// The saved plan does not parse (the error has its line and column).
    #[error("not a saved lqos plan: {0}; remove it to start afresh")]
    NotASavedPlan(serde_json::Error),
    /// The saved plan is in a format this version does not read.
    #[error(
        "saved plan format {found} is not one this lqos reads (1 or {known}); \
         remove it to start afresh (classids may then change)"
    )]
    UnknownFormat {
        /// The file's format.
        found: u32,
        /// The newest format this version reads (it reads 1 too).
        known: u32,
    },
    /// A plan record (saved, or a plan file) cannot be turned back into
    /// its plan or network.
    #[error("{0}")]
    Record(lqos_tc::record::RecordError),
    /// A plan cannot be recorded.
    #[error("cannot record the plan: {0}")]
    Unrecordable(lqos_tc::record::RecordError),
    /// No plan was saved: there is nothing to roll back to.
    #[error("no plan was applied successfully yet: nothing to roll back to")]
    NothingSaved,
    /// The journal has fewer entries than the one asked for.
    #[error("the journal has {entries} entries, not {asked}")]
    NoJournalEntry {
        /// Entries it has.
        entries: usize,
        /// The entry asked for (1: the newest).
        asked: usize,
    },
    /// A file a journal entry names is not in the journal.
    #[error("a journal file is missing")]
    JournalFileMissing,
    /// A journal file that holds text is not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
}

/// What makes a state path unsafe to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnsafeState {
    /// Another user owns it.
    #[error("is owned by uid {owner}, not by this user (uid {me})")]
    OtherOwner {
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Its group or others may write to it.
    #[error("has mode {mode:04o}: group or others may write to it")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
}

/// Why the `tc` classifier (`clsact` + `flower` + `skbedit`) cannot run on
/// this kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClassifierMissing {
    /// The kernel is older than the first whose skbedit honours
    /// `queue_mapping` on egress.
    #[error(
        "kernel {release} is older than {}.{} (skbedit queue_mapping on egress needs {}.{})",
        .min.0, .min.1, .min.0, .min.1
    )]
    OldKernel {
        /// `uname -r`.
        release: String,
        /// The oldest kernel that works, `(major, minor)`.
        min: (u32, u32),
    },
    /// The kernel refused a probe op.
    #[error("the kernel refused `tc {op}`: {message}")]
    Refused {
        /// The op, as `tc` text.
        op: String,
        /// The kernel's extended-ACK text, else strerror.
        message: String,
    },
}

fn named_by(key: &Option<&'static str>) -> String {
    match key {
        Some(k) => format!(" (lqos.conf's {k} names it)"),
        None => String::new(),
    }
}

fn in_netns(netns: &Option<String>) -> String {
    match netns {
        Some(ns) => format!(" in network namespace {ns}"),
        None => String::new(),
    }
}

/// What lqos was doing when a file or process operation failed
/// ([`ApplyError::Io`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoAction {
    /// Reading an input file.
    ReadInput(InputFile),
    /// Decoding an input file's text (it is not UTF-8).
    DecodeInput(InputFile),
    /// Reading a plan file.
    ReadPlan,
    /// Reading a LibreQoS state file.
    ReadLibreQosState,
    /// Creating the state directory.
    CreateStateDir,
    /// Reading the state directory's metadata.
    ReadStateDir,
    /// Opening the lock file.
    OpenLock,
    /// Reading the lock file's metadata.
    ReadLock,
    /// Writing the holder into the lock file.
    WriteLock,
    /// Taking the lock.
    Lock,
    /// Reading a state file.
    Read,
    /// Removing a state file.
    Remove,
    /// Creating the temp file of an atomic write (in the file's directory).
    CreateTemp,
    /// Writing the temp file of an atomic write.
    WriteTemp,
    /// Renaming the temp file of an atomic write into place.
    Rename,
    /// Starting `tc` (the path is the program).
    SpawnTc,
    /// Waiting for `tc` to end.
    WaitTc,
    /// Starting `tc` for a root delete.
    SpawnRootDelete,
    /// Running a command (the line as run).
    Run(String),
    /// Mounting a private bpffs (tests of the eBPF classifier).
    MountBpffs,
}

/// `what was done to path`, as the messages say it.
fn io_context(action: &IoAction, path: Option<&std::path::Path>) -> String {
    let p = path.map(|p| p.display().to_string()).unwrap_or_default();
    let dir = path
        .and_then(|p| p.parent())
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| ".".into());
    match action {
        IoAction::ReadInput(f) => format!("cannot read {} {p}", f.what()),
        IoAction::DecodeInput(f) => format!("{} {p}", f.what()),
        IoAction::ReadPlan => format!("cannot read plan {p}"),
        IoAction::ReadLibreQosState => format!("cannot read LibreQoS state {p}"),
        IoAction::CreateStateDir => format!("creating state dir {p}"),
        IoAction::ReadStateDir => format!("reading state dir {p}"),
        IoAction::OpenLock => format!("opening lock file {p}"),
        IoAction::ReadLock => format!("reading lock file {p}"),
        IoAction::WriteLock => format!("writing lock file {p}"),
        IoAction::Lock => format!("locking {p}"),
        IoAction::Read => format!("reading {p}"),
        IoAction::Remove => format!("removing {p}"),
        IoAction::CreateTemp => format!("creating a temp file in {dir} for {p}"),
        IoAction::WriteTemp => format!("writing a temp file in {dir} for {p}"),
        IoAction::Rename => format!("renaming into {p}"),
        IoAction::SpawnTc => format!("spawning {p}"),
        IoAction::WaitTc => "waiting for tc".into(),
        IoAction::SpawnRootDelete => "spawning tc qdisc del".into(),
        IoAction::Run(line) => format!("running `{line}`"),
        IoAction::MountBpffs => format!("mounting a private bpffs on {p}"),
    }
}

/// What lqos was doing when a netlink operation outside an op stream
/// failed ([`ApplyError::Netlink`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetlinkAction {
    /// Opening the rtnetlink socket.
    OpenSocket,
    /// Opening the socket of a qdisc kind probe.
    OpenProbeSocket,
    /// Creating or finding the probe's link.
    ProbeLink,
    /// Looking up an interface.
    LookUpInterface,
    /// Reading an interface's tc tree back.
    ReadTree,
    /// Reading an interface's class statistics.
    ReadClassStats,
    /// Reading an interface's qdisc statistics.
    ReadQdiscStats,
    /// Loading an op stream.
    Load,
}

impl std::fmt::Display for NetlinkAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NetlinkAction::OpenSocket => "opening the rtnetlink socket",
            NetlinkAction::OpenProbeSocket => "opening a probe socket",
            NetlinkAction::ProbeLink => "probe link",
            NetlinkAction::LookUpInterface => "looking up the interface",
            NetlinkAction::ReadTree => "reading the tc tree",
            NetlinkAction::ReadClassStats => "reading class statistics",
            NetlinkAction::ReadQdiscStats => "reading qdisc statistics",
            NetlinkAction::Load => "loading",
        })
    }
}

/// The step of lqos's eBPF classifier that failed ([`ApplyError::Bpf`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BpfStep {
    /// Checking that this machine can run it, before any change.
    Preflight,
    /// Reading the online CPUs (the TX queues' owners).
    OnlineCpus,
    /// Opening the pinned maps.
    OpenMaps,
    /// Turning the plan's (or an edit's) addresses into map entries.
    PlaceAddresses,
    /// Removing the entries that may go before a tree load.
    RemoveEarly,
    /// Loading the programs, syncing the maps and attaching.
    Install,
    /// Bringing the maps to the plan after a tree load.
    UpdateMaps,
    /// Reading the maps back.
    ReadMaps,
    /// Reading the plan's interfaces.
    ReadInterfaces,
    /// Reading what is attached to the interfaces.
    ReadAttachments,
    /// Reading the per-CPU counters.
    ReadCounters,
    /// Detaching and unpinning everything.
    Remove,
    /// Reading the per-circuit TCP statistics.
    ReadTcpStats,
}

impl std::fmt::Display for BpfStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BpfStep::Preflight => "preflight",
            BpfStep::OnlineCpus => "reading the online CPUs",
            BpfStep::OpenMaps => "opening the maps",
            BpfStep::PlaceAddresses => "placing the addresses",
            BpfStep::RemoveEarly => "removing map entries before the load",
            BpfStep::Install => "installing",
            BpfStep::UpdateMaps => "updating the maps",
            BpfStep::ReadMaps => "reading the maps",
            BpfStep::ReadInterfaces => "reading the plan's interfaces",
            BpfStep::ReadAttachments => "reading the interfaces' attachments",
            BpfStep::ReadCounters => "reading the counters",
            BpfStep::Remove => "removing",
            BpfStep::ReadTcpStats => "reading the TCP statistics",
        })
    }
}

impl ApplyError {
    /// An I/O error of `action` on `path`.
    pub fn io(
        action: IoAction,
        path: Option<&std::path::Path>,
        source: std::io::Error,
    ) -> ApplyError {
        ApplyError::Io {
            action,
            path: path.map(std::path::Path::to_path_buf),
            source,
        }
    }

    /// The interface the error is about, if any.
    pub fn dev(&self) -> Option<&str> {
        match self {
            ApplyError::OpFailed { dev, .. }
            | ApplyError::Incomplete { dev, .. }
            | ApplyError::NoInterface { dev, .. }
            | ApplyError::TooFewQueues { dev, .. }
            | ApplyError::MqOnSingleQueue { dev } => Some(dev),
            ApplyError::Netlink { dev, .. } => dev.as_deref(),
            _ => None,
        }
    }
}

/// A kernel's refusal of a probe qdisc: `errno` decides, `message` is the
/// extended-ACK text for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (errno {errno})")]
#[non_exhaustive]
pub struct QdiscRefusal {
    /// Positive errno.
    pub errno: i32,
    /// The kernel's extended-ACK text, else strerror.
    pub message: String,
}

impl QdiscRefusal {
    /// A refusal with `errno` and the kernel's `message`.
    pub fn new(errno: i32, message: impl Into<String>) -> QdiscRefusal {
        QdiscRefusal {
            errno,
            message: message.into(),
        }
    }

    /// The kernel refused because it has no such qdisc kind (`qdisc_create`
    /// answers `ENOENT`, "Specified qdisc kind is unknown", after trying to
    /// load the module); any other errno means it has the kind but rejects
    /// the options.
    pub fn is_unknown_kind(&self) -> bool {
        self.errno == libc::ENOENT
    }
}

/// Result with [`ApplyError`].
pub type Result<T, E = ApplyError> = std::result::Result<T, E>;
