//! The one classification of any error chain: the [`ErrorKind`] of the first
//! library error in it, which every front maps (CLI exit codes, HTTP
//! statuses, JSON error bodies).
//!
//! It stands above every module whose error type it names (the manager,
//! blobs, blame, embedding, view, search, import), so that [`crate::error`] imports
//! none of them: each of those types sorts itself with its own `kind()`.

use crate::error::{Error, ErrorKind, StoreError};

/// The kind of the first library error in `err`'s `source()` chain
/// ([`Error`], [`StoreError`], [`crate::manager::ManagerError`],
/// [`crate::blob::BlobError`], [`crate::blame::BlameError`] or, with their
/// features,
/// [`crate::embed::EmbeddingError`], [`crate::embed::models::ModelError`],
/// [`crate::view::ViewError`],
/// [`crate::search::SearchError`] and [`crate::import::ImportError`]);
/// `None` when there is none. Each wrapper is classified itself, because a
/// `#[error(transparent)]` variant's `source()` skips the error it wraps.
pub fn kind_of(err: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(kind) = kind_here(e) {
            return Some(kind);
        }
        next = e.source();
    }
    None
}

/// The kind of `e` itself when it is one of the library's error types.
fn kind_here(e: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    macro_rules! first_of {
        ($($(#[$gate:meta])* $ty:ty),+ $(,)?) => {
            $(
                $(#[$gate])*
                if let Some(e) = e.downcast_ref::<$ty>() {
                    return Some(e.kind());
                }
            )+
        };
    }
    first_of!(
        Error,
        StoreError,
        crate::manager::ManagerError,
        crate::blob::BlobError,
        crate::blame::BlameError,
        #[cfg(feature = "view")]
        crate::embed::EmbeddingError,
        #[cfg(feature = "minilm")]
        crate::embed::models::ModelError,
        #[cfg(feature = "view")]
        crate::view::ViewError,
        #[cfg(feature = "search")]
        crate::search::SearchError,
        #[cfg(feature = "import")]
        crate::import::ImportError,
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn kind_of_finds_the_library_error_in_a_chain() {
        let e = crate::manager::ManagerError::Store(Error::NotFound("x".into()));
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(
            crate::manager::ManagerError::InTrash("x".into()).kind(),
            ErrorKind::Conflict
        );
        let wrapped: Box<dyn std::error::Error> = Box::new(e);
        assert_eq!(kind_of(wrapped.as_ref()), Some(ErrorKind::NotFound));
        let store: Box<dyn std::error::Error> =
            Box::new(StoreError::Unsupported { operation: "x" });
        assert_eq!(kind_of(store.as_ref()), Some(ErrorKind::Unsupported));
    }

    /// The wrapper errors whose storage variant is `#[error(transparent)]`:
    /// their `source()` skips the wrapped error, so `kind_of` must classify
    /// the wrapper itself (a `memoir search` query too long was "internal",
    /// exit 1, instead of a usage error).
    #[test]
    fn kind_of_classifies_the_wrapper_errors() {
        use crate::blob::BlobError;
        let missing = || Error::NotFound("s".into());
        let cases: Vec<(Box<dyn std::error::Error>, ErrorKind)> = vec![
            (Box::new(BlobError::Storage(missing())), ErrorKind::NotFound),
            (
                Box::new(BlobError::NotFound("h".into())),
                ErrorKind::NotFound,
            ),
            (
                Box::new(BlobError::InvalidHash("x".into())),
                ErrorKind::Invalid,
            ),
            (
                Box::new(BlobError::Corrupt {
                    hash: "a".into(),
                    actual: "b".into(),
                    path: PathBuf::new(),
                }),
                ErrorKind::Corrupt,
            ),
            (
                Box::new(crate::blame::BlameError::Store(missing())),
                ErrorKind::NotFound,
            ),
            (
                Box::new(crate::blame::BlameError::NoSuchLine {
                    path: PathBuf::from("a.rs"),
                    line: 9,
                    lines: 2,
                }),
                ErrorKind::Invalid,
            ),
            #[cfg(feature = "view")]
            (
                Box::new(crate::view::ViewError::Storage(missing())),
                ErrorKind::NotFound,
            ),
            #[cfg(feature = "view")]
            (
                Box::new(crate::view::ViewError::DimensionMismatch {
                    expected: 384,
                    got: 3,
                }),
                ErrorKind::Invalid,
            ),
            #[cfg(feature = "minilm")]
            (
                Box::new(crate::embed::models::ModelError::Mismatch {
                    model: "m".into(),
                    dir: PathBuf::new(),
                    problems: "model.safetensors mismatch".into(),
                }),
                ErrorKind::Corrupt,
            ),
            #[cfg(feature = "search")]
            (
                Box::new(crate::search::SearchError::Invalid("q".into())),
                ErrorKind::Invalid,
            ),
            #[cfg(feature = "search")]
            (
                Box::new(crate::search::SearchError::Store(missing())),
                ErrorKind::NotFound,
            ),
            #[cfg(feature = "import")]
            (
                Box::new(crate::import::ImportError::Store(missing())),
                ErrorKind::NotFound,
            ),
            #[cfg(feature = "import")]
            (
                Box::new(crate::import::ImportError::Manager(
                    crate::manager::ManagerError::Store(missing()),
                )),
                ErrorKind::NotFound,
            ),
            #[cfg(feature = "import")]
            (
                Box::new(crate::import::ImportError::Unsupported {
                    path: PathBuf::from("x.db"),
                    reason: "not a session file".into(),
                }),
                ErrorKind::Unsupported,
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(kind_of(e.as_ref()), Some(kind), "{e}");
        }
    }
}
