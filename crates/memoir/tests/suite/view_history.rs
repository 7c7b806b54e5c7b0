//! The view keeps every turn and knows which log it points into:
//! a turn a compaction dropped is still recalled, with its provenance; a
//! fork's inherited records and its own never share a key; re-indexing never
//! rewinds a record's lifecycle.

use std::sync::Arc;

use memoir::embed::HashEmbedder;
use memoir::message::Message;
use memoir::record::{ForkPoint, Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use memoir::view::history::History;
use memoir::view::{
    ChunkMeta, NodeState, RebuildOptions, RetrievalMode, SearchRequest, SessionView,
    TransitionError, ViewConfig,
};

/// Lexical recall without neighbour context, so a query finds exactly the
/// turns holding its words.
fn lexical() -> RebuildOptions {
    RebuildOptions {
        view: ViewConfig {
            mode: RetrievalMode::Lexical,
            neighbor_weight: 0.0,
            ..ViewConfig::default()
        },
        chunker: memoir::view::ChunkerConfig {
            lexical_context: 0,
            ..Default::default()
        },
        ..RebuildOptions::default()
    }
}

fn store(dir: &std::path::Path) -> Arc<dyn LogStore> {
    Arc::new(FileStore::new(dir, Durability::Fsync))
}

/// A session with six turns, then a compaction keeping a summary and the last two.
fn compacted(store: &Arc<dyn LogStore>) -> Session {
    let s = Session::create_in(store.clone(), SessionMeta::new("compacted")).unwrap();
    let turns = vec![
        Message::user("The launch code for the probe is PELICAN-42."),
        Message::assistant("Understood, PELICAN-42 it is."),
        Message::user("Now refactor the parser."),
        Message::assistant("The parser now uses a state machine."),
        Message::user("Run the tests."),
        Message::assistant("All 212 tests pass."),
    ];
    s.append_messages(&turns).unwrap(); // seqs 1..=6
    let mut kept = vec![Message::assistant("Summary: refactored the parser.")];
    kept.extend_from_slice(&turns[4..]);
    s.append(&Record::Rewrite { messages: kept }).unwrap(); // seq 7
    s
}

#[test]
fn a_turn_a_compaction_dropped_is_recalled_with_its_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let s = compacted(&store);
    let t = s.transcript().unwrap();
    assert_eq!(
        t.messages.len(),
        3,
        "the conversation holds the compacted list"
    );

    let history = History::read(store.as_ref(), "compacted").unwrap();
    let current: Vec<&Message> = history
        .turns
        .iter()
        .filter(|t| t.current)
        .map(|t| &t.message)
        .collect();
    assert_eq!(current.len(), t.messages.len());
    for m in &t.messages {
        assert!(
            current.contains(&m),
            "history's current turns are the transcript's"
        );
    }
    assert_eq!(history.dropped().count(), 4);
    let kept = history
        .turns
        .iter()
        .find(|t| t.message == Message::user("Run the tests."))
        .unwrap();
    assert_eq!(
        kept.seq, 5,
        "a message the rewrite carried keeps its first seq"
    );
    let summary = history.turns.iter().find(|t| t.seq == 7).unwrap();
    assert!(summary.current);

    let e = HashEmbedder::new(64);
    let (view, report, read) =
        SessionView::rebuild_session(store.as_ref(), "compacted", &e, None, &lexical()).unwrap();
    assert!(read.is_clean());
    assert_eq!(report.dropped, 4);
    let hits = view.query_text(&e, "launch code probe", 3).unwrap();
    let top = &hits[0];
    assert_eq!(
        (top.session.as_str(), top.chain_seq),
        ("compacted", 1),
        "{hits:?}"
    );
    assert_eq!(
        top.meta.state,
        NodeState::Stale,
        "dropped turns are out of the live window"
    );
    assert!(top.meta.inline.as_deref().unwrap().contains("PELICAN-42"));
    // Grafting finds it too, and a dropped turn can be re-grafted into the window.
    let block = view
        .graft_budget(&e, "launch code probe", 200, None)
        .unwrap();
    assert!(
        block.text.contains("[chain_seq 1] The launch code"),
        "{}",
        block.text
    );
    view.regraft(1).unwrap();
    assert_eq!(view.state(1), Some(NodeState::Frontier));
    // The current turns are live.
    assert_eq!(view.state(5), Some(NodeState::Frontier));
    assert_eq!(view.state(7), Some(NodeState::Frontier));

    // Indexing only the current conversation loses the dropped turn.
    let only_current = RebuildOptions {
        dropped: None,
        ..lexical()
    };
    let (view, _, _) =
        SessionView::rebuild_session(store.as_ref(), "compacted", &e, None, &only_current).unwrap();
    let hits = view.query_text(&e, "launch code probe", 3).unwrap();
    assert!(hits.iter().all(|h| h.chain_seq != 1), "{hits:?}");
}

