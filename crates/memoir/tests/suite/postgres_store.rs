//! PostgreSQL-only behaviour of `memoir::store::postgres`: migrations, tamper
//! detection through the shared verifier, blobs, and chunk vectors on both
//! column types (plain `real[]` on the pg15 server, pgvector on pg18).
//! Servers come from `.ci/postgres.sh` (see `postgres_common`).

use crate::postgres_common;

use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::postgres::{
    PgStore, VectorBackend, VectorMode, VectorSearch, MIGRATIONS, SCHEMA_VERSION,
};
use memoir::store::{IssueKind, LogStore};
use memoir::Error;

use postgres_common::{pg_store, pg_url, TempSchema, PGVECTOR_URL, POSTGRES_URL};

fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

#[test]
fn migrations_are_versioned_and_idempotent() {
    let Some(url) = pg_url(POSTGRES_URL) else {
        return;
    };
    let schema = TempSchema::new(&url);
    let a = PgStore::connect(&url, schema.options(VectorMode::Auto)).unwrap();
    assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION);
    // Connecting again (and concurrently) applies nothing twice.
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            let opts = schema.options(VectorMode::Auto);
            std::thread::spawn(move || PgStore::connect(&url, opts).map(|_| ()))
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let mut c = schema.client();
    let rows = c
        .query(
            "SELECT version, name FROM memoir_migrations ORDER BY version",
            &[],
        )
        .unwrap();
    let got: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, MIGRATIONS.iter().map(|m| m.0).collect::<Vec<_>>());
    assert_eq!(
        rows[2].get::<_, String>(1),
        "chunk vectors (real[])",
        "pg15 has no pgvector"
    );
    // A database migrated by a newer memoir is refused, not corrupted.
    c.execute(
        "INSERT INTO memoir_migrations (version, name) VALUES ($1, 'from the future')",
        &[&(SCHEMA_VERSION + 1)],
    )
    .unwrap();
    match PgStore::connect(&url, schema.options(VectorMode::Auto)) {
        Err(Error::Config(m)) => assert!(m.contains("newer"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn bad_urls_and_schemas_are_config_errors() {
    assert!(matches!(
        PgStore::connect("postgres://[::1", Default::default()),
        Err(Error::Config(_))
    ));
    let opts = memoir::store::postgres::PgOptions {
        schema: "Robert'); DROP TABLE x;--".into(),
        ..Default::default()
    };
    assert!(matches!(
        PgStore::connect("postgres://127.0.0.1:1/x", opts),
        Err(Error::Config(_))
    ));
}

#[test]
fn unreachable_server_is_unavailable() {
    let opts = memoir::store::postgres::PgOptions {
        connect_timeout: std::time::Duration::from_secs(2),
        ..Default::default()
    };
    // Port 1 on loopback: nothing listens there.
    let err = PgStore::connect("postgres://postgres@127.0.0.1:1/memoir_test", opts).unwrap_err();
    assert!(
        memoir::store::postgres::is_unavailable(&err),
        "not classified as unavailable: {err}"
    );
}

#[test]
fn tampered_rows_are_reported_like_tampered_lines() {
    let Some((store, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    store.create(&SessionMeta::new("t")).unwrap();
    store
        .append("t", &[msg("a"), msg("b"), msg("c"), msg("d")], None)
        .unwrap();
    let mut c = schema.client();
    // Edit a payload byte of seq 2, and delete seq 3.
    c.execute(
        "UPDATE memoir_records SET line = replace(line, '\"b\"', '\"B\"') WHERE session_id = 't' AND seq = 2",
        &[],
    )
    .unwrap();
    c.execute(
        "DELETE FROM memoir_records WHERE session_id = 't' AND seq = 3",
        &[],
    )
    .unwrap();
    let raw = store.read("t").unwrap();
    let kinds: Vec<(u64, &IssueKind)> =
        raw.report.issues.iter().map(|i| (i.seq, &i.kind)).collect();
    assert!(
        matches!(kinds[0], (2, IssueKind::SkippedCorrupt(_))),
        "{kinds:?}"
    );
    assert!(
        matches!(kinds[1], (4, IssueKind::Gap { missing_from: 2 })),
        "{kinds:?}"
    );
    assert_eq!(
        raw.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [1, 4]
    );
    // Appends continue from the stored tail, never reusing a seq.
    let a = store.append("t", &[msg("e")], None).unwrap();
    assert_eq!(a.first_seq, 5);
}

#[test]
fn another_process_appending_invalidates_the_cached_tail() {
    let Some((a, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    let b = PgStore::connect(&schema.url, schema.options(VectorMode::Auto)).unwrap();
    a.create(&SessionMeta::new("two")).unwrap();
    for i in 0..20 {
        let (w, other) = if i % 3 == 0 { (&b, &*a) } else { (&*a, &b) };
        let got = w.append("two", &[msg(&format!("m{i}"))], None).unwrap();
        assert_eq!(got.first_seq, i + 1);
        assert_eq!(other.read("two").unwrap().last_seq, i + 1);
    }
    assert!(matches!(
        a.append("two", &[msg("x")], Some(3)),
        Err(Error::Conflict { actual: 21, .. })
    ));
    assert!(a.read("two").unwrap().report.is_clean());
}

#[test]
fn blobs_are_stored_once_and_verified() {
    let Some((store, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    let big = vec![7u8; 300_000];
    let h1 = store.put_blob(&big).unwrap();
    let h2 = store.put_blob(&big).unwrap();
    assert_eq!(h1, h2);
    assert_eq!(h1, memoir::blob::hash_bytes(&big));
    store.put_blob(b"small").unwrap();
    assert_eq!(store.blob_stats().unwrap(), (2, 300_005));
    assert_eq!(store.get_blob(&h1).unwrap().unwrap(), big);
    assert!(store.has_blob(&h1).unwrap());
    let missing = memoir::blob::hash_bytes(b"absent");
    assert_eq!(store.get_blob(&missing).unwrap(), None);
    assert!(matches!(store.get_blob("../etc"), Err(Error::Invalid(_))));
    // Bit rot in the database is caught on read.
    let mut c = schema.client();
    c.execute(
        "UPDATE memoir_blobs SET bytes = '\\x00' WHERE hash = $1",
        &[&h1],
    )
    .unwrap();
    assert!(matches!(store.get_blob(&h1), Err(Error::Corrupt { .. })));
    assert!(store.delete_blob(&h1).unwrap());
    assert!(!store.has_blob(&h1).unwrap());
}

/// Deterministic pseudo-random unit-ish vectors.
fn vectors(n: usize, dims: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            (0..dims)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
                })
                .collect()
        })
        .collect()
}

fn brute_force(all: &[Vec<f32>], q: &[f32], k: usize) -> Vec<u64> {
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let mut scored: Vec<(f32, u64)> = all
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let dot: f32 = v.iter().zip(q).map(|(a, b)| a * b).sum();
            (dot / (norm(v) * norm(q)), i as u64)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|s| s.1).collect()
}

fn check_vectors(store: &PgStore, expect: VectorBackend) {
    assert_eq!(store.vector_backend(), expect);
    const DIMS: usize = 48;
    let all = vectors(300, DIMS, 42);
    let items: Vec<(u64, &[f32])> = all
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64, v.as_slice()))
        .collect();
    assert_eq!(store.upsert_vectors("sess-a", &items).unwrap(), 300);
    // Another session's vectors never show up in sess-a's results.
    let other = vectors(50, DIMS, 7);
    let other_items: Vec<(u64, &[f32])> = other
        .iter()
        .enumerate()
        .map(|(i, v)| (1000 + i as u64, v.as_slice()))
        .collect();
    store.upsert_vectors("sess-b", &other_items).unwrap();
    let queries = vectors(10, DIMS, 99);
    let mut recall_hits = 0;
    for q in &queries {
        let want = brute_force(&all, q, 10);
        let exact = store
            .search_vectors("sess-a", q, 10, VectorSearch::Exact)
            .unwrap();
        assert_eq!(exact.iter().map(|h| h.chain_seq).collect::<Vec<_>>(), want);
        assert!(exact.windows(2).all(|w| w[0].score >= w[1].score));
        let approx = store
            .search_vectors("sess-a", q, 10, VectorSearch::Index)
            .unwrap();
        assert!(
            approx.iter().all(|h| h.chain_seq < 1000),
            "other session leaked"
        );
        recall_hits += approx
            .iter()
            .filter(|h| want.contains(&h.chain_seq))
            .count();
    }
    assert!(recall_hits >= 90, "index recall@10 {recall_hits}/100");
    // Upsert replaces: chunk 0 becomes the query itself and ranks first.
    let q = &queries[0];
    store
        .upsert_vectors("sess-a", &[(0, q.as_slice())])
        .unwrap();
    let top = store
        .search_vectors("sess-a", q, 1, VectorSearch::Exact)
        .unwrap();
    assert_eq!(top[0].chain_seq, 0);
    assert!((top[0].score - 1.0).abs() < 1e-4, "{}", top[0].score);
    // Bad input is refused before the database sees it.
    assert!(matches!(
        store.upsert_vectors("sess-a", &[(1, &[1.0, 2.0][..]), (2, &[1.0][..])]),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        store.upsert_vectors("sess-a", &[(1, &[f32::NAN][..])]),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        store.search_vectors("sess-a", &[], 3, VectorSearch::Exact),
        Err(Error::Invalid(_))
    ));
    assert_eq!(store.delete_vectors("sess-a", Some(0)).unwrap(), 1);
    assert_eq!(store.delete_vectors("sess-a", None).unwrap(), 299);
    assert!(store
        .search_vectors("sess-a", q, 5, VectorSearch::Exact)
        .unwrap()
        .is_empty());
}

#[test]
fn vectors_in_plain_arrays() {
    let Some((store, _s)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    check_vectors(&store, VectorBackend::Plain);
}

#[test]
fn vectors_in_pgvector() {
    let Some((store, _s)) = pg_store(PGVECTOR_URL, VectorMode::Auto) else {
        return;
    };
    check_vectors(&store, VectorBackend::PgVector);
}

#[test]
fn plain_vectors_can_be_forced_where_pgvector_exists() {
    let Some((store, _s)) = pg_store(PGVECTOR_URL, VectorMode::Plain) else {
        return;
    };
    check_vectors(&store, VectorBackend::Plain);
}
