//! `memoir serve`: one shared memory for many agent hosts.
//!
//! This crate owns the HTTP side of issue 6: the axum [`router`] (a JSON API
//! over any [`LogStore`], the file store or PostgreSQL), bearer-token
//! authentication scoped to projects ([`TokenGrant`]), request limits, error
//! mapping, the OpenAPI document, and [`serve`] with graceful shutdown. The
//! CLI's `memoir serve` is a thin wrapper; the blocking client and the JSON
//! bodies live in `memoir::client`.
//!
//! Projects: a session belongs to the project named by the `project` field of
//! its header, set at creation from the token. A token only ever sees its own
//! project's sessions; another project's session answers 404, exactly like a
//! missing one. Store calls are blocking and run on tokio's blocking pool;
//! graceful shutdown stops accepting connections and waits for every request
//! in flight (so an append that was started is finished and answered).
//!
//! The API is documented in `docs/SERVER.md` and served at `/openapi.json`.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use memoir::client::wire;
use memoir::record::{ForkPoint, Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::codec;
use memoir::Error;
use serde::Deserialize;

/// The OpenAPI 3.1 description of the API (served at `/openapi.json`).
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

/// Default request body limit: 8 MiB.
pub const DEFAULT_MAX_BODY: usize = 8 << 20;

/// Most records one append may carry.
pub const MAX_RECORDS_PER_APPEND: usize = 10_000;

/// The header field naming a session's project.
pub const PROJECT_FIELD: &str = "project";

/// Errors starting the server (bad configuration, store, socket).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A configuration problem (tokens file, store spec).
    #[error("{0}")]
    Config(String),
    /// The store failed to open.
    #[error(transparent)]
    Store(#[from] Error),
    /// Binding or serving failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// One bearer token and what it may do.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TokenGrant {
    /// The secret the client sends as `Authorization: Bearer <token>`.
    pub token: String,
    /// The project it reads and writes.
    pub project: String,
    /// After this instant the token is refused (401 `token_expired`).
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenGrant>,
}

/// Parse a tokens file: `{"tokens":[{"token":"...","project":"a","expires_at":"2027-01-01T00:00:00Z"}]}`.
pub fn parse_tokens(text: &str) -> Result<Vec<TokenGrant>, ServeError> {
    let file: TokensFile =
        serde_json::from_str(text).map_err(|e| ServeError::Config(format!("tokens file: {e}")))?;
    for g in &file.tokens {
        check_grant(g)?;
    }
    Ok(file.tokens)
}

fn check_grant(g: &TokenGrant) -> Result<(), ServeError> {
    if g.token.len() < 16 {
        return Err(ServeError::Config(format!(
            "the token for project {:?} is shorter than 16 characters",
            g.project
        )));
    }
    memoir::id::validate(&g.project).map_err(|e| ServeError::Config(format!("project name: {e}")))
}

/// What the server serves and how.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where sessions live.
    pub store: Arc<dyn LogStore>,
    /// The same store as PostgreSQL, when it is one (for indexed listings).
    #[cfg(feature = "postgres")]
    pub pg: Option<Arc<memoir::store::postgres::PgStore>>,
    /// Accepted tokens.
    pub tokens: Vec<TokenGrant>,
    /// Largest accepted request body, in bytes.
    pub max_body: usize,
}

impl ServerConfig {
    /// A configuration over `store` with `tokens` and default limits.
    pub fn new(store: Arc<dyn LogStore>, tokens: Vec<TokenGrant>) -> Self {
        ServerConfig {
            store,
            #[cfg(feature = "postgres")]
            pg: None,
            tokens,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// Open a store from a spec: `postgres://...` / `postgresql://...` (optionally
/// `#schema=NAME`), or a directory for the file store.
pub fn open_store(spec: &str, durability: Durability) -> Result<ServerConfig, ServeError> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            let (url, schema) = match spec.split_once("#schema=") {
                Some((u, s)) => (u, s.to_string()),
                None => (spec, "public".to_string()),
            };
            let options = memoir::store::postgres::PgOptions {
                schema,
                durability,
                pool_size: 32,
                ..Default::default()
            };
            let pg = Arc::new(memoir::store::postgres::PgStore::connect(url, options)?);
            let mut cfg = ServerConfig::new(pg.clone(), Vec::new());
            cfg.pg = Some(pg);
            return Ok(cfg);
        }
        #[cfg(not(feature = "postgres"))]
        return Err(ServeError::Config(
            "this build has no PostgreSQL support (feature `postgres`)".into(),
        ));
    }
    if spec.contains("://") {
        return Err(ServeError::Config(format!(
            "unknown store {spec:?}: use postgres://... or a directory"
        )));
    }
    Ok(ServerConfig::new(
        Arc::new(FileStore::new(spec, durability)),
        Vec::new(),
    ))
}

