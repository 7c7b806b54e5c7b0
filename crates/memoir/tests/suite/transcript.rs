//! Integration tests of `memoir::transcript::Session` on real files.
//!
//! Each test builds its own store in a temp dir. Multi-process tests (8
//! writers, SIGKILL) live in `crates/memoir-cli/tests/cli/processes.rs`, where the
//! real binary is available to spawn.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use memoir::message::{Block, Message, Role, Usage};
use memoir::record::{Record, RunConfig, SessionMeta, Taint};
use memoir::store::file::FileStore;
use memoir::store::{Durability, IssueKind, LogStore};
use memoir::transcript::{Conversation, Session};
use memoir::Error;
use serde_json::json;

fn meta(id: &str) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.provider = "anthropic".into();
    m.model = "claude-x".into();
    m.workspace = "/tmp/project".into();
    m
}

fn new_session(dir: &Path, id: &str) -> Session {
    Session::create(dir, meta(id)).unwrap()
}

fn tool_turn(i: usize) -> Vec<Message> {
    vec![
        Message::new(
            Role::Assistant,
            vec![
                Block::Thinking {
                    text: format!("I should list files ({i})"),
                    signature: Some("sig".into()),
                },
                Block::ToolUse {
                    id: format!("toolu_{i}"),
                    name: "fs_list".into(),
                    input: json!({"path": "."}),
                },
            ],
        )
        .with_usage(Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Default::default()
        }),
        Message::tool_result(format!("toolu_{i}"), "a.rs\nb.rs", false),
    ]
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.text_content()).collect()
}

#[test]
fn create_append_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "s1");
    let mut msgs = vec![Message::user("list the files")];
    msgs.extend(tool_turn(1));
    msgs.push(Message::assistant("two files"));
    let a = s.append_messages(&msgs).unwrap();
    assert_eq!((a.first_seq, a.last_seq), (1, 4));
    let loaded = Session::load(&s.path).unwrap();
    assert_eq!(loaded.conversation.messages, msgs);
    assert!(loaded.report.is_clean(), "{:?}", loaded.report);
    assert_eq!(loaded.meta.id, "s1");
    let t = Session::read(&s.path).unwrap();
    assert_eq!(t.message_seqs, vec![1, 2, 3, 4]);
    assert_eq!(t.last_seq, 4);
}

#[test]
fn create_refuses_existing_id_and_keeps_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "dup");
    s.append_messages(&[Message::user("first")]).unwrap();
    let err = Session::create(dir.path(), meta("dup")).unwrap_err();
    assert!(
        matches!(err, Error::SessionExists(ref id) if id == "dup"),
        "{err}"
    );
    let t = Session::read(&s.path).unwrap();
    assert_eq!(texts(&t.messages), vec!["first"]);
    // No temp files left behind.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn modes_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("a/b/sessions");
    let s = new_session(&store_dir, "m");
    let dmode = fs::metadata(&store_dir).unwrap().permissions().mode() & 0o777;
    let fmode = fs::metadata(&s.path).unwrap().permissions().mode() & 0o777;
    assert_eq!(dmode, 0o700);
    assert_eq!(fmode, 0o600);
}

#[test]
fn hostile_ids_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions");
    for id in ["../escape", "a/b", "", "..", "x\0y", "nl\nx", ".hidden"] {
        let err = Session::create(&store, meta(id)).unwrap_err();
        assert!(matches!(err, Error::InvalidId { .. }), "{id:?}: {err}");
        assert!(
            matches!(
                Session::find(&store, id),
                Err(Error::InvalidId { .. }) | Err(Error::NotFound(_))
            ),
            "{id:?}"
        );
    }
    assert!(!dir.path().join("escape.jsonl").exists());
    assert!(!store.exists() || fs::read_dir(&store).unwrap().next().is_none());
    let fs_store = FileStore::new(&store, Durability::None);
    assert!(matches!(
        fs_store.append("../x", &[], None),
        Err(Error::InvalidId { .. })
    ));
    assert!(matches!(
        fs_store.read("a/../../b"),
        Err(Error::InvalidId { .. })
    ));
}

