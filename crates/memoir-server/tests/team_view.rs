//! `memoir serve`'s team view over loopback, with raw HTTP/1.1 requests:
//! each bearer token opens the web view of its own project only (listing,
//! conversation, changes, search, usage, blame), another project's session
//! id is 404 without its content, a wrong token or cookie is refused, and
//! the `Host`/`Origin` checks and the CSP hold as in `memoir ui`; the API
//! beside it still wants its bearer token.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use memoir::message::{Block, Message, Role};
use memoir::record::SessionMeta;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use memoir_server::namespace::ProjectStore;
use memoir_server::{ServerConfig, TeamUi, TokenGrant};

const ALPHA: &str = "alpha-token-0123456789abcdef";
const BETA: &str = "beta-token-0123456789abcdef0";
/// A token with the `usage` role only: aggregates, never content.
const COUNTER: &str = "usage-token-0123456789abcdef";

struct Running {
    port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A session of `project` with one edit of `file` (a word only it has).
fn plant(store: &Arc<FileStore>, project: &str, id: &str, word: &str, file: &str) {
    let ps: Arc<dyn LogStore> = Arc::new(ProjectStore::new(store.clone(), project));
    let mut meta = SessionMeta::new(id);
    meta.title = Some(format!("{word} work"));
    meta.workspace = "/srv/repo".into();
    let s = Session::create_in(ps, meta).unwrap();
    s.append_messages(&[
        Message::user(format!("please fix the {word} bug")),
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: format!("{id}-t1"),
                name: "Edit".into(),
                input: serde_json::json!({"file_path": file, "old_string": "a", "new_string": word}),
            }],
        ),
        Message::tool_result(format!("{id}-t1"), "updated", false),
    ])
    .unwrap();
}

fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path(), Durability::None));
    plant(&store, "alpha", "shared-id", "aardvark", "src/lib.rs");
    plant(&store, "alpha", "alpha-only", "anteater", "src/a.rs");
    plant(&store, "beta", "shared-id", "bumblebee", "src/lib.rs");
    plant(&store, "beta", "beta-only", "buffalo", "src/b.rs");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let counter = TokenGrant {
        roles: Some([memoir::access::Role::Usage].into()),
        ..TokenGrant::new(COUNTER, "alpha")
    };
    let mut config = ServerConfig::new(
        store.clone(),
        vec![
            TokenGrant::new(ALPHA, "alpha"),
            TokenGrant::new(BETA, "beta"),
            counter,
        ],
    );
    config.ui = Some(TeamUi::for_listen(addr, &["memoir.example.org".into()]));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        runtime
            .block_on(memoir_server::serve(listener, config, async {
                let _ = rx.await;
            }))
            .unwrap();
    });
    Running {
        port: addr.port(),
        stop: Some(tx),
        thread: Some(thread),
        _dir: dir,
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn get(port: u16, path: &str, host: &str, headers: &[(&str, &str)]) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\nHost: {host}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    // Bodies here are small and not chunked-encoded JSON we parse; strip
    // chunk framing if present.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn host(r: &Running) -> String {
    format!("127.0.0.1:{}", r.port)
}

fn cookie(r: &Running, token: &str) -> String {
    format!("memoir_team_{}={token}", r.port)
}

