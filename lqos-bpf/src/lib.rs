#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod attach;
mod batch;
mod error;
#[cfg(feature = "test-util")]
#[doc(hidden)]
pub mod fixtures;
pub mod index;
pub mod inspect;
mod install;
pub mod layout;
pub mod loader;
pub mod maps;
pub mod model;
#[cfg(feature = "test-util")]
#[doc(hidden)]
pub mod packet;
pub mod plan;
pub mod preflight;
pub mod sys;
pub mod tcp;
#[cfg(feature = "test-util")]
#[doc(hidden)]
pub mod testrun;
pub mod xps;

pub use error::{BpfError, Result};
pub use install::{
    check, install, install_checked, installed, lookup, remove, update, InstallOptions, Installed,
    MapSync,
};
