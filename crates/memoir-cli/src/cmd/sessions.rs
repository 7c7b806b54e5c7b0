//! `memoir sessions`.

use std::process::ExitCode;

/// Subcommands of `memoir sessions`.
#[derive(clap::Subcommand)]
pub enum Command {}

/// Run `memoir sessions`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {}
}