fn ids(reply: &Reply) -> Vec<String> {
    let mut ids: Vec<String> = reply.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn each_token_sees_its_own_project_only() {
    let r = start();
    let h = host(&r);
    // The handshake: the token becomes a strict cookie and leaves the URL.
    let login = get(r.port, &format!("/?token={ALPHA}"), &h, &[]);
    assert_eq!(login.status, 303);
    assert_eq!(login.header("location"), Some("/"));
    let set = login.header("set-cookie").unwrap();
    assert!(set.starts_with(&cookie(&r, ALPHA)), "{set}");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));

    let a = cookie(&r, ALPHA);
    let b = cookie(&r, BETA);
    let list = get(r.port, "/api/sessions", &h, &[("Cookie", &a)]);
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(ids(&list), ["alpha-only", "shared-id"]);
    assert_eq!(
        ids(&get(r.port, "/api/sessions", &h, &[("Cookie", &b)])),
        ["beta-only", "shared-id"]
    );

    // The same id is each project's own session.
    let mine = get(r.port, "/api/sessions/shared-id", &h, &[("Cookie", &a)]);
    assert_eq!(mine.status, 200);
    assert!(mine.body.contains("aardvark") && !mine.body.contains("bumblebee"));
    // Another project's session: 404, and none of its content.
    for path in [
        "/api/sessions/beta-only",
        "/api/sessions/beta-only/changes",
        "/api/sessions/beta-only/block/0/0",
        "/api/costs?ids=beta-only",
    ] {
        let other = get(r.port, path, &h, &[("Cookie", &a)]);
        assert!(!other.body.contains("buffalo"), "{path}: {}", other.body);
        if !path.starts_with("/api/costs") {
            assert_eq!(other.status, 404, "{path}");
        } else {
            assert_eq!(other.json(), serde_json::json!({}), "no cost cell");
        }
    }
    // Search: only the caller's hits, under the caller's ids.
    let hits = get(r.port, "/api/search?q=bumblebee", &h, &[("Cookie", &a)]).json();
    assert_eq!(hits["hits"], serde_json::json!([]));
    let hits = get(r.port, "/api/search?q=bumblebee", &h, &[("Cookie", &b)]).json();
    let found = hits["hits"].as_array().unwrap();
    assert!(!found.is_empty(), "{hits}");
    assert!(found.iter().all(|h| h["session"] == "shared-id"), "{hits}");
    // Usage counts the project's sessions only.
    let usage = get(r.port, "/api/usage?by=session", &h, &[("Cookie", &a)]).json();
    let sessions: Vec<&str> = usage["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["key"]["session"].as_str().or(r["key"].as_str()))
        .collect();
    assert!(
        !usage.to_string().contains("beta-only"),
        "{usage}: {sessions:?}"
    );
    // Blame: the file both projects edited, from each one's own session.
    let blame = get(
        r.port,
        "/api/blame?path=/srv/repo/src/lib.rs",
        &h,
        &[("Cookie", &a)],
    );
    assert_eq!(blame.status, 200, "{}", blame.body);
    let edits = blame.json()["edits"].clone();
    assert_eq!(edits.as_array().unwrap().len(), 1, "{edits}");
    assert_eq!(edits[0]["session"], "shared-id");
    let beta_file = get(
        r.port,
        "/api/blame?path=/srv/repo/src/b.rs",
        &h,
        &[("Cookie", &a)],
    );
    assert_eq!(beta_file.status, 404, "{}", beta_file.body);
}

#[test]
fn wrong_tokens_hosts_and_origins_are_refused_with_the_csp() {
    let r = start();
    let h = host(&r);
    for path in ["/", "/api/sessions", "/assets/app.js", "/s/shared-id"] {
        let none = get(r.port, path, &h, &[]);
        assert_eq!(none.status, 401, "{path}");
        assert!(none.header("content-security-policy").is_some());
        let wrong = cookie(&r, "not-a-token-of-this-server");
        assert_eq!(get(r.port, path, &h, &[("Cookie", &wrong)]).status, 403);
    }
    assert_eq!(
        get(r.port, "/?token=not-a-token-of-this-server", &h, &[]).status,
        403
    );
    // A token of the server without `read` on its project sees no content.
    let counter = cookie(&r, COUNTER);
    for path in ["/", "/api/sessions", "/api/sessions/alpha-only"] {
        let reply = get(r.port, path, &h, &[("Cookie", &counter)]);
        assert_eq!(reply.status, 403, "{path}");
        assert!(!reply.body.contains("anteater"), "{path}");
    }
    assert_eq!(
        get(r.port, &format!("/?token={COUNTER}"), &h, &[]).status,
        403
    );
    let a = cookie(&r, ALPHA);
    for bad in ["evil.example", "localhost.evil:80", "127.0.0.1:1"] {
        let reply = get(r.port, "/api/sessions", bad, &[("Cookie", &a)]);
        assert_eq!(reply.status, 403, "{bad}");
        assert!(!reply.body.contains("aardvark"));
    }
    for origin in ["http://evil.example", "null", &format!("https://{h}")] {
        let reply = get(
            r.port,
            "/api/sessions",
            &h,
            &[("Cookie", &a), ("Origin", origin)],
        );
        assert_eq!(reply.status, 403, "{origin}");
    }
    // The names given, over http and https.
    for (host, origin) in [
        (
            format!("localhost:{}", r.port),
            format!("http://localhost:{}", r.port),
        ),
        (
            "memoir.example.org".to_string(),
            "https://memoir.example.org".to_string(),
        ),
    ] {
        let ok = get(
            r.port,
            "/api/sessions",
            &host,
            &[("Cookie", &a), ("Origin", &origin)],
        );
        assert_eq!(ok.status, 200, "{host}");
        let csp = ok.header("content-security-policy").unwrap();
        assert_eq!(csp, memoir_server::ui::CONTENT_SECURITY_POLICY);
    }
    // The page itself.
    let page = get(r.port, "/", &h, &[("Cookie", &a)]);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/assets/app.js"));
    // The API beside it wants its bearer token, never the cookie.
    assert_eq!(
        get(r.port, "/v1/sessions", &h, &[("Cookie", &a)]).status,
        401
    );
    let bearer = format!("Bearer {ALPHA}");
    let api = get(r.port, "/v1/sessions", &h, &[("Authorization", &bearer)]);
    assert_eq!(api.status, 200);
}
