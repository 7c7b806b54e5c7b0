//! Embedding providers: text in, unit vectors out.
//!
//! [`EmbeddingProvider`] is the one interface the semantic view uses. Providers:
//!
//! - [`hash`]: offline feature hashing (word unigrams, bigrams and character
//!   3-grams), the default: no model, no network, ~µs per text.
//! - [`minilm`]: a local sentence-transformers model (all-MiniLM-L6-v2, a
//!   BERT, or all-mpnet-base-v2, an MPNet) run in pure Rust; [`models`]
//!   names the supported ones, checks their files and installs them.
//! - [`openai`]: any OpenAI-compatible `/v1/embeddings` server.
//!
//! [`cache::CachedEmbedder`] wraps any of them in a persistent, checksummed,
//! size-bounded cache keyed by (model id, BLAKE3 of the input), and
//! [`select()`] builds the configured provider from `$MEMOIR_HOME/config.toml`,
//! environment variables and command-line overrides.
//!
//! Every provider returns L2-normalised vectors of exactly
//! [`EmbeddingProvider::dimensions`] components, so cosine similarity is a dot
//! product.

pub mod cache;
pub mod hash;
#[cfg(feature = "minilm")]
pub mod minilm;
#[cfg(feature = "minilm")]
pub mod models;
#[cfg(feature = "openai")]
pub mod openai;
pub mod select;

pub use cache::{CacheConfig, CacheStats, CachedEmbedder};
pub use hash::HashEmbedder;
#[cfg(feature = "minilm")]
pub use minilm::{MiniLm, MiniLmOptions};
#[cfg(feature = "openai")]
pub use openai::{OpenAiConfig, OpenAiEmbedder};
pub use select::{select, EmbedConfig, EmbedderKind};

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
    /// The backend asked us to slow down (and kept asking after our retries).
    #[error("embedding backend rate limited; retry after {retry_after_ms} ms")]
    RateLimited {
        /// Suggested wait, in milliseconds.
        retry_after_ms: u64,
    },
    /// The input cannot be embedded (e.g. empty batch item where forbidden).
    #[error("bad embedding input: {0}")]
    BadInput(String),
    /// The embedding configuration is invalid (unknown provider, bad value,
    /// unreadable config file, missing API key variable).
    #[error("embedding configuration error: {0}")]
    Config(String),
    /// The embedding cache could not be opened or written.
    #[error("embedding cache error: {0}")]
    Cache(String),
}

/// A source of embeddings. Object-safe, `Send + Sync`, and synchronous.
///
/// Implementations return unit-length vectors of exactly
/// [`dimensions`](EmbeddingProvider::dimensions) components. Every call
/// blocks the calling thread until the vectors are ready: all providers do
/// CPU work (hashing, a BERT forward pass) or a blocking HTTP request, so an
/// async trait would only hide the blocking. Async callers (the server) run
/// the calls on their runtime's blocking pool (`spawn_blocking`).
pub trait EmbeddingProvider: Send + Sync {
    /// Embed one document-side text.
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError>;

    /// Embed several document-side texts, in order; the default calls
    /// [`EmbeddingProvider::embed`] for each. Providers that batch override it.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut out = Vec::with_capacity(texts.len());
        for t in texts {
            out.push(self.embed(t)?);
        }
        Ok(out)
    }

    /// Embed a query (the query lane of asymmetric models); defaults to `embed`.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        self.embed(text)
    }

    /// Output width.
    fn dimensions(&self) -> usize;

    /// Stable model identity including the width, e.g. `hash-v1@384`; used as a cache key.
    fn model_id(&self) -> String;

    /// Load or connect ahead of the first call (best effort).
    fn warm(&self) -> Result<(), EmbeddingError> {
        Ok(())
    }
}

impl std::fmt::Debug for dyn EmbeddingProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingProvider")
            .field("model_id", &self.model_id())
            .field("dimensions", &self.dimensions())
            .finish()
    }
}

/// Scale `v` to unit Euclidean length in place. A zero (or non-finite) vector
/// is left unchanged and `false` is returned.
pub fn l2_normalize(v: &mut [f32]) -> bool {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        let inv = 1.0 / norm;
        for x in v.iter_mut() {
            *x *= inv;
        }
        true
    } else {
        false
    }
}

/// Cosine similarity of two vectors of the same width (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let mut dot = 0.0f32;
    let mut na = 0.0f32;
    let mut nb = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_makes_unit_vectors_and_leaves_zero_alone() {
        let mut v = vec![3.0, 4.0];
        assert!(l2_normalize(&mut v));
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut z = vec![0.0; 3];
        assert!(!l2_normalize(&mut z));
        assert_eq!(z, vec![0.0; 3]);
    }

    #[test]
    fn cosine_of_parallel_and_orthogonal() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    /// The trait must stay object-safe and `Send + Sync`.
    #[test]
    fn trait_is_object_safe() {
        fn assert_send_sync<T: Send + Sync + ?Sized>() {}
        assert_send_sync::<dyn EmbeddingProvider>();
        let _: Option<std::sync::Arc<dyn EmbeddingProvider>> = None;
    }
}
