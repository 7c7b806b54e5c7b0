//! The tool handlers in process, on real file stores: scoping, notes under
//! concurrent writers (threads with their own servers), tool errors, pages.

use std::path::Path;
use std::sync::Arc;

use memoir::embed::HashEmbedder;
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir_mcp::{Backend, McpConfig, MemoirMcp};
use serde_json::{json, Map, Value};

fn server(dir: &Path, project: &Path, allow_writes: bool) -> MemoirMcp {
    MemoirMcp::new(McpConfig {
        backend: Backend::Local {
            dir: dir.to_path_buf(),
            project: project.to_path_buf(),
            shared: true,
        },
        allow_writes,
        embedder: Arc::new(HashEmbedder::new(256)),
        blobs: None,
    })
}

fn session(dir: &Path, workspace: &Path, text: &str) -> String {
    let options = ManagerOptions {
        workspace: Some(workspace.to_path_buf()),
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::open(dir, options).unwrap();
    let id = m.create_session(text, None).unwrap();
    m.add_message(Message::assistant("noted")).unwrap();
    m.flush().unwrap();
    id
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn ok(s: &MemoirMcp, name: &str, a: Value) -> Value {
    let r = s.call_blocking(None, name, args(a));
    assert_ne!(r.is_error, Some(true), "{name}: {:?}", r.content);
    r.structured_content.unwrap()
}

fn err(s: &MemoirMcp, name: &str, a: Value) -> String {
    let r = s.call_blocking(None, name, args(a));
    assert_eq!(r.is_error, Some(true), "{name} should fail");
    r.structured_content.unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_project_never_sees_another_projects_sessions_unless_widened() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a, b) = (
        root.path().join("s"),
        root.path().join("a"),
        root.path().join("b"),
    );
    let sa = session(&dir, &a, "alpha marmalade plan");
    let sb = session(&dir, &b, "beta marmalade plan");
    let s = server(&dir, &a, false);
    let hits = ok(&s, "search_sessions", json!({"query": "marmalade"}));
    let ids: Vec<&str> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["session"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [sa.as_str()]);
    assert_eq!(err(&s, "get_session", json!({"id": sb})), "not_found");
    assert_eq!(err(&s, "resume_command", json!({"id": sb})), "not_found");
    assert_eq!(
        err(
            &s,
            "search_sessions",
            json!({"query": "marmalade", "project": b.display().to_string()})
        ),
        "bad_request"
    );
    let wide = ok(
        &s,
        "search_sessions",
        json!({"query": "marmalade", "all_projects": true}),
    );
    assert_eq!(wide["hits"].as_array().unwrap().len(), 2);
    let listed = ok(&s, "list_sessions", json!({}));
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn concurrent_writers_keep_every_note_once_and_forget_is_a_tombstone() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (dir, a) = (dir.clone(), a.clone());
            std::thread::spawn(move || {
                let s = server(&dir, &a, false);
                for i in 0..25 {
                    ok(&s, "remember", json!({"text": format!("note {t}-{i}")}));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = server(&dir, &a, true);
    let page = ok(&s, "list_notes", json!({"limit": 200}));
    let notes = page["notes"].as_array().unwrap();
    let mut texts: Vec<&str> = notes.iter().map(|n| n["text"].as_str().unwrap()).collect();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), 100);
    assert_eq!(notes.len(), 100);
    let note = ok(
        &s,
        "remember",
        json!({"text": "the quokka mascot is named Pip"}),
    );
    let id = note["id"].as_str().unwrap().to_string();
    let found = ok(&s, "search_sessions", json!({"query": "quokka mascot"}));
    assert_eq!(found["hits"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(ok(&s, "forget", json!({"id": id}))["forgotten"], true);
    assert_eq!(err(&s, "forget", json!({"id": id})), "not_found");
    assert_eq!(
        ok(&s, "list_notes", json!({"limit": 200}))["notes"]
            .as_array()
            .unwrap()
            .len(),
        100
    );
    let gone = ok(&s, "search_sessions", json!({"query": "quokka mascot"}));
    assert_eq!(gone["hits"], json!([]), "a forgotten note is not found");
}

#[test]
fn bad_arguments_are_tool_errors_and_writes_need_permission() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    session(&dir, &a, "something");
    let s = server(&dir, &a, false);
    for (name, a) in [
        ("search_sessions", json!({})),
        ("search_sessions", json!({"query": "x", "extra": 1})),
        ("search_sessions", json!({"query": "x", "cursor": "zz"})),
        ("recall", json!({"query": "x", "token_budget": 1})),
        ("get_session", json!({"id": "../../etc"})),
        ("remember", json!({"text": ""})),
        ("usage", json!({"by": "planet"})),
        ("forget", json!({"id": "note_0"})),
    ] {
        let r = s.call_blocking(None, name, args(a.clone()));
        assert_eq!(r.is_error, Some(true), "{name} {a}");
    }
    let r = s.call_blocking(
        None,
        "forget",
        args(json!({"id": format!("note_{}", "0".repeat(32))})),
    );
    let msg = r.structured_content.unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("--allow-writes"), "{msg}");
}

#[test]
fn pages_hand_out_cursors_until_the_end() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    for i in 0..7 {
        session(&dir, &a, &format!("session number {i}"));
    }
    let s = server(&dir, &a, false);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut a = json!({"limit": 3});
        if let Some(c) = &cursor {
            a["cursor"] = json!(c);
        }
        let page = ok(&s, "list_sessions", a);
        seen.extend(
            page["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_string()),
        );
        if page["truncated"] == false {
            break;
        }
        cursor = Some(page["next_cursor"].as_str().unwrap().to_string());
    }
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((seen.len(), unique.len()), (7, 7));
}

/// A session of `n` tool calls each answered by a `size`-byte result.
fn tool_session(dir: &Path, workspace: &Path, n: usize, size: usize) -> String {
    let options = ManagerOptions {
        workspace: Some(workspace.to_path_buf()),
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::open(dir, options).unwrap();
    let id = m.create_session("read the logs", None).unwrap();
    for i in 0..n {
        m.add_message(Message::new(
            memoir::Role::Assistant,
            vec![memoir::Block::ToolUse {
                id: format!("t{i}"),
                name: "Read".into(),
                input: json!({"file": format!("log{i}")}),
            }],
        ))
        .unwrap();
        m.add_message(Message::new(
            memoir::Role::Tool,
            vec![memoir::Block::ToolResult {
                tool_use_id: format!("t{i}"),
                content: format!("result {i}: {}", "x".repeat(size)),
                is_error: false,
            }],
        ))
        .unwrap();
    }
    m.flush().unwrap();
    id
}

#[test]
fn get_session_shows_tool_results_bounded() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    let id = tool_session(&dir, &a, 2, 10);
    let big = tool_session(&dir, &a, 1, 50_000);
    let s = server(&dir, &a, false);
    let page = ok(&s, "get_session", json!({"id": id}));
    let tools: Vec<&Value> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1]["text"], format!("result 1: {}", "x".repeat(10)));
    assert_eq!(tools[1]["truncated"], false);
    let page = ok(&s, "get_session", json!({"id": big}));
    let last = page["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["truncated"], true);
    let text = last["text"].as_str().unwrap();
    assert!(text.starts_with("result 0: xxx") && text.len() < 50_000);
}

