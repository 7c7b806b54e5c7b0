//! `memoir completions <shell>` and `memoir man`: shell completion scripts
//! and the roff man page, generated from the clap definitions (so they never
//! drift from `--help`).

use std::process::ExitCode;

use crate::out;

/// Arguments of `memoir completions`.
#[derive(clap::Args)]
pub struct Args {
    /// The shell to generate completions for.
    pub shell: clap_complete::Shell,
}

/// Print completions for `args.shell`.
pub fn completions(args: Args, mut command: clap::Command) -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut command, "memoir", &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(ExitCode::SUCCESS)
}

/// Print the man page (roff) of `memoir`.
pub fn man(command: clap::Command) -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(command).render(&mut buf)?;
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(ExitCode::SUCCESS)
}
