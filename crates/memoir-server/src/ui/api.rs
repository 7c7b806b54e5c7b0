//! The web view's JSON API (read-only, `GET` only). Each handler calls the
//! library on the blocking pool: the manager's listing
//! ([`SessionManager::list_sessions`], the self-healing index) and replay
//! ([`SessionManager::read_session`]), [`memoir::search`],
//! [`memoir::usage`] and [`memoir::changes`]. What is computed here is only
//! presentation: paging, sorting and filtering the listing, the session
//! tree, and cutting large blocks short (the full block is one more request).
//!
//! - `GET /api/sessions?offset&limit&sort&dir&agent&project&model&since&until&q`:
//!   one page of session trees (roots paged, each with its forks, rewinds and
//!   subagents under it), newest source time first by default.
//! - `GET /api/facets`: agents, projects and models with their session counts.
//! - `GET /api/costs?ids=a,b`: each session's own usage and cost
//!   ([`memoir::usage::session_usage`]).
//! - `GET /api/sessions/{id}?from&limit`: the conversation (large blocks
//!   cut; messages `from..from+limit`, all by default, and their `count`),
//!   its parent and children.
//! - `GET /api/sessions/{id}/block/{message}/{block}`: one block in full.
//! - `GET /api/sessions/{id}/changes`: [`memoir::changes::reconstruct`].
//! - `GET /api/sessions/{id}/events?from=N`: the messages appended after the
//!   first `N`, as they come (Server-Sent Events; `live`).
//! - `GET /api/search?q&agent&project&role&tool&since&until&k&mode`.
//! - `GET /api/usage?by&agent&project&model&since&until`: a
//!   [`memoir::usage::UsageReport`].

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use memoir::manager::{IndexEntry, ManagerOptions, SessionManager};
use memoir::message::{Block, Message, Role};
use memoir::search::{SearchFilter, SearchIndex, SearchMode, SearchQuery};
use memoir::usage::{self, GroupKey, PriceTable, UsageQuery};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{Scoped, Ui};
use crate::error::{blocking, ApiError, ApiResult};

/// Largest page of the session list.
pub const MAX_PAGE: usize = 500;
/// Blocks longer than this (characters of text, or of a tool call's JSON)
/// are cut in the conversation; the page fetches the rest on demand.
pub const BLOCK_PREVIEW_CHARS: usize = 8_000;
/// Most ids one `/api/costs` request may name.
pub const MAX_COST_IDS: usize = 200;

/// Any other path.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such page")
}

pub(crate) fn manager(st: &Ui) -> SessionManager {
    if let Some(project) = &st.project {
        return crate::namespace::project_manager(st.shared.clone(), project);
    }
    SessionManager::with_store(
        st.store.clone(),
        ManagerOptions {
            repair_on_switch: false,
            lease: memoir::manager::LeasePolicy::Off,
            ..ManagerOptions::default()
        },
    )
}

/// Every listed session: the memoised listing
/// ([`SessionManager::list_sessions_memo`]), so that the list, its facets
/// and a session's children cost a look at the change journal while the
/// store is unchanged.
pub(crate) fn listing(
    st: &Ui,
) -> Result<std::sync::Arc<Vec<IndexEntry>>, memoir::manager::ManagerError> {
    let mut memo = st.listing.lock().unwrap_or_else(|p| p.into_inner());
    manager(st).list_sessions_memo(&mut memo)
}

fn query<T>(q: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    q.map(|Query(t)| t)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

fn session_id(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let Path(id) = path?;
    memoir::id::validate(&id).map_err(ApiError::from)?;
    Ok(id)
}

/// `YYYY-MM-DD` (the start of that day, UTC; with `end`, the start of the
/// next) or an RFC 3339 instant.
fn parse_time(text: Option<&str>, end: bool) -> ApiResult<Option<DateTime<Utc>>> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let day = if end {
            day.succ_opt().unwrap_or(day)
        } else {
            day
        };
        return Ok(day.and_hms_opt(0, 0, 0).map(|t| t.and_utc()));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| ApiError::bad_request(format!("{text:?} is not a date (YYYY-MM-DD)")))
}

