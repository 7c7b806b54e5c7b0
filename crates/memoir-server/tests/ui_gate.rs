//! `memoir ui`'s gate over loopback, with raw HTTP/1.1 requests (so the
//! `Host` and `Origin` headers are exactly what a test sends): the per-run
//! token (none 401, wrong 403, right one traded for a cookie), `Host`
//! refusal (DNS rebinding), `Origin` refusal, the Content-Security-Policy on
//! every response, the read-only API answering a real store, and the live
//! streams (new messages as they are appended, the cap on open streams,
//! streams ending when their client leaves or the server stops).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::message::{Block, Message, Role};
use memoir::record::SessionMeta;
use memoir::store::file::FileStore;
use memoir::store::Durability;
use memoir::transcript::Session;
use memoir_server::ui::{self, UiConfig};

const TOKEN: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

struct Running {
    port: u16,
    store: Arc<FileStore>,
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

fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path(), Durability::None));
    let mut meta = SessionMeta::new("s-edit");
    meta.title = Some("fix the rounding".into());
    let s = Session::create_in(store.clone(), meta).unwrap();
    s.append_messages(&[
        Message::user("please fix rounding"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: "t1".into(),
                name: "Edit".into(),
                input: serde_json::json!({"file_path": "src/a.py", "old_string": "round(x)", "new_string": "x.quantize(CENT)"}),
            }],
        ),
        Message::tool_result("t1", "updated", false),
    ])
    .unwrap();
    let mut meta = SessionMeta::new("s-fork");
    meta.parent = Some(memoir::record::ForkPoint {
        session: "s-edit".into(),
        seq: 1,
        messages: 1,
        parent_created_at: None,
    });
    Session::create_in(store.clone(), meta).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = UiConfig {
        store: store.clone(),
        token: TOKEN.into(),
        port,
        home: None,
    };
    let thread = std::thread::spawn(move || {
        runtime
            .block_on(ui::serve(listener, config, async {
                let _ = rx.await;
            }))
            .unwrap();
    });
    Running {
        port,
        store,
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
}

/// One GET with exactly `headers` (a `None` host sends no `Host`).
fn get(port: u16, path: &str, host: Option<&str>, headers: &[(&str, &str)]) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if let Some(h) = host {
        req.push_str(&format!("Host: {h}\r\n"));
    }
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
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

fn own_host(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn good_cookie(port: u16) -> String {
    format!("memoir_ui_{port}={TOKEN}")
}

#[test]
fn no_token_is_401_a_wrong_token_or_cookie_403() {
    let r = start();
    let host = own_host(r.port);
    for path in [
        "/",
        "/api/sessions",
        "/assets/app.js",
        "/s/s-edit",
        "/nothing",
    ] {
        assert_eq!(get(r.port, path, Some(&host), &[]).status, 401, "{path}");
        let wrong = format!("memoir_ui_{}={}", r.port, "0".repeat(64));
        assert_eq!(
            get(r.port, path, Some(&host), &[("Cookie", &wrong)]).status,
            403,
            "{path}"
        );
        // The right token under another port's cookie name does not count.
        let other = format!("memoir_ui_{}={TOKEN}", r.port.wrapping_add(1));
        assert_eq!(
            get(r.port, path, Some(&host), &[("Cookie", &other)]).status,
            401,
            "{path}"
        );
    }
    let wrong = format!("/?token={}", "f".repeat(64));
    assert_eq!(get(r.port, &wrong, Some(&host), &[]).status, 403);
    assert_eq!(get(r.port, "/?token=", Some(&host), &[]).status, 403);
}

#[test]
fn the_token_is_traded_for_a_strict_cookie_and_removed_from_the_url() {
    let r = start();
    let host = own_host(r.port);
    let reply = get(
        r.port,
        &format!("/search?q=x&token={TOKEN}&k=3"),
        Some(&host),
        &[],
    );
    assert_eq!(reply.status, 303);
    assert_eq!(reply.header("location"), Some("/search?q=x&k=3"));
    let cookie = reply.header("set-cookie").unwrap();
    assert!(
        cookie.starts_with(&format!("{};", good_cookie(r.port))),
        "{cookie}"
    );
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let page = get(
        r.port,
        "/",
        Some(&host),
        &[("Cookie", &good_cookie(r.port))],
    );
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/assets/app.js"));
}

#[test]
fn a_foreign_host_is_refused_even_with_the_right_cookie() {
    let r = start();
    let cookie = good_cookie(r.port);
    let port = r.port;
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("127.0.0.2:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".to_string(),
    ] {
        let reply = get(port, "/api/sessions", Some(&host), &[("Cookie", &cookie)]);
        assert_eq!(reply.status, 403, "{host}");
        assert!(reply.body.contains("forbidden_host"), "{host}");
        // The token in the URL does not open a foreign host either.
        let with_token = get(port, &format!("/?token={TOKEN}"), Some(&host), &[]);
        assert_eq!(with_token.status, 403, "{host}");
    }
    assert_ne!(
        get(port, "/api/sessions", None, &[("Cookie", &cookie)]).status,
        200
    );
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let ok = get(port, "/api/sessions", Some(&host), &[("Cookie", &cookie)]);
        assert_eq!(ok.status, 200, "{host}");
    }
}

