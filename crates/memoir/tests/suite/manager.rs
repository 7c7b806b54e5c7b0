//! The project session manager: every method, and the seed's data-loss bugs
//! (create/switch/drop never drop unsaved messages, ensure never overwrites,
//! append keeps the checkpoint, a corrupt index is rebuilt, ids are validated
//! everywhere).

use std::path::Path;
use std::time::Duration;

use memoir::manager::{
    ExportFormat, ExportOptions, ManagerError, ManagerOptions, SessionManager, Status,
};
use memoir::message::{Block, Message, Role, Usage};
use memoir::record::Record;
use memoir::store::Durability;
use memoir::transcript::Session;
use serde_json::{json, Value};

fn opts() -> ManagerOptions {
    ManagerOptions {
        durability: Durability::None,
        // Deterministic batching: only the count triggers a flush.
        flush_interval: Duration::from_secs(3600),
        ..Default::default()
    }
}

fn mgr(project: &Path) -> SessionManager {
    SessionManager::for_project(project, opts()).unwrap()
}

fn sessions_dir(project: &Path) -> std::path::PathBuf {
    project.join(".memoir/sessions")
}

/// The messages on disk, read with the plain transcript reader.
fn on_disk(project: &Path, id: &str) -> Vec<Message> {
    Session::read(&sessions_dir(project).join(format!("{id}.jsonl")))
        .unwrap()
        .messages
}

fn texts(ms: &[Message]) -> Vec<String> {
    ms.iter().map(|m| m.text_content()).collect()
}

fn call(ids: &[&str]) -> Message {
    Message::new(
        Role::Assistant,
        ids.iter()
            .map(|id| Block::ToolUse {
                id: id.to_string(),
                name: "shell".into(),
                input: json!({"command": "ls"}),
            })
            .collect(),
    )
}

#[test]
fn create_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("Create a hello.py file", None).unwrap();
    memoir::id::validate(&id).unwrap();
    assert_eq!(m.messages.len(), 1);
    assert_eq!(m.current_session_id.as_deref(), Some(id.as_str()));
    assert_eq!(on_disk(dir.path(), &id).len(), 1, "task written at once");
    assert_eq!(m.project_path(), std::fs::canonicalize(dir.path()).unwrap());
    let listed = m.list_sessions().unwrap();
    assert_eq!(listed[0].title.as_deref(), Some("Create a hello.py file"));
    // A second manager cannot drive the session while the first holds its
    // owner lease; it can once the first is gone.
    let mut m2 = mgr(dir.path());
    match m2.switch_session(&id) {
        Err(ManagerError::Store(memoir::Error::Busy { pid, .. })) => {
            assert_eq!(pid, std::process::id())
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    drop(m);
    assert!(m2.switch_session(&id).unwrap());
    assert_eq!(texts(&m2.messages), vec!["Create a hello.py file"]);
    assert!(!m2.switch_session("missing-session").unwrap());
}

#[test]
fn constructor_reports_an_unusable_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    assert!(SessionManager::for_project(&file, opts()).is_err());
}

#[test]
fn batching_by_count_and_by_interval() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("task", None).unwrap();
    for i in 0..9 {
        m.add_message(Message::assistant(format!("m{i}"))).unwrap();
    }
    assert_eq!(
        on_disk(dir.path(), &id).len(),
        1,
        "batched, not written yet"
    );
    assert_eq!(m.unsaved(), 9);
    m.add_message(Message::assistant("m9")).unwrap();
    assert_eq!(on_disk(dir.path(), &id).len(), 11, "10 unsaved: flushed");
    assert_eq!(m.unsaved(), 0);
    m.flush().unwrap();
    assert_eq!(on_disk(dir.path(), &id).len(), 11, "flush is idempotent");

    let mut quick = SessionManager::for_project(
        dir.path(),
        ManagerOptions {
            flush_interval: Duration::from_millis(30),
            flush_every: 1000,
            ..opts()
        },
    )
    .unwrap();
    let id2 = quick.create_session("", Some("t")).unwrap();
    quick.add_message(Message::user("a")).unwrap();
    assert_eq!(on_disk(dir.path(), &id2).len(), 0);
    std::thread::sleep(Duration::from_millis(40));
    quick.add_message(Message::user("b")).unwrap();
    assert_eq!(
        on_disk(dir.path(), &id2).len(),
        2,
        "interval passed: flushed"
    );
    // A fresh switch flushes on the first add (the session's owner lease
    // goes with the manager that drove it).
    drop(quick);
    let mut s = SessionManager::for_project(
        dir.path(),
        ManagerOptions {
            flush_every: 1000,
            ..opts()
        },
    )
    .unwrap();
    s.switch_session(&id2).unwrap();
    s.add_message(Message::user("c")).unwrap();
    assert_eq!(on_disk(dir.path(), &id2).len(), 3);
}

