//! Owner leases over HTTP (`/v1/sessions/{id}/lease`): the server takes the
//! store's own lease ([`memoir::store::LogStore::acquire_lease`]) on the
//! client's behalf and keeps it, with the client's holder, until the client
//! releases it or stops renewing it. A lease not renewed within its TTL is
//! the lease of a holder that died: the next taker gets it and learns whose
//! it was (`recovered_from`), as with the file store's stale lock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use memoir::client::wire;
use memoir::store::lease::{busy, Holder};
use memoir::store::{Lease, LogStore};
use memoir::Error;

use super::{object_body, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};

/// Default lease lifetime without a renewal.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Shortest and longest lifetime a client may ask for.
const TTL_RANGE: std::ops::RangeInclusive<u64> = 5..=3600;

/// One lease held for a client.
struct Held {
    token: String,
    holder: Holder,
    ttl: Duration,
    expires: Instant,
    /// The store's lease, released when this entry is dropped.
    _lease: Lease,
}

/// The leases the server holds, by stored session id (`project~id`).
#[derive(Default)]
pub(crate) struct LeaseTable {
    held: Mutex<HashMap<String, Held>>,
}

impl LeaseTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `POST /v1/sessions/{id}/lease`.
pub(crate) async fn acquire(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<wire::LeaseGranted>)> {
    let id = super::session_id(path)?;
    let req: wire::LeaseRequest = object_body(json)?;
    let ttl = req.ttl_secs.unwrap_or(DEFAULT_TTL.as_secs());
    if !TTL_RANGE.contains(&ttl) {
        return Err(ApiError::bad_request(format!(
            "ttl_secs must be between {} and {}",
            TTL_RANGE.start(),
            TTL_RANGE.end()
        )));
    }
    let ttl = Duration::from_secs(ttl);
    let ps = st.project(&auth);
    let only = super::only_own(&auth);
    let state = st.clone();
    let granted = blocking(move || {
        super::check_own(&ps, only.as_deref(), &id)?;
        let key = ps.stored(&id)?;
        let mut held = state.leases.lock();
        let now = Instant::now();
        let mut recovered_from = None;
        if let Some(h) = held.get(&key) {
            if h.expires > now {
                return Err(busy(&id, h.holder.clone()));
            }
            recovered_from = held.remove(&key).map(|h| h.holder);
        }
        // Expired leases of other sessions release their store locks too
        // (so a local process can drive those sessions again).
        held.retain(|_, h| h.expires > now);
        let lease = ps.acquire_lease(&id)?;
        let recovered_from = recovered_from.or_else(|| lease.recovered_from.clone());
        let token = memoir::id::new_id();
        held.insert(
            key,
            Held {
                token: token.clone(),
                holder: req.holder.clone(),
                ttl,
                expires: Instant::now() + ttl,
                _lease: lease,
            },
        );
        Ok::<_, Error>(wire::LeaseGranted {
            lease: token,
            holder: req.holder,
            recovered_from,
            ttl_secs: ttl.as_secs(),
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(granted)))
}

/// The stored id and lease token of a `/lease/{lease}` route.
fn lease_path(
    st: &Shared,
    auth: &Auth,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<(String, String)> {
    let Path((id, token)) = path?;
    memoir::id::validate(&id)?;
    Ok((st.project(auth).stored(&id)?, token))
}

fn lost(token: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no lease {token:?} is held (released, expired and taken over, or never granted)"),
    )
}

/// `POST /v1/sessions/{id}/lease/{lease}`: renew (another TTL from now).
pub(crate) async fn renew(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<StatusCode> {
    let (key, token) = lease_path(&st, &auth, path)?;
    let mut held = st.leases.lock();
    match held.get_mut(&key) {
        Some(h) if h.token == token => {
            h.expires = Instant::now() + h.ttl;
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(lost(&token)),
    }
}

/// `DELETE /v1/sessions/{id}/lease/{lease}`: release.
pub(crate) async fn release(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<StatusCode> {
    let (key, token) = lease_path(&st, &auth, path)?;
    let mut held = st.leases.lock();
    match held.get(&key) {
        Some(h) if h.token == token => {
            // Releasing the store's lease may close a connection: not here.
            let released = held.remove(&key);
            drop(held);
            tokio::task::spawn_blocking(move || drop(released));
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(lost(&token)),
    }
}
