//! The PostgreSQL schema: versioned migrations (run under an advisory
//! lock) and the choice of the vector column type.

use super::*;

/// The newest schema version this build knows (see [`MIGRATIONS`]).
pub const SCHEMA_VERSION: i32 = 6;

/// Every migration: version, name, SQL. Versions 3 (chunk vectors) and 5
/// (the cross-session search index's vectors) are written at run time for
/// the vector column type chosen ([`VectorBackend`]).
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "sessions and records",
        "CREATE TABLE memoir_sessions (
            id         text PRIMARY KEY,
            created_at timestamptz NOT NULL,
            project    text,
            last_seq   bigint NOT NULL,
            last_hash  bytea NOT NULL,
            deleted_at timestamptz
        );
        CREATE INDEX memoir_sessions_project ON memoir_sessions (project, created_at DESC);
        CREATE TABLE memoir_records (
            session_id text NOT NULL REFERENCES memoir_sessions (id) ON DELETE CASCADE,
            seq        bigint NOT NULL CHECK (seq >= 0),
            line       text NOT NULL,
            PRIMARY KEY (session_id, seq)
        );",
    ),
    (
        2,
        "blobs",
        "CREATE TABLE memoir_blobs (
            hash       text PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
            size       bigint NOT NULL,
            bytes      bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );",
    ),
    (3, "chunk vectors", ""),
    (
        4,
        "blob media types",
        "ALTER TABLE memoir_blobs ADD COLUMN media_type text;",
    ),
    (5, "search index", ""),
    (
        6,
        "access tokens",
        "CREATE TABLE memoir_tokens (
            id         text PRIMARY KEY,
            entry      text NOT NULL,
            revoked_at timestamptz
        );",
    ),
];

/// Migration 5: the cross-session search index (`memoir::search` on
/// PostgreSQL), its vectors in `ty` (`vector` or `real[]`). Documented in
/// `docs/FORMAT.md`, "PostgreSQL schema".
fn search_index_sql(ty: &str) -> String {
    format!(
        "CREATE TABLE memoir_search_meta (
            key   text PRIMARY KEY,
            value text NOT NULL
        );
        CREATE TABLE memoir_search_sessions (
            sid        bigserial PRIMARY KEY,
            id         text NOT NULL UNIQUE,
            title      text,
            agent      text NOT NULL,
            project    text NOT NULL,
            created_ms bigint NOT NULL,
            last_seq   bigint NOT NULL,
            last_hash  bytea NOT NULL,
            tail_seq   bigint,
            tail_hash  bytea,
            docs       bigint NOT NULL DEFAULT 0,
            tokens     bigint NOT NULL DEFAULT 0
        );
        CREATE TABLE memoir_search_docs (
            id     bigserial PRIMARY KEY,
            sid    bigint NOT NULL REFERENCES memoir_search_sessions (sid) ON DELETE CASCADE,
            seq    bigint NOT NULL,
            role   text NOT NULL,
            ts_ms  bigint NOT NULL,
            tools  text NOT NULL,
            chash  bytea NOT NULL,
            len    integer NOT NULL,
            text   text NOT NULL,
            terms  tsvector NOT NULL
        );
        CREATE INDEX memoir_search_docs_terms ON memoir_search_docs USING gin (terms);
        CREATE INDEX memoir_search_docs_session ON memoir_search_docs (sid, chash);
        CREATE INDEX memoir_search_docs_chash ON memoir_search_docs (chash);
        CREATE INDEX memoir_search_docs_time ON memoir_search_docs (ts_ms DESC, id DESC);
        CREATE TABLE memoir_search_terms (
            term text PRIMARY KEY,
            docs bigint NOT NULL
        );
        CREATE TABLE memoir_search_calls (
            sid     bigint NOT NULL REFERENCES memoir_search_sessions (sid) ON DELETE CASCADE,
            call_id text NOT NULL,
            name    text NOT NULL,
            PRIMARY KEY (sid, call_id)
        );
        CREATE TABLE memoir_search_vectors (
            model     text NOT NULL,
            chash     bytea NOT NULL,
            dims      integer NOT NULL CHECK (dims > 0),
            embedding {ty} NOT NULL,
            PRIMARY KEY (model, chash)
        );"
    )
}

/// The column type of `memoir_chunk_vectors.embedding` inside a migration
/// (migration 3 chose it; the search index's vectors use the same).
fn chosen_vector_type(
    tx: &mut postgres::Transaction<'_>,
) -> std::result::Result<&'static str, postgres::Error> {
    let ty: Option<String> = tx
        .query_opt(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
             WHERE a.attrelid = to_regclass('memoir_chunk_vectors') AND a.attname = 'embedding'",
            &[],
        )?
        .map(|r| r.get(0));
    Ok(match ty {
        Some(t) if t.starts_with("vector") => "vector",
        _ => "real[]",
    })
}

