//! Roles end to end over loopback: every route of the router's list
//! (`memoir_server::ROUTES`) called with a token of every role, each answer
//! checked against this file's own table (a route missing from the table
//! fails the test); 401 for a missing, unknown, expired or revoked token;
//! the ownership rule of `publish`; the team usage report by member; and
//! tokens minted and revoked at run time, seen by a second server over the
//! same store (file store and PostgreSQL).

#[path = "../../memoir/tests/suite/postgres_common/mod.rs"]
mod postgres_common;

use std::sync::{Arc, Once};

use memoir::access::{book_of, mint, Grant, Role};
use memoir::store::file::FileStore;
use memoir::store::postgres::VectorMode;
use memoir::store::{Durability, LogStore};
use memoir_server::{Access, BackgroundServer, ServerConfig, TokenGrant, ROUTES};
use serde_json::{json, Value};

/// A tokens-file token (no `roles`: every role on `alpha`).
const LEGACY: &str = "legacy-token-for-alpha-0123456789";
const READ_ONLY_FILE: &str = "read-only-file-token-0123456789";
const EXPIRED: &str = "expired-token-for-alpha-0123456789";

fn home() {
    static HOME: Once = Once::new();
    HOME.call_once(|| {
        // Empty (no price configuration): shared by every run, never grows.
        let dir = std::env::temp_dir().join("memoir-roles-test-home");
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_var("MEMOIR_HOME", dir);
    });
}

fn file_tokens() -> Vec<TokenGrant> {
    vec![
        TokenGrant::new(LEGACY, "alpha"),
        TokenGrant {
            roles: Some([Role::Read].into_iter().collect()),
            name: Some("reader-file".into()),
            ..TokenGrant::new(READ_ONLY_FILE, "alpha")
        },
        TokenGrant {
            expires_at: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
            ..TokenGrant::new(EXPIRED, "alpha")
        },
    ]
}

fn call(method: &str, url: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    call_on(method, url, token, None, body)
}

