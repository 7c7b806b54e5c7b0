//! The vector index behind a session view: exact search while a session is
//! small, an HNSW graph once it is large.
//!
//! Vectors live in one contiguous row-major `Vec<f32>` of unit vectors, one
//! row per *slot*; slots are handed out in insertion order and never reused
//! until [`VectorIndex::compact`]. Below [`IndexConfig::hnsw_threshold`] live
//! rows a query is an exact scan (SIMD dot products, [`crate::simd`]); when the
//! session grows past it the graph ([`hnsw`]) is built over every row and
//! kept up to date on each later insert. Removal is a tombstone: the row stays
//! (as a graph waypoint) but is never returned; `compact` drops dead rows and
//! rebuilds. Everything is deterministic: same inserts, same answers.

pub mod hnsw;
pub mod quant;

use crate::simd::Kernel;
use hnsw::{Hnsw, HnswParams, Rows};
use quant::Codes;

/// Tuning of a [`VectorIndex`]. The defaults come from the `view` bench
/// (`docs/BENCHMARKS.md`): the exact scan stays exact and under a
/// millisecond up to 10,000 rows of 384 dims; above, the graph with M = 16,
/// ef_construction = 128 and ef = 96 kept recall@10 ≥ 0.99 at every size
/// measured (up to 100,000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexConfig {
    /// Live rows at which the HNSW graph is built (exact scan below; default 10,000).
    pub hnsw_threshold: usize,
    /// Graph construction parameters.
    pub hnsw: HnswParams,
    /// Candidate list size of a graph query (at least `k` is used).
    pub ef_search: usize,
    /// Walk the graph on int8 codes of the rows (`quant.rs`; a quarter of
    /// the bytes per visited node, a quarter more memory), re-scoring the
    /// final list with the f32 rows. Default on; the exact scan never uses
    /// them.
    pub quantized: bool,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            hnsw_threshold: 10_000,
            hnsw: HnswParams::default(),
            ef_search: 96,
            quantized: true,
        }
    }
}

/// One result: a slot and its cosine similarity to the query.
pub type SlotHit = (u32, f32);

/// Exact + HNSW vector index over unit vectors (see the module docs).
#[derive(Debug)]
pub struct VectorIndex {
    dims: usize,
    kernel: Kernel,
    config: IndexConfig,
    data: Vec<f32>,
    alive: Vec<bool>,
    live: usize,
    graph: Option<Hnsw>,
    /// The rows' int8 codes, kept while there is a graph and
    /// `config.quantized` is set.
    codes: Option<Codes>,
}

/// Scale `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

impl VectorIndex {
    /// An empty index for `dims`-wide vectors.
    pub fn new(dims: usize, config: IndexConfig) -> Self {
        VectorIndex {
            dims,
            kernel: Kernel::detect(),
            config,
            data: Vec::new(),
            alive: Vec::new(),
            live: 0,
            graph: None,
            codes: None,
        }
    }

    /// The vector width.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The configuration.
    pub fn config(&self) -> IndexConfig {
        self.config
    }

    /// Change the query-time list size of the graph.
    pub fn set_ef_search(&mut self, ef: usize) {
        self.config.ef_search = ef.max(1);
    }

    /// Walk the graph on int8 codes (`true`) or on the f32 rows; codes are
    /// computed (or dropped) now.
    pub fn set_quantized(&mut self, quantized: bool) {
        self.config.quantized = quantized;
        self.codes =
            (quantized && self.graph.is_some()).then(|| Codes::of_matrix(&self.data, self.dims));
    }

    /// Live (not removed) rows.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no row is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Slots handed out, live or dead.
    pub fn slots(&self) -> usize {
        self.alive.len()
    }

    /// Whether queries go through the HNSW graph.
    pub fn uses_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// Whether `slot` holds a live row.
    pub fn is_live(&self, slot: u32) -> bool {
        self.alive.get(slot as usize).copied().unwrap_or(false)
    }

    /// The stored (unit) vector of a live slot.
    pub fn vector(&self, slot: u32) -> Option<&[f32]> {
        if !self.is_live(slot) {
            return None;
        }
        let s = slot as usize * self.dims;
        self.data.get(s..s + self.dims)
    }

