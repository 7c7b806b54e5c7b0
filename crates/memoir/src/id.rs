//! Session ids: generation and validation.
//!
//! Every id that becomes part of a path goes through [`validate`] first, so no
//! caller-supplied id can escape the store directory or hide control bytes.

use crate::error::{Error, Result};

/// Longest accepted id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// A new id: UTC `YYYYMMDDTHHMMSS` plus 12 random hex digits from a UUIDv7
/// (so ids sort by creation time, stay unique within a second across
/// processes, and are safe as file names), e.g. `20260101T120000-0190c8a1b2c3`.
pub fn new_id() -> String {
    let now = chrono::Utc::now();
    let uuid = uuid::Uuid::now_v7();
    let bytes = uuid.as_bytes();
    // Bytes 6..16 of a v7 UUID hold the sub-millisecond counter/random bits.
    let mut tail = String::with_capacity(12);
    for b in &bytes[10..16] {
        tail.push_str(&format!("{b:02x}"));
    }
    format!("{}-{}", now.format("%Y%m%dT%H%M%S"), tail)
}

/// Check that `id` is safe to use as a file name and as a key.
///
/// Refused: empty, longer than [`MAX_ID_LEN`], `.` or `..` or any `..`
/// sequence, path separators (`/`, `\`), NUL and other control characters,
/// a leading `.` or `-` (hidden files, option-like names), whitespace.
pub fn validate(id: &str) -> Result<()> {
    let bad = |reason| {
        Err(Error::InvalidId {
            id: id.to_string(),
            reason,
        })
    };
    if id.is_empty() {
        return bad("empty");
    }
    if id.len() > MAX_ID_LEN {
        return bad("longer than 128 bytes");
    }
    if id.contains("..") {
        return bad("contains '..'");
    }
    if id.starts_with('.') || id.starts_with('-') {
        return bad("starts with '.' or '-'");
    }
    for c in id.chars() {
        if c == '/' || c == '\\' {
            return bad("contains a path separator");
        }
        if c == '\0' {
            return bad("contains NUL");
        }
        if c.is_control() {
            return bad("contains a control character");
        }
        if c.is_whitespace() {
            return bad("contains whitespace");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_valid_sortable_and_unique() {
        let ids: Vec<String> = (0..1000).map(|_| new_id()).collect();
        for id in &ids {
            validate(id).unwrap();
        }
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "ids collide");
        assert!(ids.first().unwrap()[..15] <= ids.last().unwrap()[..15]);
    }

    #[test]
    fn hostile_ids_are_refused() {
        for id in [
            "", "..", "../x", "a/b", "a\\b", "a\0b", ".hidden", "-rf", "a b", "a\nb", "x..y",
        ] {
            assert!(validate(id).is_err(), "{id:?} accepted");
        }
        assert!(validate(&"a".repeat(129)).is_err());
        validate(&"a".repeat(128)).unwrap();
        validate("session_1700000000_abcd1234").unwrap();
    }
}
