//! Reading: list, header, raw log, the replayed session, and export (the
//! library's `memoir.session-export`, OpenAI or Markdown renderings).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use memoir::client::wire;
use memoir::manager::{ExportFormat, ExportOptions, ManagerError};
use memoir::record::SessionMeta;
use memoir::store::LogStore;
use memoir::Error;
use serde::Deserialize;

use super::{session_id, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};

/// `GET /v1/sessions`.
pub(crate) async fn list_sessions(
    State(st): State<Shared>,
    auth: Auth,
) -> ApiResult<Json<wire::ListResponse>> {
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let resp = blocking(move || {
        let (listed, unreadable) = ps.list_project(&auth.project)?;
        Ok::<_, Error>(wire::ListResponse {
            sessions: listed
                .into_iter()
                .filter(|l| crate::namespace::created_by(&l.meta, only.as_deref()))
                .map(|l| wire::ListedSession { meta: l.meta })
                .collect(),
            unreadable,
        })
    })
    .await?;
    Ok(Json(resp))
}

/// `GET /v1/sessions/{id}/meta`.
pub(crate) async fn get_meta(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<SessionMeta>> {
    let id = session_id(path)?;
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let meta = blocking(move || {
        super::check_own(&ps, only.as_deref(), &id)?;
        ps.header(&id)
    })
    .await?;
    Ok(Json(meta))
}

/// `GET /v1/sessions/{id}/log[?blobs=refs]`.
pub(crate) async fn get_log(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<super::LogQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<wire::LogResponse>> {
    super::log_response(st, auth, path, query, |ps, id| ps.read(id)).await
}

/// `GET /v1/sessions/{id}`.
pub(crate) async fn load_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<wire::Loaded>> {
    let id = session_id(path)?;
    let m = st.manager(&auth);
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let loaded = blocking(move || {
        super::check_own(&ps, only.as_deref(), &id)?;
        let t = m.read_session(&id)?;
        Ok::<_, ManagerError>(wire::Loaded {
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

/// `?format=` of an export.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExportQuery {
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    redact: Option<bool>,
}

/// `GET /v1/sessions/{id}/export[?format=jsonl|openai|markdown&redact=true]`:
/// the library's export, byte for byte what `memoir sessions export` writes.
pub(crate) async fn export_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ExportQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let id = session_id(path)?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let format: ExportFormat = match &query.format {
        Some(f) => f.parse().map_err(ApiError::from)?,
        None => ExportFormat::default(),
    };
    let options = ExportOptions {
        format,
        redact: query.redact.unwrap_or(false),
    };
    let mut m = st.manager(&auth);
    let name = id.clone();
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let text = blocking(move || {
        super::check_own(&ps, only.as_deref(), &id)?;
        Ok::<_, ManagerError>(m.export(&id, options)?.text)
    })
    .await?;
    let (content_type, ext) = match format {
        ExportFormat::Jsonl => ("application/x-ndjson", "jsonl"),
        ExportFormat::OpenAi => ("application/json", "json"),
        ExportFormat::Markdown => ("text/markdown; charset=utf-8", "md"),
        // Served as an attachment (below), never rendered at this origin.
        ExportFormat::Html => ("text/html; charset=utf-8", "html"),
    };
    let mut resp = text.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let disposition = format!("attachment; filename=\"{name}.{ext}\"");
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        resp.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}
