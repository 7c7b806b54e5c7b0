//! A deterministic HNSW graph (Malkov & Yashunin, "Efficient and robust
//! approximate nearest neighbor search using Hierarchical Navigable Small
//! World graphs") over the rows of a [`Rows`] matrix of unit vectors.
//!
//! The graph stores only links; the vectors stay in the owning index's
//! contiguous matrix, and node `i` is row `i`. Layer 0 links sit in one flat
//! array (`m0 + 1` words per node: count, then neighbours) for locality; the
//! few nodes on upper layers keep theirs in a small per-node array.
//!
//! Determinism: a node's level is a pure function of a fixed seed and its row
//! number (SplitMix64), and construction is sequential, so the same rows
//! inserted in the same order always give the same graph and the same
//! answers. Deletion is by tombstone in the owner: removed rows stay in the
//! graph as waypoints and the search's `accept` predicate keeps them out of
//! results.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Mutex;

use super::quant::{Codes, Query};
use crate::simd::Kernel;

/// Highest level a node can get (a cap against pathological seeds).
const MAX_LEVEL: usize = 16;

/// The rows the graph indexes: a contiguous matrix of `dims`-wide unit vectors.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// Row-major vectors.
    pub data: &'a [f32],
    /// Width of a row.
    pub dims: usize,
    /// The dot-product kernel.
    pub kernel: Kernel,
}

impl<'a> Rows<'a> {
    /// Start loading all of row `i` into cache (the next row to score).
    #[inline]
    fn prefetch(&self, i: u32) {
        let lines = (self.dims * 4).div_ceil(64);
        crate::simd::prefetch(
            self.data.as_ptr().wrapping_add(i as usize * self.dims),
            lines,
        );
    }

    /// Start loading the first cache lines of row `i` (a row scored soon).
    #[inline]
    fn prefetch_head(&self, i: u32) {
        crate::simd::prefetch(self.data.as_ptr().wrapping_add(i as usize * self.dims), 2);
    }

    #[inline]
    fn row(&self, i: u32) -> &'a [f32] {
        let start = i as usize * self.dims;
        &self.data[start..start + self.dims]
    }

    /// Distance between a query and row `i` (1 − cosine for unit vectors).
    #[inline]
    fn dist(&self, q: &[f32], i: u32) -> f32 {
        1.0 - self.kernel.dot(q, self.row(i))
    }
}

/// How far each node is from the vector being searched for, and how to get
/// a node's data into cache ahead of that: the f32 rows ([`Exact`], used to
/// build the graph and for every final score) or their int8 codes
/// ([`Coded`], a quicker walk).
trait Distance {
    /// The distance of node `i` (smaller is closer).
    fn to(&self, i: u32) -> f32;
    /// Start loading all of node `i`'s data (the next node to score).
    fn prefetch(&self, i: u32);
    /// Start loading the head of node `i`'s data (a node scored soon).
    fn prefetch_head(&self, i: u32);
}

/// Exact distances from a query to the f32 rows.
struct Exact<'r, 'q> {
    rows: &'r Rows<'r>,
    q: &'q [f32],
}

impl Distance for Exact<'_, '_> {
    #[inline]
    fn to(&self, i: u32) -> f32 {
        self.rows.dist(self.q, i)
    }
    #[inline]
    fn prefetch(&self, i: u32) {
        self.rows.prefetch(i);
    }
    #[inline]
    fn prefetch_head(&self, i: u32) {
        self.rows.prefetch_head(i);
    }
}

/// Approximate distances from an encoded query to the rows' int8 codes.
struct Coded<'c, 'q> {
    codes: &'c Codes,
    q: &'q Query,
    kernel: Kernel,
}

impl Distance for Coded<'_, '_> {
    #[inline]
    fn to(&self, i: u32) -> f32 {
        1.0 - self.codes.dot(self.kernel, self.q, i)
    }
    #[inline]
    fn prefetch(&self, i: u32) {
        self.codes.prefetch(i);
    }
    #[inline]
    fn prefetch_head(&self, i: u32) {
        self.codes.prefetch(i);
    }
}

/// Construction parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Links per node on upper layers (layer 0 gets `2 * m`).
    pub m: usize,
    /// Candidate list size while inserting.
    pub ef_construction: usize,
    /// Seed of the level generator (fixed: results never depend on chance).
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 128,
            seed: 0x6d65_6d6f_6972_0001,
        }
    }
}

