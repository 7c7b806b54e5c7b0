//! The lexical side of retrieval: a BM25 index over chunk texts.
//!
//! Documents are the same *slots* as the vector index (the view inserts into
//! both in lockstep), so results of the two can be fused directly. Scoring is
//! Okapi BM25 with the non-negative IDF `ln(1 + (N − df + 0.5) / (df + 0.5))`
//! and tunable `k1` and `b`; document frequencies and the average length
//! count live documents only. Removal is a tombstone until
//! [`LexicalIndex::compact`].

pub mod tokenize;

use std::collections::HashMap;

pub use tokenize::{Tokenizer, TokenizerConfig};

use super::index::{top_k, SlotHit};

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation (typical 0.9–2.0).
    pub k1: f32,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// Pseudo-relevance feedback (RM3-style query expansion): the terms that
/// weigh most in the first search's best documents are added to the query
/// and the search runs again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrfParams {
    /// Feedback documents (0 = off; default 3).
    pub docs: usize,
    /// Expansion terms added.
    pub terms: usize,
    /// Weight of the strongest expansion term (query terms weigh 1).
    pub weight: f32,
}

impl Default for PrfParams {
    fn default() -> Self {
        PrfParams {
            docs: 3,
            terms: 10,
            weight: 0.3,
        }
    }
}

/// A BM25 inverted index keyed by slot.
#[derive(Debug, Default)]
pub struct LexicalIndex {
    params: Bm25Params,
    vocab: HashMap<String, u32>,
    /// Per term: `(slot, term frequency)`, slots ascending.
    postings: Vec<Vec<(u32, u32)>>,
    /// Per term: number of live documents holding it.
    df: Vec<u32>,
    /// Per slot: its distinct terms and their frequencies (to undo `df` on
    /// removal, and for feedback).
    doc_terms: Vec<Box<[(u32, u32)]>>,
    doc_len: Vec<u32>,
    alive: Vec<bool>,
    live: usize,
    total_len: u64,
}

impl LexicalIndex {
    /// An empty index.
    pub fn new(params: Bm25Params) -> Self {
        LexicalIndex {
            params,
            ..Default::default()
        }
    }

    /// The BM25 parameters.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// Live documents.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no document is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Distinct terms ever seen.
    pub fn vocabulary_size(&self) -> usize {
        self.vocab.len()
    }

    /// Add the next document; its slot is the number of slots so far
    /// (returned), matching the vector index when both are fed together.
    pub fn insert(&mut self, tokens: &[String]) -> u32 {
        let slot = self.alive.len() as u32;
        let mut tf: HashMap<u32, u32> = HashMap::new();
        for t in tokens {
            let next = self.vocab.len() as u32;
            let id = *self.vocab.entry(t.clone()).or_insert(next);
            if id as usize == self.postings.len() {
                self.postings.push(Vec::new());
                self.df.push(0);
            }
            *tf.entry(id).or_insert(0) += 1;
        }
        let mut terms: Vec<(u32, u32)> = tf.into_iter().collect();
        terms.sort_unstable();
        for &(id, n) in &terms {
            self.postings[id as usize].push((slot, n));
            self.df[id as usize] += 1;
        }
        self.doc_terms.push(terms.into_boxed_slice());
        self.doc_len.push(tokens.len() as u32);
        self.alive.push(true);
        self.live += 1;
        self.total_len += tokens.len() as u64;
        slot
    }

    /// Remove a document (tombstone). Returns whether it was live.
    pub fn remove(&mut self, slot: u32) -> bool {
        let s = slot as usize;
        if !self.alive.get(s).copied().unwrap_or(false) {
            return false;
        }
        self.alive[s] = false;
        self.live -= 1;
        self.total_len -= self.doc_len[s] as u64;
        for &(t, _) in self.doc_terms[s].iter() {
            self.df[t as usize] -= 1;
        }
        true
    }

    /// Apply a slot renumbering (from the vector index's compaction): drop
    /// slots mapped to `None`, renumber the rest.
    pub fn compact(&mut self, map: &[Option<u32>]) {
        for list in &mut self.postings {
            list.retain_mut(
                |(slot, _)| match map.get(*slot as usize).copied().flatten() {
                    Some(new) => {
                        *slot = new;
                        true
                    }
                    None => false,
                },
            );
        }
        let keep = |i: usize| map.get(i).copied().flatten().is_some();
        let mut i = 0;
        self.doc_terms.retain(|_| {
            i += 1;
            keep(i - 1)
        });
        i = 0;
        self.doc_len.retain(|_| {
            i += 1;
            keep(i - 1)
        });
        self.alive = vec![true; self.doc_len.len()];
        self.live = self.alive.len();
    }

