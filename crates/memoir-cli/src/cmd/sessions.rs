//! `memoir sessions`: list (as a fork tree), show, usage, verify, and manage
//! sessions (new, fork, export, rename, delete, restore, purge) through
//! [`memoir::manager::SessionManager`].
//!
//! Which store a command uses (first match wins):
//! 1. `--dir <DIR>`: that directory;
//! 2. `--project <PATH>`: the project's store, `<PATH>/.memoir/sessions`;
//! 3. `$MEMOIR_SESSION_DIR` when set;
//! 4. the current directory's project: the nearest ancestor holding a
//!    `.memoir/sessions` directory (the home directory's `~/.memoir` is the
//!    global store, not a project);
//! 5. the global store, `$MEMOIR_HOME/sessions` (`~/.memoir/sessions`), which
//!    `memoir demo` uses outside a project.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use memoir::manager::{
    ExportFormat, ExportOptions, IndexEntry, ManagerOptions, SessionManager, PROJECT_SESSIONS_DIR,
};
use memoir::message::{Block, Message};
use memoir::store::{scan, Durability};
use memoir::transcript::Session;
use serde_json::json;

/// Where the sessions are (shared by every `sessions` subcommand and `demo`).
#[derive(clap::Args, Clone, Default)]
pub struct StoreArgs {
    /// Session directory (overrides --project and the defaults).
    #[arg(long, global = true)]
    pub dir: Option<PathBuf>,
    /// Use this project's sessions (<PATH>/.memoir/sessions). Default: the
    /// current directory's project, else $MEMOIR_SESSION_DIR or $MEMOIR_HOME/sessions.
    #[arg(long, global = true, value_name = "PATH")]
    pub project: Option<PathBuf>,
}

impl StoreArgs {
    /// The resolved session directory (see the module docs for the order).
    pub fn dir(&self) -> anyhow::Result<PathBuf> {
        if let Some(d) = &self.dir {
            return Ok(d.clone());
        }
        if let Some(p) = self.project()? {
            return Ok(p.join(PROJECT_SESSIONS_DIR));
        }
        Ok(Session::default_dir()?)
    }

    /// The project the store belongs to: `--project`, else (unless `--dir`
    /// or `$MEMOIR_SESSION_DIR` chose the store) the current directory's.
    pub fn project(&self) -> anyhow::Result<Option<PathBuf>> {
        if let Some(p) = &self.project {
            return Ok(Some(p.clone()));
        }
        if self.dir.is_some() || memoir::paths::env_path("MEMOIR_SESSION_DIR")?.is_some() {
            return Ok(None);
        }
        let cwd = std::env::current_dir().context("current directory")?;
        let home_store = memoir::paths::env_path("HOME")?.map(|h| h.join(".memoir"));
        Ok(cwd
            .ancestors()
            .find(|dir| {
                let marker = dir.join(".memoir");
                Some(&marker) != home_store.as_ref() && dir.join(PROJECT_SESSIONS_DIR).is_dir()
            })
            .map(Path::to_path_buf))
    }

    /// A manager over the resolved store; new sessions record the project
    /// (or, outside one, the current directory) as their workspace.
    pub fn manager(&self, durability: Durability) -> anyhow::Result<SessionManager> {
        let dir = self.dir()?;
        let workspace = match self.project()? {
            Some(p) => Some(std::fs::canonicalize(&p).unwrap_or(p)),
            None => std::env::current_dir().ok(),
        };
        let options = ManagerOptions {
            durability,
            repair_on_switch: false,
            workspace,
            ..Default::default()
        };
        SessionManager::open(&dir, options)
            .with_context(|| format!("opening sessions in {}", dir.display()))
    }
}

