//! `memoir serve` end to end over loopback: the API on both backends,
//! project-scoped tokens, bad input, graceful shutdown with appends in flight,
//! the client's `RemoteStore`, and the database restarting under load.
//!
//! PostgreSQL comes from `.ci/postgres.sh` (see `postgres_common`); without
//! it those tests fail under CI and are skipped elsewhere.

#[path = "../../memoir/tests/suite/postgres_common/mod.rs"]
mod postgres_common;
// The manager conformance suite on a RemoteStore.
mod remote_conformance;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::client::{wire, Client, RemoteStore};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::postgres::VectorMode;
use memoir::store::{Appended, Durability, Listed, LogStore, RawLog};
use memoir::transcript::{find_in, Session};
use memoir::Error;
use memoir_server::{BackgroundServer, ServerConfig, TokenGrant};

use postgres_common::{pg_store, pg_url, TempSchema, POSTGRES_URL};

const TOKEN_A: &str = "token-for-project-a-0123456789";
const TOKEN_B: &str = "token-for-project-b-0123456789";
const TOKEN_OLD: &str = "expired-token-for-a-0123456789";

fn grants() -> Vec<TokenGrant> {
    vec![
        TokenGrant {
            token: TOKEN_A.into(),
            project: "alpha".into(),
            expires_at: None,
        },
        TokenGrant {
            token: TOKEN_B.into(),
            project: "beta".into(),
            expires_at: Some(chrono::Utc::now() + chrono::Duration::hours(1)),
        },
        TokenGrant {
            token: TOKEN_OLD.into(),
            project: "alpha".into(),
            expires_at: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
        },
    ]
}

/// A server running on its own runtime in a background thread.
struct Running(BackgroundServer);

impl Running {
    fn start(config: ServerConfig) -> Running {
        Running(BackgroundServer::start(config).unwrap())
    }

    fn client(&self, token: &str) -> Client {
        Client::new(&self.0.url(), Some(token.into())).unwrap()
    }

    /// Ask for a graceful shutdown and wait until the server has stopped.
    fn shutdown(&mut self) {
        self.0.shutdown().unwrap();
    }
}

/// A raw request; returns the status and the body.
fn raw(
    method: &str,
    url: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut b = ureq::http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        b = b.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(ct) = content_type {
        b = b.header("Content-Type", ct);
    }
    let mut resp = agent.run(b.body(body).unwrap()).unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    (status, text)
}

fn error_code(text: &str) -> String {
    serde_json::from_str::<wire::ErrorBody>(text)
        .map(|e| e.error)
        .unwrap_or_else(|_| format!("<not an error body: {text}>"))
}

fn file_config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig::new(Arc::new(FileStore::new(dir, Durability::Flush)), grants())
}

fn pg_config(var: &str) -> Option<(ServerConfig, TempSchema)> {
    let (pg, schema) = pg_store(var, VectorMode::Auto)?;
    Some((ServerConfig::new(pg, grants()), schema))
}

fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

/// `mod $name { file, postgres, pgvector }`: the check `$check` run by a
/// server over the file store and over each PostgreSQL test server (those
/// skip, with the notice `pg_config` prints, when no server is configured).
macro_rules! on_every_store {
    ($name:ident, $check:ident) => {
        mod $name {
            #[test]
            fn file() {
                let dir = tempfile::tempdir().unwrap();
                super::$check(super::file_config(dir.path()));
            }

            #[test]
            fn postgres() {
                if let Some((cfg, _schema)) = super::pg_config(super::POSTGRES_URL) {
                    super::$check(cfg);
                }
            }

            #[test]
            fn pgvector() {
                if let Some((cfg, _schema)) = super::pg_config(super::postgres_common::PGVECTOR_URL)
                {
                    super::$check(cfg);
                }
            }
        }
    };
}

on_every_store!(api_round_trip, api_round_trip);

