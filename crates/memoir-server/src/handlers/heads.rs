//! `POST /v1/heads`: where each of a list of the project's sessions ends
//! (last `seq` and the content digest of its last record), in one request:
//! what `memoir sync` asks before sending, so a session already on the
//! server costs no transfer.

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use memoir::client::wire;
use memoir::store::LogStore;
use memoir::Error;

use super::{object_body, Shared};
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};
use crate::MAX_RECORDS_PER_APPEND;

/// `POST /v1/heads`.
pub(crate) async fn heads(
    State(st): State<Shared>,
    auth: Auth,
    json: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<wire::HeadsResponse>> {
    let req: wire::HeadsRequest = object_body(json)?;
    if req.ids.len() > MAX_RECORDS_PER_APPEND {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "{} ids in one request; at most {MAX_RECORDS_PER_APPEND}",
                req.ids.len()
            ),
        ));
    }
    for id in &req.ids {
        memoir::id::validate(id).map_err(ApiError::from)?;
    }
    let ps = st.project(&auth);
    let heads = blocking(move || {
        let mut out = Vec::with_capacity(req.ids.len());
        for id in req.ids {
            let raw = match ps.read(&id) {
                Ok(raw) => raw,
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let Some(header) = raw.header.clone() else {
                continue;
            };
            let last = raw.records.last().cloned();
            let last_digest = match last {
                Some(rec) => {
                    let mut report = memoir::store::LoadReport::default();
                    let mut resolver = memoir::transcript::blobs::Resolver::new(&ps);
                    let rec = resolver.resolve_record(rec, &mut report);
                    wire::record_digest(&rec.record)?
                }
                None => wire::header_digest(&header)?,
            };
            out.push(wire::Head {
                id,
                last_seq: raw.last_seq,
                last_digest,
            });
        }
        Ok::<_, Error>(out)
    })
    .await?;
    Ok(Json(wire::HeadsResponse { heads }))
}
