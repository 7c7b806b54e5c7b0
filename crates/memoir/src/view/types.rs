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

/// A record of some session's log: the provenance of a chunk, a hit or a
/// graft line. Inside one view no two records share a key, even in a fork
/// whose own `seq` 1 and its parent's `seq` 1 are both indexed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RecordKey {
    /// The session whose log holds the record.
    pub session: String,
    /// The record's `seq` in that log.
    pub seq: u64,
}

/// How a caller names a record of a view: a bare `seq` means the view's own
/// session; `(session, seq)` names any session's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The session (`None`: the view's own).
    pub session: Option<&'a str>,
    /// The record's `seq` in that session's log.
    pub seq: u64,
}

impl From<u64> for RecordRef<'_> {
    fn from(seq: u64) -> Self {
        RecordRef { session: None, seq }
    }
}

impl<'a> From<(&'a str, u64)> for RecordRef<'a> {
    fn from((session, seq): (&'a str, u64)) -> Self {
        RecordRef {
            session: Some(session),
            seq,
        }
    }
}

impl<'a> From<&'a RecordKey> for RecordRef<'a> {
    fn from(k: &'a RecordKey) -> Self {
        RecordRef {
            session: Some(&k.session),
            seq: k.seq,
        }
    }
}

/// What the view knows about one indexed chunk.
///
/// A chunk is keyed by `(session, chain_seq, part)`: `session` and
/// `chain_seq` name the transcript record it came from (a fork's inherited
/// messages name the ancestor whose log holds them), `part` numbers the
/// chunks one record was split into (0 for the first or only one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkMeta {
    /// The session whose log holds the source record (empty in a chunk
    /// handed to an insert: the view's own session; filled in by the view).
    pub session: String,
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
            session: String::new(),
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

    /// Builder: set the session whose log holds the record.
    pub fn with_session(mut self, session: impl Into<String>) -> Self {
        self.session = session.into();
        self
    }

    /// The record this chunk came from.
    pub fn record(&self) -> RecordKey {
        RecordKey {
            session: self.session.clone(),
            seq: self.chain_seq,
        }
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
    /// The session whose log holds the chunk's record.
    pub session: String,
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
/// (`session`, `chain_seq`, `part`, `content_hash`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraftedItem {
    /// The session whose log holds the source record.
    pub session: String,
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
    /// The record this item came from.
    pub fn record(&self) -> RecordKey {
        RecordKey {
            session: self.session.clone(),
            seq: self.chain_seq,
        }
    }

    pub(crate) fn from_hit(hit: &ScopedHit) -> Self {
        GraftedItem {
            session: hit.session.clone(),
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

/// Why a lifecycle move was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The view holds no chunk of this record.
    #[error("record {session}#{seq} is not in the view")]
    Unknown {
        /// The session named (the view's own when the caller gave a bare seq).
        session: String,
        /// The seq named.
        seq: u64,
    },
    /// Not one of the legal moves (see [`NodeState::can_transition_to`]).
    #[error("illegal lifecycle move {from} -> {to}")]
    Illegal {
        /// The record's state.
        from: NodeState,
        /// The state asked for.
        to: NodeState,
    },
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

impl ViewError {
    /// What the caller can do about this error (see [`crate::error::ErrorKind`]).
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            ViewError::Embedding(e) => e.kind(),
            ViewError::Blob(e) => e.kind(),
            ViewError::Storage(e) => e.kind(),
            ViewError::DimensionMismatch { .. } | ViewError::Invalid(_) => ErrorKind::Invalid,
        }
    }
}
