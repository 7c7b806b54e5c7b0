//! `POST /v1/search`: search every session of the caller's project with the
//! library's cross-session index ([`memoir::search`]), the engine behind
//! `memoir search`; hits have the library's [`SearchHit`] shape (the CLI's
//! `--json`), session ids as the caller knows them.
//!
//! Body: `{"query": "...", "k": 10, "mode": "lexical|semantic|hybrid",
//! "filter": {"agent", "session" (id prefix), "since", "until" (RFC 3339),
//! "role", "tool", "workspace" (the sessions' directory)}}`; every field but
//! `query` optional. Project scoping: the server's index covers the whole
//! store (stored ids `P~X`), and every query is restricted in SQL to ids
//! starting with the caller's `P~`, so a token never sees another project's
//! hits. Each request first catches the index up with the store
//! ([`SearchIndex::update`]: on the file store a read of the change
//! journal's tail, not a `stat` per session; one query for the whole store on
//! PostgreSQL). The index is the store's own ([`SearchIndex::for_store`]):
//! SQLite under the file store (`<dir>/search/`), tables in the database of a
//! PostgreSQL store; other stores answer 501.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use memoir::message::Role;
use memoir::search::{SearchFilter, SearchHit, SearchIndex, SearchMode, SearchQuery};
use memoir::store::LogStore;
use serde::{Deserialize, Serialize};

use super::{object_body, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};
use crate::namespace::{self, SEPARATOR};

/// Most hits one request may ask for.
pub const MAX_K: usize = 200;

/// The id whose location names a store (the key of its open index).
const KEY_PROBE: &str = "search-index";

/// The open indexes of the server, by store location (opened on first use).
#[derive(Default)]
pub(crate) struct Indexes(Mutex<HashMap<PathBuf, Arc<Mutex<SearchIndex>>>>);

impl Indexes {
    fn get(&self, store: Arc<dyn LogStore>) -> ApiResult<Arc<Mutex<SearchIndex>>> {
        let key = store.location(KEY_PROBE);
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ix) = open.get(&key) {
            return Ok(ix.clone());
        }
        let ix = SearchIndex::for_store(store).map_err(search_error)?;
        let ix = Arc::new(Mutex::new(ix));
        open.insert(key, ix.clone());
        Ok(ix)
    }
}

/// The filters a caller may set (the project is the token's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilterBody {
    agent: Option<String>,
    session: Option<String>,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    role: Option<Role>,
    tool: Option<String>,
    workspace: Option<String>,
}

/// The body of `POST /v1/search`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchBody {
    query: String,
    k: Option<usize>,
    mode: Option<String>,
    #[serde(default)]
    filter: FilterBody,
}

/// The answer of `POST /v1/search`.
#[derive(Debug, Serialize)]
pub(crate) struct SearchAllResponse {
    hits: Vec<SearchHit>,
}

fn search_error(e: memoir::search::SearchError) -> ApiError {
    use memoir::search::SearchError;
    match e {
        // The store's own mapping (it never says whether an id exists elsewhere).
        SearchError::Store(e) => e.into(),
        // The library's classification: a bad query 400, the index database
        // 500, an embedder without its model 503, another store 501.
        other => {
            let message = match &other {
                SearchError::Invalid(m) => m.clone(),
                SearchError::Unsupported(_) => {
                    "cross-session search needs the file store or PostgreSQL on this server".into()
                }
                _ => format!("search: {other}"),
            };
            ApiError::of_kind(other.kind(), message)
        }
    }
}

/// `POST /v1/search`.
pub(crate) async fn search_all(
    State(st): State<Shared>,
    auth: Auth,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<SearchAllResponse>> {
    let body: SearchBody = object_body(json)?;
    let mode: SearchMode = match &body.mode {
        Some(m) => m.parse().map_err(ApiError::bad_request)?,
        None => SearchMode::Hybrid,
    };
    let prefix = namespace::id_prefix(&auth.project);
    let session = match &body.filter.session {
        Some(s) if s.contains(SEPARATOR) => {
            return Err(ApiError::bad_request(format!(
                "session {s:?} contains '{SEPARATOR}' (reserved by the server)"
            )))
        }
        Some(s) => format!("{prefix}{s}"),
        None => prefix.clone(),
    };
    let f = body.filter;
    let query = SearchQuery {
        text: body.query,
        k: body.k.unwrap_or(10).clamp(1, MAX_K),
        mode,
        filter: SearchFilter {
            project: f.workspace,
            agent: f.agent,
            session: Some(session),
            since: f.since,
            until: f.until,
            role: f.role,
            tool: f.tool,
        },
    };
    let hits = blocking(move || -> ApiResult<Vec<SearchHit>> {
        // Opening may query the database: off the async workers.
        let index = st.search.get(st.store.clone())?;
        let mut ix = index.lock().unwrap_or_else(|p| p.into_inner());
        ix.update().map_err(search_error)?;
        ix.search(&query).map_err(search_error)
    })
    .await?;
    Ok(Json(SearchAllResponse {
        hits: namespace::visible_hits(&prefix, hits),
    }))
}

#[cfg(test)]
mod tests {
    use super::search_error;
    use memoir::embed::EmbeddingError;
    use memoir::search::SearchError;

    /// Search failures keep the library's classification: a bad query is
    /// 400, an embedder without its model 503 (retry later), not 500.
    #[test]
    fn search_errors_map_through_their_kind() {
        let status = |e: SearchError| search_error(e).status().as_u16();
        assert_eq!(status(SearchError::Invalid("q".into())), 400);
        assert_eq!(
            status(SearchError::Embedding(EmbeddingError::ModelNotLoaded(
                "minilm".into()
            ))),
            503
        );
        assert_eq!(
            status(SearchError::Store(memoir::Error::NotFound("s".into()))),
            404
        );
        assert_eq!(status(SearchError::Unsupported("memory".into())), 501);
    }
}
