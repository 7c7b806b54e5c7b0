//! `memoir serve tokens` and `memoir usage --remote`, with real processes:
//! tokens minted into a server's file store before it starts (the server
//! needs no tokens file), two laptops (generated Claude Code history,
//! imported) pushing with `memoir sync` under `publish` tokens, the team
//! report by member matching each laptop's own `memoir usage`, the `usage`
//! token refused content, and a revoked token refused by the running server.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use memoir_testkit::{generate, AgentKind, CorpusSpec};
use serde_json::Value;

use crate::common::memoir_in;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn create(home: &Path, store: &Path, name: &str, grant: &str) -> (String, String) {
    let v = ok(memoir_in(home)
        .args([
            "serve", "tokens", "create", "--name", name, "--grant", grant, "--json", "--store",
        ])
        .arg(store)
        .output()
        .unwrap());
    (
        v["token"].as_str().unwrap().to_string(),
        v["entry"]["id"].as_str().unwrap().to_string(),
    )
}

/// A laptop store with generated Claude Code history imported.
fn laptop(root: &Path, n: u64) -> PathBuf {
    let home = root.join(format!("laptop{n}"));
    let src = home.join("src");
    generate(
        &CorpusSpec {
            seed: 70 + n,
            sessions: 3,
            target_mb: 0.2,
            agents: vec![AgentKind::ClaudeCode],
            max_session_mb: 0.1,
            ..CorpusSpec::default()
        },
        &src,
    )
    .unwrap();
    let store = home.join("store");
    ok(memoir_in(&home)
        .args(["import", "--all", "--json", "--dir"])
        .arg(&store)
        .env("CLAUDE_CONFIG_DIR", src.join("claude"))
        .output()
        .unwrap());
    store
}

fn local_input_tokens(root: &Path, store: &Path) -> u64 {
    let v = ok(memoir_in(root)
        .args(["usage", "--json", "--dir"])
        .arg(store)
        .output()
        .unwrap());
    v["total"]["input_tokens"].as_u64().unwrap()
}

#[test]
fn tokens_minted_on_the_store_push_report_and_revoke() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let served = root.join("served");
    let (ana, _) = create(root, &served, "ana", "team=publish");
    let (bot, bot_id) = create(root, &served, "bot", "team=publish");
    let (lead, _) = create(root, &served, "lead", "team=usage");
    let listed = ok(memoir_in(root)
        .args(["serve", "tokens", "list", "--json", "--store"])
        .arg(&served)
        .output()
        .unwrap());
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 3);
    let text = listed.to_string();
    assert!(!text.contains("digest") && !text.contains(&ana[20..]));

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = Server(
        memoir_in(root)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--store"])
            .arg(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let usage = |token: &str, by: &str| {
        memoir_in(root)
            .args([
                "usage", "--remote", &url, "--token", token, "--by", by, "--json",
            ])
            .output()
            .unwrap()
    };
    let t0 = Instant::now();
    while !usage(&lead, "member").status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let stores = [laptop(root, 1), laptop(root, 2)];
    for (store, token) in stores.iter().zip([&ana, &bot]) {
        ok(memoir_in(root)
            .args([
                "sync", "--remote", &url, "--token", token, "--json", "--dir",
            ])
            .arg(store)
            .output()
            .unwrap());
    }
    let report = ok(usage(&lead, "member"));
    let rows: Vec<(String, u64)> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["group"]["member"].as_str().unwrap().to_string(),
                r["input_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    let expect = vec![
        ("ana".to_string(), local_input_tokens(root, &stores[0])),
        ("bot".to_string(), local_input_tokens(root, &stores[1])),
    ];
    assert!(expect.iter().all(|(_, n)| *n > 0), "{expect:?}");
    assert_eq!(rows, expect);
    // The table prints too.
    let table = memoir_in(root)
        .args([
            "usage",
            "--remote",
            &url,
            "--token",
            &lead,
            "--by",
            "member,model",
        ])
        .output()
        .unwrap();
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("bot"));
    // Per-session rows are not the usage role's; nor is a publisher's a report.
    assert!(!usage(&lead, "session").status.success());
    assert!(!usage(&ana, "member").status.success());

    // A publisher lists its own sessions only.
    let list = |token: &str| {
        memoir_in(root)
            .args([
                "remote", "--remote", &url, "--token", token, "--json", "list",
            ])
            .output()
            .unwrap()
    };
    let own = ok(list(&bot));
    let own = own["sessions"].as_array().unwrap();
    assert!(!own.is_empty());
    assert!(own.iter().all(|s| s["meta"]["member"] == "bot"), "{own:?}");

    // Revoked on the store: the running server refuses it at once.
    ok(memoir_in(root)
        .args(["serve", "tokens", "revoke", &bot_id, "--json", "--store"])
        .arg(&served)
        .output()
        .unwrap());
    let out = list(&bot);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("revoked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The status line's code and the whole response of an MCP `initialize`
/// POST to `memoir mcp --http` on `port` with bearer `token`.
fn mcp_initialize(port: u16, token: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\nAuthorization: Bearer {token}\r\n\r\n{body}",
        body.len()
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(req.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).to_string();
    Some((text.get(9..12)?.parse().ok()?, text))
}

/// `memoir mcp --http` over a store with only a minted token (no tokens
/// file) starts, serves that token, and refuses it once it is revoked.
#[test]
fn mcp_over_http_serves_a_minted_token_until_it_is_revoked() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let served = root.join("served");
    let (secret, id) = create(root, &served, "ana", "team=read");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Server(
        memoir_in(root)
            .args(["mcp", "--http", &format!("127.0.0.1:{port}"), "--store"])
            .arg(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    let (status, response) = loop {
        if let Some(r) = mcp_initialize(port, &secret) {
            break r;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status, 200, "{response}");
    ok(memoir_in(root)
        .args(["serve", "tokens", "revoke", "--json", "--store"])
        .arg(&served)
        .arg(&id)
        .output()
        .unwrap());
    let (status, response) = mcp_initialize(port, &secret).unwrap();
    assert_eq!(status, 401, "{response}");
    assert!(response.contains("token_revoked"), "{response}");
}
