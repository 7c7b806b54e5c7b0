//! Writing: create, append, delete and restore, each on the caller's
//! [`crate::namespace::ProjectStore`] (ownership read from the store on
//! every call).

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use memoir::client::wire;
use memoir::manager::fork as fork_rules;
use memoir::manager::ManagerError;
use memoir::record::{Record, SessionMeta};
use memoir::store::LogStore;
use memoir::Error;

use super::{object_body, session_id, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};
use crate::namespace::{project_of, ProjectStore};
use crate::MAX_RECORDS_PER_APPEND;

/// `POST /v1/sessions`.
pub(crate) async fn create_session(
    State(st): State<Shared>,
    auth: Auth,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<wire::Created>)> {
    let req: wire::CreateSession = object_body(json)?;
    let meta = match req.meta {
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
    if project_of(&meta).is_some_and(|p| p != auth.project) {
        return Err(ApiError::bad_request(
            "the header's project is not the token's project",
        ));
    }
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let created = blocking(move || {
        if let Some(parent) = &meta.parent {
            super::check_own(&ps, only.as_deref(), &parent.session)?;
            check_parent(&ps, &meta)?;
        }
        ps.create(&meta)?;
        ps.header(&meta.id)
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

/// A header that names a fork parent (a client forking through the
/// `LogStore` API) must name a session of the caller's project, a `seq`
/// within its log, and the number of messages the parent has up to that
/// `seq`, so a client can never point a fork at arbitrary data.
fn check_parent(ps: &ProjectStore, meta: &SessionMeta) -> Result<(), Error> {
    let Some(parent) = &meta.parent else {
        return Ok(());
    };
    ps.header(&parent.session)?;
    let t = memoir::transcript::read_in(ps, &parent.session)?;
    let messages = fork_rules::messages_through_seq(&t, parent.seq)?;
    if messages != parent.messages {
        return Err(Error::Invalid(format!(
            "parent {} has {messages} message(s) through seq {}, not {}",
            parent.session, parent.seq, parent.messages
        )));
    }
    Ok(())
}

/// `POST /v1/sessions/{id}/records`.
pub(crate) async fn append_records(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<wire::AppendResponse>> {
    let id = session_id(path)?;
    let req: wire::AppendRequest = object_body(json)?;
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
        return Err(ApiError::bad_request(
            "a header (meta) record can only be written by creating a session",
        ));
    }
    let expected = req.expected_seq;
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let a = blocking(move || {
        super::check_own(&ps, only.as_deref(), &id)?;
        // A reference must name a blob this project uploaded or holds.
        st.blob_grants.check_written(&auth.project, &ps, &records)?;
        // Large payloads go to the server store's blob store.
        let records = memoir::transcript::blobs::externalize_records(&ps, &records)?;
        ps.append(&id, &records, expected)
    })
    .await?;
    Ok(Json(wire::AppendResponse {
        first_seq: a.first_seq,
        last_seq: a.last_seq,
    }))
}

/// `DELETE /v1/sessions/{id}`: to the trash (undo with restore).
pub(crate) async fn delete_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let id = session_id(path)?;
    let mut m = st.manager(&auth);
    blocking(move || match m.delete_session(&id)? {
        true => Ok(()),
        false => Err(ManagerError::from(Error::NotFound(id))),
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/sessions/{id}/restore`: bring a deleted session back.
pub(crate) async fn restore_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<SessionMeta>> {
    let id = session_id(path)?;
    let ps = st.project(&auth);
    let mut m = st.manager(&auth);
    let meta = blocking(move || {
        m.restore_session(&id)?;
        Ok::<_, ManagerError>(ps.header(&id)?)
    })
    .await?;
    Ok(Json(meta))
}

/// `POST /v1/sessions/{id}/purge`: erase a deleted session for good, unless
/// a surviving fork still needs its prefix (then 409 naming the forks).
pub(crate) async fn purge_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<wire::Purged>> {
    let id = session_id(path)?;
    let mut m = st.manager(&auth);
    let report = blocking(move || {
        m.resolve_trashed(&id)?;
        m.purge_trash(Some(std::slice::from_ref(&id)))
    })
    .await?;
    if let Some((id, by)) = report.kept.first() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "session {id} is kept: forks still need its prefix ({})",
                by.join(", ")
            ),
        ));
    }
    Ok(Json(wire::Purged {
        purged: report.purged,
    }))
}