/// The agent that wrote a listed session.
fn agent(e: &IndexEntry) -> &str {
    e.source
        .as_ref()
        .map(|s| s.agent.as_str())
        .filter(|a| !a.is_empty())
        .unwrap_or(usage::NATIVE_AGENT)
}

/// Where a session hangs in the tree: its parent and how it came from it.
fn parent_of(e: &IndexEntry) -> Option<(String, &'static str)> {
    let source_field = |k: &str| {
        e.source
            .as_ref()
            .and_then(|s| s.extra.get(k))
            .and_then(Value::as_str)
    };
    if let Some(p) = &e.parent {
        let relation = if source_field("kind") == Some("branch") {
            "rewind"
        } else {
            "fork"
        };
        return Some((e.forked_from.clone().unwrap_or(p.session.clone()), relation));
    }
    source_field("parent_session").map(|p| (p.to_string(), "subagent"))
}

fn tokens(e: &IndexEntry) -> u64 {
    if e.message_usage.is_zero() {
        e.usage.total()
    } else {
        e.message_usage.total()
    }
}

fn workspace(e: &IndexEntry) -> String {
    e.workspace.display().to_string()
}

/// One row of the session list.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    id: String,
    title: Option<String>,
    agent: String,
    project: String,
    model: String,
    created_at: DateTime<Utc>,
    last_activity: DateTime<Utc>,
    messages: usize,
    inherited: usize,
    tokens: u64,
    estimated_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    relation: Option<&'static str>,
    depth: usize,
    status: memoir::manager::Status,
    issues: usize,
}

fn row(e: &IndexEntry, depth: usize) -> Row {
    let parent = parent_of(e);
    Row {
        id: e.id.clone(),
        title: e.title.clone(),
        agent: agent(e).to_string(),
        project: workspace(e),
        model: e.model.clone(),
        created_at: e.created_at,
        last_activity: e.last_activity,
        messages: e.messages,
        inherited: e.inherited,
        tokens: tokens(e),
        estimated_tokens: e.estimated_tokens,
        relation: parent.as_ref().map(|p| p.1),
        parent: parent.map(|p| p.0),
        depth,
        status: e.status,
        issues: e.issues,
    }
}

/// The query of `GET /api/sessions`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    offset: Option<usize>,
    limit: Option<usize>,
    sort: Option<String>,
    dir: Option<String>,
    agent: Option<String>,
    project: Option<String>,
    model: Option<String>,
    since: Option<String>,
    until: Option<String>,
    q: Option<String>,
}

/// One page of the session list.
#[derive(Debug, Serialize)]
pub(crate) struct Page {
    /// Trees (root sessions) matching the filters.
    roots: usize,
    /// Sessions matching the filters.
    sessions: usize,
    offset: usize,
    limit: usize,
    /// The page's roots, each followed by its descendants (depth-first).
    rows: Vec<Row>,
}

/// How rows are ordered.
#[derive(Debug, Clone, Copy)]
enum SortKey {
    Created,
    Activity,
    Messages,
    Tokens,
    Title,
}

impl SortKey {
    fn parse(s: Option<&str>) -> ApiResult<SortKey> {
        Ok(match s.unwrap_or("created") {
            "created" | "time" => SortKey::Created,
            "activity" => SortKey::Activity,
            "messages" => SortKey::Messages,
            "tokens" => SortKey::Tokens,
            "title" => SortKey::Title,
            other => {
                return Err(ApiError::bad_request(format!(
                    "sort={other:?}: created, activity, messages, tokens or title"
                )))
            }
        })
    }

