//! Line framing on payload bytes: how one JSON payload becomes one
//! checksummed, chained JSONL line, and how a line is checked without a parse.
//!
//! This module sits below [`crate::record`], [`crate::store`] and
//! [`crate::transcript`]: it knows nothing of record types, only that a
//! payload is a JSON object whose first key is `"record"`. A line is
//!
//! ```text
//! {"seq":7,"record":"message",<payload fields>[,"batch":9],"prev":"<32 hex>","h":"<32 hex>"}\n
//! ```
//!
//! `h` is the first 16 bytes of BLAKE3 over the line's bytes up to (not
//! including) the `,"h":"` that introduces it, so it covers `seq`, the payload,
//! the batch marker and `prev`. `prev` is the `h` of the record before (all
//! zeros for the header, `seq` 0). `batch`, present only on the records of a
//! multi-record append, is the `seq` of the batch's last record: a reader holds
//! such records back until that last record verifies, so a batch cut by a crash
//! is never half visible. The framing is positional, so checking it needs no
//! JSON parse. See `docs/FORMAT.md`.

use std::ops::Range;

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
/// What introduces the batch marker, right before `prev`.
const BATCH_TAG: &[u8] = b",\"batch\":";
/// What every line starts with.
const SEQ_TAG: &[u8] = b"{\"seq\":";
/// What the payload starts with, right after `seq`.
const RECORD_TAG: &[u8] = b"\"record\":\"";

/// Keys reserved by the framing: no payload may use them at its top level.
pub const RESERVED_KEYS: &[&str] = &["seq", "record", "batch", "prev", "h"];

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

/// The framing of one verified line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The record's sequence number.
    pub seq: u64,
    /// The `h` of the record before it, as this line claims.
    pub prev: Hash,
    /// This line's own hash.
    pub hash: Hash,
    /// For a record of a multi-record batch: the `seq` of the batch's last record.
    pub batch: Option<u64>,
    /// Byte range of the `"record"` tag's value (the kind), when well formed.
    kind: Option<Range<usize>>,
    /// Byte offset of the `,` that follows the kind (start of the fields).
    fields_start: usize,
    /// Byte offset of the `,` that ends the payload (before `batch` or `prev`).
    fields_end: usize,
}

impl Frame {
    /// The record kind (the `"record"` tag), when the line carries a plain one.
    pub fn kind<'a>(&self, line: &'a [u8]) -> Option<&'a str> {
        let range = self.kind.clone()?;
        std::str::from_utf8(&line[range]).ok()
    }
}

/// Encode one payload as a complete line (with its trailing newline) appended
/// to `out`; returns the line's hash, which is the next line's `prev`.
///
/// `payload` must be a compact JSON object whose first key is `"record"` and
/// which uses none of [`RESERVED_KEYS`] otherwise (the typed layer checks).
/// `batch` is the last `seq` of the multi-record batch this line belongs to,
/// `None` for a single-record append.
pub fn encode(out: &mut Vec<u8>, seq: u64, prev: &Hash, batch: Option<u64>, payload: &str) -> Hash {
    let start = out.len();
    out.extend_from_slice(SEQ_TAG);
    out.extend_from_slice(seq.to_string().as_bytes());
    out.push(b',');
    // `payload` is `{"record":"...",...}`: splice its inside.
    let inner = payload
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(payload);
    out.extend_from_slice(inner.as_bytes());
    if let Some(last) = batch {
        out.extend_from_slice(BATCH_TAG);
        out.extend_from_slice(last.to_string().as_bytes());
    }
    out.extend_from_slice(b",\"prev\":\"");
    push_hex(out, prev);
    out.push(b'"');
    let hash = hash_bytes(&out[start..]);
    out.extend_from_slice(b",\"h\":\"");
    push_hex(out, &hash);
    out.extend_from_slice(b"\"}\n");
    hash
}

