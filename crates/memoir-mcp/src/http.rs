//! Streamable HTTP (`memoir mcp --http ADDR`): the SDK's
//! `StreamableHttpService` at `/mcp`, behind `memoir serve`'s bearer-token
//! check ([`memoir_server::TokenIndex`]). Every request must carry a valid
//! token (401 `{error, message}` otherwise, as `memoir serve` answers); the
//! token's project is handed to the tools as a [`Tenant`], so a caller only
//! ever sees its own project's sessions and notes.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use memoir_server::TokenIndex;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::{MemoirMcp, Tenant};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

async fn authenticate(
    State(tokens): State<Arc<TokenIndex>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match tokens.authenticate(header) {
        Ok(grant) => {
            let tenant = Tenant(grant.project.clone());
            request.extensions_mut().insert(tenant);
            next.run(request).await
        }
        Err(e) => {
            let body = serde_json::json!({ "error": e.code(), "message": e.to_string() });
            let mut r = Response::new(Body::from(body.to_string()));
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            r
        }
    }
}

/// The router: `POST/GET/DELETE /mcp`, every request authenticated by
/// `tokens` (`None`: no authentication, for a local single-user server on
/// loopback, `--no-auth`). `listen` is added to the accepted `Host` values
/// (loopback names always are).
pub fn router(server: MemoirMcp, tokens: Option<TokenIndex>, listen: SocketAddr) -> axum::Router {
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
    match tokens {
        Some(tokens) => router.layer(axum::middleware::from_fn_with_state(
            Arc::new(tokens),
            authenticate,
        )),
        None => router,
    }
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
