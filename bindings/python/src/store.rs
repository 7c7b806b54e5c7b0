//! `memoir.Store`: one store (a directory, a `memoir serve` server, memory;
//! PostgreSQL when built with the `postgres` feature) and the session
//! operations of the library's [`SessionManager`] on it, addressed by
//! session id. Every call releases the GIL while the library works.
//!
//! A manager is made per call (it is a few pointers): the store object is
//! shared, so several Python threads can drive different sessions at once,
//! and appends to one session never interleave inside a batch (the store
//! makes each append atomic; `expected_seq` detects a lost race).

use std::sync::Arc;

use memoir::client::wire::WireIssue;
use memoir::manager::{fork as fork_rules, LeasePolicy, ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::memory::MemStore;
use memoir::store::{Appended, Durability, LoadReport, LogStore};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::{json, Map, Value};

use crate::convert::{from_py, to_py};
use crate::errors::{exception, from_manager, from_store, invalid};

/// Header fields a caller may not set through `create(meta=...)`.
const RESERVED_HEADER_FIELDS: &[&str] = &["id", "parent", "format"];

/// A memoir store and the sessions in it.
#[pyclass(frozen, module = "memoir._memoir")]
pub struct Store {
    store: Arc<dyn LogStore>,
    location: String,
}

/// `(first_seq, last_seq)` of an append, `None` when nothing was written.
type SeqRange = Option<(u64, u64)>;

fn range(appended: Option<Appended>) -> SeqRange {
    appended.map(|a| (a.first_seq, a.last_seq))
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Fsync => "fsync",
        Durability::Flush => "flush",
        Durability::None => "none",
    }
}

/// The store a location names.
fn open_store(
    location: &str,
    token: Option<String>,
    durability: Durability,
) -> PyResult<Arc<dyn LogStore>> {
    if location.starts_with("http://") || location.starts_with("https://") {
        let client = memoir::client::Client::new(location, token).map_err(from_store)?;
        return Ok(Arc::new(memoir::client::RemoteStore::new(client)));
    }
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        return open_postgres(location, durability);
    }
    if token.is_some() {
        return Err(invalid("a token is only used with an http(s):// store"));
    }
    let path = std::path::Path::new(location);
    match std::fs::metadata(path) {
        Ok(m) if !m.is_dir() => {
            return Err(invalid(format!("{location} is not a directory")));
        }
        _ => {}
    }
    Ok(Arc::new(FileStore::new(path, durability)))
}

#[cfg(feature = "postgres")]
fn open_postgres(location: &str, durability: Durability) -> PyResult<Arc<dyn LogStore>> {
    use memoir::store::postgres::{PgOptions, PgStore};
    let options = PgOptions {
        durability,
        ..PgOptions::default()
    };
    Ok(Arc::new(
        PgStore::connect(location, options).map_err(from_store)?,
    ))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_location: &str, _durability: Durability) -> PyResult<Arc<dyn LogStore>> {
    Err(exception(
        memoir::error::ErrorKind::Unsupported,
        "this build of memoir has no PostgreSQL support (rebuild the extension with the `postgres` feature)".into(),
    ))
}

/// A header for a new session: `id` (or a new one), `title`, and the
/// caller's extra header fields.
fn new_header(
    id: Option<String>,
    title: Option<String>,
    meta: Option<Map<String, Value>>,
) -> PyResult<SessionMeta> {
    let mut header = SessionMeta::new(id.unwrap_or_else(memoir::id::new_id));
    header.title = title;
    let Some(extra) = meta else {
        return Ok(header);
    };
    if let Some(key) = RESERVED_HEADER_FIELDS
        .iter()
        .find(|k| extra.contains_key(**k))
    {
        return Err(invalid(format!(
            "meta field {key:?} cannot be set (use the id argument; forks are made with fork())"
        )));
    }
    let mut obj = match serde_json::to_value(&header) {
        Ok(Value::Object(obj)) => obj,
        _ => return Err(invalid("cannot build the session header")),
    };
    for (k, v) in extra {
        obj.insert(k, v);
    }
    serde_json::from_value(Value::Object(obj)).map_err(|e| invalid(format!("meta: {e}")))
}

