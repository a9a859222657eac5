//! What the daemon reports: typed events (the CLI turns them into log
//! lines) and the records of each trigger's outcome (the status file).

use std::time::Duration;

use lqos_model::Problem;
use lqos_tc::DiffSummary;

use crate::error::ApplyError;
use crate::memory::MemInfo;
use crate::state::StateFile;
use crate::watch::{Outcome, Trigger};

/// One thing the daemon did or found, with its numbers. Events state
/// facts; what to advise an operator is the embedding program's choice.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// The saved last good plan could not be read: classids may change.
    SavedPlanIgnored {
        /// Why.
        error: ApplyError,
    },
    /// The first read of the inputs at start decided whether leaves are
    /// lazy (the flag, or `[lqos] lazy_leaves` of that read).
    Started {
        /// Whether leaves are lazy from now on.
        lazy_leaves: bool,
    },
    /// A warning of the inputs (they are still applied).
    InputWarning(Problem),
    /// An error of the inputs (they are not applied).
    InvalidInput(Problem),
    /// Inputs with errors were rejected: nothing was sent; the live tree
    /// and the last good plan stay.
    Rejected {
        /// What started the reload.
        trigger: Trigger,
        /// How many errors the inputs have.
        errors: usize,
    },
    /// The config (or the overrides) or the planner refused the inputs:
    /// nothing was sent.
    PlanRefused {
        /// What started the reload.
        trigger: Trigger,
        /// Why.
        error: ApplyError,
    },
    /// The inputs could not be read, or the interfaces not probed:
    /// retried later.
    PlanFailed {
        /// What started the reload.
        trigger: Trigger,
        /// Why.
        error: ApplyError,
    },
    /// The inputs of a plan were indexed for incremental edits (`indexed`
    /// is false when ShapedDevices.csv cannot be: every edit is then
    /// planned in full).
    Indexed {
        /// How long indexing took.
        took: Duration,
        /// Whether the index exists.
        indexed: bool,
    },
    /// An edit took the full path.
    PlannedInFull {
        /// Why not incremental.
        reason: Fallback,
    },
    /// An incremental edit's re-plan is right but its short diff does not
    /// apply (e.g. a leaf changes kind): the whole tree is diffed against
    /// the known state instead.
    WholeTreeDiff {
        /// Why.
        reason: lqos_tc::replan::KnownDiffError,
    },
    /// An input file ends in the middle of a record after its writer
    /// closed it: the rest is waited for (at most `wait`, then it is read
    /// as it is).
    PartialWrite {
        /// The file.
        file: crate::input_file::InputFile,
        /// How long at most.
        wait: Duration,
    },
    /// An input file changed while it was read: read again soon.
    InputsChanging {
        /// The file.
        path: std::path::PathBuf,
    },
    /// The removal guard refused the inputs: nothing was sent; the live
    /// tree and the last good plan stay until they are confirmed.
    RemovalsRefused {
        /// What started the reload.
        trigger: Trigger,
        /// Why (how many circuits, the first few).
        refusal: crate::guard::Refusal,
        /// The inputs' sha256 (what a confirmation names).
        sha256: String,
    },
    /// A confirmation that applies to nothing: no refusal is pending
    /// (`pending` false), or it names other inputs.
    ConfirmIgnored {
        /// The sha256 it names.
        sha256: String,
        /// Whether a refusal is pending.
        pending: bool,
    },
    /// The inputs' bytes are what was last applied, and the last reload
    /// succeeded: nothing to do. (After a reload that did not, the same
    /// finding is an [`Event::Applied`] with [`LoadPath::Unchanged`]: the
    /// inputs are live again.)
    Unchanged {
        /// What started the reload.
        trigger: Trigger,
    },
    /// An interface is rebuilt from scratch (root delete + full build).
    FullRebuild {
        /// The interface.
        dev: String,
        /// Why (its layout differs from the plan's).
        reason: crate::engine::FullReason,
        /// Ops sent to it.
        ops: usize,
    },
    /// A plan was loaded (possibly nothing to send: in sync).
    Applied(Applied),
    /// What the planner squashes changed with the plan just loaded (said
    /// once per change, not on every reload): nodes whose circuits'
    /// minimums are now squashed or squashed differently
    /// ([`lqos_tc::rates::Squashed`]: asked, what fits, how many circuits), and
    /// nodes whose circuits' minimums are no longer squashed.
    Squashed {
        /// Nodes squashed that were not, or with other numbers.
        now: Vec<lqos_tc::rates::Squashed>,
        /// Nodes squashed before and no longer.
        cleared: Vec<String>,
        /// Nodes squashed in the plan, in all.
        total: usize,
    },
    /// A load failed: refused by the memory preflight (nothing changed)
    /// or by the kernel (the failing op is in the error). Retried.
    LoadFailed {
        /// What started it.
        trigger: Trigger,
        /// What the load was to send.
        summary: DiffSummary,
        /// Why.
        error: ApplyError,
    },
    /// The kernel accepted ops the daemon's model of it could not apply:
    /// the model is dropped and the kernel read back.
    OutOfStep {
        /// The interface.
        dev: String,
    },
    /// The last good plan was written to the state directory.
    LastGoodSaved {
        /// How long writing took.
        took: Duration,
    },
    /// A state file could not be written.
    SaveFailed {
        /// Which one.
        what: StateFile,
        /// Why.
        error: ApplyError,
    },
    /// After a failed load, the leaves in the kernel could not be read
    /// back (the active set stays as it was).
    LeavesUnreadable {
        /// Why.
        error: ApplyError,
    },
    /// A verify found the kernel as planned.
    InSync,
    /// A verify repaired drift with these ops (rendered as `tc` lines).
    Repaired {
        /// The ops sent, one `tc` line each.
        ops: Vec<String>,
    },
    /// A poll could not read an interface's counters (its leaves stay as
    /// they are and its statistics keep their counters until the next
    /// poll).
    CountersUnreadable {
        /// The interface.
        dev: String,
        /// Why.
        error: ApplyError,
    },
    /// A poll (lazy leaves, statistics) read the counters.
    CountersRead {
        /// From the request to the last dump's end.
        took: Duration,
        /// Interfaces read.
        interfaces: usize,
        /// Interfaces that could not be read (each a
        /// [`Event::CountersUnreadable`] before this).
        failed: usize,
    },
    /// Lazy leaves: not every circuit that started carrying traffic gets
    /// its leaf, because the leaves would not fit in memory.
    LeavesDeferred {
        /// The interface.
        dev: String,
        /// Leaves added.
        added: usize,
        /// Circuits left without (they get their leaf when memory frees
        /// up and they carry traffic again).
        deferred: usize,
        /// The machine's memory.
        mem: MemInfo,
    },
    /// Lazy leaves: the kernel refused a leaf op.
    LeafKernelError {
        /// The interface.
        dev: String,
        /// Why.
        error: ApplyError,
    },
    /// Lazy leaves: a poll changed nothing.
    LeavesUnchanged {
        /// Circuits with their leaf.
        active: usize,
    },
    /// Lazy leaves: a poll added and removed leaves.
    Leaves {
        /// Leaves added.
        added: usize,
        /// Leaves removed.
        removed: usize,
        /// Circuits with their leaf now.
        active: usize,
        /// From the poll to kernel done.
        took: Duration,
    },
}

