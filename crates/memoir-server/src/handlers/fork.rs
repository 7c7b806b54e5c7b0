//! `POST /v1/sessions/{id}/fork`: the manager's fork on the caller's
//! project (the cut moved back so no tool call is separated from its
//! results, a by-reference header, the parent's creation stamp), exactly as
//! `memoir sessions fork --at SEQ` does. `at_seq` is the record seq.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use memoir::client::wire;
use memoir::manager::fork as fork_rules;
use memoir::manager::ManagerError;

use super::{object_body, session_id, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiResult};

/// `POST /v1/sessions/{id}/fork`.
pub(crate) async fn fork_session(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<wire::Forked>)> {
    let source = session_id(path)?;
    let req: wire::ForkRequest = object_body(json)?;
    let mut m = st.manager(&auth);
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let forked = blocking(move || {
        super::check_own(&ps, only.as_deref(), &source)?;
        let upto = match req.at_seq {
            Some(seq) => Some(fork_rules::messages_through_seq(
                &m.read_session(&source)?,
                seq,
            )?),
            None => None,
        };
        let f = m.fork_session_as(&source, upto, req.id, req.title)?;
        Ok::<_, ManagerError>(wire::Forked {
            id: f.id,
            parent: f.parent,
            requested: f.requested,
            effective: f.effective,
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(forked)))
}
