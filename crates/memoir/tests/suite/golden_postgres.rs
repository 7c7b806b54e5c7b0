//! Golden PostgreSQL rows: `tests/golden/v1/postgres/rows.json`
//! holds the `memoir_sessions` and `memoir_records` rows PostgreSQL stores for
//! `golden`'s parent session, written with the same calls. The writer must
//! produce these rows byte for byte (each `line` is the file store's line, so
//! both stores share one format), and today's reader must read rows inserted
//! verbatim from the file as the same transcript. Skipped with a notice when
//! no server is configured (`source .ci/postgres.sh`); required under CI.

use memoir::store::file::FileStore;
use memoir::store::postgres::{PgStore, VectorMode};
use memoir::store::{Durability, LogStore};
use memoir::transcript::read_in;
use serde_json::{json, Value};

use crate::golden::{golden_dir, header, parent_appends, PARENT};
use crate::postgres_common::{pg_store, pg_url, TempSchema, POSTGRES_URL};

fn rows_path() -> std::path::PathBuf {
    golden_dir().join("postgres/rows.json")
}

/// The session's rows as JSON, columns by name (bytea as hex, time as RFC 3339).
fn dump(client: &mut postgres::Client) -> Value {
    let sessions: Vec<Value> = client
        .query(
            "SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
             project, last_seq, encode(last_hash, 'hex'), deleted_at IS NOT NULL \
             FROM memoir_sessions WHERE id = $1",
            &[&PARENT],
        )
        .unwrap()
        .iter()
        .map(|r| {
            json!({
                "id": r.get::<_, String>(0),
                "created_at": r.get::<_, String>(1),
                "project": r.get::<_, Option<String>>(2),
                "last_seq": r.get::<_, i64>(3),
                "last_hash": r.get::<_, String>(4),
                "deleted": r.get::<_, bool>(5),
            })
        })
        .collect();
    let records: Vec<Value> = client
        .query(
            "SELECT seq, line FROM memoir_records WHERE session_id = $1 ORDER BY seq",
            &[&PARENT],
        )
        .unwrap()
        .iter()
        .map(|r| json!({"seq": r.get::<_, i64>(0), "line": r.get::<_, String>(1)}))
        .collect();
    json!({"memoir_sessions": sessions, "memoir_records": records})
}

#[test]
fn golden_postgres_rows_are_written_byte_for_byte() {
    let Some((pg, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    pg.create(&header(PARENT, 0, None)).unwrap();
    for call in parent_appends() {
        pg.append(PARENT, &call, None).unwrap();
    }
    let mut bytes = serde_json::to_vec_pretty(&dump(&mut schema.client())).unwrap();
    bytes.push(b'\n');
    if std::env::var("MEMOIR_REGEN_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(rows_path().parent().unwrap()).unwrap();
        std::fs::write(rows_path(), &bytes).unwrap();
        return;
    }
    let stored = std::fs::read(rows_path()).unwrap();
    assert!(
        stored == bytes,
        "today's PostgreSQL writer no longer produces the v1 rows\n--- now\n{}",
        String::from_utf8_lossy(&bytes)
    );
    // One format for both stores: the lines are the file's lines.
    let file = std::fs::read_to_string(golden_dir().join(format!("{PARENT}.jsonl"))).unwrap();
    let rows: Value = serde_json::from_slice(&stored).unwrap();
    let lines: Vec<&str> = rows["memoir_records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["line"].as_str().unwrap())
        .collect();
    assert_eq!(lines, file.lines().collect::<Vec<_>>());
}

#[test]
fn golden_postgres_rows_read_as_the_file_transcript() {
    let Some(url) = pg_url(POSTGRES_URL) else {
        return;
    };
    let schema = TempSchema::new(&url);
    let pg = PgStore::connect(&url, schema.options(VectorMode::Auto)).unwrap();
    let rows: Value = serde_json::from_slice(&std::fs::read(rows_path()).unwrap()).unwrap();
    let mut client = schema.client();
    for s in rows["memoir_sessions"].as_array().unwrap() {
        client
            .execute(
                "INSERT INTO memoir_sessions (id, created_at, project, last_seq, last_hash) \
                 VALUES ($1, $2::text::timestamptz, $3, $4, decode($5, 'hex'))",
                &[
                    &s["id"].as_str().unwrap(),
                    &s["created_at"].as_str().unwrap(),
                    &s["project"].as_str(),
                    &s["last_seq"].as_i64().unwrap(),
                    &s["last_hash"].as_str().unwrap(),
                ],
            )
            .unwrap();
    }
    for r in rows["memoir_records"].as_array().unwrap() {
        client
            .execute(
                "INSERT INTO memoir_records (session_id, seq, line) VALUES ($1, $2, $3)",
                &[
                    &PARENT,
                    &r["seq"].as_i64().unwrap(),
                    &r["line"].as_str().unwrap(),
                ],
            )
            .unwrap();
    }
    let from_pg = read_in(&pg, PARENT).unwrap();
    assert!(from_pg.report.is_clean(), "{:?}", from_pg.report);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        golden_dir().join(format!("{PARENT}.jsonl")),
        tmp.path().join(format!("{PARENT}.jsonl")),
    )
    .unwrap();
    let from_file = read_in(&FileStore::new(tmp.path(), Durability::None), PARENT).unwrap();
    assert_eq!(from_pg.messages, from_file.messages);
    assert_eq!(from_pg.last_seq, from_file.last_seq);
    assert_eq!(from_pg.title, from_file.title);
}
