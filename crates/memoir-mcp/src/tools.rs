//! The tool handlers: each parses its arguments (unknown fields refused),
//! calls one library function on the call's [`Scope`], and shapes a
//! size-bounded, cursor-paginated result. Blocking: run them off the async
//! runtime ([`call`] is what the server runs on tokio's blocking pool).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use memoir::manager::IndexEntry;
use memoir::notes::{self, Notes};
use memoir::record::SessionMeta;
use memoir::search::{SearchFilter, SearchMode, SearchQuery};
use memoir::view::{RebuildOptions, SessionView};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::ToolError;
use crate::page::Page;
use crate::scope::{Indexes, McpConfig, Scope};

/// Default token budget of `recall`.
pub const DEFAULT_RECALL_BUDGET: usize = 1500;
/// Largest token budget of `recall`.
pub const MAX_RECALL_BUDGET: usize = 8000;
/// Longest message text `get_session` returns, in characters.
pub const MAX_MESSAGE_CHARS: usize = 2000;

fn parse<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| ToolError::invalid(e.to_string()))
}

/// Run tool `name` with `args` for the caller whose token names `tenant`
/// (`caller`: who it is, over HTTP; its roles were checked by
/// [`crate::rules::check`], its ownership rule applies here).
pub fn call(
    config: &McpConfig,
    indexes: &Indexes,
    tenant: Option<&str>,
    caller: Option<&memoir::access::Caller>,
    name: &str,
    args: Map<String, Value>,
) -> Result<Value, ToolError> {
    let writes = |name: &str| -> Result<(), ToolError> {
        if config.allow_writes {
            Ok(())
        } else {
            Err(ToolError::invalid(format!(
                "{name} is disabled: start the server with --allow-writes"
            )))
        }
    };
    let mut scope = config.backend.scope_as(tenant, caller)?;
    match name {
        "search_sessions" => search_sessions(config, indexes, &mut scope, parse(args)?),
        "recall" => recall(config, &scope, parse(args)?),
        "list_sessions" => list_sessions(&scope, parse(args)?),
        "get_session" => get_session(&scope, parse(args)?),
        "resume_command" => resume(&scope, parse(args)?),
        "list_notes" => list_notes(&mut scope, parse(args)?),
        "remember" => remember(&mut scope, parse(args)?),
        "promote" => promote(config, &mut scope, parse(args)?),
        "usage" => usage(&scope, parse(args)?),
        "blame" => blame(config, indexes, &scope, parse(args)?),
        "forget" => {
            writes(name)?;
            forget(&mut scope, parse(args)?)
        }
        "fork_session" => {
            writes(name)?;
            fork(&mut scope, parse(args)?)
        }
        other => Err(ToolError::invalid(format!("unknown tool {other:?}"))),
    }
}

/// A time bound of a tool call, parsed by the library (one grammar for every
/// front: an instant, a day or an age).
fn parse_time(s: &str) -> Result<DateTime<Utc>, ToolError> {
    memoir::search::parse_time(s).map_err(|e| ToolError::invalid(e.to_string()))
}

/// The project filter of a call: the server's project, a narrower one the
/// caller named, or (with `all_projects`, where allowed) any.
fn project_filter(
    scope: &Scope,
    project: Option<&str>,
    all_projects: bool,
) -> Result<Option<PathBuf>, ToolError> {
    if all_projects && !scope.may_widen {
        return Err(ToolError::invalid(format!(
            "all_projects is not allowed: this server's token is scoped to project {:?}",
            scope.project
        )));
    }
    match project {
        Some(p) if p.trim().is_empty() => Err(ToolError::invalid("project is empty")),
        Some(p) => {
            let p = PathBuf::from(p);
            if !all_projects && !scope.owns_workspace(&p) {
                return Err(ToolError::invalid(format!(
                    "project {} is outside this server's project {}; pass all_projects: true to search every project",
                    p.display(),
                    scope.project
                )));
            }
            Ok(Some(p))
        }
        None if all_projects => Ok(None),
        None => Ok(scope.workspace.clone()),
    }
}