    fn compare(self, a: &IndexEntry, b: &IndexEntry) -> std::cmp::Ordering {
        match self {
            SortKey::Created => a.created_at.cmp(&b.created_at),
            SortKey::Activity => a.last_activity.cmp(&b.last_activity),
            SortKey::Messages => a.messages.cmp(&b.messages),
            SortKey::Tokens => tokens(a).cmp(&tokens(b)),
            SortKey::Title => a
                .title
                .as_deref()
                .unwrap_or("")
                .to_lowercase()
                .cmp(&b.title.as_deref().unwrap_or("").to_lowercase()),
        }
        .then_with(|| a.id.cmp(&b.id))
    }
}

/// Filter, sort and page a listing into trees. A session whose parent is
/// not among the filtered sessions is a root; roots are sorted and paged,
/// each followed by its descendants in creation order.
fn page_of(entries: &[IndexEntry], p: &ListParams) -> ApiResult<Page> {
    let key = SortKey::parse(p.sort.as_deref())?;
    let descending = match p.dir.as_deref().unwrap_or("desc") {
        "desc" => true,
        "asc" => false,
        other => return Err(ApiError::bad_request(format!("dir={other:?}: asc or desc"))),
    };
    let since = parse_time(p.since.as_deref(), false)?;
    let until = parse_time(p.until.as_deref(), true)?;
    let model = p.model.as_ref().map(|m| m.to_lowercase());
    let text = p.q.as_ref().map(|q| q.to_lowercase());
    let nonempty = |o: &Option<String>| o.clone().filter(|s| !s.is_empty());
    let (want_agent, want_project) = (nonempty(&p.agent), nonempty(&p.project));
    let kept: Vec<&IndexEntry> = entries
        .iter()
        .filter(|e| {
            want_agent.as_deref().is_none_or(|a| a == agent(e))
                && want_project.as_deref().is_none_or(|w| w == workspace(e))
                && model
                    .as_deref()
                    .is_none_or(|m| e.model.to_lowercase().contains(m))
                && since.is_none_or(|s| e.created_at >= s)
                && until.is_none_or(|u| e.created_at < u)
                && text.as_deref().is_none_or(|t| {
                    e.id.to_lowercase().contains(t)
                        || e.title.as_deref().unwrap_or("").to_lowercase().contains(t)
                })
        })
        .collect();
    let position: HashMap<&str, usize> = kept
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots: Vec<usize> = Vec::new();
    for (i, e) in kept.iter().enumerate() {
        match parent_of(e).and_then(|(p, _)| position.get(p.as_str()).copied()) {
            Some(parent) if parent != i => children.entry(parent).or_default().push(i),
            _ => roots.push(i),
        }
    }
    roots.sort_by(|&a, &b| {
        let o = key.compare(kept[a], kept[b]);
        if descending {
            o.reverse()
        } else {
            o
        }
    });
    for list in children.values_mut() {
        list.sort_by(|&a, &b| kept[a].created_at.cmp(&kept[b].created_at));
    }
    let offset = p.offset.unwrap_or(0);
    let limit = p.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let mut rows = Vec::new();
    for &root in roots.iter().skip(offset).take(limit) {
        // Depth-first; a cycle (corrupt headers) cannot loop: each index once.
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(root, 0usize)];
        while let Some((i, depth)) = stack.pop() {
            if !seen.insert(i) {
                continue;
            }
            rows.push(row(kept[i], depth));
            if let Some(kids) = children.get(&i) {
                stack.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
            }
        }
    }
    Ok(Page {
        roots: roots.len(),
        sessions: kept.len(),
        offset,
        limit,
        rows,
    })
}

/// `GET /api/sessions`.
pub(crate) async fn sessions(
    Scoped(st): Scoped,
    params: Result<Query<ListParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let params = query(params)?;
    let page = blocking(move || {
        let entries = listing(&st)?;
        page_of(&entries, &params)
    })
    .await?;
    Ok(Json(page))
}

