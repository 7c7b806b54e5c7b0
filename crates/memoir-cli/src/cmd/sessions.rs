//! `memoir sessions`: list (as a fork tree), show, usage, verify, and manage
//! sessions (new, fork, export, rename, delete, restore, purge) through
//! [`memoir::manager::SessionManager`].
//!
//! The store is chosen by [`StoreArgs`] (the library's resolution order).
//! Messages are numbered by their record `seq` everywhere: `show` prints it,
//! `fork --at SEQ` cuts after it, exports carry it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use memoir::manager::{fork as fork_rules, ExportFormat, ExportOptions, IndexEntry};
use memoir::message::{Block, Message};
use memoir::record::RunStats;
use memoir::store::{scan, Durability};
use memoir::transcript::Session;
use serde_json::json;

use super::choices;
use super::store::{resolve_id, resolve_trashed, StoreArgs};
use crate::exit::name_store;
use crate::outln;
use crate::output::print_json;

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
    /// Fork a session (by reference) through one of its records.
    Fork {
        /// Full id or unique prefix of the source.
        id: String,
        /// The last record seq to keep, as `sessions show` prints it
        /// (default: all; a fork's inherited messages are always kept). Moved
        /// back so no tool call is separated from its results.
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Export a session as JSONL, OpenAI chat JSON, Markdown or a self-contained HTML page.
    Export {
        /// Full id or unique prefix.
        id: String,
        /// Output format.
        #[arg(long, default_value = "jsonl", value_parser = choices::export_format())]
        format: ExportFormat,
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
        } => export(&store, &id, format, redact, output.as_deref(), json),
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
        extra.push_str(&format!("  (fork of {from} through seq {})", p.seq));
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
    // A read never creates the store: a missing one lists as empty.
    let Some(resolved) = store.exists()? else {
        let dir = store.resolve()?.dir;
        if as_json {
            return print_json(&json!({
                "store": dir, "sessions": [], "unreadable": 0, "rebuilt": 0,
            }));
        }
        outln!("no sessions in {} (no store there yet)", dir.display());
        return Ok(ExitCode::SUCCESS);
    };
    let m = store.reader()?;
    let report = m.list_sessions_report()?;
    let dir = resolved.dir;
    if as_json {
        let rows = report
            .entries
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(e)?;
                v["path"] = json!(m.store().location(&e.id));
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
        outln!("no sessions in {}", dir.display());
    }
    let listed: HashMap<&str, ()> = report.entries.iter().map(|e| (e.id.as_str(), ())).collect();
    for (depth, e) in fork_tree(&report.entries) {
        outln!("{}", entry_line(depth, e, &listed));
    }
    if report.unreadable > 0 {
        eprintln!("{} unreadable transcript(s) skipped", report.unreadable);
    }
    Ok(ExitCode::SUCCESS)
}

