//! The library's error type.
//!
//! One enum for the storage side (transcripts, manager, blobs, index); the
//! embedding layer has its own [`crate::embed::EmbeddingError`]. Every variant
//! names what it was working on, so the CLI can print it as it is.
//! Backend failures that need their own type ([`StoreError`]: unavailable,
//! unsupported, ...) are wrapped as [`Error::Store`]; [`Error::kind`] sorts
//! every error by what the caller can do about it ([`ErrorKind`]): the one
//! classification the fronts map to exit codes and HTTP statuses
//! (`memoir::kind_of` finds it in any error chain).

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

    // File-store integrity.
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
    /// A record references a payload blob its writer neither uploaded nor
    /// holds in its own sessions
    /// ([`crate::transcript::grants`]); said the same way whether or not
    /// the blob exists.
    #[error("a record references blob {hash}, which this writer has not uploaded and none of its sessions references")]
    UnownedBlob {
        /// The blob's hash, as the record names it.
        hash: String,
    },
    /// A storage backend's own failure (unreachable, unsupported operation,
    /// a fork parent that is not the session the fork was cut from...).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Failures of a [`crate::store::LogStore`] backend that the older variants of
/// [`Error`] cannot say without matching message text. Match on
/// [`Error::kind`] to decide what to do about any error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or went away (connection refused or
    /// reset, server shutting down, pool exhausted): retrying later may succeed.
    #[error("{backend} unavailable during {op}: {detail}")]
    Unavailable {
        /// The backend (e.g. a PostgreSQL locator or a server URL).
        backend: String,
        /// What was being done.
        op: &'static str,
        /// The driver's own description (with its SQLSTATE, when it has one).
        detail: String,
    },
    /// The backend does not implement this operation.
    #[error("this store cannot {operation}")]
    Unsupported {
        /// What was asked (e.g. "purge sessions").
        operation: &'static str,
    },
    /// A fork whose header names a parent that cannot be stitched: the parent
    /// is a different session with the same id (deleted and re-created), or
    /// belongs to another project, or ends before the fork's cut.
    #[error("fork {session}: parent {parent} cannot be stitched: {reason}")]
    ForeignParent {
        /// The fork.
        session: String,
        /// The parent id its header names.
        parent: String,
        /// Why the parent was refused.
        reason: String,
    },
    /// An append refused because the stored log's tail is inconsistent (the
    /// reader would skip what would be written); nothing was written.
    #[error("session {id}: refusing to append: {detail}")]
    BrokenTail {
        /// The session.
        id: String,
        /// What is inconsistent.
        detail: String,
    },
}

/// What a caller can do about an error: one answer per [`Error`], for fronts
/// that map errors to exit codes or HTTP statuses. Deliberately exhaustive
/// (not `#[non_exhaustive]`), so such a mapping can match every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No such session (or prefix). HTTP 404.
    NotFound,
    /// The id is taken. HTTP 409.
    Exists,
    /// Another writer won a race, or the session is in the trash. HTTP 409.
    Conflict,
    /// Another live process holds the session. HTTP 423/409.
    Busy,
    /// The backend is unreachable; retry later. HTTP 503.
    Unavailable,
    /// The backend cannot do this. HTTP 501.
    Unsupported,
    /// Stored data does not verify or is inconsistent. HTTP 500.
    Corrupt,
    /// The caller's input (id, prefix, configuration) is invalid. HTTP 400.
    Invalid,
    /// Any other local I/O failure. HTTP 500.
    Io,
}

impl Error {
    /// What the caller can do about this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { source, .. } => io_kind(source.kind()),
            Error::InvalidId { .. } | Error::Ambiguous { .. } | Error::Config(_) => {
                ErrorKind::Invalid
            }
            Error::Invalid(_) | Error::UnownedBlob { .. } => ErrorKind::Invalid,
            Error::SessionExists(_) => ErrorKind::Exists,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::NoHeader(_) | Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Json(_) => ErrorKind::Invalid,
            Error::Deleted(_) => ErrorKind::NotFound,
            Error::Busy { .. } => ErrorKind::Busy,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::NotRegularFile { .. } => ErrorKind::Invalid,
            Error::Poisoned { .. } => ErrorKind::Io,
            Error::Store(e) => e.kind(),
        }
    }
}

impl StoreError {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Unavailable { .. } => ErrorKind::Unavailable,
            StoreError::Unsupported { .. } => ErrorKind::Unsupported,
            StoreError::ForeignParent { .. } | StoreError::BrokenTail { .. } => ErrorKind::Corrupt,
        }
    }
}

impl ErrorKind {
    /// Every kind, in declaration order (for tables that pin a mapping).
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::NotFound,
        ErrorKind::Exists,
        ErrorKind::Conflict,
        ErrorKind::Busy,
        ErrorKind::Unavailable,
        ErrorKind::Unsupported,
        ErrorKind::Corrupt,
        ErrorKind::Invalid,
        ErrorKind::Io,
    ];

    /// The stable machine-readable code: the `error` field of the server's
    /// error bodies and of the CLI's `--json` errors.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Exists => "exists",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Busy => "busy",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Invalid => "bad_request",
            ErrorKind::Io => "internal",
        }
    }
}

#[cfg(feature = "view")]
impl crate::embed::EmbeddingError {
    /// What the caller can do about this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        use crate::embed::EmbeddingError as E;
        match self {
            E::ModelNotLoaded(_) => ErrorKind::Unavailable,
            E::DimensionMismatch { .. } => ErrorKind::Io,
            E::BackendError(_) => ErrorKind::Unavailable,
            E::RateLimited { .. } => ErrorKind::Unavailable,
            E::BadInput(_) => ErrorKind::Invalid,
            E::Config(_) => ErrorKind::Invalid,
            E::Cache(_) => ErrorKind::Io,
        }
    }
}

/// The kind of an OS error: connection failures are
/// [`ErrorKind::Unavailable`]; anything else is [`ErrorKind::Io`] (a missing
/// file is a failure of the machine or of the caller's path, never "no such
/// session": that is [`Error::NotFound`], which the stores return themselves).
pub(crate) fn io_kind(kind: std::io::ErrorKind) -> ErrorKind {
    use std::io::ErrorKind as K;
    match kind {
        K::ConnectionAborted
        | K::ConnectionRefused
        | K::ConnectionReset
        | K::NotConnected
        | K::BrokenPipe
        | K::TimedOut => ErrorKind::Unavailable,
        _ => ErrorKind::Io,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_failures_are_unavailable_and_other_io_is_io() {
        let io = |kind| Error::Io {
            op: "connect",
            path: "db".into(),
            source: std::io::Error::new(kind, "x"),
        };
        assert_eq!(
            io(std::io::ErrorKind::ConnectionRefused).kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            io(std::io::ErrorKind::PermissionDenied).kind(),
            ErrorKind::Io
        );
        // A missing file is not a missing session (CLI exit 1, not 4).
        assert_eq!(io(std::io::ErrorKind::NotFound).kind(), ErrorKind::Io);
    }

    #[test]
    fn codes_are_distinct() {
        let codes: std::collections::HashSet<&str> =
            ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn report_names_an_os_error_once() {
        let e = Error::Io {
            op: "open",
            path: "/nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let text = report(&e);
        assert_eq!(text.matches("not found").count(), 1, "{text}");
        assert!(text.starts_with("open /nope: "), "{text}");
    }
}
