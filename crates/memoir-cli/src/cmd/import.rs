//! `memoir import`: bring coding agents' own sessions into the store (see
//! `memoir::import`). Glue only: resolve what to read, call the library,
//! print the report.
//!
//! - `memoir import claude [DIR]...`, `codex [DIR]...`, `gemini [DIR]...`,
//!   `opencode [DB]`: the agent's sessions under DIR (its home by default);
//! - `memoir import FILE...`: files (or folders) whose format is detected;
//! - `memoir import --all`: every agent found on this machine;
//! - `--watch`: keep importing as agents write.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use memoir::import::{self, Agent, ImportReport, Progress, Source};
use memoir::store::Durability;
use serde_json::json;

use super::store::StoreArgs;
use crate::exit::CliError;

/// Arguments of `memoir import`.
#[derive(clap::Args)]
pub struct Args {
    /// `claude`, `codex`, `gemini` or `opencode`, optionally followed by
    /// directories (or the database); or files and folders to detect.
    pub targets: Vec<String>,
    /// Import every agent whose home exists on this machine.
    #[arg(long)]
    pub all: bool,
    /// Keep importing as the sources grow (Ctrl-C to stop).
    #[arg(long)]
    pub watch: bool,
    /// With --watch: longest time between rescans, in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print a JSON summary.
    #[arg(long)]
    pub json: bool,
    /// Push the store to this `memoir serve` server after the import (and,
    /// with --watch, after every round that imported something), as
    /// `memoir sync` does (redacted).
    #[cfg(feature = "client")]
    #[arg(long, value_name = "URL")]
    pub push: Option<String>,
    /// With --push: the bearer token (default: $MEMOIR_TOKEN).
    #[cfg(feature = "client")]
    #[arg(long, requires = "push")]
    pub token: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// After an import round: push the store when `--push` was given.
#[cfg(feature = "client")]
struct Pusher {
    target: Option<super::sync::Target>,
    json: bool,
}

#[cfg(feature = "client")]
impl Pusher {
    fn new(args: &Args) -> anyhow::Result<Pusher> {
        let target = match &args.push {
            Some(url) => Some(super::sync::target(
                Some(url.clone()),
                args.token.clone(),
                &args.store,
            )?),
            None => None,
        };
        Ok(Pusher {
            target,
            json: args.json,
        })
    }