fn list_trash(store: &StoreArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let trash = match store.exists()? {
        Some(_) => store.reader()?.list_trash()?,
        None => Vec::new(),
    };
    let dir = store.resolve()?.dir;
    if as_json {
        let rows: Vec<_> = trash
            .iter()
            .map(|t| json!({"entry": t.entry, "deleted_at": t.deleted_at}))
            .collect();
        return print_json(&json!({"store": dir, "deleted": rows}));
    }
    if trash.is_empty() {
        outln!("the trash of {} is empty", dir.display());
    }
    for t in &trash {
        outln!(
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
    let m = store.reader()?;
    let id = resolve_id(&m, id)?;
    let mut t = m
        .read_session(&id)
        .map_err(|e| name_store(e, m.sessions_dir()))
        .with_context(|| format!("reading session {id}"))?;
    // The runs of the whole session (recorded, or stated by an imported source).
    let runs = memoir::runs::outcomes_of(&t);
    let episode = RunStats::fold(runs.iter().map(|o| &o.stats));
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
            "message_seqs": t.message_seqs,
            "inherited": t.inherited,
            "last_seq": t.last_seq,
            "taint": t.taint,
            "usage": t.usage,
            "turns": t.turns,
            "checkpoint": t.checkpoint,
            "runs": runs.len(),
            "episode": episode,
            "pending_notes": t.pending_notes,
            "promotions": t.promotions,
            "issues": t.report.issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        }));
    }
    outln!(
        "session {}  ({})",
        t.meta.id,
        t.title.as_deref().unwrap_or("untitled")
    );
    outln!(
        "created {}  provider {}  model {}",
        t.meta.created_at.to_rfc3339(),
        t.meta.provider,
        t.meta.model
    );
    if let Some(p) = &t.meta.parent {
        outln!(
            "fork of {} through seq {} ({} messages inherited; their seqs are the parent's)",
            p.session,
            p.seq,
            t.inherited
        );
    }
    for (i, (msg, seq)) in t.messages.iter().zip(&t.message_seqs).enumerate() {
        let from = match &t.meta.parent {
            Some(p) if i < t.inherited => Some(p.session.as_str()),
            _ => None,
        };
        print_message(*seq, from, msg)?;
    }
    if let Some(e) = &episode {
        outln!("{}", episode_line(runs.len(), e));
    }
    for p in &t.promotions {
        outln!(
            "promoted to note {} (seq {} of {}): {}",
            p.note.id,
            p.note.seq,
            p.note.session,
            p.fact
        );
    }
    for issue in &t.report.issues {
        eprintln!("warning: {issue}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The episode of a session's runs, on one line.
fn episode_line(runs: usize, e: &RunStats) -> String {
    let mut line = format!(
        "episode: {runs} run(s), {} turn(s), {} tool call(s) ({} failed, {} denied, {} staged)",
        e.turns, e.tool_calls, e.tool_errors, e.tool_denied, e.tool_staged
    );
    if let Some(cause) = &e.stop_cause {
        line.push_str(&format!(", last stopped: {cause}"));
    }
    if e.ended_on_failed_call {
        line.push_str(", ended on a failed call");
    }
    if e.exhausted {
        line.push_str(", exhausted");
    }
    if let Some(cost) = e.cost_usd {
        line.push_str(&format!(", ${cost:.4}"));
    }
    if !e.usage_complete {
        line.push_str(" (usage is a lower bound)");
    }
    line
}

/// One message, human-readable, labelled with its record seq (and, for a
/// fork's inherited message, the session the seq belongs to).
pub fn print_message(seq: u64, from: Option<&str>, m: &Message) -> anyhow::Result<()> {
    let role = m.role.as_str();
    let at = match from {
        Some(parent) => format!("{parent}:{seq}"),
        None => format!("{seq:>4}"),
    };
    for block in &m.content {
        match block {
            Block::Text { text } => outln!("[{at}] {role}: {text}"),
            Block::Thinking { text, .. } => outln!("[{at}] {role} (thinking): {text}"),
            Block::ToolUse { id, name, input } => {
                outln!("[{at}] {role} -> {name}({input}) [{id}]")
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let tag = if *is_error { "error" } else { "result" };
                let shown: String = content.chars().take(200).collect();
                outln!("[{at}] {role} <- {tag} [{tool_use_id}]: {shown}")
            }
            Block::Image { media_type, data } => {
                outln!(
                    "[{at}] {role}: <image {media_type}, {} bytes base64>",
                    data.len()
                )
            }
            Block::Unknown(v) => outln!("[{at}] {role}: <unknown block {v}>"),
        }
    }
    if let Some(u) = &m.usage {
        outln!(
            "       usage: in {} out {} cache-read {} cache-write {}",
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens
        );
    }
    Ok(())
}

fn usage(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    // One implementation for every front: memoir::usage. A
    // fork's own responses count; its parent's prefix is reported apart.
    let m = store.reader()?;
    let id = resolve_id(&m, id)?;
    let prices = super::usage::price_table(None)?;
    let u = memoir::usage::session_usage(m.store().as_ref(), &id, &prices)?;
    if as_json {
        return print_json(&serde_json::to_value(&u)?);
    }
    outln!("session {}", u.id);
    for (label, t) in [("own", &u.own), ("inherited", &u.inherited)] {
        if label == "inherited" && u.parent.is_none() {
            continue;
        }
        outln!(
            "{label:<9}  input {} output {} cache-read {} cache-write {} reasoning {} requests {} cost {}{}",
            t.input_tokens,
            t.output_tokens,
            t.cache_read_tokens,
            t.cache_write_tokens,
            t.reasoning_tokens,
            t.requests,
            if t.cost_is_lower_bound { ">=" } else { "" },
            format_args!("${:.4}", t.cost_usd),
        );
    }
    if let Some(p) = &u.parent {
        outln!("(a fork of {p}: inherited usage is the parent's, not counted again)");
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let m = store.reader()?;
    let id = resolve_id(&m, id)?;
    let path = m.store().location(&id);
    let report = Session::verify(&path)?;
    let code = if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::PROBLEMS)
    };
    if as_json {
        print_json(&json!({
            "id": id,
            "path": path,
            "clean": report.is_clean(),
            "summary": scan::describe(&report),
            "issues": report.issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
            "first_bad_seq": report.first_bad_seq(),
        }))?;
        return Ok(code);
    }
    outln!("{}: {}", path.display(), scan::describe(&report));
    if !report.is_clean() {
        for issue in &report.issues {
            outln!("  {issue}");
        }
        if let Some(seq) = report.first_bad_seq() {
            outln!("first bad seq: {seq}");
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
    let path = m.store().location(&id);
    if as_json {
        return print_json(&json!({"id": id, "path": path, "messages": m.messages.len()}));
    }
    outln!("{id}");
    Ok(ExitCode::SUCCESS)
}

fn fork(store: &StoreArgs, id: &str, at: Option<u64>, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.manager(Durability::Fsync)?;
    let source = resolve_id(&m, id)?;
    let upto = match at {
        Some(seq) => Some(fork_rules::messages_through_seq(
            &m.read_session(&source)?,
            seq,
        )?),
        None => None,
    };
    let f = m.fork_session(&source, upto)?;
    if as_json {
        return print_json(&json!({
            "id": f.id,
            "source": source,
            "requested_seq": at,
            "requested": f.requested,
            "effective": f.effective,
            "parent": f.parent,
            "materialized": f.materialized,
        }));
    }
    if f.effective != f.requested {
        eprintln!(
            "cut moved back to seq {} ({} of {} message(s)) to keep tool calls with their results",
            f.parent.seq, f.effective, f.requested
        );
    }
    outln!("{}", f.id);
    Ok(ExitCode::SUCCESS)
}

fn export(
    store: &StoreArgs,
    id: &str,
    format: ExportFormat,
    redact: bool,
    output: Option<&Path>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let mut m = store.reader()?;
    let id = resolve_id(&m, id)?;
    let e = m.export(&id, ExportOptions { format, redact })?;
    if !e.loss_summary.is_empty() {
        eprintln!(
            "warning: the {} shape cannot carry everything ({} loss(es)):",
            format.as_str(),
            e.losses.len()
        );
        for s in &e.loss_summary {
            eprintln!("  {s}");
        }
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
            "loss_summary": e.loss_summary,
        });
        match output {
            Some(path) => report["path"] = json!(path),
            None => report["content"] = json!(e.text),
        }
        return print_json(&report);
    }
    if output.is_none() {
        crate::out!("{}", e.text);
    } else if redact {
        eprintln!("{} secret(s) redacted", e.redactions.total());
    }
    Ok(ExitCode::SUCCESS)
}

fn rename(store: &StoreArgs, id: &str, title: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.reader()?;
    let id = resolve_id(&m, id)?;
    m.rename_session(&id, title)?;
    if as_json {
        return print_json(&json!({"id": id, "title": title}));
    }
    outln!("{id}: {title}");
    Ok(ExitCode::SUCCESS)
}

fn delete(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.reader()?;
    let id = resolve_id(&m, id)?;
    if !m.delete_session(&id)? {
        return Err(name_store(
            memoir::Error::NotFound(id.clone()),
            m.sessions_dir(),
        ));
    }
    if as_json {
        return print_json(&json!({"id": id, "deleted": true}));
    }
    outln!("moved {id} to the trash (undo: memoir sessions restore {id})");
    Ok(ExitCode::SUCCESS)
}

fn restore(store: &StoreArgs, id: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut m = store.reader()?;
    let id = resolve_trashed(&m, id)?;
    let entry = m
        .restore_session(&id)
        .map_err(|e| name_store(e, m.sessions_dir()))?;
    if as_json {
        return print_json(&json!({"id": id, "restored": true, "entry": entry}));
    }
    outln!("restored {id} ({} messages)", entry.messages);
    Ok(ExitCode::SUCCESS)
}

fn purge(store: &StoreArgs, ids: &[String], as_json: bool) -> anyhow::Result<ExitCode> {
    for id in ids {
        memoir::id::validate(id)?;
    }
    let mut m = store.reader()?;
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
        outln!("purged {id}");
    }
    for (id, by) in &report.kept {
        outln!("kept {id}: forks still need its prefix ({})", by.join(", "));
    }
    if report.purged.is_empty() && report.kept.is_empty() {
        outln!("the trash is empty");
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
        outln!("{id}");
    }
    Ok(ExitCode::SUCCESS)
}