struct AppState {
    store: Arc<dyn LogStore>,
    #[cfg(feature = "postgres")]
    pg: Option<Arc<memoir::store::postgres::PgStore>>,
    /// BLAKE3 of each token → its grant.
    tokens: HashMap<[u8; 32], TokenGrant>,
    /// Session id → project, remembered from verified headers so an append
    /// needs no extra read (a header's project never changes; the entry is
    /// dropped when this server deletes the session).
    projects: std::sync::RwLock<HashMap<String, String>>,
}

impl AppState {
    /// Like [`header_in_project`], answered from the cache when possible.
    fn check_project(&self, project: &str, id: &str) -> Result<(), Error> {
        if let Ok(cache) = self.projects.read() {
            if let Some(p) = cache.get(id) {
                return if p == project {
                    Ok(())
                } else {
                    Err(Error::NotFound(id.to_string()))
                };
            }
        }
        let meta = header_in_project(self.store.as_ref(), project, id)?;
        if let Ok(mut cache) = self.projects.write() {
            if cache.len() >= 1 << 20 {
                cache.clear();
            }
            cache.insert(meta.id, project.to_string());
        }
        Ok(())
    }

    fn forget_project(&self, id: &str) {
        if let Ok(mut cache) = self.projects.write() {
            cache.remove(id);
        }
    }
}

type Shared = Arc<AppState>;

// ---- errors ----------------------------------------------------------------

/// An error response: a status and a JSON [`wire::ErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: wire::ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: wire::ErrorBody {
                error: code.into(),
                message: message.into(),
                ..Default::default()
            },
        }
    }

    fn not_found(id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no session {id:?} in this project"),
        )
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        #[cfg(feature = "postgres")]
        let unavailable = memoir::store::postgres::is_unavailable(&e);
        #[cfg(not(feature = "postgres"))]
        let unavailable = false;
        match e {
            Error::InvalidId { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_id", e.to_string())
            }
            Error::NotFound(id) | Error::Deleted(id) => ApiError::not_found(&id),
            Error::SessionExists(_) => ApiError::new(StatusCode::CONFLICT, "exists", e.to_string()),
            Error::Conflict {
                expected, actual, ..
            } => {
                let mut err = ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string());
                err.body.expected = Some(expected);
                err.body.actual = Some(actual);
                err
            }
            Error::Invalid(_) | Error::Json(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.to_string())
            }
            Error::Busy { .. } => ApiError::new(StatusCode::CONFLICT, "busy", e.to_string()),
            _ if unavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("the store is unavailable, retry later: {e}"),
            ),
            other => {
                eprintln!("memoir serve: internal error: {other}");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    other.to_string(),
                )
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = r.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "bad_request",
        };
        // 422 (well-formed JSON of the wrong shape) is reported as 400 too.
        let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
            StatusCode::BAD_REQUEST
        } else {
            status
        };
        ApiError::new(status, code, r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"memoir\""),
            );
        }
        resp
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Run a blocking store call on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> ApiResult<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(ApiError::from),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("store task failed: {e}"),
        )),
    }
}

// ---- authentication --------------------------------------------------------

/// The authenticated caller: its project.
struct Auth {
    project: String,
}

impl FromRequestParts<Shared> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Shared,
    ) -> Result<Self, Self::Rejection> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
        let text = value
            .to_str()
            .map_err(|_| unauthorized("malformed Authorization header"))?;
        let token = text
            .strip_prefix("Bearer ")
            .ok_or_else(|| unauthorized("the Authorization header must be `Bearer <token>`"))?
            .trim();
        let grant = state
            .tokens
            .get(blake3::hash(token.as_bytes()).as_bytes())
            .ok_or_else(|| unauthorized("unknown token"))?;
        if grant.expires_at.is_some_and(|t| t <= Utc::now()) {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "token_expired",
                "the token has expired",
            ));
        }
        Ok(Auth {
            project: grant.project.clone(),
        })
    }
}

fn project_of(meta: &SessionMeta) -> Option<&str> {
    meta.extra.get(PROJECT_FIELD).and_then(|v| v.as_str())
}