#[test]
fn a_fork_keeps_its_parents_seqs_and_its_own_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let parent = Session::create_in(store.clone(), SessionMeta::new("parent")).unwrap();
    parent
        .append_messages(&[
            Message::user("Parent turn one mentions zebras."),
            Message::assistant("Parent turn two mentions giraffes."),
        ])
        .unwrap();
    let mut meta = SessionMeta::new("child");
    meta.parent = Some(ForkPoint {
        session: "parent".into(),
        seq: 2,
        messages: 2,
        parent_created_at: None,
    });
    let child = Session::create_in(store.clone(), meta).unwrap();
    let appended = child
        .append_messages(&[Message::user("Child turn one mentions pelicans.")])
        .unwrap();
    let t = child.transcript().unwrap();
    assert_eq!(
        t.message_seqs,
        vec![1, 2, 1],
        "the fork's own seq 1 collides with the parent's"
    );
    let _ = appended;

    let e = HashEmbedder::new(64);
    let (view, _, _) =
        SessionView::rebuild_session(store.as_ref(), "child", &e, None, &lexical()).unwrap();
    let keys: Vec<(String, u64)> = view
        .records()
        .into_iter()
        .map(|r| (r.session, r.seq))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("parent".into(), 1),
            ("parent".into(), 2),
            ("child".into(), 1)
        ],
        "chain order, one key per record"
    );
    assert_eq!(view.len(), 3, "no chunk overwrote another");
    let inherited = view.chunk(("parent", 1)).unwrap();
    let own = view.chunk(1).unwrap();
    assert!(inherited.inline.unwrap().contains("zebras"));
    assert!(own.inline.unwrap().contains("pelicans"));
    assert_eq!(own.session, "child");

    // Lifecycle state and recall counts are per record.
    view.prune(("parent", 1)).unwrap();
    assert_eq!(view.state(("parent", 1)), Some(NodeState::Stale));
    assert_eq!(view.state(1), Some(NodeState::Frontier));
    let req = SearchRequest::lexical("zebras", 1);
    let grafted = view.graft_with(&req);
    assert_eq!(
        (grafted[0].session.as_str(), grafted[0].chain_seq),
        ("parent", 1)
    );
    assert_eq!(view.ref_count(("parent", 1)), 1);
    assert_eq!(view.ref_count(1), 0);

    // Hits and graft lines name the record's session.
    let hits = view.query_text(&e, "pelicans", 1).unwrap();
    assert_eq!((hits[0].session.as_str(), hits[0].chain_seq), ("child", 1));
    let block = view.graft_budget(&e, "zebras pelicans", 300, None).unwrap();
    assert!(
        block
            .text
            .contains("- [chain_seq 1 of parent] Parent turn one"),
        "{}",
        block.text
    );
    assert!(
        block.text.contains("- [chain_seq 1] Child turn one"),
        "{}",
        block.text
    );
    assert_eq!(
        view.transition(("nobody", 1), NodeState::Stale),
        Err(TransitionError::Unknown {
            session: "nobody".into(),
            seq: 1
        })
    );
}

