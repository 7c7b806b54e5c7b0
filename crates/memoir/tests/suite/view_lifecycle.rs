//! The public lifecycle and width guarantees of a view: the nine legal moves
//! and nothing else, Pruned terminal, and wrong widths rejected with no side
//! effect anywhere (nothing written to a file-backed blob store).

use memoir::blob::ArtifactStore;
use memoir::embed::{EmbeddingError, EmbeddingProvider, HashEmbedder};
use memoir::view::{ChunkMeta, NodeState, SessionView, ViewError};

/// Says 32 wide, returns 31.
struct Short;

impl EmbeddingProvider for Short {
    fn embed(&self, _: &str) -> Result<Vec<f32>, EmbeddingError> {
        Ok(vec![0.1; 31])
    }
    fn dimensions(&self) -> usize {
        32
    }
    fn model_id(&self) -> String {
        "short@32".into()
    }
}

const LEGAL: [(NodeState, NodeState); 9] = [
    (NodeState::Speculative, NodeState::Frontier),
    (NodeState::Speculative, NodeState::Stale),
    (NodeState::Speculative, NodeState::Pruned),
    (NodeState::Frontier, NodeState::Committed),
    (NodeState::Frontier, NodeState::Stale),
    (NodeState::Frontier, NodeState::Pruned),
    (NodeState::Committed, NodeState::Stale),
    (NodeState::Stale, NodeState::Frontier),
    (NodeState::Stale, NodeState::Pruned),
];

#[test]
fn exactly_the_nine_legal_moves() {
    for from in NodeState::ALL {
        for to in NodeState::ALL {
            let legal = LEGAL.contains(&(from, to));
            assert_eq!(from.can_transition_to(to), legal, "{from} -> {to}");
            let view = SessionView::new("s", 4);
            view.insert_vector(
                vec![1.0, 0.0, 0.0, 0.0],
                ChunkMeta::inline(1, "k", "x").with_state(from),
            );
            assert_eq!(view.state(1), Some(from));
            assert_eq!(view.transition(1, to).is_ok(), legal, "{from} -> {to}");
            assert_eq!(view.state(1), Some(if legal { to } else { from }));
        }
    }
}

#[test]
fn pruned_is_terminal_for_every_helper() {
    let view = SessionView::new("s", 4);
    view.insert_vector(vec![1.0, 0.0, 0.0, 0.0], ChunkMeta::inline(1, "k", "x"));
    assert!(view.transition(1, NodeState::Pruned).is_ok());
    assert!(view.regraft(1).is_err());
    assert!(view.prune(1).is_err());
    assert!(view.commit(1).is_err());
    assert!(view.set_speculative(1).is_err());
    for to in NodeState::ALL {
        assert!(view.transition(1, to).is_err());
    }
    assert_eq!(view.state(1), Some(NodeState::Pruned));
    assert!(view.live_seqs().is_empty());
    assert!(view.graft(&[1.0, 0.0, 0.0, 0.0], 3).is_empty());
}

#[test]
fn wrong_widths_leave_no_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ArtifactStore::open(tmp.path()).unwrap();
    let view = SessionView::new("s", 32);
    let long = "a long tool output ".repeat(100);
    let ok = view
        .index_chunk(&Short, Some(&store), 1, "tool.result", &long, 64)
        .unwrap();
    assert!(!ok);
    assert!(view.is_empty());
    assert_eq!(store.list().unwrap(), vec![], "no blob written");
    let files: Vec<_> = walk(tmp.path());
    assert!(
        files.iter().all(|p| p.ends_with(".lock")),
        "unexpected files {files:?}"
    );
    assert!(!view.insert_vector(vec![0.0; 31], ChunkMeta::inline(2, "k", "x")));
    assert!(view.query(&[0.0; 33], 5).is_empty());
    // A well-behaved embedder of another width is refused at query time.
    let other = HashEmbedder::new(16);
    assert!(matches!(
        view.graft_text(&other, "q", 3),
        Err(ViewError::DimensionMismatch {
            expected: 32,
            got: 16
        })
    ));
    assert!(view.is_empty());
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.to_string_lossy().into_owned());
        }
    }
    out
}
