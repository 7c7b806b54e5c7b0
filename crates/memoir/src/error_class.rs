//! What kind of failure an error is, for the fronts: the one place where
//! every library error variant is sorted into a small, closed set of
//! classes. The CLI turns a class into an exit code and the server into an
//! HTTP status; neither matches on library variants itself.
//!
//! The matches below have no `_` arm on purpose: a new variant of
//! [`crate::Error`] or [`crate::manager::ManagerError`] does not compile
//! until it is classified here. [`ErrorClass`] itself is exhaustive, so a
//! new class does not compile until every front maps it.

use std::io::ErrorKind as IoKind;

#[cfg(feature = "view")]
use crate::embed::EmbeddingError;
use crate::error::{Error, ErrorKind};
use crate::manager::ManagerError;

/// The class of a failure, as the fronts report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The caller's input is wrong: bad id, empty or ambiguous prefix,
    /// malformed body, bad configuration (CLI exit 2, HTTP 400).
    InvalidInput,
    /// No such session (CLI exit 4, HTTP 404).
    NotFound,
    /// The id is taken, another writer won a race, or the session is held
    /// or in the wrong state (CLI exit 3, HTTP 409).
    Conflict,
    /// The backend cannot be reached now; retrying later may work (CLI
    /// exit 5, HTTP 503).
    Unavailable,
    /// The backend cannot do this at all (CLI exit 2, HTTP 501).
    Unsupported,
    /// Stored data did not verify (CLI exit 1, HTTP 500 `corrupt`).
    Corrupt,
    /// Anything else: an I/O failure of the machine (CLI exit 1, HTTP 500).
    Internal,
}

impl ErrorClass {
    /// The stable machine-readable code: the `error` field of the server's
    /// error bodies and of the CLI's `--json` errors.
    pub fn code(self) -> &'static str {
        match self {
            ErrorClass::InvalidInput => "bad_request",
            ErrorClass::NotFound => "not_found",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::Unsupported => "unsupported",
            ErrorClass::Corrupt => "corrupt",
            ErrorClass::Internal => "internal",
        }
    }
}

/// Does this I/O error mean a backend (database, server) is gone for now?
pub fn is_unavailable_io(kind: IoKind) -> bool {
    matches!(
        kind,
        IoKind::ConnectionAborted
            | IoKind::ConnectionRefused
            | IoKind::ConnectionReset
            | IoKind::NotConnected
            | IoKind::BrokenPipe
            | IoKind::TimedOut
    )
}

impl Error {
    /// The class of this error (see the module docs).
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Io { source, .. } if is_unavailable_io(source.kind()) => ErrorClass::Unavailable,
            Error::Io { .. } => ErrorClass::Internal,
            Error::InvalidId { .. } => ErrorClass::InvalidInput,
            Error::SessionExists(_) => ErrorClass::Conflict,
            Error::NotFound(_) => ErrorClass::NotFound,
            Error::Ambiguous { .. } => ErrorClass::InvalidInput,
            Error::NoHeader(_) => ErrorClass::Corrupt,
            Error::Deleted(_) => ErrorClass::NotFound,
            Error::Busy { .. } => ErrorClass::Conflict,
            Error::Conflict { .. } => ErrorClass::Conflict,
            Error::Config(_) => ErrorClass::InvalidInput,
            Error::Invalid(_) => ErrorClass::InvalidInput,
            Error::Corrupt { .. } => ErrorClass::Corrupt,
            Error::Json(_) => ErrorClass::InvalidInput,
            Error::NotRegularFile { .. } => ErrorClass::InvalidInput,
            Error::Poisoned { .. } => ErrorClass::Internal,
            Error::Store(e) => ErrorClass::of_kind(e.kind()),
        }
    }
}

impl ErrorClass {
    /// The class of a storage backend's [`ErrorKind`].
    pub fn of_kind(kind: ErrorKind) -> ErrorClass {
        match kind {
            ErrorKind::NotFound => ErrorClass::NotFound,
            ErrorKind::Exists => ErrorClass::Conflict,
            ErrorKind::Conflict => ErrorClass::Conflict,
            ErrorKind::Busy => ErrorClass::Conflict,
            ErrorKind::Unavailable => ErrorClass::Unavailable,
            ErrorKind::Unsupported => ErrorClass::Unsupported,
            ErrorKind::Corrupt => ErrorClass::Corrupt,
            ErrorKind::Invalid => ErrorClass::InvalidInput,
            ErrorKind::Io => ErrorClass::Internal,
        }
    }
}