/// Why an edit took the full path instead of the incremental one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// No indexed last good state (after start, an error, or when the
    /// devices file cannot be indexed).
    NoIndex,
    /// The inputs could not be read.
    Unreadable(String),
    /// `network.json` or `lqos.conf` changed.
    OtherFileChanged,
    /// The devices file changed in a way the index cannot read alone.
    Devices(lqos_model::devices_index::DevicesFallback),
    /// The changed circuits cannot be re-planned in place.
    Replan(lqos_tc::replan::ReplanFallback),
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fallback::NoIndex => f.write_str("no indexed last good state"),
            Fallback::Unreadable(e) => f.write_str(e),
            Fallback::OtherFileChanged => f.write_str("network.json or lqos.conf changed"),
            Fallback::Devices(why) => why.fmt(f),
            Fallback::Replan(why) => why.fmt(f),
        }
    }
}

/// A load that succeeded.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Applied {
    /// What started it.
    pub trigger: Trigger,
    /// The ops sent, counted.
    pub summary: DiffSummary,
    /// From the trigger (first file event, signal, timer) to kernel done.
    pub took: Duration,
    /// Which path, with its times.
    pub path: LoadPath,
}

/// How a load was computed, with the times of its parts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LoadPath {
    /// All inputs read and planned (or the current plan, for a verify),
    /// diffed against the known state or the kernel read back.
    Full {
        /// Read + validate + plan.
        plan: Duration,
        /// Preflight, read back (if any), diff, memory check, load.
        load: Duration,
        /// Whether the kernel was read back.
        readback: bool,
    },
    /// Only the edited rows of ShapedDevices.csv re-read, their circuits
    /// re-planned and diffed against the known state.
    Incremental(Breakdown),
    /// The inputs are those of the plan the kernel holds (after inputs
    /// that were rejected, refused or could not be read): nothing to send,
    /// and they are live again.
    Unchanged,
}

/// The parts of an incremental edit's time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Breakdown {
    /// Read the files, find and re-read the changed rows, check them.
    pub parse: Duration,
    /// Re-plan the changed circuits.
    pub plan: Duration,
    /// Diff their ops against the known kernel state.
    pub diff: Duration,
    /// Memory check, send them and wait for the kernel's ACKs.
    pub load: Duration,
    /// Rows re-read.
    pub rows: usize,
    /// Circuits re-planned.
    pub circuits: usize,
}

/// The outcome of one trigger, for the status file (the driver stamps it
/// with the wall-clock time and saves it).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Record {
    /// What started it.
    pub trigger: Trigger,
    /// How it ended.
    pub outcome: Outcome,
    /// The ops sent (or that were to be sent), counted.
    pub summary: DiffSummary,
    /// From the trigger to its end.
    pub took: Duration,
    /// The problem, as text (validation report, failing op and kernel
    /// message).
    pub error: Option<String>,
}
