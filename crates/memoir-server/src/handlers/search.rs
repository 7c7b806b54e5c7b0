//! `POST /v1/sessions/{id}/search`: the semantic view's hybrid search over
//! the session (BM25 plus hashed-feature vectors, so no model is needed),
//! rebuilt per request.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::Json;
use memoir::client::wire;
use memoir::embed::hash::HashEmbedder;
use memoir::view::{RetrievalMode, SearchRequest, SessionView, StateSet};
use memoir::Error;

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
    let ps = st.project(&auth);
    let hits = blocking(move || {
        ps.header(&id)?;
        let t = memoir::transcript::read_in(&ps, &id)?;
        search_transcript(&t, &req.query, top_k)
    })
    .await?;
    Ok(Json(wire::SearchResponse { hits }))
}

fn search_transcript(
    t: &memoir::transcript::Transcript,
    query: &str,
    top_k: usize,
) -> Result<Vec<wire::SearchHit>, Error> {
    let embedder = HashEmbedder::new(HASH_DIMS);
    let (view, _) = memoir::embed::block_on(SessionView::rebuild(t, &embedder, None))
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
