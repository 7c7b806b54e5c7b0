//! Rebuilding a view from a transcript.
//!
//! The view is disposable; the transcript is the source of truth. A rebuild
//! chunks every message ([`super::chunk`]), embeds the chunks' embedding
//! inputs in batches with the given provider (wrap it in the embedding cache
//! so a rebuild re-embeds nothing it has seen), and inserts them in
//! transcript order. Same messages, same embedder, same options → same
//! manifest, same slots, same graph, same answers.

use std::time::{Duration, Instant};

use crate::blob::ArtifactStore;
use crate::embed::EmbeddingProvider;
use crate::message::Message;
use crate::transcript::Transcript;

use super::chunk::{chunk_messages, ChunkerConfig};
use super::types::ViewError;
use super::{SessionView, ViewConfig, DEFAULT_INLINE_MAX};

/// How a rebuild chunks, batches and configures the view.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RebuildOptions {
    /// Chunking.
    pub chunker: ChunkerConfig,
    /// Texts above this many bytes go to the blob store (when one is given).
    pub inline_max: usize,
    /// Texts per `embed_batch` call.
    pub batch: usize,
    /// The new view's configuration.
    pub view: ViewConfig,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        RebuildOptions {
            chunker: ChunkerConfig::default(),
            inline_max: DEFAULT_INLINE_MAX,
            batch: 64,
            view: ViewConfig::default(),
        }
    }
}

/// What a rebuild did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RebuildReport {
    /// Messages read.
    pub messages: usize,
    /// Chunks indexed.
    pub chunks: usize,
    /// Time spent embedding.
    pub embed_time: Duration,
    /// Total time.
    pub total_time: Duration,
}

impl SessionView {
    /// Build the view of a transcript with default options (see
    /// [`SessionView::rebuild_with`]).
    pub fn rebuild(
        transcript: &Transcript,
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
    ) -> Result<(SessionView, RebuildReport), ViewError> {
        Self::rebuild_with(transcript, embedder, store, &RebuildOptions::default())
    }

    /// Build the view of a transcript: its messages keyed by
    /// `transcript.message_seqs`, scoped to `transcript.meta.id`.
    pub fn rebuild_with(
        transcript: &Transcript,
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
        options: &RebuildOptions,
    ) -> Result<(SessionView, RebuildReport), ViewError> {
        Self::rebuild_from_messages(
            transcript.meta.id.clone(),
            &transcript.messages,
            &transcript.message_seqs,
            embedder,
            store,
            options,
        )
    }

    /// Build a view of `messages`, where `seqs[i]` is the `chain_seq` of
    /// `messages[i]` (the transcript record's `seq`). Long texts go to
    /// `store` when one is given; externalized tool results are read back
    /// from it to be indexed.
    pub fn rebuild_from_messages(
        session_id: impl Into<String>,
        messages: &[Message],
        seqs: &[u64],
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
        options: &RebuildOptions,
    ) -> Result<(SessionView, RebuildReport), ViewError> {
        let started = Instant::now();
        let view = SessionView::with_config(session_id, embedder.dimensions(), options.view);
        let chunks = chunk_messages(messages, seqs, &options.chunker, store)?;
        let mut embed_time = Duration::ZERO;
        for batch in chunks.chunks(options.batch.max(1)) {
            let inputs: Vec<&str> = batch.iter().map(|c| c.embed_input.as_str()).collect();
            let t = Instant::now();
            let vectors = embedder.embed_batch(&inputs)?;
            embed_time += t.elapsed();
            if vectors.len() != batch.len() {
                return Err(ViewError::Invalid(format!(
                    "embedder returned {} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                )));
            }
            for (chunk, vector) in batch.iter().zip(&vectors) {
                if !view.insert_embedded(vector, chunk, store, options.inline_max)? {
                    return Err(ViewError::DimensionMismatch {
                        expected: view.dims(),
                        got: vector.len(),
                    });
                }
            }
        }
        let report = RebuildReport {
            messages: messages.len(),
            chunks: chunks.len(),
            embed_time,
            total_time: started.elapsed(),
        };
        Ok((view, report))
    }
}
