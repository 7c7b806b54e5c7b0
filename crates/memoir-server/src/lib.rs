//! `memoir serve`: one shared memory for many agent hosts.
//!
//! This crate owns the HTTP side: the axum [`router`] (a JSON API over any
//! [`memoir::store::LogStore`], the file store or PostgreSQL), bearer-token
//! authentication scoped to projects ([`TokenGrant`]), request limits, the
//! mapping of library errors to statuses, the OpenAPI document, and
//! [`serve`] with graceful shutdown. The CLI's `memoir serve` is a thin
//! wrapper; the blocking client and the JSON bodies live in `memoir::client`.
//!
//! Modules: [`config`] (tokens, store specs, listen rule), [`background`]
//! (a server in a background thread, for non-async callers), `auth` (the
//! bearer extractor), [`error`] (status mapping), [`namespace`] (per-project
//! ids), `handlers` (one file per concern; each calls the library).
//!
//! Projects: session `X` of project `P` is stored as `P~X`
//! ([`namespace::ProjectStore`]), and its header names the project. A token
//! only ever names its own project's sessions: another project's session of
//! the same id is a different session, never visible, never an error. Store
//! calls are blocking and run on tokio's blocking pool; graceful shutdown
//! stops accepting connections and waits for every request in flight.
//!
//! The API is documented in `docs/SERVER.md` and served at `/openapi.json`.

mod auth;
pub mod background;
pub mod config;
pub mod error;
mod handlers;
pub mod namespace;
/// `memoir ui`: the local web view.
#[cfg(feature = "ui")]
pub mod ui;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use axum::Router;

pub use background::BackgroundServer;
pub use config::{
    check_listen, open_store, parse_tokens, AuthError, ServeError, ServerConfig, TeamUi,
    TokenGrant, TokenIndex,
};
pub use error::ApiError;
use handlers::{blobs, fork, heads, lease, read, search, trash, write, AppState};

/// The OpenAPI 3.1 description of the API (served at `/openapi.json`).
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

/// Default request body limit: 8 MiB.
pub const DEFAULT_MAX_BODY: usize = 8 << 20;

/// Default largest payload blob one upload may carry: 256 MiB.
pub const DEFAULT_MAX_BLOB: usize = 256 << 20;

/// Most records one append may carry.
pub const MAX_RECORDS_PER_APPEND: usize = 10_000;

/// The header field naming a session's project.
pub const PROJECT_FIELD: &str = "project";

/// The API's router over `config`.
pub fn router(config: ServerConfig) -> Router {
    #[cfg(feature = "ui")]
    let team = config
        .ui
        .as_ref()
        .map(|ui| ui::team_router(config.store.clone(), auth::index(config.tokens.clone()), ui));
    let state = Arc::new(AppState {
        store: config.store,
        tokens: auth::index(config.tokens),
        #[cfg(feature = "search")]
        search: Default::default(),
        leases: Default::default(),
        blob_grants: Default::default(),
    });
    // Trash reads, owner leases and payload blobs: what
    // `RemoteStore` needs to run the manager like any other store.
    let engine_routes = Router::new()
        .route("/v1/trash", get(trash::list_trash))
        .route("/v1/trash/{id}/log", get(trash::get_trashed_log))
        .route("/v1/sessions/{id}/lease", post(lease::acquire))
        .route(
            "/v1/sessions/{id}/lease/{lease}",
            post(lease::renew).delete(lease::release),
        )
        .route(
            "/v1/blobs/{hash}",
            put(blobs::put_blob)
                .get(blobs::get_blob)
                .layer(DefaultBodyLimit::max(config.max_blob)),
        );
    let router = Router::new()
        .merge(engine_routes)
        .route("/healthz", get(handlers::health))
        .route("/openapi.json", get(handlers::openapi))
        .route(
            "/v1/sessions",
            get(read::list_sessions).post(write::create_session),
        )
        .route(
            "/v1/sessions/{id}",
            get(read::load_session).delete(write::delete_session),
        )
        .route("/v1/sessions/{id}/meta", get(read::get_meta))
        .route("/v1/sessions/{id}/log", get(read::get_log))
        .route("/v1/sessions/{id}/records", post(write::append_records))
        .route("/v1/sessions/{id}/fork", post(fork::fork_session))
        .route("/v1/sessions/{id}/export", get(read::export_session))
        .route("/v1/sessions/{id}/restore", post(write::restore_session))
        .route("/v1/sessions/{id}/purge", post(write::purge_session))
        .route("/v1/sessions/{id}/search", post(search::search_session))
        .route("/v1/heads", post(heads::heads))
        .route("/v1/usage", get(handlers::usage::get_usage));
    // Cross-session search.
    #[cfg(feature = "search")]
    let router = router.route("/v1/search", post(handlers::search_all::search_all));
    let router = router
        .fallback(handlers::fallback)
        .layer(DefaultBodyLimit::max(config.max_body))
        .with_state(state);
    // The team view's page and `/api/*` beside `/v1/*`, behind its own gate.
    #[cfg(feature = "ui")]
    let router = match team {
        Some(team) => router.merge(team),
        None => router,
    };
    router
}

