//! Streamable HTTP (`memoir mcp --http ADDR`): the SDK's
//! `StreamableHttpService` at `/mcp`, behind `memoir serve`'s bearer tokens
//! ([`HttpTokens`]: the tokens file, and the tokens minted at run time in
//! the store's book, read through [`memoir::access::identify`] on every
//! request, so a revoked token is refused on its next request). Every
//! request must carry a valid token (401 `{error, message}` otherwise, as
//! `memoir serve` answers) with a role on the project it works on (its
//! only project, or the one named by `X-Memoir-Project`; 403 otherwise).
//! The project is handed to the tools as a [`Tenant`] and the token's
//! [`Caller`] with it: each tool call is checked against its rule
//! ([`crate::rules`]), so a caller only ever sees its own project's
//! sessions and notes, and only does what its roles allow.
//!
//! Browsers: a request carrying an `Origin` header is served only when that
//! origin is the server itself on a loopback name (`localhost`,
//! `127.0.0.0/8`, `[::1]`) or the listening address, on the listening port;
//! any other origin gets 403 before authentication, with or without
//! `--no-auth` (the transport specification's defence against DNS
//! rebinding). A request without `Origin` (not from a browser) is served.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use memoir::access::{self, AuthError, Role, TokenBook};
use memoir_server::TokenIndex;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::{MemoirMcp, Tenant};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// The tokens `memoir mcp --http` accepts: its tokens file and its store's
/// book of run-time tokens (`memoir serve tokens create`).
#[derive(Debug, Clone, Default)]
pub struct HttpTokens {
    /// The tokens file's tokens.
    pub index: TokenIndex,
    /// Tokens minted at run time (`None`: a store that keeps none).
    pub book: Option<Arc<dyn TokenBook>>,
}

impl From<TokenIndex> for HttpTokens {
    fn from(index: TokenIndex) -> HttpTokens {
        HttpTokens { index, book: None }
    }
}

fn unauthorized(e: AuthError) -> Response {
    let mut r = json_error(StatusCode::UNAUTHORIZED, e.code(), &e.to_string());
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    r
}

async fn authenticate(
    State(tokens): State<Arc<HttpTokens>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let secret = match access::bearer(header) {
        Ok(s) => s.to_string(),
        Err(e) => return unauthorized(e),
    };
    let named = match request.headers().get(access::PROJECT_HEADER) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(v) => Some(v.to_string()),
            Err(_) => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    "the project header is not text",
                )
            }
        },
    };
    // The book is read on the blocking pool (a file or a database row).
    let found = {
        let tokens = tokens.clone();
        tokio::task::spawn_blocking(move || {
            let book = tokens
                .book
                .as_deref()
                .filter(|_| access::secret_id(&secret).is_some());
            access::identify(book, &secret, |t| tokens.index.find(t).map(|g| g.caller()))
        })
        .await
    };
    let caller = match found {
        Ok(Ok(Ok(caller))) => caller,
        Ok(Ok(Err(e))) => return unauthorized(e),
        Ok(Err(e)) => {
            let kind = e.kind();
            return json_error(
                memoir_server::ApiError::status_of(kind),
                kind.code(),
                &e.to_string(),
            );
        }
        Err(e) => {
            return json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "io",
                &format!("authentication failed: {e}"),
            )
        }
    };
    let project = match caller.project_for(named.as_deref()) {
        Ok(p) => p,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, "bad_request", &e.to_string()),
    };
    // Some role on the project; which tools it allows is checked per call.
    if !caller.grants.contains_key(&project) {
        return json_error(
            StatusCode::FORBIDDEN,
            "forbidden",
            &access::missing_roles(&Role::ALL, &project),
        );
    }
    request.extensions_mut().insert(Tenant(project));
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// Whether a browser page of origin `origin` may call a server listening
/// on `listen`: an `http` or `https` origin whose host is a loopback name or
/// address (or the listening address itself) and whose port is the
/// listening port. Anything else (another host or port, `null`, a malformed
/// value) is foreign.
pub fn origin_allowed(origin: &str, listen: SocketAddr) -> bool {
    let (authority, default_port) = match origin.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (rest, 80),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (rest, 443),
        _ => return false,
    };
    if authority.is_empty() || authority.contains(['/', '@', '?', '#', ' ']) {
        return false;
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return false;
        };
        match after {
            "" => (host, None),
            p => match p.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return false,
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => default_port,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            match p.parse::<u16>() {
                Ok(p) => p,
                Err(_) => return false,
            }
        }
        Some(_) => return false,
    };
    if port != listen.port() {
        return false;
    }
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || (ip == listen.ip() && !ip.is_unspecified()),
        Err(_) => false,
    }
}

async fn check_origin(State(listen): State<SocketAddr>, request: Request, next: Next) -> Response {
    let origin = match request.headers().get(header::ORIGIN) {
        None => return next.run(request).await,
        Some(v) => v.to_str().ok().map(str::to_string),
    };
    if origin.as_deref().is_some_and(|o| origin_allowed(o, listen)) {
        return next.run(request).await;
    }
    let message = format!(
        "origin {} may not call this server (only the server's own loopback origin may)",
        origin.as_deref().unwrap_or("<not text>")
    );
    json_error(StatusCode::FORBIDDEN, "forbidden", &message)
}

fn json_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": code, "message": message });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The router: `POST/GET/DELETE /mcp`, every request authenticated by
/// `tokens` (`None`: no authentication, for a local single-user server on
/// loopback, `--no-auth`). `listen` is added to the accepted `Host` values
/// (loopback names always are).
pub fn router(server: MemoirMcp, tokens: Option<HttpTokens>, listen: SocketAddr) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default();
    let ip = listen.ip().to_string();
    config.allowed_hosts.push(ip.clone());
    config.allowed_hosts.push(listen.to_string());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(MCP_PATH, service);
    let router = match tokens {
        Some(tokens) => router.layer(axum::middleware::from_fn_with_state(
            Arc::new(tokens),
            authenticate,
        )),
        None => router,
    };
    // Outermost: a foreign origin is refused before anything else runs.
    router.layer(axum::middleware::from_fn_with_state(listen, check_origin))
}

/// Serve `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), std::io::Error> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
