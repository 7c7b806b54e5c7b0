//! The library's error type.
//!
//! One enum for the storage side (transcripts, manager, blobs, index); the
//! embedding layer has its own [`crate::embed::EmbeddingError`]. Every variant
//! names what it was working on, so the CLI can print it as it is.

use std::path::PathBuf;

/// Errors from memoir's storage layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O call failed. The OS error is this error's `source()`, not part
    /// of its `Display` (so a printed chain names it once; see [`report`]).
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done (e.g. "open", "fsync").
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A session id that cannot be used (would escape the store, is empty, ...).
    #[error("invalid session id {id:?}: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// `create` on an id that already exists.
    #[error("session {0} already exists")]
    SessionExists(String),
    /// No session with this id or prefix.
    #[error("no session matching {0:?}")]
    NotFound(String),
    /// A prefix that matches several sessions.
    #[error("{prefix:?} matches {} sessions; use a longer prefix: {}", candidates.len(), candidates.join(", "))]
    Ambiguous {
        /// The prefix as given.
        prefix: String,
        /// Every matching id.
        candidates: Vec<String>,
    },
    /// A transcript whose header record is missing or unreadable.
    #[error("{} has no session header", .0.display())]
    NoHeader(PathBuf),
    /// The session was deleted; nothing more is recorded for it.
    #[error("session {0} was deleted; nothing more is recorded for it")]
    Deleted(String),
    /// Another live process owns the session.
    #[error("session {id} is in use by pid {pid} on host {host} (since {since})")]
    Busy {
        /// The session.
        id: String,
        /// The holder's process id.
        pid: u32,
        /// The holder's host name.
        host: String,
        /// When the holder took ownership (RFC 3339).
        since: String,
    },
    /// An append that expected a different last `seq` (another writer won a race).
    #[error("session {id}: expected next seq {expected}, but the log is at {actual}")]
    Conflict {
        /// The session.
        id: String,
        /// The seq the caller expected to write.
        expected: u64,
        /// The seq the log would have given.
        actual: u64,
    },
    /// A configuration problem (e.g. an empty environment variable).
    #[error("configuration: {0}")]
    Config(String),
    /// Invalid input from the caller.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Stored data that does not verify.
    #[error("corrupt data in {}: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attach an operation and a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            op,
            path: path.into(),
            source,
        })
    }
}

/// An error and its `source()` chain as one line: `outer: inner: root`.
/// A source whose text the message so far already ends with is skipped, so
/// an error that both prints and returns its cause is not printed twice.
pub fn report(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
