//! Bearer-token authentication: the [`Auth`] extractor turns an
//! `Authorization: Bearer <token>` header into the caller's project
//! ([`TokenIndex::authenticate`]: tokens are kept as BLAKE3 digests), or a 401.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};

use crate::config::TokenIndex;
use crate::error::ApiError;

/// Accepted tokens by BLAKE3 digest.
pub(crate) type Tokens = TokenIndex;

/// Index `grants` by the digest of their token.
pub(crate) fn index(grants: Vec<crate::config::TokenGrant>) -> Tokens {
    TokenIndex::new(grants)
}

/// The authenticated caller: its project.
pub(crate) struct Auth {
    /// The project the token reads and writes.
    pub project: String,
}

/// A router state that holds the accepted tokens: what [`Auth`] needs of
/// it, so that this module knows nothing of the handlers' state.
pub(crate) trait HasTokens {
    /// The accepted tokens.
    fn tokens(&self) -> &Tokens;
}

impl<S: HasTokens + Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let grant = state
            .tokens()
            .authenticate(
                parts
                    .headers
                    .get(header::AUTHORIZATION)
                    .map(|v| v.as_bytes()),
            )
            .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.to_string()))?;
        Ok(Auth {
            project: grant.project.clone(),
        })
    }
}
