//! One conformance suite for every [`LogStore`] backend
//! ([`memoir::store::testing::store`]): the `conformance!` macro turns each
//! check into one test per backend: the file store in a temp dir, the
//! in-memory store, PostgreSQL without pgvector (`MEMOIR_TEST_POSTGRES_URL`)
//! and with it (`MEMOIR_TEST_PGVECTOR_URL`), each PostgreSQL test in a fresh
//! schema. Without those variables the PostgreSQL tests fail under CI and are
//! skipped with a notice elsewhere (`source .ci/postgres.sh` starts both servers).

use crate::postgres_common;

use std::sync::Arc;

use memoir::record::Record;
use memoir::store::file::FileStore;
use memoir::store::postgres::VectorMode;
use memoir::store::testing::store as suite;
use memoir::store::testing::store::{meta, msg, two_handles_race, Store};
use memoir::store::{Durability, LogStore};

use postgres_common::{pg_store, PGVECTOR_URL, POSTGRES_URL};

conformance!(
    memoir::store::Durability::Flush;
    create_then_read_header,
    create_refuses_taken_and_bad_ids,
    append_and_read_back,
    spans_read_back_their_records,
    empty_append_reports_next_seq,
    header_records_only_by_create,
    expected_seq_conflicts,
    unknown_sessions_are_not_found,
    concurrent_appends_are_gap_free,
    racing_expected_writers_one_wins,
    list_newest_first_and_find_by_prefix,
    fork_by_reference_stitches_parent,
    delete_and_restore,
    sessions_api_over_store,
    trash_lists_reads_and_purges,
    list_project_filters_by_header,
    lease_excludes_a_second_taker,
    fork_refuses_a_cut_beyond_the_parent,
    reused_parent_id_is_not_stitched,
    errors_have_kinds,
);

/// The PostgreSQL backend stores exactly the bytes the file store writes.
#[test]
fn postgres_rows_are_the_file_lines() {
    let Some((pg, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = FileStore::new(dir.path(), Durability::None);
    let m = meta("same", 5);
    let recs = [
        msg("one"),
        Record::Title {
            title: "ü ✓".into(),
        },
        msg("two"),
    ];
    for s in [&file as &dyn LogStore, pg.as_ref()] {
        s.create(&m).unwrap();
        s.append("same", &recs[..1], None).unwrap();
        s.append("same", &recs[1..], None).unwrap();
    }
    let on_disk = std::fs::read_to_string(file.path_of("same").unwrap()).unwrap();
    let mut client = schema.client();
    let rows = client
        .query(
            "SELECT line FROM memoir_records WHERE session_id = 'same' ORDER BY seq",
            &[],
        )
        .unwrap();
    let mut joined = String::new();
    for r in rows {
        joined.push_str(r.get::<_, &str>(0));
        joined.push('\n');
    }
    assert_eq!(joined, on_disk);
}

#[test]
fn two_handles_race_file() {
    let dir = tempfile::tempdir().unwrap();
    let a: Store = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    let b: Store = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    two_handles_race(a, b);
}

fn two_pg_handles(var: &str) {
    let Some((a, schema)) = pg_store(var, VectorMode::Auto) else {
        return;
    };
    let b =
        memoir::store::postgres::PgStore::connect(&schema.url, schema.options(VectorMode::Auto))
            .unwrap();
    two_handles_race(a, Arc::new(b));
}

#[test]
fn two_handles_race_postgres() {
    two_pg_handles(POSTGRES_URL);
}

#[test]
fn two_handles_race_pgvector() {
    two_pg_handles(PGVECTOR_URL);
}
