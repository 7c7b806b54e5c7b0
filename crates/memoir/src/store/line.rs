//! Typed lines: one [`Record`] inside one [`crate::frame`] line.
//!
//! The framing works on payload bytes; this module is the only place that
//! joins it to the record types, for every backend that stores lines (files,
//! PostgreSQL rows, exports).

use crate::frame::{self, Hash, LineError};
use crate::record::Record;

/// A verified, decoded line.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The record's sequence number.
    pub seq: u64,
    /// The `h` of the record before it, as this line claims.
    pub prev: Hash,
    /// This line's own hash.
    pub hash: Hash,
    /// The last `seq` of the multi-record batch this record belongs to.
    pub batch: Option<u64>,
    /// The payload.
    pub record: Record,
}

/// Encode one record of a single-record append as a complete line (with the
/// trailing newline) appended to `out`; returns the line's hash.
pub fn encode_into(
    out: &mut Vec<u8>,
    seq: u64,
    prev: &Hash,
    record: &Record,
) -> Result<Hash, serde_json::Error> {
    encode_in_batch(out, seq, prev, None, record)
}

/// Encode one record that belongs to a multi-record batch ending at `seq`
/// `batch` (or to no batch, with `None`).
pub fn encode_in_batch(
    out: &mut Vec<u8>,
    seq: u64,
    prev: &Hash,
    batch: Option<u64>,
    record: &Record,
) -> Result<Hash, serde_json::Error> {
    let payload = record.to_json_string()?;
    Ok(frame::encode(out, seq, prev, batch, &payload))
}

/// Encode `records` as one batch whose first record gets `seq` `first_seq`
/// after a record with hash `prev`: a lone record carries no batch marker,
/// each record of a longer batch names the batch's last `seq`. Returns the
/// last record's hash and `seq`.
pub fn encode_batch(
    out: &mut Vec<u8>,
    first_seq: u64,
    prev: &Hash,
    records: &[Record],
) -> Result<(Hash, u64), serde_json::Error> {
    let last_seq = (first_seq + records.len() as u64).saturating_sub(1);
    let batch = (records.len() > 1).then_some(last_seq);
    let mut hash = *prev;
    for (i, record) in records.iter().enumerate() {
        hash = encode_in_batch(out, first_seq + i as u64, &hash, batch, record)?;
    }
    Ok((hash, last_seq))
}

/// Verify and parse one line (without its trailing newline). The buffer is
/// used as scratch space and restored (see [`frame::decode_with`]).
pub fn decode(line: &mut [u8]) -> Result<Decoded, LineError> {
    let (f, record) = frame::decode_with(line, |kind, text| {
        // The kind is read in place, unescaped: one that JSON would have to
        // escape (a control character, a quote or a backslash) could not be
        // written back as the same line, so it is no valid kind.
        if kind.is_empty()
            || kind
                .chars()
                .any(|c| c.is_control() || c == '"' || c == '\\')
        {
            return Err(format!("invalid record kind {kind:?}"));
        }
        let record = Record::from_json_str(kind, text).map_err(|e| e.to_string())?;
        // A reserved key among the fields (a second `"record"` tag, say)
        // could not be written back as the same record: no writer of this
        // format produces one.
        let reserved = record.reserved_fields().next();
        match reserved {
            Some(key) => Err(format!("payload field {key:?} is reserved by the framing")),
            None => Ok(record),
        }
    })?;
    Ok(Decoded {
        seq: f.seq,
        prev: f.prev,
        hash: f.hash,
        batch: f.batch,
        record,
    })
}

/// Whether `record`, written as a line, would be read back: it is encoded
/// and decoded with the reader's own rules (the error says why not).
pub fn check_readable(record: &Record) -> Result<(), String> {
    let mut line = Vec::new();
    encode_into(&mut line, 1, &frame::ZERO_HASH, record).map_err(|e| e.to_string())?;
    line.pop();
    decode(&mut line).map(|_| ()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ZERO_HASH;

    #[test]
    fn a_kind_json_would_escape_is_refused() {
        // Found by the fuzzer: a raw tab in the kind decoded, but the record
        // re-encoded (with the tab escaped) no longer decoded.
        for kind in ["tit\te", "a\\b", ""] {
            let payload = format!("\"record\":\"{kind}\",\"title\":\"t\"");
            let mut out = Vec::new();
            frame::encode(&mut out, 4, &ZERO_HASH, None, &payload);
            out.pop();
            assert!(decode(&mut out).is_err(), "kind {kind:?} must be refused");
        }
    }
    use crate::message::Message;
    use crate::record::Taint;

    #[test]
    fn a_reserved_key_among_the_fields_is_refused() {
        // Found by the fuzzer: a second `"record"` tag among an unknown
        // record's fields decoded, but re-encoding dropped it.
        for fields in [
            "\"record\":\"tmtle\",\"titleeq\":4,\"record\":\"title\"",
            "\"record\":\"message\",\"role\":\"user\",\"content\":[],\"seq\":9",
            "\"record\":\"goal\",\"h\":\"x\"",
        ] {
            let mut out = Vec::new();
            frame::encode(&mut out, 4, &ZERO_HASH, None, fields);
            out.pop();
            let err = decode(&mut out).expect_err(fields);
            assert!(format!("{err:?}").contains("reserved"), "{err:?}");
        }
    }

    #[test]
    fn records_round_trip_and_unknowns_survive() {
        let mut m = Message::user("hello \"world\"\n");
        m.extra.insert("future".into(), serde_json::json!({"a": 1}));
        let mut raw = serde_json::Map::new();
        raw.insert("x".into(), serde_json::json!([1, 2]));
        let records = vec![
            Record::Message(m),
            Record::Taint(Taint::default()),
            Record::Unknown {
                kind: "goal_anchor".into(),
                raw,
            },
        ];
        let mut out = Vec::new();
        let (_, last) = encode_batch(&mut out, 1, &ZERO_HASH, &records).unwrap();
        assert_eq!(last, 3);
        let mut prev = ZERO_HASH;
        for (i, line) in out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            let d = decode(&mut line.to_vec()).unwrap();
            assert_eq!((d.seq, d.prev, d.batch), (i as u64 + 1, prev, Some(3)));
            assert_eq!(d.record, records[i]);
            prev = d.hash;
        }
    }

    #[test]
    fn a_payload_using_the_batch_key_is_refused() {
        let mut m = Message::user("x");
        m.extra.insert("batch".into(), serde_json::json!(5));
        assert!(encode_into(&mut Vec::new(), 1, &ZERO_HASH, &Record::Message(m)).is_err());
    }
}
