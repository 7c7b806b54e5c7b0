//! The blob reference a transcript record holds in place of a large payload,
//! and the problems a reader reports when it cannot resolve one.
//!
//! On disk a payload string (a tool result's `content`, a text or thinking
//! block's `text`, an image's base64 `data`) above the store's threshold is
//! replaced by an object (`docs/FORMAT.md`, "Large payloads"):
//!
//! ```json
//! {"blob": "<64 hex BLAKE3 of the payload's UTF-8 bytes>", "size": 20971520,
//!  "media_type": "text/plain", "preview": "first lines of the payload…"}
//! ```
//!
//! The blob holds the exact UTF-8 bytes of the replaced JSON string, so
//! resolving gives the message back byte for byte. A reader that predates
//! this format sees a block whose payload has the wrong JSON type and keeps
//! it verbatim ([`crate::Block::Unknown`]), so nothing is lost either way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::is_valid_hash;

/// Characters of a text payload kept in [`BlobRef::preview`].
pub const PREVIEW_CHARS: usize = 256;

/// The on-disk stand-in for a payload moved to the blob store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobRef {
    /// BLAKE3 of the payload's UTF-8 bytes, 64 lowercase hex digits.
    pub blob: String,
    /// The payload's size in bytes.
    pub size: u64,
    /// What the payload is: `text/plain` for text, the image's MIME type for
    /// an image (whose blob holds the base64 text).
    pub media_type: String,
    /// The first [`PREVIEW_CHARS`] characters of a text payload (empty for
    /// images), so a plain JSONL reader sees what was there.
    #[serde(default)]
    pub preview: String,
}

impl BlobRef {
    /// The reference for `payload` stored under `hash`.
    pub fn new(hash: String, payload: &str, media_type: &str) -> BlobRef {
        let preview = if media_type.starts_with("text/") {
            payload.chars().take(PREVIEW_CHARS).collect()
        } else {
            String::new()
        };
        BlobRef {
            blob: hash,
            size: payload.len() as u64,
            media_type: media_type.to_string(),
            preview,
        }
    }

    /// The reference in a JSON value, when it is one (an object with a
    /// well-formed `blob` hash and a `size`).
    pub fn from_value(v: &Value) -> Option<BlobRef> {
        let obj = v.as_object()?;
        let hash = obj.get("blob")?.as_str()?;
        if !is_valid_hash(hash) {
            return None;
        }
        serde_json::from_value(v.clone()).ok()
    }

    /// The reference as a JSON object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "blob": self.blob,
            "size": self.size,
            "media_type": self.media_type,
            "preview": self.preview,
        })
    }
}

/// A payload reference a reader could not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobIssue {
    /// The `seq` of the record holding the reference.
    pub seq: u64,
    /// The blob's hash.
    pub hash: String,
    /// What went wrong.
    pub problem: BlobProblem,
}

/// Why a blob reference did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlobProblem {
    /// The store holds no blob with this hash.
    Missing,
    /// The stored bytes do not hash to their name.
    Corrupt,
    /// The blob is not UTF-8 text (a payload always is).
    NotText,
    /// The session's store has no blob store to resolve it from.
    NoBlobStore,
    /// The blob store failed (I/O); the message.
    Unreadable(String),
}

impl std::fmt::Display for BlobIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.problem {
            BlobProblem::Missing => "missing".to_string(),
            BlobProblem::Corrupt => "corrupt (content does not match its hash)".to_string(),
            BlobProblem::NotText => "not UTF-8 text".to_string(),
            BlobProblem::NoBlobStore => "not resolvable: the store has no blob store".to_string(),
            BlobProblem::Unreadable(e) => format!("unreadable: {e}"),
        };
        write!(f, "record seq {}: blob {} {what}", self.seq, self.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_round_trips_and_malformed_ones_are_not_references() {
        let h = super::super::hash_bytes(b"abc");
        let r = BlobRef::new(h.clone(), "abc", "text/plain");
        assert_eq!(r.preview, "abc");
        assert_eq!(BlobRef::from_value(&r.to_value()), Some(r));
        let img = BlobRef::new(h.clone(), "QUJD", "image/png");
        assert_eq!(img.preview, "", "no preview of base64");
        assert!(BlobRef::from_value(&serde_json::json!({"blob": "xyz", "size": 1})).is_none());
        assert!(
            BlobRef::from_value(&serde_json::json!({"blob": h})).is_none(),
            "no size"
        );
        assert!(BlobRef::from_value(&serde_json::json!("text")).is_none());
    }
}
