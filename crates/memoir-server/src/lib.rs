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
//! (a server in a background thread, for non-async callers), [`rules`]
//! (every route and the role it needs), `auth` (the bearer extractor and
//! role check), [`error`] (status mapping), [`namespace`] (per-project
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
pub mod rules;
/// `memoir ui`: the local web view.
#[cfg(feature = "ui")]
pub mod ui;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::Router;

pub use background::BackgroundServer;
pub use config::{
    check_listen, open_store, parse_tokens, AuthError, ServeError, ServerConfig, TeamUi,
    TokenGrant, TokenIndex, LEGACY_ROLES,
};
pub use error::ApiError;
use handlers::{blobs, fork, heads, lease, read, search, trash, write, AppState};
pub use rules::{Access, Route, ROUTES};

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

/// The API's router over `config`: every route of [`rules::ROUTES`], each
/// behind its access rule.
pub fn router(config: ServerConfig) -> Router {
    #[cfg(feature = "ui")]
    let team = config.ui.as_ref().map(|ui| {
        ui::team_router(
            config.store.clone(),
            TokenIndex::new(config.tokens.clone()),
            ui,
        )
    });
    let book = memoir::access::book_of(&config.store);
    let state = Arc::new(AppState {
        store: config.store,
        tokens: auth::Tokens {
            index: Arc::new(TokenIndex::new(config.tokens)),
            book,
        },
        #[cfg(feature = "search")]
        search: Default::default(),
        leases: Default::default(),
        blob_grants: Default::default(),
    });
    let mut router = Router::new();
    for route in rules::ROUTES {
        if let Some(h) = handler(route.method, route.path, config.max_blob) {
            router = router.route(route.path, h);
        }
    }
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

/// The handler of one route of [`rules::ROUTES`].
fn handler(method: &str, path: &str, max_blob: usize) -> Option<MethodRouter<handlers::Shared>> {
    use handlers::{tokens, usage};
    Some(match (method, path) {
        ("GET", "/healthz") => get(handlers::health),
        ("GET", "/openapi.json") => get(handlers::openapi),
        ("GET", "/v1/sessions") => get(read::list_sessions),
        ("POST", "/v1/sessions") => post(write::create_session),
        ("GET", "/v1/sessions/{id}") => get(read::load_session),
        ("DELETE", "/v1/sessions/{id}") => delete(write::delete_session),
        ("GET", "/v1/sessions/{id}/meta") => get(read::get_meta),
        ("GET", "/v1/sessions/{id}/log") => get(read::get_log),
        ("POST", "/v1/sessions/{id}/records") => post(write::append_records),
        ("POST", "/v1/sessions/{id}/fork") => post(fork::fork_session),
        ("GET", "/v1/sessions/{id}/export") => get(read::export_session),
        ("POST", "/v1/sessions/{id}/restore") => post(write::restore_session),
        ("POST", "/v1/sessions/{id}/purge") => post(write::purge_session),
        ("POST", "/v1/sessions/{id}/search") => post(search::search_session),
        ("POST", "/v1/sessions/{id}/lease") => post(lease::acquire),
        ("POST", "/v1/sessions/{id}/lease/{lease}") => post(lease::renew),
        ("DELETE", "/v1/sessions/{id}/lease/{lease}") => delete(lease::release),
        ("POST", "/v1/heads") => post(heads::heads),
        ("GET", "/v1/trash") => get(trash::list_trash),
        ("GET", "/v1/trash/{id}/log") => get(trash::get_trashed_log),
        ("PUT", "/v1/blobs/{hash}") => put(blobs::put_blob).layer(DefaultBodyLimit::max(max_blob)),
        ("GET", "/v1/blobs/{hash}") => get(blobs::get_blob).layer(DefaultBodyLimit::max(max_blob)),
        #[cfg(feature = "search")]
        ("POST", "/v1/search") => post(handlers::search_all::search_all),
        ("GET", "/v1/usage") => get(usage::get_usage),
        ("GET", "/v1/tokens") => get(tokens::list),
        ("POST", "/v1/tokens") => post(tokens::create),
        ("DELETE", "/v1/tokens/{id}") => delete(tokens::revoke),
        _ => return None,
    })
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
        // No roles: every role (what a project token could do before roles).
        let legacy = ok[0].caller();
        for role in memoir::access::Role::ALL {
            assert!(legacy.has("a", role), "{role}");
        }
        let narrowed = parse_tokens(
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","roles":["read"],"name":"ci"}]}"#,
        )
        .unwrap();
        let c = narrowed[0].caller();
        assert_eq!(c.member, "ci");
        assert!(c.has("a", memoir::access::Role::Read));
        assert!(!c.has("a", memoir::access::Role::Publish));
        assert!(legacy.member.starts_with("token-") && !legacy.member.contains("0123456789abcdef"));
        for bad in [
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","roles":[]}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","roles":["owner"]}]}"#,
            r#"{"tokens":[{"token":"0123456789abcdef","project":"a","name":"a b"}]}"#,
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

    /// Every routed method and path is described, with the 403 of its
    /// role check when it needs a token.
    #[test]
    fn openapi_document_is_valid_json_naming_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        for route in rules::ROUTES {
            let op = &doc["paths"][route.path][route.method.to_lowercase()];
            assert!(op.is_object(), "{} {} missing", route.method, route.path);
            if route.access != rules::Access::Public {
                assert!(
                    op["responses"]["403"].is_object(),
                    "{} {} lacks its 403",
                    route.method,
                    route.path
                );
            }
        }
    }

    /// Every rule has a handler (a route is served only through its rule).
    #[test]
    fn every_rule_has_a_handler() {
        for route in rules::ROUTES {
            assert!(
                handler(route.method, route.path, DEFAULT_MAX_BLOB).is_some(),
                "{} {} has a rule but no handler",
                route.method,
                route.path
            );
        }
    }
}
