//! The Python exception hierarchy and the one mapping from the library's
//! typed errors onto it, through [`memoir::error::ErrorKind`] (never by
//! matching message text).
//!
//! `MemoirError` is the base; each class of failure has its subclass:
//! `InvalidInputError`, `NotFoundError`, `ConflictError`, `UnavailableError`,
//! `UnsupportedError`, `CorruptError`. Anything else (an I/O failure of the machine) is a bare
//! `MemoirError`.

use memoir::error::ErrorKind;
use memoir::manager::ManagerError;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::PyErr;

pyo3::create_exception!(
    memoir._memoir,
    MemoirError,
    PyException,
    "Base class of every error memoir raises."
);
pyo3::create_exception!(
    memoir._memoir,
    InvalidInputError,
    MemoirError,
    "The caller's input is wrong: a bad id, an empty or ambiguous prefix, a malformed message or record."
);
pyo3::create_exception!(
    memoir._memoir,
    NotFoundError,
    MemoirError,
    "No such session (or it was deleted)."
);
pyo3::create_exception!(
    memoir._memoir,
    ConflictError,
    MemoirError,
    "The id is taken, another writer won a race (expected_seq), or the session is held or in the trash."
);
pyo3::create_exception!(
    memoir._memoir,
    UnavailableError,
    MemoirError,
    "The backend cannot be reached now; retrying later may work."
);
pyo3::create_exception!(
    memoir._memoir,
    UnsupportedError,
    MemoirError,
    "The backend (or this build) cannot do this at all."
);
pyo3::create_exception!(
    memoir._memoir,
    CorruptError,
    MemoirError,
    "Stored data did not verify."
);

/// The Python exception for an error of `kind`, with `message` (every kind
/// mapped, no catch-all: a new kind is a compile error here).
pub fn exception(kind: ErrorKind, message: String) -> PyErr {
    match kind {
        ErrorKind::Invalid => InvalidInputError::new_err(message),
        ErrorKind::NotFound => NotFoundError::new_err(message),
        ErrorKind::Exists | ErrorKind::Conflict | ErrorKind::Busy => {
            ConflictError::new_err(message)
        }
        ErrorKind::Unavailable => UnavailableError::new_err(message),
        ErrorKind::Unsupported => UnsupportedError::new_err(message),
        ErrorKind::Corrupt => CorruptError::new_err(message),
        ErrorKind::Io => MemoirError::new_err(message),
    }
}

/// A library error as a Python exception (the full cause chain in the message).
pub fn from_store(e: memoir::Error) -> PyErr {
    exception(e.kind(), memoir::error::report(&e))
}

/// A manager error as a Python exception.
pub fn from_manager(e: ManagerError) -> PyErr {
    exception(e.kind(), memoir::error::report(&e))
}

/// Invalid input detected by the bindings themselves.
pub fn invalid(message: impl Into<String>) -> PyErr {
    InvalidInputError::new_err(message.into())
}

/// Register the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("MemoirError", py.get_type::<MemoirError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    Ok(())
}