fn api_round_trip(config: ServerConfig) {
    let server = Running::start(config);
    let a = server.client(TOKEN_A);
    let created = a
        .create(&wire::CreateSession {
            id: Some("s1".into()),
            title: Some("first".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(created.meta.extra["project"], "alpha");
    assert!(matches!(
        a.create(&wire::CreateSession {
            id: Some("s1".into()),
            ..Default::default()
        }),
        Err(Error::SessionExists(_))
    ));
    let r = a
        .append("s1", &[msg("the deploy key is in vault"), msg("ok")], None)
        .unwrap();
    assert_eq!((r.first_seq, r.last_seq), (1, 2));
    let r = a.append("s1", &[msg("third")], Some(3)).unwrap();
    assert_eq!(r.first_seq, 3);
    match a.append("s1", &[msg("late")], Some(3)) {
        Err(Error::Conflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (3, 4)),
        other => panic!("expected 409, got {other:?}"),
    }
    let loaded = a.load("s1").unwrap();
    assert_eq!(loaded.messages.len(), 3);
    assert_eq!(loaded.message_seqs, [1, 2, 3]);
    assert_eq!(loaded.title.as_deref(), Some("first"));
    assert!(loaded.issues.is_empty());
    // Fork at seq 2 by reference; both go on independently.
    let forked = a
        .fork(
            "s1",
            &wire::ForkRequest {
                id: Some("s1-fork".into()),
                at_seq: Some(2),
                title: None,
            },
        )
        .unwrap();
    assert_eq!(forked.parent.seq, 2);
    assert_eq!(forked.parent.messages, 2);
    a.append("s1-fork", &[msg("fork only")], Some(1)).unwrap();
    let f = a.load("s1-fork").unwrap();
    assert_eq!(
        f.messages
            .iter()
            .map(|m| m.text_content())
            .collect::<Vec<_>>(),
        ["the deploy key is in vault", "ok", "fork only"]
    );
    assert_eq!(f.inherited, 2);
    assert!(matches!(
        a.fork(
            "s1",
            &wire::ForkRequest {
                at_seq: Some(99),
                ..Default::default()
            }
        ),
        Err(Error::Invalid(_))
    ));
    // List: newest first, this project only.
    let ids: Vec<String> = a
        .list()
        .unwrap()
        .sessions
        .into_iter()
        .map(|s| s.meta.id)
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"s1".to_string()) && ids.contains(&"s1-fork".to_string()));
    // Export is the library's `memoir.session-export` (header, messages, footer).
    let jsonl = a.export("s1").unwrap();
    let lines: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["format"], "memoir.session-export");
    assert_eq!(lines[0]["session_id"], "s1");
    assert_eq!(lines.len(), 5, "{jsonl}");
    assert_eq!(lines[4]["messages"], 3);
    let md = a
        .export_as("s1", memoir::manager::ExportFormat::Markdown, false)
        .unwrap();
    assert!(md.contains("## seq 1 · user"), "{md}");
    // Recall.
    let hits = a.search("s1", "where is the deploy key", 2).unwrap().hits;
    assert_eq!(hits[0].chain_seq, 1, "{hits:?}");
    // The raw log verifies and matches.
    let log = a.log("s1").unwrap();
    assert!(log.report.is_clean());
    assert_eq!(log.last_seq, 3);
    // Delete.
    a.delete("s1-fork").unwrap();
    assert!(matches!(a.load("s1-fork"), Err(Error::NotFound(_))));
    assert!(matches!(a.delete("s1-fork"), Err(Error::NotFound(_))));
    assert!(matches!(
        a.append("s1-fork", &[msg("x")], None),
        Err(Error::NotFound(_))
    ));
}

on_every_store!(tokens_are_scoped, tokens_are_scoped);