/// The header of `id` when it belongs to the caller's project (else 404).
fn header_in_project(store: &dyn LogStore, project: &str, id: &str) -> Result<SessionMeta, Error> {
    memoir::id::validate(id)?;
    match store.read_header(id)? {
        Some(meta) if project_of(&meta) == Some(project) => Ok(meta),
        _ => Err(Error::NotFound(id.to_string())),
    }
}

fn session_id(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let Path(id) = path?;
    memoir::id::validate(&id).map_err(ApiError::from)?;
    Ok(id)
}

fn body<T>(json: Result<Json<T>, JsonRejection>) -> ApiResult<T> {
    Ok(json?.0)
}

// ---- handlers --------------------------------------------------------------

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

async fn create_session(
    State(st): State<Shared>,
    auth: Auth,
    json: Result<Json<wire::CreateSession>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<wire::Created>)> {
    let req = body(json)?;
    let mut meta = match req.meta {
        Some(meta) => meta,
        None => {
            let mut m = SessionMeta::new(req.id.unwrap_or_else(memoir::id::new_id));
            m.title = req.title;
            m.provider = req.provider.unwrap_or_default();
            m.model = req.model.unwrap_or_default();
            m.kind = req.kind;
            m
        }
    };
    memoir::id::validate(&meta.id)?;
    match project_of(&meta) {
        None => {
            meta.extra.insert(
                PROJECT_FIELD.into(),
                serde_json::Value::String(auth.project.clone()),
            );
        }
        Some(p) if p == auth.project => {}
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "the header's project is not the token's project",
            ))
        }
    }
    let store = st.store.clone();
    let project = auth.project;
    let created = blocking(move || {
        if let Some(parent) = &meta.parent {
            header_in_project(store.as_ref(), &project, &parent.session)?;
        }
        store.create(&meta)?;
        Ok(meta)
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::Created {
            id: created.id.clone(),
            meta: created,
        }),
    ))
}

async fn list_sessions(
    State(st): State<Shared>,
    auth: Auth,
) -> ApiResult<Json<wire::ListResponse>> {
    let project = auth.project;
    let store = st.store.clone();
    #[cfg(feature = "postgres")]
    let pg = st.pg.clone();
    let resp = blocking(move || {
        #[cfg(feature = "postgres")]
        if let Some(pg) = pg {
            let listed = pg.list_project(&project)?;
            return Ok(wire::ListResponse {
                sessions: listed
                    .into_iter()
                    .map(|l| wire::ListedSession { meta: l.meta })
                    .collect(),
                unreadable: 0,
            });
        }
        let (listed, unreadable) = store.list()?;
        Ok(wire::ListResponse {
            sessions: listed
                .into_iter()
                .filter(|l| project_of(&l.meta) == Some(project.as_str()))
                .map(|l| wire::ListedSession { meta: l.meta })
                .collect(),
            unreadable,
        })
    })
    .await?;
    Ok(Json(resp))
}

async fn get_meta(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<SessionMeta>> {
    let id = session_id(path)?;
    let store = st.store.clone();
    let meta = blocking(move || header_in_project(store.as_ref(), &auth.project, &id)).await?;
    Ok(Json(meta))
}

async fn get_log(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<wire::LogResponse>> {
    let id = session_id(path)?;
    let store = st.store.clone();
    let resp = blocking(move || {
        header_in_project(store.as_ref(), &auth.project, &id)?;
        let raw = store.read(&id)?;
        Ok(wire::LogResponse::from_raw(&raw)?)
    })
    .await?;
    Ok(Json(resp))
}

async fn load_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<wire::Loaded>> {
    let id = session_id(path)?;
    let store = st.store.clone();
    let loaded = blocking(move || {
        header_in_project(store.as_ref(), &auth.project, &id)?;
        let t = memoir::transcript::read_in(store.as_ref(), &id)?;
        Ok(wire::Loaded {
            title: t.title.clone().or_else(|| t.meta.title.clone()),
            meta: t.meta,
            messages: t.messages,
            message_seqs: t.message_seqs,
            inherited: t.inherited,
            taint: t.taint,
            usage: t.usage,
            turns: t.turns,
            last_seq: t.last_seq,
            issues: t.report.issues.iter().map(wire::WireIssue::from).collect(),
        })
    })
    .await?;
    Ok(Json(loaded))
}

async fn append_records(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<wire::AppendRequest>, JsonRejection>,
) -> ApiResult<Json<wire::AppendResponse>> {
    let id = session_id(path)?;
    let req = body(json)?;
    let n = req.records.len() + req.messages.len();
    if n > MAX_RECORDS_PER_APPEND {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("{n} records in one append; at most {MAX_RECORDS_PER_APPEND}"),
        ));
    }
    let records = wire::records_from(req.records, req.messages).map_err(Error::from)?;
    if records.iter().any(|r| matches!(r, Record::Meta(_))) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "a header (meta) record can only be written by creating a session",
        ));
    }
    let expected = req.expected_seq;
    let a = blocking(move || {
        st.check_project(&auth.project, &id)?;
        st.store.append(&id, &records, expected)
    })
    .await?;
    Ok(Json(wire::AppendResponse {
        first_seq: a.first_seq,
        last_seq: a.last_seq,
    }))
}

