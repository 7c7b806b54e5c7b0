//! `memoir sync`: push the local store's sessions to a `memoir serve`
//! server (see `memoir::push`). Glue only: resolve the store and the
//! server, call the library, draw progress, print the report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use memoir::client::Client;
use memoir::push::{self, PushOptions, PushProgress, PushReport};

use super::store::StoreArgs;
use crate::exit::CliError;

/// Arguments of `memoir sync`.
#[derive(clap::Args)]
pub struct Args {
    /// Server URL, e.g. http://127.0.0.1:8080 (default: $MEMOIR_REMOTE).
    #[arg(long = "remote", value_name = "URL")]
    pub url: Option<String>,
    /// Bearer token; it names the server-side project (default: $MEMOIR_TOKEN).
    #[arg(long)]
    pub token: Option<String>,
    /// Only sessions imported from this agent (claude-code, codex,
    /// gemini-cli, opencode; memoir for sessions memoir wrote itself).
    #[arg(long)]
    pub agent: Option<String>,
    /// Keep pushing as the store grows (Ctrl-C to stop).
    #[arg(long)]
    pub watch: bool,
    /// With --watch: seconds between rounds.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// Say what would be sent (sessions, records, bytes); send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Send secrets as they are (by default they are redacted, as `export --redact`).
    #[arg(long)]
    pub no_redact: bool,
    /// Print a JSON report.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Where a push goes: the server, and the local store's cursor folder.
pub struct Target {
    /// The server's client.
    pub client: Client,
    /// `<sessions dir>/sync`.
    pub state_dir: PathBuf,
}

fn env_nonempty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// The client of `url` (or `$MEMOIR_REMOTE`) with `token` (or `$MEMOIR_TOKEN`).
pub fn target(
    url: Option<String>,
    token: Option<String>,
    store: &StoreArgs,
) -> anyhow::Result<Target> {
    let Some(url) = url.or_else(|| env_nonempty("MEMOIR_REMOTE")) else {
        return Err(CliError::usage(
            "no server: give --remote URL or set $MEMOIR_REMOTE",
        ));
    };
    let token = token.or_else(|| env_nonempty("MEMOIR_TOKEN"));
    let client = Client::new(&url, token)?;
    let dir = store.resolve()?.dir;
    Ok(Target {
        client,
        state_dir: dir.join("sync"),
    })
}

/// Run `memoir sync`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let t = target(args.url.clone(), args.token.clone(), &args.store)?;
    let manager = args.store.reader()?;
    let options = PushOptions {
        redact: !args.no_redact,
        dry_run: args.dry_run,
        agent: args.agent.clone(),
        ..PushOptions::default()
    };
    loop {
        let mut bar = progress_bar(!args.json && !args.watch);
        let report = push::push(
            manager.store().as_ref(),
            &t.state_dir,
            &t.client,
            &options,
            &mut |p| bar(p),
        )?;
        bar(&PushProgress::default());
        if !args.watch || report.records > 0 || report.created > 0 || !report.failed.is_empty() {
            print_report(&report, args.json, args.watch);
        }
        if !args.watch || args.dry_run {
            return Ok(if report.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        std::thread::sleep(Duration::from_secs_f64(args.interval.max(0.05)));
    }
}

/// Print a push report (one JSON line when `compact`).
pub fn print_report(report: &PushReport, as_json: bool, compact: bool) {
    if as_json {
        let text = if compact {
            serde_json::to_string(report)
        } else {
            serde_json::to_string_pretty(report)
        };
        match text {
            Ok(t) => println!("{t}"),
            Err(e) => eprintln!("{e}"),
        }
        return;
    }
    println!(
        "{}{} sessions: {} created, {} grown, {} up to date, {} unchanged; {} records, {:.2} MB in {} requests; {} secrets redacted",
        if report.dry_run { "dry run: would push " } else { "" },
        report.sessions,
        report.created,
        report.grown,
        report.up_to_date,
        report.unchanged,
        report.records,
        report.bytes as f64 / 1e6,
        report.requests,
        report.redacted
    );
    for f in report.failed.iter().take(20) {
        eprintln!("not pushed {}: {}", f.session, f.reason);
    }
    if report.failed.len() > 20 {
        eprintln!("... and {} more", report.failed.len() - 20);
    }
}

fn progress_bar(enabled: bool) -> Box<dyn FnMut(&PushProgress)> {
    if !enabled || !crate::progress::Progress::enabled() {
        return Box::new(|_| {});
    }
    let mut bar: Option<crate::progress::Progress> = None;
    let mut shown = 0usize;
    Box::new(move |p: &PushProgress| {
        if p.sessions_total == 0 {
            if let Some(b) = bar.take() {
                b.finish();
            }
            return;
        }
        let b = bar.get_or_insert_with(|| {
            crate::progress::Progress::bar(p.sessions_total as u64, "sessions")
        });
        b.inc(p.sessions_done.saturating_sub(shown) as u64);
        shown = p.sessions_done;
        b.message(format!(
            "{} records  {:.1} MB",
            p.records,
            p.bytes as f64 / 1e6
        ));
    })
}