fn tokens_are_scoped(config: ServerConfig) {
    let server = Running::start(config);
    let a = server.client(TOKEN_A);
    let b = server.client(TOKEN_B);
    a.create(&wire::CreateSession {
        id: Some("secret".into()),
        ..Default::default()
    })
    .unwrap();
    a.append("secret", &[msg("alpha's secret")], None).unwrap();
    b.create(&wire::CreateSession {
        id: Some("b-own".into()),
        ..Default::default()
    })
    .unwrap();
    // Project B sees nothing of A: every route answers as if it did not exist.
    assert!(matches!(b.load("secret"), Err(Error::NotFound(_))));
    assert!(matches!(b.log("secret"), Err(Error::NotFound(_))));
    assert!(matches!(b.header("secret"), Err(Error::NotFound(_))));
    assert!(matches!(b.export("secret"), Err(Error::NotFound(_))));
    assert!(matches!(
        b.search("secret", "secret", 3),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        b.append("secret", &[msg("injected")], None),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        b.fork("secret", &wire::ForkRequest::default()),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(b.delete("secret"), Err(Error::NotFound(_))));
    // Nor can B fork A's session by naming it as a parent in a header.
    let mut meta = SessionMeta::new("sneaky");
    meta.parent = Some(memoir::record::ForkPoint {
        session: "secret".into(),
        seq: 1,
        messages: 1,
        parent_created_at: None,
    });
    assert!(matches!(
        b.create(&wire::CreateSession {
            meta: Some(meta),
            ..Default::default()
        }),
        Err(Error::NotFound(_))
    ));
    // Nor claim A's project in a header.
    let mut meta = SessionMeta::new("claims-alpha");
    meta.extra.insert("project".into(), "alpha".into());
    assert!(matches!(
        b.create(&wire::CreateSession {
            meta: Some(meta),
            ..Default::default()
        }),
        Err(Error::Invalid(_))
    ));
    let b_ids: Vec<String> = b
        .list()
        .unwrap()
        .sessions
        .into_iter()
        .map(|s| s.meta.id)
        .collect();
    assert_eq!(b_ids, ["b-own"]);
    let a_ids: Vec<String> = a
        .list()
        .unwrap()
        .sessions
        .into_iter()
        .map(|s| s.meta.id)
        .collect();
    assert_eq!(a_ids, ["secret"]);
    assert_eq!(
        a.load("secret").unwrap().messages.len(),
        1,
        "A's log untouched"
    );
    // Missing, unknown and expired tokens.
    let url = format!("{}/v1/sessions", server.0.url());
    let (s, t) = raw("GET", &url, None, None, vec![]);
    assert_eq!((s, error_code(&t).as_str()), (401, "unauthorized"));
    let (s, t) = raw(
        "GET",
        &url,
        Some("not-a-token-at-all-xxxxxxxx"),
        None,
        vec![],
    );
    assert_eq!((s, error_code(&t).as_str()), (401, "unauthorized"));
    let (s, t) = raw("GET", &url, Some(TOKEN_OLD), None, vec![]);
    assert_eq!((s, error_code(&t).as_str()), (401, "token_expired"));
    // Health and the OpenAPI document need no token.
    let (s, t) = raw(
        "GET",
        &format!("{}/openapi.json", server.0.url()),
        None,
        None,
        vec![],
    );
    assert_eq!(s, 200);
    let doc: serde_json::Value = serde_json::from_str(&t).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/sessions/{id}/records"]["post"].is_object());
    assert_eq!(
        raw(
            "GET",
            &format!("{}/healthz", server.0.url()),
            None,
            None,
            vec![]
        )
        .0,
        200
    );
}

#[test]
fn bad_input_gets_clear_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = file_config(dir.path());
    cfg.max_body = 64 * 1024;
    let server = Running::start(cfg);
    let a = server.client(TOKEN_A);
    a.create(&wire::CreateSession {
        id: Some("s".into()),
        ..Default::default()
    })
    .unwrap();
    let url = |p: &str| format!("{}{p}", server.0.url());
    let json = Some("application/json");
    let post = |p: &str, ct: Option<&str>, body: &[u8]| {
        let (s, t) = raw("POST", &url(p), Some(TOKEN_A), ct, body.to_vec());
        (s, error_code(&t))
    };
    assert_eq!(
        post("/v1/sessions/s/records", json, b"{\"records\": ["),
        (400, "bad_request".into())
    );
    assert_eq!(
        post("/v1/sessions/s/records", json, b"[1,2]"),
        (400, "bad_request".into())
    );
    assert_eq!(
        post(
            "/v1/sessions/s/records",
            json,
            b"{\"records\":[{\"no_tag\":1}]}"
        ),
        (400, "bad_request".into())
    );
    assert_eq!(
        post("/v1/sessions/s/records", json, b"{\"recrods\":[]}"),
        (400, "bad_request".into()),
        "unknown fields are refused"
    );
    assert_eq!(
        post("/v1/sessions/s/records", json, b"{\"records\":[{\"record\":\"meta\",\"id\":\"s\",\"created_at\":\"2026-01-01T00:00:00Z\"}]}"),
        (400, "bad_request".into())
    );
    assert_eq!(
        post("/v1/sessions/s/records", None, b"{\"records\":[]}"),
        (415, "unsupported_media_type".into())
    );
    let big = format!(
        "{{\"records\":[{{\"record\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}]}}",
        "x".repeat(100 * 1024)
    );
    assert_eq!(
        post("/v1/sessions/s/records", json, big.as_bytes()),
        (413, "too_large".into())
    );
    let many = format!(
        "{{\"records\":[{}]}}",
        vec!["{\"record\":\"title\",\"title\":\"t\"}"; 10_001].join(",")
    );
    let mut cfg_big = file_config(dir.path());
    cfg_big.max_body = 8 << 20;
    let server_big = Running::start(cfg_big);
    let (s, t) = raw(
        "POST",
        &format!("{}/v1/sessions/s/records", server_big.0.url()),
        Some(TOKEN_A),
        json,
        many.into_bytes(),
    );
    assert_eq!((s, error_code(&t).as_str()), (413, "too_large"));
    // Path-like and malformed ids.
    for id in [
        "..%2F..%2Fetc%2Fpasswd",
        "%2E%2E",
        ".hidden",
        "a%20b",
        "a%00b",
        "-rf",
    ] {
        let (s, t) = raw(
            "GET",
            &url(&format!("/v1/sessions/{id}")),
            Some(TOKEN_A),
            None,
            vec![],
        );
        assert_eq!((s, error_code(&t).as_str()), (400, "invalid_id"), "{id}");
    }
    let (s, t) = raw(
        "GET",
        &url("/v1/sessions/..%2Fx/log"),
        Some(TOKEN_A),
        None,
        vec![],
    );
    assert_eq!((s, error_code(&t).as_str()), (400, "invalid_id"));
    assert_eq!(
        post("/v1/sessions", json, b"{\"id\":\"../../escape\"}"),
        (400, "invalid_id".into())
    );
    assert!(!dir.path().parent().unwrap().join("escape.jsonl").exists());
    // Unknown sessions and routes.
    let (s, t) = raw(
        "GET",
        &url("/v1/sessions/nope"),
        Some(TOKEN_A),
        None,
        vec![],
    );
    assert_eq!((s, error_code(&t).as_str()), (404, "not_found"));
    assert_eq!(
        post("/v1/sessions/nope/records", json, b"{\"records\":[]}"),
        (404, "not_found".into())
    );
    let (s, _) = raw("GET", &url("/v2/whatever"), Some(TOKEN_A), None, vec![]);
    assert_eq!(s, 404);
    assert_eq!(
        post("/v1/sessions/s/search", json, b"{\"query\":\"  \"}"),
        (400, "bad_request".into())
    );
    // The good path still works after all that.
    assert_eq!(a.append("s", &[msg("fine")], Some(1)).unwrap().first_seq, 1);
}

