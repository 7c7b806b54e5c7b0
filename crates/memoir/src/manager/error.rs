//! The session manager's error type: the storage errors it passes through,
//! plus the refusals that only make sense at the manager's level.

use crate::message::openai::ConversionError;

/// Errors from [`super::SessionManager`] and its helpers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// The storage layer failed (I/O, invalid id, missing session, ...).
    #[error(transparent)]
    Store(#[from] crate::Error),
    /// An operation that needs a current session was called without one.
    #[error("no current session (create or switch to one first)")]
    NoCurrentSession,
    /// A fork whose boundary, moved back to keep tool calls with their
    /// results, lands before the first message.
    #[error("cannot fork {session} at message {requested}: no complete prefix before it (tool calls without their results)")]
    EmptyFork {
        /// The source session.
        session: String,
        /// The cut the caller asked for.
        requested: usize,
    },
    /// The id belongs to a deleted session that is still in the trash.
    #[error("session {0} is in the trash; restore or purge it first")]
    InTrash(String),
    /// `restore` or `purge` of an id that is not in the trash.
    #[error("session {0} is not in the trash")]
    NotInTrash(String),
    /// A session could not be converted to a provider's message shape.
    #[error("conversion: {0}")]
    Conversion(#[from] ConversionError),
}

/// Result with [`ManagerError`].
pub type Result<T, E = ManagerError> = std::result::Result<T, E>;

impl ManagerError {
    /// True when the error means "no such session".
    pub fn is_not_found(&self) -> bool {
        self.kind() == crate::error::ErrorKind::NotFound
    }

    /// What the caller can do about this error (see [`crate::error::ErrorKind`]).
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            ManagerError::Store(e) => e.kind(),
            ManagerError::NoCurrentSession
            | ManagerError::EmptyFork { .. }
            | ManagerError::Conversion(_) => ErrorKind::Invalid,
            ManagerError::InTrash(_) => ErrorKind::Conflict,
            ManagerError::NotInTrash(_) => ErrorKind::NotFound,
        }
    }
}