#[test]
fn appends_are_records_never_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("task", None).unwrap();
    let path = sessions_dir(dir.path()).join(format!("{id}.jsonl"));
    for i in 0..30 {
        m.add_message(Message::assistant(format!("m{i}"))).unwrap();
    }
    m.flush().unwrap();
    let before = std::fs::read(&path).unwrap();
    m.add_message(Message::assistant("one more")).unwrap();
    m.flush().unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(&after[..before.len()], &before[..], "old bytes untouched");
    let added = String::from_utf8_lossy(&after[before.len()..]).to_string();
    assert_eq!(added.lines().count(), 1, "{added}");
}

#[test]
fn create_switch_and_drop_never_lose_unsaved_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let a = m.create_session("first", None).unwrap();
    m.add_message(Message::assistant("unsaved in a")).unwrap();
    let b = m.create_session("second", None).unwrap();
    assert_eq!(
        texts(&on_disk(dir.path(), &a)),
        vec!["first", "unsaved in a"]
    );
    m.add_message(Message::assistant("unsaved in b")).unwrap();
    assert!(m.switch_session(&a).unwrap());
    assert_eq!(
        texts(&on_disk(dir.path(), &b)),
        vec!["second", "unsaved in b"]
    );
    m.add_message(Message::assistant("unsaved again")).unwrap();
    drop(m);
    assert_eq!(
        texts(&on_disk(dir.path(), &a)),
        vec!["first", "unsaved in a", "unsaved again"]
    );
}

#[test]
fn add_without_a_session_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    assert!(matches!(
        m.add_message(Message::user("x")),
        Err(ManagerError::NoCurrentSession)
    ));
    assert!(matches!(
        m.set_context_checkpoint(Some(json!(1))),
        Err(ManagerError::NoCurrentSession)
    ));
    m.flush().unwrap();
}

#[test]
fn tool_calls_persist_and_ended_mid_tool() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("run ls", None).unwrap();
    m.add_message(call(&["c1"])).unwrap();
    assert!(m.ended_mid_tool(), "unanswered assistant call");
    m.add_message(Message::tool_result("c1", "a.txt", false))
        .unwrap();
    assert!(m.ended_mid_tool(), "last message is a tool result");
    m.flush().unwrap();
    let chat = m.history_chat();
    assert_eq!(chat[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(chat[2]["role"], "tool");
    m.add_message(Message::assistant("done")).unwrap();
    assert!(!m.ended_mid_tool());
    // Parallel calls with one answer missing.
    m.add_message(call(&["c2", "c3"])).unwrap();
    m.add_message(Message::tool_result("c3", "x", false))
        .unwrap();
    assert!(m.ended_mid_tool());
    m.flush().unwrap();
    assert_eq!(on_disk(dir.path(), &id).len(), 6);
}

#[test]
fn switch_repairs_dangling_tool_calls_durably() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("go", None).unwrap();
    m.add_messages([call(&["a", "b"]), Message::tool_result("a", "ok", false)])
        .unwrap();
    drop(m);
    // Without repair, the history stays as it was.
    let mut raw = SessionManager::for_project(
        dir.path(),
        ManagerOptions {
            repair_on_switch: false,
            ..opts()
        },
    )
    .unwrap();
    raw.switch_session(&id).unwrap();
    assert!(raw.ended_mid_tool());
    assert_eq!(raw.messages.len(), 3);
    drop(raw);
    let mut m = mgr(dir.path());
    m.switch_session(&id).unwrap();
    assert_eq!(m.messages.len(), 4);
    let last = m.messages.last().unwrap();
    assert_eq!(last.tool_result_ids().collect::<Vec<_>>(), ["b"]);
    assert!(matches!(
        &last.content[0],
        Block::ToolResult { is_error: true, .. }
    ));
    assert!(memoir::manager::fork::open_calls(&m.messages).is_empty());
    assert_eq!(on_disk(dir.path(), &id).len(), 4, "the repair is on disk");

    // A group left open in the middle is closed right after it (a rewrite).
    let mid = m.create_session("mid", None).unwrap();
    m.add_messages([call(&["x"]), Message::assistant("moved on")])
        .unwrap();
    assert_eq!(m.repair_dangling_tool_calls().unwrap(), 1);
    assert_eq!(m.messages.len(), 4);
    assert_eq!(m.messages[2].tool_result_ids().collect::<Vec<_>>(), ["x"]);
    assert_eq!(on_disk(dir.path(), &mid), m.messages);
    assert_eq!(m.repair_dangling_tool_calls().unwrap(), 0);
}

