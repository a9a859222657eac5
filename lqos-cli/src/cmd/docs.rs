//! `lqos man` and `lqos completions SHELL`: the man page and shell
//! completions, generated from the clap definitions (what the .deb ships).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use super::EXIT_OK;

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
pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = crate::Cli::command();
    match args.out {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("writing man pages to {}", dir.display()))?;
        }
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// Prints the completion script for a shell.
pub fn completions(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "lqos", &mut std::io::stdout().lock());
    Ok(ExitCode::from(EXIT_OK))
}