async fn fork_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<wire::ForkRequest>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<wire::Forked>)> {
    let parent_id = session_id(path)?;
    let req = body(json)?;
    let store = st.store.clone();
    let forked = blocking(move || {
        let parent_meta = header_in_project(store.as_ref(), &auth.project, &parent_id)?;
        let t = memoir::transcript::read_in(store.as_ref(), &parent_id)?;
        let at = req.at_seq.unwrap_or(t.last_seq);
        if at > t.last_seq {
            return Err(Error::Invalid(format!(
                "at_seq {at} is past the parent's last seq {}",
                t.last_seq
            )));
        }
        // Messages the fork starts with: inherited ones, plus own ones up to `at`.
        let messages = t.inherited
            + t.message_seqs[t.inherited.min(t.message_seqs.len())..]
                .iter()
                .filter(|&&s| s <= at)
                .count();
        let id = req.id.unwrap_or_else(memoir::id::new_id);
        memoir::id::validate(&id)?;
        let mut meta = SessionMeta::new(id.clone());
        meta.provider = parent_meta.provider.clone();
        meta.model = parent_meta.model.clone();
        meta.workspace = parent_meta.workspace.clone();
        meta.kind = parent_meta.kind.clone();
        meta.title = req.title.or_else(|| t.title.clone());
        let parent = ForkPoint {
            session: parent_id,
            seq: at,
            messages,
        };
        meta.parent = Some(parent.clone());
        meta.extra.insert(
            PROJECT_FIELD.into(),
            serde_json::Value::String(auth.project.clone()),
        );
        store.create(&meta)?;
        Ok(wire::Forked { id, parent })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(forked)))
}

async fn export_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = session_id(path)?;
    let store = st.store.clone();
    let name = id.clone();
    let bytes = blocking(move || {
        header_in_project(store.as_ref(), &auth.project, &id)?;
        let raw = store.read(&id)?;
        let header = raw
            .header
            .ok_or_else(|| Error::NoHeader(store.location(&id)))?;
        let mut out = Vec::new();
        let mut hash = codec::encode_into(&mut out, 0, &codec::ZERO_HASH, &Record::Meta(header))?;
        for r in &raw.records {
            hash = codec::encode_into(&mut out, r.seq, &hash, &r.record)?;
        }
        Ok(out)
    })
    .await?;
    let disposition = format!("attachment; filename=\"{name}.jsonl\"");
    let mut resp = bytes.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        resp.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

async fn delete_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let id = session_id(path)?;
    blocking(move || {
        header_in_project(st.store.as_ref(), &auth.project, &id)?;
        st.forget_project(&id);
        st.store.delete(&id)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<wire::SearchRequest>, JsonRejection>,
) -> ApiResult<Json<wire::SearchResponse>> {
    let id = session_id(path)?;
    let req = body(json)?;
    if req.query.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "query is empty",
        ));
    }
    let top_k = req.top_k.unwrap_or(5).clamp(1, 100);
    let store = st.store.clone();
    // Reading, rebuilding the view and embedding all block: one trip to the
    // blocking pool.
    let hits = blocking(move || {
        header_in_project(store.as_ref(), &auth.project, &id)?;
        let t = memoir::transcript::read_in(store.as_ref(), &id)?;
        search_transcript(&t, &req.query, top_k)
    })
    .await?;
    Ok(Json(wire::SearchResponse { hits }))
}

