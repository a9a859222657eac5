#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod attach;
pub mod error;
pub mod index;
pub mod install;
pub mod layout;
pub mod loader;
pub mod maps;
pub mod model;
pub mod packet;
pub mod plan;
pub mod preflight;
pub mod sys;
pub mod tcp;
pub mod testrun;
pub mod xps;

pub use error::{BpfError, Result};
pub use install::{check, install, lookup, remove, update, InstallOptions, Installed, MapSync};
pub use layout::{
    CircuitValue, DefaultQueues, FastLens, IfaceConfig, Role, Side, Stats, Steer, TcpCircuit,
    TcpKey,
};
pub use loader::{DataPath, DEFAULT_PIN_DIR, OBJECT};
pub use maps::{ApplyCounts, Maps};
pub use model::{diff, Entries, MapDiff, MapKey};
pub use tcp::{TcpHealth, TcpMaps, TcpRead};
