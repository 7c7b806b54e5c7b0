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
    let payload = payload_of(record)?;
    Ok(frame::encode(out, seq, prev, batch, &payload))
}

/// The payload text of `record` as every writer frames it: refused (before
/// anything is written) when the reader would not read it back
/// ([`check_writable`]).
pub(crate) fn payload_of(record: &Record) -> Result<String, serde_json::Error> {
    check_writable(record).map_err(serde::ser::Error::custom)?;
    record.to_json_string()
}

/// The reader's rule for a record kind ([`decode`] reads it in place,
/// unescaped): not empty, and nothing JSON would escape or a reader would
/// take for one (a control character, a quote or a backslash).
fn check_kind(kind: &str) -> Result<(), String> {
    if kind.is_empty()
        || kind
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\\')
    {
        return Err(format!("invalid record kind {kind:?}"));
    }
    Ok(())
}

/// Refuse, before anything is written, a record [`decode`] would not read
/// back as itself: a kind the reader refuses, or a record of unknown shape
/// ([`Record::Unknown`]) under a kind the reader parses as a known record.
/// (Reserved fields are refused by [`Record::to_json_string`].) So every
/// acknowledged append stays readable, whichever store or front wrote it.
fn check_writable(record: &Record) -> Result<(), String> {
    check_kind(record.kind())?;
    if let Record::Unknown { kind, .. } = record {
        if crate::record::KNOWN_KINDS.contains(&kind.as_str()) {
            return Err(format!(
                "record kind {kind:?} is a known kind: write it as that record, not as raw fields"
            ));
        }
    }
    Ok(())
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
        check_kind(kind)?;
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

    /// Kinds the reader refuses: empty, or holding a character it cannot
    /// read in place (every control character, a quote, a backslash).
    fn unreadable_kinds() -> Vec<String> {
        let mut kinds = vec![String::new()];
        let specials = (0u32..0x20)
            .chain(0x7f..0xa0)
            .filter_map(char::from_u32)
            .chain(['"', '\\']);
        for c in specials {
            kinds.push(c.to_string());
            kinds.push(format!("goal{c}"));
            kinds.push(format!("go{c}al"));
        }
        kinds
    }

    fn unknown(kind: &str) -> Record {
        let mut raw = serde_json::Map::new();
        raw.insert("x".into(), serde_json::json!([1, "two"]));
        Record::Unknown {
            kind: kind.to_string(),
            raw,
        }
    }

    #[test]
    fn every_store_refuses_a_batch_its_reader_would_not_read_back() {
        use crate::record::SessionMeta;
        use crate::store::{file::FileStore, memory::MemStore, Durability, LogStore};
        let dir = tempfile::tempdir().unwrap();
        let stores: Vec<Box<dyn LogStore>> = vec![
            Box::new(FileStore::new(dir.path(), Durability::Flush)),
            Box::new(MemStore::new()),
        ];
        for store in stores {
            store.create(&SessionMeta::new("s")).unwrap();
            store
                .append("s", &[Record::Message(Message::user("kept"))], None)
                .unwrap();
            let bad = unreadable_kinds()
                .into_iter()
                .chain(crate::record::KNOWN_KINDS.iter().map(|k| k.to_string()));
            for kind in bad {
                let batch = [Record::Message(Message::user("with it")), unknown(&kind)];
                assert!(store.append("s", &batch, None).is_err(), "{kind:?}");
                assert!(
                    store.append("s", &batch[1..], None).is_err(),
                    "{kind:?} alone"
                );
            }
            let raw = store.read("s").unwrap();
            assert!(raw.report.is_clean(), "{:?}", raw.report);
            assert_eq!(raw.records.len(), 1, "{:?}", raw.records);
        }
    }

    #[test]
    fn every_record_the_writer_encodes_decodes_as_itself() {
        for kind in unreadable_kinds() {
            let err = encode_into(&mut Vec::new(), 1, &ZERO_HASH, &unknown(&kind))
                .expect_err(&format!("kind {kind:?} must be refused on write"));
            assert!(err.to_string().contains("record kind"), "{err}");
        }
        // An unknown-shape record under a kind the reader parses as a known
        // record would not read back (or not as itself).
        for kind in crate::record::KNOWN_KINDS {
            assert!(
                encode_into(&mut Vec::new(), 1, &ZERO_HASH, &unknown(kind)).is_err(),
                "raw {kind:?} must be refused"
            );
        }
        // What the writer accepts, the reader reads back unchanged.
        for kind in [
            "goal",
            "run outcome",
            "ünïcode-kind",
            "a/b:c~d",
            "x\u{2028}y",
        ] {
            let record = unknown(kind);
            let mut out = Vec::new();
            encode_into(&mut out, 1, &ZERO_HASH, &record).unwrap();
            out.pop();
            assert_eq!(decode(&mut out).unwrap().record, record, "{kind:?}");
        }
    }

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
