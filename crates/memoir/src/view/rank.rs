//! Ranking by the whole query's evidence: the one ranking of the
//! cross-session search (`crate::search`: both engines, and every front
//! over it: `memoir search`, MCP `search_sessions`, `POST /v1/search`),
//! and the one place its weights live ([`RankWeights`]). The per-session
//! view's recall ([`super::SessionView`]) still ranks by its own BM25 and
//! rank fusion ([`super::retrieve`]).
//!
//! A hit's score has three lexical parts and one semantic part, each in
//! 0..=1 and weighed by [`RankWeights`]:
//!
//! - **coverage**: how much of the query the message holds: the mean of
//!   the share of distinct query terms it holds and the share of their IDF
//!   (so a message holding every word of an error text beats one holding its
//!   rarest word alone);
//! - **proximity**: how close consecutive query terms stand in it (1 for
//!   each pair adjacent and in order, as in a phrase, less as they drift
//!   apart, nothing past [`NEAR`] terms);
//! - **bm25**: its BM25 over the candidates' best (term frequency and
//!   length);
//! - **semantic**: its embedding similarity over the candidates' best
//!   (hybrid only; a negative similarity counts as none).
//!
//! A message holding every query term (a full lexical match) gets a tier
//! bonus larger than all the other parts together, so semantic evidence can
//! lift a partial match among partial matches, never above a full match.
//! A candidate with no evidence at all (no term, no positive similarity) is
//! not a hit. Equal scores are broken by recency (the callers' sort).

use std::collections::HashMap;

/// Weights of the parts of a score: the one place fusion is tuned (per
/// embedder, when one needs its own).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankWeights {
    /// Share of the query's terms (by count and by IDF) the message holds.
    pub coverage: f32,
    /// Closeness of consecutive query terms in the message.
    pub proximity: f32,
    /// BM25, normalised by the best candidate's.
    pub bm25: f32,
    /// Embedding similarity, normalised by the best candidate's.
    pub semantic: f32,
    /// Factor on a tool output's score (below a full-match tier it cannot
    /// leave): large outputs hold many words, and prose that says the same
    /// should come first.
    pub tool_output: f32,
}

impl Default for RankWeights {
    fn default() -> Self {
        RankWeights {
            coverage: 0.5,
            proximity: 0.25,
            bm25: 0.25,
            semantic: 0.3,
            tool_output: 0.8,
        }
    }
}

impl RankWeights {
    /// The bonus of a full lexical match: more than every other part can add.
    pub fn full_match_bonus(&self) -> f32 {
        self.coverage.max(0.0)
            + self.proximity.max(0.0)
            + self.bm25.max(0.0)
            + self.semantic.max(0.0)
    }
}

/// Query terms further apart than this (in terms) earn no proximity.
pub const NEAR: usize = 8;

/// At most this many positions of one term are kept per message (a term
/// repeated thousands of times in a tool output costs no more).
const MAX_POSITIONS: usize = 256;

/// What the query's terms find in one message.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Evidence {
    /// Distinct query terms the message holds.
    pub matched: usize,
    /// Distinct query terms (that the index knows).
    pub total: usize,
    /// 0..=1, see the module doc.
    pub coverage: f32,
    /// 0..=1, see the module doc.
    pub proximity: f32,
}

impl Evidence {
    /// Whether the message holds every query term.
    pub fn full(&self) -> bool {
        self.total > 0 && self.matched == self.total
    }
}

/// The evidence of `query` (distinct terms in query order, each with its
/// IDF) in a message whose terms are `doc`, in order.
pub fn evidence<'a>(query: &[(String, f32)], doc: impl IntoIterator<Item = &'a str>) -> Evidence {
    if query.is_empty() {
        return Evidence::default();
    }
    let slot: HashMap<&str, usize> = query
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (t.as_str(), i))
        .collect();
    let mut positions: Vec<Vec<usize>> = vec![Vec::new(); query.len()];
    for (at, term) in doc.into_iter().enumerate() {
        if let Some(&i) = slot.get(term) {
            if positions[i].len() < MAX_POSITIONS {
                positions[i].push(at);
            }
        }
    }
    let matched = positions.iter().filter(|p| !p.is_empty()).count();
    let idf_all: f32 = query.iter().map(|(_, w)| w.max(0.0)).sum();
    let idf_held: f32 = query
        .iter()
        .zip(&positions)
        .filter(|(_, p)| !p.is_empty())
        .map(|((_, w), _)| w.max(0.0))
        .sum();
    let by_count = matched as f32 / query.len() as f32;
    let by_idf = if idf_all > 0.0 {
        idf_held / idf_all
    } else {
        by_count
    };
    let proximity = if query.len() < 2 {
        0.0
    } else {
        let pairs = query.len() - 1;
        let sum: f32 = positions.windows(2).map(|w| pair(&w[0], &w[1])).sum();
        sum / pairs as f32
    };
    Evidence {
        matched,
        total: query.len(),
        coverage: (by_count + by_idf) / 2.0,
        proximity,
    }
}

