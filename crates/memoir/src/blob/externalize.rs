//! Moving large message payloads into the blob store and back.
//!
//! [`externalize`] replaces the content of a large [`Block::ToolResult`] and
//! the base64 `data` of a large [`Block::Image`] with a reference string
//! `memoir-blob:blake3:<hash>` (see [`super::blob_ref`]); [`resolve`] puts the
//! payload back. The blob holds the exact UTF-8 bytes of the replaced string
//! (for an image: the base64 text, not the decoded image), so resolving gives
//! back the original message byte for byte. Every other field of the block
//! and message is left alone.
//!
//! Reference counting: each payload that `externalize` replaces takes one
//! reference ([`ArtifactStore::put`]). A holder that copies references (a
//! fork copying its parent's messages) takes its own with [`retain_refs`], and
//! one that forgets them (a deleted session) drops them with [`release_refs`];
//! [`ArtifactStore::gc`] then deletes blobs nobody references.
//!
//! A payload that already is a reference string is left as it is, so
//! externalizing twice is harmless. The flip side: a tool output whose whole
//! text happens to be a well-formed reference string is indistinguishable from
//! one, and [`resolve`] will try to load it.

use crate::message::{Block, Message};

use super::{blob_ref, parse_blob_ref, ArtifactStore, BlobError};

/// Which payloads [`externalize`] moves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExternalizePolicy {
    /// Payloads strictly longer than this many bytes are moved (default 4096).
    pub min_bytes: usize,
    /// Move tool result contents (default true).
    pub tool_results: bool,
    /// Move image data (default true).
    pub images: bool,
    /// Move the text of text and thinking blocks (default false; true for
    /// transcripts).
    pub text: bool,
}

/// The threshold above which a transcript's payloads go to the blob store.
pub const TRANSCRIPT_MIN_BYTES: usize = 64 * 1024;

impl ExternalizePolicy {
    /// What a session's store externalizes by default: tool results, images
    /// and texts longer than [`TRANSCRIPT_MIN_BYTES`] (64 KiB).
    pub const TRANSCRIPT: ExternalizePolicy = ExternalizePolicy {
        min_bytes: TRANSCRIPT_MIN_BYTES,
        tool_results: true,
        images: true,
        text: true,
    };

    /// Never externalize anything.
    pub const NEVER: ExternalizePolicy = ExternalizePolicy {
        min_bytes: usize::MAX,
        tool_results: false,
        images: false,
        text: false,
    };

    /// Builder: move payloads strictly longer than `min_bytes`.
    pub fn min_bytes(mut self, min_bytes: usize) -> Self {
        self.min_bytes = min_bytes;
        self
    }

    /// The payload string of `block` this policy moves out (whatever its
    /// length), with its media type.
    pub fn payload_mut<'a>(&self, block: &'a mut Block) -> Option<(&'a mut String, &'a str)> {
        match block {
            Block::ToolResult { content, .. } if self.tool_results => Some((content, "text/plain")),
            Block::Image { data, media_type } if self.images => Some((data, media_type.as_str())),
            Block::Text { text } | Block::Thinking { text, .. } if self.text => {
                Some((text, "text/plain"))
            }
            _ => None,
        }
    }
}

impl Default for ExternalizePolicy {
    fn default() -> Self {
        ExternalizePolicy {
            min_bytes: 4096,
            tool_results: true,
            images: true,
            text: false,
        }
    }
}

/// The payload string of a block that can be externalized, if any.
fn payload_mut<'a>(block: &'a mut Block, policy: &ExternalizePolicy) -> Option<&'a mut String> {
    match block {
        Block::ToolResult { content, .. } if policy.tool_results => Some(content),
        Block::Image { data, .. } if policy.images => Some(data),
        _ => None,
    }
}

fn payload(block: &Block) -> Option<&str> {
    match block {
        Block::ToolResult { content, .. } => Some(content),
        Block::Image { data, .. } => Some(data),
        _ => None,
    }
}

/// A copy of `msg` with its large payloads moved to `store`.
pub fn externalize_message(
    msg: &Message,
    store: &ArtifactStore,
    policy: &ExternalizePolicy,
) -> Result<Message, BlobError> {
    let mut out = msg.clone();
    externalize(std::slice::from_mut(&mut out), store, policy)?;
    Ok(out)
}