#[test]
fn record_run_append_only_writes_no_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "r");
    let before = vec![Message::user("go")];
    s.append_messages(&before).unwrap();
    let mut after = before.clone();
    after.extend(tool_turn(1));
    s.record_run(&before, &Conversation::from(after.clone()))
        .unwrap();
    let text = fs::read_to_string(&s.path).unwrap();
    assert!(!text.contains("\"record\":\"rewrite\""));
    assert_eq!(Session::load(&s.path).unwrap().conversation.messages, after);
    // Nothing changed: nothing written.
    assert!(s
        .record_run(&after, &Conversation::from(after.clone()))
        .unwrap()
        .is_none());
}

#[test]
fn record_run_compaction_writes_rewrite_and_keeps_dropped_turns() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "c");
    let before: Vec<Message> = (0..4).map(|i| Message::user(format!("turn {i}"))).collect();
    s.append_messages(&before).unwrap();
    // Mid-run: two turns appended (one mentions 74656), then compacted away.
    let mut snapshot = before.clone();
    snapshot.push(Message::assistant("the answer is 74656"));
    snapshot.push(Message::user("thanks"));
    let compacted = vec![
        Message::user("[summary: compacted]"),
        Message::assistant("done"),
    ];
    let conv = Conversation {
        messages: compacted.clone(),
        taint: Taint::default(),
        rewritten: vec![snapshot],
    };
    s.record_run(&before, &conv).unwrap();
    let text = fs::read_to_string(&s.path).unwrap();
    assert!(
        text.contains("74656"),
        "dropped turn never reached the file"
    );
    assert!(text.contains("\"record\":\"rewrite\""));
    let t = Session::read(&s.path).unwrap();
    assert_eq!(t.messages, compacted);
    assert!(t.report.is_clean());
}

#[test]
fn taint_merges_and_rewrite_drops_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "t");
    let ten: Vec<Message> = (0..10).map(|i| Message::user(format!("m{i}"))).collect();
    s.append_messages(&ten).unwrap();
    s.append(&Record::Taint(Taint::default())).unwrap();
    let tl = Session::taint_timeline(&s.path).unwrap();
    assert_eq!(tl.covering(9), Some(Taint::default()));
    assert_eq!(tl.covering(10), None, "uncovered must be unknown");
    s.append(&Record::Rewrite {
        messages: ten[..2].to_vec(),
    })
    .unwrap();
    // Torn after the rewrite: no checkpoint covers anything.
    let tl = Session::taint_timeline(&s.path).unwrap();
    assert_eq!(tl.covering(0), None);
    assert_eq!(tl.covering(1), None);
    s.append(&Record::Taint(Taint {
        private: false,
        untrusted: true,
    }))
    .unwrap();
    s.append(&Record::Taint(Taint {
        private: true,
        untrusted: false,
    }))
    .unwrap();
    s.append(&Record::Taint(Taint::default())).unwrap();
    let loaded = Session::load(&s.path).unwrap();
    assert!(loaded.conversation.taint.trifecta_armed());
    let tl = Session::taint_timeline(&s.path).unwrap();
    let first = tl.covering(0).unwrap();
    assert!(first.untrusted, "never under-taint");
}

#[test]
fn configs_summaries_title_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "cfg");
    assert!(Session::run_configs(&s.path).unwrap().is_empty());
    assert_eq!(
        Session::usage_totals(&s.path).unwrap(),
        (Usage::default(), 0)
    );
    let c1 = RunConfig {
        model: "a".into(),
        system_prompt: Some("You are".into()),
        tools: vec!["fs_read".into()],
        ..Default::default()
    };
    let c2 = RunConfig {
        model: "b".into(),
        compact_at_tokens: Some(1200),
        ..Default::default()
    };
    s.append(&Record::Config(Box::new(c1.clone()))).unwrap();
    s.append_messages(&[Message::user("a"), Message::assistant("b")])
        .unwrap();
    s.record_summary(
        Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    s.append(&Record::Config(Box::new(c2.clone()))).unwrap();
    s.append_messages(&[Message::user("c")]).unwrap();
    s.record_summary(
        Usage {
            input_tokens: 50,
            output_tokens: 5,
            ..Default::default()
        },
        2,
    )
    .unwrap();
    s.append(&Record::Title {
        title: "renamed".into(),
    })
    .unwrap();
    s.append(&Record::Checkpoint {
        value: json!({"cutoff": 2}),
    })
    .unwrap();
    assert_eq!(
        Session::run_configs(&s.path).unwrap(),
        vec![c1.clone(), c2.clone()]
    );
    let (u, turns) = Session::usage_totals(&s.path).unwrap();
    assert_eq!((u.input_tokens, u.output_tokens, turns), (150, 15, 3));
    let t = Session::read(&s.path).unwrap();
    assert_eq!(t.config_covering(0), Some(&c1));
    assert_eq!(t.config_covering(2), Some(&c2));
    assert_eq!(t.title.as_deref(), Some("renamed"));
    assert_eq!(t.checkpoint, Some(json!({"cutoff": 2})));
    s.append(&Record::Checkpoint {
        value: serde_json::Value::Null,
    })
    .unwrap();
    assert_eq!(Session::read(&s.path).unwrap().checkpoint, None);
    // A summary missing fields still counts (the seed dropped it).
    assert_eq!(Session::peek_meta(&s.path).unwrap().id, "cfg");
}

