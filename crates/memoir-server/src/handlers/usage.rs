//! `GET /v1/usage`: the caller's project's token usage and cost, from the
//! one implementation in [`memoir::usage`] (the numbers `memoir usage`
//! prints for the same sessions).
//!
//! Query parameters (all optional): `by` (comma-separated day, week, month,
//! session, project, model, agent), `agent`, `session` (a full id in the
//! caller's project), `model` (substring), `since`/`until` (RFC 3339, `since`
//! inclusive, `until` exclusive), `blocks=true` for 5-hour billing blocks.
//! The body is a [`memoir::usage::UsageReport`], or `{format, blocks, prices}`.
//! Prices: the server's configured table (`$MEMOIR_HOME`), loaded once.
//! The report runs on the caller's [`crate::namespace::ProjectStore`], so
//! another project's sessions are neither counted nor read.

use std::sync::OnceLock;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use memoir::store::LogStore;
use memoir::usage::{self, GroupKey, PriceTable, UsageQuery};
use serde::Deserialize;

use super::Shared;
use crate::auth::Auth;
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
    let store = st.project(&auth);
    let value = blocking(move || {
        if let Some(id) = &p.session {
            // A full id of the caller's project (not a prefix).
            memoir::id::validate(id)?;
            if store.read_header(id)?.is_none() {
                return Err(memoir::Error::NotFound(id.clone()));
            }
        }
        let query = UsageQuery {
            project: None,
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
            let blocks = usage::blocks_report(&store, &query, prices, Utc::now())?.blocks;
            return Ok(serde_json::json!({
                "format": usage::USAGE_FORMAT,
                "blocks": blocks,
                "prices": prices.origin,
            }));
        }
        let report = usage::report(&store, &query, prices)?;
        Ok(serde_json::to_value(report)?)
    })
    .await?;
    Ok(Json(value))
}
