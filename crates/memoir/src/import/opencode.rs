//! OpenCode's SQLite database (`opencode.db`: tables `session`, `message`,
//! `part`, JSON in their `data` columns) into planned memoir sessions.
//!
//! The database is never written: with a non-empty write-ahead log, the
//! database and its log are copied to a private temporary directory and the
//! copy is read (so recent, uncheckpointed rows are seen); otherwise it is
//! opened read-only with `immutable=1`. Each OpenCode session becomes one
//! memoir session (sub-sessions name their parent); a message's parts become
//! blocks (text, reasoning as thinking, tool calls with their results in a
//! tool message right after, images from data URLs); step and snapshot parts
//! are kept in the message's source trace; usage comes from the message's
//! `tokens` (reasoning counted inside the output).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Map, Value};

use super::{make_id, Agent, ImportError, Parsed, Planned, Skipped};
use crate::message::{Block, Message, Role, Usage, SOURCE_KEY};
use crate::record::{Record, SessionMeta, SourceRef};

const AGENT: Agent = Agent::OpenCode;

pub(crate) fn sql_err(path: &Path, e: rusqlite::Error) -> ImportError {
    ImportError::Unsupported {
        path: path.to_path_buf(),
        reason: format!("SQLite: {e}"),
    }
}

/// The write-ahead log beside a database.
pub fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// Open `db` for reading without ever writing to it (see the module docs;
/// the Codex importer opens `thread_history_*.sqlite` the same way).
pub(crate) fn open(db: &Path) -> Result<(Connection, Option<tempfile::TempDir>), ImportError> {
    let wal = wal_of(db);
    let has_wal = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
    if has_wal {
        let tmp = tempfile::tempdir().map_err(|e| ImportError::io("create temp dir for", db, e))?;
        let copy = tmp
            .path()
            .join(db.file_name().unwrap_or(std::ffi::OsStr::new("copy.db")));
        std::fs::copy(db, &copy).map_err(|e| ImportError::io("copy", db, e))?;
        std::fs::copy(&wal, wal_of(&copy)).map_err(|e| ImportError::io("copy", &wal, e))?;
        let conn = Connection::open_with_flags(
            &copy,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_err(db, e))?;
        return Ok((conn, Some(tmp)));
    }
    let uri = format!("file:{}?mode=ro&immutable=1", db.display());
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql_err(db, e))?;
    Ok((conn, None))
}

pub(crate) fn columns(conn: &Connection, table: &str) -> Vec<String> {
    let Ok(mut stmt) = conn.prepare(&format!("PRAGMA table_info({table})")) else {
        return Vec::new();
    };
    stmt.query_map([], |r| r.get::<_, String>(1))
        .map(|rows| rows.flatten().collect())
        .unwrap_or_default()
}

fn ms_time(ms: Option<i64>) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_millis(ms?)
}