#[test]
fn reinserting_a_chunk_never_rewinds_its_record() {
    let v = SessionView::new("s", 4);
    let vector = vec![1.0, 0.0, 0.0, 0.0];
    for seq in [1, 2] {
        assert!(v.insert_vector(
            vector.clone(),
            ChunkMeta::inline(seq, "k", format!("t{seq}"))
        ));
    }
    v.transition(1, NodeState::Pruned).unwrap();
    v.commit(2).unwrap();
    // The same chunks again (a re-index), entering Frontier as inserts do.
    for seq in [1, 2] {
        assert!(v.insert_vector(
            vector.clone(),
            ChunkMeta::inline(seq, "k", format!("t{seq}"))
        ));
    }
    assert_eq!(v.state(1), Some(NodeState::Pruned), "Pruned is terminal");
    assert_eq!(
        v.state(2),
        Some(NodeState::Committed),
        "not rewound to Frontier"
    );
    // New content under the same key keeps the state too, and a second part
    // joins the record's state.
    assert!(v.insert_vector(vector.clone(), ChunkMeta::inline(2, "k", "other")));
    assert!(v.insert_vector(
        vector.clone(),
        ChunkMeta::inline(2, "k", "part 1").with_part(1)
    ));
    assert!(v
        .chunks_of(2)
        .iter()
        .all(|c| c.state == NodeState::Committed));
    // The lifecycle reports why a move is refused.
    assert_eq!(
        v.regraft(1),
        Err(TransitionError::Illegal {
            from: NodeState::Pruned,
            to: NodeState::Frontier
        })
    );
    // A search over live chunks skips them.
    let live = v.search(
        &SearchRequest::vector(&vector, 5)
            .states(memoir::view::StateSet::NONE.with(NodeState::Frontier)),
    );
    assert!(live.is_empty(), "{live:?}");
}

#[test]
fn token_estimates_count_tool_call_ids() {
    use memoir::manager::index::estimate_tokens;
    use memoir::message::{Block, Role};
    // 21 id chars + 2 content chars = 23 -> 6 tokens (the content alone is 1).
    let result = Message::tool_result("call_abcdefghijklmnop", "ok", false);
    assert_eq!(estimate_tokens(&result), 6);
    // 22 id + 4 name + 9 input (`{"q":"x"}`) = 35 -> 9 tokens.
    let call = Message::new(
        Role::Assistant,
        vec![Block::ToolUse {
            id: "toolu_0123456789abcdef".into(),
            name: "grep".into(),
            input: serde_json::json!({"q": "x"}),
        }],
    );
    assert_eq!(estimate_tokens(&call), 9);
}

#[test]
fn a_fork_whose_parent_is_gone_still_indexes_its_own_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let parent = Session::create_in(store.clone(), SessionMeta::new("vanished")).unwrap();
    parent
        .append_messages(&[Message::user("a"), Message::assistant("b")])
        .unwrap();
    let mut meta = SessionMeta::new("orphan");
    meta.parent = Some(ForkPoint {
        session: "vanished".into(),
        seq: 2,
        messages: 2,
        parent_created_at: None,
    });
    let s = Session::create_in(store.clone(), meta).unwrap();
    s.append_messages(&[Message::user("orphaned turn about otters")])
        .unwrap();
    // The parent's log is lost (outside memoir's control).
    std::fs::remove_file(&parent.path).unwrap();
    let history = History::read(store.as_ref(), "orphan").unwrap();
    assert_eq!(history.turns.len(), 1);
    assert_eq!(
        history.report.issues.len(),
        1,
        "the missing parent is reported"
    );
    let t = s.transcript().unwrap();
    assert_eq!(t.report.issues.len(), history.report.issues.len());
}