#[test]
fn a_large_session_resource_is_read_in_bounded_pages() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    let id = tool_session(&dir, &a, 200, 2_000);
    let s = server(&dir, &a, false);
    let whole = SessionManager::open(&dir, ManagerOptions::default())
        .unwrap()
        .export(
            &id,
            memoir::manager::ExportOptions {
                format: memoir::manager::ExportFormat::Markdown,
                redact: false,
            },
        )
        .unwrap()
        .text;
    assert!(whole.len() > 400_000);
    let base = format!("memoir://session/{id}");
    let mut uri = base.clone();
    let mut joined = String::new();
    let mut reads = 0;
    loop {
        reads += 1;
        assert!(reads < 100, "paging does not end");
        let r = memoir_mcp::resources::read(s.config(), None, &uri).unwrap();
        let text = match &r.contents[0] {
            rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            text.len() <= memoir_mcp::page::MAX_RESULT_BYTES,
            "{}",
            text.len()
        );
        match text.rfind("\n\n[truncated: ") {
            Some(at) => {
                joined.push_str(&text[..at]);
                let next = text[at..].split("?cursor=").nth(1).unwrap();
                let next: String = next
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                uri = format!("{base}?cursor={next}");
            }
            None => {
                joined.push_str(&text);
                break;
            }
        }
    }
    assert!(reads > 10);
    assert_eq!(joined, whole, "the pages put together are the transcript");
    assert!(memoir_mcp::resources::read(s.config(), None, &format!("{base}?cursor=zz")).is_err());
}

