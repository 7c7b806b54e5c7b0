//! `memoir index`, `memoir search`, `memoir resume` and `sessions show
//! --around` as processes over a real store.

use std::path::Path;
use std::process::Command;

use memoir::message::Message;
use memoir::record::{Record, SessionMeta, SourceRef};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

fn memoir(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    c.env("MEMOIR_HOME", home)
        .env_remove("MEMOIR_SESSION_DIR")
        .env("NO_COLOR", "1");
    c
}

fn run(c: &mut Command) -> (i32, String) {
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn index_search_resume_and_show_around_work_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("store");
    let store = FileStore::new(&dir, Durability::None);
    let mut meta = SessionMeta::new("imported1");
    meta.workspace = "/work/proj".into();
    meta.source = Some(SourceRef {
        agent: "claude-code".into(),
        agent_version: None,
        session: Some("abcd-1234".into()),
        path: None,
        extra: Default::default(),
    });
    store.create(&meta).unwrap();
    let records: Vec<Record> = (0..6)
        .map(|i| {
            Record::Message(Message::user(if i == 3 {
                "the flamingo deploy broke".to_string()
            } else {
                format!("ordinary line {i}")
            }))
        })
        .collect();
    store.append("imported1", &records, None).unwrap();
    let d = dir.to_str().unwrap();

    let (code, out) = run(memoir(home.path()).args(["index", "--dir", d, "--json"]));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stats"]["messages"], 6, "{out}");

    let (code, out) = run(memoir(home.path()).args([
        "search",
        "flamingo",
        "--dir",
        d,
        "--json",
        "--agent",
        "claude-code",
        "--role",
        "user",
    ]));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hit = &v["hits"][0];
    assert_eq!(hit["session"], "imported1");
    assert_eq!(hit["seq"], 4);
    assert_eq!(hit["project"], "/work/proj");
    assert_eq!(hit["snippet"]["marked"], "the [[flamingo]] deploy broke");

    // Plain output without a terminal: markers, not colour; no match exits 1.
    let (code, out) = run(memoir(home.path()).args(["search", "flamingo", "--dir", d]));
    assert_eq!(code, 0);
    assert!(
        out.contains("[[flamingo]]") && !out.contains('\x1b'),
        "{out}"
    );
    let (code, _) = run(memoir(home.path()).args(["search", "zebra", "--dir", d]));
    assert_eq!(code, 1);
    // A query the index refuses is the caller's input: a usage error
    // (exit 2, `bad_request`), not an internal failure.
    let long = "flamingo ".repeat(600);
    let (code, out) = run(memoir(home.path()).args(["search", &long, "--dir", d, "--json"]));
    assert_eq!(code, 2, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["error"], "bad_request", "{out}");

    // Nothing matches: "not found" (exit 4), naming the store searched.
    let (code, out) = run(memoir(home.path()).args(["resume", "zebra", "--dir", d, "--json"]));
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("not_found") && out.contains(d), "{out}");

    // Resume by words or by id prefix.
    for target in ["flamingo deploy", "imported"] {
        let (code, out) = run(memoir(home.path()).args(["resume", target, "--dir", d]));
        assert_eq!(code, 0, "{out}");
        assert_eq!(out.trim(), "cd /work/proj && claude --resume abcd-1234");
    }

    let (code, out) = run(memoir(home.path()).args([
        "sessions",
        "show",
        "imported1",
        "--dir",
        d,
        "--around",
        "4",
        "-C",
        "1",
    ]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("flamingo")
            && out.contains("ordinary line 2")
            && out.contains("ordinary line 4")
    );
    assert!(
        !out.contains("ordinary line 1") && !out.contains("ordinary line 5"),
        "{out}"
    );
}

#[test]
fn tool_filter_finds_calls_and_results() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("store");
    let store = FileStore::new(&dir, Durability::None);
    store.create(&SessionMeta::new("tools1")).unwrap();
    let call = Message::new(
        memoir::message::Role::Assistant,
        vec![memoir::message::Block::ToolUse {
            id: "c1".into(),
            name: "Bash".into(),
            input: serde_json::json!({"command": "cargo test --workspace"}),
        }],
    );
    let records = vec![
        Record::Message(Message::user("run the cargo tests please")),
        Record::Message(call),
        Record::Message(Message::tool_result(
            "c1",
            "test parser::roundtrip ... FAILED\ncargo test failed",
            true,
        )),
        Record::Message(Message::assistant("the cargo test failed in the parser")),
    ];
    store.append("tools1", &records, None).unwrap();
    let d = dir.to_str().unwrap();
    let seqs = |args: &[&str]| -> Vec<u64> {
        let (code, out) = run(memoir(home.path())
            .args(["search", "--dir", d, "--json", "--mode", "lexical"])
            .args(args));
        assert!(code == 0 || code == 1, "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let mut s: Vec<u64> = v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["seq"].as_u64().unwrap())
            .collect();
        s.sort();
        s
    };
    // Every `cargo test` the Bash tool ran, and what it answered.
    assert_eq!(seqs(&["cargo test", "--tool", "Bash"]), vec![2, 3]);
    assert_eq!(seqs(&["cargo test"]), vec![1, 2, 3, 4]);
    assert!(seqs(&["cargo test", "--tool", "Read"]).is_empty());
    // What a terminal receives (plain text, no colour): `no_colour.rs`.
}