fn call_on(
    method: &str,
    url: &str,
    token: Option<&str>,
    project: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut b = ureq::http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        b = b.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(p) = project {
        b = b.header("X-Memoir-Project", p);
    }
    let bytes = match body {
        Some(v) => {
            b = b.header("Content-Type", "application/json");
            serde_json::to_vec(&v).unwrap()
        }
        None => Vec::new(),
    };
    let mut resp = agent.run(b.body(bytes).unwrap()).unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Which roles may call each route (this file's own table, not the
/// server's). `None`: a public route.
fn expected(method: &str, path: &str) -> Option<Option<&'static [Role]>> {
    use Role::*;
    const READ_OR_OWN: &[Role] = &[Read, Publish];
    Some(Some(match (method, path) {
        ("GET", "/healthz") | ("GET", "/openapi.json") => return Some(None),
        ("GET", "/v1/sessions") => READ_OR_OWN,
        ("POST", "/v1/sessions") => &[Publish],
        ("GET", "/v1/sessions/{id}") => READ_OR_OWN,
        ("DELETE", "/v1/sessions/{id}") => &[Manage],
        ("GET", "/v1/sessions/{id}/meta") => READ_OR_OWN,
        ("GET", "/v1/sessions/{id}/log") => READ_OR_OWN,
        ("POST", "/v1/sessions/{id}/records") => &[Publish],
        ("POST", "/v1/sessions/{id}/fork") => &[Publish],
        ("GET", "/v1/sessions/{id}/export") => READ_OR_OWN,
        ("POST", "/v1/sessions/{id}/restore") => &[Manage],
        ("POST", "/v1/sessions/{id}/purge") => &[Manage],
        ("POST", "/v1/sessions/{id}/search") => READ_OR_OWN,
        ("POST", "/v1/sessions/{id}/lease") => &[Publish],
        ("POST", "/v1/sessions/{id}/lease/{lease}") => &[Publish],
        ("DELETE", "/v1/sessions/{id}/lease/{lease}") => &[Publish],
        ("POST", "/v1/heads") => READ_OR_OWN,
        ("GET", "/v1/trash") => &[Manage],
        ("GET", "/v1/trash/{id}/log") => &[Manage],
        ("PUT", "/v1/blobs/{hash}") => &[Publish],
        ("GET", "/v1/blobs/{hash}") => &[Read],
        ("POST", "/v1/search") => &[Read],
        ("GET", "/v1/usage") => &[Usage],
        ("GET", "/v1/tokens") | ("POST", "/v1/tokens") | ("DELETE", "/v1/tokens/{id}") => &[Manage],
        _ => return None,
    }))
}

/// A concrete URL path for a route pattern.
fn concrete(path: &str) -> String {
    path.replace("/v1/tokens/{id}", "/v1/tokens/0123456789abcdef")
        .replace("{id}", "s1")
        .replace("{lease}", "no-such-lease")
        .replace("{hash}", &"0".repeat(64))
}

/// Mint a token in `store`'s book.
fn minted(store: &Arc<dyn LogStore>, name: &str, grants: &[&str]) -> (String, String) {
    let book = book_of(store).expect("the store keeps tokens");
    let grants = grants.iter().map(|g| Grant::parse(g).unwrap()).collect();
    let t = mint(name, grants, None).unwrap();
    book.insert(&t.entry).unwrap();
    (t.secret, t.entry.id)
}

fn file_store() -> (tempfile::TempDir, Arc<dyn LogStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    (dir, store)
}

#[test]
fn every_route_enforces_its_roles() {
    home();
    let (_dir, store) = file_store();
    let mut tokens: Vec<(Role, String)> = Vec::new();
    for role in Role::ALL {
        let (secret, _) = minted(&store, role.as_str(), &[&format!("alpha={role}")]);
        tokens.push((role, secret));
    }
    let (revoked, revoked_id) = minted(&store, "gone", &["alpha=read+publish+manage+usage"]);
    assert!(book_of(&store).unwrap().revoke(&revoked_id).unwrap());
    let server = BackgroundServer::start(ServerConfig::new(store.clone(), file_tokens())).unwrap();
    let base = server.url();
    assert!(!ROUTES.is_empty());
    for route in ROUTES {
        let Some(rule) = expected(route.method, route.path) else {
            panic!(
                "route {} {} has no expectation in this test's table: decide who may call it",
                route.method, route.path
            );
        };
        let url = format!("{base}{}", concrete(route.path));
        let body = matches!(route.method, "POST" | "PUT").then(|| json!({}));
        let Some(allowed) = rule else {
            assert_eq!(
                route.access,
                Access::Public,
                "{} {}",
                route.method,
                route.path
            );
            let (status, _) = call(route.method, &url, None, None);
            assert_eq!(
                status, 200,
                "{} {} without a token",
                route.method, route.path
            );
            continue;
        };
        for bad in [
            None,
            Some("unknown-token-0123456789abcdef"),
            Some(EXPIRED),
            Some(revoked.as_str()),
        ] {
            let (status, body) = call(route.method, &url, bad, body.clone());
            assert_eq!(
                status, 401,
                "{} {} with {bad:?}: {body}",
                route.method, route.path
            );
        }
        for (role, secret) in &tokens {
            let (status, answer) = call(route.method, &url, Some(secret), body.clone());
            if allowed.contains(role) {
                assert!(
                    status != 401 && status != 403,
                    "{} {} with {role}: {status} {answer}",
                    route.method,
                    route.path
                );
            } else {
                assert_eq!(
                    (status, answer["error"].as_str()),
                    (403, Some("forbidden")),
                    "{} {} with {role}",
                    route.method,
                    route.path
                );
            }
            // A role on alpha is nothing on beta.
            let (status, _) = call_on(route.method, &url, Some(secret), Some("beta"), body.clone());
            assert_eq!(
                status, 403,
                "{} {} with {role} on beta",
                route.method, route.path
            );
        }
        // A tokens-file entry without roles keeps every role (what project
        // tokens could do before roles); one naming `read` is read-only.
        let (status, answer) = call(route.method, &url, Some(LEGACY), body.clone());
        assert!(
            status != 401 && status != 403,
            "{} {} legacy: {status} {answer}",
            route.method,
            route.path
        );
        let (status, _) = call(route.method, &url, Some(READ_ONLY_FILE), body.clone());
        assert_eq!(
            status == 403,
            !allowed.contains(&Role::Read),
            "{} {} read-only file token: {status}",
            route.method,
            route.path
        );
    }
}

fn message(text: &str, input: u64, pid: &str) -> Value {
    json!({
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "model": "claude-sonnet-4-5",
        "provider_id": pid,
        "timestamp": "2026-05-12T10:00:00Z",
        "usage": {"input_tokens": input, "output_tokens": 1}
    })
}

#[test]
fn publish_sees_only_its_own_sessions_and_usage_sees_only_aggregates() {
    home();
    let (_dir, store) = file_store();
    let (bot, _) = minted(&store, "bot", &["alpha=publish"]);
    let (ana, _) = minted(&store, "ana", &["alpha=read+publish"]);
    let (lead, _) = minted(&store, "lead", &["alpha=usage", "beta=usage"]);
    let (beta, _) = minted(&store, "bea", &["beta=publish"]);
    let server = BackgroundServer::start(ServerConfig::new(store.clone(), Vec::new())).unwrap();
    let base = server.url();
    let write = |token: &str, id: &str, input: u64, pid: &str| {
        let (s, b) = call(
            "POST",
            &format!("{base}/v1/sessions"),
            Some(token),
            Some(json!({"id": id})),
        );
        assert_eq!(s, 201, "{b}");
        assert_eq!(
            b["meta"]["member"],
            b["meta"]["member"].as_str().unwrap_or("?")
        );
        let (s, b) = call(
            "POST",
            &format!("{base}/v1/sessions/{id}/records"),
            Some(token),
            Some(json!({"messages": [message("secret plan", input, pid)]})),
        );
        assert_eq!(s, 200, "{b}");
    };
    write(&bot, "bot-1", 100, "m1");
    write(&ana, "ana-1", 20, "m2");
    write(&beta, "bea-1", 3, "m3");
    // A client cannot claim another member.
    let (s, b) = call(
        "POST",
        &format!("{base}/v1/sessions"),
        Some(&bot),
        Some(
            json!({"meta": {"id": "bot-2", "created_at": "2026-05-12T10:00:00Z", "member": "ana"}}),
        ),
    );
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["meta"]["member"], "bot");

    // The publisher reads its own session, never another member's.
    let (s, _) = call(
        "GET",
        &format!("{base}/v1/sessions/bot-1"),
        Some(&bot),
        None,
    );
    assert_eq!(s, 200);
    for path in ["", "/meta", "/log", "/export"] {
        let (s, _) = call(
            "GET",
            &format!("{base}/v1/sessions/ana-1{path}"),
            Some(&bot),
            None,
        );
        assert_eq!(s, 404, "ana-1{path}");
    }
    let (s, _) = call(
        "POST",
        &format!("{base}/v1/sessions/ana-1/records"),
        Some(&bot),
        Some(json!({"messages": [message("x", 1, "m9")]})),
    );
    assert_eq!(s, 404);
    let (s, _) = call(
        "POST",
        &format!("{base}/v1/sessions/ana-1/fork"),
        Some(&bot),
        Some(json!({})),
    );
    assert_eq!(s, 404);
    let (_, list) = call("GET", &format!("{base}/v1/sessions"), Some(&bot), None);
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["meta"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|i| i.starts_with("bot-")), "{ids:?}");
    let (_, heads) = call(
        "POST",
        &format!("{base}/v1/heads"),
        Some(&bot),
        Some(json!({"ids": ["bot-1", "ana-1"]})),
    );
    assert_eq!(heads["heads"].as_array().unwrap().len(), 1, "{heads}");
    // A reader sees everyone's.
    let (s, _) = call(
        "GET",
        &format!("{base}/v1/sessions/bot-1/log"),
        Some(&ana),
        None,
    );
    assert_eq!(s, 200);
    let (_, list) = call("GET", &format!("{base}/v1/sessions"), Some(&ana), None);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 3);

    // The team report: by member, project, model and day, over both projects.
    let (s, report) = call(
        "GET",
        &format!("{base}/v1/usage?by=member,project,model,day"),
        Some(&lead),
        None,
    );
    assert_eq!(s, 200, "{report}");
    assert_eq!(report["total"]["input_tokens"], 123);
    let rows: Vec<(String, String, u64)> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["group"]["member"].as_str().unwrap().to_string(),
                r["group"]["project"].as_str().unwrap().to_string(),
                r["input_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("ana".to_string(), "alpha".to_string(), 20),
            ("bea".to_string(), "beta".to_string(), 3),
            ("bot".to_string(), "alpha".to_string(), 100),
        ]
    );
    assert!(!report.to_string().contains("secret plan"));
    // Narrowed to one project by the header.
    let (s, one) = call_on(
        "GET",
        &format!("{base}/v1/usage"),
        Some(&lead),
        Some("beta"),
        None,
    );
    assert_eq!((s, one["total"]["input_tokens"].as_u64()), (200, Some(3)));
    // Per-session rows and content are not the usage role's.
    let (s, _) = call_on(
        "GET",
        &format!("{base}/v1/usage?by=session"),
        Some(&lead),
        Some("alpha"),
        None,
    );
    assert_eq!(s, 403);
    let (s, _) = call_on(
        "GET",
        &format!("{base}/v1/sessions"),
        Some(&lead),
        Some("alpha"),
        None,
    );
    assert_eq!(s, 403);
    // A publisher has no usage report.
    let (s, _) = call("GET", &format!("{base}/v1/usage"), Some(&bot), None);
    assert_eq!(s, 403);
}

