//! Imported documents (Claude's `document` content blocks: PDFs as
//! `{"type":"document","source":{"type":"base64","media_type":…,"data":…}}`,
//! text documents with a `"type":"text"` source) stored as blobs, like
//! images, not inline: the block keeps its shape with `source.data`
//! replaced by a [`BlobRef`] (hash, size, media type), and the readers put
//! the payload back (`transcript::blobs`), so an export gets the bytes.

use crate::blob::{ArtifactStore, BlobRef};
use crate::message::{Block, Message};
use crate::transcript::blobs::{blob_error, unknown_payload_path, value_at, value_at_mut};

/// A document block's payload and media type, when it holds one inline.
pub(crate) fn payload(block: &Block) -> Option<(&str, String)> {
    let Block::Unknown(v) = block else {
        return None;
    };
    if v.get("type").and_then(|t| t.as_str()) != Some("document") {
        return None;
    }
    let source = v.get("source")?;
    let media_type = match source.get("type").and_then(|t| t.as_str())? {
        "base64" => source.get("media_type").and_then(|m| m.as_str())?,
        "text" => source
            .get("media_type")
            .and_then(|m| m.as_str())
            .unwrap_or("text/plain"),
        _ => return None,
    };
    let data = value_at(v, unknown_payload_path(v)?)?.as_str()?;
    Some((data, media_type.to_string()))
}

/// Move every inline document payload of `m` to `store`, in place.
/// Returns how many were moved.
pub(crate) fn externalize(m: &mut Message, store: &ArtifactStore) -> crate::Result<usize> {
    let mut moved = 0;
    for block in &mut m.content {
        let Some((data, media_type)) = payload(block) else {
            continue;
        };
        let hash = store
            .put_payload(data.as_bytes(), &media_type)
            .map_err(blob_error)?;
        let reference = BlobRef::new(hash, data, &media_type).to_value();
        if let Block::Unknown(v) = block {
            if let Some(slot) = unknown_payload_path(v).and_then(|p| value_at_mut(v, p)) {
                *slot = reference;
                moved += 1;
            }
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_inline_document_sources_are_payloads() {
        let pdf = Block::Unknown(json!({"type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}));
        assert_eq!(payload(&pdf), Some(("JVBERi0=", "application/pdf".into())));
        let text =
            Block::Unknown(json!({"type": "document", "source": {"type": "text", "data": "hi"}}));
        assert_eq!(payload(&text), Some(("hi", "text/plain".into())));
        for other in [
            json!({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}),
            json!({"type": "search_result", "source": {"type": "text", "data": "x"}}),
            json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                "data": {"blob": "00", "size": 1}}}),
        ] {
            assert_eq!(payload(&Block::Unknown(other.clone())), None, "{other}");
        }
    }
}
