//! Content-addressed blob store for large payloads (tool outputs, images,
//! long chunk texts).
//!
//! This module owns three things:
//!
//! - [`ArtifactStore`] ([`store`]): bytes keyed by their BLAKE3 hash, written
//!   atomically, verified on every load, with persisted reference counts and a
//!   garbage collector for blobs nobody references any more.
//! - The blob reference string ([`blob_ref`], [`parse_blob_ref`]): the text
//!   `memoir-blob:blake3:<64 lowercase hex>` that stands in for a payload.
//! - [`externalize()`] / [`resolve`] ([`mod@externalize`]): swapping large
//!   [`Block::ToolResult`](crate::Block::ToolResult) contents and
//!   [`Block::Image`](crate::Block::Image) data for reference strings and back,
//!   so one payload is stored once however many sessions or forks carry it.
//! - The on-disk reference a transcript record holds instead of a large
//!   payload ([`BlobRef`], [`mod@payload`]) and the problems a reader reports
//!   ([`BlobIssue`]); the transcript's write and read hooks that use them are
//!   [`crate::transcript::blobs`], and [`PayloadStore`] is what a session
//!   store hands them.
//!
//! The on-disk layout is documented in `docs/FORMAT.md`, section "Blob store
//! and semantic view".

pub mod externalize;
pub mod payload;
pub mod store;

use std::path::PathBuf;

pub use externalize::{
    externalize, externalize_message, referenced_blobs, release_refs, resolve, resolve_message,
    retain_refs, ExternalizePolicy, TRANSCRIPT_MIN_BYTES,
};
pub use payload::{BlobIssue, BlobProblem, BlobRef};
pub use store::{ArtifactStore, BlobBackend, BlobInfo, GcReport};

/// The blob store of a session store, and what it externalizes: handed out
/// by [`crate::store::LogStore::blobs`] to the transcript's write and read
/// paths ([`crate::transcript::blobs`]).
#[derive(Debug, Clone)]
pub struct PayloadStore {
    /// Where payloads go.
    pub store: std::sync::Arc<ArtifactStore>,
    /// Which payloads go there.
    pub policy: ExternalizePolicy,
}

impl PayloadStore {
    /// The file-backed payload store beside a sessions directory
    /// (`<dir>/blobs/`, created on the first payload), with `policy`.
    pub fn beside(dir: &std::path::Path, policy: ExternalizePolicy) -> PayloadStore {
        PayloadStore {
            store: std::sync::Arc::new(ArtifactStore::at(dir)),
            policy,
        }
    }
}

/// Prefix of a blob reference string; the 64 hex digits of the hash follow.
pub const BLOB_REF_PREFIX: &str = "memoir-blob:blake3:";

/// Errors of the blob store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// No blob with this hash is stored.
    #[error("blob {0} not found")]
    NotFound(String),
    /// The stored bytes do not hash to their name (bit rot, truncation, tampering).
    #[error("blob {hash} is corrupt: its content hashes to {actual} ({})", path.display())]
    Corrupt {
        /// The hash the blob is stored under.
        hash: String,
        /// What the bytes actually hash to.
        actual: String,
        /// The blob file (empty for the in-memory backend).
        path: PathBuf,
    },
    /// A string that is not 64 lowercase hex digits.
    #[error("invalid blob hash {0:?}: expected 64 lowercase hex digits")]
    InvalidHash(String),
    /// A reference-count file that cannot be parsed.
    #[error("reference count file {} is unreadable: {detail}", path.display())]
    BadRefCount {
        /// The `.refs` file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A blob whose content is not UTF-8 where text was expected.
    #[error("blob {0} is not UTF-8 text")]
    NotText(String),
    /// An I/O failure (with the operation and path).
    #[error(transparent)]
    Storage(#[from] crate::Error),
}

impl BlobError {
    /// What the caller can do about this error (see [`crate::error::ErrorKind`]).
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            BlobError::NotFound(_) => ErrorKind::NotFound,
            BlobError::Corrupt { .. } | BlobError::BadRefCount { .. } => ErrorKind::Corrupt,
            BlobError::InvalidHash(_) | BlobError::NotText(_) => ErrorKind::Invalid,
            BlobError::Storage(e) => e.kind(),
        }
    }
}

/// BLAKE3 of `bytes` as 64 lowercase hex digits: the key of a blob.
pub fn hash_bytes(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// True when `s` is a well-formed blob hash (64 lowercase hex digits).
pub fn is_valid_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Check a hash, returning it back or [`BlobError::InvalidHash`].
pub(crate) fn check_hash(s: &str) -> Result<&str, BlobError> {
    if is_valid_hash(s) {
        Ok(s)
    } else {
        Err(BlobError::InvalidHash(s.to_string()))
    }
}

/// The reference string for a blob: `memoir-blob:blake3:<hash>`.
pub fn blob_ref(hash: &str) -> String {
    format!("{BLOB_REF_PREFIX}{hash}")
}

/// The hash inside a reference string, when `s` is exactly one
/// (`memoir-blob:blake3:` followed by 64 lowercase hex digits, nothing else).
pub fn parse_blob_ref(s: &str) -> Option<&str> {
    // By length first: most strings a reader checks are no reference, and
    // their bytes need not be read at all.
    if s.len() != BLOB_REF_PREFIX.len() + 64 {
        return None;
    }
    let hash = s.strip_prefix(BLOB_REF_PREFIX)?;
    is_valid_hash(hash).then_some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_strings_round_trip() {
        let h = hash_bytes(b"payload");
        assert_eq!(h.len(), 64);
        let r = blob_ref(&h);
        assert!(r.starts_with("memoir-blob:blake3:"));
        assert_eq!(parse_blob_ref(&r), Some(h.as_str()));
    }

    #[test]
    fn malformed_references_are_not_references() {
        let h = hash_bytes(b"x");
        assert_eq!(parse_blob_ref(&h), None);
        assert_eq!(
            parse_blob_ref(&format!("{BLOB_REF_PREFIX}{}", &h[..63])),
            None
        );
        assert_eq!(parse_blob_ref(&format!("{BLOB_REF_PREFIX}{h} ")), None);
        assert_eq!(
            parse_blob_ref(&format!("{BLOB_REF_PREFIX}{}", h.to_uppercase())),
            None
        );
        assert!(check_hash("../etc/passwd").is_err());
    }
}
