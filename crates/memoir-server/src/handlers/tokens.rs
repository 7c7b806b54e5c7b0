//! Token management over HTTP (`manage` role): `GET /v1/tokens` lists the
//! tokens with a grant on a project the caller manages (their grants on
//! other projects hidden, digests never sent), `POST /v1/tokens` mints one
//! (every granted project must be one the caller manages; the secret is in
//! this answer only), `DELETE /v1/tokens/{id}` revokes one (the caller must
//! manage every project it has a grant on). The model and the book are the
//! library's ([`memoir::access`]).

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use memoir::access::{Grant, Role, TokenBook, TokenEntry};
use memoir::error::StoreError;
use serde::{Deserialize, Serialize};

use super::{object_body, Shared};
use crate::auth::{forbidden, Auth};
use crate::error::{blocking, ApiError, ApiResult};

/// `POST /v1/tokens` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateToken {
    name: String,
    grants: Vec<Grant>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
}

/// A token as listed: its entry without the digest.
#[derive(Debug, Serialize)]
pub(crate) struct TokenView {
    id: String,
    name: String,
    grants: Vec<Grant>,
    created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked_at: Option<DateTime<Utc>>,
}

impl TokenView {
    fn of(e: TokenEntry, managed: &[String]) -> TokenView {
        TokenView {
            id: e.id,
            name: e.name,
            grants: e
                .grants
                .into_iter()
                .filter(|g| managed.contains(&g.project))
                .collect(),
            created_at: e.created_at,
            expires_at: e.expires_at,
            revoked_at: e.revoked_at,
        }
    }
}

fn book(st: &Shared) -> ApiResult<std::sync::Arc<dyn TokenBook>> {
    st.tokens.book.clone().ok_or_else(|| {
        ApiError::from(memoir::Error::from(StoreError::Unsupported {
            operation: "keep access tokens",
        }))
    })
}

fn no_token(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no live token {id} among those this token manages"),
    )
}

/// `GET /v1/tokens`.
pub(crate) async fn list(
    State(st): State<Shared>,
    auth: Auth,
) -> ApiResult<Json<serde_json::Value>> {
    let book = book(&st)?;
    let managed = auth.caller.projects_with(Role::Manage);
    let tokens = blocking(move || {
        Ok::<_, memoir::Error>(
            book.list()?
                .into_iter()
                .filter(|e| e.grants.iter().any(|g| managed.contains(&g.project)))
                .map(|e| TokenView::of(e, &managed))
                .collect::<Vec<_>>(),
        )
    })
    .await?;
    Ok(Json(serde_json::json!({ "tokens": tokens })))
}

/// `POST /v1/tokens`.
pub(crate) async fn create(
    State(st): State<Shared>,
    auth: Auth,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    let req: CreateToken = object_body(json)?;
    let book = book(&st)?;
    if let Some(g) = req
        .grants
        .iter()
        .find(|g| !auth.caller.has(&g.project, Role::Manage))
    {
        return Err(forbidden(format!(
            "granting roles on project {} needs the manage role there",
            g.project
        )));
    }
    let minted = memoir::access::mint(&req.name, req.grants, req.expires_at)?;
    let entry = minted.entry.clone();
    blocking(move || book.insert(&entry)).await?;
    let managed = auth.caller.projects_with(Role::Manage);
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({
            "token": minted.secret,
            "entry": TokenView::of(minted.entry, &managed),
        })),
    ))
}

/// `DELETE /v1/tokens/{id}`.
pub(crate) async fn revoke(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(id) = path?;
    let book = book(&st)?;
    let caller = auth.caller;
    blocking(move || {
        let entry = book
            .get(&id)?
            .filter(|e| {
                e.grants
                    .iter()
                    .any(|g| caller.has(&g.project, Role::Manage))
            })
            .ok_or_else(|| no_token(&id))?;
        if let Some(g) = entry
            .grants
            .iter()
            .find(|g| !caller.has(&g.project, Role::Manage))
        {
            return Err(forbidden(format!(
                "token {id} also has roles on project {}, which this token does not manage",
                g.project
            )));
        }
        if !book.revoke(&id)? {
            return Err(no_token(&id));
        }
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
