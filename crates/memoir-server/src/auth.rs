//! Bearer-token authentication: the [`Auth`] extractor turns an
//! `Authorization: Bearer <token>` header into the caller's project (tokens
//! are kept as BLAKE3 digests), or a 401.

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use chrono::Utc;

use crate::config::TokenGrant;
use crate::error::ApiError;
use crate::handlers::Shared;

/// Accepted tokens by BLAKE3 digest.
pub(crate) type Tokens = HashMap<[u8; 32], TokenGrant>;

/// Index `grants` by the digest of their token.
pub(crate) fn index(grants: Vec<TokenGrant>) -> Tokens {
    grants
        .into_iter()
        .map(|g| (*blake3::hash(g.token.as_bytes()).as_bytes(), g))
        .collect()
}

/// The authenticated caller: its project.
pub(crate) struct Auth {
    /// The project the token reads and writes.
    pub project: String,
}

impl FromRequestParts<Shared> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Shared,
    ) -> Result<Self, Self::Rejection> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
        let text = value
            .to_str()
            .map_err(|_| unauthorized("malformed Authorization header"))?;
        let token = text
            .strip_prefix("Bearer ")
            .ok_or_else(|| unauthorized("the Authorization header must be `Bearer <token>`"))?
            .trim();
        let grant = state
            .tokens
            .get(blake3::hash(token.as_bytes()).as_bytes())
            .ok_or_else(|| unauthorized("unknown token"))?;
        if grant.expires_at.is_some_and(|t| t <= Utc::now()) {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "token_expired",
                "the token has expired",
            ));
        }
        Ok(Auth {
            project: grant.project.clone(),
        })
    }
}