/// Tokens minted on one server through `POST /v1/tokens` work on a second
/// server over the same store, and a revocation on the second holds on the
/// first at the next request.
fn tokens_are_shared_by_servers_over_one_store(a: Arc<dyn LogStore>, b: Arc<dyn LogStore>) {
    home();
    let one = BackgroundServer::start(ServerConfig::new(a, file_tokens())).unwrap();
    let two = BackgroundServer::start(ServerConfig::new(b, file_tokens())).unwrap();
    let (u1, u2) = (one.url(), two.url());
    // A read-only token may not mint; the manager may, but only on its projects.
    let (s, _) = call(
        "POST",
        &format!("{u1}/v1/tokens"),
        Some(READ_ONLY_FILE),
        Some(json!({"name": "x", "grants": [{"project": "alpha", "roles": ["read"]}]})),
    );
    assert_eq!(s, 403);
    let (s, _) = call(
        "POST",
        &format!("{u1}/v1/tokens"),
        Some(LEGACY),
        Some(json!({"name": "x", "grants": [{"project": "beta", "roles": ["read"]}]})),
    );
    assert_eq!(s, 403);
    let (s, created) = call(
        "POST",
        &format!("{u1}/v1/tokens"),
        Some(LEGACY),
        Some(json!({"name": "ci-bot", "grants": [{"project": "alpha", "roles": ["publish"]}]})),
    );
    assert_eq!(s, 201, "{created}");
    let secret = created["token"].as_str().unwrap().to_string();
    let id = created["entry"]["id"].as_str().unwrap().to_string();
    assert!(created["entry"].get("digest").is_none());
    // Listed (never the secret or its digest) on the other server.
    let (s, list) = call("GET", &format!("{u2}/v1/tokens"), Some(LEGACY), None);
    assert_eq!(s, 200);
    assert!(list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["id"] == id.as_str()));
    assert!(!list.to_string().contains(&secret[20..]));
    assert!(!list.to_string().contains("digest"));
    for u in [&u1, &u2] {
        let (s, _) = call(
            "POST",
            &format!("{u}/v1/sessions"),
            Some(&secret),
            Some(json!({})),
        );
        assert_eq!(s, 201, "{u}");
    }
    let (s, _) = call(
        "DELETE",
        &format!("{u2}/v1/tokens/{id}"),
        Some(LEGACY),
        None,
    );
    assert_eq!(s, 204);
    for u in [&u1, &u2] {
        let (s, b) = call("GET", &format!("{u}/v1/sessions"), Some(&secret), None);
        assert_eq!(
            (s, b["error"].as_str()),
            (401, Some("token_revoked")),
            "{u}"
        );
    }
    let (s, _) = call(
        "DELETE",
        &format!("{u1}/v1/tokens/{id}"),
        Some(LEGACY),
        None,
    );
    assert_eq!(s, 404);
}

#[test]
fn revocation_holds_on_every_file_store_server() {
    let (dir, a) = file_store();
    let b: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    tokens_are_shared_by_servers_over_one_store(a, b);
}

#[test]
fn revocation_holds_on_every_postgres_server() {
    let Some(url) = postgres_common::pg_url(postgres_common::POSTGRES_URL) else {
        return;
    };
    let schema = postgres_common::TempSchema::new(&url);
    let connect = || -> Arc<dyn LogStore> {
        Arc::new(
            memoir::store::postgres::PgStore::connect(&url, schema.options(VectorMode::Auto))
                .unwrap(),
        )
    };
    let (a, b) = (connect(), connect());
    tokens_are_shared_by_servers_over_one_store(a, b);
}