#[test]
fn a_foreign_origin_is_refused() {
    let r = start();
    let port = r.port;
    let host = own_host(port);
    let cookie = good_cookie(port);
    for origin in [
        "http://evil.example".to_string(),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        format!("https://127.0.0.1:{port}"),
        format!("http://evil.example:{port}"),
        "null".to_string(),
    ] {
        let reply = get(
            port,
            "/api/sessions",
            Some(&host),
            &[("Cookie", &cookie), ("Origin", &origin)],
        );
        assert_eq!(reply.status, 403, "{origin}");
        assert!(reply.body.contains("forbidden_origin"), "{origin}");
    }
    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let reply = get(
            port,
            "/api/sessions",
            Some(&host),
            &[("Cookie", &cookie), ("Origin", &origin)],
        );
        assert_eq!(reply.status, 200, "{origin}");
    }
}

#[test]
fn every_response_carries_the_strict_policy() {
    let r = start();
    let host = own_host(r.port);
    let cookie = good_cookie(r.port);
    let cases: [(&str, &[(&str, &str)]); 6] = [
        ("/", &[("Cookie", &cookie)]),
        ("/assets/app.js", &[("Cookie", &cookie)]),
        ("/api/sessions", &[("Cookie", &cookie)]),
        ("/api/nothing", &[("Cookie", &cookie)]),
        ("/api/sessions", &[]),
        ("/?token=x", &[]),
    ];
    for (path, headers) in cases {
        let reply = get(r.port, path, Some(&host), headers);
        assert_eq!(
            reply.header("content-security-policy"),
            Some(ui::CONTENT_SECURITY_POLICY),
            "{path} {}",
            reply.status
        );
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("x-frame-options"), Some("DENY"));
    }
    let csp = ui::CONTENT_SECURITY_POLICY;
    assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self';"));
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval") && !csp.contains("http")
    );
}

#[test]
fn the_api_lists_trees_reads_sessions_and_reconstructs_changes() {
    let r = start();
    let host = own_host(r.port);
    let cookie = good_cookie(r.port);
    let json = |path: &str| {
        let reply = get(r.port, path, Some(&host), &[("Cookie", &cookie)]);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()
    };
    let page = json("/api/sessions");
    assert_eq!(
        (page["roots"].as_u64(), page["sessions"].as_u64()),
        (Some(1), Some(2))
    );
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows[0]["id"], "s-edit");
    assert_eq!(
        (rows[1]["id"].as_str(), rows[1]["depth"].as_u64()),
        (Some("s-fork"), Some(1))
    );
    assert_eq!(rows[1]["relation"], "fork");
    let s = json("/api/sessions/s-edit");
    assert_eq!(s["messages"].as_array().unwrap().len(), 3);
    assert_eq!(s["children"][0]["id"], "s-fork");
    let c = json("/api/sessions/s-edit/changes");
    assert_eq!(c["files"][0]["path"], "src/a.py");
    assert_eq!(c["files"][0]["changes"][0]["message"], 1);
    let b = json("/api/sessions/s-edit/block/1/0");
    assert_eq!(b["name"], "Edit");
    // Bad input is a 400 or 404, never a 500.
    let bad = |path: &str| get(r.port, path, Some(&host), &[("Cookie", &cookie)]).status;
    assert_eq!(bad("/api/sessions?sort=size"), 400);
    assert_eq!(bad("/api/sessions/..%2Fetc"), 400);
    assert_eq!(bad("/api/sessions/missing"), 404);
    assert_eq!(bad("/api/sessions/s-edit/block/9/0"), 404);
}

/// A live stream of `id` from message `from`: the connection, and what was
/// read so far (the response head included).
fn open_stream(port: u16, id: &str, from: usize) -> (TcpStream, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let req = format!(
        "GET /api/sessions/{id}/events?from={from} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {}\r\n\r\n",
        good_cookie(port)
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut seen = String::new();
    read_until(&mut s, &mut seen, "\r\n\r\n", Duration::from_secs(10));
    (s, seen)
}

/// Read from `s` into `seen` until it holds `want` (or `within` passes).
fn read_until(s: &mut TcpStream, seen: &mut String, want: &str, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while !seen.contains(want) && Instant::now() < end {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(_) => {} // read timeout: look again
        }
    }
    seen.contains(want)
}