/// Move the large payloads of `messages` to `store`, in place. Returns how
/// many payloads were replaced by references.
pub fn externalize(
    messages: &mut [Message],
    store: &ArtifactStore,
    policy: &ExternalizePolicy,
) -> Result<usize, BlobError> {
    let mut n = 0;
    for msg in messages {
        for block in &mut msg.content {
            if let Some(p) = payload_mut(block, policy) {
                if p.len() > policy.min_bytes && parse_blob_ref(p).is_none() {
                    let hash = store.put_str(p)?;
                    *p = blob_ref(&hash);
                    n += 1;
                }
            }
        }
    }
    Ok(n)
}

/// A copy of `msg` with every reference replaced by its (verified) payload.
pub fn resolve_message(msg: &Message, store: &ArtifactStore) -> Result<Message, BlobError> {
    let mut out = msg.clone();
    resolve(std::slice::from_mut(&mut out), store)?;
    Ok(out)
}

/// Replace every reference in `messages` by its payload, in place. Returns
/// how many were resolved. Fails on a missing or corrupt blob (the messages
/// may then be partly resolved).
pub fn resolve(messages: &mut [Message], store: &ArtifactStore) -> Result<usize, BlobError> {
    let all = ExternalizePolicy {
        min_bytes: 0,
        tool_results: true,
        images: true,
        text: false,
    };
    let mut n = 0;
    for msg in messages {
        for block in &mut msg.content {
            if let Some(p) = payload_mut(block, &all) {
                if let Some(hash) = parse_blob_ref(p) {
                    let text = store.load_string(hash)?;
                    *p = text;
                    n += 1;
                }
            }
        }
    }
    Ok(n)
}

/// The hashes referenced by `messages`, in order of appearance (repeats kept).
pub fn referenced_blobs(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(payload)
        .filter_map(parse_blob_ref)
        .map(str::to_string)
        .collect()
}

/// Take one reference for every reference string in `messages` (a new holder
/// of copies, e.g. a fork). Returns how many were taken.
pub fn retain_refs(messages: &[Message], store: &ArtifactStore) -> Result<usize, BlobError> {
    let hashes = referenced_blobs(messages);
    for h in &hashes {
        store.retain(h)?;
    }
    Ok(hashes.len())
}

/// Drop one reference for every reference string in `messages` (the holder
/// goes away). Returns how many were dropped.
pub fn release_refs(messages: &[Message], store: &ArtifactStore) -> Result<usize, BlobError> {
    let hashes = referenced_blobs(messages);
    for h in &hashes {
        store.release(h)?;
    }
    Ok(hashes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn big_tool_message(n: usize) -> Message {
        Message::tool_result("call_1", "x".repeat(n), false)
    }

    #[test]
    fn small_payloads_stay_inline() {
        let store = ArtifactStore::in_memory();
        let m = big_tool_message(10);
        let e = externalize_message(&m, &store, &ExternalizePolicy::default()).unwrap();
        assert_eq!(e, m);
        assert_eq!(store.stats().unwrap().0, 0);
    }

    #[test]
    fn large_payloads_round_trip_and_externalize_is_idempotent() {
        let store = ArtifactStore::in_memory();
        let img = Message::new(
            Role::User,
            vec![
                Block::Text {
                    text: "look".into(),
                },
                Block::Image {
                    media_type: "image/png".into(),
                    data: "QUJD".repeat(2000),
                },
            ],
        );
        let mut msgs = vec![big_tool_message(5000), img];
        let orig = msgs.clone();
        let policy = ExternalizePolicy::default();
        assert_eq!(externalize(&mut msgs, &store, &policy).unwrap(), 2);
        assert_eq!(externalize(&mut msgs, &store, &policy).unwrap(), 0);
        assert_eq!(referenced_blobs(&msgs).len(), 2);
        assert_ne!(msgs, orig);
        let mut back = msgs.clone();
        assert_eq!(resolve(&mut back, &store).unwrap(), 2);
        assert_eq!(back, orig);
    }
}