impl ManagerError {
    /// The class of this error (see the module docs).
    pub fn class(&self) -> ErrorClass {
        match self {
            ManagerError::Store(e) => e.class(),
            ManagerError::NoCurrentSession => ErrorClass::InvalidInput,
            ManagerError::EmptyFork { .. } => ErrorClass::InvalidInput,
            ManagerError::InTrash(_) => ErrorClass::Conflict,
            ManagerError::NotInTrash(_) => ErrorClass::NotFound,
            ManagerError::Conversion(_) => ErrorClass::InvalidInput,
        }
    }
}

#[cfg(feature = "view")]
impl EmbeddingError {
    /// The class of this error (see the module docs).
    pub fn class(&self) -> ErrorClass {
        match self {
            EmbeddingError::ModelNotLoaded(_) => ErrorClass::Unavailable,
            EmbeddingError::DimensionMismatch { .. } => ErrorClass::Internal,
            EmbeddingError::BackendError(_) => ErrorClass::Unavailable,
            EmbeddingError::RateLimited { .. } => ErrorClass::Unavailable,
            EmbeddingError::BadInput(_) => ErrorClass::InvalidInput,
            EmbeddingError::Config(_) => ErrorClass::InvalidInput,
            EmbeddingError::Cache(_) => ErrorClass::Internal,
        }
    }
}

#[cfg(feature = "search")]
impl crate::search::SearchError {
    /// The class of this error (see the module docs): a failing index
    /// database is internal (the index is derived and rebuilt).
    pub fn class(&self) -> ErrorClass {
        use crate::search::SearchError;
        match self {
            SearchError::Database { .. } => ErrorClass::Internal,
            SearchError::Store(e) => e.class(),
            SearchError::Embedding(e) => e.class(),
            SearchError::Invalid(_) => ErrorClass::InvalidInput,
        }
    }
}

/// The class of the first library error in `err`'s `source()` chain
/// ([`Error`], [`ManagerError`] or [`EmbeddingError`]); `None` when there is none.
pub fn class_of(err: &(dyn std::error::Error + 'static)) -> Option<ErrorClass> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<Error>() {
            return Some(e.class());
        }
        if let Some(e) = e.downcast_ref::<ManagerError>() {
            return Some(e.class());
        }
        #[cfg(feature = "view")]
        if let Some(e) = e.downcast_ref::<EmbeddingError>() {
            return Some(e.class());
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_failures_are_unavailable_and_other_io_is_internal() {
        let io = |kind| Error::Io {
            op: "connect",
            path: "db".into(),
            source: std::io::Error::new(kind, "x"),
        };
        assert_eq!(
            io(IoKind::ConnectionRefused).class(),
            ErrorClass::Unavailable
        );
        assert_eq!(io(IoKind::PermissionDenied).class(), ErrorClass::Internal);
    }

    #[test]
    fn manager_errors_classify_through_the_store_error() {
        let e = ManagerError::Store(Error::NotFound("x".into()));
        assert_eq!(e.class(), ErrorClass::NotFound);
        assert_eq!(
            ManagerError::InTrash("x".into()).class(),
            ErrorClass::Conflict
        );
        let wrapped: Box<dyn std::error::Error> = Box::new(e);
        assert_eq!(class_of(wrapped.as_ref()), Some(ErrorClass::NotFound));
    }

    #[cfg(feature = "search")]
    #[test]
    fn search_errors_classify_through_their_cause() {
        use crate::search::SearchError;
        assert_eq!(
            SearchError::Invalid("q".into()).class(),
            ErrorClass::InvalidInput
        );
        assert_eq!(
            SearchError::Store(Error::NotFound("x".into())).class(),
            ErrorClass::NotFound
        );
    }

    #[test]
    fn report_names_an_os_error_once() {
        let e = Error::Io {
            op: "open",
            path: "/nope".into(),
            source: std::io::Error::from(IoKind::NotFound),
        };
        let text = crate::error::report(&e);
        assert_eq!(text.matches("not found").count(), 1, "{text}");
        assert!(text.starts_with("open /nope: "), "{text}");
    }
}
