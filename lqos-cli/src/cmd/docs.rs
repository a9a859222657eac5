//! `lqos man` and `lqos completions SHELL`: the man page and shell
//! completions, generated from the clap definitions (what the .deb ships).

use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;

use super::{Done, Outcome};
use crate::out::with_stdout;

/// Arguments of `lqos man`.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write `lqos.1` and one `lqos-SUBCOMMAND.1` per subcommand into this
    /// directory instead of printing `lqos.1` to stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Arguments of `lqos completions`.
#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints (or writes) the man pages.
pub fn man(args: ManArgs) -> Outcome {
    let cmd = crate::Cli::command();
    match args.out {
        None => with_stdout(|w| clap_mangen::Man::new(cmd).render(w))?,
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("writing man pages to {}", dir.display()))?;
        }
    }
    Ok(Done::Ok)
}

/// Prints the completion script for a shell.
pub fn completions(args: CompletionArgs) -> Outcome {
    let mut cmd = crate::Cli::command();
    // clap_complete's own writer panics on a write error: render into
    // memory, then write.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "lqos", &mut script);
    with_stdout(|w| w.write_all(&script))?;
    Ok(Done::Ok)
}