#[test]
fn checkpoints_persist_and_survive_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("task", None).unwrap();
    m.add_message(Message::assistant("a")).unwrap();
    let cp = json!({"cutoff_index": 1, "stub": "…", "keep_tokens": 100});
    m.set_context_checkpoint(Some(cp.clone())).unwrap();
    assert_eq!(m.context_checkpoint(), Some(cp.clone()));
    assert_eq!(
        on_disk(dir.path(), &id).len(),
        2,
        "messages flushed first, never trimmed"
    );
    // Appending from elsewhere, once the driver lets go of the session,
    // keeps it (the seed erased it).
    drop(m);
    let mut other = mgr(dir.path());
    other
        .append_session_messages(&id, vec![Message::user("from a scheduler")])
        .unwrap();
    let mut m2 = mgr(dir.path());
    m2.switch_session(&id).unwrap();
    assert_eq!(m2.context_checkpoint(), Some(cp));
    assert_eq!(m2.messages.len(), 3);
    m2.set_context_checkpoint(None).unwrap();
    drop(m2);
    let mut m3 = mgr(dir.path());
    m3.switch_session(&id).unwrap();
    assert_eq!(m3.context_checkpoint(), None);
}

#[test]
fn export_jsonl_has_header_messages_footer_and_unsaved_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("hello", None).unwrap();
    m.add_message(Message::assistant("unsaved reply")).unwrap();
    let text = m.export_jsonl(&id).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[0]["format"], "memoir.session-export");
    assert_eq!(lines[0]["formatVersion"], 1);
    assert_eq!(lines[0]["session_id"], id.as_str());
    assert!(lines[0]["created_at"].is_string());
    assert_eq!(lines[1]["type"], "message");
    assert_eq!(lines[1]["index"], 0);
    assert_eq!(lines[1]["role"], "user");
    assert_eq!(lines[2]["index"], 1);
    assert_eq!(lines[2]["content"][0]["text"], "unsaved reply");
    assert_eq!(lines[3], json!({"type": "footer", "messages": 2}));
    assert_eq!(on_disk(dir.path(), &id).len(), 2, "export flushed first");
}

#[test]
fn export_openai_markdown_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("deploy it", None).unwrap();
    m.add_messages([
        Message::system("be careful"),
        call(&["t1"]),
        Message::tool_result("t1", "key AKIAIOSFODNN7EXAMPLE found ```", false),
        Message::assistant("done"),
    ])
    .unwrap();
    let oa = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::OpenAi,
                redact: false,
            },
        )
        .unwrap();
    let v: Value = serde_json::from_str(&oa.text).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 5);
    assert_eq!(v[1]["role"], "system");
    assert!(oa.text.contains("AKIAIOSFODNN7EXAMPLE"));
    let md = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::Markdown,
                redact: true,
            },
        )
        .unwrap();
    assert!(md.text.starts_with("# deploy it\n"), "{}", md.text);
    assert!(md.text.contains("**tool call** `shell` (`t1`)"));
    assert!(md
        .text
        .contains("````\nkey [REDACTED:aws-access-token] found ```\n````"));
    assert_eq!(md.redactions.total(), 1);
    let jsonl = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::Jsonl,
                redact: true,
            },
        )
        .unwrap();
    assert!(!jsonl.text.contains("AKIAIOSFODNN7EXAMPLE"));
    assert!(jsonl.text.contains("[REDACTED:aws-access-token]"));
}

