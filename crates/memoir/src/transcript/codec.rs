//! Line framing: how one [`Record`] becomes one checksummed, chained JSONL line.
//!
//! A line is a JSON object whose first key is `seq`, whose second is the
//! record's `"record"` tag, and whose last two keys are `prev` and `h`:
//!
//! ```text
//! {"seq":7,"record":"message",<payload fields>,"prev":"<32 hex>","h":"<32 hex>"}\n
//! ```
//!
//! `h` is the first 16 bytes of BLAKE3 over the line's bytes up to (not
//! including) the `,"h":"` that introduces it, so it covers `seq`, the payload
//! and `prev`. `prev` is the `h` of the record before (all zeros for the header,
//! `seq` 0). A reader therefore tells a torn or edited line (its own `h` fails),
//! a missing or reordered record (`seq` is not the next one, or `prev` does not
//! name the previous `h`) from a good one, without trusting anything else.
//! The framing is positional, so checking it needs no JSON parse.

use crate::record::Record;

/// Width of a record hash in bytes.
pub const HASH_LEN: usize = 16;

/// A record hash (truncated BLAKE3).
pub type Hash = [u8; HASH_LEN];

/// The `prev` of the header record.
pub const ZERO_HASH: Hash = [0; HASH_LEN];

/// `,"h":"` + 32 hex + `"}`.
const H_SUFFIX_LEN: usize = 6 + 2 * HASH_LEN + 2;
/// `,"prev":"` + 32 hex + `"`.
const PREV_LEN: usize = 9 + 2 * HASH_LEN + 1;

/// Keys reserved by the framing: no payload may use them.
pub const RESERVED_KEYS: &[&str] = &["seq", "record", "prev", "h"];

/// Why a line was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// Not valid UTF-8.
    NotUtf8,
    /// The framing (`seq` first, `prev`/`h` last) is missing or malformed.
    BadFraming,
    /// The line's own hash does not match its bytes (edited or torn).
    ChecksumMismatch,
    /// Framed and checksummed, but the payload is not a valid record of its kind.
    BadRecord(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::NotUtf8 => write!(f, "not UTF-8"),
            LineError::BadFraming => write!(f, "not a framed record (garbage or torn)"),
            LineError::ChecksumMismatch => write!(f, "checksum mismatch (edited or torn)"),
            LineError::BadRecord(e) => write!(f, "invalid record: {e}"),
        }
    }
}

/// A verified line.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The record's sequence number.
    pub seq: u64,
    /// The `h` of the record before it, as this line claims.
    pub prev: Hash,
    /// This line's own hash.
    pub hash: Hash,
    /// The payload.
    pub record: Record,
}

/// Encode one record as a complete line (with the trailing newline) appended
/// to `out`; returns the line's hash, which is the next line's `prev`.
pub fn encode_into(
    out: &mut Vec<u8>,
    seq: u64,
    prev: &Hash,
    record: &Record,
) -> Result<Hash, serde_json::Error> {
    let payload = record.to_json_string()?;
    let start = out.len();
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(seq.to_string().as_bytes());
    out.push(b',');
    // `payload` is `{"record":"...",...}`: splice its inside.
    out.extend_from_slice(&payload.as_bytes()[1..payload.len() - 1]);
    out.extend_from_slice(b",\"prev\":\"");
    push_hex(out, prev);
    out.push(b'"');
    let hash = hash_bytes(&out[start..]);
    out.extend_from_slice(b",\"h\":\"");
    push_hex(out, &hash);
    out.extend_from_slice(b"\"}\n");
    Ok(hash)
}

/// Check a line's framing and hash without parsing its payload; returns its
/// `seq`, `prev` and `h`. `line` excludes the trailing newline.
pub fn verify_frame(line: &[u8]) -> Result<(u64, Hash, Hash), LineError> {
    if line.len() < H_SUFFIX_LEN + PREV_LEN + 8 || !line.starts_with(b"{\"seq\":") {
        return Err(LineError::BadFraming);
    }
    let h_start = line.len() - H_SUFFIX_LEN;
    let suffix = &line[h_start..];
    if !suffix.starts_with(b",\"h\":\"") || !suffix.ends_with(b"\"}") {
        return Err(LineError::BadFraming);
    }
    let hash = parse_hex(&suffix[6..6 + 2 * HASH_LEN]).ok_or(LineError::BadFraming)?;
    let prev_part = &line[h_start - PREV_LEN..h_start];
    if !prev_part.starts_with(b",\"prev\":\"") || prev_part[PREV_LEN - 1] != b'"' {
        return Err(LineError::BadFraming);
    }
    let prev = parse_hex(&prev_part[9..9 + 2 * HASH_LEN]).ok_or(LineError::BadFraming)?;
    let digits = &line[7..];
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 20 || digits.get(n) != Some(&b',') {
        return Err(LineError::BadFraming);
    }
    let seq = std::str::from_utf8(&digits[..n])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(LineError::BadFraming)?;
    if hash_bytes(&line[..h_start]) != hash {
        return Err(LineError::ChecksumMismatch);
    }
    Ok((seq, prev, hash))
}