    fn push(&self, manager: &memoir::manager::SessionManager) -> anyhow::Result<()> {
        let Some(t) = &self.target else {
            return Ok(());
        };
        let report = memoir::push::push(
            manager.store().as_ref(),
            &t.state_dir,
            &t.client,
            &memoir::push::PushOptions::default(),
            &mut |_| {},
        )?;
        super::sync::print_report(&report, self.json, true)
    }
}

#[cfg(not(feature = "client"))]
struct Pusher;

#[cfg(not(feature = "client"))]
impl Pusher {
    fn new(_: &Args) -> anyhow::Result<Pusher> {
        Ok(Pusher)
    }
    fn push(&self, _: &memoir::manager::SessionManager) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What the arguments ask for: agent homes or folders, and single files.
struct Plan {
    roots: Vec<(Agent, Option<PathBuf>)>,
    files: Vec<Source>,
}

fn plan(args: &Args) -> anyhow::Result<Plan> {
    let mut plan = Plan {
        roots: Vec::new(),
        files: Vec::new(),
    };
    if args.all {
        for agent in Agent::ALL {
            if import::default_home(agent)?.is_some() {
                plan.roots.push((agent, None));
            }
        }
    }
    let mut targets = args.targets.iter();
    let mut rest: Vec<&String> = Vec::new();
    if let Some(first) = args.targets.first() {
        if let Ok(agent) = first.parse::<Agent>() {
            targets.next();
            let dirs: Vec<&String> = targets.collect();
            if dirs.is_empty() {
                if import::default_home(agent)?.is_none() {
                    return Err(CliError::usage(format!(
                        "no {} sessions found (no home directory)",
                        agent.as_str()
                    )));
                }
                plan.roots.push((agent, None));
            }
            for d in dirs {
                plan.roots.push((agent, Some(PathBuf::from(d))));
            }
            return Ok(plan);
        }
    }
    rest.extend(targets);
    let mut special = 0;
    for t in rest {
        let path = PathBuf::from(t);
        let meta = std::fs::metadata(&path).with_context(|| format!("reading {t}"))?;
        if !meta.is_dir() && !meta.is_file() {
            // A FIFO, socket or device: never opened (a FIFO would block).
            eprintln!(
                "skipped {t}: a {}, not a regular file",
                memoir::store::file::file_kind(&meta.file_type())
            );
            special += 1;
            continue;
        }
        if meta.is_dir() {
            let mut found = false;
            for agent in [Agent::ClaudeCode, Agent::Codex, Agent::GeminiCli] {
                for file in import::find_sources(agent, &path)? {
                    if import::detect_file(&file)? == Some(agent) {
                        plan.files.push(Source { agent, path: file });
                        found = true;
                    }
                }
            }
            if !found {
                return Err(CliError::usage(format!(
                    "no agent session files found under {t}"
                )));
            }
        } else {
            match import::detect_file(&path)? {
                Some(agent) => plan.files.push(Source { agent, path }),
                None => {
                    return Err(CliError::usage(format!(
                        "{t}: not a Claude Code, Codex, Gemini CLI or OpenCode session"
                    )))
                }
            }
        }
    }
    if plan.roots.is_empty() && plan.files.is_empty() && special > 0 {
        return Err(CliError::usage(
            "nothing to import: every path named was skipped",
        ));
    }
    if plan.roots.is_empty() && plan.files.is_empty() {
        return Err(CliError::usage(
            "nothing to import: name an agent (claude, codex, gemini, opencode), files, or --all",
        ));
    }
    Ok(plan)
}

/// Run `memoir import`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = plan(&args)?;
    // Appends are handed to the OS as they go; the import fsyncs every
    // session it touched before it records its cursors.
    let manager = args.store.manager(Durability::Flush)?;
    let pusher = Pusher::new(&args)?;
    if args.watch {
        let options = import::watch::WatchOptions {
            roots: plan.roots,
            files: plan.files,
            interval: Duration::from_secs_f64(args.interval.max(0.05)),
        };
        let json = args.json;
        // A failed push (server down, laptop offline) is reported and
        // retried after the next round: the import goes on.
        let mut pending = true;
        import::watch::watch(&manager, &options, &mut || true, &mut |report| {
            if report.records > 0 || !report.errors.is_empty() {
                // A closed stdout does not stop the watch: it keeps importing.
                let _ = print_report(report, json, true);
            }
            if report.records > 0 || pending {
                pending = match pusher.push(&manager) {
                    Ok(()) => false,
                    Err(e) => {
                        eprintln!("push: {e:#}");
                        true
                    }
                };
            }
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut sources = plan.files;
    for (agent, dir) in &plan.roots {
        sources.extend(import::sources_of(*agent, dir.as_deref())?);
    }
    let mut bar = progress_bar(!args.json);
    let report = import::import(&manager, &sources, &mut |p| bar(p))?;
    bar(&Progress::default());
    if report.records > 0 || !report.created.is_empty() {
        update_search_index(&manager, !args.json);
    }
    print_report(&report, args.json, false)?;
    pusher.push(&manager)?;
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Bring a file store's search index up to date after an import that
/// changed something (built, the first time), so the first `memoir search`
/// after it costs what the next ones do; a spinner on a terminal. A failure
/// is a warning: the sessions are imported, and the next search catches up.
fn update_search_index(manager: &memoir::manager::SessionManager, show: bool) {
    if manager.store().index_dir().is_none() {
        return;
    }
    let spinner = show.then(|| crate::progress::Progress::spinner("updating the search index"));
    let updated = memoir::search::SearchIndex::open(manager.sessions_dir())
        .and_then(|mut ix| ix.update().map(|_| ()));
    if let Some(s) = spinner {
        s.finish();
    }
    if let Err(e) = updated {
        eprintln!("warning: the search index was not updated (the next search catches up): {e}");
    }
}

fn print_report(report: &ImportReport, as_json: bool, compact: bool) -> anyhow::Result<()> {
    if as_json {
        let text = if compact {
            serde_json::to_string(report)
        } else {
            serde_json::to_string_pretty(report)
        };
        crate::outln!(
            "{}",
            text.unwrap_or_else(|e| json!({"error": e.to_string()}).to_string())
        );
        return Ok(());
    }
    let s = &report.sessions;
    crate::outln!(
        "{} new, {} updated, {} unchanged, {} re-imported as forks; {} messages ({} records) from {} of {} sources ({:.1} MB read)",
        s.new,
        s.updated,
        s.unchanged,
        s.forked,
        report.messages,
        report.records,
        report.files_read,
        report.files,
        report.bytes_read as f64 / 1e6
    );
    for k in report.skipped.iter().take(20) {
        eprintln!("skipped {}:{}: {}", k.file.display(), k.line, k.reason);
    }
    if report.skipped.len() > 20 {
        eprintln!(
            "... and {} more skipped lines (see --json)",
            report.skipped.len() - 20
        );
    }
    for t in &report.torn {
        eprintln!(
            "torn {}:{}: {} (retried next run)",
            t.file.display(),
            t.line,
            t.reason
        );
    }
    for e in &report.errors {
        eprintln!("error {}: {}", e.file.display(), e.error);
    }
    Ok(())
}

/// A progress bar on a terminal (files, MB, sessions), nothing elsewhere
/// (the CLI's progress helper). Call it with `Progress::default()` to clear it.
fn progress_bar(enabled: bool) -> Box<dyn FnMut(&Progress)> {
    if !enabled || !crate::progress::Progress::enabled() {
        return Box::new(|_| {});
    }
    let mut bar: Option<crate::progress::Progress> = None;
    let mut shown = 0usize;
    Box::new(move |p: &Progress| {
        if p.files_total == 0 {
            if let Some(b) = bar.take() {
                b.finish();
            }
            return;
        }
        let b = bar
            .get_or_insert_with(|| crate::progress::Progress::bar(p.files_total as u64, "sources"));
        b.inc(p.files_done.saturating_sub(shown) as u64);
        shown = p.files_done;
        b.message(format!(
            "{:.0}/{:.0} MB  {} sessions",
            p.bytes_done as f64 / 1e6,
            p.bytes_total as f64 / 1e6,
            p.sessions
        ));
    })
}