/// Check a line's framing and hash without parsing its payload.
/// `line` excludes the trailing newline.
pub fn verify(line: &[u8]) -> Result<Frame, LineError> {
    if line.len() < H_SUFFIX_LEN + PREV_LEN + SEQ_TAG.len() + 1 || !line.starts_with(SEQ_TAG) {
        return Err(LineError::BadFraming);
    }
    let h_start = line.len() - H_SUFFIX_LEN;
    let suffix = &line[h_start..];
    if !suffix.starts_with(b",\"h\":\"") || !suffix.ends_with(b"\"}") {
        return Err(LineError::BadFraming);
    }
    let hash = parse_hex(&suffix[6..6 + 2 * HASH_LEN]).ok_or(LineError::BadFraming)?;
    let prev_at = h_start - PREV_LEN;
    let prev_part = &line[prev_at..h_start];
    if !prev_part.starts_with(b",\"prev\":\"") || prev_part[PREV_LEN - 1] != b'"' {
        return Err(LineError::BadFraming);
    }
    let prev = parse_hex(&prev_part[9..9 + 2 * HASH_LEN]).ok_or(LineError::BadFraming)?;
    let digits = &line[SEQ_TAG.len()..prev_at];
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 20 || digits.get(n) != Some(&b',') {
        return Err(LineError::BadFraming);
    }
    let seq = parse_u64(&digits[..n]).ok_or(LineError::BadFraming)?;
    let body_start = SEQ_TAG.len() + n + 1;
    // An optional `,"batch":<digits>` right before `prev`.
    let tail_digits = line[body_start..prev_at]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let digits_at = prev_at - tail_digits;
    let (batch, fields_end) = if (1..=20).contains(&tail_digits)
        && digits_at >= body_start + BATCH_TAG.len()
        && &line[digits_at - BATCH_TAG.len()..digits_at] == BATCH_TAG
    {
        let last = parse_u64(&line[digits_at..prev_at]).ok_or(LineError::BadFraming)?;
        (Some(last), digits_at - BATCH_TAG.len())
    } else {
        (None, prev_at)
    };
    if hash_bytes(&line[..h_start]) != hash {
        return Err(LineError::ChecksumMismatch);
    }
    let kind = record_kind(line, body_start, fields_end);
    let fields_start = kind.as_ref().map_or(fields_end, |k| k.end + 1);
    Ok(Frame {
        seq,
        prev,
        hash,
        batch,
        kind,
        fields_start,
        fields_end,
    })
}

/// Verify `line` and hand its kind and payload fields (as one JSON object,
/// without the `"record"` tag and the framing) to `parse`.
///
/// The line buffer is used as scratch space: the fields between the kind and
/// the framing suffix are parsed in place as their own object (two framing
/// bytes are overwritten with braces and restored), so no copy is made and
/// the framing keys never reach the payload.
pub fn decode_with<T>(
    line: &mut [u8],
    parse: impl FnOnce(&str, &str) -> Result<T, String>,
) -> Result<(Frame, T), LineError> {
    let frame = verify(line)?;
    let kind_range = frame.kind.clone().ok_or(LineError::BadFraming)?;
    let kind = std::str::from_utf8(&line[kind_range])
        .map_err(|_| LineError::NotUtf8)?
        .to_owned();
    let (start, end) = (frame.fields_start, frame.fields_end);
    let value = if start == end {
        parse(&kind, "{}")
    } else if start < end && line[start] == b',' {
        let end_byte = line[end];
        line[start] = b'{';
        line[end] = b'}';
        let parsed = std::str::from_utf8(&line[start..=end])
            .map_err(|_| LineError::NotUtf8)
            .map(|text| parse(&kind, text));
        line[start] = b',';
        line[end] = end_byte;
        parsed?
    } else {
        return Err(LineError::BadFraming);
    };
    value.map(|v| (frame, v)).map_err(LineError::BadRecord)
}

/// Byte range of the `"record"` tag's value, which the writer always puts
/// right after `seq`; `None` when it is missing or escaped.
fn record_kind(line: &[u8], body_start: usize, fields_end: usize) -> Option<Range<usize>> {
    let body = line.get(body_start..fields_end)?;
    if !body.starts_with(RECORD_TAG) {
        return None;
    }
    let start = body_start + RECORD_TAG.len();
    let len = line[start..fields_end]
        .iter()
        .position(|&b| b == b'"' || b == b'\\')?;
    (line.get(start + len) == Some(&b'"')).then_some(start..start + len)
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    std::str::from_utf8(digits).ok()?.parse().ok()
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

/// The bytes every line ending with hash `h` ends with (newline included):
/// a cheap check that a file still ends where a writer left it.
pub fn line_suffix(hash: &Hash) -> Vec<u8> {
    let mut out = b",\"h\":\"".to_vec();
    push_hex(&mut out, hash);
    out.extend_from_slice(b"\"}\n");
    out
}

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize]);
        out.push(DIGITS[(b & 15) as usize]);
    }
}

