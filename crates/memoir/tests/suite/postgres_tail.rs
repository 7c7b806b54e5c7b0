//! On PostgreSQL, an append never acknowledges a record the
//! reader would skip. When the rows of a session do not end at its recorded
//! last `seq` (a copied or re-inserted row, a lowered `last_seq`), appends are
//! refused with a typed error (`StoreError::BrokenTail`, kind `Corrupt`: not a
//! retryable conflict), through a cached tail and a fresh handle alike.

use crate::postgres_common;

use memoir::error::{ErrorKind, StoreError};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::postgres::{PgStore, VectorMode};
use memoir::store::LogStore;
use memoir::Error;

use postgres_common::{pg_store, POSTGRES_URL};

fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

fn assert_refused(result: memoir::Result<memoir::store::Appended>) {
    match result {
        Err(Error::Store(StoreError::BrokenTail { id, .. })) => assert_eq!(id, "s"),
        other => panic!("expected BrokenTail, got {other:?}"),
    }
}

#[test]
fn a_copied_row_beyond_the_tail_refuses_appends() {
    let Some((pg, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    pg.create(&SessionMeta::new("s")).unwrap();
    pg.append("s", &[msg("one"), msg("two"), msg("three")], None)
        .unwrap();
    // An older record copied to the end (the "reordered tail" of the issue).
    let mut c = schema.client();
    c.execute(
        "INSERT INTO memoir_records (session_id, seq, line)
         SELECT session_id, 4, line FROM memoir_records WHERE session_id = 's' AND seq = 2",
        &[],
    )
    .unwrap();
    let before = pg.read("s").unwrap();
    assert_eq!(before.records.len(), 3, "the reader skips the copy");
    // Cached tail (fast path) and a fresh handle (locked path) both refuse.
    let err = pg.append("s", &[msg("four")], None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_refused(Err(err));
    let fresh = PgStore::connect(&schema.url, schema.options(VectorMode::Auto)).unwrap();
    assert_refused(fresh.append("s", &[msg("four")], None));
    assert_refused(fresh.append("s", &[msg("four")], Some(4)));
    let after = pg.read("s").unwrap();
    assert_eq!(
        after.records.len(),
        3,
        "nothing acknowledged, nothing written"
    );
}

#[test]
fn a_lowered_last_seq_refuses_appends() {
    let Some((pg, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    pg.create(&SessionMeta::new("s")).unwrap();
    pg.append("s", &[msg("one"), msg("two")], None).unwrap();
    let mut c = schema.client();
    c.execute(
        "UPDATE memoir_sessions SET last_seq = 1 WHERE id = 's'",
        &[],
    )
    .unwrap();
    let fresh = PgStore::connect(&schema.url, schema.options(VectorMode::Auto)).unwrap();
    assert_refused(fresh.append("s", &[msg("x")], None));
    assert_eq!(fresh.read("s").unwrap().last_seq, 2);
}
