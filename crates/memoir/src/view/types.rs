//! The values a session view hands out: chunk metadata, query hits, grafted
//! items and their content, plus the view's error type.

use serde::Serialize;

use super::state::NodeState;
use crate::blob::BlobError;
use crate::embed::EmbeddingError;

/// BLAKE3 of the UTF-8 bytes of `text`, 64 lowercase hex digits (no
/// normalisation: whitespace and case count).
pub fn content_hash(text: &str) -> String {
    crate::blob::hash_bytes(text.as_bytes())
}

/// What the view knows about one indexed chunk.
///
/// A chunk is keyed by `(chain_seq, part)`: `chain_seq` is the `seq` of the
/// transcript record it came from, `part` numbers the chunks one record was
/// split into (0 for the first or only one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkMeta {
    /// The source record's sequence number.
    pub chain_seq: u64,
    /// Which piece of that record (0-based).
    pub part: u32,
    /// BLAKE3 hex of the chunk text (the stored text, not the embedding input).
    pub content_hash: String,
    /// Lifecycle state of the chunk's record.
    pub state: NodeState,
    /// What the chunk is (`user.text`, `assistant.text`, `tool.call`,
    /// `tool.result`, `system.text`, or a caller's own tag).
    pub kind: String,
    /// Set when the text lives in the blob store.
    pub blob_hash: Option<String>,
    /// The text itself when it is held inline.
    pub inline: Option<String>,
}

impl ChunkMeta {
    /// Metadata for an inline text chunk (part 0, Frontier).
    pub fn inline(chain_seq: u64, kind: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        ChunkMeta {
            chain_seq,
            part: 0,
            content_hash: content_hash(&text),
            state: NodeState::Frontier,
            kind: kind.into(),
            blob_hash: None,
            inline: Some(text),
        }
    }

    /// Builder: set the part number.
    pub fn with_part(mut self, part: u32) -> Self {
        self.part = part;
        self
    }

    /// Builder: set the state.
    pub fn with_state(mut self, state: NodeState) -> Self {
        self.state = state;
        self
    }

    /// The content reference: blob first, then inline text, else a bare
    /// reference to the chain.
    pub fn content(&self) -> GraftContent {
        if let Some(h) = &self.blob_hash {
            GraftContent::Blob(h.clone())
        } else if let Some(t) = &self.inline {
            GraftContent::Inline(t.clone())
        } else {
            GraftContent::Reference
        }
    }
}

/// One query result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScopedHit {
    /// The chunk's record.
    pub chain_seq: u64,
    /// Relevance, higher is better: cosine similarity for vector queries,
    /// BM25 for lexical ones, the fused score for hybrid ones.
    pub score: f32,
    /// The chunk.
    pub meta: ChunkMeta,
}

/// Where a grafted item's text is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum GraftContent {
    /// The text itself.
    Inline(String),
    /// A blob hash: load it from the [`crate::blob::ArtifactStore`].
    Blob(String),
    /// Not held by the view: recover it from the transcript by `chain_seq`.
    Reference,
}

/// A chunk pulled into the working set, with its provenance
/// (`chain_seq`, `part`, `content_hash`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraftedItem {
    /// The source record.
    pub chain_seq: u64,
    /// Which piece of it.
    pub part: u32,
    /// BLAKE3 hex of the text.
    pub content_hash: String,
    /// The chunk kind.
    pub kind: String,
    /// Its lifecycle state when grafted.
    pub state: NodeState,
    /// Relevance (see [`ScopedHit::score`]).
    pub score: f32,
    /// The text or where to find it.
    pub content: GraftContent,
}

impl GraftedItem {
    pub(crate) fn from_hit(hit: &ScopedHit) -> Self {
        GraftedItem {
            chain_seq: hit.chain_seq,
            part: hit.meta.part,
            content_hash: hit.meta.content_hash.clone(),
            kind: hit.meta.kind.clone(),
            state: hit.meta.state,
            score: hit.score,
            content: hit.meta.content(),
        }
    }
}

/// Errors of the session view.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The embedder failed.
    #[error(transparent)]
    Embedding(#[from] EmbeddingError),
    /// The blob store failed.
    #[error(transparent)]
    Blob(#[from] BlobError),
    /// Reading the transcript failed.
    #[error(transparent)]
    Storage(#[from] crate::Error),
    /// A vector of the wrong width.
    #[error("vector width mismatch: the view holds {expected}-d vectors, got {got}")]
    DimensionMismatch {
        /// The view's width.
        expected: usize,
        /// The width given.
        got: usize,
    },
    /// Inconsistent input (e.g. messages and sequence numbers of different lengths).
    #[error("invalid input: {0}")]
    Invalid(String),
}
