//! `memoir eval`.

use std::process::ExitCode;

/// Subcommands of `memoir eval`.
#[derive(clap::Subcommand)]
pub enum Command {}

/// Run `memoir eval`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {}
}
