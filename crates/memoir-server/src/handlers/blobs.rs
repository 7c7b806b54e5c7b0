//! Payload blobs over HTTP (`PUT`/`GET /v1/blobs/{hash}`): a client with a
//! blob store of its own (`memoir::client::RemoteStore`) uploads large
//! payloads once, before the record that references them, and downloads
//! them when it reads. The bytes go to the server store's blob store
//! ([`memoir::store::LogStore::blobs`]); the hash is the BLAKE3 of the body,
//! checked on upload; uploads are limited to `ServerConfig::max_blob` bytes.
//!
//! Project scope: blobs are content-addressed and shared by the whole store,
//! but a token reads only the blobs its project uploaded (during this
//! server's life) or its sessions (live or trashed) reference; any other
//! hash is "not found", whether or not another project holds it. The rule,
//! and the one that keeps a record from naming another project's blob, is
//! the library's ([`memoir::transcript::grants`]).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use memoir::client::wire;
use memoir::error::StoreError;
use memoir::store::LogStore;
use memoir::Error;

use super::Shared;
use crate::auth::Auth;
use crate::error::{blocking, ApiError, ApiResult};

fn blob_hash(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let Path(hash) = path?;
    if !memoir::blob::is_valid_hash(&hash) {
        return Err(ApiError::bad_request(format!(
            "invalid blob hash {hash:?}: expected 64 lowercase hex digits"
        )));
    }
    Ok(hash)
}

fn no_blob_store() -> ApiError {
    ApiError::from(Error::from(StoreError::Unsupported {
        operation: "store payload blobs",
    }))
}

fn blob_error(e: memoir::blob::BlobError) -> ApiError {
    match e {
        memoir::blob::BlobError::Storage(e) => ApiError::from(e),
        other => ApiError::from(Error::Corrupt {
            path: "blob store".into(),
            detail: other.to_string(),
        }),
    }
}

/// `PUT /v1/blobs/{hash}`: store the body under its hash (400 when the body
/// does not hash to it). `Content-Type` is kept as the payload's media type
/// where the store records one.
pub(crate) async fn put_blob(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<(StatusCode, Json<wire::BlobStored>)> {
    let hash = blob_hash(path)?;
    let body = body.map_err(|r| {
        let status = r.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "too_large"
        } else {
            "bad_request"
        };
        ApiError::new(status, code, r.body_text())
    })?;
    let actual = memoir::blob::hash_bytes(&body);
    if actual != hash {
        return Err(ApiError::bad_request(format!(
            "the body hashes to {actual}, not {hash}"
        )));
    }
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_string();
    let ps = st.project(&auth);
    let size = body.len() as u64;
    blocking(move || {
        let blobs = ps.blobs().ok_or_else(no_blob_store)?;
        blobs
            .store
            .put_payload(&body, &media_type)
            .map_err(blob_error)?;
        Ok::<_, ApiError>(())
    })
    .await?;
    st.blob_grants.grant(&auth.project, [hash.clone()]);
    Ok((StatusCode::CREATED, Json(wire::BlobStored { hash, size })))
}

/// `GET /v1/blobs/{hash}`: the verified bytes, if the token's project may
/// read them (see the module docs).
pub(crate) async fn get_blob(
    State(st): State<Shared>,
    auth: Auth,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let hash = blob_hash(path)?;
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such blob");
    let ps = st.project(&auth);
    let state = st.clone();
    let project = auth.project.clone();
    let key = hash.clone();
    let bytes = blocking(move || {
        let blobs = ps.blobs().ok_or_else(no_blob_store)?;
        if !state.blob_grants.may_read(&project, &ps, &key)? {
            return Err(not_found());
        }
        match blobs.store.load(&key) {
            Ok(bytes) => Ok(bytes),
            Err(memoir::blob::BlobError::NotFound(_)) => Err(not_found()),
            Err(e) => Err(blob_error(e)),
        }
    })
    .await?;
    let mut resp = bytes.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(resp)
}
