//! Retrieval modes and the fusion of vector and lexical result lists.
//!
//! [`RetrievalMode::Hybrid`] runs both searches to [`HybridParams::depth`]
//! and merges them ([`Fusion`]): by default a weighted sum of min-max
//! normalised scores (lexical 1.0, vector 0.25), or weighted reciprocal rank
//! fusion, where a slot ranked `r` (1-based) in a list of weight `w` earns
//! `w / (rrf_k + r)`. Sums are sorted descending, ties by slot, so the order
//! is deterministic. The defaults were tuned on the LoCoMo dev split.

use std::fmt;
use std::str::FromStr;

use super::index::SlotHit;

/// Which index answers a text query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
    /// Embedding similarity only.
    Vector,
    /// BM25 only (no embedding needed).
    Lexical,
    /// Both, fused (the default: best recall on the LoCoMo dev split, see
    /// `docs/BENCHMARKS.md`).
    #[default]
    Hybrid,
}

impl RetrievalMode {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Vector => "vector",
            RetrievalMode::Lexical => "lexical",
            RetrievalMode::Hybrid => "hybrid",
        }
    }

    /// Whether the mode needs a query embedding.
    pub fn needs_vector(self) -> bool {
        !matches!(self, RetrievalMode::Lexical)
    }
}

impl fmt::Display for RetrievalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RetrievalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "vector" => Ok(RetrievalMode::Vector),
            "lexical" => Ok(RetrievalMode::Lexical),
            "hybrid" => Ok(RetrievalMode::Hybrid),
            other => Err(format!(
                "unknown retrieval mode {other:?} (vector, lexical or hybrid)"
            )),
        }
    }
}

/// How hybrid mode merges the two ranked lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Weighted reciprocal rank fusion: `w / (rrf_k + rank)` summed.
    Rrf,
    /// Weighted sum of min-max normalised scores (each list scaled to 0..1
    /// over its own depth; a slot missing from a list scores 0 there). The
    /// default: better than RRF on LoCoMo (`docs/BENCHMARKS.md`).
    #[default]
    Linear,
}

impl FromStr for Fusion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rrf" => Ok(Fusion::Rrf),
            "linear" => Ok(Fusion::Linear),
            other => Err(format!("unknown fusion {other:?} (rrf or linear)")),
        }
    }
}

/// Tuning of hybrid fusion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridParams {
    /// How the lists are merged.
    pub fusion: Fusion,
    /// The RRF rank offset (60 in the original paper).
    pub rrf_k: f32,
    /// Weight of the vector list.
    pub vector_weight: f32,
    /// Weight of the lexical list.
    pub lexical_weight: f32,
    /// How deep each list is read before fusing (at least the requested k).
    pub depth: usize,
}

impl Default for HybridParams {
    fn default() -> Self {
        HybridParams {
            fusion: Fusion::Linear,
            rrf_k: 60.0,
            vector_weight: 0.25,
            lexical_weight: 1.0,
            depth: 100,
        }
    }
}

/// Weighted reciprocal rank fusion of ranked lists; returns every slot that
/// appears in any list, best first.
pub fn rrf(lists: &[(&[SlotHit], f32)], rrf_k: f32) -> Vec<SlotHit> {
    let mut acc: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
    for (list, weight) in lists {
        for (rank, (slot, _)) in list.iter().enumerate() {
            *acc.entry(*slot).or_insert(0.0) += weight / (rrf_k + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<SlotHit> = acc.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Weighted sum of min-max normalised scores; every slot of any list, best first.
pub fn linear(lists: &[(&[SlotHit], f32)]) -> Vec<SlotHit> {
    let mut acc: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
    for (list, weight) in lists {
        let max = list.iter().map(|h| h.1).fold(f32::NEG_INFINITY, f32::max);
        let min = list.iter().map(|h| h.1).fold(f32::INFINITY, f32::min);
        let span = max - min;
        for &(slot, score) in list.iter() {
            let norm = if span > 0.0 {
                (score - min) / span
            } else {
                1.0
            };
            *acc.entry(slot).or_insert(0.0) += weight * norm;
        }
    }
    let mut out: Vec<SlotHit> = acc.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Fuse two lists as `params` says.
pub fn fuse(vector: &[SlotHit], lexical: &[SlotHit], params: &HybridParams) -> Vec<SlotHit> {
    let lists = [
        (vector, params.vector_weight),
        (lexical, params.lexical_weight),
    ];
    match params.fusion {
        Fusion::Rrf => rrf(&lists, params.rrf_k),
        Fusion::Linear => linear(&lists),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_rewards_agreement_and_is_deterministic() {
        let v = [(1, 0.9), (2, 0.8), (3, 0.7)];
        let l = [(3, 9.0), (1, 5.0)];
        let fused = rrf(&[(&v, 1.0), (&l, 1.0)], 60.0);
        assert_eq!(fused.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 3, 2]);
        let only_lex = rrf(&[(&v, 0.0), (&l, 1.0)], 60.0);
        assert_eq!(only_lex[0].0, 3);
        assert_eq!(
            "hybrid".parse::<RetrievalMode>().unwrap(),
            RetrievalMode::Hybrid
        );
        let lin = linear(&[(&v, 1.0), (&l, 1.0)]);
        // 1: 1.0 + 0.0 = 1.0; 3: 0.0 + 1.0 = 1.0; 2: 0.5 + 0 → 1 and 3 tie, slot order.
        assert_eq!(lin.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 3, 2]);
        assert_eq!("linear".parse::<Fusion>().unwrap(), Fusion::Linear);
        assert!("dense".parse::<RetrievalMode>().is_err());
    }
}