/// `GET /api/facets`.
pub(crate) async fn facets(Scoped(st): Scoped) -> ApiResult<Json<Value>> {
    let value = blocking(move || {
        let entries = listing(&st)?;
        let mut agents: BTreeMap<String, usize> = BTreeMap::new();
        let mut projects: BTreeMap<String, usize> = BTreeMap::new();
        let mut models: BTreeMap<String, usize> = BTreeMap::new();
        for e in entries.iter() {
            *agents.entry(agent(e).to_string()).or_default() += 1;
            *projects.entry(workspace(e)).or_default() += 1;
            if !e.model.is_empty() {
                *models.entry(e.model.clone()).or_default() += 1;
            }
        }
        Ok::<_, ApiError>(json!({
            "sessions": entries.len(),
            "agents": agents,
            "projects": projects,
            "models": models,
        }))
    })
    .await?;
    Ok(Json(value))
}

fn prices(st: &Ui) -> Result<&PriceTable, memoir::Error> {
    if let Some(p) = st.prices.get() {
        return Ok(p);
    }
    let table = PriceTable::configured(st.home.as_deref(), None)?;
    Ok(st.prices.get_or_init(|| table))
}

/// The query of `GET /api/costs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CostParams {
    ids: String,
}

/// `GET /api/costs?ids=a,b`: each session's own tokens and cost.
pub(crate) async fn costs(
    Scoped(st): Scoped,
    params: Result<Query<CostParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let params = query(params)?;
    let ids: Vec<String> = params
        .ids
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if ids.len() > MAX_COST_IDS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_COST_IDS} ids per request"
        )));
    }
    for id in &ids {
        memoir::id::validate(id).map_err(ApiError::from)?;
    }
    let value = blocking(move || {
        let prices = prices(&st)?;
        let mut out = serde_json::Map::new();
        for id in ids {
            // A session that cannot be read has no cost cell; the rest still do.
            if let Ok(u) = usage::session_usage(st.store.as_ref(), &id, prices) {
                out.insert(
                    id,
                    json!({
                        "usd": u.own.cost_usd,
                        "lower_bound": u.own.cost_is_lower_bound,
                        "tokens": u.own.total_tokens,
                        "requests": u.own.requests,
                    }),
                );
            }
        }
        Ok::<_, memoir::Error>(Value::Object(out))
    })
    .await?;
    Ok(Json(value))
}

/// `text` cut to [`BLOCK_PREVIEW_CHARS`], and its full length when cut.
fn preview(text: &str) -> (String, Option<usize>) {
    match text.char_indices().nth(BLOCK_PREVIEW_CHARS) {
        None => (text.to_string(), None),
        Some((at, _)) => (text[..at].to_string(), Some(text.chars().count())),
    }
}

/// A block as the conversation view shows it: long text cut, images left
/// for the page to fetch.
fn slim_block(b: &Block) -> Value {
    match b {
        Block::Text { text } => {
            let (text, full) = preview(text);
            json!({"type": "text", "text": text, "full_chars": full})
        }
        Block::Thinking { text, .. } => {
            let (text, full) = preview(text);
            json!({"type": "thinking", "text": text, "full_chars": full})
        }
        Block::ToolUse { id, name, input } => {
            let rendered = match input {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            let (text, full) = preview(&rendered);
            json!({"type": "tool_use", "id": id, "name": name, "input": text, "full_chars": full})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let (text, full) = preview(content);
            json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": text,
                   "is_error": is_error, "full_chars": full})
        }
        Block::Image { media_type, data } => {
            json!({"type": "image", "media_type": media_type, "bytes": data.len() / 4 * 3})
        }
        Block::Unknown(v) => {
            let (text, full) = preview(&v.to_string());
            json!({"type": "unknown", "text": text, "full_chars": full})
        }
    }
}