/// A session with id `id` in `workspace` of the shared store `dir`.
fn session_with_id(dir: &Path, workspace: &Path, id: &str) {
    let store: Arc<dyn memoir::store::LogStore> = Arc::new(memoir::store::file::FileStore::new(
        dir,
        memoir::store::Durability::Flush,
    ));
    let mut meta = memoir::record::SessionMeta::new(id);
    meta.workspace = workspace.to_path_buf();
    let s = memoir::transcript::Session::create_in(store, meta).unwrap();
    s.append_messages(&[Message::user(format!("session {id}"))])
        .unwrap();
}

/// The whole answer of a failing call, as text.
fn failure(s: &MemoirMcp, name: &str, a: Value) -> String {
    let r = s.call_blocking(None, name, args(a));
    assert_eq!(r.is_error, Some(true), "{name} should fail");
    format!("{:?} {:?}", r.structured_content, r.content)
}

#[test]
fn id_prefixes_resolve_among_the_projects_sessions_only() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a, b) = (
        root.path().join("s"),
        root.path().join("a"),
        root.path().join("b"),
    );
    let mine = "ab12-alpha";
    let (mine2, mine3) = ("cd01-alpha", "cd02-alpha");
    let theirs = ["ab12-beta", "ab34-beta", "a-beta", "cd03-beta", "ef56-beta"];
    for id in [mine, mine2, mine3] {
        session_with_id(&dir, &a, id);
    }
    for id in theirs {
        session_with_id(&dir, &b, id);
    }
    let s = server(&dir, &a, false);
    // Another project's id in an answer, beyond the caller's own words.
    let leaks = |text: &str, asked: &str| {
        theirs
            .iter()
            .find(|t| **t != asked && text.contains(*t))
            .copied()
    };
    // Every prefix unique in the project resolves to the project's session,
    // however many of another project's ids share it.
    for end in 1..=mine.len() {
        let prefix = &mine[..end];
        if [mine2, mine3].iter().any(|m| m.starts_with(prefix)) {
            continue;
        }
        let got = ok(&s, "get_session", json!({"id": prefix}));
        assert_eq!(got["session"], mine, "prefix {prefix:?}");
        let got = ok(&s, "resume_command", json!({"id": prefix}));
        assert_eq!(got["session"], mine, "prefix {prefix:?}");
    }
    // A prefix matching only another project's sessions is not found, and
    // no error names another project's id.
    for id in theirs {
        for end in 1..=id.len() {
            let prefix = &id[..end];
            if [mine, mine2, mine3].iter().any(|m| m.starts_with(prefix)) {
                continue;
            }
            let text = failure(&s, "get_session", json!({"id": prefix}));
            assert!(text.contains("not_found"), "{prefix:?}: {text}");
            assert_eq!(leaks(&text, prefix), None, "{prefix:?}: {text}");
        }
    }
    // Ambiguous within the project: only the project's ids are listed.
    for prefix in ["c", "cd", "cd0"] {
        let text = failure(&s, "get_session", json!({"id": prefix}));
        assert!(text.contains(mine2) && text.contains(mine3), "{text}");
        assert_eq!(leaks(&text, prefix), None, "{prefix:?}: {text}");
    }
}