/// Parse the whole database.
pub fn parse(db: &Path) -> Result<Parsed, ImportError> {
    let (conn, _tmp) = open(db)?;
    let mut parsed = Parsed {
        consumed: std::fs::metadata(db).map_or(0, |m| m.len()),
        ..Parsed::default()
    };
    let scols = columns(&conn, "session");
    if scols.is_empty() {
        return Err(ImportError::Unsupported {
            path: db.to_path_buf(),
            reason: "no `session` table: not an OpenCode database".into(),
        });
    }
    let has = |c: &str| scols.iter().any(|x| x == c);
    let pick = |c: &str| {
        if has(c) {
            c.to_string()
        } else {
            "NULL".to_string()
        }
    };
    let sql = format!(
        "SELECT id, {}, {}, {}, {}, {}, {} FROM session ORDER BY {}, id",
        pick("title"),
        pick("directory"),
        pick("parent_id"),
        pick("version"),
        pick("time_created"),
        pick("project_id"),
        if has("time_created") {
            "time_created"
        } else {
            "id"
        }
    );
    struct Row {
        id: String,
        title: Option<String>,
        directory: Option<String>,
        parent: Option<String>,
        version: Option<String>,
        created: Option<i64>,
        project: Option<String>,
    }
    let mut stmt = conn.prepare(&sql).map_err(|e| sql_err(db, e))?;
    // Rows a damaged database could not give are counted and reported,
    // never dropped silently.
    let mut unread = Unread::default();
    let sessions: Vec<Row> = readable_rows(
        stmt.query_map([], |r| {
            Ok(Row {
                id: r.get(0)?,
                title: r.get(1).ok(),
                directory: r.get(2).ok(),
                parent: r.get(3).ok(),
                version: r.get(4).ok(),
                created: r.get(5).ok(),
                project: r.get(6).ok(),
            })
        })
        .map_err(|e| sql_err(db, e))?,
        &mut unread,
    );
    if let Some(e) = unread.take() {
        parsed.skipped.push(Skipped {
            file: db.to_path_buf(),
            line: 0,
            reason: format!("sessions could not be read: {e}"),
        });
    }

    // Parts by message, in order.
    let mut parts: HashMap<String, Vec<Value>> = HashMap::new();
    let mut row = 0u64;
    {
        let mut stmt = conn
            .prepare("SELECT message_id, data FROM part ORDER BY message_id, id")
            .map_err(|e| sql_err(db, e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| sql_err(db, e))?;
        for r in readable_rows(rows, &mut unread) {
            row += 1;
            match serde_json::from_str::<Value>(&r.1) {
                Ok(v) => parts.entry(r.0).or_default().push(v),
                Err(e) => parsed.skipped.push(Skipped {
                    file: db.to_path_buf(),
                    line: row,
                    reason: format!("part of message {}: bad JSON: {e}", r.0),
                }),
            }
        }
    }
    if let Some(e) = unread.take() {
        parsed.skipped.push(Skipped {
            file: db.to_path_buf(),
            line: 0,
            reason: format!("message parts could not be read: {e}"),
        });
    }
    let mut messages_read = 0usize;
    let mut sessions_unread = 0usize;
    let mut first_error = None;
    let mut stmt = conn
        .prepare("SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
        .map_err(|e| sql_err(db, e))?;
    for s in sessions {
        let rows: Vec<(String, Option<i64>, String)> =
            match stmt.query_map([&s.id], |r| Ok((r.get(0)?, r.get(1).ok(), r.get(2)?))) {
                Ok(rows) => readable_rows(rows, &mut unread),
                Err(e) => {
                    unread.note(e);
                    Vec::new()
                }
            };
        messages_read += rows.len();
        if let Some(e) = unread.take() {
            sessions_unread += 1;
            parsed.skipped.push(Skipped {
                file: db.to_path_buf(),
                line: 0,
                reason: format!(
                    "session {}: messages could not be read ({} read): {e}",
                    s.id,
                    rows.len()
                ),
            });
            first_error.get_or_insert(e);
        }
        let mut records = Vec::new();
        let mut model = String::new();
        let mut provider = String::new();
        for (n, (mid, created, data)) in rows.into_iter().enumerate() {
            let data: Map<String, Value> = match serde_json::from_str(&data) {
                Ok(Value::Object(o)) => o,
                _ => {
                    parsed.skipped.push(Skipped {
                        file: db.to_path_buf(),
                        line: n as u64 + 1,
                        reason: format!("message {mid} of session {}: bad JSON", s.id),
                    });
                    continue;
                }
            };
            let msg_parts = parts.remove(&mid).unwrap_or_default();
            if model.is_empty() {
                if let Some(m) = data.get("modelID").and_then(Value::as_str) {
                    model = m.to_string();
                    provider = data
                        .get("providerID")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into();
                }
            }
            convert(&mid, created, data, msg_parts, &mut records);
        }
        let mut meta = SessionMeta::new(make_id(AGENT, &[&s.id]));
        meta.created_at = ms_time(s.created).unwrap_or_else(chrono::Utc::now);
        meta.workspace = s.directory.clone().map(Into::into).unwrap_or_default();
        meta.title = s
            .title
            .clone()
            .or_else(|| super::first_user_title(&records));
        meta.model = model;
        meta.provider = provider;
        meta.kind = Some("imported".into());
        let mut extra = Map::new();
        if let Some(p) = &s.project {
            extra.insert("project_id".into(), json!(p));
        }
        if let Some(p) = s.parent.as_deref().filter(|p| !p.is_empty()) {
            extra.insert("kind".into(), json!("subagent"));
            extra.insert("parent_session".into(), json!(make_id(AGENT, &[p])));
        }
        meta.source = Some(SourceRef {
            agent: AGENT.as_str().into(),
            agent_version: s.version.clone(),
            session: Some(s.id.clone()),
            path: Some(std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf())),
            extra,
        });
        parsed.sessions.push(Planned {
            key: format!("session:{}", s.id),
            meta,
            fork: None,
            records,
        });
    }
    if messages_read == 0 && first_error.is_some() {
        // Nothing could be read: no empty sessions; what failed is in
        // `skipped`, and the import reports the source as failed.
        parsed.notes.push(Skipped {
            file: db.to_path_buf(),
            line: 0,
            reason: format!(
                "damaged database: no message of its {} sessions could be read ({sessions_unread} failed)",
                parsed.sessions.len()
            ),
        });
        parsed.sessions.clear();
    }
    Ok(parsed)
}

/// Row read errors of one query: how many, and the first.
#[derive(Default)]
struct Unread {
    count: usize,
    first: Option<String>,
}

impl Unread {
    fn note(&mut self, e: rusqlite::Error) {
        self.count += 1;
        self.first.get_or_insert_with(|| e.to_string());
    }

    /// A description of the errors noted since the last call, if any.
    fn take(&mut self) -> Option<String> {
        let first = self.first.take()?;
        let count = std::mem::take(&mut self.count);
        Some(if count > 1 {
            format!("{count} errors, the first: {first}")
        } else {
            first
        })
    }
}

/// The rows a query gives, noting those that fail. A failed step (a damaged
/// page) ends the query: SQLite cannot go past it.
fn readable_rows<T>(
    rows: impl Iterator<Item = rusqlite::Result<T>>,
    unread: &mut Unread,
) -> Vec<T> {
    let mut out = Vec::new();
    for r in rows {
        match r {
            Ok(v) => out.push(v),
            Err(e @ rusqlite::Error::SqliteFailure(..)) => {
                unread.note(e);
                break;
            }
            Err(e) => unread.note(e),
        }
    }
    out
}

fn convert(
    mid: &str,
    created: Option<i64>,
    data: Map<String, Value>,
    parts: Vec<Value>,
    records: &mut Vec<Record>,
) {
    let role = match data.get("role").and_then(Value::as_str) {
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        _ => Role::User,
    };
    let mut blocks = Vec::new();
    let mut results = Vec::new();
    let mut other = Vec::new();
    for p in parts {
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match p.get("type").and_then(Value::as_str) {
            Some("text") => blocks.push(Block::Text { text: s("text") }),
            Some("reasoning") => blocks.push(Block::Thinking {
                text: s("text"),
                signature: None,
            }),
            Some("tool") => {
                let state = p.get("state").cloned().unwrap_or(Value::Null);
                let id = s("callID");
                blocks.push(Block::ToolUse {
                    id: id.clone(),
                    name: s("tool"),
                    input: state.get("input").cloned().unwrap_or(Value::Null),
                });
                let status = state.get("status").and_then(Value::as_str).unwrap_or("");
                if matches!(status, "completed" | "error") {
                    let content = state
                        .get("output")
                        .or_else(|| state.get("error"))
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string())
                        })
                        .unwrap_or_default();
                    results.push(Block::ToolResult {
                        tool_use_id: id,
                        content,
                        is_error: status == "error",
                    });
                }
            }
            Some("file") => {
                let url = s("url");
                match url
                    .strip_prefix("data:")
                    .and_then(|r| r.split_once(','))
                    .and_then(|(h, d)| {
                        h.strip_suffix(";base64")
                            .map(|m| (m.to_string(), d.to_string()))
                    }) {
                    Some((media_type, data)) if media_type.starts_with("image/") => {
                        blocks.push(Block::Image { media_type, data })
                    }
                    _ => blocks.push(Block::Unknown(p.clone())),
                }
            }
            _ => other.push(p),
        }
    }
    let mut m = Message::new(role, blocks);
    m.timestamp = ms_time(
        data.get("time")
            .and_then(|t| t.get("created"))
            .and_then(Value::as_i64)
            .or(created),
    );
    if role == Role::Assistant {
        m.model = data
            .get("modelID")
            .and_then(Value::as_str)
            .map(str::to_string);
        m.provider_id = Some(mid.to_string());
        if let Some(t) = data.get("tokens") {
            let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
            let reasoning = n(t.get("reasoning"));
            m.usage = Some(Usage {
                input_tokens: n(t.get("input")),
                output_tokens: n(t.get("output")) + reasoning,
                cache_read_input_tokens: n(t.get("cache").and_then(|c| c.get("read"))),
                cache_creation_input_tokens: n(t.get("cache").and_then(|c| c.get("write"))),
                reasoning_tokens: reasoning,
                ..Usage::default()
            });
        }
    }
    m.extra.insert(
        SOURCE_KEY.into(),
        json!({"uuid": mid, "entry": data, "parts": other}),
    );
    records.push(Record::Message(m));
    if !results.is_empty() {
        let mut r = Message::new(Role::Tool, results);
        r.timestamp = ms_time(created);
        r.extra.insert(
            SOURCE_KEY.into(),
            json!({"uuid": mid, "tool_results": true}),
        );
        records.push(Record::Message(r));
    }
}
