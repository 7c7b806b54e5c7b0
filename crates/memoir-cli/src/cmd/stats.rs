//! `memoir stats`: how the runs of the store's sessions ended (completed,
//! interrupted, failed, stopped by a limit...), by model, agent or session.
//! Glue only: the counting is [`memoir::runs::report`]; runs are the
//! sessions' `outcome` records (harnesses write them; imports derive them
//! from the agents' stop reasons and interruptions).

use std::process::ExitCode;

use memoir::runs::{self, RunGroup, RunQuery};

use super::store::StoreArgs;
use crate::outln;
use crate::output::print_json;

/// Arguments of `memoir stats`.
#[derive(clap::Args)]
pub struct Args {
    /// Rows by model, agent or session.
    #[arg(long, default_value = "model", value_parser = ["model", "agent", "session"])]
    by: String,
    /// Only sessions written by this agent (claude-code, codex, gemini-cli, opencode, memoir).
    #[arg(long)]
    agent: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// Run `memoir stats`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let m = args.store.reader()?;
    let group: RunGroup = args.by.parse().map_err(anyhow::Error::msg)?;
    let report = runs::report(
        &m,
        &RunQuery {
            group,
            agent: args.agent,
        },
    )?;
    if args.json {
        return print_json(&report);
    }
    outln!(
        "{:<32} {:>6} {:>9} {:>11} {:>6} {:>6} {:>6} {:>7} {:>10}",
        args.by,
        "runs",
        "completed",
        "interrupted",
        "failed",
        "limit",
        "other",
        "unknown",
        "tool errs"
    );
    let line = |key: &str, c: &runs::RunCounts| {
        format!(
            "{key:<32} {:>6} {:>9} {:>11} {:>6} {:>6} {:>6} {:>7} {:>10}",
            c.runs,
            c.completed,
            c.interrupted,
            c.failed,
            c.limit,
            c.other,
            c.unknown,
            format!("{}/{}", c.tool_errors, c.tool_calls)
        )
    };
    for row in &report.rows {
        outln!("{}", line(&row.key, &row.counts));
    }
    outln!("{}", line("total", &report.total));
    outln!(
        "{} of {} session(s) recorded runs",
        report.sessions_with_runs,
        report.sessions
    );
    Ok(ExitCode::SUCCESS)
}