/// Key of the advisory lock that serialises migrations (with the schema name).
const MIGRATION_LOCK: &str = "memoir-migrations:";

/// Choose and prepare the vector column type inside the migration transaction.
pub(super) fn choose_vector_backend(
    tx: &mut postgres::Transaction<'_>,
    mode: VectorMode,
) -> std::result::Result<VectorBackend, postgres::Error> {
    if mode == VectorMode::Plain {
        return Ok(VectorBackend::Plain);
    }
    let installed = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
            &[],
        )?
        .get::<_, bool>(0);
    if installed {
        return Ok(VectorBackend::PgVector);
    }
    let available = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
            &[],
        )?
        .get::<_, bool>(0);
    if !available {
        return Ok(VectorBackend::Plain);
    }
    // Installing needs privileges we may not have: try, and fall back.
    tx.batch_execute("SAVEPOINT memoir_vector")?;
    match tx.batch_execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public") {
        Ok(()) => {
            tx.batch_execute("RELEASE SAVEPOINT memoir_vector")?;
            Ok(VectorBackend::PgVector)
        }
        Err(e) if e.as_db_error().is_some() => {
            tx.batch_execute("ROLLBACK TO SAVEPOINT memoir_vector")?;
            Ok(VectorBackend::Plain)
        }
        Err(e) => Err(e),
    }
}

impl PgStore {
    pub(super) fn migrate(&self, conn: &mut Conn) -> Result<()> {
        let schema = self.options.schema.clone();
        let mode = self.options.vectors;
        let result = (|| -> std::result::Result<Result<()>, postgres::Error> {
            let mut tx = conn.client.transaction()?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                &[&format!("{MIGRATION_LOCK}{schema}")],
            )?;
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
                 CREATE TABLE IF NOT EXISTS memoir_migrations (
                     version    integer PRIMARY KEY,
                     name       text NOT NULL,
                     applied_at timestamptz NOT NULL DEFAULT now()
                 );"
            ))?;
            let current: i32 = tx
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM memoir_migrations",
                    &[],
                )?
                .get(0);
            if current > SCHEMA_VERSION {
                return Ok(Err(Error::Config(format!(
                    "the PostgreSQL schema {schema:?} is at version {current}, newer than this \
                     build of memoir knows ({SCHEMA_VERSION}); upgrade memoir"
                ))));
            }
            for (version, name, sql) in MIGRATIONS {
                if *version <= current {
                    continue;
                }
                let (name, sql) = if *version == 3 {
                    let backend = choose_vector_backend(&mut tx, mode)?;
                    let (ty, label) = match backend {
                        VectorBackend::PgVector => ("vector", "chunk vectors (pgvector)"),
                        VectorBackend::Plain => ("real[]", "chunk vectors (real[])"),
                    };
                    (
                        label.to_string(),
                        format!(
                            "CREATE TABLE memoir_chunk_vectors (
                                session_id text NOT NULL,
                                chain_seq  bigint NOT NULL,
                                dims       integer NOT NULL CHECK (dims > 0),
                                embedding  {ty} NOT NULL,
                                PRIMARY KEY (session_id, chain_seq)
                            );"
                        ),
                    )
                } else if *version == 5 {
                    let ty = chosen_vector_type(&mut tx)?;
                    let label = if ty == "vector" {
                        "search index (pgvector)"
                    } else {
                        "search index (real[])"
                    };
                    (label.to_string(), search_index_sql(ty))
                } else {
                    (name.to_string(), sql.to_string())
                };
                tx.batch_execute(&sql)?;
                tx.execute(
                    "INSERT INTO memoir_migrations (version, name) VALUES ($1, $2)",
                    &[version, &name],
                )?;
            }
            tx.commit()?;
            Ok(Ok(()))
        })();
        match result {
            Ok(r) => r,
            Err(e) => Err(self.pg_error("postgres migrate", &e)),
        }
    }

    pub(super) fn detect_vectors(&self, conn: &mut Conn) -> Result<VectorBackend> {
        let row = conn
            .client
            .query_opt(
                "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                 WHERE a.attrelid = to_regclass('memoir_chunk_vectors') AND a.attname = 'embedding'",
                &[],
            )
            .map_err(|e| self.pg_error("postgres migrate", &e))?;
        match row.map(|r| r.get::<_, String>(0)) {
            Some(t) if t.starts_with("vector") => Ok(VectorBackend::PgVector),
            Some(_) => Ok(VectorBackend::Plain),
            None => Err(Error::Config(
                "memoir_chunk_vectors is missing after migration".into(),
            )),
        }
    }
}