#[test]
fn fork_moves_boundary_before_split_tool_group_and_references_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let src = m.create_session("Create a hello.py file", None).unwrap();
    m.add_messages([
        call(&["c1"]),
        Message::tool_result("c1", "ok", false),
        Message::assistant("done"),
    ])
    .unwrap();
    let f2 = m.fork_session(&src, Some(2)).unwrap();
    assert_eq!((f2.requested, f2.effective), (2, 1));
    assert!(!f2.materialized);
    let f3 = m.fork_session(&src, Some(3)).unwrap();
    assert_eq!(f3.effective, 3);
    assert_eq!(
        texts(&m.read_session_messages(&f2.id).unwrap()),
        vec!["Create a hello.py file"]
    );
    assert_eq!(m.read_session_messages(&f3.id).unwrap().len(), 3);
    // The source is untouched and still current; the fork is not current.
    assert_eq!(m.current_session_id.as_deref(), Some(src.as_str()));
    assert_eq!(m.messages.len(), 4);
    // By reference: the child is a header line only, naming parent and cut.
    let child_file = sessions_dir(dir.path()).join(format!("{}.jsonl", f3.id));
    let text = std::fs::read_to_string(&child_file).unwrap();
    assert_eq!(text.lines().count(), 1);
    let t = m.read_session(&f3.id).unwrap();
    let parent = t.meta.parent.clone().unwrap();
    assert_eq!(parent.session, src);
    assert_eq!(parent.messages, 3);
    assert_eq!(t.title.as_deref(), Some("Fork: Create a hello.py file"));
    assert_eq!(t.checkpoint, None);
    // Whole-session fork and out-of-range cut.
    assert_eq!(m.fork_session(&src, None).unwrap().effective, 4);
    assert_eq!(m.fork_session(&src, Some(99)).unwrap().effective, 4);
    // The parent moves on; the fork does not.
    m.add_message(Message::user("later")).unwrap();
    m.flush().unwrap();
    assert_eq!(m.read_session_messages(&f3.id).unwrap().len(), 3);
}

#[test]
fn fork_flushes_unsaved_messages_and_never_duplicates_usage() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let src = m.create_session("q", None).unwrap();
    m.add_message(Message::assistant("unsaved").with_usage(Usage {
        input_tokens: 10,
        output_tokens: 5,
        ..Default::default()
    }))
    .unwrap();
    let session = Session::open(&sessions_dir(dir.path()).join(format!("{src}.jsonl"))).unwrap();
    let f = m.fork_session(&src, None).unwrap();
    assert_eq!(f.effective, 2, "the unsaved message is part of the fork");
    session
        .record_summary(
            Usage {
                input_tokens: 7,
                ..Default::default()
            },
            1,
        )
        .unwrap();
    let listed = m.list_sessions().unwrap();
    let child = listed.iter().find(|e| e.id == f.id).unwrap();
    let parent = listed.iter().find(|e| e.id == src).unwrap();
    assert_eq!(child.usage, Usage::default());
    assert_eq!(
        child.message_usage,
        Usage::default(),
        "inherited usage not counted"
    );
    assert_eq!(child.inherited, 2);
    assert_eq!(parent.usage.input_tokens, 7);
    assert_eq!(parent.message_usage.input_tokens, 10);
}

