//! The `promote` tool in process, on a real file store: a session's records
//! become a project fact that `search_sessions` finds and a later
//! session's `recall` brings back with its source; bad arguments are tool
//! errors.

use std::path::Path;
use std::sync::Arc;

use memoir::embed::HashEmbedder;
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir_mcp::{Backend, McpConfig, MemoirMcp};
use serde_json::{json, Map, Value};

fn server(dir: &Path, project: &Path) -> MemoirMcp {
    MemoirMcp::new(McpConfig {
        backend: Backend::Local {
            dir: dir.to_path_buf(),
            project: project.to_path_buf(),
            shared: true,
        },
        allow_writes: false,
        embedder: Arc::new(HashEmbedder::new(256)),
        blobs: None,
    })
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn call(s: &MemoirMcp, name: &str, a: Value) -> (bool, Value) {
    let r = s.call_blocking(None, name, args(a));
    (r.is_error == Some(true), r.structured_content.unwrap())
}

fn ok(s: &MemoirMcp, name: &str, a: Value) -> Value {
    let (failed, v) = call(s, name, a);
    assert!(!failed, "{name}: {v}");
    v
}

#[test]
fn a_promoted_fact_is_searched_and_recalled_in_a_later_session_with_its_source() {
    let root = tempfile::tempdir().unwrap();
    let (dir, project) = (root.path().join("s"), root.path().join("p"));
    let options = ManagerOptions {
        workspace: Some(project.clone()),
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::open(&dir, options.clone()).unwrap();
    let first = m
        .create_session("set up the staging cluster", None)
        .unwrap();
    m.add_message(Message::assistant("the kestrel token rotates every friday"))
        .unwrap();
    m.flush().unwrap();
    let seq = m.read_session(&first).unwrap().message_seqs[1];
    drop(m);
    let s = server(&dir, &project);

    let promoted = ok(
        &s,
        "promote",
        json!({"fact": "the kestrel token rotates every friday", "seqs": [seq], "tags": ["ops"]}),
    );
    assert_eq!(promoted["session"], json!(first));
    assert_eq!(
        promoted["sources"],
        json!([{"session": first, "seq": seq, "reasons": ["important"]}])
    );

    let hits = ok(&s, "search_sessions", json!({"query": "kestrel token"}));
    assert!(
        hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["session"] == promoted["notes_session"] && h["seq"] == promoted["seq"]),
        "{hits}"
    );

    // A later session of the project.
    let mut m = SessionManager::open(&dir, options).unwrap();
    let later = m
        .create_session("plan the maintenance window", None)
        .unwrap();
    m.flush().unwrap();
    drop(m);
    let recalled = ok(
        &s,
        "recall",
        json!({"query": "when does the kestrel token rotate", "session": later}),
    );
    let text = recalled["text"].as_str().unwrap();
    assert!(
        text.contains("the kestrel token rotates every friday"),
        "{text}"
    );
    assert!(
        text.contains(&format!("(promoted from {first} seq {seq})")),
        "{text}"
    );
    assert!(recalled["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["session"] == promoted["notes_session"]));

    // Bad input is a tool error and writes nothing.
    for bad in [
        json!({"fact": "x", "seqs": []}),
        json!({"fact": " ", "seqs": [seq]}),
        json!({"fact": "x", "seqs": [9999]}),
        json!({"fact": "x", "seqs": [seq], "task_score": 2.0}),
        json!({"fact": "x", "seqs": [seq], "unknown": 1}),
    ] {
        let (failed, _) = call(&s, "promote", bad.clone());
        assert!(failed, "{bad}");
    }
    let notes = ok(&s, "list_notes", json!({}));
    assert_eq!(notes["notes"].as_array().unwrap().len(), 1);
}