/// A load report as a JSON object.
fn report_json(report: &LoadReport) -> Value {
    json!({
        "clean": report.is_clean(),
        "issues": report.issues.iter().map(WireIssue::from).collect::<Vec<_>>(),
        "blob_issues": report.blobs.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
    })
}

fn records_from(list: &Bound<'_, PyAny>) -> PyResult<Vec<Record>> {
    let objects: Vec<Map<String, Value>> = from_py(list, "records")?;
    objects
        .into_iter()
        .map(|o| Record::from_object(o).map_err(|e| invalid(format!("record: {e}"))))
        .collect()
}

impl Store {
    fn manager(&self) -> SessionManager {
        let options = ManagerOptions {
            repair_on_switch: false,
            lease: LeasePolicy::Off,
            durability: self.store.durability(),
            ..ManagerOptions::default()
        };
        SessionManager::with_store(self.store.clone(), options)
    }

    fn append_checked(
        &self,
        py: Python<'_>,
        session: &str,
        records: Vec<Record>,
        expected_seq: Option<u64>,
    ) -> PyResult<SeqRange> {
        if records.iter().any(|r| matches!(r, Record::Meta(_))) {
            return Err(invalid(
                "a header (meta) record can only be written by create()",
            ));
        }
        let m = self.manager();
        let store = self.store.clone();
        let appended = py
            .detach(|| {
                // A reference must name a blob a session of this store holds.
                memoir::transcript::grants::check_written(store.as_ref(), &records)?;
                m.append_records_expecting(session, &records, expected_seq)
            })
            .map_err(from_manager)?;
        Ok(range(appended))
    }
}

#[pymethods]
impl Store {
    /// Open a store: a directory (the file store; created on first write),
    /// `http(s)://host:port` (a `memoir serve` server, with its bearer
    /// `token`), or `postgres://...` (only when built with PostgreSQL).
    /// `durability` is `fsync` (default: every append survives power loss),
    /// `flush` or `none`; a server applies its own.
    #[staticmethod]
    #[pyo3(signature = (location, token=None, durability="fsync"))]
    fn open(
        py: Python<'_>,
        location: String,
        token: Option<String>,
        durability: &str,
    ) -> PyResult<Store> {
        let durability: Durability = durability.parse().map_err(from_store)?;
        let store = py.detach(|| open_store(&location, token, durability))?;
        Ok(Store { store, location })
    }

    /// A store in memory (lost when the object goes): for tests.
    #[staticmethod]
    fn memory() -> Store {
        Store {
            store: Arc::new(MemStore::new()),
            location: "memory:".into(),
        }
    }

    /// What the store was opened on.
    #[getter]
    fn location(&self) -> String {
        self.location.clone()
    }

