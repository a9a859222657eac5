//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading, reading back or guarding a
/// plan. Each variant names the interface, the op (as `tc` text) and the
/// kernel's (or tc's) own message where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The kernel (or tc) rejected one op; the interface's load stopped there.
    #[error("{dev}: op #{index} `{op_text}` failed: {message}")]
    OpFailed {
        /// Interface.
        dev: String,
        /// 0-based index of the op in the interface's stream.
        index: usize,
        /// The op as a `tc -b` line.
        op_text: String,
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
    #[error("this kernel has no sch_{kind} ({message}); {hint}")]
    UnsupportedQdisc {
        /// Kind name (`cake`, `fq_codel`, ...).
        kind: String,
        /// The kernel's answer to the probe.
        message: String,
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
    #[error("this kernel rejects the plan's sch_{kind} options: {message}")]
    QdiscRejected {
        /// Kind name.
        kind: String,
        /// The kernel's answer to the probe.
        message: String,
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
    #[error("netlink{}: {context}: {message}", .dev.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Netlink {
        /// Interface, if any.
        dev: Option<String>,
        /// What was being done.
        context: String,
        /// The error.
        message: String,
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