/// True for a message that summarises what a compaction dropped.
fn is_compaction(m: &Message) -> bool {
    m.extra
        .get(memoir::message::SOURCE_KEY)
        .and_then(|s| s.get("compact_summary"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

pub(crate) fn slim_message(i: usize, seq: Option<u64>, m: &Message) -> Value {
    json!({
        "i": i,
        "seq": seq,
        "role": m.role,
        "model": m.model,
        "timestamp": m.timestamp,
        "usage": m.usage,
        "compaction": is_compaction(m),
        "blocks": m.content.iter().map(slim_block).collect::<Vec<_>>(),
    })
}

/// The query of `GET /api/sessions/{id}`: which messages (all by default).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionParams {
    /// The first message sent (an index into the conversation).
    from: Option<usize>,
    /// At most this many messages.
    limit: Option<usize>,
}

/// `GET /api/sessions/{id}?from&limit`: the session's head (with
/// `from` 0 or absent) and its messages `from..from+limit`; `count` is the
/// number of messages it has, so a page can fetch the rest.
pub(crate) async fn session(
    Scoped(st): Scoped,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<SessionParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let id = session_id(path)?;
    let p = query(params)?;
    let value = blocking(move || {
        let m = manager(&st);
        let t = m.read_session(&id)?;
        let count = t.messages.len();
        let from = p.from.unwrap_or(0).min(count);
        let to = p
            .limit
            .map_or(count, |l| from.saturating_add(l.max(1)).min(count));
        let messages: Vec<Value> = (from..to)
            .map(|i| slim_message(i, t.message_seqs.get(i).copied(), &t.messages[i]))
            .collect();
        if from > 0 {
            // A later page: the messages only (the head came with the first).
            return Ok::<_, ApiError>(json!({
                "id": t.meta.id,
                "from": from,
                "count": count,
                "last_seq": t.last_seq,
                "messages": messages,
            }));
        }
        // Children: every listed session hanging under this one.
        let listing = listing(&st)?;
        let entry = listing.iter().find(|e| e.id == id);
        let children: Vec<Value> = listing
            .iter()
            .filter_map(|e| {
                let (parent, relation) = parent_of(e)?;
                (parent == id).then(|| {
                    json!({
                        "id": e.id,
                        "title": e.title,
                        "relation": relation,
                        "at_message": e.parent.as_ref().map(|p| p.messages),
                        "tool_use_id": e.source.as_ref().and_then(|s| s.extra.get("tool_use_id")),
                    })
                })
            })
            .collect();
        let parent = entry.and_then(parent_of).map(|(p, relation)| {
            json!({"id": p, "relation": relation,
                   "messages": t.meta.parent.as_ref().map(|f| f.messages)})
        });
        Ok::<_, ApiError>(json!({
            "id": t.meta.id,
            "from": from,
            "count": count,
            "title": t.title.clone().or_else(|| t.meta.title.clone()),
            "agent": usage::agent_of(&t.meta),
            "project": t.meta.workspace,
            "model": t.meta.model,
            "created_at": t.meta.created_at,
            "source": t.meta.source,
            "inherited": t.inherited,
            "last_seq": t.last_seq,
            "issues": t.report.issues.len(),
            "usage": entry.map(|e| if e.message_usage.is_zero() { e.usage } else { e.message_usage }),
            "parent": parent,
            "children": children,
            "messages": messages,
        }))
    })
    .await?;
    Ok(Json(value))
}

/// `GET /api/sessions/{id}/block/{message}/{block}`: one block in full.
pub(crate) async fn block(
    Scoped(st): Scoped,
    path: Result<Path<(String, usize, usize)>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path((id, message, index)) = path?;
    memoir::id::validate(&id).map_err(ApiError::from)?;
    let value = blocking(move || {
        let t = manager(&st).read_session(&id)?;
        let b = t
            .messages
            .get(message)
            .and_then(|m| m.content.get(index))
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no block {index} in message {message}"),
                )
            })?;
        Ok::<_, ApiError>(serde_json::to_value(b)?)
    })
    .await?;
    Ok(Json(value))
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    }
}

