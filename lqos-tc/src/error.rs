//! The planner's errors, and what is wrong with a piece of tc text: the
//! vocabulary every module that can fail shares (so none imports a user
//! of it for an error type).

use ipnet::IpNet;
use lqos_model::Rate;

use crate::ops::HTB_MAX_DEPTH;

/// Why a plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Bad or inconsistent configuration.
    #[error("config: {0}")]
    Config(#[from] ConfigError),
    /// A leaf qdisc spec (`default_sqm`) that lqos cannot use.
    #[error("sqm {spec:?}: {reason}")]
    Sqm {
        /// The spec as written.
        spec: String,
        /// Why.
        reason: SqmError,
    },
    /// A circuit's `sqm` override that lqos cannot use.
    #[error("circuit {circuit:?}{}: sqm {spec:?}: {reason}", csv_line(*.line))]
    CircuitSqm {
        /// Circuit ID.
        circuit: String,
        /// 1-based CSV line of the override (0 if not from a file).
        line: usize,
        /// The spec as written.
        spec: String,
        /// Why.
        reason: SqmError,
    },
    /// A circuit names a parent node that is not in the network. Only a
    /// network built in code gets here: reading the files
    /// ([`lqos_model::load`]) leaves such circuits out of the network,
    /// unshaped, with a warning, as LibreQoS does.
    #[error("circuit {circuit:?}: parent node {parent:?} is not in network.json")]
    UnknownParent {
        /// Circuit ID.
        circuit: String,
        /// The missing node.
        parent: String,
    },
    /// Two circuits with one Circuit ID.
    #[error("circuit ID {0:?} appears twice")]
    DuplicateCircuit(String),
    /// A circuit with a zero maximum rate.
    #[error("circuit {circuit:?}: {direction} max rate is 0")]
    ZeroRate {
        /// Circuit ID.
        circuit: String,
        /// `download` or `upload`.
        direction: &'static str,
    },
    /// The hierarchy is deeper than HTB allows.
    #[error("{what} would be HTB class level {levels}; HTB allows {max} (top-level nodes are level 1): flatten network.json", max = HTB_MAX_DEPTH)]
    TooDeep {
        /// `node "X"` or `circuit "Y" under node "X"`.
        what: String,
        /// The level it would need.
        levels: u32,
    },
    /// More classes in one queue than the 16-bit minor space holds.
    #[error("queue {queue} (HTB {major:x}:) needs more than 65533 classes; use more queues or split the largest top-level node")]
    MinorOverflow {
        /// 1-based queue number.
        queue: u32,
        /// The HTB major of that queue (download side).
        major: u16,
    },
    /// More leaf qdiscs on an interface than the 16-bit handle space holds.
    #[error("interface {interface}: {needed} circuit leaf qdiscs, but only {available} qdisc handles are available (16-bit majors); give some circuits sqm `none` or spread them over more interfaces")]
    LeafMajorOverflow {
        /// The interface.
        interface: String,
        /// Leaf qdiscs wanted on it.
        needed: usize,
        /// Handles available for leaves.
        available: usize,
    },
}

/// What is wrong with a [`PlanConfig`](crate::PlanConfig) (or the
/// `lqos.conf` it was read from).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A queue strategy other than `balanced` and `round-robin`.
    #[error("unknown queue strategy {0:?} (expected balanced or round-robin)")]
    UnknownStrategy(String),
    /// `lqos.conf` names no interfaces.
    #[error("lqos.conf has neither [bridge] nor [single_interface]")]
    NoInterfaces,
    /// No TX queue to shape on.
    #[error("at least 1 TX queue is needed")]
    NoQueues,
    /// On a stick, fewer than two queues (one per direction).
    #[error("on a stick needs at least 2 TX queues (download and upload halves), got {queues}")]
    TooFewStickQueues {
        /// The queues given.
        queues: u32,
    },
    /// More queues than lqos plans for.
    #[error("{queues} queues is more than lqos supports ({max})")]
    TooManyQueues {
        /// The queues given.
        queues: u32,
        /// The most lqos supports.
        max: u32,
    },
    /// A name no Linux interface can have.
    #[error("invalid interface name {0:?}")]
    InterfaceName(String),
    /// A bridge whose two sides are one interface.
    #[error("download and upload interface are both {0:?}; use [single_interface] for on-a-stick")]
    SameInterface(String),
    /// A capacity below what HTB's layout needs.
    #[error("{what} {rate} Mbps is too small (at least {min} Mbps)")]
    TooSmall {
        /// Which one.
        what: Capacity,
        /// As given.
        rate: Rate,
        /// The least it may be.
        min: Rate,
    },
    /// `network.json` has a node with the name of a node the planner
    /// generates.
    #[error(
        "network.json has a node named {0:?}, which lqos needs for circuits without a parent node"
    )]
    ReservedNodeName(String),
}

