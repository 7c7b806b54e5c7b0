//! Rebuilding a view from a transcript.
//!
//! The view is disposable; the transcript is the source of truth. A rebuild
//! chunks every message ([`super::chunk`]), embeds the chunks' embedding
//! inputs in batches with the given provider (wrap it in the embedding cache
//! so a rebuild re-embeds nothing it has seen), and inserts them in
//! transcript order. Same messages, same embedder, same options → same
//! manifest, same slots, same graph, same answers.
//!
//! [`SessionView::rebuild_session`] is the one to use for a stored session:
//! it indexes every turn the log ever held ([`super::history`]), each under
//! its `(session, seq)`, the turns a compaction dropped entering
//! [`RebuildOptions::dropped`] (Stale: recallable, out of the live window).
//! The transcript-based entry points index the current messages only.

use std::time::{Duration, Instant};

use crate::blob::ArtifactStore;
use crate::embed::EmbeddingProvider;
use crate::message::Message;
use crate::store::{LoadReport, LogStore};
use crate::transcript::Transcript;

use super::chunk::{chunk_messages, chunk_turns, Chunk, ChunkerConfig};
use super::history::{History, Turn};
use super::state::NodeState;
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
    /// The state a turn a rewrite dropped enters in
    /// [`SessionView::rebuild_session`] (default Stale: still recalled and
    /// grafted, no longer live); `None` leaves dropped turns out.
    pub dropped: Option<NodeState>,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        RebuildOptions {
            chunker: ChunkerConfig::default(),
            inline_max: DEFAULT_INLINE_MAX,
            batch: 64,
            view: ViewConfig::default(),
            dropped: Some(NodeState::Stale),
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
    /// Turns indexed that the conversation no longer holds (dropped by a
    /// rewrite; [`SessionView::rebuild_session`] only).
    pub dropped: usize,
}

impl SessionView {
    /// Build the view of a transcript with default options (see
    /// [`SessionView::rebuild_with`]).
    pub async fn rebuild(
        transcript: &Transcript,
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
    ) -> Result<(SessionView, RebuildReport), ViewError> {
        Self::rebuild_with(transcript, embedder, store, &RebuildOptions::default()).await
    }

    /// Build the view of a transcript's current messages, keyed by
    /// `transcript.message_seqs`, all in `transcript.meta.id`'s session. For
    /// a stored session prefer [`SessionView::rebuild_session`], which also
    /// indexes the turns a rewrite dropped and keys a fork's inherited
    /// turns by the ancestor's session.
    pub async fn rebuild_with(
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
        .await
    }

    /// Build a view of `messages`, where `seqs[i]` is the `chain_seq` of
    /// `messages[i]` (the transcript record's `seq`). Long texts go to
    /// `store` when one is given; externalized tool results are read back
    /// from it to be indexed.
    pub async fn rebuild_from_messages(
        session_id: impl Into<String>,
        messages: &[Message],
        seqs: &[u64],
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
        options: &RebuildOptions,
    ) -> Result<(SessionView, RebuildReport), ViewError> {
        let started = Instant::now();
        let view = SessionView::with_config(session_id, embedder.dimensions(), options.view);
        let chunks: Vec<(&str, NodeState, Chunk)> =
            chunk_messages(messages, seqs, &options.chunker, store)?
                .into_iter()
                .map(|c| ("", NodeState::Frontier, c))
                .collect();
        let embed_time = view.index_all(&chunks, embedder, store, options).await?;
        let report = RebuildReport {
            messages: messages.len(),
            chunks: chunks.len(),
            embed_time,
            total_time: started.elapsed(),
            dropped: 0,
        };
        Ok((view, report))
    }

    /// Build the view of session `id` of `store` from every turn its log
    /// ever held ([`History`]): the current turns enter Frontier, the turns
    /// a rewrite dropped enter [`RebuildOptions::dropped`], each keyed by
    /// its `(session, seq)`. Also returns the read's report (log issues,
    /// unresolvable payload blobs).
    pub async fn rebuild_session(
        store: &dyn LogStore,
        id: &str,
        embedder: &dyn EmbeddingProvider,
        blobs: Option<&ArtifactStore>,
        options: &RebuildOptions,
    ) -> Result<(SessionView, RebuildReport, LoadReport), ViewError> {
        let history = History::read(store, id)?;
        let (view, report) = Self::rebuild_history(&history, embedder, blobs, options).await?;
        Ok((view, report, history.report))
    }

    /// [`SessionView::rebuild_session`] over a history already read.
    pub async fn rebuild_history(
        history: &History,
        embedder: &dyn EmbeddingProvider,
        blobs: Option<&ArtifactStore>,
        options: &RebuildOptions,
    ) -> Result<(SessionView, RebuildReport), ViewError> {
        let started = Instant::now();
        let view =
            SessionView::with_config(history.session.clone(), embedder.dimensions(), options.view);
        let kept: Vec<&Turn> = history
            .turns
            .iter()
            .filter(|t| t.current || options.dropped.is_some())
            .collect();
        let dropped = kept.iter().filter(|t| !t.current).count();
        let chunks: Vec<(&str, NodeState, Chunk)> = chunk_turns(&kept, &options.chunker, blobs)?
            .into_iter()
            .map(|(i, c)| {
                let t = &kept[i];
                let state = if t.current {
                    NodeState::Frontier
                } else {
                    options.dropped.unwrap_or(NodeState::Stale)
                };
                (t.session.as_str(), state, c)
            })
            .collect();
        let embed_time = view.index_all(&chunks, embedder, blobs, options).await?;
        let report = RebuildReport {
            messages: kept.len(),
            chunks: chunks.len(),
            embed_time,
            total_time: started.elapsed(),
            dropped,
        };
        Ok((view, report))
    }

    /// Embed and insert `chunks` in order, in batches; returns the time spent
    /// embedding.
    async fn index_all(
        &self,
        chunks: &[(&str, NodeState, Chunk)],
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
        options: &RebuildOptions,
    ) -> Result<Duration, ViewError> {
        let mut embed_time = Duration::ZERO;
        for batch in chunks.chunks(options.batch.max(1)) {
            let inputs: Vec<&str> = batch
                .iter()
                .map(|(_, _, c)| c.embed_input.as_str())
                .collect();
            let t = Instant::now();
            let vectors = embedder.embed_batch(&inputs).await?;
            embed_time += t.elapsed();
            if vectors.len() != batch.len() {
                return Err(ViewError::Invalid(format!(
                    "embedder returned {} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                )));
            }
            for ((session, state, chunk), vector) in batch.iter().zip(&vectors) {
                self.insert_embedded_as(vector, chunk, session, *state, store, options.inline_max)?;
            }
        }
        Ok(embed_time)
    }
}
