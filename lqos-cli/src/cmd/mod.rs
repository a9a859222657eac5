//! One module per subcommand: `Args` (clap) and `run`.

pub mod adopt;
pub mod apply;
pub mod bench;
pub mod check;
pub mod compare;
pub mod confirm;
pub mod diff;
pub mod docs;
pub mod gen;
pub mod inputs;
pub mod journal;
pub mod plan;
pub mod show;
pub mod stats;
pub mod status;
pub mod top;
pub mod verify;
pub mod watch;

/// Success.
#[allow(dead_code)]
pub const EXIT_OK: u8 = 0;
/// Warnings under `--strict`, or drift found by `verify`.
#[allow(dead_code)]
pub const EXIT_WARN: u8 = 1;
/// Bad input or a failed operation.
pub const EXIT_ERROR: u8 = 2;
/// Stopped by SIGINT or SIGTERM (128 + SIGINT, as shells report Ctrl-C).
pub const EXIT_INTERRUPTED: u8 = 130;
