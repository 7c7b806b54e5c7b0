//! Bearer-token authentication and the role check: the [`Auth`] extractor
//! turns an `Authorization: Bearer <token>` header into the caller
//! ([`memoir::access::Caller`]: a member with roles per project) and the
//! project the request works on, and refuses it unless the caller holds
//! what the route's rule ([`crate::rules`]) requires.
//!
//! Statuses: a missing, malformed, unknown, expired or revoked token is 401;
//! a known token without the role is 403 `forbidden`. Minted tokens
//! (`memoir_<id>_...`) are read from the store's token book on every
//! request (no cache: a revocation holds at once on every server over the
//! same store); tokens-file tokens from the [`TokenIndex`] built at start.

use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use memoir::access::{self, AuthError, Caller, Role, TokenBook};

use crate::config::TokenIndex;
use crate::error::ApiError;
use crate::rules::{self, Access};

/// The tokens a server accepts: its tokens file and its store's book.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    /// The tokens file's tokens.
    pub index: Arc<TokenIndex>,
    /// Tokens minted at run time (`None`: a store that keeps none).
    pub book: Option<Arc<dyn TokenBook>>,
}

impl Tokens {
    /// The caller a presented token is: a minted secret from the book (read
    /// on the blocking pool), any other from the tokens file.
    pub async fn caller(&self, token: String) -> Result<Caller, ApiError> {
        let index = self.index.clone();
        let fixed = move |t: &str| index.find(t).map(|g| g.caller());
        // Only a minted secret reads the book (on the blocking pool).
        let found = match (&self.book, access::secret_id(&token)) {
            (Some(book), Some(_)) => {
                let book = book.clone();
                crate::error::blocking(move || access::identify(Some(book.as_ref()), &token, fixed))
                    .await?
            }
            _ => access::identify(None, &token, fixed)?,
        };
        found.map_err(unauthorized)
    }
}

fn unauthorized(e: AuthError) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.to_string())
}

pub(crate) fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
}

/// The authenticated caller and the project the request works on.
pub(crate) struct Auth {
    /// The project (for a team route: the one named by the header, or empty).
    pub project: String,
    /// Who is calling.
    pub caller: Caller,
}

impl Auth {
    /// Whether the caller may read every session of the project (else only
    /// its own, through `publish`).
    pub fn reads_all(&self) -> bool {
        self.caller.reads_all(&self.project)
    }

    /// The caller's member name.
    pub fn member(&self) -> &str {
        &self.caller.member
    }
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
        let path = parts
            .extensions
            .get::<MatchedPath>()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let rule = rules::rule(parts.method.as_str(), &path);
        let token = access::bearer(
            parts
                .headers
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
        )
        .map_err(unauthorized)?
        .to_string();
        let caller = state.tokens().caller(token).await?;
        let named = match parts.headers.get(access::PROJECT_HEADER) {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| ApiError::bad_request("the project header is not text"))?
                    .to_string(),
            ),
            None => None,
        };
        let project = match rule {
            Some(Access::Project(_)) => {
                caller.project_for(named.as_deref()).map_err(|e| match e {
                    memoir::Error::Invalid(m) => ApiError::bad_request(m),
                    e => ApiError::from(e),
                })?
            }
            _ => named.unwrap_or_default(),
        };
        let allowed = match rule {
            None | Some(Access::Public) => false,
            Some(Access::Project(roles)) => caller.has_any(&project, roles),
            Some(Access::Team(role)) if project.is_empty() => {
                !caller.projects_with(role).is_empty()
            }
            Some(Access::Team(role)) => caller.has(&project, role),
        };
        if !allowed {
            let team;
            let need: &[Role] = match rule {
                Some(Access::Project(roles)) => roles,
                Some(Access::Team(role)) => {
                    team = [role];
                    &team
                }
                _ => &[],
            };
            return Err(forbidden(access::missing_roles(need, &project)));
        }
        Ok(Auth { project, caller })
    }
}
