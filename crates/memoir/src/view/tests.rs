//! Unit tests of [`SessionView`]: every seed method, the lifecycle table,
//! and the fixed seed bugs.

use super::*;
use crate::embed::EmbeddingError;

/// Bag-of-words test embedder: each lowercase word adds 1 to a hashed axis.
struct Bow(usize);

impl EmbeddingProvider for Bow {
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = vec![0.0; self.0];
        for w in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let h = blake3::hash(w.to_lowercase().as_bytes());
            let idx = u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap()) % self.0 as u64;
            v[idx as usize] += 1.0;
        }
        index::normalize(&mut v);
        Ok(v)
    }
    fn dimensions(&self) -> usize {
        self.0
    }
    fn model_id(&self) -> String {
        format!("test-bow@{}", self.0)
    }
}

/// Claims `dims` but returns one more component.
struct Liar(usize);

impl EmbeddingProvider for Liar {
    fn embed(&self, _: &str) -> Result<Vec<f32>, EmbeddingError> {
        Ok(vec![0.5; self.0 + 1])
    }
    fn dimensions(&self) -> usize {
        self.0
    }
    fn model_id(&self) -> String {
        "liar".into()
    }
}

fn axis(dims: usize, i: usize) -> Vec<f32> {
    let mut v = vec![0.01; dims];
    v[i] = 1.0;
    v
}

fn view_with(seqs: &[(u64, usize, &str)]) -> SessionView {
    let v = SessionView::new("s1", 8);
    for &(seq, ax, text) in seqs {
        assert!(v.insert_vector(axis(8, ax), ChunkMeta::inline(seq, "agent.chat.turn", text)));
    }
    v
}

#[test]
fn accessors_and_manifest() {
    let v = view_with(&[(3, 0, "c"), (1, 1, "a"), (2, 2, "b")]);
    assert_eq!(v.session_id(), "s1");
    assert_eq!(v.dims(), 8);
    assert_eq!(v.len(), 3);
    assert!(!v.is_empty());
    assert_eq!(v.chain_seqs(), vec![1, 2, 3]);
    let c = v.chunk(1).unwrap();
    assert_eq!(c.inline.as_deref(), Some("a"));
    assert_eq!(c.content_hash, content_hash("a"));
    assert_eq!(c.state, NodeState::Frontier);
    assert!(v.chunk(99).is_none());
    assert!(SessionView::new("e", 4).is_empty());
    let f = SessionView::for_embedder("x", &Bow(32));
    assert_eq!(f.dims(), 32);
}

#[test]
fn insert_rejects_dim_mismatch_without_side_effects() {
    let v = SessionView::new("s", 8);
    assert!(!v.insert_vector(vec![1.0; 4], ChunkMeta::inline(1, "k", "x")));
    assert!(v.is_empty());
    assert!(v.chain_seqs().is_empty());
    assert_eq!(v.stats().slots, 0);
    assert!(
        v.query(&[1.0; 4], 3).is_empty(),
        "wrong-width query is empty"
    );
}

#[test]
fn query_returns_nearest_and_is_scoped() {
    let a = view_with(&[(10, 0, "alpha"), (11, 1, "beta")]);
    let b = view_with(&[(20, 0, "other session")]);
    let hits = a.query(&axis(8, 0), 1);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].chain_seq, 10);
    assert_eq!(hits[0].meta.inline.as_deref(), Some("alpha"));
    assert!(hits[0].score > 0.99);
    let all = a.query(&axis(8, 0), 10);
    assert_eq!(all.len(), 2);
    assert!(all[0].score >= all[1].score);
    assert_eq!(b.query(&axis(8, 0), 5)[0].chain_seq, 20);
    assert!(b.query(&axis(8, 0), 5).iter().all(|h| h.chain_seq == 20));
}

#[test]
fn rebuilding_gives_the_same_manifest_and_answers() {
    let build = || view_with(&[(1, 0, "a"), (2, 1, "b"), (3, 2, "c")]);
    let (x, y) = (build(), build());
    assert_eq!(x.chain_seqs(), vec![1, 2, 3]);
    assert_eq!(x.manifest(), y.manifest());
    assert_eq!(x.query(&axis(8, 1), 3), y.query(&axis(8, 1), 3));
}

