//! Revisions and forks at a record: a rewrite (pop, clear, compaction,
//! prune) replaces the current messages but never the log, and the state it
//! replaced can be forked back by reference (the SDK adapters' undo).

use std::time::Duration;

use memoir::manager::{ForkTarget, ManagerError, ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::record::{Record, SourceRef};
use memoir::store::Durability;

fn mgr(project: &std::path::Path) -> SessionManager {
    let opts = ManagerOptions {
        durability: Durability::None,
        flush_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    SessionManager::for_project(project, opts).unwrap()
}

fn texts(m: &mut SessionManager, id: &str) -> Vec<String> {
    m.read_session(id)
        .unwrap()
        .messages
        .iter()
        .map(|msg| msg.text_content())
        .collect()
}

fn rewrite(m: &SessionManager, id: &str, keep: &[&str]) {
    let messages = keep.iter().map(|t| Message::user(*t)).collect();
    m.append_records_to(id, &[Record::Rewrite { messages }])
        .unwrap();
}

fn named(id: &str) -> ForkTarget {
    ForkTarget {
        id: Some(id.to_string()),
        ..Default::default()
    }
}

#[test]
fn rewrites_list_the_states_they_replaced_and_a_fork_brings_one_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    m.append_session_messages("s", ["a", "b", "c", "d"].map(Message::user).to_vec())
        .unwrap();
    rewrite(&m, "s", &["a", "b", "c"]); // pop
    rewrite(&m, "s", &[]); // clear
    assert!(texts(&mut m, "s").is_empty());

    let revs = m.revisions("s").unwrap();
    assert_eq!(
        revs.iter()
            .map(|r| (r.messages, r.after))
            .collect::<Vec<_>>(),
        vec![(4, 3), (3, 0)]
    );
    assert_eq!(revs[0].seq + 1, revs[0].rewrite_seq);

    // The current-message cut cannot reach them (nothing is left to cut)...
    assert!(matches!(
        m.fork_session_as("s", None, Some("cut".into()), None),
        Err(ManagerError::EmptyFork { .. })
    ));
    // ...a fork at the record before each rewrite can, by reference.
    let before_pop = m
        .fork_session_at_seq("s", Some(revs[0].seq), named("undo-pop"))
        .unwrap();
    assert_eq!(before_pop.effective, 4);
    assert!(!before_pop.materialized);
    assert_eq!(before_pop.parent.session, "s");
    assert_eq!(before_pop.parent.seq, revs[0].seq);
    assert_eq!(texts(&mut m, "undo-pop"), ["a", "b", "c", "d"]);
    m.fork_session_at_seq("s", Some(revs[1].seq), named("undo-clear"))
        .unwrap();
    assert_eq!(texts(&mut m, "undo-clear"), ["a", "b", "c"]);

    // The child's own log holds only its header: nothing was copied.
    let raw = m.read_raw("undo-pop").unwrap();
    assert!(raw.records.is_empty(), "{:?}", raw.records);
    // And it goes on independently.
    m.append_session_messages("undo-pop", vec![Message::user("e")])
        .unwrap();
    assert_eq!(texts(&mut m, "undo-pop"), ["a", "b", "c", "d", "e"]);
    assert!(texts(&mut m, "s").is_empty());
}

#[test]
fn fork_at_the_current_end_names_its_source_and_follows_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    m.append_session_messages("s", ["a", "b"].map(Message::user).to_vec())
        .unwrap();
    rewrite(&m, "s", &["b"]);
    let source = SourceRef {
        agent: "langgraph".into(),
        agent_version: None,
        session: Some("thread/2".into()),
        path: None,
        extra: Default::default(),
    };
    let target = ForkTarget {
        id: Some("copy".into()),
        title: Some("a copy".into()),
        source: Some(source.clone()),
    };
    let forked = m.fork_session_at_seq("s", None, target).unwrap();
    assert_eq!(forked.effective, 1);
    let t = m.read_session("copy").unwrap();
    assert_eq!(t.meta.source, Some(source));
    assert_eq!(t.meta.title.as_deref(), Some("a copy"));
    assert_eq!(t.inherited, 1);
    assert_eq!(texts(&mut m, "copy"), ["b"]);

    // A revision of a fork counts what it inherited.
    rewrite(&m, "copy", &[]);
    let revs = m.revisions("copy").unwrap();
    assert_eq!(revs.len(), 1);
    assert_eq!((revs[0].messages, revs[0].after), (1, 0));
}

#[test]
fn bad_forks_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mgr(dir.path());
    m.append_session_messages("s", vec![Message::user("a")])
        .unwrap();
    let last = m.read_session("s").unwrap().last_seq;
    let err = m
        .fork_session_at_seq("s", Some(last + 1), named("past"))
        .unwrap_err();
    assert!(err.to_string().contains("past the end"), "{err}");
    // seq 0 is the header: no messages yet.
    assert!(matches!(
        m.fork_session_at_seq("s", Some(0), named("empty")),
        Err(ManagerError::EmptyFork { .. })
    ));
    assert!(m
        .fork_session_at_seq("s", None, named("../escape"))
        .is_err());
    assert!(m.fork_session_at_seq("missing", None, named("x")).is_err());
    let ids: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["s"]);
    assert!(m.revisions("missing").unwrap_err().is_not_found());
}
