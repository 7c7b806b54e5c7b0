//! The search index's error type.

use std::path::PathBuf;

/// Why the search index could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The index database failed.
    #[error("search index {}: {source}", path.display())]
    Database {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] crate::Error),
    /// The embedder failed (semantic and hybrid modes, `embed_missing`).
    #[error(transparent)]
    Embedding(#[from] crate::embed::EmbeddingError),
    /// A query the index cannot run.
    #[error("invalid search: {0}")]
    Invalid(String),
}