#[test]
fn fork_checks_every_group_and_parallel_calls() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let src = m.create_session("u", None).unwrap();
    m.add_messages([
        call(&["a", "b"]),
        Message::tool_result("b", "rb", false),
        Message::tool_result("a", "ra", false),
        Message::assistant("x"),
        call(&["c"]), // never answered
        Message::user("next"),
        Message::assistant("y"),
    ])
    .unwrap();
    m.flush().unwrap();
    let mut probe = SessionManager::for_project(
        dir.path(),
        ManagerOptions {
            repair_on_switch: false,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(probe.fork_session(&src, Some(3)).unwrap().effective, 1);
    assert_eq!(probe.fork_session(&src, Some(4)).unwrap().effective, 4);
    // The open call at index 5 blocks every later cut, not only the last group.
    assert_eq!(probe.fork_session(&src, None).unwrap().effective, 5);
    assert!(matches!(
        probe.fork_session(&src, Some(0)),
        Err(ManagerError::EmptyFork { .. })
    ));
    assert!(probe
        .fork_session("no-such-session", None)
        .unwrap_err()
        .is_not_found());
}

#[test]
fn fork_of_a_fork_stitches_and_cuts_inside_the_inherited_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let root = m.create_session("r0", None).unwrap();
    m.add_messages([
        Message::assistant("r1"),
        Message::user("r2"),
        Message::assistant("r3"),
    ])
    .unwrap();
    m.flush().unwrap();
    let child = m.fork_session(&root, Some(3)).unwrap().id;
    m.append_session_messages(&child, vec![Message::assistant("c3"), Message::user("c4")])
        .unwrap();
    let grand = m.fork_session(&child, Some(4)).unwrap();
    assert_eq!(grand.parent.session, child);
    m.append_session_messages(&grand.id, vec![Message::assistant("g4")])
        .unwrap();
    assert_eq!(
        texts(&m.read_session_messages(&grand.id).unwrap()),
        vec!["r0", "r1", "r2", "c3", "g4"]
    );
    // A cut inside what the child inherited references the root directly.
    let inner = m.fork_session(&child, Some(2)).unwrap();
    assert_eq!(inner.parent.session, root);
    let listed = m.list_sessions().unwrap();
    let entry = listed.iter().find(|e| e.id == inner.id).unwrap();
    assert_eq!(
        entry.forked_from.as_deref(),
        Some(child.as_str()),
        "lineage kept"
    );
    // A fork of a fork that has no messages of its own references that fork.
    let bare = m.fork_session(&root, Some(2)).unwrap().id;
    let of_bare = m.fork_session(&bare, None).unwrap();
    assert_eq!(of_bare.parent.session, bare);
    assert_eq!(of_bare.parent.seq, 0);
    assert_eq!(
        texts(&m.read_session_messages(&of_bare.id).unwrap()),
        vec!["r0", "r1"]
    );
    assert_eq!(
        texts(&m.read_session_messages(&inner.id).unwrap()),
        vec!["r0", "r1"]
    );
    // A fork of a fork of a fork, cut in the grandparent's part.
    let deep = m.fork_session(&grand.id, Some(1)).unwrap();
    assert_eq!(deep.parent.session, root);
    assert_eq!(
        texts(&m.read_session_messages(&deep.id).unwrap()),
        vec!["r0"]
    );
}

#[test]
fn fork_of_a_rewritten_session_is_materialized_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let src = m.create_session("a", None).unwrap();
    m.add_messages([Message::assistant("b"), Message::user("c")])
        .unwrap();
    m.flush().unwrap();
    // Compaction rewrote the head but kept the later messages (and their
    // seqs): a cut between them has no pure reference.
    let session = Session::open(&sessions_dir(dir.path()).join(format!("{src}.jsonl"))).unwrap();
    session
        .append(&Record::Rewrite {
            messages: vec![
                Message::user("summary"),
                Message::assistant("b"),
                Message::user("c"),
            ],
        })
        .unwrap();
    session.append_messages(&[Message::assistant("d")]).unwrap();
    let f = m.fork_session(&src, Some(2)).unwrap();
    assert!(f.materialized);
    assert_eq!(
        texts(&m.read_session_messages(&f.id).unwrap()),
        vec!["summary", "b"]
    );
    let whole = m.fork_session(&src, None).unwrap();
    assert!(!whole.materialized);
    assert_eq!(
        texts(&m.read_session_messages(&whole.id).unwrap()),
        vec!["summary", "b", "c", "d"]
    );
    // A fork of the materialized fork still reads right.
    let again = m.fork_session(&f.id, Some(1)).unwrap();
    assert_eq!(
        texts(&m.read_session_messages(&again.id).unwrap()),
        vec!["summary"]
    );
}

