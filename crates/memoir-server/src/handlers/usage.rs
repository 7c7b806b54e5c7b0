//! `GET /v1/usage`: token usage and cost of the projects on which the caller
//! holds the `usage` role (or the one named by `X-Memoir-Project`), from
//! the one implementation in [`memoir::usage`] (the numbers `memoir usage`
//! prints for the same sessions): the team report.
//!
//! Query parameters (all optional): `by` (comma-separated day, week, month,
//! session, project, model, agent, member), `agent`, `session` (a full id in
//! the caller's project), `model` (substring), `since`/`until` (RFC 3339,
//! `since` inclusive, `until` exclusive), `blocks=true` for 5-hour billing
//! blocks. The body is a [`memoir::usage::UsageReport`], or `{format,
//! blocks, prices}`. Prices: the server's configured table (`$MEMOIR_HOME`),
//! loaded once.
//!
//! One project: the report runs on its [`crate::namespace::ProjectStore`].
//! Several: on the shared store, selecting the sessions whose header names
//! one of them. Per-session rows and the `session` filter name sessions, so
//! they need `read` on the project (one project only); the `usage` role
//! alone sees aggregates, never content.

use std::sync::{Arc, OnceLock};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use memoir::access::Role;
use memoir::store::LogStore;
use memoir::usage::{self, GroupKey, PriceTable, UsageQuery};
use serde::Deserialize;

use super::Shared;
use crate::auth::{forbidden, Auth};
use crate::error::{blocking, ApiError, ApiResult};

/// The query string of `GET /v1/usage`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Params {
    by: Option<String>,
    agent: Option<String>,
    session: Option<String>,
    model: Option<String>,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    #[serde(default)]
    blocks: bool,
}

static PRICES: OnceLock<PriceTable> = OnceLock::new();

fn prices() -> Result<&'static PriceTable, memoir::Error> {
    if let Some(p) = PRICES.get() {
        return Ok(p);
    }
    let home = memoir::paths::memoir_home().ok();
    let table = PriceTable::configured(home.as_deref(), None)?;
    Ok(PRICES.get_or_init(|| table))
}

/// `GET /v1/usage`.
pub(crate) async fn get_usage(
    State(st): State<Shared>,
    auth: Auth,
    params: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<serde_json::Value>> {
    let Query(p) =
        params.map_err(|r| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", r.body_text()))?;
    let group_by = match p.by.as_deref() {
        None | Some("") => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|s| s.trim().parse::<GroupKey>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(ApiError::from)?,
    };
    let projects = if auth.project.is_empty() {
        auth.caller.projects_with(Role::Usage)
    } else {
        vec![auth.project.clone()]
    };
    let per_session = p.session.is_some() || group_by.contains(&GroupKey::Session);
    if per_session && (projects.len() != 1 || !auth.caller.has(&projects[0], Role::Read)) {
        return Err(forbidden(
            "per-session usage (by=session, session=) needs the read role on one project \
             (name it with X-Memoir-Project)",
        ));
    }
    let (store, project): (Arc<dyn LogStore>, _) = match projects.as_slice() {
        [one] => (
            Arc::new(crate::namespace::ProjectStore::new(st.store.clone(), one)),
            None,
        ),
        many => (
            st.store.clone(),
            Some(usage::ProjectFilter::AnyOf(many.to_vec())),
        ),
    };
    let value = blocking(move || {
        if let Some(id) = &p.session {
            // A full id of the caller's project (not a prefix).
            memoir::id::validate(id)?;
            if store.read_header(id)?.is_none() {
                return Err(memoir::Error::NotFound(id.clone()));
            }
        }
        let store = store.as_ref();
        let query = UsageQuery {
            project,
            agent: p.agent,
            session: p.session,
            model: p.model,
            since: p.since,
            until: p.until,
            group_by,
            ..UsageQuery::default()
        };
        let prices = prices()?;
        if p.blocks {
            let blocks = usage::blocks_report(store, &query, prices, Utc::now())?.blocks;
            return Ok(serde_json::json!({
                "format": usage::USAGE_FORMAT,
                "blocks": blocks,
                "prices": prices.origin,
            }));
        }
        let report = usage::report(store, &query, prices)?;
        Ok(serde_json::to_value(report)?)
    })
    .await?;
    Ok(Json(value))
}