#[test]
fn reinsert_same_seq_replaces_and_keeps_counters_only_for_same_content() {
    let v = view_with(&[(1, 0, "first")]);
    v.graft(&axis(8, 0), 1);
    v.mark_important(1);
    assert!(v.insert_vector(axis(8, 0), ChunkMeta::inline(1, "k2", "first")));
    assert_eq!(v.len(), 1);
    assert_eq!(v.chunk(1).unwrap().kind, "k2", "second meta wins");
    assert_eq!(v.ref_count(1), 1, "same content keeps the recall count");
    assert!(v.is_important(1));
    assert!(v.insert_vector(axis(8, 3), ChunkMeta::inline(1, "k3", "different")));
    assert_eq!(v.len(), 1);
    assert_eq!(v.ref_count(1), 0, "new content resets counters");
    assert!(!v.is_important(1));
    assert_eq!(
        v.query(&axis(8, 3), 1)[0].meta.inline.as_deref(),
        Some("different")
    );
    assert_eq!(v.query(&axis(8, 0), 5).len(), 1, "the old vector is gone");
}

#[test]
fn graft_returns_provenance_and_counts_references() {
    let v = view_with(&[(10, 0, "alpha"), (11, 1, "beta")]);
    let items = v.graft(&axis(8, 0), 1);
    assert_eq!(items.len(), 1);
    let it = &items[0];
    assert_eq!(it.chain_seq, 10);
    assert_eq!(it.content_hash, content_hash("alpha"));
    assert_eq!(it.kind, "agent.chat.turn");
    assert_eq!(it.state, NodeState::Frontier);
    assert_eq!(it.content, GraftContent::Inline("alpha".into()));
    assert_eq!(v.ref_count(10), 1);
    v.graft(&axis(8, 0), 1);
    assert_eq!(v.ref_count(10), 2);
    assert_eq!(v.ref_count(11), 0);
    assert!(v.graft(&axis(8, 0), 0).is_empty());
    assert_eq!(v.ref_count(10), 2, "top_k 0 has no side effect");
}

#[test]
fn graft_dedup_keeps_the_best_scoring_duplicate() {
    let v = SessionView::new("s", 8);
    // Same text at seq 1 (far from the query) and seq 2 (close to it).
    v.insert_vector(
        axis(8, 5),
        ChunkMeta::inline(1, "tool.output", "same output"),
    );
    v.insert_vector(
        axis(8, 0),
        ChunkMeta::inline(2, "tool.output", "same output"),
    );
    v.insert_vector(axis(8, 1), ChunkMeta::inline(3, "tool.output", "other"));
    let items = v.graft(&axis(8, 0), 2);
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].chain_seq, 2, "the closer copy survives");
    assert_eq!(items[1].chain_seq, 3);
    assert_eq!(v.ref_count(1), 0);
}

#[test]
fn graft_fills_top_k_even_when_duplicates_dominate() {
    let v = SessionView::new("s", 8);
    for seq in 0..20 {
        v.insert_vector(axis(8, 0), ChunkMeta::inline(seq, "k", "dup"));
    }
    v.insert_vector(axis(8, 1), ChunkMeta::inline(100, "k", "x"));
    v.insert_vector(axis(8, 2), ChunkMeta::inline(101, "k", "y"));
    let items = v.graft(&axis(8, 0), 3);
    assert_eq!(
        items.len(),
        3,
        "reads deeper than 2×top_k to find distinct items"
    );
}

#[test]
fn graft_skips_pruned_but_query_does_not() {
    let v = view_with(&[(1, 0, "a"), (2, 1, "b")]);
    assert!(v.transition(1, NodeState::Pruned).is_ok());
    let items = v.graft(&axis(8, 0), 2);
    assert!(items.iter().all(|i| i.chain_seq != 1));
    assert_eq!(v.ref_count(1), 0);
    assert_eq!(v.query(&axis(8, 0), 1)[0].chain_seq, 1);
    let with = v.graft_with(&SearchRequest::vector(&axis(8, 0), 1).states(StateSet::ALL));
    assert_eq!(with[0].chain_seq, 1);
    assert_eq!(with[0].state, NodeState::Pruned);
}

