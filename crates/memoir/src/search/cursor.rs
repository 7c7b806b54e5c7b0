//! Per-session cursors: how far the index has read each session's log.
//!
//! A cursor names the last indexed record (`seq` and the BLAKE3 hash of its
//! JSON) and, for file-backed stores, the file's size and modification time
//! when it was read. On update: an unchanged fingerprint skips the session
//! without reading it; otherwise the log is read and, if the record at
//! `last_seq` still hashes the same, only later records are indexed; if not
//! (the file was rewritten, repaired or replaced) the session is re-indexed.

use std::path::Path;

use crate::record::Record;
use crate::store::SeqRecord;

/// The hash of one record as the cursor keeps it.
pub type RecordHash = [u8; 32];

/// A file's size and modification time (nanoseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
}

impl Fingerprint {
    /// The fingerprint of the file at `location`, when it is a readable file
    /// (`None` for backends whose locations are not files).
    pub fn of(location: &Path) -> Option<Fingerprint> {
        Fingerprint::of_metadata(&std::fs::metadata(location).ok()?)
    }

    /// The fingerprint of a file's metadata (`None` when it is no regular file).
    pub fn of_metadata(meta: &std::fs::Metadata) -> Option<Fingerprint> {
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() {
            return None;
        }
        Some(Fingerprint {
            len: meta.len(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
        })
    }
}

/// How far one session is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The `seq` of the last indexed record (0: only the header).
    pub last_seq: u64,
    /// The hash of that record ([`record_hash`]).
    pub last_hash: RecordHash,
    /// The file's fingerprint when the cursor was written, if file-backed.
    pub fingerprint: Option<Fingerprint>,
}

/// The hash the cursor keeps for a record: BLAKE3 of its JSON.
pub fn record_hash(record: &Record) -> RecordHash {
    let mut hasher = blake3::Hasher::new();
    // Serialising a verified record cannot fail; an empty hash on the
    // impossible error only costs a re-index.
    if let Ok(json) = record.to_json_string() {
        hasher.update(json.as_bytes());
    }
    *hasher.finalize().as_bytes()
}

/// What to do with a session whose log now holds `records` (after the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Index records with index `from..` in `records` (the cursor still holds).
    Extend {
        /// The first record to index.
        from: usize,
    },
    /// Drop what the index holds for the session and index it all.
    Reindex,
}

/// Decide how to catch up with `records` given the stored cursor.
pub fn plan(cursor: Option<&Cursor>, header_hash: &RecordHash, records: &[SeqRecord]) -> Plan {
    let Some(c) = cursor else {
        return Plan::Reindex;
    };
    if c.last_seq == 0 {
        return if c.last_hash == *header_hash {
            Plan::Extend { from: 0 }
        } else {
            Plan::Reindex
        };
    }
    // Records are in ascending seq order; find the cursor's record.
    match records.binary_search_by_key(&c.last_seq, |r| r.seq) {
        Ok(i) if record_hash(&records[i].record) == c.last_hash => Plan::Extend { from: i + 1 },
        _ => Plan::Reindex,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn rec(seq: u64, text: &str) -> SeqRecord {
        SeqRecord {
            seq,
            record: Record::Message(Message::user(text)),
        }
    }

    #[test]
    fn a_cursor_extends_only_while_its_record_still_hashes_the_same() {
        let header = [7u8; 32];
        let log = vec![rec(1, "a"), rec(2, "b"), rec(3, "c")];
        assert_eq!(plan(None, &header, &log), Plan::Reindex);
        let at_two = Cursor {
            last_seq: 2,
            last_hash: record_hash(&log[1].record),
            fingerprint: None,
        };
        assert_eq!(plan(Some(&at_two), &header, &log), Plan::Extend { from: 2 });
        // The same seq now holds different content: the file was rewritten.
        let rewritten = vec![rec(1, "a"), rec(2, "B"), rec(3, "c")];
        assert_eq!(plan(Some(&at_two), &header, &rewritten), Plan::Reindex);
        // The log got shorter than the cursor (records lost in a repair).
        assert_eq!(plan(Some(&at_two), &header, &log[..1]), Plan::Reindex);
        let header_only = Cursor {
            last_seq: 0,
            last_hash: header,
            fingerprint: None,
        };
        assert_eq!(
            plan(Some(&header_only), &header, &log),
            Plan::Extend { from: 0 }
        );
        assert_eq!(
            plan(Some(&header_only), &[0u8; 32], &log),
            Plan::Reindex,
            "another session under the same id"
        );
    }
}