#[test]
fn list_reads_a_fresh_index_and_heals_a_stale_missing_or_corrupt_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let a = m.create_session("alpha", None).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let b = m.create_session("beta", None).unwrap();
    m.add_message(Message::assistant("b1")).unwrap();
    m.flush().unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!(r.rebuilt, 0, "every entry was kept up to date on write");
    assert_eq!(
        r.entries.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        vec![b.as_str(), a.as_str()],
        "newest activity first"
    );
    assert_eq!(r.entries[0].messages, 2);
    assert_eq!(r.entries[0].status, Status::Active);
    assert!(r.entries[0].estimated_tokens > 0);

    let index = sessions_dir(dir.path()).join("index");
    // Entry files are read by a listing without a usable snapshot (issue
    // 17.1: a fresh snapshot lists without them), so drop it for these.
    let snapshot = index.join("listing");
    // Corrupt entry: rebuilt, not treated as an empty index.
    std::fs::write(index.join(format!("{a}.json")), b"{not json").unwrap();
    std::fs::remove_file(&snapshot).unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!((r.rebuilt, r.entries.len()), (1, 2));
    // Torn in-place write: a shorter new entry over a longer old one.
    let entry_path = index.join(format!("{b}.json"));
    let mut torn = std::fs::read(&entry_path).unwrap();
    torn.extend_from_slice(b"0}}");
    std::fs::write(&entry_path, torn).unwrap();
    std::fs::remove_file(&snapshot).unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!((r.rebuilt, r.entries.len()), (1, 2));
    // Stale: a transcript longer than its entry.
    let session = Session::open(&sessions_dir(dir.path()).join(format!("{a}.jsonl"))).unwrap();
    session
        .append_messages(&[Message::assistant("behind the index's back")])
        .unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!(r.rebuilt, 1);
    assert_eq!(r.entries.iter().find(|e| e.id == a).unwrap().messages, 2);
    assert_eq!(m.list_sessions_report().unwrap().rebuilt, 0, "healed");
    // Missing index: rebuilt whole.
    std::fs::remove_dir_all(&index).unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!((r.rebuilt, r.entries.len()), (2, 2));
    // An entry without a transcript is dropped; a transcript without an entry is added.
    std::fs::write(
        index.join("ghost.json"),
        std::fs::read(index.join(format!("{a}.json"))).unwrap(),
    )
    .unwrap();
    Session::create(
        &sessions_dir(dir.path()),
        memoir::SessionMeta::new("external"),
    )
    .unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!(r.removed, 1);
    assert_eq!(r.rebuilt, 1);
    assert_eq!(r.entries.len(), 3);
    assert!(!index.join("ghost.json").exists());
}

#[test]
fn delete_moves_to_trash_restore_brings_back_purge_erases() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let keep = m.create_session("keep", None).unwrap();
    let gone = m.create_session("gone", None).unwrap();
    m.add_message(Message::assistant("unsaved before delete"))
        .unwrap();
    assert!(m.delete_session(&gone).unwrap());
    assert_eq!(
        m.current_session_id, None,
        "deleting the current session clears it"
    );
    assert!(m.messages.is_empty());
    assert!(!m.delete_session(&gone).unwrap(), "already gone");
    let ids: Vec<_> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, vec![keep.clone()]);
    let trash = m.list_trash().unwrap();
    assert_eq!(trash.len(), 1);
    assert_eq!(trash[0].entry.id, gone);
    assert_eq!(
        trash[0].entry.messages, 2,
        "unsaved message flushed before delete"
    );
    assert_eq!(trash[0].entry.status, Status::Deleted);
    // A trashed id cannot be taken by a new session.
    assert!(matches!(
        m.ensure_session(&gone, ""),
        Err(ManagerError::InTrash(_))
    ));
    let e = m.restore_session(&gone).unwrap();
    assert_eq!(e.messages, 2);
    assert_eq!(m.list_sessions().unwrap().len(), 2);
    assert!(matches!(
        m.restore_session(&gone),
        Err(ManagerError::NotInTrash(_))
    ));
    m.delete_session(&gone).unwrap();
    let report = m.purge_trash(None).unwrap();
    assert_eq!(report.purged, vec![gone.clone()]);
    assert!(m.list_trash().unwrap().is_empty());
    assert!(matches!(
        m.restore_session(&gone),
        Err(ManagerError::NotInTrash(_))
    ));
}

#[test]
fn forks_of_a_trashed_parent_stay_readable_and_pin_it_until_purged() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let parent = m.create_session("p0", None).unwrap();
    m.add_messages([Message::assistant("p1")]).unwrap();
    let child = m.fork_session(&parent, None).unwrap().id;
    m.append_session_messages(&child, vec![Message::user("c2")])
        .unwrap();
    assert!(m.delete_session(&parent).unwrap());
    assert_eq!(
        texts(&m.read_session_messages(&child).unwrap()),
        vec!["p0", "p1", "c2"]
    );
    // The plain transcript reader finds it too, or at least reports the gap.
    let entry = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .find(|e| e.id == child)
        .unwrap();
    assert_eq!(entry.messages, 3);
    let report = m.purge_trash(None).unwrap();
    assert!(report.purged.is_empty());
    assert_eq!(report.kept, vec![(parent.clone(), vec![child.clone()])]);
    assert_eq!(m.read_session_messages(&child).unwrap().len(), 3);
    // Once the fork is gone too, both are purged.
    m.delete_session(&child).unwrap();
    let report = m.purge_trash(None).unwrap();
    let mut purged = report.purged.clone();
    purged.sort();
    let mut want = vec![parent, child];
    want.sort();
    assert_eq!(purged, want);
}

