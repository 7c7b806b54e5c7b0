//! `memoir ui`: a local web view of a store's sessions (list and tree,
//! conversation, search, usage, file changes), for one user on one machine.
//!
//! The view is a small hand-written page (`assets/`: HTML, CSS, vanilla JS,
//! embedded in the binary; the page never loads anything from elsewhere)
//! over a read-only JSON API (`api`, and `live`: a session's new messages
//! as Server-Sent Events while its page is open) whose handlers call the library like
//! every other handler of this crate: the manager's listing and replay,
//! [`memoir::search`], [`memoir::usage`], [`memoir::changes`].
//!
//! What guards it ([`guard`], in front of every route):
//! - **a per-run secret**: the URL printed at start carries `?token=…`; the
//!   first request with it gets a `HttpOnly; SameSite=Strict` cookie and a
//!   redirect to the same URL without the token. Every other request needs
//!   the cookie: none is 401, a wrong one (or a wrong `?token=`) 403.
//! - **Host and Origin checks**: `Host` must be `127.0.0.1:PORT` or
//!   `localhost:PORT` (a DNS-rebound name is refused with 403), and an
//!   `Origin`, when sent, must be one of those as `http://` origins.
//! - **headers**: a strict Content-Security-Policy (`default-src 'self'`, no
//!   inline script or style, no framing), `nosniff`, `no-referrer`, and
//!   `no-store` caching.
//!
//! **The team view** ([`team_router`], mounted by `memoir serve`): the same
//! page and handlers over the server's shared store, where the secret is
//! any bearer token of the server ([`crate::TokenIndex`]): `/?token=TOKEN`
//! trades it for the cookie like above, and every request after is scoped
//! to that token's project (its [`crate::namespace::ProjectStore`]: another
//! project's session is not found, its search hits and usage are never
//! counted). The `Host` and `Origin` checks name the server's own address
//! and the host names it was given ([`crate::config::TeamUi`]).

mod api;
mod guard;
mod live;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use memoir::store::LogStore;

pub use guard::CONTENT_SECURITY_POLICY;
pub use live::{MAX_STREAMS, POLL as LIVE_POLL};

/// What the web view serves.
pub struct UiConfig {
    /// The store shown (every session in it).
    pub store: Arc<dyn LogStore>,
    /// The secret of this run (the `?token=` of the printed URL).
    pub token: String,
    /// The port the listener is bound to (the only one `Host` may name).
    pub port: u16,
    /// `$MEMOIR_HOME`, for the configured price table (`None`: the shipped one).
    pub home: Option<PathBuf>,
}

/// A fresh random secret for one run: 256 bits from the operating system's
/// generator, as 64 hex digits.
pub fn new_token() -> String {
    let a = uuid::Uuid::new_v4();
    let b = uuid::Uuid::new_v4();
    let c = uuid::Uuid::new_v4();
    // Hash three v4 UUIDs (366 random bits) down to 256 uniform bits.
    let mut h = blake3::Hasher::new();
    h.update(a.as_bytes());
    h.update(b.as_bytes());
    h.update(c.as_bytes());
    h.finalize().to_hex().to_string()
}

/// The URL to open: `http://127.0.0.1:PORT/?token=TOKEN`.
pub fn start_url(port: u16, token: &str) -> String {
    format!("http://127.0.0.1:{port}/?token={token}")
}

/// What the UI's handlers share.
pub(crate) struct UiState {
    /// The store this request sees (a project's view in the team view).
    pub store: Arc<dyn LogStore>,
    /// The whole store (the search index's).
    pub shared: Arc<dyn LogStore>,
    /// The caller's project in the team view.
    pub project: Option<String>,
    pub home: Option<PathBuf>,
    pub prices: Arc<std::sync::OnceLock<memoir::usage::PriceTable>>,
    pub search: Arc<Mutex<Option<memoir::search::SearchIndex>>>,
    /// The last listing of the whole store, reused while it does not
    /// change (a project's view lists afresh: its own memo, never shared).
    pub listing: Arc<Mutex<memoir::manager::ListingMemo>>,
    /// One permit per open live stream ([`live::MAX_STREAMS`]).
    pub streams: Arc<tokio::sync::Semaphore>,
    /// Turns `true` when the server shuts down: live streams end.
    pub closing: Arc<tokio::sync::watch::Sender<bool>>,
}