#[test]
fn torn_tail_is_reported_then_cut_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "torn");
    s.append_messages(&[Message::user("one"), Message::user("two")])
        .unwrap();
    let partial = b"{\"seq\":3,\"record\":\"message\",\"role\":\"assis";
    fs::OpenOptions::new()
        .append(true)
        .open(&s.path)
        .unwrap()
        .write_all(partial)
        .unwrap();
    let t = Session::read(&s.path).unwrap();
    assert_eq!(texts(&t.messages), vec!["one", "two"]);
    assert_eq!(t.report.issues.len(), 1);
    assert!(
        matches!(t.report.issues[0].kind, IssueKind::TornTail { bytes } if bytes == partial.len() as u64)
    );
    assert_eq!(t.report.first_bad_seq(), Some(3));
    let a = s.append_messages(&[Message::user("three")]).unwrap();
    assert_eq!(a.first_seq, 3);
    let torn = a.repaired.expect("repair reported");
    assert_eq!(
        fs::read(&torn.saved_to).unwrap(),
        partial,
        "cut bytes kept verbatim"
    );
    let t = Session::read(&s.path).unwrap();
    assert_eq!(texts(&t.messages), vec!["one", "two", "three"]);
    assert!(t.report.is_clean(), "{:?}", t.report);
}

#[test]
fn complete_last_record_missing_only_its_newline_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "nl");
    s.append_messages(&[Message::user("one")]).unwrap();
    let bytes = fs::read(&s.path).unwrap();
    fs::write(&s.path, &bytes[..bytes.len() - 1]).unwrap();
    assert_eq!(
        texts(&Session::read(&s.path).unwrap().messages),
        vec!["one"]
    );
    let a = s.append_messages(&[Message::user("two")]).unwrap();
    assert!(a.repaired.is_none());
    let t = Session::read(&s.path).unwrap();
    assert_eq!(texts(&t.messages), vec!["one", "two"]);
    assert!(t.report.is_clean());
}

fn rewrite_lines(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    f(&mut lines);
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn garbage_blank_and_edited_lines_in_the_middle_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "g");
    let msgs: Vec<Message> = (0..6).map(|i| Message::user(format!("m{i}"))).collect();
    s.append_messages(&msgs).unwrap();
    rewrite_lines(&s.path, |lines| {
        lines[3] = lines[3].replace("m2", "M2"); // edited: checksum fails
        lines.insert(5, "not json at all {{{".into()); // garbage
        lines.insert(2, String::new()); // blank
    });
    let t = Session::read(&s.path).unwrap();
    assert_eq!(
        texts(&t.messages),
        vec!["m0", "m1", "m3", "m4", "m5"],
        "history continues past bad lines"
    );
    let kinds: Vec<_> = t.report.issues.iter().map(|i| &i.kind).collect();
    assert!(matches!(kinds[0], IssueKind::SkippedBlank), "{kinds:?}");
    assert!(
        matches!(kinds[1], IssueKind::SkippedCorrupt(_)),
        "{kinds:?}"
    );
    assert_eq!(t.report.first_bad_seq(), Some(2));
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, IssueKind::Gap { missing_from: 3 })),
        "{kinds:?}"
    );
    // Appending still works and continues the chain from the last good record.
    let a = s.append_messages(&[Message::user("m6")]).unwrap();
    assert_eq!(a.first_seq, 7);
    assert_eq!(
        Session::read(&s.path)
            .unwrap()
            .messages
            .last()
            .unwrap()
            .text_content(),
        "m6"
    );
}