#[test]
fn ensure_creates_then_touches_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    assert!(m.ensure_session("chat-42", "Support chat").unwrap());
    let first = m.list_sessions().unwrap()[0].clone();
    assert_eq!(first.title.as_deref(), Some("Support chat"));
    m.append_session_messages(
        "chat-42",
        vec![Message::user("hi"), Message::assistant("hello")],
    )
    .unwrap();
    // The seed overwrote a file whose index entry was missing.
    std::fs::remove_dir_all(sessions_dir(dir.path()).join("index")).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    assert!(!m.ensure_session("chat-42", "").unwrap());
    let e = m.list_sessions().unwrap()[0].clone();
    assert_eq!(e.messages, 2, "nothing overwritten");
    assert_eq!(
        e.title.as_deref(),
        Some("Support chat"),
        "empty title keeps the title"
    );
    assert!(e.last_activity > first.last_activity);
    m.ensure_session("chat-42", "Renamed").unwrap();
    assert_eq!(
        m.list_sessions().unwrap()[0].title.as_deref(),
        Some("Renamed")
    );
}

#[test]
fn rename_and_touch() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let a = m.create_session("old title", None).unwrap();
    let b = m.create_session("other", None).unwrap();
    assert!(m.rename_session(&a, "new title").unwrap());
    assert!(!m.rename_session("missing", "x").unwrap());
    assert!(!m.touch_session("missing").unwrap());
    let list = m.list_sessions_report().unwrap();
    assert_eq!(list.rebuilt, 0);
    let entry = list.entries.iter().find(|e| e.id == a).unwrap();
    assert_eq!(entry.title.as_deref(), Some("new title"));
    std::thread::sleep(Duration::from_millis(10));
    assert!(m.touch_session(&b).unwrap());
    std::thread::sleep(Duration::from_millis(10));
    assert!(m.touch_session(&a).unwrap());
    let list = m.list_sessions_report().unwrap();
    assert_eq!(list.rebuilt, 0, "touch keeps the entry fresh");
    assert_eq!(list.entries[0].id, a, "touched last: newest");
    // The rename is durable: a rebuilt index still has it.
    std::fs::remove_dir_all(sessions_dir(dir.path()).join("index")).unwrap();
    let list = m.list_sessions().unwrap();
    assert_eq!(list[0].title.as_deref(), Some("new title"));
    assert_eq!(list[0].id, a, "last activity survives a rebuild");
}

#[test]
fn append_session_messages_creates_updates_and_keeps_the_current_session_in_sync() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    m.append_session_messages(
        "job-1",
        vec![Message::user("hello"), Message::assistant("hi")],
    )
    .unwrap();
    let e = m.list_sessions().unwrap()[0].clone();
    assert_eq!((e.id.as_str(), e.messages), ("job-1", 2));
    assert_eq!(
        e.title.as_deref(),
        Some("hello"),
        "title from the first user message"
    );
    // Untitled session: the first user message appended names it.
    m.ensure_session("job-2", "").unwrap();
    m.append_session_messages("job-2", vec![Message::user("name me")])
        .unwrap();
    let e = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .find(|e| e.id == "job-2")
        .unwrap();
    assert_eq!(e.title.as_deref(), Some("name me"));
    // Appending to the current session keeps memory and disk in sync (the
    // seed's next flush overwrote such appends).
    let cur = m.create_session("current", None).unwrap();
    m.add_message(Message::assistant("pending")).unwrap();
    m.append_session_messages(&cur, vec![Message::user("scheduled")])
        .unwrap();
    m.add_message(Message::assistant("after")).unwrap();
    m.flush().unwrap();
    let want = vec!["current", "pending", "scheduled", "after"];
    assert_eq!(texts(&m.messages), want);
    assert_eq!(texts(&on_disk(dir.path(), &cur)), want);
    assert_eq!(texts(&m.read_session_messages(&cur).unwrap()), want);
}