/// `memoir index` and `memoir search` on a PostgreSQL store: the index lives
/// in its database, the hits are the file store's shape (skipped with a
/// notice when no server is configured).
#[test]
fn index_and_search_work_on_a_postgres_store() {
    let Some((pg, schema)) = crate::postgres_common::pg_store(
        crate::postgres_common::POSTGRES_URL,
        memoir::store::postgres::VectorMode::Auto,
    ) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mut meta = SessionMeta::new("pgsess1");
    meta.workspace = "/work/pgproj".into();
    pg.create(&meta).unwrap();
    let records: Vec<Record> = (0..5)
        .map(|i| {
            Record::Message(Message::user(if i == 2 {
                "the heron rollout stalled".to_string()
            } else {
                format!("ordinary line {i}")
            }))
        })
        .collect();
    pg.append("pgsess1", &records, None).unwrap();
    let spec = format!("{}#schema={}", schema.url, schema.name);

    let (code, out) = run(memoir(home.path()).args(["index", "--store", &spec, "--json"]));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stats"]["messages"], 5, "{out}");
    assert!(
        v["index"].as_str().unwrap().starts_with("postgres://"),
        "{out}"
    );
    // The index is in the store's own tables, nowhere under $MEMOIR_HOME.
    let rows: i64 = schema
        .client()
        .query_one("SELECT count(*) FROM memoir_search_docs", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 5);

    let (code, out) = run(memoir(home.path()).args([
        "search",
        "heron",
        "--store",
        &spec,
        "--json",
        "--project",
        "/work/pgproj",
    ]));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hit = &v["hits"][0];
    assert_eq!(hit["session"], "pgsess1");
    assert_eq!(hit["seq"], 3);
    assert_eq!(hit["snippet"]["marked"], "the [[heron]] rollout stalled");
    let (code, _) = run(memoir(home.path()).args(["search", "zebra", "--store", &spec]));
    assert_eq!(code, 1);
}

/// `memoir serve` on an ephemeral port over the store `store`, with one
/// project token (`alpha`); returns the child and its `host:port`.
fn serve_store(home: &Path, store: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = memoir(home)
        .args(["serve", "--listen", "127.0.0.1:0", "--durability", "none"])
        .arg("--store")
        .arg(store)
        .args(["--token", "alpha=alpha-token-0123456789"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('/');
    let addr = url.strip_prefix("http://").unwrap().to_string();
    (child, addr)
}

/// `POST path` with a JSON body and the project's token: (status, body).
fn post(addr: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let body = body.to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer alpha-token-0123456789\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let json = out
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(serde_json::Value::Null);
    (status, json)
}

/// A running `memoir serve` keeps its index open; `memoir index --rebuild`
/// in another process swaps a new index in (while the server searches, and
/// again after, when the server writes what was added since into the new
/// index): every search answers 200 with every hit.
#[test]
fn a_running_server_answers_every_search_during_and_after_a_cli_rebuild() {
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("server-store");
    // Enough of the project's sessions that a rebuild takes a while.
    let st = FileStore::new(&store, Durability::None);
    for n in 0..60 {
        let id = format!("alpha~bulk{n}");
        st.create(&SessionMeta::new(&id)).unwrap();
        let records: Vec<Record> = (0..300)
            .map(|i| Record::Message(Message::user(format!("bulk line {i} of {n} about caches"))))
            .collect();
        st.append(&id, &records, None).unwrap();
    }
    let (mut server, addr) = serve_store(home.path(), &store);
    let add_session = |n: usize| {
        let (code, created) = post(&addr, "/v1/sessions", &serde_json::json!({"title": "t"}));
        assert!(code < 300, "{code} {created}");
        let id = created["id"].as_str().unwrap().to_string();
        let mut messages = vec![Message::user(format!("the flamingo number {n}"))];
        for i in 0..50 {
            messages.push(Message::assistant(format!("filler line {i} of {n}")));
        }
        let (code, out) = post(
            &addr,
            &format!("/v1/sessions/{id}/records"),
            &serde_json::json!({ "messages": messages }),
        );
        assert!(code < 300, "{code} {out}");
    };
    for n in 0..4 {
        add_session(n);
    }
    let search = || {
        post(
            &addr,
            "/v1/search",
            &serde_json::json!({"query": "flamingo", "mode": "lexical", "k": 50}),
        )
    };
    let hits = |v: &serde_json::Value| v["hits"].as_array().map_or(0, |h| h.len());
    let (code, out) = search();
    assert_eq!((code, hits(&out)), (200, 4), "{out}");
    let d = store.to_str().unwrap().to_string();
    let mut total_during = 0;
    for round in 0..3 {
        let mut rebuild = memoir(home.path())
            .args(["index", "--rebuild", "--dir", &d])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut during = 0;
        while rebuild.try_wait().unwrap().is_none() {
            let (code, out) = search();
            assert_eq!(
                (code, hits(&out)),
                (200, 4 + round),
                "round {round}, during: {out}"
            );
            during += 1;
        }
        total_during += during;
        assert!(rebuild.wait().unwrap().success());
        // The server catches up with what was written since, into the new index.
        add_session(4 + round);
        for _ in 0..3 {
            let (code, out) = search();
            assert_eq!(
                (code, hits(&out)),
                (200, 5 + round),
                "round {round}, after ({during} during): {out}"
            );
        }
    }
    assert!(total_during > 0, "no search ran during a rebuild");
    server.kill().unwrap();
    let _ = server.wait();
}
