//! `memoir embed`.

use std::process::ExitCode;

/// Arguments of `memoir embed`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `memoir embed`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