    fn idf(&self, term: u32) -> f32 {
        let n = self.live as f32;
        let df = self.df[term as usize] as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Distinct known query terms with weight 1.
    fn query_ids(&self, query: &[String]) -> Vec<(u32, f32)> {
        let mut out: Vec<(u32, f32)> = Vec::new();
        for term in query {
            if let Some(&id) = self.vocab.get(term) {
                if !out.iter().any(|(t, _)| *t == id) {
                    out.push((id, 1.0));
                }
            }
        }
        out
    }

    /// Score the live documents `accept` lets through against the query
    /// terms (distinct terms count once) and return the best `k`.
    pub fn search(&self, query: &[String], k: usize, accept: &dyn Fn(u32) -> bool) -> Vec<SlotHit> {
        self.search_weighted(&self.query_ids(query), k, accept)
    }

    /// [`LexicalIndex::search`] with pseudo-relevance feedback.
    pub fn search_prf(
        &self,
        query: &[String],
        k: usize,
        accept: &dyn Fn(u32) -> bool,
        prf: &PrfParams,
    ) -> Vec<SlotHit> {
        let terms = self.query_ids(query);
        if prf.docs == 0 || prf.terms == 0 || terms.is_empty() {
            return self.search_weighted(&terms, k, accept);
        }
        let first = self.search_weighted(&terms, prf.docs, accept);
        let Some(top) = first.first().map(|h| h.1).filter(|s| *s > 0.0) else {
            return first;
        };
        let mut weight: HashMap<u32, f32> = HashMap::new();
        for &(slot, score) in &first {
            let s = slot as usize;
            let len = self.doc_len[s].max(1) as f32;
            for &(t, tf) in self.doc_terms[s].iter() {
                if terms.iter().any(|(q, _)| *q == t) {
                    continue;
                }
                *weight.entry(t).or_insert(0.0) += (score / top) * (tf as f32 / len) * self.idf(t);
            }
        }
        let mut extra: Vec<(u32, f32)> = weight.into_iter().collect();
        extra.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        extra.truncate(prf.terms);
        let max = extra.first().map_or(1.0, |e| e.1).max(f32::MIN_POSITIVE);
        let mut expanded = terms;
        expanded.extend(extra.into_iter().map(|(t, w)| (t, prf.weight * w / max)));
        self.search_weighted(&expanded, k, accept)
    }

    /// BM25 with a weight per query term (by term id).
    fn search_weighted(
        &self,
        query: &[(u32, f32)],
        k: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<SlotHit> {
        if k == 0 || self.live == 0 {
            return Vec::new();
        }
        let avgdl = (self.total_len as f32 / self.live as f32).max(1.0);
        let Bm25Params { k1, b } = self.params;
        let mut scores = vec![0.0f32; self.alive.len()];
        let mut touched: Vec<u32> = Vec::new();
        for &(id, qw) in query {
            if self.df[id as usize] == 0 {
                continue;
            }
            let idf = self.idf(id) * qw;
            for &(slot, tf) in &self.postings[id as usize] {
                let s = slot as usize;
                if !self.alive[s] {
                    continue;
                }
                let tf = tf as f32;
                let norm = k1 * (1.0 - b + b * self.doc_len[s] as f32 / avgdl);
                if scores[s] == 0.0 {
                    touched.push(slot);
                }
                scores[s] += idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
        top_k(
            touched
                .into_iter()
                .filter(|&s| accept(s))
                .map(|s| (s, scores[s as usize])),
            k,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        Tokenizer::new(TokenizerConfig::default()).tokens(s)
    }

    #[test]
    fn rarer_terms_weigh_more_and_removal_updates_statistics() {
        let mut ix = LexicalIndex::new(Bm25Params::default());
        let a = ix.insert(&toks("the cat sat on the mat"));
        let b = ix.insert(&toks("the dog sat on the log"));
        let c = ix.insert(&toks("a cat and a dog"));
        let hits = ix.search(&toks("cat mat"), 3, &|_| true);
        assert_eq!(hits[0].0, a);
        assert_eq!(hits[1].0, c);
        assert_eq!(
            hits.len(),
            2,
            "documents without a query term are not returned"
        );
        assert!(ix.remove(a));
        let hits = ix.search(&toks("cat"), 3, &|_| true);
        assert_eq!(hits, vec![(c, hits[0].1)]);
        ix.compact(&[None, Some(0), Some(1)]);
        let hits = ix.search(&toks("dog"), 3, &|_| true);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 0]);
        let _ = b;
    }
}
