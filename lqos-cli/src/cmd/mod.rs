//! One module per subcommand: `Args` (clap) and `run`.

pub mod adopt;
pub mod apply;
pub mod bench;
pub mod check;
pub mod compare;
pub mod confirm;
pub mod detach;
pub mod diff;
pub mod docs;
pub mod gen;
pub mod inputs;
pub mod journal;
pub mod plan;
pub mod privilege;
pub mod show;
pub mod stats;
pub mod status;
pub mod top;
pub mod verify;
pub mod watch;

/// How a command ended without an error; `main` alone maps it (and every
/// error) to the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// Success: exit 0.
    Ok,
    /// The command ran and reports findings on its output: warnings under
    /// `--strict`, drift, differences, a failed last action: exit 1.
    Findings,
}

/// A load stopped by SIGINT or SIGTERM (what was applied is in the
/// message): `main` exits 130 (128 + SIGINT, as shells report Ctrl-C).
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted: {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// The result of every command's `run`.
pub type Outcome = anyhow::Result<Done>;