fn nonempty(what: &str, s: &str) -> Result<(), ToolError> {
    if s.trim().is_empty() {
        Err(ToolError::invalid(format!("{what} is empty")))
    } else {
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    project: Option<String>,
    agent: Option<String>,
    since: Option<String>,
    until: Option<String>,
    role: Option<String>,
    tool: Option<String>,
    #[serde(default)]
    all_projects: bool,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// A message role by name (`search_sessions`' `role`).
fn role_of(name: &str) -> Result<memoir::message::Role, ToolError> {
    use memoir::message::Role;
    match name {
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        "system" => Ok(Role::System),
        other => Err(ToolError::invalid(format!(
            "unknown role {other:?} (user, assistant, tool or system)"
        ))),
    }
}

fn search_sessions(
    config: &McpConfig,
    indexes: &Indexes,
    scope: &mut Scope,
    a: SearchArgs,
) -> Result<Value, ToolError> {
    nonempty("query", &a.query)?;
    let page = Page::new(a.limit, 10, 50, a.cursor.as_deref())?;
    let filter = SearchFilter {
        project: project_filter(scope, a.project.as_deref(), a.all_projects)?
            .map(|p| p.display().to_string()),
        agent: a.agent,
        since: a.since.as_deref().map(parse_time).transpose()?,
        until: a.until.as_deref().map(parse_time).transpose()?,
        role: a.role.as_deref().map(role_of).transpose()?,
        tool: a.tool,
        ..SearchFilter::default()
    };
    let scoped = indexes.get(scope, &config.embedder)?;
    let filter = SearchFilter {
        session: scoped.id_prefix.clone(),
        ..filter
    };
    let mut ix = scoped
        .index
        .lock()
        .map_err(|_| ToolError::internal("search index lock poisoned"))?;
    // Catch up first: another process's notes are visible on the next search.
    ix.update()?;
    // One extra hit tells whether there is a next page; forgotten notes are
    // dropped after the search, so ask for their count more.
    let mut hidden: HashMap<String, HashSet<u64>> = HashMap::new();
    let mut want = page.end() + 1;
    let hits = loop {
        let q = SearchQuery {
            text: a.query.clone(),
            k: want,
            mode: SearchMode::Hybrid,
            filter: filter.clone(),
        };
        let raw = ix.search(&q)?;
        let exhausted = raw.len() < want;
        let raw = match &scoped.id_prefix {
            Some(prefix) => memoir_server::namespace::visible_hits(prefix, raw),
            None => raw,
        };
        let mut hits = Vec::with_capacity(raw.len());
        for h in raw {
            if notes::is_notes_session(&h.session) {
                if !hidden.contains_key(&h.session) {
                    let seqs = match scope.manager.read_session(&h.session) {
                        Ok(t) => {
                            notes::collect(
                                &t.messages[t.inherited..],
                                &t.message_seqs[t.inherited..],
                            )
                            .hidden_seqs
                        }
                        Err(_) => HashSet::new(),
                    };
                    hidden.insert(h.session.clone(), seqs);
                }
                if hidden.get(&h.session).is_some_and(|s| s.contains(&h.seq)) {
                    continue;
                }
            }
            hits.push(h);
        }
        if exhausted || hits.len() > page.end() || want >= 2000 {
            break hits;
        }
        want = (want * 2).min(2000);
    };
    let more = hits.len() > page.end();
    let items = hits
        .into_iter()
        .skip(page.offset)
        .take(page.limit)
        .map(|h| {
            json!({
                "session": h.session, "seq": h.seq, "role": h.role.as_str(),
                "time": h.time.to_rfc3339(), "agent": h.agent, "project": h.project,
                "title": h.title, "score": h.score,
                "snippet": h.snippet.marked(memoir::search::snippet::MARK_OPEN, memoir::search::snippet::MARK_CLOSE),
            })
        });
    Ok(page.shape("hits", items, more))
}

/// The project's most recently active session (not a notes session).
fn latest(scope: &Scope) -> Result<String, ToolError> {
    project_sessions(scope)?
        .into_iter()
        .next()
        .map(|e| e.id)
        .ok_or_else(|| ToolError::not_found("this project has no session yet"))
}

/// The project's sessions, most recently active first, notes excluded.
fn project_sessions(scope: &Scope) -> Result<Vec<IndexEntry>, ToolError> {
    let mut all: Vec<IndexEntry> = scope
        .manager
        .list_sessions()?
        .into_iter()
        .filter(|e| !notes::is_notes_session(&e.id) && scope.owns_workspace(&e.workspace))
        .filter(|e| {
            scope.only_member.is_none()
                || scope
                    .store
                    .read_header(&e.id)
                    .ok()
                    .flatten()
                    .is_some_and(|m| scope.may_act_on(&m))
        })
        .collect();
    memoir::manager::index::sort_newest_first(&mut all);
    Ok(all)
}

/// Resolve `prefix` to a session of the project ("not found" for another
/// project's session of a shared store).
fn resolve(scope: &Scope, prefix: &str) -> Result<(String, SessionMeta), ToolError> {
    nonempty("id", prefix)?;
    // Only the project's sessions are candidates: another project's id is
    // never matched, nor named in an ambiguity.
    let id = scope
        .manager
        .resolve_where(prefix, |m| scope.owns_workspace(&m.workspace))?;
    let meta = scope
        .store
        .read_header(&id)?
        .ok_or_else(|| ToolError::not_found(format!("session {id} has no header")))?;
    if !scope.owns_workspace(&meta.workspace) {
        return Err(ToolError::not_found(format!(
            "no session {prefix:?} in project {}",
            scope.project
        )));
    }
    // Another member's session, for a caller without `read`: not found,
    // never an existence oracle (as `memoir serve` answers).
    if !scope.may_act_on(&meta) {
        return Err(ToolError::not_found(format!(
            "no session {prefix:?} of member {} in project {}",
            scope.only_member.as_deref().unwrap_or_default(),
            scope.project
        )));
    }
    Ok((id, meta))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    query: String,
    session: Option<String>,
    k: Option<usize>,
    token_budget: Option<usize>,
}

fn recall(config: &McpConfig, scope: &Scope, a: RecallArgs) -> Result<Value, ToolError> {
    nonempty("query", &a.query)?;
    let budget = a.token_budget.unwrap_or(DEFAULT_RECALL_BUDGET);
    if !(50..=MAX_RECALL_BUDGET).contains(&budget) {
        return Err(ToolError::invalid(format!(
            "token_budget must be 50 to {MAX_RECALL_BUDGET}"
        )));
    }
    let k = a.k.unwrap_or(16);
    if !(1..=64).contains(&k) {
        return Err(ToolError::invalid("k must be 1 to 64"));
    }
    let id = match a.session.as_deref() {
        Some(s) => resolve(scope, s)?.0,
        None => latest(scope)?,
    };
    // The session's own turns and the project's promoted facts.
    let history = memoir::promote::history_with_facts(&scope.manager, &id, &scope.project)?;
    let blobs = config.blobs.as_deref();
    let (view, _) = SessionView::rebuild_history(
        &history,
        config.embedder.as_ref(),
        blobs,
        &RebuildOptions::default(),
    )?;
    let block = view.graft_budget_top(config.embedder.as_ref(), &a.query, k, budget, blobs)?;
    let items: Vec<Value> = block
        .items
        .iter()
        .map(
            |i| json!({"session": i.session, "seq": i.chain_seq, "part": i.part, "score": i.score}),
        )
        .collect();
    Ok(json!({
        "session": id,
        "text": block.text,
        "tokens": block.tokens,
        "items": items,
        "truncated_items": block.truncated,
        "token_budget": budget,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    project: Option<String>,
    agent: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn agent_of(e: &IndexEntry) -> &str {
    e.source
        .as_ref()
        .map_or(memoir::search::NATIVE_AGENT, |s| s.agent.as_str())
}

fn list_sessions(scope: &Scope, a: ListArgs) -> Result<Value, ToolError> {
    let page = Page::new(a.limit, 20, 100, a.cursor.as_deref())?;
    let narrow = project_filter(scope, a.project.as_deref(), false)?;
    let all: Vec<IndexEntry> = project_sessions(scope)?
        .into_iter()
        .filter(|e| narrow.as_ref().is_none_or(|p| e.workspace.starts_with(p)))
        .filter(|e| a.agent.as_deref().is_none_or(|ag| agent_of(e) == ag))
        .collect();
    let more = all.len() > page.end();
    let items = all.iter().skip(page.offset).take(page.limit).map(|e| {
        json!({
            "id": e.id, "title": e.title, "agent": agent_of(e),
            "project": e.workspace.display().to_string(),
            "created_at": e.created_at.to_rfc3339(), "last_activity": e.last_activity.to_rfc3339(),
            "messages": e.messages, "estimated_tokens": e.estimated_tokens,
        })
    });
    Ok(page.shape("sessions", items, more))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    id: String,
    around_seq: Option<u64>,
    before: Option<usize>,
    after: Option<usize>,
}

fn get_session(scope: &Scope, a: GetArgs) -> Result<Value, ToolError> {
    let before = a.before.unwrap_or(5);
    let after = a.after.unwrap_or(5);
    if before > 50 || after > 50 {
        return Err(ToolError::invalid("before and after are at most 50"));
    }
    let (id, _) = resolve(scope, &a.id)?;
    let t = scope.manager.read_session(&id)?;
    let n = t.messages.len();
    let range = match a.around_seq {
        Some(seq) => {
            let at = memoir::search::around(&t.message_seqs, seq, 0).start;
            at.saturating_sub(before)..(at + after + 1).min(n)
        }
        None => n.saturating_sub(before + after + 1)..n,
    };
    let messages: Vec<Value> = range
        .clone()
        .map(|i| {
            let m = &t.messages[i];
            let text = m.readable_text();
            let cut = text.chars().count() > MAX_MESSAGE_CHARS;
            let text: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
            let tools: Vec<String> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    memoir::Block::ToolUse { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect();
            let mut v = json!({
                "seq": t.message_seqs[i], "role": m.role.as_str(), "text": text,
                "truncated": cut, "inherited": i < t.inherited,
            });
            if !tools.is_empty() {
                v["tool_calls"] = json!(tools);
            }
            if let Some(ts) = m.timestamp {
                v["time"] = json!(ts.to_rfc3339());
            }
            v
        })
        .collect();
    Ok(json!({
        "session": id,
        "title": t.title,
        "total_messages": n,
        "messages": messages,
        "has_more_before": range.start > 0,
        "has_more_after": range.end < n,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

fn resume(scope: &Scope, a: IdArgs) -> Result<Value, ToolError> {
    let (id, meta) = resolve(scope, &a.id)?;
    let cmd = memoir::search::resume_command_in(scope.store.as_ref(), &meta);
    Ok(json!({
        "session": id,
        "shell": cmd.shell_line(),
        "program": cmd.program,
        "args": cmd.args,
        "cwd": cmd.cwd.map(|c| c.display().to_string()),
        "agent": cmd.agent,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NotesArgs {
    limit: Option<usize>,
    cursor: Option<String>,
}

fn list_notes(scope: &mut Scope, a: NotesArgs) -> Result<Value, ToolError> {
    let page = Page::new(a.limit, 50, 200, a.cursor.as_deref())?;
    let project = scope.project.clone();
    let list = Notes::new(&mut scope.manager, &project).list()?;
    let more = list.notes.len() > page.end();
    let items = list
        .notes
        .iter()
        .rev()
        .skip(page.offset)
        .take(page.limit)
        .map(|n| json!(n));
    Ok(page.shape("notes", items, more))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    text: String,
    #[serde(default)]
    tags: Vec<String>,
    session: Option<String>,
}

fn remember(scope: &mut Scope, a: RememberArgs) -> Result<Value, ToolError> {
    // A note is a message: one that names a blob reads back its bytes, so
    // it must be a blob this project already holds.
    let as_written = [memoir::record::Record::Message(
        memoir::message::Message::user(&a.text),
    )];
    memoir::transcript::grants::check_written(scope.store.as_ref(), &as_written)?;
    let project = scope.project.clone();
    let mut notes = Notes::new(&mut scope.manager, &project);
    let note = notes.remember(&a.text, &a.tags, a.session.as_deref())?;
    Ok(json!({"id": note.id, "notes_session": notes.session_id(), "seq": note.seq}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromoteArgs {
    fact: String,
    seqs: Vec<u64>,
    session: Option<String>,
    task_score: Option<f32>,
    #[serde(default)]
    tags: Vec<String>,
}

fn promote(config: &McpConfig, scope: &mut Scope, a: PromoteArgs) -> Result<Value, ToolError> {
    use memoir::view::PromotionSignals;
    nonempty("fact", &a.fact)?;
    if a.seqs.is_empty() || a.seqs.len() > 64 {
        return Err(ToolError::invalid("seqs names 1 to 64 records"));
    }
    let task_score = a.task_score.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&task_score) {
        return Err(ToolError::invalid("task_score must be 0 to 1"));
    }
    let id = match a.session.as_deref() {
        Some(s) => resolve(scope, s)?.0,
        None => latest(scope)?,
    };
    let history = scope.manager.read_history(&id)?;
    let (view, _) = SessionView::rebuild_history(
        &history,
        config.embedder.as_ref(),
        config.blobs.as_deref(),
        &RebuildOptions::default(),
    )?;
    for &seq in &a.seqs {
        if !view.mark_important(seq) {
            return Err(ToolError::not_found(format!(
                "session {id} has no record at seq {seq} to promote"
            )));
        }
    }
    let signals = PromotionSignals {
        task_score,
        ..PromotionSignals::default()
    };
    let candidates = view.postmortem(&signals);
    let project = scope.project.clone();
    let promoted = memoir::promote::promote(
        &mut scope.manager,
        &project,
        &view,
        &candidates,
        &a.fact,
        &a.tags,
    )?
    .ok_or_else(|| ToolError::invalid("none of these records can be promoted (pruned)"))?;
    let sources: Vec<Value> = promoted
        .promotion
        .sources
        .iter()
        .map(|s| json!({"session": s.session, "seq": s.seq, "reasons": s.reasons}))
        .collect();
    Ok(json!({
        "session": id,
        "note_id": promoted.note.id,
        "notes_session": promoted.promotion.note.session,
        "seq": promoted.note.seq,
        "sources": sources,
    }))
}

fn forget(scope: &mut Scope, a: IdArgs) -> Result<Value, ToolError> {
    let project = scope.project.clone();
    let forgotten = Notes::new(&mut scope.manager, &project).forget(&a.id)?;
    if !forgotten {
        return Err(ToolError::not_found(format!(
            "no live note {} in this project",
            a.id
        )));
    }
    Ok(json!({"id": a.id, "forgotten": true}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkArgs {
    id: String,
    /// The last record `seq` the fork keeps, as `memoir sessions fork --at`
    /// and the server's `at_seq` (default: the whole session).
    at_seq: Option<u64>,
}

fn fork(scope: &mut Scope, a: ForkArgs) -> Result<Value, ToolError> {
    let (id, _) = resolve(scope, &a.id)?;
    let upto = match a.at_seq {
        Some(seq) => Some(memoir::manager::fork::messages_through_seq(
            &scope.manager.read_session(&id)?,
            seq,
        )?),
        None => None,
    };
    let f = scope.manager.fork_session(&id, upto)?;
    Ok(json!({
        "id": f.id,
        "parent": id,
        "at_seq": f.parent.seq,
        "messages": f.effective,
        "requested": f.requested,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlameArgs {
    path: String,
    line: Option<usize>,
}

/// Most edits a `blame` result lists.
const MAX_BLAME_EDITS: usize = 50;

/// [`memoir::blame`]: the file's recorded edits (sessions found through the
/// search index, each read from its log), or who last wrote one line of the
/// file as it is now (a local server only: it reads the file).
fn blame(
    config: &McpConfig,
    indexes: &Indexes,
    scope: &Scope,
    a: BlameArgs,
) -> Result<Value, ToolError> {
    use memoir::blame::{self, BlameError};
    nonempty("path", &a.path)?;
    let mut path = std::path::PathBuf::from(&a.path);
    if path.is_relative() {
        match &scope.workspace {
            Some(ws) => path = ws.join(path),
            None => return Err(ToolError::invalid("give the file's absolute path")),
        }
    }
    let path = blame::normalize(&path);
    let scoped = indexes.get(scope, &config.embedder)?;
    let prefix = scoped.id_prefix.clone();
    let visible = |id: &str| match &prefix {
        Some(p) => id.strip_prefix(p.as_str()).map(str::to_string),
        None => Some(id.to_string()),
    };
    let as_tool = |e: BlameError| match e {
        BlameError::Search(e) => ToolError::from(e),
        other => ToolError {
            class: other.kind(),
            message: other.to_string(),
        },
    };
    let history = {
        let mut ix = scoped
            .index
            .lock()
            .map_err(|_| ToolError::internal("search index lock poisoned"))?;
        blame::file_history_indexed(&scope.manager, &mut ix, &path, visible).map_err(as_tool)?
    };
    if let Some(line) = a.line {
        if scope.tenant.is_some() {
            return Err(ToolError::invalid(
                "line blame reads the file as it is now: ask a local memoir mcp, or omit line",
            ));
        }
        let content = std::fs::read(&path).map_err(|source| memoir::Error::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
        let b = blame::blame_line(&history, &String::from_utf8_lossy(&content), line)
            .map_err(as_tool)?;
        return Ok(json!(b));
    }
    let total = history.edits.len();
    let truncated = total > MAX_BLAME_EDITS;
    let mut out = json!({
        "path": history.path,
        "edits": history.edits.iter().take(MAX_BLAME_EDITS).collect::<Vec<_>>(),
        "truncated": truncated,
    });
    if truncated {
        out["note"] = json!(format!("the newest {MAX_BLAME_EDITS} of {total} edits"));
    }
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageArgs {
    period: Option<String>,
    by: Option<String>,
    project: Option<String>,
}

/// Most rows a `usage` result carries.
const MAX_USAGE_ROWS: usize = 100;

fn usage(scope: &Scope, a: UsageArgs) -> Result<Value, ToolError> {
    use memoir::usage::{GroupKey, PriceTable, ProjectFilter, UsageQuery};
    let since = match a.period.as_deref() {
        None | Some("all") => None,
        Some("today") => Some(
            Utc::now()
                .date_naive()
                .and_hms_opt(0, 0, 0)
                .map(|t| t.and_utc()),
        ),
        Some("week") => Some(Utc::now().checked_sub_signed(chrono::Duration::days(7))),
        Some("month") => Some(Utc::now().checked_sub_signed(chrono::Duration::days(30))),
        Some(p) => Some(Some(parse_time(p)?)),
    }
    .map(|t| t.ok_or_else(|| ToolError::invalid("period out of range")))
    .transpose()?;
    let group_by = match a.by.as_deref() {
        None => Vec::new(),
        Some(b) => vec![b
            .parse::<GroupKey>()
            .map_err(|e| ToolError::invalid(e.to_string()))?],
    };
    let project = project_filter(scope, a.project.as_deref(), false)?.map(ProjectFilter::Workspace);
    let query = UsageQuery {
        project,
        since,
        group_by,
        ..UsageQuery::default()
    };
    let home = memoir::paths::memoir_home().ok();
    let prices = PriceTable::configured(home.as_deref(), None)?;
    let report = memoir::usage::report(scope.store.as_ref(), &query, &prices)?;
    let truncated = report.rows.len() > MAX_USAGE_ROWS;
    let rows: Vec<Value> = report
        .rows
        .iter()
        .take(MAX_USAGE_ROWS)
        .map(|r| json!(r))
        .collect();
    let mut out = json!({
        "totals": report.total,
        "rows": rows,
        "sessions": report.sessions,
        "truncated": truncated,
    });
    if truncated {
        out["note"] = json!(format!(
            "truncated to {MAX_USAGE_ROWS} of {} rows: narrow with period or project",
            report.rows.len()
        ));
    }
    Ok(out)
}
