//! `memoir sessions`: list, show, usage and verify stored sessions.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use memoir::message::{Block, Message};
use memoir::store::scan;
use memoir::transcript::Session;
use serde_json::json;

/// Where the sessions are (shared by every `sessions` subcommand).
#[derive(clap::Args, Clone)]
pub struct StoreArgs {
    /// Session directory (default: $MEMOIR_SESSION_DIR, else $MEMOIR_HOME/sessions).
    #[arg(long, global = true)]
    pub dir: Option<PathBuf>,
}

impl StoreArgs {
    /// The resolved session directory.
    pub fn dir(&self) -> anyhow::Result<PathBuf> {
        match &self.dir {
            Some(d) => Ok(d.clone()),
            None => Ok(Session::default_dir()?),
        }
    }
}

/// Subcommands of `memoir sessions`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// List sessions, newest first.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one session's conversation.
    Show {
        /// Full id or unique prefix.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's summed token usage and turns.
    Usage {
        /// Full id or unique prefix.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify a session's integrity chain (exit 0 only when it all verifies).
    Verify {
        /// Full id or unique prefix.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Run `memoir sessions`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::List { store, json } => list(&store, json),
        Command::Show { id, store, json } => show(&store, &id, json),
        Command::Usage { id, store, json } => usage(&store, &id, json),
        Command::Verify { id, store } => verify(&store, &id),
    }
}

fn list(store: &StoreArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let dir = store.dir()?;
    let (sessions, unreadable) = Session::list_counting(&dir)?;
    if as_json {
        let rows: Vec<_> = sessions
            .iter()
            .map(|(m, p)| json!({"id": m.id, "created_at": m.created_at, "title": m.title, "provider": m.provider, "model": m.model, "path": p}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"sessions": rows, "unreadable": unreadable}))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        println!("no sessions in {}", dir.display());
    }
    for (m, _) in &sessions {
        println!(
            "{}  {}  {}",
            m.id,
            m.created_at.format("%Y-%m-%d %H:%M"),
            m.title.as_deref().unwrap_or("(untitled)")
        );
    }
    if unreadable > 0 {
        eprintln!("{unreadable} unreadable transcript(s) skipped");
    }
    Ok(ExitCode::SUCCESS)
}

fn show(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let path = Session::find(&store.dir()?, id)?;
    let t = Session::read(&path).with_context(|| format!("reading {}", path.display()))?;
    if as_json {
        let out = json!({
            "meta": t.meta,
            "title": t.title,
            "messages": t.messages,
            "taint": t.taint,
            "usage": t.usage,
            "turns": t.turns,
            "issues": t.report.issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "session {}  ({})",
        t.meta.id,
        t.title.as_deref().unwrap_or("untitled")
    );
    println!(
        "created {}  provider {}  model {}",
        t.meta.created_at.to_rfc3339(),
        t.meta.provider,
        t.meta.model
    );
    for (m, seq) in t.messages.iter().zip(&t.message_seqs) {
        print_message(*seq, m);
    }
    for issue in &t.report.issues {
        eprintln!("warning: {issue}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One message, human-readable.
pub fn print_message(seq: u64, m: &Message) {
    let role = m.role.as_str();
    for block in &m.content {
        match block {
            Block::Text { text } => println!("[{seq:>4}] {role}: {text}"),
            Block::Thinking { text, .. } => println!("[{seq:>4}] {role} (thinking): {text}"),
            Block::ToolUse { id, name, input } => {
                println!("[{seq:>4}] {role} -> {name}({input}) [{id}]")
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let tag = if *is_error { "error" } else { "result" };
                let shown: String = content.chars().take(200).collect();
                println!("[{seq:>4}] {role} <- {tag} [{tool_use_id}]: {shown}")
            }
            Block::Image { media_type, data } => {
                println!(
                    "[{seq:>4}] {role}: <image {media_type}, {} bytes base64>",
                    data.len()
                )
            }
            Block::Unknown(v) => println!("[{seq:>4}] {role}: <unknown block {v}>"),
        }
    }
    if let Some(u) = &m.usage {
        println!(
            "       usage: in {} out {} cache-read {} cache-write {}",
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens
        );
    }
}

fn usage(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let path = Session::find(&store.dir()?, id)?;
    let t = Session::read(&path)?;
    // Per-message usage is what providers report; run summaries are what harnesses total.
    let mut per_message = memoir::Usage::default();
    for m in &t.messages {
        if let Some(u) = &m.usage {
            per_message.add(u);
        }
    }
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"id": t.meta.id, "summaries": t.usage, "turns": t.turns, "messages": per_message})
            )?
        );
    } else {
        println!("session {}", t.meta.id);
        println!(
            "run summaries: input {} output {} cache-read {} cache-write {} turns {}",
            t.usage.input_tokens,
            t.usage.output_tokens,
            t.usage.cache_read_input_tokens,
            t.usage.cache_creation_input_tokens,
            t.turns
        );
        println!(
            "per message:   input {} output {} cache-read {} cache-write {}",
            per_message.input_tokens,
            per_message.output_tokens,
            per_message.cache_read_input_tokens,
            per_message.cache_creation_input_tokens
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(store: &StoreArgs, id: &str) -> anyhow::Result<ExitCode> {
    let path = Session::find(&store.dir()?, id)?;
    let report = Session::verify(&path)?;
    if report.is_clean() {
        println!("{}: {}", path.display(), scan::describe(&report));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}: {}", path.display(), scan::describe(&report));
    for issue in &report.issues {
        println!("  {issue}");
    }
    if let Some(seq) = report.first_bad_seq() {
        println!("first bad seq: {seq}");
    }
    Ok(ExitCode::from(1))
}