/// A capacity of a [`PlanConfig`](crate::PlanConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Capacity {
    /// The download interface's (`downlink_bandwidth_mbps`).
    Download,
    /// The upload interface's (`uplink_bandwidth_mbps`).
    Upload,
    /// A generated parent node's download rate.
    GeneratedDownload,
    /// A generated parent node's upload rate.
    GeneratedUpload,
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Capacity::Download => "download capacity",
            Capacity::Upload => "upload capacity",
            Capacity::GeneratedDownload => "generated parent node download",
            Capacity::GeneratedUpload => "generated parent node upload",
        })
    }
}

/// Why an sqm spec (`default_sqm`, a planner override, the CSV's `sqm` column)
/// cannot be a circuit's leaf qdisc.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SqmError {
    /// Nothing but blanks.
    #[error("empty")]
    Empty,
    /// A qdisc kind lqos does not model.
    #[error("unsupported qdisc kind {0:?} (cake, fq_codel, pfifo, bfifo, none)")]
    UnsupportedKind(String),
    /// `mq` or `htb`: the tree's own kinds, never a leaf.
    #[error("mq/htb cannot be a leaf qdisc")]
    NotALeaf,
    /// The kind's options do not parse.
    #[error(transparent)]
    Syntax(Box<SyntaxError>),
}

impl From<SyntaxError> for SqmError {
    fn from(e: SyntaxError) -> SqmError {
        SqmError::Syntax(Box::new(e))
    }
}

/// ` (ShapedDevices line N)`, or nothing for line 0 (not from a file).
fn csv_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" (ShapedDevices line {line})")
    }
}