#[test]
fn reordered_and_deleted_records_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "o");
    let msgs: Vec<Message> = (0..4).map(|i| Message::user(format!("m{i}"))).collect();
    s.append_messages(&msgs).unwrap();
    rewrite_lines(&s.path, |lines| lines.swap(2, 3));
    let report = Session::verify(&s.path).unwrap();
    assert_eq!(report.first_bad_seq(), Some(3));
    rewrite_lines(&s.path, |lines| {
        lines.swap(2, 3);
        lines.remove(2);
    });
    let t = Session::read(&s.path).unwrap();
    assert_eq!(texts(&t.messages), vec!["m0", "m2", "m3"]);
    assert!(matches!(
        t.report.issues[0].kind,
        IssueKind::Gap { missing_from: 2 }
    ));
}

#[test]
fn missing_header_is_the_only_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "h");
    s.append_messages(&[Message::user("x")]).unwrap();
    rewrite_lines(&s.path, |lines| {
        lines.remove(0);
    });
    assert!(matches!(Session::load(&s.path), Err(Error::NoHeader(_))));
    assert!(Session::peek_meta(&s.path).is_none());
    let (list, unreadable) = Session::list_counting(dir.path()).unwrap();
    assert!(list.is_empty());
    assert_eq!(unreadable, 1);
}

#[test]
fn unknown_records_and_fields_survive_load_and_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "u");
    let mut m = Message::user("hello");
    m.extra
        .insert("tool_provenance".into(), json!({"fs": "local"}));
    m.content.push(Block::Unknown(
        json!({"type": "citation", "url": "https://x"}),
    ));
    let mut raw = serde_json::Map::new();
    raw.insert("goal".into(), json!("ship it"));
    let unknown = Record::Unknown {
        kind: "goal_anchor".into(),
        raw,
    };
    s.append(&Record::Message(m.clone())).unwrap();
    s.append(&unknown).unwrap();
    let t = Session::read(&s.path).unwrap();
    assert_eq!(t.messages, vec![m.clone()]);
    assert_eq!(t.unknown.len(), 1);
    assert_eq!(t.unknown[0].record, unknown);
    // Rewrite the conversation from what was loaded: the unknown data stays.
    let after = vec![Message::user("[summary]"), t.messages[0].clone()];
    s.record_run(&t.messages, &Conversation::from(after.clone()))
        .unwrap();
    assert!(fs::read_to_string(&s.path)
        .unwrap()
        .contains("\"record\":\"rewrite\""));
    let t2 = Session::read(&s.path).unwrap();
    assert_eq!(t2.messages, after);
    assert_eq!(
        t2.messages[1].extra["tool_provenance"],
        json!({"fs": "local"})
    );
    // And a fresh copy of the unknown record round-trips through append.
    s.append(&t.unknown[0].record).unwrap();
    assert_eq!(Session::read(&s.path).unwrap().unknown.len(), 2);
}

