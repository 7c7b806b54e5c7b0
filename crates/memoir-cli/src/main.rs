//! `memoir`: the command-line front end. Glue only: each subcommand lives in
//! `cmd/<name>.rs`, parses its own arguments and calls the library.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Durable, forkable, searchable session memory for LLM agents.
#[derive(Parser)]
#[command(name = "memoir", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Record a small demo agent conversation (with tool calls) and show it.
    Demo(cmd::demo::Args),
    /// Inspect and manage sessions.
    #[command(subcommand)]
    Sessions(cmd::sessions::Command),
    /// Embed text with the configured provider.
    Embed(cmd::embed::Args),
    /// Retrieve the relevant earlier parts of a stored session.
    Recall(cmd::recall::Args),
    /// Run retrieval benchmarks.
    #[command(subcommand)]
    Eval(cmd::eval::Command),
    /// Serve a store over HTTP to many agent hosts (bearer tokens per project).
    Serve(cmd::serve::Args),
    /// Use sessions on a `memoir serve` server (--remote URL, --token).
    Remote(cmd::serve::RemoteArgs),
    /// Check a whole store (chains, torn tails, special files, forks, temp
    /// files, modes) and, with --repair, fix what is safe.
    Doctor(cmd::doctor::Args),
    /// Tools for crash and concurrency tests.
    #[command(subcommand, hide = true)]
    Debug(cmd::debug::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Sessions(c) => cmd::sessions::run(c),
        Command::Embed(args) => cmd::embed::run(args),
        Command::Recall(args) => cmd::recall::run(args),
        Command::Eval(c) => cmd::eval::run(c),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Remote(args) => cmd::serve::run_remote(args),
        Command::Debug(c) => cmd::debug::run(c),
        Command::Doctor(args) => cmd::doctor::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("memoir: {err:#}");
            ExitCode::from(2)
        }
    }
}