/// The value of each byte as a lowercase hex digit, `0xff` when it is none.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

fn parse_hex(text: &[u8]) -> Option<Hash> {
    if text.len() != 2 * HASH_LEN {
        return None;
    }
    let mut out = [0u8; HASH_LEN];
    // One table lookup per digit, one check for the whole hash.
    let mut invalid = 0u8;
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let (hi, lo) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        invalid |= hi | lo;
        *byte = hi << 4 | lo;
    }
    (invalid & 0xf0 == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, prev: &Hash, batch: Option<u64>, payload: &str) -> (Vec<u8>, Hash) {
        let mut out = Vec::new();
        let h = encode(&mut out, seq, prev, batch, payload);
        assert_eq!(out.pop(), Some(b'\n'));
        (out, h)
    }

    fn fields(line: &[u8]) -> Result<(Frame, (String, String)), LineError> {
        let mut owned = line.to_vec();
        let out = decode_with(&mut owned, |k, t| Ok((k.to_string(), t.to_string())));
        assert_eq!(owned, line, "decode must restore the buffer");
        out
    }

    #[test]
    fn hex_parses_exactly_what_hex_writes() {
        let h = hash_bytes(b"memoir");
        let text = hex(&h);
        assert_eq!(parse_hex(text.as_bytes()), Some(h));
        assert_eq!(parse_hex(hex(&ZERO_HASH).as_bytes()), Some(ZERO_HASH));
        // Every byte that is no lowercase hex digit, at every position.
        for bad in (0..=255u8).filter(|b| !b"0123456789abcdef".contains(b)) {
            for at in [0, 1, text.len() - 1] {
                let mut t = text.clone().into_bytes();
                t[at] = bad;
                assert_eq!(parse_hex(&t), None, "byte {bad:#x} at {at}");
            }
        }
        assert_eq!(parse_hex(&text.as_bytes()[1..]), None);
    }

    #[test]
    fn round_trip_with_and_without_batch() {
        let (l, h) = line(3, &ZERO_HASH, None, r#"{"record":"message","text":"a"}"#);
        let (f, (kind, text)) = fields(&l).unwrap();
        assert_eq!((f.seq, f.hash, f.prev, f.batch), (3, h, ZERO_HASH, None));
        assert_eq!(
            (kind.as_str(), text.as_str()),
            ("message", r#"{"text":"a"}"#)
        );

        let (l, h2) = line(4, &h, Some(6), r#"{"record":"taint","private":true}"#);
        assert!(l.windows(10).any(|w| w == b",\"batch\":6"));
        let (f, (kind, text)) = fields(&l).unwrap();
        assert_eq!((f.seq, f.prev, f.hash, f.batch), (4, h, h2, Some(6)));
        assert_eq!(
            (kind.as_str(), text.as_str()),
            ("taint", r#"{"private":true}"#)
        );

        let (l, _) = line(5, &h, Some(5), r#"{"record":"x"}"#);
        let (f, (kind, text)) = fields(&l).unwrap();
        assert_eq!(
            (f.batch, kind.as_str(), text.as_str()),
            (Some(5), "x", "{}")
        );
    }

    #[test]
    fn a_payload_ending_in_digits_is_not_a_batch_marker() {
        let (l, _) = line(1, &ZERO_HASH, None, r#"{"record":"summary","turns":12}"#);
        let (f, (_, text)) = fields(&l).unwrap();
        assert_eq!((f.batch, text.as_str()), (None, r#"{"turns":12}"#));
    }

    #[test]
    fn any_flipped_byte_or_cut_is_detected() {
        let (l, _) = line(1, &ZERO_HASH, Some(9), r#"{"record":"message","t":"abc"}"#);
        for i in 0..l.len() {
            let mut bad = l.clone();
            bad[i] ^= 0x01;
            assert!(verify(&bad).is_err(), "flip at {i} accepted");
        }
        for cut in 0..l.len() {
            assert!(verify(&l[..cut]).is_err(), "prefix {cut} accepted");
        }
    }
}