/// Serve `config` on `listener` until `shutdown` resolves, then stop
/// accepting and wait for every request in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = router(config);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoir::store::Durability;

    #[test]
    fn tokens_file_is_checked() {
        let ok = parse_tokens(
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","expires_at":"2030-01-01T00:00:00Z"}]}"#,
        )
        .unwrap();
        assert_eq!(ok[0].project, "a");
        assert!(ok[0].expires_at.is_some());
        for bad in [
            r#"{"tokens":[{"token":"short","project":"a"}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"../a"}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","scope":"all"}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","expires_at":"soon"}]}"#,
            "not json",
        ] {
            assert!(
                matches!(parse_tokens(bad), Err(ServeError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn store_specs_and_listen_addresses() {
        let dir = std::env::temp_dir().join("memoir-server-unit");
        let cfg = open_store(dir.to_str().unwrap(), Durability::None).unwrap();
        assert_eq!(cfg.store.location("x"), dir.join("x.jsonl"));
        assert!(matches!(
            open_store("redis://127.0.0.1/0", Durability::Fsync),
            Err(ServeError::Config(_))
        ));
        assert!(check_listen(&"127.0.0.1:0".parse().unwrap(), false).is_ok());
        assert!(check_listen(&"[::1]:0".parse().unwrap(), false).is_ok());
        assert!(check_listen(&"0.0.0.0:8080".parse().unwrap(), false).is_err());
        assert!(check_listen(&"0.0.0.0:8080".parse().unwrap(), true).is_ok());
    }

    /// Every `kind` an issue in a response can carry is one the API
    /// description's `Issue` schema lists (a client validating responses
    /// against it accepts them all).
    #[test]
    fn openapi_lists_every_issue_kind_the_server_sends() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        let listed: Vec<&str> = doc["components"]["schemas"]["Issue"]["properties"]["kind"]["enum"]
            .as_array()
            .expect("the Issue schema lists its kinds")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        for kind in memoir::client::wire::WireIssue::KINDS {
            assert!(
                listed.contains(kind),
                "openapi.json lacks issue kind {kind:?}"
            );
        }
    }

    #[test]
    fn openapi_document_is_valid_json_naming_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        for path in [
            "/v1/sessions",
            "/v1/sessions/{id}",
            "/v1/sessions/{id}/meta",
            "/v1/sessions/{id}/log",
            "/v1/sessions/{id}/records",
            "/v1/sessions/{id}/fork",
            "/v1/sessions/{id}/export",
            "/v1/sessions/{id}/search",
            "/v1/sessions/{id}/restore",
            "/v1/sessions/{id}/purge",
            "/v1/usage",
            "/v1/heads",
            "/v1/search",
            "/v1/trash",
            "/v1/trash/{id}/log",
            "/v1/sessions/{id}/lease",
            "/v1/sessions/{id}/lease/{lease}",
            "/v1/blobs/{hash}",
        ] {
            assert!(doc["paths"][path].is_object(), "{path} missing");
        }
    }
}