#[test]
fn shortening_messages_is_recorded_as_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("a", None).unwrap();
    m.add_messages([Message::assistant("b"), Message::user("c")])
        .unwrap();
    m.flush().unwrap();
    m.messages.truncate(1);
    m.flush().unwrap();
    assert_eq!(texts(&on_disk(dir.path(), &id)), vec!["a"]);
    assert_eq!(m.list_sessions().unwrap()[0].messages, 1);
}

#[test]
fn ids_are_validated_on_every_entry_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    m.create_session("x", None).unwrap();
    for bad in ["", "../escape", "a/b", "a\\b", "nul\0", ".hidden", "a b"] {
        let invalid = |r: Result<(), ManagerError>| {
            assert!(
                matches!(r, Err(ManagerError::Store(memoir::Error::InvalidId { .. }))),
                "{bad:?}: {r:?}"
            )
        };
        invalid(m.switch_session(bad).map(|_| ()));
        invalid(m.export_jsonl(bad).map(|_| ()));
        invalid(m.fork_session(bad, None).map(|_| ()));
        invalid(m.delete_session(bad).map(|_| ()));
        invalid(m.restore_session(bad).map(|_| ()));
        invalid(m.read_session_messages(bad).map(|_| ()));
        invalid(m.read_session(bad).map(|_| ()));
        invalid(m.ensure_session(bad, "t").map(|_| ()));
        invalid(m.rename_session(bad, "t").map(|_| ()));
        invalid(m.touch_session(bad).map(|_| ()));
        invalid(m.append_session_messages(bad, vec![Message::user("x")]));
        invalid(m.purge_trash(Some(&[bad.to_string()])).map(|_| ()));
    }
    assert!(!dir.path().join("escape.jsonl").exists());
}

#[test]
fn history_includes_system_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    let id = m.create_session("", Some("sys")).unwrap();
    m.add_messages([
        Message::system("project analysis: rust workspace"),
        Message::user("go"),
    ])
    .unwrap();
    drop(m);
    let mut m = mgr(dir.path());
    m.switch_session(&id).unwrap();
    let chat = m.history_chat();
    assert_eq!(
        chat[0],
        json!({"role": "system", "content": "project analysis: rust workspace"})
    );
    assert_eq!(chat[1]["role"], "user");
}

#[test]
fn global_store_is_filtered_to_the_project() {
    let home = tempfile::tempdir().unwrap();
    let p1 = tempfile::tempdir().unwrap();
    let p2 = tempfile::tempdir().unwrap();
    let store = home.path().join("sessions");
    let open = |project: &Path| {
        SessionManager::open(
            &store,
            ManagerOptions {
                workspace: Some(std::fs::canonicalize(project).unwrap()),
                only_workspace: true,
                ..opts()
            },
        )
        .unwrap()
    };
    let mut a = open(p1.path());
    let mut b = open(p2.path());
    let ida = a.create_session("in p1", None).unwrap();
    b.create_session("in p2", None).unwrap();
    let listed: Vec<_> = a
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed, vec![ida]);
    assert_eq!(b.list_sessions().unwrap().len(), 1);
    let all = SessionManager::open(&store, opts()).unwrap();
    assert_eq!(all.list_sessions().unwrap().len(), 2);
}

#[test]
fn a_read_only_index_still_lists() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    m.create_session("a", None).unwrap();
    let index = sessions_dir(dir.path()).join("index");
    std::fs::remove_dir_all(&index).unwrap();
    // A file where the index directory should be: entries cannot be written.
    std::fs::write(&index, b"").unwrap();
    let r = m.list_sessions_report().unwrap();
    assert_eq!((r.entries.len(), r.unreadable), (1, 0));
}

/// `SessionManager::new` writes nothing: the project's session directory
/// appears with the first write, as its documentation says.
#[test]
fn new_creates_the_store_on_the_first_write() {
    let project = tempfile::tempdir().unwrap();
    let store = project.path().join(".memoir");
    let mut m = SessionManager::new(project.path()).unwrap();
    assert!(!store.exists(), "created before any write");
    assert!(m.list_sessions().unwrap().is_empty());
    assert!(!store.exists(), "created by a listing");
    m.create_session("first", None).unwrap();
    m.flush().unwrap();
    assert!(store.join("sessions").is_dir());
}
