//! The trash as a store sees it (`GET /v1/trash`, `GET /v1/trash/{id}/log`):
//! what `memoir::client::RemoteStore` needs for the manager's trash over
//! HTTP. Delete, restore and purge themselves are the manager's
//! (`handlers::write`).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use memoir::client::wire;
use memoir::store::LogStore;
use memoir::Error;

use super::{LogQuery, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiResult};

/// `GET /v1/trash`: the project's deleted sessions, most recently deleted first.
pub(crate) async fn list_trash(
    State(st): State<Shared>,
    auth: Auth,
) -> ApiResult<Json<wire::TrashResponse>> {
    let ps = st.project(&auth);
    let resp = blocking(move || {
        // In the store's order (`LogStore::list_deleted`: most recently
        // deleted first); the manager sorts its trash listing itself.
        let sessions = ps
            .list_deleted()?
            .into_iter()
            .map(|d| wire::TrashedSession {
                meta: d.meta,
                deleted_at: d.deleted_at,
            })
            .collect();
        Ok::<_, Error>(wire::TrashResponse { sessions })
    })
    .await?;
    Ok(Json(resp))
}

/// `GET /v1/trash/{id}/log[?blobs=refs]`: a deleted session's verified log
/// (payloads resolved unless the client resolves them itself).
pub(crate) async fn get_trashed_log(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<LogQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<wire::LogResponse>> {
    super::log_response(st, auth, path, query, |ps, id| ps.read_deleted(id)).await
}