    fn rows(&self) -> Rows<'_> {
        Rows {
            data: &self.data,
            dims: self.dims,
            kernel: self.kernel,
        }
    }

    /// Add a vector (normalised on the way in); returns its slot, or `None`
    /// when its width is not [`VectorIndex::dims`] (nothing changes then).
    pub fn insert(&mut self, vector: &[f32]) -> Option<u32> {
        if vector.len() != self.dims || self.dims == 0 {
            return None;
        }
        let slot = u32::try_from(self.alive.len()).ok()?;
        let start = self.data.len();
        self.data.extend_from_slice(vector);
        normalize(&mut self.data[start..]);
        self.alive.push(true);
        self.live += 1;
        if self.graph.is_some() {
            let rows = Rows {
                data: &self.data,
                dims: self.dims,
                kernel: self.kernel,
            };
            if let Some(g) = self.graph.as_mut() {
                g.insert(&rows);
            }
            if let Some(codes) = self.codes.as_mut() {
                codes.push(&self.data[start..]);
            }
        } else if self.live >= self.config.hnsw_threshold {
            self.build_graph();
        }
        Some(slot)
    }

    /// Build the graph over every slot now (normally done at the threshold).
    pub fn build_graph(&mut self) {
        let mut g = Hnsw::new(self.config.hnsw);
        let rows = Rows {
            data: &self.data,
            dims: self.dims,
            kernel: self.kernel,
        };
        for _ in 0..self.alive.len() {
            g.insert(&rows);
        }
        self.graph = Some(g);
        self.codes = self
            .config
            .quantized
            .then(|| Codes::of_matrix(&self.data, self.dims));
    }

    /// Remove a row (tombstone). Returns whether it was live.
    pub fn remove(&mut self, slot: u32) -> bool {
        match self.alive.get_mut(slot as usize) {
            Some(a) if *a => {
                *a = false;
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    /// Dead rows outnumber live ones (and there are enough to bother): time
    /// to [`VectorIndex::compact`].
    pub fn needs_compaction(&self) -> bool {
        let dead = self.alive.len() - self.live;
        dead > 256 && dead > self.live
    }

    /// Drop dead rows and renumber the live ones in order; rebuilds the graph
    /// when the index still needs one. Returns the old-slot → new-slot map
    /// (`None` for dropped slots).
    pub fn compact(&mut self) -> Vec<Option<u32>> {
        let mut map = Vec::with_capacity(self.alive.len());
        let mut data = Vec::with_capacity(self.live * self.dims);
        let mut next = 0u32;
        for (slot, &alive) in self.alive.iter().enumerate() {
            if alive {
                let s = slot * self.dims;
                data.extend_from_slice(&self.data[s..s + self.dims]);
                map.push(Some(next));
                next += 1;
            } else {
                map.push(None);
            }
        }
        self.data = data;
        self.alive = vec![true; self.live];
        self.graph = None;
        self.codes = None;
        if self.live >= self.config.hnsw_threshold {
            self.build_graph();
        }
        map
    }

    /// The `k` live rows most similar to `query` that `accept` lets through,
    /// best first (ties by slot). A wrong-width query returns nothing.
    pub fn search(&self, query: &[f32], k: usize, accept: &dyn Fn(u32) -> bool) -> Vec<SlotHit> {
        if query.len() != self.dims || k == 0 || self.live == 0 {
            return Vec::new();
        }
        let mut q = query.to_vec();
        normalize(&mut q);
        match &self.graph {
            Some(g) => {
                let alive = &self.alive;
                let ok = |i: u32| alive[i as usize] && accept(i);
                let codes = self.codes.as_ref().filter(|_| self.config.quantized);
                g.search(&self.rows(), codes, &q, k, self.config.ef_search, &ok)
                    .into_iter()
                    .map(|(d, i)| (i, 1.0 - d))
                    .collect()
            }
            None => self.search_exact_normalized(&q, k, accept),
        }
    }

    /// Exact search whatever the size (the reference for recall).
    pub fn search_exact(
        &self,
        query: &[f32],
        k: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<SlotHit> {
        if query.len() != self.dims || k == 0 {
            return Vec::new();
        }
        let mut q = query.to_vec();
        normalize(&mut q);
        self.search_exact_normalized(&q, k, accept)
    }

    fn search_exact_normalized(
        &self,
        q: &[f32],
        k: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<SlotHit> {
        let mut scores = Vec::new();
        self.kernel.scores(q, &self.data, self.dims, &mut scores);
        top_k(
            scores
                .iter()
                .enumerate()
                .filter(|(i, _)| self.alive[*i] && accept(*i as u32))
                .map(|(i, &s)| (i as u32, s)),
            k,
        )
    }
}

/// The `k` best `(slot, score)` pairs, best first, ties broken by slot.
pub fn top_k(items: impl Iterator<Item = SlotHit>, k: usize) -> Vec<SlotHit> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    #[derive(PartialEq)]
    struct Entry(f32, u32);
    impl Eq for Entry {}
    impl PartialOrd for Entry {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Entry {
        // "Greater" = better: higher score, then lower slot.
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
        }
    }
    if k == 0 {
        return Vec::new();
    }
    let mut heap: BinaryHeap<Reverse<Entry>> = BinaryHeap::with_capacity(k + 1);
    for (slot, score) in items {
        let e = Entry(score, slot);
        if heap.len() < k {
            heap.push(Reverse(e));
        } else if heap.peek().is_some_and(|w| e > w.0) {
            heap.pop();
            heap.push(Reverse(e));
        }
    }
    let mut out: Vec<SlotHit> = heap.into_iter().map(|Reverse(e)| (e.1, e.0)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(dims: usize, i: usize) -> Vec<f32> {
        let mut v = vec![0.01; dims];
        v[i] = 1.0;
        v
    }

    #[test]
    fn exact_search_orders_and_filters() {
        let mut ix = VectorIndex::new(4, IndexConfig::default());
        assert_eq!(ix.insert(&[1.0, 0.0]), None, "wrong width refused");
        assert!(ix.is_empty());
        let a = ix.insert(&axis(4, 0)).unwrap();
        let b = ix.insert(&axis(4, 1)).unwrap();
        let hits = ix.search(&axis(4, 0), 2, &|_| true);
        assert_eq!(hits[0].0, a);
        assert_eq!(hits[1].0, b);
        assert!(
            (hits[0].1 - 1.0).abs() < 1e-5,
            "stored vectors are normalised"
        );
        assert_eq!(ix.search(&axis(4, 0), 2, &|s| s != a)[0].0, b);
        assert!(ix.remove(a));
        assert!(!ix.remove(a));
        assert_eq!(ix.search(&axis(4, 0), 2, &|_| true).len(), 1);
        let map = ix.compact();
        assert_eq!(map, vec![None, Some(0)]);
        assert_eq!(ix.search(&axis(4, 1), 1, &|_| true)[0].0, 0);
    }

    #[test]
    fn top_k_breaks_ties_by_slot() {
        let got = top_k([(5, 1.0), (2, 1.0), (9, 0.5), (1, 2.0)].into_iter(), 3);
        assert_eq!(got, vec![(1, 2.0), (2, 1.0), (5, 1.0)]);
    }
}
