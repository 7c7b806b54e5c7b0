//! Rebuilding a session view from a transcript: determinism, the embedding
//! cache (a warm rebuild embeds nothing), shared `chain_seq`s, externalized
//! payloads, and the `Transcript` wrapper over a real session file.

use std::sync::Arc;

use memoir::blob::{externalize, ArtifactStore, ExternalizePolicy};
use memoir::embed::{CacheConfig, CachedEmbedder, EmbeddingProvider, HashEmbedder};
use memoir::message::{Block, Message, Role};
use memoir::transcript::Session;
use memoir::view::{GraftContent, RebuildOptions, RetrievalMode, SessionView};
use memoir::SessionMeta;

fn conversation() -> Vec<Message> {
    vec![
        Message::system("You are a careful assistant."),
        Message::user("The staging deploy key lives in vault under ops/staging."),
        Message::assistant("Noted: staging key in vault at ops/staging."),
        Message::user("Please grep the repo for panics."),
        Message::new(
            Role::Assistant,
            vec![
                Block::Text {
                    text: "Searching.".into(),
                },
                Block::ToolUse {
                    id: "call_1".into(),
                    name: "grep".into(),
                    input: serde_json::json!({"pattern": "panic!"}),
                },
            ],
        ),
        Message::tool_result(
            "call_1",
            format!(
                "src/io.rs:12: panic!(\"disk full\")\n{}",
                "noise line\n".repeat(400)
            ),
            false,
        ),
        Message::assistant("One panic, in src/io.rs line 12, when the disk is full."),
        Message::user("What was the weather like on the trip?"),
        Message::assistant("Sunny and warm, apart from one rainy afternoon."),
    ]
}

fn seqs(n: usize) -> Vec<u64> {
    (1..=n as u64).collect()
}

#[test]
fn same_transcript_same_manifest_and_answers() {
    let e = HashEmbedder::new(128);
    let msgs = conversation();
    let build = || {
        SessionView::rebuild_from_messages(
            "s",
            &msgs,
            &seqs(msgs.len()),
            &e,
            None,
            &RebuildOptions::default(),
        )
        .unwrap()
    };
    let (a, ra) = build();
    let (b, rb) = build();
    assert_eq!(ra.chunks, rb.chunks);
    assert_eq!(a.manifest(), b.manifest());
    assert!(
        !a.chain_seqs().contains(&1),
        "system prompt not indexed by default"
    );
    let kinds: Vec<String> = a.manifest().iter().map(|m| m.kind.clone()).collect();
    for k in ["user.text", "assistant.text", "tool.call", "tool.result"] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing");
    }
    assert!(a.chunks_of(6).len() > 1, "a long tool output is split");
    for q in [
        "where is the staging deploy key",
        "panic in io.rs",
        "weather on the trip",
    ] {
        let x = a.query_text(&e, q, 3).unwrap();
        let y = b.query_text(&e, q, 3).unwrap();
        assert_eq!(x, y, "{q}");
    }
    let top = a
        .query_text(&e, "where is the staging deploy key", 1)
        .unwrap();
    assert!(
        matches!(top[0].chain_seq, 2 | 3),
        "got {}",
        top[0].chain_seq
    );
    let top = a
        .query_text_mode(&e, "grep panics", 1, RetrievalMode::Lexical)
        .unwrap();
    assert!((4..=6).contains(&top[0].chain_seq));
}

#[test]
fn a_warm_rebuild_embeds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inner: Arc<dyn EmbeddingProvider> = Arc::new(HashEmbedder::new(64));
    let msgs = conversation();
    let mut manifests = Vec::new();
    for pass in 0..2 {
        let cached = CachedEmbedder::open(inner.clone(), CacheConfig::new(dir.path())).unwrap();
        let (view, report) = SessionView::rebuild_from_messages(
            "s",
            &msgs,
            &seqs(msgs.len()),
            &cached,
            None,
            &RebuildOptions::default(),
        )
        .unwrap();
        let stats = cached.stats();
        if pass == 0 {
            assert_eq!(stats.misses as usize, report.chunks);
        } else {
            assert_eq!(stats.misses, 0, "warm rebuild re-embedded something");
            assert_eq!(stats.hits as usize, report.chunks);
        }
        manifests.push(view.manifest());
    }
    assert_eq!(manifests[0], manifests[1]);
}