/// A store whose appends take a while, to catch a shutdown mid-append.
#[derive(Debug)]
struct SlowStore {
    inner: FileStore,
    started: AtomicUsize,
}

impl LogStore for SlowStore {
    fn create(&self, meta: &SessionMeta) -> memoir::Result<Appended> {
        self.inner.create(meta)
    }
    fn append(
        &self,
        id: &str,
        records: &[Record],
        expected: Option<u64>,
    ) -> memoir::Result<Appended> {
        self.started.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(600));
        self.inner.append(id, records, expected)
    }
    fn read(&self, id: &str) -> memoir::Result<RawLog> {
        self.inner.read(id)
    }
    fn read_header(&self, id: &str) -> memoir::Result<Option<SessionMeta>> {
        self.inner.read_header(id)
    }
    fn list(&self) -> memoir::Result<(Vec<Listed>, usize)> {
        self.inner.list()
    }
    fn location(&self, id: &str) -> std::path::PathBuf {
        self.inner.location(id)
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
}

#[test]
fn graceful_shutdown_finishes_appends_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let slow = Arc::new(SlowStore {
        inner: FileStore::new(dir.path(), Durability::Fsync),
        started: AtomicUsize::new(0),
    });
    let mut server = Running::start(ServerConfig::new(slow.clone(), grants()));
    let a = server.client(TOKEN_A);
    a.create(&wire::CreateSession {
        id: Some("g".into()),
        ..Default::default()
    })
    .unwrap();
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let c = a.clone();
            std::thread::spawn(move || c.append("g", &[msg(&format!("in flight {i}"))], None))
        })
        .collect();
    while slow.started.load(Ordering::SeqCst) < 4 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    server.shutdown();
    assert!(t0.elapsed() >= Duration::from_millis(300), "did not wait");
    for w in writers {
        let r = w
            .join()
            .unwrap()
            .expect("an append in flight was not answered");
        assert!(r.first_seq >= 1);
    }
    // Session `g` of project alpha is stored as `alpha~g`.
    let raw = slow.inner.read("alpha~g").unwrap();
    assert_eq!(raw.last_seq, 4);
    assert!(raw.report.is_clean());
    // The listener is closed.
    assert!(a.list().is_err());
}

#[test]
fn remote_store_runs_the_session_api() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let store: Arc<dyn LogStore> = Arc::new(RemoteStore::new(server.client(TOKEN_A)));
    let s = Session::create_in(store.clone(), SessionMeta::new("remote-1")).unwrap();
    s.append_messages(&[Message::user("hi"), Message::assistant("hello")])
        .unwrap();
    assert!(matches!(
        s.append_expecting(&[msg("x")], 1),
        Err(Error::Conflict { actual: 3, .. })
    ));
    let t = Session::open_in(store.clone(), "remote-1")
        .unwrap()
        .transcript()
        .unwrap();
    assert_eq!(t.messages.len(), 2);
    assert!(t.report.is_clean());
    assert_eq!(find_in(store.as_ref(), "remote").unwrap(), "remote-1");
    store.delete("remote-1").unwrap();
    assert!(matches!(store.read("remote-1"), Err(Error::NotFound(_))));
    // The server wrote a normal transcript file, in the project's namespace
    // (`alpha~remote-1`), with the project in its header.
    let deleted = dir.path().join(".deleted").join("alpha~remote-1.jsonl");
    let header = Session::peek_meta(&deleted).unwrap();
    assert_eq!(header.extra["project"], "alpha");
}

