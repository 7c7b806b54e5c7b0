//! `memoir demo`.

use std::process::ExitCode;

/// Arguments of `memoir demo`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `memoir demo`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
