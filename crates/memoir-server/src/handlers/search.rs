//! `POST /v1/sessions/{id}/search`: the semantic view's search over the
//! session, rebuilt per request with the same calls as `memoir recall`
//! (`SessionView::rebuild_session` + `query_text_mode`); vectors are hashed
//! features, so no model is needed. `mode` is hybrid (default), vector or
//! lexical. A failure answers by its kind ([`memoir::kind_of`]): bad input
//! 400, a missing session 404, a store that is down 503, damage 500.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::Json;
use memoir::client::wire;
use memoir::embed::hash::HashEmbedder;
use memoir::view::{RebuildOptions, RetrievalMode, SessionView, ViewConfig};

use super::{object_body, session_id, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};

/// Width of the hashed-feature vectors of the per-request view.
const HASH_DIMS: usize = 256;

/// `POST /v1/sessions/{id}/search`.
pub(crate) async fn search_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<wire::SearchResponse>> {
    let id = session_id(path)?;
    let req: wire::SearchRequest = object_body(json)?;
    if req.query.trim().is_empty() {
        return Err(ApiError::bad_request("query is empty"));
    }
    let top_k = req.top_k.unwrap_or(5).clamp(1, 100);
    let mode: RetrievalMode = match &req.mode {
        Some(m) => m.parse().map_err(ApiError::bad_request)?,
        None => RetrievalMode::Hybrid,
    };
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let hits = blocking(move || {
        ps.header(&id)?;
        super::check_own(&ps, only.as_deref(), &id)?;
        search_session_view(&ps, &id, &req.query, top_k, mode)
    })
    .await?;
    Ok(Json(wire::SearchResponse { hits }))
}

/// Every turn the session's log held (compacted-away ones too), searched.
fn search_session_view(
    store: &dyn memoir::store::LogStore,
    id: &str,
    query: &str,
    top_k: usize,
    mode: RetrievalMode,
) -> Result<Vec<wire::SearchHit>, ApiError> {
    let embedder = HashEmbedder::new(HASH_DIMS);
    let options = RebuildOptions {
        view: ViewConfig {
            mode,
            ..ViewConfig::default()
        },
        ..RebuildOptions::default()
    };
    let search = || {
        let (view, _, _) = SessionView::rebuild_session(store, id, &embedder, None, &options)?;
        view.query_text_mode(&embedder, query, top_k, mode)
    };
    let hits = search().map_err(view_error)?;
    Ok(hits
        .into_iter()
        .map(|h| wire::SearchHit {
            chain_seq: h.chain_seq,
            score: h.score,
            kind: h.meta.kind.clone(),
            text: h.meta.inline.clone(),
        })
        .collect())
}

/// The response of a failed rebuild or query: by the library's kind of the
/// error (a store outage is 503, not the caller's fault).
fn view_error(e: memoir::view::ViewError) -> ApiError {
    let kind = memoir::kind_of(&e).unwrap_or(memoir::error::ErrorKind::Io);
    let message = format!("search: {}", memoir::error::report(&e));
    let err = ApiError::of_kind(kind, message);
    if err.status().is_server_error() {
        eprintln!(
            "memoir serve: session search failed: {}",
            memoir::error::report(&e)
        );
    }
    err
}
