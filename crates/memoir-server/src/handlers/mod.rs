//! The HTTP handlers, one file per concern. Each handler authenticates,
//! parses, and calls the library on the caller's [`ProjectStore`]; session
//! logic (fork cut, export framing, search ranking) lives in `memoir`.

pub(crate) mod blobs; // PUT/GET /v1/blobs/{hash}
pub(crate) mod fork;
pub(crate) mod heads; // POST /v1/heads
pub(crate) mod lease; // /v1/sessions/{id}/lease
pub(crate) mod read;
pub(crate) mod search;
#[cfg(feature = "search")]
pub(crate) mod search_all; // POST /v1/search
pub(crate) mod trash; // GET /v1/trash, /v1/trash/{id}/log
pub(crate) mod usage; // GET /v1/usage
pub(crate) mod write;

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use memoir::manager::SessionManager;
use memoir::store::LogStore;
use serde::de::DeserializeOwned;

use crate::auth::{Auth, HasTokens, Tokens};
use crate::error::{ApiError, ApiResult};
use crate::namespace::ProjectStore;
use crate::OPENAPI_JSON;

/// What every handler shares.
pub(crate) struct AppState {
    /// The shared store (all projects).
    pub store: Arc<dyn LogStore>,
    /// Accepted tokens.
    pub tokens: Tokens,
    /// The cross-session search indexes (`POST /v1/search`).
    #[cfg(feature = "search")]
    pub search: search_all::Indexes,
    /// Owner leases held for clients.
    pub leases: lease::LeaseTable,
    /// Which blobs each project may read.
    pub blob_grants: memoir::transcript::grants::BlobGrants,
}

impl AppState {
    /// The caller's project's view of the store.
    pub fn project(&self, auth: &Auth) -> ProjectStore {
        ProjectStore::new(self.store.clone(), &auth.project)
    }

    /// The session manager over the caller's project: every session
    /// operation (fork, export, trash, restore, purge) goes through it.
    pub fn manager(&self, auth: &Auth) -> SessionManager {
        crate::namespace::project_manager(self.store.clone(), &auth.project)
    }
}

/// `?blobs=` of a log read: `refs` keeps payload references for a client
/// that resolves them itself (`GET /v1/blobs/{hash}`); `resolved` (the
/// default) sends payloads inline.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogQuery {
    #[serde(default)]
    blobs: Option<String>,
}

impl LogQuery {
    /// True when the client asked for references.
    pub fn keeps_refs(&self) -> ApiResult<bool> {
        match self.blobs.as_deref() {
            None | Some("resolved") => Ok(false),
            Some("refs") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "unknown blobs={other:?} (refs or resolved)"
            ))),
        }
    }
}

/// The state as handlers receive it.
pub(crate) type Shared = Arc<AppState>;

impl HasTokens for Shared {
    fn tokens(&self) -> &Tokens {
        &self.tokens
    }
}

/// How a log route reads its session: live (`LogStore::read`) or from the
/// trash (`LogStore::read_deleted`).
pub(crate) type ReadLog = fn(&ProjectStore, &str) -> memoir::Result<memoir::store::RawLog>;

/// The verified log of the session in `path`, read by `read`, with payloads
/// resolved from the server's blob store unless the client asked for
/// references (`?blobs=refs`, then it fetches them with `GET /v1/blobs/{hash}`).
pub(crate) async fn log_response(
    st: Shared,
    auth: crate::auth::Auth,
    path: Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<axum::extract::Query<LogQuery>, axum::extract::rejection::QueryRejection>,
    read: ReadLog,
) -> crate::error::ApiResult<axum::Json<memoir::client::wire::LogResponse>> {
    let id = session_id(path)?;
    let axum::extract::Query(query) =
        query.map_err(|e| crate::error::ApiError::bad_request(e.body_text()))?;
    let refs = query.keeps_refs()?;
    let ps = st.project(&auth);
    let resp = crate::error::blocking(move || {
        let raw = read(&ps, &id)?;
        let raw = if refs {
            raw
        } else {
            memoir::transcript::blobs::resolve_raw(&ps, raw)
        };
        Ok::<_, memoir::Error>(memoir::client::wire::LogResponse::from_raw(&raw)?)
    })
    .await?;
    Ok(axum::Json(resp))
}

/// The `{id}` of a session route, validated.
pub(crate) fn session_id(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let Path(id) = path?;
    memoir::id::validate(&id).map_err(ApiError::from)?;
    Ok(id)
}

/// A JSON request body that must be an object (`[]` or `1` is a 400, never
/// read as a struct from a sequence), parsed into `T`.
pub(crate) fn object_body<T: DeserializeOwned>(
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<T> {
    let Json(value) = json?;
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "the request body must be a JSON object, not {}",
            match value {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::Bool(_) => "a boolean",
                serde_json::Value::Null => "null",
                serde_json::Value::Object(_) => "an object",
            }
        )));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}

/// `GET /healthz`.
pub(crate) async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// `GET /openapi.json`.
pub(crate) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

/// Any other route.
pub(crate) async fn fallback() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint",
    )
}