pub(crate) type Ui = Arc<UiState>;

/// The state a handler works with: the router's, narrowed to the caller's
/// project when the gate authenticated one ([`guard::Project`]).
pub(crate) struct Scoped(pub Ui);

impl axum::extract::FromRequestParts<Ui> for Scoped {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        st: &Ui,
    ) -> Result<Self, Self::Rejection> {
        let Some(guard::Project(project)) = parts.extensions.get::<guard::Project>() else {
            return Ok(Scoped(st.clone()));
        };
        Ok(Scoped(Arc::new(UiState {
            store: Arc::new(crate::namespace::ProjectStore::new(
                st.shared.clone(),
                project,
            )),
            shared: st.shared.clone(),
            project: Some(project.clone()),
            home: st.home.clone(),
            prices: st.prices.clone(),
            search: st.search.clone(),
            listing: Default::default(),
            streams: st.streams.clone(),
            closing: st.closing.clone(),
        })))
    }
}

/// The web view's router: the page, its assets and its API, behind the guard.
pub fn router(config: UiConfig) -> Router {
    routes(config, Arc::new(tokio::sync::watch::channel(false).0))
}

fn state(
    store: Arc<dyn LogStore>,
    home: Option<PathBuf>,
    closing: Arc<tokio::sync::watch::Sender<bool>>,
) -> Ui {
    Arc::new(UiState {
        shared: store.clone(),
        store,
        project: None,
        home,
        prices: Default::default(),
        search: Default::default(),
        listing: Default::default(),
        streams: live::stream_slots(),
        closing,
    })
}

fn routes(config: UiConfig, closing: Arc<tokio::sync::watch::Sender<bool>>) -> Router {
    let state = state(config.store, config.home, closing);
    let guard = guard::Guard::new(&config.token, config.port);
    app()
        .fallback(api::not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}

/// The team view of `memoir serve`: the page and its API over the shared
/// `store`, each request scoped to the project of the bearer token its
/// cookie carries. No fallback: merged beside the server's API.
pub fn team_router(
    store: Arc<dyn LogStore>,
    tokens: crate::TokenIndex,
    ui: &crate::config::TeamUi,
) -> Router {
    let state = state(
        store,
        memoir::paths::memoir_home().ok(),
        Arc::new(tokio::sync::watch::channel(false).0),
    );
    let guard = guard::Guard::team(tokens, ui);
    app()
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}

/// The page, its assets and its API.
fn app() -> Router<Ui> {
    Router::new()
        .route("/", get(page))
        .route("/s/{id}", get(page))
        .route("/s/{id}/changes", get(page))
        .route("/blame", get(page))
        .route("/search", get(page))
        .route("/usage", get(page))
        .route("/assets/app.js", get(app_js))
        .route("/assets/app.css", get(app_css))
        .route("/assets/icon.svg", get(icon))
        .route("/api/sessions", get(api::sessions))
        .route("/api/facets", get(api::facets))
        .route("/api/costs", get(api::costs))
        .route("/api/sessions/{id}", get(api::session))
        .route(
            "/api/sessions/{id}/block/{message}/{block}",
            get(api::block),
        )
        .route("/api/sessions/{id}/changes", get(api::changes))
        .route("/api/sessions/{id}/events", get(live::events))
        .route("/api/search", get(api::search))
        .route("/api/usage", get(api::usage))
        .route("/api/blame", get(api::blame))
}

/// Serve the web view on `listener` until `shutdown` resolves (open live
/// streams end then, so shutdown does not wait for their clients).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: UiConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::ServeError> {
    let closing = Arc::new(tokio::sync::watch::channel(false).0);
    let tell = closing.clone();
    let shutdown = async move {
        shutdown.await;
        tell.send_replace(true);
    };
    axum::serve(listener, routes(config, closing))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

fn asset(content_type: &'static str, body: &'static [u8]) -> Response {
    let mut resp = body.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

async fn page() -> Response {
    asset(
        "text/html; charset=utf-8",
        include_bytes!("assets/index.html"),
    )
}

async fn app_js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_bytes!("assets/app.js"),
    )
}

async fn app_css() -> Response {
    asset("text/css; charset=utf-8", include_bytes!("assets/app.css"))
}

async fn icon() -> Response {
    asset("image/svg+xml", include_bytes!("assets/icon.svg"))
}