#[test]
fn a_live_stream_sends_the_messages_appended_after_the_page_s() {
    let r = start();
    let (mut s, mut seen) = open_stream(r.port, "s-edit", 3);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("content-type: text/event-stream"), "{seen}");
    assert!(seen.contains(ui::CONTENT_SECURITY_POLICY), "{seen}");
    let session = Session::open_in(r.store.clone(), "s-edit").unwrap();
    session
        .append_messages(&[
            Message::user("first live line"),
            Message::user("second live line"),
        ])
        .unwrap();
    assert!(
        read_until(
            &mut s,
            &mut seen,
            "second live line",
            Duration::from_secs(10)
        ),
        "{seen}"
    );
    assert!(
        seen.contains("event: messages") && seen.contains("id: 5"),
        "{seen}"
    );
    assert!(
        seen.contains("\"from\":3") && seen.contains("\"count\":5"),
        "{seen}"
    );
    // Only what came after the page's 3 messages.
    assert!(!seen.contains("please fix rounding"), "{seen}");

    // A stream of an unknown session is refused at once; the gate holds.
    let host = own_host(r.port);
    let cookie = good_cookie(r.port);
    let status =
        |path: &str, headers: &[(&str, &str)]| get(r.port, path, Some(&host), headers).status;
    assert_eq!(
        status("/api/sessions/missing/events", &[("Cookie", &cookie)]),
        404
    );
    assert_eq!(status("/api/sessions/s-edit/events", &[]), 401);
    assert_eq!(
        status(
            "/api/sessions/s-edit/events",
            &[("Cookie", &cookie), ("Origin", "http://evil.example")]
        ),
        403
    );
}

#[test]
fn live_streams_are_capped_and_a_departed_client_frees_its_slot() {
    let r = start();
    let mut open: Vec<TcpStream> = (0..ui::MAX_STREAMS)
        .map(|_| {
            let (s, seen) = open_stream(r.port, "s-edit", 3);
            assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
            s
        })
        .collect();
    let (_, refused) = open_stream(r.port, "s-edit", 3);
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    // One client goes away: its stream ends and its slot is free again.
    drop(open.pop());
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, seen) = open_stream(r.port, "s-edit", 3);
        if seen.starts_with("HTTP/1.1 200") {
            open.push(s);
            break;
        }
        assert!(
            Instant::now() < end,
            "the departed client's slot was never freed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn stopping_the_server_ends_open_streams() {
    let r = start();
    let (_s, seen) = open_stream(r.port, "s-edit", 3);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(r); // asks the server to stop and waits for it
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(20)).is_ok(),
        "shutdown waited on an open live stream"
    );
}

#[test]
fn a_session_comes_in_pages_and_the_list_sees_a_new_session() {
    let r = start();
    let host = own_host(r.port);
    let cookie = good_cookie(r.port);
    let json = |path: &str| {
        let reply = get(r.port, path, Some(&host), &[("Cookie", &cookie)]);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()
    };
    // The first page: the head and the first messages, with the count.
    let first = json("/api/sessions/s-edit?limit=2");
    let ids: Vec<u64> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["i"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [0, 1]);
    assert_eq!(
        (first["from"].as_u64(), first["count"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(first["children"][0]["id"], "s-fork");
    // The rest: the messages only.
    let rest = json("/api/sessions/s-edit?from=2");
    let ids: Vec<u64> = rest["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["i"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [2]);
    assert_eq!(rest["count"], 3);
    assert!(rest.get("children").is_none(), "{rest}");
    assert_eq!(
        json("/api/sessions/s-edit?from=9")["messages"],
        serde_json::json!([])
    );
    assert_eq!(
        get(
            r.port,
            "/api/sessions/s-edit?page=2",
            Some(&host),
            &[("Cookie", &cookie)]
        )
        .status,
        400
    );

    // The listing is kept between requests, and a session created since
    // (by another writer of the store) is listed at the next one.
    assert_eq!(json("/api/sessions")["sessions"], 2);
    assert_eq!(json("/api/facets")["sessions"], 2);
    let mut meta = SessionMeta::new("s-new");
    meta.title = Some("a new one".into());
    let s = Session::create_in(r.store.clone(), meta).unwrap();
    s.append_messages(&[Message::user("hello")]).unwrap();
    let page = json("/api/sessions");
    assert_eq!(page["sessions"], 3, "{page}");
    assert_eq!(page["rows"][0]["id"], "s-new", "{page}");
    assert_eq!(json("/api/facets")["sessions"], 3);
    // And one appended to since: its count moves.
    s.append_messages(&[Message::user("again")]).unwrap();
    let page = json("/api/sessions");
    assert_eq!(page["rows"][0]["messages"], 2, "{page}");
}
