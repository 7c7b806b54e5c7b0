//! Putting recalled chunks back into a prompt, and the window policies
//! around it: token-budgeted graft blocks, pruning to the most recent
//! records, and promotion signals.
//!
//! A graft block is one text an agent can place in its prompt:
//!
//! ```text
//! # Recalled context (earlier in this session)
//! - [chain_seq 3 of 20260101T120000-1a2b3c4d] a turn inherited from a fork's parent
//! - [chain_seq 12] the user said the deploy key is in vault
//! - [chain_seq 40] tool result grep: src/a.rs:3: panic!()
//!   (continuation lines of a multi-line item are indented)
//! ```
//!
//! Each line names its record: `chain_seq N` alone is record `N` of the
//! view's own session; a record of another session's log (a fork's
//! inherited turns) adds `of <session>`.
//!
//! Items are chosen by relevance until the budget is spent, then listed in
//! chain order. Blob items are loaded (and verified) from the store; items
//! whose text the view does not hold are reported, not silently dropped.
//! Token counts are estimated as one token per four characters.

use crate::blob::ArtifactStore;
use crate::embed::EmbeddingProvider;

use super::state::{NodeState, StateSet};
use super::types::{GraftContent, GraftedItem, RecordKey, ViewError};
use super::{SearchRequest, SessionView};

/// The first line of a graft block.
pub const GRAFT_HEADER: &str = "# Recalled context (earlier in this session)";

/// How many candidates a budgeted graft considers.
const CANDIDATES: usize = 64;

/// An item is truncated to fit only when at least this many tokens remain.
const MIN_TRUNCATED_TOKENS: usize = 48;

/// Estimated tokens of a text (four characters a token, rounded up).
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// A rendered graft block and what went into it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GraftBlock {
    /// The items rendered, in chain order.
    pub items: Vec<GraftedItem>,
    /// The block text (empty when no item was chosen).
    pub text: String,
    /// Estimated tokens of `text` (never above the budget).
    pub tokens: usize,
    /// Items shortened to fit the budget.
    pub truncated: usize,
    /// Records whose text could not be obtained (reference-only chunks,
    /// blobs missing or corrupt, no store given).
    pub unresolved: Vec<RecordKey>,
}

/// Format one item line: `- [chain_seq N] text` for a record of the view's
/// own session (`session` = `None`), `- [chain_seq N of <session>] text`
/// otherwise; continuation lines indented.
pub fn render_item(session: Option<&str>, chain_seq: u64, text: &str) -> String {
    let body = text.trim().replace('\n', "\n  ");
    match session {
        None => format!("- [chain_seq {chain_seq}] {body}"),
        Some(s) => format!("- [chain_seq {chain_seq} of {s}] {body}"),
    }
}

/// Why a record is nominated for promotion to durable memory.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum PromotionReason {
    /// It was explicitly marked important.
    Important,
    /// It was recalled this many times.
    ReferenceCount(u32),
    /// The task succeeded with this score, lowering the recall threshold to 1.
    TaskScore(f32),
}

/// Inputs of a promotion decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromotionSignals {
    /// How well the task went, 0..1.
    pub task_score: f32,
    /// A task at or above this score counts as a success (default 0.7).
    pub task_threshold: f32,
    /// Recalls needed to be nominated (default 2; 1 after a success).
    pub min_refs: u32,
}

impl Default for PromotionSignals {
    fn default() -> Self {
        PromotionSignals {
            task_score: 0.0,
            task_threshold: 0.7,
            min_refs: 2,
        }
    }
}

/// A record nominated for promotion.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PromotionCandidate {
    /// The session whose log holds the record.
    pub session: String,
    /// The record.
    pub chain_seq: u64,
    /// Content hashes of its chunks, by part.
    pub content_hashes: Vec<String>,
    /// Why.
    pub reasons: Vec<PromotionReason>,
}

impl SessionView {
    /// Graft the best chunks for `query_text` (embedded on the query lane,
    /// searched in the view's mode, Pruned skipped) into a block of at most
    /// `max_tokens` estimated tokens. Blob items are read from `store`.
    pub fn graft_budget(
        &self,
        embedder: &dyn EmbeddingProvider,
        query_text: &str,
        max_tokens: usize,
        store: Option<&ArtifactStore>,
    ) -> Result<GraftBlock, ViewError> {
        self.graft_budget_top(embedder, query_text, CANDIDATES, max_tokens, store)
    }

    /// [`SessionView::graft_budget`] considering the best `top_k` chunks
    /// (`recall`'s `k`) instead of the default candidate count.
    pub fn graft_budget_top(
        &self,
        embedder: &dyn EmbeddingProvider,
        query_text: &str,
        top_k: usize,
        max_tokens: usize,
        store: Option<&ArtifactStore>,
    ) -> Result<GraftBlock, ViewError> {
        let mode = self.config().mode;
        let vector = if mode.needs_vector() {
            Some(embedder.embed_query(query_text)?)
        } else {
            None
        };
        if let Some(v) = &vector {
            if v.len() != self.dims() {
                return Err(ViewError::DimensionMismatch {
                    expected: self.dims(),
                    got: v.len(),
                });
            }
        }
        let req = SearchRequest {
            vector: vector.as_deref(),
            text: Some(query_text),
            top_k: top_k.max(1),
            mode,
            states: StateSet::NOT_PRUNED,
        };
        Ok(self.graft_budget_with(&req, max_tokens, store))
    }