/// `GET /api/sessions/{id}/changes`.
pub(crate) async fn changes(
    Scoped(st): Scoped,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let id = session_id(path)?;
    let value = blocking(move || {
        let t = manager(&st).read_session(&id)?;
        let files = memoir::changes::reconstruct(&t.messages, &t.message_seqs);
        Ok::<_, ApiError>(json!({
            "id": t.meta.id,
            "title": t.title.clone().or_else(|| t.meta.title.clone()),
            "inherited": t.inherited,
            "files": files,
        }))
    })
    .await?;
    Ok(Json(value))
}

/// The query of `GET /api/search`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchParams {
    q: String,
    k: Option<usize>,
    mode: Option<String>,
    agent: Option<String>,
    project: Option<String>,
    session: Option<String>,
    role: Option<String>,
    tool: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

fn search_error(e: memoir::search::SearchError) -> ApiError {
    use memoir::search::SearchError;
    match e {
        SearchError::Store(e) => e.into(),
        other => {
            let message = format!("search: {other}");
            ApiError::of_kind(other.kind(), message)
        }
    }
}

/// `GET /api/search`: the store's cross-session index, caught up first.
pub(crate) async fn search(
    Scoped(st): Scoped,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let p = query(params)?;
    let nonempty = |o: Option<String>| o.filter(|s| !s.trim().is_empty());
    let mode: SearchMode = match nonempty(p.mode) {
        Some(m) => m.parse().map_err(ApiError::bad_request)?,
        None => SearchMode::Lexical,
    };
    let role: Option<Role> = match nonempty(p.role) {
        Some(r) => Some(
            serde_json::from_value(Value::String(r.clone()))
                .map_err(|_| ApiError::bad_request(format!("role={r:?}")))?,
        ),
        None => None,
    };
    let q = SearchQuery {
        text: p.q,
        k: p.k.unwrap_or(30).clamp(1, 200),
        mode,
        filter: SearchFilter {
            project: nonempty(p.project),
            agent: nonempty(p.agent),
            session: scoped_session(&st, nonempty(p.session))?,
            since: parse_time(p.since.as_deref(), false)?,
            until: parse_time(p.until.as_deref(), true)?,
            role,
            tool: nonempty(p.tool),
        },
    };
    let prefix = st.project.as_deref().map(crate::namespace::id_prefix);
    let hits = blocking(move || -> ApiResult<_> {
        with_index(&st, |ix| {
            ix.update().map_err(search_error)?;
            ix.search(&q).map_err(search_error)
        })
    })
    .await?;
    let hits = match prefix {
        Some(prefix) => crate::namespace::visible_hits(&prefix, hits),
        None => hits,
    };
    Ok(Json(json!({ "hits": hits })))
}

/// The `session` filter of a search: in the team view, inside the caller's
/// project (its stored-id prefix, so no other project's hit can match).
fn scoped_session(st: &Ui, session: Option<String>) -> ApiResult<Option<String>> {
    let Some(project) = &st.project else {
        return Ok(session);
    };
    let prefix = crate::namespace::id_prefix(project);
    match session {
        Some(s) if s.contains(crate::namespace::SEPARATOR) => Err(ApiError::bad_request(format!(
            "session {s:?} contains '{}'",
            crate::namespace::SEPARATOR
        ))),
        Some(s) => Ok(Some(format!("{prefix}{s}"))),
        None => Ok(Some(prefix)),
    }
}

/// Run `f` on the whole store's search index (opened on first use).
fn with_index<T>(st: &Ui, f: impl FnOnce(&mut SearchIndex) -> ApiResult<T>) -> ApiResult<T> {
    let mut slot = st.search.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(SearchIndex::for_store(st.shared.clone()).map_err(search_error)?);
    }
    let Some(ix) = slot.as_mut() else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "search index not open",
        ));
    };
    f(ix)
}