/// Hybrid (BM25 + hashed-feature vectors) search over a transcript's chunks,
/// through the semantic view, rebuilt per request (no model needed).
fn search_transcript(
    t: &memoir::transcript::Transcript,
    query: &str,
    top_k: usize,
) -> Result<Vec<wire::SearchHit>, Error> {
    use memoir::embed::hash::HashEmbedder;
    use memoir::view::{RetrievalMode, SearchRequest, SessionView, StateSet};
    let embedder = HashEmbedder::new(256);
    let (view, _) = SessionView::rebuild(t, &embedder, None)
        .map_err(|e| Error::Invalid(format!("search: {e}")))?;
    let qv = embedder.embed_sync(query);
    let req = SearchRequest {
        vector: Some(&qv),
        text: Some(query),
        top_k,
        mode: RetrievalMode::Hybrid,
        states: StateSet::ALL,
    };
    Ok(view
        .search_distinct(&req)
        .into_iter()
        .map(|h| wire::SearchHit {
            chain_seq: h.chain_seq,
            score: h.score,
            kind: h.meta.kind.clone(),
            text: h.meta.inline.clone(),
        })
        .collect())
}

async fn fallback() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// The API's router over `config`.
pub fn router(config: ServerConfig) -> Router {
    let tokens = config
        .tokens
        .into_iter()
        .map(|g| (*blake3::hash(g.token.as_bytes()).as_bytes(), g))
        .collect();
    let state = Arc::new(AppState {
        store: config.store,
        #[cfg(feature = "postgres")]
        pg: config.pg,
        tokens,
        projects: std::sync::RwLock::new(HashMap::new()),
    });
    Router::new()
        .route("/healthz", get(health))
        .route("/openapi.json", get(openapi))
        .route("/v1/sessions", get(list_sessions).post(create_session))
        .route(
            "/v1/sessions/{id}",
            get(load_session).delete(delete_session),
        )
        .route("/v1/sessions/{id}/meta", get(get_meta))
        .route("/v1/sessions/{id}/log", get(get_log))
        .route("/v1/sessions/{id}/records", post(append_records))
        .route("/v1/sessions/{id}/fork", post(fork_session))
        .route("/v1/sessions/{id}/export", get(export_session))
        .route("/v1/sessions/{id}/search", post(search_session))
        .fallback(fallback)
        .layer(DefaultBodyLimit::max(config.max_body))
        .with_state(state)
}

/// Serve `config` on `listener` until `shutdown` resolves, then stop
/// accepting and wait for every request in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = router(config);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// Check that `addr` is a loopback address unless `allow_public` is set.
pub fn check_listen(addr: &SocketAddr, allow_public: bool) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || allow_public {
        Ok(())
    } else {
        Err(ServeError::Config(format!(
            "{addr} is not a loopback address; pass --allow-public to listen on it (and use TLS in front)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_file_is_checked() {
        let ok = parse_tokens(
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","expires_at":"2030-01-01T00:00:00Z"}]}"#,
        )
        .unwrap();
        assert_eq!(ok[0].project, "a");
        assert!(ok[0].expires_at.is_some());
        for bad in [
            r#"{"tokens":[{"token":"short","project":"a"}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"../a"}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","scope":"all"}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","expires_at":"soon"}]}"#,
            "not json",
        ] {
            assert!(
                matches!(parse_tokens(bad), Err(ServeError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn store_specs_and_listen_addresses() {
        let dir = std::env::temp_dir().join("memoir-server-unit");
        let cfg = open_store(dir.to_str().unwrap(), Durability::None).unwrap();
        assert_eq!(cfg.store.location("x"), dir.join("x.jsonl"));
        assert!(matches!(
            open_store("redis://127.0.0.1/0", Durability::Fsync),
            Err(ServeError::Config(_))
        ));
        assert!(check_listen(&"127.0.0.1:0".parse().unwrap(), false).is_ok());
        assert!(check_listen(&"[::1]:0".parse().unwrap(), false).is_ok());
        assert!(check_listen(&"0.0.0.0:8080".parse().unwrap(), false).is_err());
        assert!(check_listen(&"0.0.0.0:8080".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn openapi_document_is_valid_json_naming_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        for path in [
            "/v1/sessions",
            "/v1/sessions/{id}",
            "/v1/sessions/{id}/meta",
            "/v1/sessions/{id}/log",
            "/v1/sessions/{id}/records",
            "/v1/sessions/{id}/fork",
            "/v1/sessions/{id}/export",
            "/v1/sessions/{id}/search",
        ] {
            assert!(doc["paths"][path].is_object(), "{path} missing");
        }
    }
}
