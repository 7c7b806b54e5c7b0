//! `memoir`: the command-line front end. Glue only: each subcommand lives in
//! `cmd/<name>.rs`, parses its own arguments and calls the library. Failures
//! become exit codes and messages in one place ([`exit`]); stdout is written
//! through [`output`] so a closed pipe is not a panic.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Helpers used only by the `server`/`client` commands are dead in the lean build.
#![cfg_attr(not(all(feature = "server", feature = "client")), allow(dead_code))]

mod cmd;
mod exit;
mod output;
mod progress;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// mimalloc, not the system allocator: indexing hands every document's
/// memory from the thread that reads it to the threads that write it, and
/// glibc's per-arena locks made those frees contend (docs/BENCHMARKS.md, "Search").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Durable, forkable, searchable session memory for LLM agents.
///
/// Exit codes: 0 ok, 1 problems found / nothing matched / other failure,
/// 2 usage or input error, 3 conflict, 4 not found, 5 backend unavailable.
/// With --json, errors are printed on stderr as {"error","message","exit"}.
#[derive(Parser)]
#[command(name = "memoir", version, about, long_about, color = clap::ColorChoice::Never)]
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
    /// Local embedding models: list, verify (sha256 manifest), install.
    #[cfg(feature = "minilm")]
    Models(cmd::models::Args),
    /// Retrieve the relevant earlier parts of a stored session.
    Recall(cmd::recall::Args),
    /// Run retrieval benchmarks.
    #[command(subcommand)]
    Eval(cmd::eval::Command),
    /// Serve a store over HTTP to many agent hosts (bearer tokens per project).
    #[cfg(feature = "server")]
    Serve(cmd::serve::Args),
    /// Use sessions on a `memoir serve` server (--remote URL, --token).
    #[cfg(feature = "client")]
    Remote(cmd::serve::RemoteArgs),
    /// Import Claude Code, Codex, Gemini CLI or OpenCode sessions (incremental; --watch).
    Import(cmd::import::Args),
    /// Push this store's sessions to a `memoir serve` server (incremental, redacted).
    #[cfg(feature = "client")]
    Sync(cmd::sync::Args),
    /// Check a whole store (chains, torn tails, special files, forks, temp
    /// files, modes) and, with --repair, fix what is safe.
    Doctor(cmd::doctor::Args),
    /// Token usage and cost over the store, grouped or as 5-hour billing blocks.
    Usage(cmd::usage::Args),
    /// How the sessions' runs ended (completed, interrupted, failed...), by model.
    Stats(cmd::stats::Args),
    /// The offline price table (`memoir prices update FILE` imports a LiteLLM JSON).
    #[command(subcommand)]
    Prices(cmd::usage::PricesCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::completions::Args),
    /// Print the man page (roff) on stdout.
    Man,
    /// Search every session of the store (persistent index, caught up first).
    Search(cmd::search::Args),
    /// Bring the search index up to date (--rebuild, --embed).
    Index(cmd::index::Args),
    /// Print (or --exec) the command that resumes a session in its agent.
    Resume(cmd::resume::Args),
    /// Serve sessions and notes as MCP tools (stdio, or --http ADDR).
    #[cfg(feature = "mcp")]
    Mcp(cmd::mcp::Args),
    /// Browse every session in a local web view (127.0.0.1, per-run token).
    #[cfg(feature = "ui")]
    Ui(cmd::ui::Args),
    /// The files a session edited, from its tool calls, as diffs.
    Changes(cmd::changes::Args),
    /// Which session and message last wrote a file's line (or every recorded edit of the file).
    Blame(cmd::blame::Args),
    /// Tools for crash and concurrency tests.
    #[command(subcommand, hide = true)]
    Debug(cmd::debug::Command),
}

/// The subcommands behind a cargo feature: a build without the feature
/// answers them with a usage error that names it (exit 2), not clap's
/// "unrecognized subcommand".
const OPTIONAL_COMMANDS: &[exit::OptionalCommand] = &[
    ("serve", "server", cfg!(feature = "server")),
    ("remote", "client", cfg!(feature = "client")),
    ("sync", "client", cfg!(feature = "client")),
    ("mcp", "mcp", cfg!(feature = "mcp")),
    ("ui", "ui", cfg!(feature = "ui")),
    ("models", "minilm", cfg!(feature = "minilm")),
];