    /// The durability appends are acknowledged at: `fsync`, `flush` or `none`.
    #[getter]
    fn durability(&self) -> &'static str {
        durability_name(self.store.durability())
    }

    fn __repr__(&self) -> String {
        format!("Store({:?})", self.location)
    }

    /// Create a session and return its id: `id` (else a new time-ordered
    /// one), `title`, and `meta`, extra header fields kept verbatim (e.g.
    /// `{"kind": "chat", "source": {...}, "my_app": {...}}`).
    /// `ConflictError` when the id is taken, by a live session or by one in
    /// the trash (restore or purge it first).
    #[pyo3(signature = (title=None, meta=None, id=None))]
    fn create(
        &self,
        py: Python<'_>,
        title: Option<String>,
        meta: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
    ) -> PyResult<String> {
        let extra: Option<Map<String, Value>> = meta.map(|m| from_py(m, "meta")).transpose()?;
        let header = new_header(id, title, extra)?;
        let m = self.manager();
        let id = header.id.clone();
        let store = self.store.clone();
        py.detach(|| {
            // As the manager's own creations: an id held by a deleted
            // session is refused until that one is restored or purged.
            if memoir::manager::trash::contains(store.as_ref(), &header.id)? {
                return Err(memoir::manager::ManagerError::InTrash(header.id.clone()));
            }
            m.create_with_header(header)
        })
        .map_err(from_manager)?;
        Ok(id)
    }

    /// Append messages (dicts in memoir's message model:
    /// `{"role": "user", "content": [{"type": "text", "text": "hi"}]}`) as
    /// one atomic batch. Returns `(first_seq, last_seq)`, or `None` for an
    /// empty list. With `expected_seq`, the batch is written only if its
    /// first record gets that seq (`ConflictError` otherwise).
    #[pyo3(signature = (session, messages, expected_seq=None))]
    fn append(
        &self,
        py: Python<'_>,
        session: &str,
        messages: &Bound<'_, PyAny>,
        expected_seq: Option<u64>,
    ) -> PyResult<SeqRange> {
        let messages: Vec<Message> = from_py(messages, "messages")?;
        let records = messages.into_iter().map(Record::Message).collect();
        self.append_checked(py, session, records, expected_seq)
    }

    /// Append raw records (dicts with a `"record"` kind: `message`,
    /// `title`, `checkpoint`..., or an application's own kind, stored
    /// verbatim) as one atomic batch; see `append` for the result and
    /// `expected_seq`.
    #[pyo3(signature = (session, records, expected_seq=None))]
    fn append_records(
        &self,
        py: Python<'_>,
        session: &str,
        records: &Bound<'_, PyAny>,
        expected_seq: Option<u64>,
    ) -> PyResult<SeqRange> {
        let records = records_from(records)?;
        self.append_checked(py, session, records, expected_seq)
    }

    /// Load a session: `(messages, report)`. A fork's inherited prefix is
    /// stitched in; the report has `id`, `meta` (the header), `title`,
    /// `message_seqs`, `inherited`, `last_seq`, `checkpoint`, `usage`,
    /// `turns`, `taint`, and what did not verify: `clean`, `issues`,
    /// `blob_issues` (a torn or corrupt line is skipped and reported, never
    /// fatal).
    fn load<'py>(
        &self,
        py: Python<'py>,
        session: &str,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let m = self.manager();
        let t = py
            .detach(|| m.read_session(session))
            .map_err(from_manager)?;
        let mut report = report_json(&t.report);
        if let Value::Object(obj) = &mut report {
            obj.insert("id".into(), json!(t.meta.id));
            obj.insert(
                "title".into(),
                json!(t.title.clone().or_else(|| t.meta.title.clone())),
            );
            obj.insert("meta".into(), json!(t.meta));
            obj.insert("message_seqs".into(), json!(t.message_seqs));
            obj.insert("inherited".into(), json!(t.inherited));
            obj.insert("last_seq".into(), json!(t.last_seq));
            obj.insert(
                "checkpoint".into(),
                t.checkpoint.clone().unwrap_or(Value::Null),
            );
            obj.insert("usage".into(), json!(t.usage));
            obj.insert("turns".into(), json!(t.turns));
            obj.insert("taint".into(), json!(t.taint));
        }
        Ok((to_py(py, &t.messages)?, to_py(py, &report)?))
    }

    /// The session's own verified records (not a fork parent's), each a
    /// dict with its `"record"` kind and `"seq"`, optionally only those of
    /// `kinds`: `(records, report)`; the report has `header`, `last_seq`,
    /// `clean`, `issues`, `blob_issues`.
    #[pyo3(signature = (session, kinds=None))]
    fn records<'py>(
        &self,
        py: Python<'py>,
        session: &str,
        kinds: Option<Vec<String>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let m = self.manager();
        let store = self.store.clone();
        let (records, mut report) = py
            .detach(|| -> Result<_, memoir::manager::ManagerError> {
                let raw = m.read_raw(session)?;
                let raw = memoir::transcript::blobs::resolve_raw(store.as_ref(), raw);
                let mut out = Vec::with_capacity(raw.records.len());
                for r in &raw.records {
                    if kinds
                        .as_ref()
                        .is_some_and(|k| !k.iter().any(|k| k == r.record.kind()))
                    {
                        continue;
                    }
                    let mut obj = r.record.to_object().map_err(memoir::Error::from)?;
                    obj.insert("seq".into(), json!(r.seq));
                    out.push(Value::Object(obj));
                }
                let mut report = report_json(&raw.report);
                if let Value::Object(obj) = &mut report {
                    obj.insert("header".into(), json!(raw.header));
                    obj.insert("last_seq".into(), json!(raw.last_seq));
                }
                Ok((out, report))
            })
            .map_err(from_manager)?;
        if let Value::Object(obj) = &mut report {
            obj.insert("records".into(), json!(records.len()));
        }
        let list = PyList::empty(py);
        for r in &records {
            list.append(to_py(py, r)?)?;
        }
        Ok((list.into_any(), to_py(py, &report)?))
    }

    /// The session's header as a dict (`NotFoundError` when there is none).
    fn header<'py>(&self, py: Python<'py>, session: &str) -> PyResult<Bound<'py, PyAny>> {
        memoir::id::validate(session).map_err(from_store)?;
        let store = self.store.clone();
        let meta = py
            .detach(|| store.read_header(session))
            .map_err(from_store)?;
        match meta {
            Some(meta) => to_py(py, &meta),
            None => Err(from_store(memoir::Error::NotFound(session.to_string()))),
        }
    }

    /// Fork a session by reference and return the child's id. The cut is
    /// `at_seq` (the record seq to keep through) or `messages` (how many
    /// messages to keep), else the whole session; it moves back so no tool
    /// call is separated from its results. `id` and `title` name the child.
    #[pyo3(signature = (session, at_seq=None, messages=None, id=None, title=None))]
    fn fork(
        &self,
        py: Python<'_>,
        session: &str,
        at_seq: Option<u64>,
        messages: Option<usize>,
        id: Option<String>,
        title: Option<String>,
    ) -> PyResult<String> {
        if at_seq.is_some() && messages.is_some() {
            return Err(invalid("give at_seq or messages, not both"));
        }
        let mut m = self.manager();
        let forked = py
            .detach(|| -> Result<_, memoir::manager::ManagerError> {
                let upto = match at_seq {
                    Some(seq) => Some(fork_rules::messages_through_seq(
                        &m.read_session(session)?,
                        seq,
                    )?),
                    None => messages,
                };
                m.fork_session_as(session, upto, id, title)
            })
            .map_err(from_manager)?;
        Ok(forked.id)
    }

    /// Fork the session *as it was* at record `at_seq` (its current end
    /// when `None`): later records, rewrites included, are ignored, so this
    /// reaches a state a pop, clear or compaction replaced (`revisions`).
    /// By reference (nothing copied); `id`, `title` and `source` (the
    /// header's `{agent, session, ...}`) name the child. Returns its id.
    #[pyo3(signature = (session, at_seq=None, id=None, title=None, source=None))]
    fn fork_state(
        &self,
        py: Python<'_>,
        session: &str,
        at_seq: Option<u64>,
        id: Option<String>,
        title: Option<String>,
        source: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let source = source.map(|s| from_py(s, "source")).transpose()?;
        let target = memoir::manager::ForkTarget { id, title, source };
        let mut m = self.manager();
        let forked = py
            .detach(|| m.fork_session_at_seq(session, at_seq, target))
            .map_err(from_manager)?;
        Ok(forked.id)
    }

    /// The states the session's own rewrites replaced, oldest first: dicts
    /// `{rewrite_seq, seq, messages, after}` (`fork_state(session, seq)`
    /// brings one back).
    fn revisions<'py>(&self, py: Python<'py>, session: &str) -> PyResult<Bound<'py, PyAny>> {
        let mut m = self.manager();
        let revisions = py.detach(|| m.revisions(session)).map_err(from_manager)?;
        to_py(py, &revisions)
    }

    /// Replace the session's current messages with `messages` (a `rewrite`
    /// record: history is kept in the log, forks of earlier states stay
    /// valid). Returns `(first_seq, last_seq)`.
    #[pyo3(signature = (session, messages, expected_seq=None))]
    fn rewrite(
        &self,
        py: Python<'_>,
        session: &str,
        messages: &Bound<'_, PyAny>,
        expected_seq: Option<u64>,
    ) -> PyResult<SeqRange> {
        let messages: Vec<Message> = from_py(messages, "messages")?;
        self.append_checked(
            py,
            session,
            vec![Record::Rewrite { messages }],
            expected_seq,
        )
    }

    /// Record an opaque checkpoint value (any JSON value; `None` clears it;
    /// the last one wins and comes back in `load()`'s report). Returns its seq.
    #[pyo3(signature = (session, value, expected_seq=None))]
    fn checkpoint(
        &self,
        py: Python<'_>,
        session: &str,
        value: &Bound<'_, PyAny>,
        expected_seq: Option<u64>,
    ) -> PyResult<u64> {
        let value: Value = from_py(value, "value")?;
        let r = self.append_checked(
            py,
            session,
            vec![Record::Checkpoint { value }],
            expected_seq,
        )?;
        Ok(r.map_or(0, |(_, last)| last))
    }

    /// Rename a session (a `title` record). Returns its seq.
    fn rename(&self, py: Python<'_>, session: &str, title: String) -> PyResult<u64> {
        let r = self.append_checked(py, session, vec![Record::Title { title }], None)?;
        Ok(r.map_or(0, |(_, last)| last))
    }

    /// Every live session's index entry (newest activity first): `id`,
    /// `title`, `created_at`, `last_activity`, `messages`, `inherited`,
    /// `estimated_tokens`, `usage`, `parent`, `status`... With `trash=True`,
    /// the deleted sessions instead (each with `deleted_at`).
    #[pyo3(signature = (trash=false))]
    fn list<'py>(&self, py: Python<'py>, trash: bool) -> PyResult<Bound<'py, PyAny>> {
        let m = self.manager();
        let entries: Vec<Value> = py
            .detach(|| -> Result<_, memoir::manager::ManagerError> {
                if trash {
                    return Ok(m
                        .list_trash()?
                        .into_iter()
                        .map(|t| {
                            let mut v = json!(t.entry);
                            if let Value::Object(o) = &mut v {
                                o.insert("deleted_at".into(), json!(t.deleted_at));
                            }
                            v
                        })
                        .collect());
                }
                Ok(m.list_sessions()?.into_iter().map(|e| json!(e)).collect())
            })
            .map_err(from_manager)?;
        to_py(py, &entries)
    }

    /// The full id of the one live session whose id starts with `prefix`
    /// (`NotFoundError` for none, `InvalidInputError` when ambiguous).
    fn find(&self, py: Python<'_>, prefix: &str) -> PyResult<String> {
        let m = self.manager();
        py.detach(|| m.resolve(prefix)).map_err(from_manager)
    }

    /// Move a session to the trash (`restore` undoes it; forks of it stay
    /// readable). Returns False when there was no such live session.
    fn delete(&self, py: Python<'_>, session: &str) -> PyResult<bool> {
        let mut m = self.manager();
        py.detach(|| m.delete_session(session))
            .map_err(from_manager)
    }

    /// Bring a deleted session back; returns its index entry.
    fn restore<'py>(&self, py: Python<'py>, session: &str) -> PyResult<Bound<'py, PyAny>> {
        let mut m = self.manager();
        let entry = py
            .detach(|| m.restore_session(session))
            .map_err(from_manager)?;
        to_py(py, &entry)
    }

    /// Erase a deleted session for good. `ConflictError` when surviving
    /// forks still need its prefix; `NotFoundError` when it is not in the trash.
    fn purge(&self, py: Python<'_>, session: &str) -> PyResult<()> {
        memoir::id::validate(session).map_err(from_store)?;
        let mut m = self.manager();
        let only = vec![session.to_string()];
        let report = py
            .detach(|| -> Result<_, memoir::manager::ManagerError> {
                m.resolve_trashed(session)?;
                m.purge_trash(Some(&only))
            })
            .map_err(from_manager)?;
        if let Some((id, by)) = report.kept.first() {
            return Err(exception(
                memoir::error::ErrorKind::Conflict,
                format!(
                    "session {id} is kept: forks still need its prefix ({})",
                    by.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Recall: the turns of the session most relevant to `query`, as a
    /// graft block of at most `token_budget` estimated tokens (hybrid
    /// vector + BM25 retrieval over a view rebuilt from the log with the
    /// offline hash embedder). Returns `{"text", "tokens", "items",
    /// "truncated", "unresolved"}`.
    #[pyo3(signature = (session, query, token_budget=1000))]
    fn recall<'py>(
        &self,
        py: Python<'py>,
        session: &str,
        query: &str,
        token_budget: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        use memoir::embed::hash::HashEmbedder;
        use memoir::view::{RebuildOptions, SessionView};
        if query.trim().is_empty() {
            return Err(invalid("query is empty"));
        }
        let m = self.manager();
        let store = self.store.clone();
        let block = py.detach(|| -> Result<_, PyErr> {
            m.read_raw(session).map_err(from_manager)?;
            let embedder = HashEmbedder::new(RECALL_DIMS);
            let options = RebuildOptions::default();
            let (view, _, _) =
                SessionView::rebuild_session(store.as_ref(), session, &embedder, None, &options)
                    .map_err(|e| {
                        exception(
                            memoir::error::ErrorKind::Io,
                            format!("recall: {e}"),
                        )
                    })?;
            view.graft_budget(&embedder, query, token_budget, None)
                .map_err(|e| {
                    exception(
                        memoir::error::ErrorKind::Io,
                        format!("recall: {e}"),
                    )
                })
        })?;
        to_py(py, &block)
    }

    /// Search every session of a directory store (the persistent SQLite
    /// FTS5 index under `<dir>/search/`, caught up first unless
    /// `update=False`): hybrid BM25 + hash-embedder ranking by default
    /// (`mode` `lexical`, `semantic` or `hybrid`), at most `k` hits, each
    /// `{session, title, agent, project, time, seq, role, tools, score,
    /// snippet}`; `session`, `agent` and `project` filter. Other stores:
    /// `UnsupportedError`.
    #[pyo3(signature = (query, k=10, mode="hybrid", session=None, agent=None, project=None, update=true))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: usize,
        mode: &str,
        session: Option<String>,
        agent: Option<String>,
        project: Option<String>,
        update: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        use memoir::search::{SearchFilter, SearchIndex, SearchMode, SearchQuery, INDEX_DIR};
        let mode: SearchMode = mode.parse().map_err(invalid)?;
        // A directory store's index directory is the store's own directory.
        let Some(dir) = self.store.index_dir().map(std::path::Path::to_path_buf) else {
            return Err(exception(
                memoir::error::ErrorKind::Unsupported,
                "search needs a directory store (its index lives beside the transcripts)".into(),
            ));
        };
        let store = self.store.clone();
        let q = SearchQuery {
            text: query,
            k,
            mode,
            filter: SearchFilter {
                session,
                agent,
                project,
                ..SearchFilter::default()
            },
        };
        let hits = py
            .detach(|| -> Result<_, memoir::search::SearchError> {
                let mut ix = SearchIndex::open_store(store, &dir.join(INDEX_DIR))?;
                if update {
                    ix.update()?;
                }
                ix.search(&q)
            })
            .map_err(|e| exception(e.kind(), memoir::error::report(&e)))?;
        to_py(py, &hits)
    }
}

/// Width of the hashed-feature vectors recall uses (as `memoir serve`'s search).
const RECALL_DIMS: usize = 256;
