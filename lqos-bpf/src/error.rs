//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong loading, attaching or updating the data
/// path. Each variant names what it was working on (interface, map,
/// program, path).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BpfError {
    /// The kernel lacks something the data path needs; nothing was changed.
    #[error("preflight: {check}: {message}")]
    Preflight {
        /// What was checked (e.g. "bpffs", "cls_bpf").
        check: &'static str,
        /// What is missing and what to do.
        message: String,
    },
    /// Loading the object or creating/opening its pinned maps failed.
    #[error("loading lqos's BPF object (maps pinned under {pin_dir}): {source}")]
    Load {
        /// The pin directory.
        pin_dir: PathBuf,
        /// aya's error (the verifier log is in it).
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// A program could not be loaded, attached, detached or run.
    #[error("program {program}: {what}: {source}")]
    Program {
        /// Program name.
        program: &'static str,
        /// The step.
        what: String,
        /// aya's error.
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    /// A map operation failed.
    #[error("map {map}: {what}: {source}")]
    Map {
        /// Map name.
        map: &'static str,
        /// The step.
        what: String,
        /// aya's error.
        #[source]
        source: Box<aya::maps::MapError>,
    },
    /// A pinned map or link is missing or is not what this version expects.
    #[error("{path}: {message}")]
    Pinned {
        /// The pinned object.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Attaching to or detaching from an interface failed.
    #[error("interface {interface}: {what}: {message}")]
    Interface {
        /// Interface name.
        interface: String,
        /// The step (e.g. "attaching lqos_tc to clsact egress").
        what: String,
        /// The kernel's or aya's message.
        message: String,
    },
    /// Switching XPS off on a TX queue failed (its CPU would keep picking
    /// the queue instead of the classifier).
    #[error("interface {interface}: switching XPS off ({path}): {source}")]
    Xps {
        /// Interface name.
        interface: String,
        /// The sysfs file.
        path: PathBuf,
        /// The write's error.
        #[source]
        source: io::Error,
    },
    /// Entering a network namespace (or a private mount of sysfs or bpffs
    /// in it) failed.
    #[error("network namespace {netns}: {what}: {source}")]
    Netns {
        /// Namespace name (`/run/netns/NAME`).
        netns: String,
        /// The step.
        what: &'static str,
        /// The system call's error.
        #[source]
        source: io::Error,
    },
    /// A file-system operation failed.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The step.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A plan entry cannot be expressed in the maps.
    #[error("address {net} of circuit {circuit}: {message}")]
    Entry {
        /// The address or prefix.
        net: ipnet::IpNet,
        /// Circuit ID.
        circuit: String,
        /// Why.
        message: String,
    },
}

/// Result with [`BpfError`].
pub type Result<T, E = BpfError> = std::result::Result<T, E>;

impl BpfError {
    pub(crate) fn map(
        map: &'static str,
        what: impl Into<String>,
    ) -> impl FnOnce(aya::maps::MapError) -> BpfError {
        let what = what.into();
        move |e| BpfError::Map {
            map,
            what,
            source: Box::new(e),
        }
    }

    pub(crate) fn program(
        program: &'static str,
        what: impl Into<String>,
    ) -> impl FnOnce(aya::programs::ProgramError) -> BpfError {
        let what = what.into();
        move |e| BpfError::Program {
            program,
            what,
            source: Box::new(e),
        }
    }

    pub(crate) fn io(
        path: impl Into<PathBuf>,
        what: &'static str,
    ) -> impl FnOnce(io::Error) -> BpfError {
        let path = path.into();
        move |source| BpfError::Io { path, what, source }
    }
}