/// A float with a total order, for heaps.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Dist(f32);
impl Eq for Dist {}
impl PartialOrd for Dist {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Dist {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Per-search visited marks with a generation counter (no clearing per query).
#[derive(Debug, Default)]
struct Visited {
    marks: Vec<u16>,
    epoch: u16,
    /// Scratch list of a node's unvisited neighbours (reused across searches).
    fresh: Vec<u32>,
}

impl Visited {
    fn reset(&mut self, n: usize) {
        if self.marks.len() < n {
            self.marks.resize(n, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
    }

    /// Mark `i`; true when it was not marked yet in this search.
    #[inline]
    fn insert(&mut self, i: u32) -> bool {
        let slot = &mut self.marks[i as usize];
        if *slot == self.epoch {
            false
        } else {
            *slot = self.epoch;
            true
        }
    }
}

/// The graph.
#[derive(Debug)]
pub struct Hnsw {
    params: HnswParams,
    m0: usize,
    ml: f64,
    levels: Vec<u8>,
    /// Layer 0: `m0 + 1` words per node (count, then links).
    links0: Vec<u32>,
    /// Layers 1..=level of each node: `m + 1` words per layer.
    upper: Vec<Box<[u32]>>,
    entry: u32,
    max_level: usize,
    pool: Mutex<Vec<Visited>>,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Hnsw {
    /// An empty graph.
    pub fn new(params: HnswParams) -> Self {
        let m = params.m.max(2);
        Hnsw {
            params: HnswParams { m, ..params },
            m0: 2 * m,
            ml: 1.0 / (m as f64).ln(),
            levels: Vec::new(),
            links0: Vec::new(),
            upper: Vec::new(),
            entry: 0,
            max_level: 0,
            pool: Mutex::new(Vec::new()),
        }
    }

    /// Number of nodes (rows `0..len` are in the graph).
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// True when the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The construction parameters.
    pub fn params(&self) -> HnswParams {
        self.params
    }

    fn level_for(&self, node: u32) -> usize {
        let r = splitmix64(self.params.seed ^ splitmix64(node as u64));
        // Uniform in (0, 1]: never ln(0).
        let u = ((r >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * self.ml) as usize).min(MAX_LEVEL)
    }

    #[inline]
    fn links(&self, node: u32, level: usize) -> &[u32] {
        if level == 0 {
            let base = node as usize * (self.m0 + 1);
            let n = self.links0[base] as usize;
            &self.links0[base + 1..base + 1 + n]
        } else {
            let stride = self.params.m + 1;
            let block = &self.upper[node as usize];
            let base = (level - 1) * stride;
            let n = block[base] as usize;
            &block[base + 1..base + 1 + n]
        }
    }

    fn set_links(&mut self, node: u32, level: usize, links: &[u32]) {
        let (slot, cap) = if level == 0 {
            let base = node as usize * (self.m0 + 1);
            (&mut self.links0[base..base + self.m0 + 1], self.m0)
        } else {
            let stride = self.params.m + 1;
            let base = (level - 1) * stride;
            (
                &mut self.upper[node as usize][base..base + stride],
                self.params.m,
            )
        };
        let n = links.len().min(cap);
        slot[0] = n as u32;
        slot[1..1 + n].copy_from_slice(&links[..n]);
    }

    fn take_visited(&self, n: usize) -> Visited {
        let mut v = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        v.reset(n);
        v
    }

    fn give_visited(&self, v: Visited) {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }

    /// Greedy descent on one layer: the closest node reachable from `start`.
    fn greedy<D: Distance>(
        &self,
        dist: &D,
        mut cur: u32,
        mut cur_d: f32,
        level: usize,
    ) -> (u32, f32) {
        loop {
            let mut changed = false;
            for &n in self.links(cur, level) {
                let d = dist.to(n);
                if d < cur_d || (d == cur_d && n < cur) {
                    cur = n;
                    cur_d = d;
                    changed = true;
                }
            }
            if !changed {
                return (cur, cur_d);
            }
        }
    }

    /// Best-first search of one layer. Returns up to `ef` accepted nodes,
    /// closest first. Rejected nodes are still walked through.
    fn search_layer<D: Distance>(
        &self,
        dist: &D,
        entries: &[(f32, u32)],
        ef: usize,
        level: usize,
        visited: &mut Visited,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<(f32, u32)> {
        let mut cand: BinaryHeap<Reverse<(Dist, u32)>> = BinaryHeap::with_capacity(ef * 2);
        let mut top: BinaryHeap<(Dist, u32)> = BinaryHeap::with_capacity(ef + 1);
        for &(d, e) in entries {
            if visited.insert(e) {
                cand.push(Reverse((Dist(d), e)));
                if accept(e) {
                    top.push((Dist(d), e));
                    if top.len() > ef {
                        top.pop();
                    }
                }
            }
        }
        let mut bound = if top.len() >= ef {
            top.peek().map_or(f32::INFINITY, |t| t.0 .0)
        } else {
            f32::INFINITY
        };
        // Neighbours not seen yet, gathered before any distance is computed
        // so that all their rows are being fetched from memory at once
        // (hnswlib's pattern: the graph walk is bound by memory latency).
        let mut fresh: Vec<u32> = std::mem::take(&mut visited.fresh);
        while let Some(Reverse((Dist(d), c))) = cand.pop() {
            if d > bound {
                break;
            }
            fresh.clear();
            for &n in self.links(c, level) {
                if visited.insert(n) {
                    dist.prefetch_head(n);
                    fresh.push(n);
                }
            }
            for (j, &n) in fresh.iter().enumerate() {
                if let Some(&next) = fresh.get(j + 1) {
                    dist.prefetch(next);
                }
                let dn = dist.to(n);
                if top.len() < ef || dn < bound {
                    cand.push(Reverse((Dist(dn), n)));
                    if accept(n) {
                        top.push((Dist(dn), n));
                        if top.len() > ef {
                            top.pop();
                        }
                        if top.len() >= ef {
                            bound = top.peek().map_or(f32::INFINITY, |t| t.0 .0);
                        }
                    }
                }
            }
        }
        visited.fresh = fresh;
        let mut out: Vec<(f32, u32)> = top.into_iter().map(|(d, i)| (d.0, i)).collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out
    }

    /// The neighbour-selection heuristic: keep a candidate only when it is
    /// closer to the base than to every neighbour already kept.
    fn select(&self, rows: &Rows, sorted: &[(f32, u32)], m: usize) -> Vec<u32> {
        let mut kept: Vec<u32> = Vec::with_capacity(m);
        for &(d, c) in sorted {
            if kept.len() >= m {
                break;
            }
            let cv = rows.row(c);
            if kept.iter().all(|&k| rows.dist(cv, k) >= d) {
                kept.push(c);
            }
        }
        kept
    }

    fn connect(&mut self, rows: &Rows, node: u32, new: u32, level: usize) {
        let cap = if level == 0 { self.m0 } else { self.params.m };
        let current = self.links(node, level);
        if current.contains(&new) {
            return;
        }
        if current.len() < cap {
            let mut v = current.to_vec();
            v.push(new);
            self.set_links(node, level, &v);
            return;
        }
        let base = rows.row(node);
        let mut cands: Vec<(f32, u32)> = current
            .iter()
            .chain(std::iter::once(&new))
            .map(|&c| (rows.dist(base, c), c))
            .collect();
        cands.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let kept = self.select(rows, &cands, cap);
        self.set_links(node, level, &kept);
    }

    /// Add the next row (`rows` must hold at least `len() + 1` rows).
    pub fn insert(&mut self, rows: &Rows) {
        let node = self.levels.len() as u32;
        let level = self.level_for(node);
        self.levels.push(level as u8);
        self.links0.extend(std::iter::repeat_n(0, self.m0 + 1));
        self.upper
            .push(vec![0u32; level * (self.params.m + 1)].into_boxed_slice());
        if node == 0 {
            self.entry = 0;
            self.max_level = level;
            return;
        }
        let q = rows.row(node);
        let exact = Exact { rows, q };
        let mut ep = self.entry;
        let mut ep_d = exact.to(ep);
        for l in (level + 1..=self.max_level).rev() {
            (ep, ep_d) = self.greedy(&exact, ep, ep_d, l);
        }
        let mut visited = self.take_visited(self.levels.len());
        let mut entries = vec![(ep_d, ep)];
        let all = |_: u32| true;
        for l in (0..=level.min(self.max_level)).rev() {
            visited.reset(self.levels.len());
            let found = self.search_layer(
                &exact,
                &entries,
                self.params.ef_construction,
                l,
                &mut visited,
                &all,
            );
            let found: Vec<(f32, u32)> = found.into_iter().filter(|&(_, i)| i != node).collect();
            let chosen = self.select(rows, &found, self.params.m);
            self.set_links(node, l, &chosen);
            for &n in &chosen {
                self.connect(rows, n, node, l);
            }
            if !found.is_empty() {
                entries = found;
            }
        }
        self.give_visited(visited);
        if level > self.max_level {
            self.max_level = level;
            self.entry = node;
        }
    }

    /// The `k` accepted nodes nearest to `q` (searching with list size
    /// `max(ef, k)`), as `(distance, node)` closest first.
    ///
    /// With `codes` (the int8 codes of the same rows, see `quant.rs`) the
    /// walk scores nodes by their codes and the final list is re-scored
    /// with the f32 rows: every distance returned is exact either way.
    pub fn search(
        &self,
        rows: &Rows,
        codes: Option<&Codes>,
        q: &[f32],
        k: usize,
        ef: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<(f32, u32)> {
        if self.levels.is_empty() || k == 0 {
            return Vec::new();
        }
        match codes.filter(|c| c.len() >= self.levels.len()) {
            Some(codes) => {
                let query = Query::new(q);
                let coded = Coded {
                    codes,
                    q: &query,
                    kernel: rows.kernel,
                };
                let mut out = self.walk(&coded, ef.max(k), accept);
                for hit in &mut out {
                    hit.0 = rows.dist(q, hit.1);
                }
                out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                out.truncate(k);
                out
            }
            None => {
                let mut out = self.walk(&Exact { rows, q }, ef.max(k), accept);
                out.truncate(k);
                out
            }
        }
    }

    /// Descend the upper layers greedily, then search layer 0 with list
    /// size `ef`.
    fn walk<D: Distance>(
        &self,
        dist: &D,
        ef: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<(f32, u32)> {
        let mut ep = self.entry;
        let mut ep_d = dist.to(ep);
        for l in (1..=self.max_level).rev() {
            (ep, ep_d) = self.greedy(dist, ep, ep_d, l);
        }
        let mut visited = self.take_visited(self.levels.len());
        let out = self.search_layer(dist, &[(ep_d, ep)], ef, 0, &mut visited, accept);
        self.give_visited(visited);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_rows(n: usize, dims: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut out = Vec::with_capacity(n * dims);
        for _ in 0..n {
            let row: Vec<f32> = (0..dims)
                .map(|_| {
                    s = splitmix64(s);
                    (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            out.extend(row.iter().map(|x| x / norm));
        }
        out
    }

    #[test]
    fn finds_every_node_itself_and_is_deterministic() {
        let dims = 16;
        let data = unit_rows(600, dims, 3);
        let rows = Rows {
            data: &data,
            dims,
            kernel: Kernel::detect(),
        };
        let mut a = Hnsw::new(HnswParams::default());
        let mut b = Hnsw::new(HnswParams::default());
        for _ in 0..600 {
            a.insert(&rows);
            b.insert(&rows);
        }
        assert_eq!(a.links0, b.links0);
        assert_eq!(a.levels, b.levels);
        for i in (0..600).step_by(7) {
            let q = rows.row(i);
            let hits = a.search(&rows, None, q, 1, 32, &|_| true);
            assert_eq!(hits[0].1, i);
        }
        let hits = a.search(&rows, None, rows.row(5), 3, 32, &|n| n != 5);
        assert!(hits.iter().all(|h| h.1 != 5));
        assert_eq!(hits.len(), 3);
    }

    /// Recall@10 of `graph` against an exact scan, over `queries`.
    fn recall(rows: &Rows, codes: Option<&Codes>, graph: &Hnsw, queries: &[f32], ef: usize) -> f64 {
        let mut found = 0;
        let mut total = 0;
        for q in queries.chunks_exact(rows.dims) {
            let mut exact: Vec<(f32, u32)> = (0..graph.len() as u32)
                .map(|i| (rows.dist(q, i), i))
                .collect();
            exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let want: Vec<u32> = exact[..10].iter().map(|e| e.1).collect();
            let got = graph.search(rows, codes, q, 10, ef, &|_| true);
            // Every distance returned is the exact one, whatever the walk used.
            for &(d, i) in &got {
                assert_eq!(d, rows.dist(q, i), "node {i}");
            }
            assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "closest first");
            found += got.iter().filter(|h| want.contains(&h.1)).count();
            total += 10;
        }
        found as f64 / total as f64
    }

    #[test]
    fn the_int8_walk_keeps_recall_and_answers_exact_distances() {
        let dims = 64;
        let n = 3000;
        let data = unit_rows(n, dims, 9);
        let rows = Rows {
            data: &data,
            dims,
            kernel: Kernel::detect(),
        };
        let mut g = Hnsw::new(HnswParams::default());
        for _ in 0..n {
            g.insert(&rows);
        }
        let codes = Codes::of_matrix(&data, dims);
        let queries = unit_rows(100, dims, 77);
        let exact_walk = recall(&rows, None, &g, &queries, 64);
        let coded_walk = recall(&rows, Some(&codes), &g, &queries, 64);
        assert!(exact_walk > 0.9, "f32 walk recall {exact_walk}");
        assert!(
            coded_walk >= exact_walk - 0.02,
            "int8 walk recall {coded_walk} vs f32 {exact_walk}"
        );
        // Codes that do not cover the graph are not used (a stale cache).
        let short = Codes::of_matrix(&data[..dims * 10], dims);
        assert_eq!(
            g.search(&rows, Some(&short), &queries[..dims], 10, 64, &|_| true),
            g.search(&rows, None, &queries[..dims], 10, 64, &|_| true)
        );
    }
}