#[test]
fn find_and_list() {
    let dir = tempfile::tempdir().unwrap();
    for id in [
        "20260101T000000-aaaa01",
        "20260101T000000-aaaa02",
        "20260102T000000-bbbb01",
    ] {
        let mut m = meta(id);
        m.created_at = chrono::DateTime::parse_from_rfc3339(&format!(
            "{}-{}-{}T00:00:00Z",
            &id[..4],
            &id[4..6],
            &id[6..8]
        ))
        .unwrap()
        .into();
        Session::create(dir.path(), m).unwrap();
    }
    fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
    let listed = Session::list(dir.path()).unwrap();
    assert_eq!(listed[0].0.id, "20260102T000000-bbbb01", "newest first");
    assert_eq!(listed.len(), 3);
    assert_eq!(
        Session::find(dir.path(), "20260102").unwrap(),
        dir.path().join("20260102T000000-bbbb01.jsonl")
    );
    assert_eq!(
        Session::find(dir.path(), "20260101T000000-aaaa01").unwrap(),
        dir.path().join("20260101T000000-aaaa01.jsonl")
    );
    match Session::find(dir.path(), "20260101") {
        Err(Error::Ambiguous { candidates, .. }) => assert_eq!(candidates.len(), 2),
        other => panic!("{other:?}"),
    }
    let msg = Session::find(dir.path(), "2026").unwrap_err().to_string();
    assert!(
        msg.contains("matches 3 sessions") && msg.contains("bbbb01"),
        "{msg}"
    );
    assert!(matches!(
        Session::find(dir.path(), "zzz"),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn expected_seq_conflicts_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "occ");
    s.append_expecting(&[Record::Message(Message::user("a"))], 1)
        .unwrap();
    let err = s
        .append_expecting(&[Record::Message(Message::user("b"))], 1)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(Session::read(&s.path).unwrap().messages.len(), 1);
}

#[test]
fn appending_to_a_deleted_session_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "del");
    fs::remove_file(&s.path).unwrap();
    assert!(matches!(
        s.append_messages(&[Message::user("x")]),
        Err(Error::Deleted(_))
    ));
    assert!(!s.path.exists(), "must not re-create a headerless file");
}

#[test]
fn owner_lock_names_the_holder_and_releases_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "own");
    let lock = s.acquire().unwrap();
    assert!(lock.recovered_from.is_none());
    let again = Session::open(&s.path).unwrap();
    match again.acquire() {
        Err(Error::Busy { pid, host, .. }) => {
            assert_eq!(pid, std::process::id());
            assert!(!host.is_empty());
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    drop(lock);
    let lock2 = again.acquire().unwrap();
    assert!(
        lock2.recovered_from.is_none(),
        "a clean release is not stale"
    );
}

#[test]
fn forks_stitch_parent_prefix_and_survive_parent_appends() {
    let dir = tempfile::tempdir().unwrap();
    let parent = new_session(dir.path(), "parent");
    let a = parent
        .append_messages(&[
            Message::user("p0"),
            Message::assistant("p1"),
            Message::user("p2"),
        ])
        .unwrap();
    parent
        .record_summary(
            Usage {
                input_tokens: 7,
                ..Default::default()
            },
            1,
        )
        .unwrap();
    let mut m = meta("child");
    m.parent = Some(memoir::record::ForkPoint {
        session: "parent".into(),
        seq: a.first_seq + 1,
        messages: 2,
        parent_created_at: None,
    });
    let child = Session::create(dir.path(), m).unwrap();
    child.append_messages(&[Message::user("c2")]).unwrap();
    parent.append_messages(&[Message::user("p3")]).unwrap();
    let t = child.transcript().unwrap();
    assert_eq!(texts(&t.messages), vec!["p0", "p1", "c2"]);
    assert_eq!(t.inherited, 2);
    assert_eq!(t.usage, Usage::default(), "fork never duplicates usage");
    // Fork of a fork.
    let mut m2 = meta("grandchild");
    m2.parent = Some(memoir::record::ForkPoint {
        session: "child".into(),
        seq: 1,
        messages: 3,
        parent_created_at: None,
    });
    let gc = Session::create(dir.path(), m2).unwrap();
    gc.append_messages(&[Message::assistant("g3")]).unwrap();
    assert_eq!(
        texts(&gc.transcript().unwrap().messages),
        vec!["p0", "p1", "c2", "g3"]
    );
}

#[test]
fn huge_message_and_many_small_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    let s = Session::create_in(store.clone(), meta("big")).unwrap();
    let payload = "x".repeat(100 * 1024 * 1024);
    s.append_messages(&[Message::tool_result("t1", payload.clone(), false)])
        .unwrap();
    let t = s.transcript().unwrap();
    match &t.messages[0].content[0] {
        Block::ToolResult { content, .. } => assert_eq!(content.len(), payload.len()),
        other => panic!("{other:?}"),
    }
    drop(t);
    let s2 = Session::create_in(store, meta("many")).unwrap();
    let many: Vec<Message> = (0..100_000)
        .map(|i| Message::user(format!("msg {i}")))
        .collect();
    let a = s2.append_messages(&many).unwrap();
    assert_eq!(a.last_seq, 100_000);
    let t = s2.transcript().unwrap();
    assert_eq!(t.messages.len(), 100_000);
    assert_eq!(t.messages[99_999].text_content(), "msg 99999");
    assert!(t.report.is_clean());
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Append(Vec<String>),
        Rewrite(Vec<String>),
        Run { keep: usize, add: Vec<String> },
        Taint(bool, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        let words = prop::collection::vec("[a-z \"\\\\\n]{0,12}", 0..4);
        prop_oneof![
            words.clone().prop_map(Op::Append),
            words.clone().prop_map(Op::Rewrite),
            (0usize..6, words).prop_map(|(keep, add)| Op::Run { keep, add }),
            (any::<bool>(), any::<bool>()).prop_map(|(p, u)| Op::Taint(p, u)),
        ]
    }

    fn msgs(words: &[String]) -> Vec<Message> {
        words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i % 2 == 0 {
                    Message::user(w.clone())
                } else {
                    Message::assistant(w.clone())
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_sequence_of_appends_and_rewrites_loads_back(ops in prop::collection::vec(op(), 0..12)) {
            let dir = tempfile::tempdir().unwrap();
            let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::None));
            let s = Session::create_in(store, meta("prop")).unwrap();
            let mut model: Vec<Message> = Vec::new();
            let mut taint = Taint::default();
            for op in ops {
                match op {
                    Op::Append(w) => {
                        let m = msgs(&w);
                        s.append_messages(&m).unwrap();
                        model.extend(m);
                    }
                    Op::Rewrite(w) => {
                        let m = msgs(&w);
                        s.append(&Record::Rewrite { messages: m.clone() }).unwrap();
                        model = m;
                    }
                    Op::Run { keep, add } => {
                        let mut after: Vec<Message> = model.iter().take(keep).cloned().collect();
                        after.extend(msgs(&add));
                        s.record_run(&model, &Conversation::from(after.clone())).unwrap();
                        model = after;
                    }
                    Op::Taint(p, u) => {
                        let t = Taint { private: p, untrusted: u };
                        s.append(&Record::Taint(t)).unwrap();
                        taint.merge(t);
                    }
                }
            }
            let t = s.transcript().unwrap();
            prop_assert_eq!(&t.messages, &model);
            prop_assert_eq!(t.taint, taint);
            prop_assert_eq!(t.message_seqs.len(), t.messages.len());
            prop_assert!(t.report.is_clean());
        }
    }
}

