//! The vector index: HNSW recall against exact search, insert after build,
//! deletion, determinism, and the exact/graph switch inside a view.

use memoir::view::index::hnsw::HnswParams;
use memoir::view::index::{IndexConfig, VectorIndex};
use memoir::view::{ChunkMeta, SearchRequest, SessionView, StateSet, ViewConfig};

const DIMS: usize = 48;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn normal(&mut self) -> f32 {
        let u = ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let v = ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

/// Clustered vectors: 50 fixed centres plus noise (`seed` picks the sample,
/// not the centres, so queries come from the same distribution).
fn data(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut fixed = Rng(1000);
    let centres: Vec<Vec<f32>> = (0..50)
        .map(|_| (0..DIMS).map(|_| fixed.normal()).collect())
        .collect();
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let c = &centres[(rng.next() % 50) as usize];
            c.iter().map(|x| x + 0.8 * rng.normal()).collect()
        })
        .collect()
}

fn graph_index(threshold: usize) -> VectorIndex {
    VectorIndex::new(
        DIMS,
        IndexConfig {
            hnsw_threshold: threshold,
            hnsw: HnswParams {
                m: 12,
                ef_construction: 64,
                ..HnswParams::default()
            },
            ef_search: 64,
            ..IndexConfig::default()
        },
    )
}

fn recall(ix: &VectorIndex, queries: &[Vec<f32>], k: usize) -> f64 {
    let mut hits = 0;
    for q in queries {
        let exact: Vec<u32> = ix
            .search_exact(q, k, &|_| true)
            .iter()
            .map(|h| h.0)
            .collect();
        let got = ix.search(q, k, &|_| true);
        assert!(got.len() == k.min(ix.len()));
        hits += got.iter().filter(|h| exact.contains(&h.0)).count();
    }
    hits as f64 / (queries.len() * k) as f64
}

#[test]
fn hnsw_recall_at_10_is_at_least_095_at_every_size() {
    let rows = data(6000, 1);
    let queries = data(100, 2);
    let mut ix = graph_index(0);
    let mut done = 0;
    for size in [500, 2000, 6000] {
        for r in &rows[done..size] {
            ix.insert(r);
        }
        done = size;
        assert!(ix.uses_graph());
        let r = recall(&ix, &queries, 10);
        assert!(r >= 0.95, "recall@10 {r} at {size}");
    }
}

#[test]
fn insert_after_build_deletion_and_compaction() {
    let rows = data(3000, 3);
    let queries = data(50, 4);
    // Exact below 1000 rows, graph built when the 1000th arrives, then grown.
    let mut ix = graph_index(1000);
    for (i, r) in rows.iter().enumerate() {
        ix.insert(r);
        assert_eq!(ix.uses_graph(), i + 1 >= 1000);
    }
    // Delete every third row: never returned, recall stays high.
    for slot in (0..3000).step_by(3) {
        assert!(ix.remove(slot));
    }
    assert_eq!(ix.len(), 2000);
    for q in &queries {
        assert!(ix
            .search(q, 10, &|_| true)
            .iter()
            .all(|h| !h.0.is_multiple_of(3)));
    }
    assert!(recall(&ix, &queries, 10) >= 0.95);
    // A filter is honoured by the graph walk.
    let even = |s: u32| s.is_multiple_of(2);
    for q in &queries {
        assert!(ix
            .search(q, 10, &even)
            .iter()
            .all(|h| h.0.is_multiple_of(2)));
    }
    // More deletions trigger compaction; answers are renumbered, not lost.
    for slot in (0..3000u32).filter(|s| !s.is_multiple_of(3) && !s.is_multiple_of(5)) {
        ix.remove(slot);
    }
    assert!(ix.needs_compaction());
    let before: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| {
            ix.search_exact(q, 5, &|_| true)
                .iter()
                .map(|h| h.1)
                .collect()
        })
        .collect();
    let map = ix.compact();
    assert_eq!(map.iter().flatten().count(), ix.len());
    let after: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| {
            ix.search_exact(q, 5, &|_| true)
                .iter()
                .map(|h| h.1)
                .collect()
        })
        .collect();
    assert_eq!(before, after);
}

#[test]
fn graph_answers_are_reproducible() {
    let rows = data(2500, 5);
    let queries = data(30, 6);
    let build = || {
        let mut ix = graph_index(0);
        for r in &rows {
            ix.insert(r);
        }
        ix
    };
    let (a, b) = (build(), build());
    for q in &queries {
        assert_eq!(a.search(q, 10, &|_| true), b.search(q, 10, &|_| true));
    }
}

#[test]
fn a_view_searches_the_whole_session_through_the_graph() {
    let rows = data(1500, 7);
    let mut config = ViewConfig::default();
    config.index.hnsw_threshold = 500;
    let view = SessionView::with_config("big", DIMS, config);
    for (i, r) in rows.iter().enumerate() {
        assert!(view.insert_vector(
            r.clone(),
            ChunkMeta::inline(i as u64, "k", format!("chunk {i}"))
        ));
    }
    assert!(view.stats().uses_graph);
    // The oldest chunk is still found: search covers the whole session.
    let hits = view.query(&rows[0], 1);
    assert_eq!(hits[0].chain_seq, 0);
    // Prune all but a handful; graft still fills top_k from the few left.
    for seq in 0..1490u64 {
        view.transition(seq, memoir::view::NodeState::Pruned)
            .unwrap();
    }
    let items = view.graft_with(&SearchRequest::vector(&rows[3], 10).states(StateSet::NOT_PRUNED));
    assert_eq!(items.len(), 10);
    assert!(items.iter().all(|i| i.chain_seq >= 1490));
}