/// Subcommands of `memoir sessions`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// List sessions as a fork tree, newest activity first (from the index).
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// List the trash instead.
        #[arg(long)]
        deleted: bool,
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
        /// Only the messages around this seq (e.g. a `memoir search` hit's).
        #[arg(long, value_name = "SEQ")]
        around: Option<u64>,
        /// With --around: how many messages on each side.
        #[arg(short = 'C', long = "context", value_name = "N", default_value_t = 3)]
        context: usize,
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
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create a session; a task becomes its first user message.
    New {
        /// The task (first user message); empty for none.
        #[arg(default_value = "")]
        task: String,
        /// Title (default: the task, cut to 50 characters).
        #[arg(long)]
        title: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fork a session (by reference) after its first N messages.
    Fork {
        /// Full id or unique prefix of the source.
        id: String,
        /// Messages to keep (default: all). Moved back so no tool call is
        /// separated from its results.
        #[arg(long, value_name = "N")]
        at: Option<usize>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Export a session as JSONL, OpenAI chat JSON or Markdown.
    Export {
        /// Full id or unique prefix.
        id: String,
        /// jsonl, openai or markdown.
        #[arg(long, default_value = "jsonl")]
        format: String,
        /// Replace high-confidence secrets with [REDACTED:<kind>].
        #[arg(long)]
        redact: bool,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print a JSON report (with the export in `content` when not written to a file).
        #[arg(long)]
        json: bool,
    },
    /// Set a session's title.
    Rename {
        /// Full id or unique prefix.
        id: String,
        /// The new title.
        title: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move a session to the trash (undo with `restore`).
    Delete {
        /// Full id or unique prefix.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring a session back from the trash.
    Restore {
        /// Full id or unique prefix of a trashed session.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Erase trashed sessions for good (all, or the ids given). Sessions
    /// that live forks still need are kept and reported.
    Purge {
        /// Trashed session ids (default: the whole trash).
        ids: Vec<String>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create sessions and append to a shared one through the manager (for
    /// concurrency tests); prints each id created.
    #[command(hide = true)]
    Stress {
        /// Sessions to create.
        #[arg(long, default_value_t = 10)]
        sessions: usize,
        /// Messages added to each (one by one, batched).
        #[arg(long, default_value_t = 10)]
        messages: usize,
        /// A session to append one message to per session created.
        #[arg(long)]
        shared: Option<String>,
        /// Tag put in every message.
        #[arg(long, default_value = "w")]
        tag: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Run `memoir sessions`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::List {
            store,
            json,
            deleted,
        } => {
            if deleted {
                list_trash(&store, json)
            } else {
                list(&store, json)
            }
        }
        Command::Show {
            id,
            store,
            json,
            around,
            context,
        } => show(&store, &id, json, around.map(|seq| (seq, context))),
        Command::Usage { id, store, json } => usage(&store, &id, json),
        Command::Verify { id, store, json } => verify(&store, &id, json),
        Command::New {
            task,
            title,
            store,
            json,
        } => new(&store, &task, title.as_deref(), json),
        Command::Fork {
            id,
            at,
            store,
            json,
        } => fork(&store, &id, at, json),
        Command::Export {
            id,
            format,
            redact,
            output,
            store,
            json,
        } => export(&store, &id, &format, redact, output.as_deref(), json),
        Command::Rename {
            id,
            title,
            store,
            json,
        } => rename(&store, &id, &title, json),
        Command::Delete { id, store, json } => delete(&store, &id, json),
        Command::Restore { id, store, json } => restore(&store, &id, json),
        Command::Purge { ids, store, json } => purge(&store, &ids, json),
        Command::Stress {
            sessions,
            messages,
            shared,
            tag,
            store,
        } => stress(&store, sessions, messages, shared.as_deref(), &tag),
    }
}

fn print_json(value: &serde_json::Value) -> anyhow::Result<ExitCode> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(ExitCode::SUCCESS)
}

/// The session a fork was made from (its `forked_from`, else its parent).
fn lineage(e: &IndexEntry) -> Option<&str> {
    e.forked_from
        .as_deref()
        .or_else(|| e.parent.as_ref().map(|p| p.session.as_str()))
}

/// Entries in fork-tree order: each root (no parent, or a parent not
/// listed) newest first, each followed by its forks, depth-first.
fn fork_tree(entries: &[IndexEntry]) -> Vec<(usize, &IndexEntry)> {
    let listed: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        match lineage(e).filter(|p| listed.contains_key(p)) {
            Some(p) => children.entry(p).or_default().push(i),
            None => roots.push(i),
        }
    }
    let mut out = Vec::with_capacity(entries.len());
    let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|i| (0, i)).collect();
    while let Some((depth, i)) = stack.pop() {
        out.push((depth, &entries[i]));
        if out.len() > entries.len() {
            break; // a cycle cannot happen (ids are unique), but never loop
        }
        if let Some(kids) = children.get(entries[i].id.as_str()) {
            stack.extend(kids.iter().rev().map(|&k| (depth + 1, k)));
        }
    }
    out
}

fn entry_line(depth: usize, e: &IndexEntry, listed: &HashMap<&str, ()>) -> String {
    let indent = if depth == 0 {
        String::new()
    } else {
        format!("{}└─ ", "   ".repeat(depth - 1))
    };
    let mut extra = String::new();
    if let (Some(p), Some(from)) = (&e.parent, lineage(e)) {
        extra.push_str(&format!("  (fork of {from} at {})", p.messages));
        if !listed.contains_key(from) {
            extra.push_str(" [parent deleted]");
        }
    }
    if e.issues > 0 {
        extra.push_str(&format!("  [{} integrity issue(s)]", e.issues));
    }
    format!(
        "{indent}{}  {}  {:>4} msgs  {}{extra}",
        e.id,
        e.last_activity.format("%Y-%m-%d %H:%M"),
        e.messages,
        e.title.as_deref().unwrap_or("(untitled)")
    )
}

fn list(store: &StoreArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let m = store.manager(Durability::Fsync)?;
    let report = m.list_sessions_report()?;
    let dir = m.sessions_dir().to_path_buf();
    if as_json {
        let rows = report
            .entries
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(e)?;
                v["path"] = json!(dir.join(format!("{}.jsonl", e.id)));
                Ok(v)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        return print_json(&json!({
            "store": dir,
            "sessions": rows,
            "unreadable": report.unreadable,
            "rebuilt": report.rebuilt,
        }));
    }
    if report.entries.is_empty() {
        println!("no sessions in {}", dir.display());
    }
    let listed: HashMap<&str, ()> = report.entries.iter().map(|e| (e.id.as_str(), ())).collect();
    for (depth, e) in fork_tree(&report.entries) {
        println!("{}", entry_line(depth, e, &listed));
    }
    if report.unreadable > 0 {
        eprintln!("{} unreadable transcript(s) skipped", report.unreadable);
    }
    Ok(ExitCode::SUCCESS)
}

fn list_trash(store: &StoreArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let m = store.manager(Durability::Fsync)?;
    let trash = m.list_trash()?;
    if as_json {
        let rows: Vec<_> = trash
            .iter()
            .map(|t| json!({"entry": t.entry, "deleted_at": t.deleted_at}))
            .collect();
        return print_json(&json!({"store": m.sessions_dir(), "deleted": rows}));
    }
    if trash.is_empty() {
        println!("the trash of {} is empty", m.sessions_dir().display());
    }
    for t in &trash {
        println!(
            "{}  deleted {}  {:>4} msgs  {}",
            t.entry.id,
            t.deleted_at.format("%Y-%m-%d %H:%M"),
            t.entry.messages,
            t.entry.title.as_deref().unwrap_or("(untitled)")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show(
    store: &StoreArgs,
    id: &str,
    as_json: bool,
    around: Option<(u64, usize)>,
) -> anyhow::Result<ExitCode> {
    let m = store.manager(Durability::Fsync)?;
    let id = m.resolve(id)?;
    let mut t = m
        .read_session(&id)
        .with_context(|| format!("reading session {id}"))?;
    if let Some((seq, n)) = around {
        let range = memoir::search::around(&t.message_seqs, seq, n);
        t.messages = t.messages[range.clone()].to_vec();
        t.message_seqs = t.message_seqs[range].to_vec();
    }
    if as_json {
        return print_json(&json!({
            "meta": t.meta,
            "title": t.title,
            "messages": t.messages,
            "inherited": t.inherited,
            "taint": t.taint,
            "usage": t.usage,
            "turns": t.turns,
            "checkpoint": t.checkpoint,
            "issues": t.report.issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        }));
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
    if let Some(p) = &t.meta.parent {
        println!(
            "fork of {} after message {} (seq {})",
            p.session, p.messages, p.seq
        );
    }
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
        return print_json(
            &json!({"id": t.meta.id, "summaries": t.usage, "turns": t.turns, "messages": per_message}),
        );
    }
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
    Ok(ExitCode::SUCCESS)
}

fn verify(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let path = Session::find(&store.dir()?, id)?;
    let report = Session::verify(&path)?;
    let code = if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "path": path,
                "clean": report.is_clean(),
                "summary": scan::describe(&report),
                "issues": report.issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                "first_bad_seq": report.first_bad_seq(),
            }))?
        );
        return Ok(code);
    }
    println!("{}: {}", path.display(), scan::describe(&report));
    if !report.is_clean() {
        for issue in &report.issues {
            println!("  {issue}");
        }
        if let Some(seq) = report.first_bad_seq() {
            println!("first bad seq: {seq}");
        }
    }
    Ok(code)
}

fn new(
    store: &StoreArgs,
    task: &str,
    title: Option<&str>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let id = m.create_session(task, title)?;
    let path = m.sessions_dir().join(format!("{id}.jsonl"));
    if as_json {
        return print_json(&json!({"id": id, "path": path, "messages": m.messages.len()}));
    }
    println!("{id}");
    Ok(ExitCode::SUCCESS)
}

fn fork(store: &StoreArgs, id: &str, at: Option<usize>, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let source = m.resolve(id)?;
    let f = m.fork_session(&source, at)?;
    if as_json {
        return print_json(&json!({
            "id": f.id,
            "source": source,
            "requested": f.requested,
            "effective": f.effective,
            "parent": f.parent,
            "materialized": f.materialized,
        }));
    }
    if f.effective != f.requested {
        eprintln!(
            "cut moved back from {} to {} message(s) to keep tool calls with their results",
            f.requested, f.effective
        );
    }
    println!("{}", f.id);
    Ok(ExitCode::SUCCESS)
}

fn export(
    store: &StoreArgs,
    id: &str,
    format: &str,
    redact: bool,
    output: Option<&Path>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let format: ExportFormat = format.parse()?;
    let mut m = store.manager(Durability::Fsync)?;
    let id = m.resolve(id)?;
    let e = m.export(&id, ExportOptions { format, redact })?;
    for loss in &e.losses {
        eprintln!("warning: {} export: {loss}", format.as_str());
    }
    let redactions: HashMap<&str, usize> = e
        .redactions
        .counts
        .iter()
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    if let Some(path) = output {
        memoir::paths::atomic_write(path, e.text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if as_json {
        let mut report = json!({
            "id": id,
            "format": format.as_str(),
            "messages": e.messages,
            "redactions": redactions,
            "losses": e.losses,
        });
        match output {
            Some(path) => report["path"] = json!(path),
            None => report["content"] = json!(e.text),
        }
        return print_json(&report);
    }
    if output.is_none() {
        print!("{}", e.text);
    } else if redact {
        eprintln!("{} secret(s) redacted", e.redactions.total());
    }
    Ok(ExitCode::SUCCESS)
}

fn rename(store: &StoreArgs, id: &str, title: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let id = m.resolve(id)?;
    m.rename_session(&id, title)?;
    if as_json {
        return print_json(&json!({"id": id, "title": title}));
    }
    println!("{id}: {title}");
    Ok(ExitCode::SUCCESS)
}

fn delete(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let id = m.resolve(id)?;
    if !m.delete_session(&id)? {
        anyhow::bail!("session {id} vanished before it could be deleted");
    }
    if as_json {
        return print_json(&json!({"id": id, "deleted": true}));
    }
    println!("moved {id} to the trash (undo: memoir sessions restore {id})");
    Ok(ExitCode::SUCCESS)
}

fn restore(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let trash = m.list_trash()?;
    let matches: Vec<&str> = trash
        .iter()
        .map(|t| t.entry.id.as_str())
        .filter(|t| *t == id || t.starts_with(id))
        .collect();
    let id = match matches.as_slice() {
        [one] => one.to_string(),
        _ if matches.contains(&id) => id.to_string(),
        [] => id.to_string(), // let the manager report it precisely
        many => anyhow::bail!(
            "{id:?} matches {} trashed sessions; use a longer prefix: {}",
            many.len(),
            many.join(", ")
        ),
    };
    let entry = m.restore_session(&id)?;
    if as_json {
        return print_json(&json!({"id": id, "restored": true, "entry": entry}));
    }
    println!("restored {id} ({} messages)", entry.messages);
    Ok(ExitCode::SUCCESS)
}

fn purge(store: &StoreArgs, ids: &[String], as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let only = (!ids.is_empty()).then_some(ids);
    let report = m.purge_trash(only)?;
    if as_json {
        let kept: Vec<_> = report
            .kept
            .iter()
            .map(|(id, by)| json!({"id": id, "needed_by": by}))
            .collect();
        return print_json(&json!({"purged": report.purged, "kept": kept}));
    }
    for id in &report.purged {
        println!("purged {id}");
    }
    for (id, by) in &report.kept {
        println!("kept {id}: forks still need its prefix ({})", by.join(", "));
    }
    if report.purged.is_empty() && report.kept.is_empty() {
        println!("the trash is empty");
    }
    Ok(ExitCode::SUCCESS)
}

fn stress(
    store: &StoreArgs,
    sessions: usize,
    messages: usize,
    shared: Option<&str>,
    tag: &str,
) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Flush)?;
    for i in 0..sessions {
        let id = m.create_session(&format!("{tag} task {i}"), None)?;
        for j in 0..messages {
            m.add_message(Message::assistant(format!("{tag}:{i}:{j}")))?;
        }
        m.flush()?;
        if let Some(shared) = shared {
            m.append_session_messages(shared, vec![Message::user(format!("{tag}:{i}"))])?;
        }
        println!("{id}");
    }
    Ok(ExitCode::SUCCESS)
}