/// Verify and parse one line (without its trailing newline).
///
/// The line buffer is used as scratch space: the payload between the kind tag
/// and `prev` is parsed in place as its own object (two framing bytes are
/// overwritten with braces), so the framing keys never reach the payload.
pub fn decode(line: &mut [u8]) -> Result<Decoded, LineError> {
    let (seq, prev, hash) = verify_frame(line)?;
    let prev_at = line.len() - H_SUFFIX_LEN - PREV_LEN;
    let (kind_start, kind_end) = record_kind(line).ok_or(LineError::BadFraming)?;
    let kind = std::str::from_utf8(&line[kind_start..kind_end])
        .map_err(|_| LineError::NotUtf8)?
        .to_owned();
    let payload_at = kind_end + 1; // the `,` after the kind's closing quote
    let record = if payload_at == prev_at {
        Record::from_json_str(&kind, "{}")
    } else if payload_at < prev_at && line[payload_at] == b',' {
        line[payload_at] = b'{';
        line[prev_at] = b'}';
        let text = std::str::from_utf8(&line[payload_at..=prev_at]);
        let parsed = text.map_err(|_| LineError::NotUtf8).and_then(|t| {
            Record::from_json_str(&kind, t).map_err(|e| LineError::BadRecord(e.to_string()))
        });
        line[payload_at] = b',';
        line[prev_at] = b',';
        return parsed.map(|record| Decoded {
            seq,
            prev,
            hash,
            record,
        });
    } else {
        return Err(LineError::BadFraming);
    }
    .map_err(|e| LineError::BadRecord(e.to_string()))?;
    Ok(Decoded {
        seq,
        prev,
        hash,
        record,
    })
}

/// Byte range of the `"record"` tag, which the writer always puts right after `seq`.
fn record_kind(line: &[u8]) -> Option<(usize, usize)> {
    let after_seq = line.iter().position(|&b| b == b',')? + 1;
    let tag = b"\"record\":\"";
    if !line[after_seq..].starts_with(tag) {
        return None;
    }
    let start = after_seq + tag.len();
    let len = line[start..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\')?;
    (line.get(start + len) == Some(&b'"')).then_some((start, start + len))
}

/// Truncated BLAKE3 of `bytes`.
pub fn hash_bytes(bytes: &[u8]) -> Hash {
    let full = blake3::hash(bytes);
    let mut out = [0u8; HASH_LEN];
    out.copy_from_slice(&full.as_bytes()[..HASH_LEN]);
    out
}

/// Lowercase hex of a hash.
pub fn hex(hash: &Hash) -> String {
    let mut out = Vec::with_capacity(2 * HASH_LEN);
    push_hex(&mut out, hash);
    String::from_utf8(out).unwrap_or_default()
}

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize]);
        out.push(DIGITS[(b & 15) as usize]);
    }
}

fn parse_hex(text: &[u8]) -> Option<Hash> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if text.len() != 2 * HASH_LEN {
        return None;
    }
    let mut out = [0u8; HASH_LEN];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::record::Taint;

    fn decode(line: &[u8]) -> Result<Decoded, LineError> {
        let mut owned = line.to_vec();
        let out = super::decode(&mut owned);
        assert_eq!(owned, line, "decode must restore the buffer");
        out
    }

    fn line(seq: u64, prev: &Hash, rec: &Record) -> (Vec<u8>, Hash) {
        let mut out = Vec::new();
        let h = encode_into(&mut out, seq, prev, rec).unwrap();
        assert_eq!(out.last(), Some(&b'\n'));
        out.pop();
        (out, h)
    }

    #[test]
    fn round_trip_and_chain() {
        let rec = Record::Message(Message::user("hello \"world\"\n"));
        let (l, h) = line(3, &ZERO_HASH, &rec);
        let d = decode(&l).unwrap();
        assert_eq!(d.seq, 3);
        assert_eq!(d.hash, h);
        assert_eq!(d.prev, ZERO_HASH);
        assert_eq!(d.record, rec);
        let (l2, _) = line(4, &h, &Record::Taint(Taint::default()));
        assert_eq!(decode(&l2).unwrap().prev, h);
    }

    #[test]
    fn any_flipped_byte_is_detected() {
        let (l, _) = line(1, &ZERO_HASH, &Record::Message(Message::user("abc")));
        for i in 0..l.len() {
            let mut bad = l.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad).is_err(), "flip at {i} accepted");
        }
        for cut in 0..l.len() {
            assert!(decode(&l[..cut]).is_err(), "prefix {cut} accepted");
        }
    }

    #[test]
    fn unknown_fields_and_kinds_survive() {
        let mut m = Message::user("x");
        m.extra.insert("future".into(), serde_json::json!({"a": 1}));
        let rec = Record::Message(m);
        let (l, _) = line(1, &ZERO_HASH, &rec);
        assert_eq!(decode(&l).unwrap().record, rec);

        let mut raw = serde_json::Map::new();
        raw.insert("x".into(), serde_json::json!([1, 2]));
        let unk = Record::Unknown {
            kind: "goal_anchor".into(),
            raw,
        };
        let (l, _) = line(2, &ZERO_HASH, &unk);
        assert_eq!(decode(&l).unwrap().record, unk);
    }
}
