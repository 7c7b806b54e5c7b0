//! One view shared by several threads: concurrent inserts, queries, grafts
//! and lifecycle moves, with the graph switching on mid-way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use memoir::view::{ChunkMeta, NodeState, SessionView, ViewConfig};

const DIMS: usize = 16;

fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..DIMS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

#[test]
fn concurrent_queries_and_inserts() {
    let mut config = ViewConfig::default();
    config.index.hnsw_threshold = 600;
    let view = Arc::new(SessionView::with_config("shared", DIMS, config));
    let writers_done = Arc::new(AtomicBool::new(false));
    let per_writer = 400u64;
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let view = view.clone();
            std::thread::spawn(move || {
                for i in 0..per_writer {
                    let seq = w * per_writer + i;
                    let meta = ChunkMeta::inline(seq, "k", format!("writer {w} item {i}"));
                    assert!(view.insert_vector(vector(seq), meta));
                    if i % 50 == 0 {
                        view.prune(seq).unwrap();
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let view = view.clone();
            let done = writers_done.clone();
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !done.load(Ordering::Relaxed) || rounds < 20 {
                    let q = vector(r * 1000 + rounds);
                    let hits = view.query(&q, 5);
                    // Every hit is complete: its manifest entry exists.
                    for h in &hits {
                        assert!(h.chain_seq < 3 * per_writer);
                        assert_eq!(h.meta.chain_seq, h.chain_seq);
                        assert!(h.meta.inline.is_some());
                    }
                    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
                    let items = view.graft(&q, 3);
                    assert!(items.iter().all(|i| i.state != NodeState::Pruned));
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    writers_done.store(true, Ordering::Relaxed);
    let rounds: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(rounds >= 60);
    assert_eq!(view.len(), 3 * per_writer as usize);
    assert!(view.stats().uses_graph);
    // Every chunk is findable by its own vector once the dust settles.
    for seq in (0..3 * per_writer).step_by(37) {
        assert_eq!(view.query(&vector(seq), 1)[0].chain_seq, seq);
    }
    // Each writer pruned 8 records.
    let stale = view
        .chain_seqs()
        .into_iter()
        .filter(|s| view.state(*s) == Some(NodeState::Stale))
        .count();
    assert_eq!(stale, 24);
}