/// `fork_session` cuts at a record `seq`, as `memoir sessions fork --at`
/// and the server's `at_seq` do, not at a message count: with a checkpoint
/// record among the messages, the two differ.
#[test]
fn fork_session_cuts_at_a_record_seq() {
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    let id = {
        let options = ManagerOptions {
            workspace: Some(a.clone()),
            ..ManagerOptions::default()
        };
        let mut m = SessionManager::open(&dir, options).unwrap();
        let id = m.create_session("forked", None).unwrap();
        m.add_message(Message::user("one")).unwrap();
        m.add_message(Message::assistant("two")).unwrap();
        m.set_context_checkpoint(Some(json!({"cutoff_index": 1})))
            .unwrap();
        m.add_message(Message::user("three")).unwrap();
        m.add_message(Message::assistant("four")).unwrap();
        m.flush().unwrap();
        id
    };
    let reader = SessionManager::open(&dir, ManagerOptions::default()).unwrap();
    let parent = reader.read_session(&id).unwrap();
    let texts = |t: &memoir::transcript::Transcript| -> Vec<String> {
        t.messages.iter().map(Message::text_content).collect()
    };
    let three = texts(&parent).iter().position(|t| t == "three").unwrap();
    let at = parent.message_seqs[three];
    assert_ne!(
        at as usize,
        three + 1,
        "seq and message count must differ here"
    );

    let s = server(&dir, &a, true);
    let f = ok(&s, "fork_session", json!({"id": id, "at_seq": at}));
    assert_eq!(f["parent"], json!(id));
    assert_eq!(f["at_seq"], json!(at));
    assert_eq!(f["messages"], json!(three + 1));
    let child = reader.read_session(f["id"].as_str().unwrap()).unwrap();
    assert_eq!(texts(&child), texts(&parent)[..=three]);
    // The library's own reading of "through seq" agrees.
    assert_eq!(
        memoir::manager::fork::messages_through_seq(&parent, at).unwrap(),
        three + 1
    );

    let whole = ok(&s, "fork_session", json!({"id": id}));
    assert_eq!(whole["messages"], json!(parent.messages.len()));
    assert_eq!(whole["at_seq"], json!(parent.last_seq));
    let past = err(
        &s,
        "fork_session",
        json!({"id": id, "at_seq": parent.last_seq + 1}),
    );
    assert!(!past.is_empty());
    // The old message-count argument is gone (unknown fields are refused).
    err(&s, "fork_session", json!({"id": id, "upto": 2}));
}

/// `role` and `tool` narrow a search to tool outputs or one tool's calls
/// and results; an unknown role is refused.
#[test]
fn search_sessions_filters_by_role_and_tool() {
    use memoir::message::{Block, Role};
    let root = tempfile::tempdir().unwrap();
    let (dir, a) = (root.path().join("s"), root.path().join("a"));
    let options = ManagerOptions {
        workspace: Some(a.clone()),
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::open(&dir, options).unwrap();
    let id = m
        .create_session("why does cargo clippy fail", None)
        .unwrap();
    m.add_messages([
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: "c1".into(),
                name: "Bash".into(),
                input: json!({"command": "cargo clippy"}),
            }],
        ),
        Message::tool_result("c1", "error: cargo clippy found 3 warnings", false),
        Message::assistant("cargo clippy wants the iterator read from the end"),
    ])
    .unwrap();
    m.flush().unwrap();
    let s = server(&dir, &a, false);
    let roles = |extra: Value| -> Vec<(String, u64)> {
        let mut q = json!({"query": "cargo clippy"});
        q.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let hits = ok(&s, "search_sessions", q);
        let mut found: Vec<(String, u64)> = hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                assert_eq!(h["session"], id.as_str());
                (
                    h["role"].as_str().unwrap().to_string(),
                    h["seq"].as_u64().unwrap(),
                )
            })
            .collect();
        found.sort();
        found
    };
    assert_eq!(roles(json!({})).len(), 4);
    let outputs = roles(json!({"role": "tool"}));
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert_eq!(outputs[0].0, "tool");
    let bash = roles(json!({"tool": "Bash"}));
    let kinds: Vec<&str> = bash.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(kinds, ["assistant", "tool"], "{bash:?}");
    assert_eq!(
        err(
            &s,
            "search_sessions",
            json!({"query": "x", "role": "robot"})
        ),
        "bad_request"
    );
}