/// The database restarts under HTTP load: requests fail with 503 while it is
/// down and succeed again after; every acknowledged append is stored once.
#[test]
fn database_restart_under_http_load() {
    let (Some(url), Some(script)) = (
        pg_url("MEMOIR_TEST_FAULT_POSTGRES_URL"),
        pg_url("MEMOIR_TEST_FAULT_POSTGRES_RESTART"),
    ) else {
        return;
    };
    let _lock = postgres_common::fault_lock();
    let schema = TempSchema::new(&url);
    let mut opts = schema.options(VectorMode::Auto);
    opts.connect_timeout = Duration::from_secs(2);
    let pg = Arc::new(memoir::store::postgres::PgStore::connect(&url, opts).unwrap());
    let server = Running::start(ServerConfig::new(pg.clone(), grants()));
    let a = server.client(TOKEN_A);
    for s in 0..4 {
        a.create(&wire::CreateSession {
            id: Some(format!("h{s}")),
            ..Default::default()
        })
        .unwrap();
    }
    let restarted = Arc::new(AtomicBool::new(false));
    let after = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|w| {
            let c = a.clone();
            let (restarted, after, stop) = (restarted.clone(), after.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                let mut unavailable = 0;
                let deadline = Instant::now() + Duration::from_secs(40);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let id = format!("h{}", (w + i) % 4);
                    let text = format!("c{w}-{i}");
                    i += 1;
                    match c.append(&id, &[msg(&text)], None) {
                        Ok(r) => {
                            acked.push((id, r.first_seq, text));
                            if restarted.load(Ordering::Relaxed) {
                                after.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            assert!(
                                memoir::store::postgres::is_unavailable(&e),
                                "not a clean 503: {e}"
                            );
                            unavailable += 1;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                (acked, unavailable)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    let status = std::process::Command::new(&script).status().unwrap();
    assert!(status.success());
    restarted.store(true, Ordering::Relaxed);
    let until = Instant::now() + Duration::from_secs(30);
    while after.load(Ordering::Relaxed) < 200 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut unavailable = 0;
    for c in clients {
        let (a, u) = c.join().unwrap();
        acked.extend(a);
        unavailable += u;
    }
    eprintln!(
        "{} acknowledged, {} after the restart, {unavailable} answered 503",
        acked.len(),
        after.load(Ordering::Relaxed)
    );
    assert!(after.load(Ordering::Relaxed) >= 200, "no recovery");
    for s in 0..4 {
        // Session `h<s>` of project alpha is stored as `alpha~h<s>`.
        let visible = format!("h{s}");
        let id = format!("alpha~{visible}");
        let raw = pg.read(&id).unwrap();
        assert!(raw.report.is_clean());
        assert_eq!(
            raw.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=raw.last_seq).collect::<Vec<_>>()
        );
        let mut at: HashMap<String, Vec<u64>> = HashMap::new();
        for r in &raw.records {
            if let Record::Message(m) = &r.record {
                at.entry(m.text_content()).or_default().push(r.seq);
            }
        }
        for (_, seq, text) in acked.iter().filter(|x| x.0 == visible) {
            assert_eq!(at.get(text), Some(&vec![*seq]), "{id}: {text}");
        }
    }
}

// ---- isolation between projects ----------------------------------------

fn text_of(loaded: &wire::Loaded) -> Vec<String> {
    loaded.messages.iter().map(|m| m.text_content()).collect()
}

on_every_store!(no_existence_oracle, no_existence_oracle);

/// Two projects may use one id: neither learns the other has it (no 409),
/// and each sees only its own session.
fn no_existence_oracle(config: ServerConfig) {
    let server = Running::start(config);
    let a = server.client(TOKEN_A);
    let b = server.client(TOKEN_B);
    a.create(&wire::CreateSession {
        id: Some("taken".into()),
        ..Default::default()
    })
    .unwrap();
    a.append("taken", &[msg("alpha text")], None).unwrap();
    // B creating or forking to the same id is answered exactly like a fresh id.
    let created = b
        .create(&wire::CreateSession {
            id: Some("taken".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(created.id, "taken");
    assert_eq!(created.meta.extra["project"], "beta");
    b.append("taken", &[msg("beta text")], None).unwrap();
    let fresh = b
        .create(&wire::CreateSession {
            id: Some("b-src".into()),
            ..Default::default()
        })
        .unwrap();
    b.append(&fresh.id, &[msg("b source")], None).unwrap();
    a.create(&wire::CreateSession {
        id: Some("a-fork-target".into()),
        ..Default::default()
    })
    .unwrap();
    let forked = b
        .fork(
            "b-src",
            &wire::ForkRequest {
                id: Some("a-fork-target".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(forked.id, "a-fork-target");
    assert_eq!(text_of(&a.load("taken").unwrap()), ["alpha text"]);
    assert_eq!(text_of(&b.load("taken").unwrap()), ["beta text"]);
    // Within one project an id is still unique.
    assert!(matches!(
        b.create(&wire::CreateSession {
            id: Some("taken".into()),
            ..Default::default()
        }),
        Err(Error::SessionExists(_))
    ));
    // Ids never carry the namespace separator.
    assert!(matches!(
        a.create(&wire::CreateSession {
            id: Some("beta~taken".into()),
            ..Default::default()
        }),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(a.load("beta~taken"), Err(Error::Invalid(_))));
}

on_every_store!(
    no_cross_project_read_or_write,
    no_cross_project_read_or_write
);

/// A fork whose parent was deleted never stitches in another project's
/// session that took the parent's id; and a write after another server
/// deleted the session never lands in another project's session.
fn no_cross_project_read_or_write(config: ServerConfig) {
    let store = config.store.clone();
    let first = Running::start(config.clone());
    let second = Running::start(config);
    let a = first.client(TOKEN_A);
    let a2 = second.client(TOKEN_A);
    let b = second.client(TOKEN_B);
    a.create(&wire::CreateSession {
        id: Some("p".into()),
        ..Default::default()
    })
    .unwrap();
    a.append("p", &[msg("alpha parent")], None).unwrap();
    let fork = a.fork("p", &wire::ForkRequest::default()).unwrap();
    // The first server has seen "x"; the second deletes it.
    a.create(&wire::CreateSession {
        id: Some("x".into()),
        ..Default::default()
    })
    .unwrap();
    a.append("x", &[msg("alpha x")], None).unwrap();
    a2.delete("x").unwrap();
    a2.delete("p").unwrap();
    // B takes both ids.
    for id in ["p", "x"] {
        b.create(&wire::CreateSession {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap();
        b.append(id, &[msg("beta secret")], None).unwrap();
    }
    // A's next append through the first server does not land in B's session.
    assert!(matches!(
        a.append("x", &[msg("alpha late")], None),
        Err(Error::NotFound(_))
    ));
    assert_eq!(text_of(&b.load("x").unwrap()), ["beta secret"]);
    // A's fork never shows B's messages, through load or search.
    if let Ok(loaded) = a.load(&fork.id) {
        assert!(
            !text_of(&loaded).iter().any(|t| t.contains("beta")),
            "{loaded:?}"
        );
    }
    if let Ok(r) = a.search(&fork.id, "beta secret", 5) {
        assert!(
            !r.hits
                .iter()
                .any(|h| h.text.as_deref().unwrap_or("").contains("beta")),
            "{r:?}"
        );
    }
    // Restore brings A's own session back, records intact.
    let (s, _) = raw(
        "POST",
        &format!("{}/v1/sessions/x/restore", first.0.url()),
        Some(TOKEN_A),
        Some("application/json"),
        b"{}".to_vec(),
    );
    assert_eq!(
        s, 200,
        "B's x is another session: A's restore is not blocked"
    );
    assert_eq!(text_of(&a.load("x").unwrap()), ["alpha x"]);
    assert_eq!(text_of(&b.load("x").unwrap()), ["beta secret"]);
    drop(store);
}

#[test]
fn a_client_cannot_name_an_arbitrary_fork_parent_or_seq() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let a = server.client(TOKEN_A);
    a.create(&wire::CreateSession {
        id: Some("src".into()),
        ..Default::default()
    })
    .unwrap();
    a.append("src", &[msg("one"), msg("two")], None).unwrap();
    let point = |seq: u64, messages: usize| {
        let mut meta = SessionMeta::new(format!("f{seq}-{messages}"));
        meta.parent = Some(memoir::record::ForkPoint::new("src", seq, messages));
        a.create(&wire::CreateSession {
            meta: Some(meta),
            ..Default::default()
        })
    };
    assert!(matches!(point(1_000_000_000, 2), Err(Error::Invalid(_))));
    assert!(
        matches!(point(1, 2), Err(Error::Invalid(_))),
        "messages must match the cut"
    );
    let ok = point(1, 1).unwrap();
    assert_eq!(text_of(&a.load(&ok.id).unwrap()), ["one"]);
    // The fork endpoint refuses a seq past the end too.
    assert!(matches!(
        a.fork(
            "src",
            &wire::ForkRequest {
                at_seq: Some(3),
                ..Default::default()
            }
        ),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn http_fork_keeps_tool_calls_with_their_results() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let a = server.client(TOKEN_A);
    a.create(&wire::CreateSession {
        id: Some("tools".into()),
        ..Default::default()
    })
    .unwrap();
    let call = Message::new(
        memoir::Role::Assistant,
        vec![memoir::Block::ToolUse {
            id: "c1".into(),
            name: "shell".into(),
            input: serde_json::json!({"command": "ls"}),
        }],
    );
    let records = [
        msg("list the files"),
        Record::Message(call),
        Record::Message(Message::tool_result("c1", "a.rs", false)),
    ];
    a.append("tools", &records, None).unwrap();
    // A cut through seq 2 would separate the call (seq 2) from its result.
    let f = a
        .fork(
            "tools",
            &wire::ForkRequest {
                at_seq: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((f.requested, f.effective), (2, 1));
    assert_eq!(f.parent.seq, 1);
    assert_eq!(a.load(&f.id).unwrap().messages.len(), 1);
}

#[test]
fn bodies_must_be_objects_and_absent_titles_are_omitted() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let a = server.client(TOKEN_A);
    a.create(&wire::CreateSession {
        id: Some("s".into()),
        ..Default::default()
    })
    .unwrap();
    let url = |p: &str| format!("{}{p}", server.0.url());
    for (path, body) in [
        ("/v1/sessions", "[]"),
        ("/v1/sessions", "1"),
        ("/v1/sessions", "null"),
        ("/v1/sessions/s/records", "[]"),
        ("/v1/sessions/s/fork", "[]"),
        ("/v1/sessions/s/search", "[\"q\"]"),
    ] {
        let (s, t) = raw(
            "POST",
            &url(path),
            Some(TOKEN_A),
            Some("application/json"),
            body.as_bytes().to_vec(),
        );
        assert_eq!(
            (s, error_code(&t).as_str()),
            (400, "bad_request"),
            "{path} {body}"
        );
    }
    assert_eq!(a.list().unwrap().sessions.len(), 1, "nothing was created");
    for path in ["/v1/sessions/s", "/v1/sessions/s/meta", "/v1/sessions"] {
        let (s, t) = raw("GET", &url(path), Some(TOKEN_A), None, vec![]);
        assert_eq!(s, 200);
        assert!(!t.contains("\"title\":null"), "{path}: {t}");
    }
}

#[test]
fn delete_restore_and_purge_go_through_the_trash() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let a = server.client(TOKEN_A);
    let b = server.client(TOKEN_B);
    a.create(&wire::CreateSession {
        id: Some("t".into()),
        ..Default::default()
    })
    .unwrap();
    a.append("t", &[msg("keep me")], None).unwrap();
    let fork = a.fork("t", &wire::ForkRequest::default()).unwrap();
    // A live session cannot be purged; a trashed one needed by a fork is kept.
    assert!(matches!(a.purge("t"), Err(Error::NotFound(_))));
    a.delete("t").unwrap();
    assert!(matches!(b.restore("t"), Err(Error::NotFound(_))), "not B's");
    assert!(matches!(
        a.purge("t"),
        Err(Error::SessionExists(_) | Error::Conflict { .. })
    ));
    assert_eq!(text_of(&a.load(&fork.id).unwrap()), ["keep me"]);
    a.restore("t").unwrap();
    assert_eq!(text_of(&a.load("t").unwrap()), ["keep me"]);
    // Once the fork is purged (a trashed fork still pins its parent), purge
    // erases it for good.
    a.delete(&fork.id).unwrap();
    a.delete("t").unwrap();
    assert_eq!(
        a.purge(&fork.id).unwrap().purged,
        std::slice::from_ref(&fork.id)
    );
    assert_eq!(a.purge("t").unwrap().purged, ["t"]);
    assert!(matches!(a.restore("t"), Err(Error::NotFound(_))));
}

/// A large payload appended through `memoir serve` goes to the server's blob
/// store once, and reading it back through the API gives the original bytes.
#[test]
fn large_payloads_go_to_the_servers_blob_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let store: Arc<dyn LogStore> = Arc::new(RemoteStore::new(server.client(TOKEN_A)));
    let s = Session::create_in(store.clone(), SessionMeta::new("big-remote")).unwrap();
    let output = "a long tool output line\n".repeat(20_000); // 480 KB
    let turn = vec![
        Message::user("run it"),
        Message::tool_result("call_1", output.as_str(), false),
    ];
    s.append_messages(&turn).unwrap();
    s.append(&Record::Rewrite {
        messages: turn.clone(),
    })
    .unwrap();
    // (The server may store the session under a project-scoped file name.)
    let transcripts: Vec<u64> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(transcripts.len(), 1);
    assert!(
        transcripts[0] < 16 * 1024,
        "the server's transcript is {} bytes",
        transcripts[0]
    );
    let blobs = memoir::blob::ArtifactStore::at(dir.path()).list().unwrap();
    assert_eq!(blobs.len(), 1, "one blob for the message and the rewrite");
    assert_eq!(blobs[0].size, output.len() as u64);
    let t = Session::open_in(store, "big-remote")
        .unwrap()
        .transcript()
        .unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages, turn);
}

// ---- POST /v1/search -------------------------------------------

fn search_all(base: &str, token: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let (status, text) = raw(
        "POST",
        &format!("{base}/v1/search"),
        Some(token),
        Some("application/json"),
        body.to_string().into_bytes(),
    );
    let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    (status, json)
}

on_every_store!(
    cross_session_search_is_project_scoped_by_the_token,
    cross_session_search_is_project_scoped
);

fn cross_session_search_is_project_scoped(config: ServerConfig) {
    let server = Running::start(config);
    let (a, b) = (server.client(TOKEN_A), server.client(TOKEN_B));
    for (c, id, text) in [
        (&a, "a1", "the zebrafish migration of alpha"),
        (&a, "a2", "alpha keeps notes about zebrafish tanks"),
        (&b, "a1", "beta secret zebrafish migration plan"),
        (&b, "b2", "beta only words: narwhal"),
    ] {
        c.create(&wire::CreateSession {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap();
        c.append(id, &[msg(text)], None).unwrap();
    }
    let (status, body) = search_all(
        &server.0.url(),
        TOKEN_A,
        serde_json::json!({"query": "zebrafish migration", "mode": "lexical"}),
    );
    assert_eq!(status, 200, "{body}");
    let hits = body["hits"].as_array().unwrap();
    let sessions: Vec<&str> = hits
        .iter()
        .map(|h| h["session"].as_str().unwrap())
        .collect();
    assert_eq!(sessions, vec!["a1", "a2"], "{body}");
    // The library's hit shape, ids as the caller knows them.
    assert_eq!(hits[0]["seq"], 1);
    assert_eq!(hits[0]["role"], "user");
    assert!(
        hits[0]["snippet"]["marked"]
            .as_str()
            .unwrap()
            .contains("[[zebrafish]]"),
        "{body}"
    );
    // Beta's session `a1` has the same id and the same words: never seen by alpha.
    let text = body.to_string();
    assert!(!text.contains("beta") && !text.contains('~'), "{text}");
    // Beta sees only its own, and a word only alpha used finds nothing for it.
    let (_, body) = search_all(
        &server.0.url(),
        TOKEN_B,
        serde_json::json!({"query": "zebrafish"}),
    );
    let hits = body["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{body}");
    assert!(hits[0]["snippet"]["text"]
        .as_str()
        .unwrap()
        .contains("beta secret"));
    let (_, body) = search_all(
        &server.0.url(),
        TOKEN_B,
        serde_json::json!({"query": "tanks"}),
    );
    assert_eq!(body["hits"].as_array().unwrap().len(), 0, "{body}");
    let (_, body) = search_all(
        &server.0.url(),
        TOKEN_A,
        serde_json::json!({"query": "narwhal"}),
    );
    assert_eq!(body["hits"].as_array().unwrap().len(), 0, "{body}");
    // Beta's better matches never crowd alpha's out of its own top k: the
    // scoping is in the query, not a filter over the whole store's top k.
    b.append(
        "b2",
        &(0..30)
            .map(|_| msg("zebrafish migration zebrafish migration zebrafish"))
            .collect::<Vec<_>>(),
        None,
    )
    .unwrap();
    for mode in ["lexical", "hybrid", "semantic"] {
        let (_, body) = search_all(
            &server.0.url(),
            TOKEN_A,
            serde_json::json!({"query": "zebrafish migration", "k": 2, "mode": mode}),
        );
        let mut sessions: Vec<&str> = body["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["session"].as_str().unwrap())
            .collect();
        sessions.sort();
        assert_eq!(sessions, vec!["a1", "a2"], "{mode}: {body}");
    }
    // Filters; a session filter cannot escape the namespace.
    let (_, body) = search_all(
        &server.0.url(),
        TOKEN_A,
        serde_json::json!({"query": "zebrafish", "filter": {"session": "a2"}}),
    );
    assert_eq!(body["hits"].as_array().unwrap().len(), 1, "{body}");
    let (status, body) = search_all(
        &server.0.url(),
        TOKEN_A,
        serde_json::json!({"query": "zebrafish", "filter": {"session": "beta~a1"}}),
    );
    assert_eq!(status, 400, "{body}");
    // Appends are found on the next request (the index catches up).
    a.append("a2", &[msg("a fresh okapi sighting")], None)
        .unwrap();
    let (_, body) = search_all(
        &server.0.url(),
        TOKEN_A,
        serde_json::json!({"query": "okapi"}),
    );
    assert_eq!(body["hits"][0]["seq"], 2, "{body}");
    // Bad input and no token.
    let (status, _) = search_all(
        &server.0.url(),
        TOKEN_A,
        serde_json::json!({"query": "x", "mode": "fuzzy"}),
    );
    assert_eq!(status, 400);
    let (status, _) = search_all(&server.0.url(), TOKEN_A, serde_json::json!({"q": "x"}));
    assert_eq!(status, 400);
    let (status, _) = raw(
        "POST",
        &format!("{}/v1/search", server.0.url()),
        None,
        Some("application/json"),
        br#"{"query":"zebrafish"}"#.to_vec(),
    );
    assert_eq!(status, 401);
}

/// `POST /v1/heads` answers only for the caller's project (another
/// project's session of the same id is absent, as a missing one), gives the
/// last `seq` and the content digest of the last record as read back, and
/// refuses a path-like id.
#[test]
fn heads_are_per_project_and_name_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let server = Running::start(file_config(dir.path()));
    let a = server.client(TOKEN_A);
    let b = server.client(TOKEN_B);
    for c in [&a, &b] {
        c.create(&wire::CreateSession {
            id: Some("s".into()),
            ..Default::default()
        })
        .unwrap();
    }
    a.create(&wire::CreateSession {
        id: Some("only-a".into()),
        ..Default::default()
    })
    .unwrap();
    let last = Record::Message(Message::user("second"));
    a.append(
        "s",
        &[Record::Message(Message::user("first")), last.clone()],
        Some(1),
    )
    .unwrap();
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let heads = a.heads(&ids(&["missing", "s", "only-a"])).unwrap();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert_eq!((heads[0].id.as_str(), heads[0].last_seq), ("s", 2));
    assert_eq!(heads[0].last_digest, wire::record_digest(&last).unwrap());
    assert_eq!((heads[1].id.as_str(), heads[1].last_seq), ("only-a", 0));
    let header = a.header("only-a").unwrap();
    assert_eq!(heads[1].last_digest, wire::header_digest(&header).unwrap());
    // Project b sees its own `s` (header only) and not a's `only-a`.
    let heads = b.heads(&ids(&["s", "only-a"])).unwrap();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert_eq!(heads[0].last_seq, 0);
    assert!(matches!(b.heads(&ids(&["../s"])), Err(Error::Invalid(_))));
}
