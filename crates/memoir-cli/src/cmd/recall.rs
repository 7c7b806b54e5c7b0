//! `memoir recall`.

use std::process::ExitCode;

/// Arguments of `memoir recall`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `memoir recall`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