#[test]
fn graft_of_externalized_chunk_is_a_blob_reference() {
    let v = SessionView::new("s", 8);
    let mut meta = ChunkMeta::inline(1, "tool.output", "big");
    meta.inline = None;
    meta.blob_hash = Some(content_hash("big"));
    v.insert_vector(axis(8, 0), meta);
    let items = v.graft(&axis(8, 0), 1);
    assert_eq!(items[0].content, GraftContent::Blob(content_hash("big")));
    let mut bare = ChunkMeta::inline(2, "k", "gone");
    bare.inline = None;
    v.insert_vector(axis(8, 1), bare);
    assert_eq!(v.graft(&axis(8, 1), 1)[0].content, GraftContent::Reference);
}

#[test]
fn index_chunk_then_graft_text_retrieves_it() {
    let e = Bow(32);
    let v = SessionView::for_embedder("s", &e);
    assert!(v
        .index_chunk(
            &e,
            None,
            1,
            "agent.chat.turn",
            "the deploy key is in vault",
            4096
        )
        .unwrap());
    assert!(v
        .index_chunk(&e, None, 2, "agent.chat.turn", "lunch was pasta", 4096)
        .unwrap());
    let items = v.graft_text(&e, "where is the deploy key", 1).unwrap();
    assert_eq!(items[0].chain_seq, 1);
    assert_eq!(
        items[0].content,
        GraftContent::Inline("the deploy key is in vault".into())
    );
    assert_eq!(v.state(1), Some(NodeState::Frontier));
}

#[test]
fn large_chunks_go_to_the_blob_store_small_ones_stay_inline() {
    let e = Bow(32);
    let store = ArtifactStore::in_memory();
    let v = SessionView::for_embedder("s", &e);
    let big = "word ".repeat(100);
    assert!(v
        .index_chunk(&e, Some(&store), 1, "tool.output", &big, 64)
        .unwrap());
    let m = v.chunk(1).unwrap();
    assert!(m.inline.is_none());
    let h = m.blob_hash.clone().unwrap();
    assert_eq!(store.load_string(&h).unwrap(), big);
    assert_eq!(
        v.graft_text(&e, &big, 1).unwrap()[0].content,
        GraftContent::Blob(h.clone())
    );
    // Re-indexing the same text takes no extra reference.
    v.index_chunk(&e, Some(&store), 1, "tool.output", &big, 64)
        .unwrap();
    assert_eq!(store.ref_count(&h).unwrap(), 1);
    // Replacing it with other content drops the old reference.
    v.index_chunk(&e, Some(&store), 1, "tool.output", "short", 64)
        .unwrap();
    assert_eq!(store.ref_count(&h).unwrap(), 0);
    assert!(v
        .index_chunk(&e, Some(&store), 2, "k", "short", 64)
        .unwrap());
    assert_eq!(v.chunk(2).unwrap().inline.as_deref(), Some("short"));
    // Without a store, long text stays inline.
    v.index_chunk(&e, None, 3, "k", &big, 64).unwrap();
    assert_eq!(v.chunk(3).unwrap().inline.as_deref(), Some(big.as_str()));
    assert_eq!(v.release_blobs(&store).unwrap(), 0);
}

#[test]
fn wrong_width_embedder_writes_nothing_anywhere() {
    let store = ArtifactStore::in_memory();
    let v = SessionView::new("s", 8);
    let big = "x".repeat(500);
    let ok = v
        .index_chunk(&Liar(8), Some(&store), 1, "k", &big, 64)
        .unwrap();
    assert!(!ok);
    assert!(v.is_empty());
    assert_eq!(store.stats().unwrap().0, 0, "no orphan blob");
    assert!(matches!(
        v.graft_text(&Liar(8), "q", 1),
        Err(ViewError::DimensionMismatch {
            expected: 8,
            got: 9
        })
    ));
}

