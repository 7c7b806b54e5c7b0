//! `memoir doctor [--repair] [--json]`: print the library's store check
//! ([`memoir::doctor`]). Exit 0 when the store is healthy (or every problem
//! was repaired), 1 when something needs a human or `--repair`.

use std::process::ExitCode;

use memoir::doctor::{self, Severity};

use super::store::StoreArgs;

/// Arguments of `memoir doctor`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    store: StoreArgs,
    /// Fix what is safe: cut torn tails and partial batches (bytes kept in a
    /// side file), move orphan temp files aside, tighten file modes.
    #[arg(long)]
    repair: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Run `memoir doctor`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = args.store.resolve()?.dir;
    let report = doctor::check(&dir, args.repair)?;
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        crate::outln!("{}: {} session(s)", report.dir.display(), report.sessions);
        for f in &report.findings {
            let label = match f.severity {
                Severity::Info => "info",
                Severity::Fixable => "fixable",
                Severity::Fixed => "fixed",
                Severity::NeedsHuman => "needs a human",
            };
            crate::outln!("{label:>13}  {} {}: {}", f.kind, f.path.display(), f.detail);
        }
        if report.findings.is_empty() {
            crate::outln!("no problems found");
        } else if report.needs_attention() && !args.repair {
            crate::outln!("run `memoir doctor --repair` to fix what is safe");
        }
    }
    Ok(if report.needs_attention() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
