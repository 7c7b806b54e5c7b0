//! `POST /v1/sessions/{id}/fork`: the library's fork rules on the caller's
//! project: the cut (`at_seq`, the record seq) is turned into a message
//! count, moved back so no tool call is separated from its results
//! ([`memoir::manager::fork::safe_cut`]), and written as a by-reference
//! header ([`memoir::manager::fork::fork_point`]), exactly as
//! `memoir sessions fork --at SEQ` does.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use memoir::client::wire;
use memoir::manager::{fork as fork_rules, ManagerError, FORKED_FROM};
use memoir::record::{Record, SessionMeta};
use memoir::store::LogStore;
use serde_json::Value;

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
    let ps = st.project(&auth);
    let forked = blocking(move || {
        ps.header(&source)?;
        let t = memoir::transcript::read_in(&ps, &source)?;
        let requested = match req.at_seq {
            Some(seq) => fork_rules::messages_through_seq(&t, seq)?,
            None => t.messages.len(),
        };
        let effective = fork_rules::safe_cut(&t.messages, requested);
        if effective == 0 {
            return Err(ManagerError::EmptyFork {
                session: source.clone(),
                requested,
            });
        }
        let plan = fork_rules::fork_point(&ps, &source, &t, effective)?;
        let id = req.id.unwrap_or_else(memoir::id::new_id);
        let mut meta = SessionMeta::new(id.clone());
        meta.provider = t.meta.provider.clone();
        meta.model = t.meta.model.clone();
        meta.workspace = t.meta.workspace.clone();
        meta.kind = t.meta.kind.clone();
        meta.title = req.title.or_else(|| t.title.clone());
        meta.parent = Some(plan.point.clone());
        if plan.point.session != source {
            meta.extra
                .insert(FORKED_FROM.into(), Value::String(source.clone()));
        }
        ps.create(&meta)?;
        if let Some(prefix) = plan.rewrite {
            ps.append(&id, &[Record::Rewrite { messages: prefix }], None)?;
        }
        Ok(wire::Forked {
            id,
            parent: plan.point,
            requested,
            effective,
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(forked)))
}
