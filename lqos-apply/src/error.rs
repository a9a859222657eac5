//! The crate's one error type.

use std::path::PathBuf;

use crate::live::QdiscRefusal;
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
        lqos_tc::render_line(dev, op)
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
        reason: String,
        /// The error that stopped it, when there is one (e.g. the `tc`
        /// process could not be run), shared by every interface it stopped.
        #[source]
        cause: Option<std::sync::Arc<ApplyError>>,
    },
    /// A planned interface does not exist.
    #[error("interface {dev} does not exist{}", in_netns(.netns))]
    NoInterface {
        /// Interface.
        dev: String,
        /// Namespace searched, if not the current one.
        netns: Option<String>,
    },
    /// The plan spreads circuits over more TX queues than the interface has.
    #[error(
        "{dev}: the plan uses {needed} TX queues but the interface has {available}; \
         plan with --queues {available} (or fewer)"
    )]
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
    #[error(
        "{dev} has a single TX queue, and mq needs a multiqueue device; plan with --queues 1 \
         (an HTB root, no mq; `lqos apply` does this itself when neither --queues nor \
         override_available_queues is given)"
    )]
    MqOnSingleQueue {
        /// Interface.
        dev: String,
    },
    /// A qdisc kind the plan needs is not available in this kernel.
    #[error("this kernel has no sch_{kind} ({refusal}); {hint}")]
    UnsupportedQdisc {
        /// Kind name (`cake`, `fq_codel`, ...).
        kind: String,
        /// The kernel's answer to the probe.
        #[source]
        refusal: QdiscRefusal,
        /// What to do instead.
        hint: String,
    },
    /// The plan has the `tc` classifier but this kernel cannot run it.
    #[error("--classifier tc: {reason}; nothing was changed. Use --classifier none (or `classifier = \"none\"` in lqos.conf's [lqos] section) and feed ip_map.csv from `lqos plan --out DIR` to an XDP classifier (LibreQoS's lqosd)")]
    ClassifierUnsupported {
        /// What is missing (kernel version, or the kernel's refusal).
        reason: String,
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
         of memory mid-load. Nothing was changed. Use lazy leaves (`lqos watch --lazy-leaves`: \
         a circuit gets its leaf only while it carries traffic), a cheaper leaf (--sqm fq_codel: \
         69 KiB each, or pfifo), or more memory; --skip-memory-check loads anyway",
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
        mem: crate::memory::MemInfo,
    },
    /// Another apply holds the machine-wide lock.
    #[error(
        "another lqos apply is running{} (lock {path}); wait for it to finish",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid, as written in the lock file.
        holder: Option<u32>,
    },
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
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
    #[error("netlink{}: {context}: {source}", .dev.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Netlink {
        /// Interface, if any.
        dev: Option<String>,
        /// What was being done.
        context: String,
        /// The socket layer's error (the kernel's errno and message for a
        /// refused request).
        #[source]
        source: NetlinkError,
    },
    /// The saved state is unreadable or missing.
    #[error("state {path}: {message}")]
    State {
        /// The state file or directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The plan itself is unusable (e.g. names no interface).
    #[error("plan: {0}")]
    Plan(String),
    /// LibreQoS's state files (`--adopt-libreqos`, `lqos compare`) cannot
    /// be read as LibreQoS writes them (the message names the file).
    #[error(transparent)]
    LibreQosState(lqos_tc::libreqos::StateError),
    /// LibreQoS's tc text cannot be read as a tree (file, line, command).
    #[error(transparent)]
    LibreQosTc(lqos_tc::libreqos::CompareError),
    /// The LibreQoS inputs have errors (the report lists every problem with
    /// its file, line, circuit or node).
    #[error(
        "the inputs have {} error(s) and {} warning(s); run `lqos check` for details",
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

fn in_netns(netns: &Option<String>) -> String {
    match netns {
        Some(ns) => format!(" in network namespace {ns}"),
        None => String::new(),
    }
}

impl ApplyError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> ApplyError {
        ApplyError::Io {
            context: context.into(),
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

/// Result with [`ApplyError`].
pub type Result<T, E = ApplyError> = std::result::Result<T, E>;