/// The query of `GET /api/blame`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BlameParams {
    path: String,
    /// A session whose workspace a relative `path` is resolved against.
    session: Option<String>,
}

/// `GET /api/blame?path&session`: every recorded edit of a file, newest
/// first ([`memoir::blame::file_history_indexed`]; the sessions found
/// through the search index, each read from its log).
pub(crate) async fn blame(
    Scoped(st): Scoped,
    params: Result<Query<BlameParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let p = query(params)?;
    if let Some(id) = &p.session {
        memoir::id::validate(id).map_err(ApiError::from)?;
    }
    let value = blocking(move || -> ApiResult<Value> {
        let m = manager(&st);
        let mut path = PathBuf::from(&p.path);
        if path.is_relative() {
            if let Some(id) = &p.session {
                path = m.read_session(id)?.meta.workspace.join(path);
            }
        }
        let prefix = st.project.as_deref().map(crate::namespace::id_prefix);
        let visible = |id: &str| match &prefix {
            Some(prefix) => id.strip_prefix(prefix.as_str()).map(str::to_string),
            None => Some(id.to_string()),
        };
        let history = with_index(&st, |ix| {
            memoir::blame::file_history_indexed(&m, ix, &path, visible).map_err(blame_error)
        })?;
        Ok(serde_json::to_value(history)?)
    })
    .await?;
    Ok(Json(value))
}

fn blame_error(e: memoir::blame::BlameError) -> ApiError {
    use memoir::blame::BlameError;
    match e {
        BlameError::Search(e) => search_error(e),
        other => ApiError::of_kind(other.kind(), other.to_string()),
    }
}

/// The query of `GET /api/usage`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageParams {
    by: Option<String>,
    agent: Option<String>,
    project: Option<String>,
    model: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

/// `GET /api/usage`: [`memoir::usage::report`] over the whole store;
/// `by=block` makes its rows the 5-hour billing blocks
/// ([`memoir::usage::blocks_report`]).
pub(crate) async fn usage(
    Scoped(st): Scoped,
    params: Result<Query<UsageParams>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let p = query(params)?;
    // `block`: 5-hour billing blocks (`memoir usage --blocks`), as rows.
    let blocks = p.by.as_deref().map(str::trim) == Some("block");
    let group_by = if blocks {
        ""
    } else {
        p.by.as_deref().unwrap_or("day")
    }
    .split(',')
    .filter(|s| !s.trim().is_empty())
    .map(|s| s.trim().parse::<GroupKey>())
    .collect::<Result<Vec<_>, _>>()
    .map_err(ApiError::from)?;
    let nonempty = |o: Option<String>| o.filter(|s| !s.trim().is_empty());
    let q = UsageQuery {
        project: nonempty(p.project).map(|w| usage::ProjectFilter::Workspace(PathBuf::from(w))),
        agent: nonempty(p.agent),
        model: nonempty(p.model),
        since: parse_time(p.since.as_deref(), false)?,
        until: parse_time(p.until.as_deref(), true)?,
        group_by,
        ..UsageQuery::default()
    };
    let value = blocking(move || {
        let prices = prices(&st)?;
        let report = usage::report(st.store.as_ref(), &q, prices)?;
        let mut value = serde_json::to_value(&report)?;
        if blocks {
            let found = usage::blocks_report(st.store.as_ref(), &q, prices, Utc::now())?;
            value["group_by"] = json!(["block"]);
            value["rows"] = block_rows(&found.blocks)?;
        }
        Ok::<_, memoir::Error>(value)
    })
    .await?;
    Ok(Json(value))
}