    /// The synchronous core of [`SessionView::graft_budget`] for a prepared
    /// request (`req.top_k` candidates are considered). Only the items that
    /// make it into the block count as recalled.
    pub fn graft_budget_with(
        &self,
        req: &SearchRequest,
        max_tokens: usize,
        store: Option<&ArtifactStore>,
    ) -> GraftBlock {
        let hits = self.search_distinct(req);
        let header_cost = estimate_tokens(GRAFT_HEADER) + 1;
        let mut used = header_cost;
        let mut chosen: Vec<(GraftedItem, String)> = Vec::new();
        let mut unresolved = Vec::new();
        let mut truncated = 0;
        let own = self.session_id();
        for hit in &hits {
            let item = GraftedItem::from_hit(hit);
            let origin = (item.session != own).then_some(item.session.as_str());
            let text = match &item.content {
                GraftContent::Inline(t) => t.clone(),
                GraftContent::Blob(h) => match store.map(|s| s.load_string(h)) {
                    Some(Ok(t)) => t,
                    _ => {
                        unresolved.push(item.record());
                        continue;
                    }
                },
                GraftContent::Reference => {
                    unresolved.push(item.record());
                    continue;
                }
            };
            if !text.chars().any(char::is_alphanumeric) {
                continue;
            }
            let line = render_item(origin, item.chain_seq, &text);
            let cost = estimate_tokens(&line) + 1;
            if used + cost <= max_tokens {
                used += cost;
                chosen.push((item, line));
                continue;
            }
            let remaining = max_tokens.saturating_sub(used);
            if remaining >= MIN_TRUNCATED_TOKENS {
                let prefix = render_item(origin, item.chain_seq, "");
                let room = (remaining - 1).saturating_sub(estimate_tokens(&prefix) + 1) * 4;
                let cut: String = text.trim().chars().take(room.saturating_sub(1)).collect();
                let line = render_item(origin, item.chain_seq, &format!("{cut}…"));
                let cost = estimate_tokens(&line) + 1;
                if used + cost <= max_tokens {
                    used += cost;
                    truncated += 1;
                    chosen.push((item, line));
                }
            }
            if max_tokens.saturating_sub(used) < 8 {
                break;
            }
        }
        if chosen.is_empty() {
            return GraftBlock {
                items: Vec::new(),
                text: String::new(),
                tokens: 0,
                truncated: 0,
                unresolved,
            };
        }
        // Chain order: the view's manifest order (a fork's inherited records
        // first, then by seq and part).
        let order: std::collections::HashMap<(String, u64, u32), usize> = self
            .manifest()
            .into_iter()
            .enumerate()
            .map(|(i, m)| ((m.session, m.chain_seq, m.part), i))
            .collect();
        chosen.sort_by_key(|(item, _)| {
            order
                .get(&(item.session.clone(), item.chain_seq, item.part))
                .copied()
                .unwrap_or(usize::MAX)
        });
        let mut text = String::from(GRAFT_HEADER);
        for (_, line) in &chosen {
            text.push('\n');
            text.push_str(line);
        }
        let items: Vec<GraftedItem> = chosen.into_iter().map(|(i, _)| i).collect();
        self.bump_refs(items.iter());
        GraftBlock {
            tokens: estimate_tokens(&text),
            items,
            text,
            truncated,
            unresolved,
        }
    }

    /// Prune the oldest live (Frontier) records to Stale so that at most
    /// `keep` stay live. Returns how many were pruned.
    pub fn prune_to_recent(&self, keep: usize) -> usize {
        let live = self.live_records();
        let excess = live.len().saturating_sub(keep);
        live[..excess]
            .iter()
            .filter(|r| self.prune(*r).is_ok())
            .count()
    }

    /// The seed's name for [`SessionView::promotion_candidates`]: what to
    /// promote at the end of a conversation ([`crate::promote::promote`]
    /// writes it).
    pub fn postmortem(&self, signals: &PromotionSignals) -> Vec<PromotionCandidate> {
        self.promotion_candidates(signals)
    }

    /// Records worth promoting to durable memory: marked important, or
    /// recalled at least `min_refs` times (1 when the task succeeded). Pruned
    /// records are never nominated. In chain order.
    pub fn promotion_candidates(&self, signals: &PromotionSignals) -> Vec<PromotionCandidate> {
        let success = signals.task_score >= signals.task_threshold;
        let min_refs = if success { 1 } else { signals.min_refs.max(1) };
        let mut out = Vec::new();
        for rec in self.records() {
            if self.state(&rec) == Some(NodeState::Pruned) {
                continue;
            }
            let refs = self.ref_count(&rec);
            let mut reasons = Vec::new();
            if self.is_important(&rec) {
                reasons.push(PromotionReason::Important);
            }
            if refs >= min_refs {
                reasons.push(PromotionReason::ReferenceCount(refs));
            }
            if reasons.is_empty() {
                continue;
            }
            if success {
                reasons.push(PromotionReason::TaskScore(signals.task_score));
            }
            out.push(PromotionCandidate {
                content_hashes: self
                    .chunks_of(&rec)
                    .into_iter()
                    .map(|m| m.content_hash)
                    .collect(),
                reasons,
                session: rec.session,
                chain_seq: rec.seq,
            });
        }
        out
    }
}