fn main() -> ExitCode {
    let json = exit::json_requested();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            return match exit::missing_feature(&e, OPTIONAL_COMMANDS) {
                Some(err) => exit::report(&err, json),
                None => exit::report_parse_error(e, json),
            }
        }
    };
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Sessions(c) => cmd::sessions::run(c),
        Command::Embed(args) => cmd::embed::run(args),
        #[cfg(feature = "minilm")]
        Command::Models(args) => cmd::models::run(args),
        Command::Recall(args) => cmd::recall::run(args),
        Command::Eval(c) => cmd::eval::run(c),
        #[cfg(feature = "server")]
        Command::Serve(args) => cmd::serve::run(args),
        #[cfg(feature = "client")]
        Command::Remote(args) => cmd::serve::run_remote(args),
        Command::Completions(args) => cmd::completions::completions(args, Cli::command()),
        Command::Man => cmd::completions::man(Cli::command()),
        Command::Debug(c) => cmd::debug::run(c),
        #[cfg(feature = "ui")]
        Command::Ui(args) => cmd::ui::run(args),
        Command::Changes(args) => cmd::changes::run(args),
        Command::Blame(args) => cmd::blame::run(args),
        Command::Import(args) => cmd::import::run(args),
        #[cfg(feature = "client")]
        Command::Sync(args) => cmd::sync::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Usage(args) => cmd::usage::run(args),
        Command::Stats(args) => cmd::stats::run(args),
        Command::Prices(c) => cmd::usage::run_prices(c),
        Command::Search(args) => cmd::search::run(args),
        Command::Index(args) => cmd::index::run(args),
        Command::Resume(args) => cmd::resume::run(args),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => cmd::mcp::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => exit::report(&err, json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// Each optional command is in this build exactly when its feature is;
    /// one left out is answered with a usage error naming the feature.
    #[test]
    fn optional_commands_follow_the_build() {
        for &(name, feature, built) in OPTIONAL_COMMANDS {
            assert_eq!(
                Cli::command().find_subcommand(name).is_some(),
                built,
                "{name}"
            );
            if built {
                continue;
            }
            let err = Cli::try_parse_from(["memoir", name, "--help"])
                .err()
                .unwrap_or_else(|| panic!("{name} parsed"));
            let err = exit::missing_feature(&err, OPTIONAL_COMMANDS)
                .unwrap_or_else(|| panic!("{name}: no feature named"));
            assert_eq!(exit::code_of(exit::kind(&err)), exit::USAGE);
            assert!(err.to_string().contains(&format!("`{feature}`")), "{err}");
        }
    }

    /// The parser path of a build without the optional commands, whatever
    /// this build has: every one of them, with or without arguments, names
    /// its feature; a mistyped command stays clap's error.
    #[test]
    fn a_command_left_out_names_its_feature() {
        let lean: Vec<exit::OptionalCommand> = OPTIONAL_COMMANDS
            .iter()
            .map(|&(name, feature, _)| (name, feature, false))
            .collect();
        let parser = || clap::Command::new("memoir").subcommand(clap::Command::new("demo"));
        for &(name, feature, _) in &lean {
            for argv in [vec!["memoir", name], vec!["memoir", name, "--port", "8080"]] {
                let err = parser().try_get_matches_from(&argv).unwrap_err();
                let err = exit::missing_feature(&err, &lean)
                    .unwrap_or_else(|| panic!("{argv:?}: no feature named"));
                assert_eq!(exit::code_of(exit::kind(&err)), exit::USAGE);
                let message = err.to_string();
                assert!(
                    message.contains(&format!("`memoir {name}`"))
                        && message.contains(&format!("--features {feature}")),
                    "{message}"
                );
            }
        }
        let err = parser()
            .try_get_matches_from(["memoir", "serv"])
            .unwrap_err();
        assert!(exit::missing_feature(&err, &lean).is_none());
    }
}