#[test]
fn every_lifecycle_move_through_transition() {
    for from in NodeState::ALL {
        for to in NodeState::ALL {
            let v = view_with(&[(1, 0, "a")]);
            assert!(v.set_state(1, from).is_ok());
            let ok = v.transition(1, to).is_ok();
            assert_eq!(ok, from.can_transition_to(to), "{from} -> {to}");
            assert_eq!(v.state(1), Some(if ok { to } else { from }));
        }
    }
}

#[test]
fn prune_and_regraft_are_validated() {
    let v = view_with(&[(1, 0, "a"), (2, 1, "b")]);
    assert!(v.prune(1).is_ok());
    assert_eq!(v.state(1), Some(NodeState::Stale));
    assert_eq!(v.live_seqs(), vec![2]);
    assert_eq!(
        v.graft(&axis(8, 0), 1)[0].state,
        NodeState::Stale,
        "stale stays graftable"
    );
    assert!(v.prune(1).is_err(), "Stale -> Stale is not a move");
    assert!(v.regraft(1).is_ok());
    assert_eq!(v.live_seqs(), vec![1, 2]);
    assert!(v.commit(1).is_ok());
    assert!(v.regraft(1).is_err(), "Committed -> Frontier is illegal");
    assert!(v.prune(1).is_ok(), "Committed -> Stale ages out");
    assert!(v.transition(1, NodeState::Pruned).is_ok());
    assert!(v.regraft(1).is_err(), "Pruned is terminal");
    assert!(v.prune(1).is_err());
    assert!(v.commit(1).is_err());
    assert!(v.set_speculative(1).is_err());
    assert_eq!(v.state(1), Some(NodeState::Pruned));
}

#[test]
fn unknown_records_are_refused_everywhere() {
    let v = view_with(&[(1, 0, "a")]);
    assert!(v.prune(999).is_err());
    assert!(v.regraft(999).is_err());
    assert!(v.set_state(999, NodeState::Stale).is_err());
    assert!(v.set_speculative(999).is_err());
    assert!(v.transition(999, NodeState::Committed).is_err());
    assert!(v.commit(999).is_err());
    assert!(!v.mark_important(999));
    assert!(!v.is_important(999));
    assert_eq!(v.ref_count(999), 0);
    assert_eq!(v.state(999), None);
    assert!(!v.remove(999));
}

#[test]
fn speculative_walks() {
    let v = view_with(&[(1, 0, "a"), (2, 1, "b")]);
    assert!(v.set_speculative(1).is_ok());
    assert!(v.set_speculative(1).is_ok(), "already speculative");
    assert!(!v.live_seqs().contains(&1));
    assert!(
        v.commit(1).is_err(),
        "no skip from Speculative to Committed"
    );
    assert_eq!(v.state(1), Some(NodeState::Speculative));
    assert!(v.transition(1, NodeState::Frontier).is_ok());
    assert!(v.commit(1).is_ok());
    assert!(
        v.set_speculative(1).is_err(),
        "a committed record is not rewound"
    );
    assert!(v.set_speculative(2).is_ok());
    assert!(v.transition(2, NodeState::Pruned).is_ok());
    assert!(v.transition(2, NodeState::Frontier).is_err());
    // A moved-on Frontier record cannot be rewound either.
    v.insert_vector(axis(8, 3), ChunkMeta::inline(3, "k", "c"));
    assert!(v.prune(3).is_ok() && v.regraft(3).is_ok());
    assert!(v.set_speculative(3).is_err());
}