/// How close the nearest occurrences of two terms are: 1 adjacent in
/// order, 0.5 adjacent reversed, then falling with the distance, 0 past
/// [`NEAR`] or when either is missing. Both lists ascend.
fn pair(a: &[usize], b: &[usize]) -> f32 {
    let (mut i, mut j) = (0, 0);
    let mut best = 0.0f32;
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        let d = x.abs_diff(y);
        if d > 0 && d <= NEAR {
            let closeness = 1.0 / d as f32;
            let s = if y > x { closeness } else { closeness * 0.5 };
            best = best.max(s);
        }
        if x < y {
            i += 1;
        } else {
            j += 1;
        }
    }
    best
}

/// One candidate's score from its evidence, its BM25 over the best
/// candidate's (`bm25`, 0..=1) and, in hybrid ranking, its similarity over
/// the best candidate's (`semantic`, 0..=1); a tool output's is then
/// scaled by [`RankWeights::tool_output`] within its tier. `None`: no
/// evidence, not a hit.
pub fn score_of(
    e: &Evidence,
    bm25: f32,
    semantic: Option<f32>,
    tool_output: bool,
    w: &RankWeights,
) -> Option<f32> {
    let s = score(e, bm25, semantic, w)?;
    if !tool_output {
        return Some(s);
    }
    let tier = if e.full() { w.full_match_bonus() } else { 0.0 };
    Some(tier + (s - tier) * w.tool_output.clamp(0.0, 1.0))
}

/// [`score_of`] for a message that is not a tool output.
pub fn score(e: &Evidence, bm25: f32, semantic: Option<f32>, w: &RankWeights) -> Option<f32> {
    let semantic = semantic.unwrap_or(0.0).clamp(0.0, 1.0);
    if e.matched == 0 && semantic <= 0.0 {
        return None;
    }
    let lexical =
        w.coverage * e.coverage + w.proximity * e.proximity + w.bm25 * bm25.clamp(0.0, 1.0);
    let tier = if e.full() { w.full_match_bonus() } else { 0.0 };
    Some(tier + lexical + w.semantic * semantic)
}

/// `x / max` for a list's best `max` (0 when the best is not positive).
pub fn normalised(x: f32, max: f32) -> f32 {
    if max > 0.0 && x > 0.0 {
        (x / max).min(1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(terms: &[(&str, f32)]) -> Vec<(String, f32)> {
        terms.iter().map(|(t, w)| (t.to_string(), *w)).collect()
    }

    #[test]
    fn the_whole_query_beats_its_rarest_word() {
        // "generate is not a function": a message with both terms beats one
        // holding the common one alone, whatever else it has.
        let query = q(&[("generat", 3.0), ("function", 1.0)]);
        let whole = evidence(&query, "typeerror client generat function".split(' '));
        let one = evidence(&query, "function".split(' '));
        assert!(whole.full() && !one.full());
        let w = RankWeights::default();
        let a = score(&whole, 0.2, Some(0.0), &w).unwrap();
        let b = score(&one, 1.0, Some(1.0), &w).unwrap();
        assert!(a > b, "{a} {b}");
        // Adjacent in order is the closest.
        assert!(whole.proximity == 1.0);
        let apart = evidence(&query, "generat x y z function".split(' '));
        assert!(apart.proximity > 0.0 && apart.proximity < whole.proximity);
        let reversed = evidence(&query, "function generat".split(' '));
        assert!(reversed.proximity < whole.proximity);
    }

    #[test]
    fn no_evidence_is_no_hit() {
        let query = q(&[("mix", 2.0), ("test", 1.0)]);
        let none = evidence(&query, "add comprehens".split(' '));
        assert_eq!(none.matched, 0);
        assert_eq!(score(&none, 0.0, Some(0.0), &RankWeights::default()), None);
        assert_eq!(score(&none, 0.0, None, &RankWeights::default()), None);
        assert!(score(&none, 0.0, Some(0.4), &RankWeights::default()).is_some());
    }

    #[test]
    fn a_tool_output_ranks_below_the_same_evidence_in_prose_but_keeps_its_tier() {
        let w = RankWeights::default();
        let query = q(&[("cargo", 1.0), ("clippi", 2.0)]);
        let full = evidence(&query, "cargo clippi".split(' '));
        let prose = score_of(&full, 1.0, None, false, &w).unwrap();
        let tool = score_of(&full, 1.0, None, true, &w).unwrap();
        assert!(tool < prose);
        let partial = evidence(&query, "clippi".split(' '));
        assert!(tool > score_of(&partial, 1.0, Some(1.0), false, &w).unwrap());
    }
}