/// Billing blocks as usage rows: each keyed by its start (`block`, UTC
/// `YYYY-MM-DD HH:MM`), with its totals, end, models and whether it is
/// still running.
fn block_rows(blocks: &[usage::BillingBlock]) -> Result<Value, serde_json::Error> {
    blocks
        .iter()
        .map(|b| {
            let mut row = serde_json::to_value(&b.totals)?;
            row["group"] = json!({"block": b.start.format("%Y-%m-%d %H:%M").to_string()});
            row["start"] = json!(b.start);
            row["end"] = json!(b.end);
            row["models"] = json!(b.models);
            row["active"] = json!(b.active);
            Ok(row)
        })
        .collect::<Result<Vec<Value>, _>>()
        .map(Value::Array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoir::record::{ForkPoint, SourceRef};

    fn entry(id: &str, created: i64, parent: Option<&str>) -> IndexEntry {
        let t = memoir::transcript::Transcript::new(memoir::SessionMeta::new(id));
        let mut e = IndexEntry::from_transcript(&t);
        e.created_at = DateTime::from_timestamp(created, 0).unwrap_or_default();
        e.parent = parent.map(|p| ForkPoint {
            session: p.into(),
            seq: 1,
            messages: 1,
            parent_created_at: None,
        });
        e
    }

    #[test]
    fn pages_hold_whole_trees_and_page_over_roots_newest_first() {
        let mut sub = entry("sub", 5, None);
        let mut src = SourceRef {
            agent: "claude-code".into(),
            agent_version: None,
            session: None,
            path: None,
            extra: Default::default(),
        };
        src.extra.insert("parent_session".into(), json!("a"));
        sub.source = Some(src);
        let entries = vec![
            entry("a", 1, None),
            entry("b", 3, None),
            entry("a-fork", 4, Some("a")),
            entry("fork-of-fork", 6, Some("a-fork")),
            sub,
            entry("orphan", 2, Some("gone")),
        ];
        let page = page_of(
            &entries,
            &ListParams {
                limit: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((page.roots, page.sessions), (3, 6));
        let ids: Vec<(&str, usize)> = page.rows.iter().map(|r| (r.id.as_str(), r.depth)).collect();
        assert_eq!(ids, [("b", 0), ("orphan", 0)]);
        let page = page_of(
            &entries,
            &ListParams {
                offset: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        let ids: Vec<(&str, usize)> = page.rows.iter().map(|r| (r.id.as_str(), r.depth)).collect();
        assert_eq!(
            ids,
            [("a", 0), ("a-fork", 1), ("fork-of-fork", 2), ("sub", 1)]
        );
        assert_eq!(page.rows[3].relation, Some("subagent"));
        assert_eq!(page.rows[1].relation, Some("fork"));
    }

    #[test]
    fn filters_and_bad_parameters() {
        let entries = vec![entry("a", 86_400, None), entry("b", 3 * 86_400, None)];
        let page = page_of(
            &entries,
            &ListParams {
                since: Some("1970-01-03".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(page.rows.len(), 1);
        assert_eq!(page.rows[0].id, "b");
        let page = page_of(
            &entries,
            &ListParams {
                until: Some("1970-01-02".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(page.rows[0].id, "a", "until is inclusive of its day");
        for bad in [
            ListParams {
                sort: Some("size".into()),
                ..Default::default()
            },
            ListParams {
                dir: Some("up".into()),
                ..Default::default()
            },
            ListParams {
                since: Some("yesterday".into()),
                ..Default::default()
            },
        ] {
            assert!(page_of(&entries, &bad).is_err());
        }
    }

    #[test]
    fn long_blocks_are_cut_on_a_character_boundary() {
        let long = "é".repeat(BLOCK_PREVIEW_CHARS + 5);
        let v = slim_block(&Block::Text { text: long });
        assert_eq!(
            v["text"].as_str().unwrap().chars().count(),
            BLOCK_PREVIEW_CHARS
        );
        assert_eq!(v["full_chars"], json!(BLOCK_PREVIEW_CHARS + 5));
        let short = slim_block(&Block::Text { text: "hi".into() });
        assert_eq!(short["full_chars"], Value::Null);
    }
}