#[test]
fn importance_prune_to_recent_and_promotion() {
    let v = view_with(&[(1, 0, "a"), (2, 1, "b"), (3, 2, "c"), (4, 3, "d")]);
    assert!(v.mark_important(2));
    assert!(v.mark_important(2));
    assert!(v.is_important(2));
    assert_eq!(v.prune_to_recent(2), 2);
    assert_eq!(v.live_seqs(), vec![3, 4]);
    assert_eq!(v.prune_to_recent(5), 0);
    v.graft(&axis(8, 2), 1);
    v.graft(&axis(8, 2), 1);
    v.graft(&axis(8, 3), 1);
    let c = v.promotion_candidates(&PromotionSignals::default());
    let seqs: Vec<u64> = c.iter().map(|c| c.chain_seq).collect();
    assert_eq!(seqs, vec![2, 3]);
    assert_eq!(c[0].reasons, vec![PromotionReason::Important]);
    assert_eq!(c[1].reasons, vec![PromotionReason::ReferenceCount(2)]);
    let success = PromotionSignals {
        task_score: 0.9,
        ..PromotionSignals::default()
    };
    let c = v.promotion_candidates(&success);
    assert_eq!(
        c.iter().map(|c| c.chain_seq).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert!(c[2].reasons.contains(&PromotionReason::TaskScore(0.9)));
    v.set_state(3, NodeState::Pruned).unwrap();
    assert!(v
        .promotion_candidates(&success)
        .iter()
        .all(|c| c.chain_seq != 3));
}

#[test]
fn remove_drops_every_part() {
    let v = SessionView::new("s", 8);
    v.insert_vector(axis(8, 0), ChunkMeta::inline(1, "k", "p0"));
    v.insert_vector(axis(8, 1), ChunkMeta::inline(1, "k", "p1").with_part(1));
    v.insert_vector(axis(8, 2), ChunkMeta::inline(2, "k", "x"));
    assert_eq!(v.len(), 3);
    assert_eq!(v.chunks_of(1).len(), 2);
    assert!(v.remove(1));
    assert_eq!(v.len(), 1);
    assert_eq!(v.chain_seqs(), vec![2]);
    assert!(v.query(&axis(8, 0), 3).iter().all(|h| h.chain_seq == 2));
}

#[test]
fn lexical_and_hybrid_modes() {
    let e = Bow(16);
    let v = SessionView::for_embedder("s", &e);
    for (seq, t) in [
        (1, "the cat sat on the mat"),
        (2, "quarterly revenue grew"),
        (3, "a dog barked"),
    ] {
        v.index_chunk(&e, None, seq, "k", t, 4096).unwrap();
    }
    for mode in [
        RetrievalMode::Lexical,
        RetrievalMode::Hybrid,
        RetrievalMode::Vector,
    ] {
        let hits = v.query_text_mode(&e, "revenue", 3, mode).unwrap();
        assert_eq!(hits[0].chain_seq, 2, "{mode}");
    }
    let lex = v.search(&SearchRequest::lexical("nothing matches", 3));
    assert!(lex.is_empty());
}

#[test]
fn budgeted_graft_resolves_blobs_and_respects_the_budget() {
    let e = Bow(64);
    let store = ArtifactStore::in_memory();
    let v = SessionView::for_embedder("s", &e);
    let long = format!("deploy key details {}", "lorem ipsum ".repeat(40));
    v.index_chunk(&e, Some(&store), 7, "tool.result", &long, 64)
        .unwrap();
    v.index_chunk(&e, None, 3, "user.text", "the deploy key is in vault", 4096)
        .unwrap();
    v.index_chunk(&e, None, 9, "user.text", "unrelated chatter", 4096)
        .unwrap();
    let block = v
        .graft_budget(&e, "deploy key", 1000, Some(&store))
        .unwrap();
    assert!(block.text.starts_with(graft::GRAFT_HEADER));
    assert!(block
        .text
        .contains("- [chain_seq 3] the deploy key is in vault"));
    assert!(
        block
            .text
            .contains("- [chain_seq 7] deploy key details lorem"),
        "blob resolved"
    );
    assert!(block.tokens <= 1000);
    let p3 = block.text.find("[chain_seq 3]").unwrap();
    let p7 = block.text.find("[chain_seq 7]").unwrap();
    assert!(p3 < p7, "rendered in chain order");
    // Without the store the blob item is reported, not silently dropped.
    let block = v.graft_budget(&e, "deploy key", 1000, None).unwrap();
    assert!(block
        .unresolved
        .iter()
        .any(|r| r.seq == 7 && r.session == v.session_id()));
    // A tight budget truncates or skips, never overflows.
    for budget in [0, 10, 30, 60, 100] {
        let b = v
            .graft_budget(&e, "deploy key", budget, Some(&store))
            .unwrap();
        assert!(
            graft::estimate_tokens(&b.text) <= budget,
            "budget {budget}: {}",
            b.text
        );
    }
}