/// Numbers in a record are read back as the same `f64` they were written as:
/// a parser that is off by one ULP would change a tool input or a cost every
/// time a session is loaded and written again (fork, export, import).
#[test]
fn floats_in_records_survive_append_and_load_bit_exact() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path(), "floats");
    let mut values = vec![
        1.4100000000000003e274,
        0.30000000000000004,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        5e-324,
        0.1 + 0.7,
        123456789.12345679,
    ];
    let mut bits = 0x9e37_79b9_7f4a_7c15u64;
    while values.len() < 2000 {
        bits ^= bits << 13;
        bits ^= bits >> 7;
        bits ^= bits << 17;
        let v = f64::from_bits(bits);
        if v.is_finite() {
            values.push(v);
        }
    }
    let msgs: Vec<Message> = values
        .chunks(100)
        .enumerate()
        .map(|(i, chunk)| {
            Message::new(
                Role::Assistant,
                vec![Block::ToolUse {
                    id: format!("toolu_{i}"),
                    name: "measure".into(),
                    input: json!({ "values": chunk }),
                }],
            )
        })
        .collect();
    s.append_messages(&msgs).unwrap();
    let loaded = Session::load(&s.path).unwrap();
    let read: Vec<u64> = loaded
        .conversation
        .messages
        .iter()
        .flat_map(|m| match &m.content[0] {
            Block::ToolUse { input, .. } => input["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap().to_bits())
                .collect::<Vec<_>>(),
            other => panic!("unexpected block {other:?}"),
        })
        .collect();
    let written: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
    let changed = written.iter().zip(&read).filter(|(a, b)| a != b).count();
    assert_eq!(read.len(), written.len());
    assert_eq!(changed, 0, "{changed} of {} numbers changed", written.len());
}