/// What is wrong with one tc command, or with a qdisc kind and its options
/// ([`crate::parse::parse_qdisc_kind`]), a handle, a rate, a size or a time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyntaxError {
    /// `tc OBJECT VERB` with a verb tc does not have.
    #[error("unsupported {object} command {verb:?}")]
    UnsupportedVerb {
        /// `qdisc`, `class`, `filter` (or what was written).
        object: String,
        /// The verb as written.
        verb: String,
    },
    /// `tc OBJECT` and nothing after it.
    #[error("{object}: missing command")]
    MissingVerb {
        /// The object as written.
        object: String,
    },
    /// An object other than `qdisc`, `class` and `filter`.
    #[error("unsupported tc object {0:?} (qdisc, class or filter)")]
    UnsupportedObject(String),
    /// A form of a command lqos does not take.
    #[error("{0}")]
    Unsupported(Unsupported),
    /// A required part of a command is missing.
    #[error("{object}: missing {what}")]
    Missing {
        /// The command or its part (`qdisc`, `htb class`, `skbedit`, ...).
        object: &'static str,
        /// What is missing (`dev`, `classid`, `rate`, ...).
        what: &'static str,
    },
    /// An option without its value at the end of the line.
    #[error("{key}: missing value")]
    MissingValue {
        /// The option.
        key: String,
    },
    /// Words after a delete that takes none.
    #[error("{object}: unexpected {words:?}")]
    Unexpected {
        /// `qdisc del`, `class del` or `filter del`.
        object: &'static str,
        /// The extra words.
        words: String,
    },
    /// A class of another kind than `htb`.
    #[error("class: only htb classes are supported, found {0:?}")]
    NotHtbClass(String),
    /// A filter protocol other than `ip` and `ipv6`.
    #[error("filter: unsupported protocol {0:?}")]
    UnsupportedProtocol(String),
    /// An option the kind does not have (or lqos does not know).
    #[error("{kind}: unsupported option {option:?}")]
    UnsupportedOption {
        /// The kind (`htb`, `cake`, `htb class`, `flower`, ...).
        kind: String,
        /// The option as written.
        option: String,
    },
    /// A flower address of the other family than the filter's protocol.
    #[error("flower: {net} is not protocol {protocol}")]
    WrongFamily {
        /// The address.
        net: IpNet,
        /// The filter's protocol (`ip`, `ipv6`).
        protocol: &'static str,
    },
    /// Not a decimal number (or too large for its field).
    #[error("invalid number {0:?}")]
    Number(String),
    /// Not a number in 0..=65535.
    #[error("invalid number {0:?} (0..=65535)")]
    U16(String),
    /// Not a hex number.
    #[error("invalid hex number {0:?}")]
    Hex(String),
    /// A rate, size or time whose number part is not a decimal.
    #[error("invalid number in {0:?}")]
    Decimal(String),
    /// Not a handle or classid.
    #[error("invalid handle {0:?}")]
    Handle(String),
    /// Not an address prefix.
    #[error("invalid prefix {0:?}")]
    Prefix(String),
    /// Not an address.
    #[error("invalid address {0:?}")]
    Address(String),
    /// A prefix with address bits past its length.
    #[error("{text}: host bits are set (use {trunc})")]
    HostBits {
        /// The prefix as written.
        text: String,
        /// The prefix it stands for.
        trunc: IpNet,
    },
    /// A rate, size or time with a unit tc does not know.
    #[error("invalid {quantity} unit in {text:?}")]
    Unit {
        /// Rate, size or time.
        quantity: Quantity,
        /// The value as written.
        text: String,
    },
    /// A rate, size or time beyond what its field holds.
    #[error("{quantity} {text:?} is too large")]
    TooLarge {
        /// Rate, size or time.
        quantity: Quantity,
        /// The value as written.
        text: String,
    },
    /// An empty qdisc kind.
    #[error("missing qdisc kind")]
    MissingKind,
    /// `mq` with options.
    #[error("mq takes no options, found {0:?}")]
    MqOptions(String),
    /// A kind lqos does not model, with options it cannot keep.
    #[error("unsupported qdisc kind {0:?} with options (lqos knows mq, htb, cake, fq_codel, pfifo, bfifo)")]
    UnknownKindWithOptions(String),
    /// A kind name with characters no qdisc name has.
    #[error("invalid qdisc kind {0:?}")]
    InvalidKind(String),
    /// [`crate::parse::parse_line`] given no command or several.
    #[error("expected one command, found {0}")]
    NotOneCommand(usize),
}

/// A form of a tc command that lqos does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unsupported {
    /// `qdisc change`.
    #[error("qdisc change is not supported (use replace)")]
    QdiscChange,
    /// `class replace`.
    #[error("class replace is not supported (use add or change)")]
    ClassReplace,
    /// `filter add` / `filter change`.
    #[error("filter: only replace and del are supported")]
    FilterVerb,
    /// A filter on another hook than egress.
    #[error("filter: only egress (parent ffff:fff3) filters are supported")]
    FilterHook,
    /// A filter of another kind than flower.
    #[error("filter: only flower filters are supported")]
    FilterKind,
    /// A clsact qdisc at another parent.
    #[error("clsact: parent must be ffff:fff1 (or left out)")]
    ClsactParent,
}

/// Which kind of value a [`SyntaxError::Unit`] or
/// [`SyntaxError::TooLarge`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A rate (`10mbit`).
    Rate,
    /// A size in bytes (`64k`).
    Size,
    /// A time (`300ms`).
    Time,
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Quantity::Rate => "rate",
            Quantity::Size => "size",
            Quantity::Time => "time",
        })
    }
}
