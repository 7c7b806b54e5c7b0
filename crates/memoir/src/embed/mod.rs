//! Embedding providers: text in, unit vectors out.
//!
//! [`EmbeddingProvider`] is the one interface the semantic view uses. Providers:
//! `hash` (offline feature hashing, the default), `minilm` (a local
//! sentence-transformers model run in pure Rust) and `openai` (any
//! OpenAI-compatible `/v1/embeddings` server).

use async_trait::async_trait;

/// Why an embedding could not be produced.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingError {
    /// The model is not loaded (missing or corrupt files, failed warm-up).
    #[error("embedding model not loaded: {0}")]
    ModelNotLoaded(String),
    /// A vector of the wrong width.
    #[error("embedding width mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// The width the caller or index expects.
        expected: usize,
        /// The width produced.
        got: usize,
    },
    /// The backend failed.
    #[error("embedding backend error: {0}")]
    BackendError(String),
    /// The backend asked us to slow down.
    #[error("embedding backend rate limited; retry after {retry_after_ms} ms")]
    RateLimited {
        /// Suggested wait, in milliseconds.
        retry_after_ms: u64,
    },
    /// The input cannot be embedded (e.g. empty batch item where forbidden).
    #[error("bad embedding input: {0}")]
    BadInput(String),
}

/// A source of embeddings. Object-safe, `Send + Sync`.
#[async_trait]
pub trait EmbeddingProvider: Send + Sync {
    /// Embed one document-side text.
    async fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError>;

    /// Embed several texts; the default calls [`EmbeddingProvider::embed`] for each.
    async fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut out = Vec::with_capacity(texts.len());
        for t in texts {
            out.push(self.embed(t).await?);
        }
        Ok(out)
    }

    /// Embed a query (the query lane of asymmetric models); defaults to `embed`.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        self.embed(text).await
    }

    /// Output width.
    fn dimensions(&self) -> usize;

    /// Stable model identity including the width, e.g. `hash-v1@384`; used as a cache key.
    fn model_id(&self) -> String;

    /// Load or connect ahead of the first call (best effort).
    async fn warm(&self) -> Result<(), EmbeddingError> {
        Ok(())
    }
}
