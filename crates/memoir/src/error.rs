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
    /// An I/O call failed.
    #[error("{op} {}: {source}", path.display())]
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

    // File-store integrity (issue 9).
    /// A transcript path that is not a regular file (a symlink, FIFO,
    /// directory or device): refused before anything is read or written.
    #[error("{} is a {kind}, not a regular file; refusing to use it as a transcript", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is instead (`symlink`, `fifo`, `directory`, `device`, `socket`).
        kind: &'static str,
    },
    /// A sync of this session's file failed earlier in this process: the page
    /// cache can no longer be trusted, so writes are refused until the store
    /// re-verifies the file ([`crate::store::file::FileStore::reverify`]) or is reopened.
    #[error("session {id}: an earlier fsync of {} failed; writes are refused until the file is re-verified (reopen the store)", path.display())]
    Poisoned {
        /// The session id.
        id: String,
        /// Its file.
        path: PathBuf,
    },
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