#[test]
fn messages_sharing_a_seq_keep_every_chunk() {
    let e = HashEmbedder::new(64);
    let msgs = vec![
        Message::user("alpha first"),
        Message::assistant("beta second"),
        Message::user("gamma third"),
    ];
    // A rewrite record put the first two messages under seq 7.
    let (view, report) = SessionView::rebuild_from_messages(
        "s",
        &msgs,
        &[7, 7, 8],
        &e,
        None,
        &RebuildOptions::default(),
    )
    .unwrap();
    assert_eq!(report.chunks, 3);
    assert_eq!(view.len(), 3);
    assert_eq!(view.chain_seqs(), vec![7, 8]);
    assert_eq!(view.chunks_of(7).len(), 2);
    assert!(SessionView::rebuild_from_messages(
        "s",
        &msgs,
        &[1, 2],
        &e,
        None,
        &RebuildOptions::default(),
    )
    .is_err());
}

#[test]
fn externalized_tool_results_are_indexed_through_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ArtifactStore::open(tmp.path()).unwrap();
    let mut msgs = conversation();
    externalize(&mut msgs, &store, &ExternalizePolicy::default()).unwrap();
    let e = HashEmbedder::new(64);
    let (view, _) = SessionView::rebuild_from_messages(
        "s",
        &msgs,
        &seqs(msgs.len()),
        &e,
        Some(&store),
        &RebuildOptions::default(),
    )
    .unwrap();
    let parts = view.chunks_of(6);
    assert!(parts.len() > 1);
    assert!(parts[0]
        .inline
        .as_deref()
        .unwrap()
        .starts_with("src/io.rs:12"));
    // Without the store the payload is unknown and its chunks are skipped.
    let (bare, _) = SessionView::rebuild_from_messages(
        "s",
        &msgs,
        &seqs(msgs.len()),
        &e,
        None,
        &RebuildOptions::default(),
    )
    .unwrap();
    assert!(bare.chunks_of(6).is_empty());
    // A budgeted graft of the panic finds the tool output.
    let block = view
        .graft_budget(&e, "disk full panic io.rs", 400, Some(&store))
        .unwrap();
    assert!(block.text.contains("[chain_seq 6]"), "{}", block.text);
    assert!(block.tokens <= 400);
    assert!(block
        .items
        .iter()
        .all(|i| !matches!(i.content, GraftContent::Reference)));
}

#[test]
fn rebuild_from_a_stored_session() {
    let dir = tempfile::tempdir().unwrap();
    let id = Session::new_id();
    let session = Session::create(dir.path(), SessionMeta::new(id.clone())).unwrap();
    session.append_messages(&conversation()).unwrap();
    let path = Session::find(dir.path(), &id[..8]).unwrap();
    let transcript = Session::read(&path).unwrap();
    assert_eq!(transcript.messages.len(), transcript.message_seqs.len());
    let e = HashEmbedder::new(64);
    let (view, report) = SessionView::rebuild(&transcript, &e, None).unwrap();
    assert_eq!(view.session_id(), id);
    assert_eq!(report.messages, conversation().len());
    for seq in view.chain_seqs() {
        assert!(transcript.message_seqs.contains(&seq));
    }
    let hits = view.query_text(&e, "deploy key vault", 1).unwrap();
    let idx = transcript
        .message_seqs
        .iter()
        .position(|s| *s == hits[0].chain_seq)
        .unwrap();
    assert!(transcript.messages[idx].text_content().contains("vault"));
}
