//! `memoir mcp --http` refuses browser requests from foreign origins (403),
//! with and without authentication, over a real loopback socket; its own
//! loopback origin and requests without `Origin` are served.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use memoir::embed::HashEmbedder;
use memoir_mcp::{http, Backend, McpConfig, MemoirMcp};
use memoir_server::{TokenGrant, TokenIndex};

const TOKEN: &str = "origin-test-token-0123456789";

/// A server on an ephemeral loopback port, served until the runtime drops.
fn start(dir: &std::path::Path, auth: bool) -> (tokio::runtime::Runtime, SocketAddr) {
    let server = MemoirMcp::new(McpConfig {
        backend: Backend::Local {
            dir: dir.join("sessions"),
            project: dir.to_path_buf(),
            shared: false,
        },
        allow_writes: false,
        embedder: Arc::new(HashEmbedder::new(64)),
        blobs: None,
    });
    let tokens = auth.then(|| {
        TokenIndex::new(vec![TokenGrant {
            token: TOKEN.into(),
            project: "p".into(),
            expires_at: None,
            ..TokenGrant::default()
        }])
        .into()
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let router = http::router(server, tokens, addr);
    rt.spawn(http::serve(listener, router, std::future::pending()));
    (rt, addr)
}

/// The status of an `initialize` POST with `origin` (none: no header).
fn status(addr: SocketAddr, origin: Option<&str>, auth: bool) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(o) = origin {
        req.push_str(&format!("Origin: {o}\r\n"));
    }
    if auth {
        req.push_str(&format!("Authorization: Bearer {TOKEN}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    let line = String::from_utf8_lossy(&head).to_string();
    line[9..12]
        .parse()
        .unwrap_or_else(|_| panic!("status line {line:?}"))
}

#[test]
fn foreign_origins_are_refused_and_the_servers_own_are_served() {
    for auth in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (_rt, addr) = start(dir.path(), auth);
        let port = addr.port();
        let other = if port == 65535 { port - 1 } else { port + 1 };
        let foreign = [
            "http://evil.example".to_string(),
            format!("http://evil.example:{port}"),
            format!("https://attacker.test:{port}"),
            format!("http://127.0.0.1.evil.example:{port}"),
            format!("http://localhost.evil.example:{port}"),
            format!("http://localhost:{other}"),
            format!("http://127.0.0.1:{other}"),
            "http://127.0.0.1".to_string(),
            format!("http://192.168.1.7:{port}"),
            format!("http://[fe80::1]:{port}"),
            format!("http://user@127.0.0.1:{port}"),
            format!("ftp://127.0.0.1:{port}"),
            format!("http://127.0.0.1:+{port}"),
            "null".to_string(),
            String::new(),
        ];
        for origin in &foreign {
            assert_eq!(
                status(addr, Some(origin), auth),
                403,
                "origin {origin:?} (auth {auth})"
            );
        }
        let own = [
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://LOCALHOST:{port}"),
            format!("http://[::1]:{port}"),
            format!("https://localhost:{port}"),
        ];
        for origin in own.iter().map(|o| Some(o.as_str())).chain([None]) {
            assert_eq!(
                status(addr, origin, auth),
                200,
                "origin {origin:?} (auth {auth})"
            );
        }
        if auth {
            // The origin is checked first: a foreign page learns nothing
            // about tokens, and a good origin still needs one.
            assert_eq!(status(addr, Some("http://evil.example"), false), 403);
            assert_eq!(status(addr, None, false), 401);
        }
    }
}

#[test]
fn origin_rule_matches_only_the_listening_port_on_loopback() {
    let listen: SocketAddr = "127.0.0.1:8931".parse().unwrap();
    assert!(http::origin_allowed("http://localhost:8931", listen));
    assert!(http::origin_allowed("http://127.0.0.2:8931", listen));
    assert!(!http::origin_allowed("http://localhost", listen));
    assert!(!http::origin_allowed("http://localhost:8931/path", listen));
    assert!(!http::origin_allowed("http://[::1", listen));
    let lan: SocketAddr = "192.168.1.7:80".parse().unwrap();
    assert!(http::origin_allowed("http://192.168.1.7", lan));
    assert!(!http::origin_allowed("http://192.168.1.8", lan));
    let any: SocketAddr = "0.0.0.0:80".parse().unwrap();
    assert!(!http::origin_allowed("http://0.0.0.0", any));
    assert!(!http::origin_allowed("http://10.0.0.1", any));
}
