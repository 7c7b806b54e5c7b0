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
    /// A file of the index is damaged (truncated, overwritten, or from
    /// another index) and could not be rebuilt.
    #[error("search index {}: damaged ({detail})", path.display())]
    Damaged {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
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
    /// The thread writing the terms file stopped before its work was done
    /// (its own error, when it had one, is reported instead).
    #[error("the search index's terms writer stopped")]
    TermsWriterStopped,
    /// The store has no search engine (neither files nor PostgreSQL).
    #[error("cross-session search is not available on {0}")]
    Unsupported(String),
}

impl SearchError {
    /// What the caller can do about this error (see [`crate::error::ErrorKind`]):
    /// a failing index database is local I/O (the index is derived and
    /// rebuilt), the other variants classify through their cause.
    pub fn kind(&self) -> crate::error::ErrorKind {
        match self {
            SearchError::Database { .. } => crate::error::ErrorKind::Io,
            SearchError::Damaged { .. } => crate::error::ErrorKind::Corrupt,
            SearchError::Store(e) => e.kind(),
            SearchError::Embedding(e) => e.kind(),
            SearchError::Invalid(_) => crate::error::ErrorKind::Invalid,
            SearchError::TermsWriterStopped => crate::error::ErrorKind::Io,
            SearchError::Unsupported(_) => crate::error::ErrorKind::Unsupported,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SearchError;
    use crate::error::ErrorKind;

    #[test]
    fn search_errors_classify_through_their_cause() {
        assert_eq!(SearchError::Invalid("q".into()).kind(), ErrorKind::Invalid);
        assert_eq!(
            SearchError::Store(crate::Error::NotFound("x".into())).kind(),
            ErrorKind::NotFound
        );
    }
}
