//! The shared store: session logs, blobs and chunk vectors in PostgreSQL.
//!
//! This module owns [`PgStore`], a [`LogStore`] over a PostgreSQL database,
//! its schema and versioned migrations, its small connection pool, and two
//! side tables the semantic view can use: content-addressed blobs
//! ([`PgStore::put_blob`]) and per-session chunk vectors
//! ([`PgStore::upsert_vectors`], [`PgStore::search_vectors`]).
//!
//! Records are stored as the exact framed lines the file store writes
//! (`memoir_records(session_id, seq, line)`), so reading verifies them with the
//! same [`Scanner`] and the integrity chain rules are identical on both
//! backends. The tail of each chain (`last_seq`, `last_hash`) lives in the
//! session's row; an append locks that row (or compares-and-sets it in one
//! statement when this process already knows the tail), so concurrent writers
//! get gap-free `seq`s, a writer that expected another `seq` gets
//! [`Error::Conflict`], and the `(session_id, seq)` primary key refuses a
//! duplicate whatever happens.
//!
//! Failures: a lost or refused connection becomes [`Error::Io`] whose source
//! has kind [`std::io::ErrorKind::ConnectionAborted`] (see [`is_unavailable`]).
//! A pooled connection found dead is replaced and the call retried once. When
//! a write's connection breaks after the statement was sent, the outcome is
//! settled by reading the first written line back on a fresh connection: it is
//! acknowledged only if the exact bytes are stored, and retried once if not.
//! Nothing is acknowledged that was not committed at the store's durability.
//!
//! The schema is documented in `docs/FORMAT.md`, section "PostgreSQL schema".

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement};

use super::scan::Scanner;
use super::{sort_newest_first, Appended, Durability, Listed, LogStore, RawLog};
use crate::error::{Error, Result};
use crate::record::{Record, SessionMeta};
use crate::frame::{Hash, HASH_LEN, ZERO_HASH};
use crate::store::line as codec;

/// The newest schema version this build knows (see [`MIGRATIONS`]).
pub const SCHEMA_VERSION: i32 = 3;

/// Every migration: version, name, SQL. Version 3 (chunk vectors) is written
/// at run time for the vector column type chosen ([`VectorBackend`]).
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
];

/// Key of the advisory lock that serialises migrations (with the schema name).
const MIGRATION_LOCK: &str = "memoir-migrations:";

/// Whether to use pgvector for chunk vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VectorMode {
    /// pgvector when the server has it (installing the extension if allowed),
    /// else a plain `real[]` column.
    #[default]
    Auto,
    /// Always a plain `real[]` column with a brute-force scan.
    Plain,
}

/// The column type a schema stores chunk vectors in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorBackend {
    /// pgvector's `vector` type: exact `<=>` scans, or an HNSW index.
    PgVector,
    /// `real[]`: vectors are fetched and scored in the client.
    Plain,
}

/// How [`PgStore::search_vectors`] finds neighbours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VectorSearch {
    /// Score every vector of the session (exact).
    #[default]
    Exact,
    /// An HNSW index (pgvector only; approximate). On the plain backend this
    /// is the same as [`VectorSearch::Exact`].
    Index,
}

/// One vector search result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    /// The `seq` of the transcript record the chunk came from.
    pub chain_seq: u64,
    /// Cosine similarity to the query (1 = same direction).
    pub score: f32,
}

/// How to connect and what to create.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Schema holding memoir's tables (created if missing); `public` by default.
    pub schema: String,
    /// Most connections kept open at once.
    pub pool_size: usize,
    /// Commit durability: [`Durability::Fsync`] is `synchronous_commit = on`;
    /// `Flush` and `None` are `synchronous_commit = off` (a server crash may
    /// lose the last few hundred milliseconds of commits; never corrupts).
    pub durability: Durability,
    /// pgvector or not.
    pub vectors: VectorMode,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
    /// Give up waiting for a free pooled connection after this long.
    pub checkout_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "public".into(),
            pool_size: 16,
            durability: Durability::Fsync,
            vectors: VectorMode::Auto,
            connect_timeout: Duration::from_secs(5),
            checkout_timeout: Duration::from_secs(30),
        }
    }
}

/// True when `err` says the database could not be reached or went away
/// (connection refused, reset, server shutting down): the request may succeed
/// if retried later. The HTTP server maps these to 503.
pub fn is_unavailable(err: &Error) -> bool {
    matches!(err, Error::Io { source, .. } if matches!(
        source.kind(),
        std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::NotConnected
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::TimedOut
    ))
}

/// Does this driver error mean the connection or the server is gone?
fn pg_unavailable(e: &postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        // 08: connection exception; 57: operator intervention (shutdown,
        // crash recovery, cannot connect now); 53: insufficient resources.
        return code.starts_with("08") || code.starts_with("57") || code.starts_with("53");
    }
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    let text = e.to_string();
    text.contains("error connecting") || text.contains("timeout") || text.contains("connection")
}

fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// A pooled connection and its prepared statements.
struct Conn {
    client: Client,
    stmts: HashMap<&'static str, Statement>,
}

impl Conn {
    fn stmt(&mut self, sql: &'static str) -> std::result::Result<Statement, postgres::Error> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.stmts.insert(sql, s.clone());
        Ok(s)
    }
}

struct PoolState {
    idle: Vec<Conn>,
    open: usize,
}

/// A checked-out connection; `fresh` when it was opened for this checkout.
struct Lease {
    conn: Conn,
    fresh: bool,
}

/// The session store in PostgreSQL. Cheap to share (`Arc`); thread-safe.
pub struct PgStore {
    config: postgres::Config,
    options: PgOptions,
    locator: String,
    vectors: VectorBackend,
    pool: Mutex<PoolState>,
    freed: Condvar,
    tails: Mutex<HashMap<String, (u64, Hash)>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("locator", &self.locator)
            .field("vectors", &self.vectors)
            .field("durability", &self.options.durability)
            .finish()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        let state = self.pool.get_mut().unwrap_or_else(|p| p.into_inner());
        drop_conns(std::mem::take(&mut state.idle));
    }
}

/// Close connections. The driver's `Drop` blocks on its own runtime, which
/// panics inside an async context (e.g. a server's runtime shutting down), so
/// there the connections are closed on a helper thread.
fn drop_conns(conns: Vec<Conn>) {
    if conns.is_empty() {
        return;
    }
    if tokio::runtime::Handle::try_current().is_ok() {
        let _ = std::thread::spawn(move || drop(conns)).join();
    } else {
        drop(conns);
    }
}

/// Check a schema name: a plain lowercase SQL identifier.
fn valid_schema(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "invalid PostgreSQL schema name {name:?} (use lowercase letters, digits and _)"
        )))
    }
}

fn seq_i64(seq: u64) -> Result<i64> {
    i64::try_from(seq).map_err(|_| Error::Invalid(format!("seq {seq} is out of range")))
}

fn hash_from(bytes: &[u8]) -> Option<Hash> {
    <Hash>::try_from(bytes).ok()
}

/// The text PostgreSQL parses as a vector (`[..]`) or a `real[]` (`{..}`).
fn vector_literal(v: &[f32], backend: VectorBackend) -> String {
    let (open, close) = match backend {
        VectorBackend::PgVector => ('[', ']'),
        VectorBackend::Plain => ('{', '}'),
    };
    let mut s = String::with_capacity(v.len() * 10 + 2);
    s.push(open);
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(close);
    s
}

impl PgStore {
    /// Connect to `url` (`postgres://user[:password]@host:port/db` or a
    /// key=value string), create or migrate the schema, and return the store.
    pub fn connect(url: &str, options: PgOptions) -> Result<PgStore> {
        valid_schema(&options.schema)?;
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| Error::Config(format!("invalid PostgreSQL URL: {e}")))?;
        config.connect_timeout(options.connect_timeout);
        config.application_name("memoir");
        config.keepalives(true);
        let locator = locator_of(&config, &options.schema);
        let mut store = PgStore {
            config,
            options,
            locator,
            vectors: VectorBackend::Plain,
            pool: Mutex::new(PoolState {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            tails: Mutex::new(HashMap::new()),
        };
        let mut lease = store.checkout()?;
        let migrated = store.migrate(&mut lease.conn);
        let vectors = migrated.and_then(|()| store.detect_vectors(&mut lease.conn));
        match vectors {
            Ok(v) => {
                store.vectors = v;
                // Statements prepared before the migration may name old tables.
                lease.conn.stmts.clear();
                store.checkin(lease, true);
                Ok(store)
            }
            Err(e) => {
                store.checkin(lease, false);
                Err(e)
            }
        }
    }

    /// Where this store lives, without credentials:
    /// `postgres://host:port/db/schema`.
    pub fn locator(&self) -> &str {
        &self.locator
    }

    /// The schema holding memoir's tables.
    pub fn schema(&self) -> &str {
        &self.options.schema
    }

    /// The column type chunk vectors are stored in.
    pub fn vector_backend(&self) -> VectorBackend {
        self.vectors
    }

    /// The schema version the database is at (after [`PgStore::connect`],
    /// always [`SCHEMA_VERSION`]).
    pub fn schema_version(&self) -> Result<i32> {
        self.run("postgres query", true, |c| {
            let s = c.stmt("SELECT coalesce(max(version), 0) FROM memoir_migrations")?;
            Ok(c.client.query_one(&s, &[])?.get(0))
        })
    }

    fn pg_error(&self, op: &'static str, e: &postgres::Error) -> Error {
        let kind = if pg_unavailable(e) {
            std::io::ErrorKind::ConnectionAborted
        } else {
            std::io::ErrorKind::Other
        };
        let detail = match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        Error::Io {
            op,
            path: PathBuf::from(&self.locator),
            source: std::io::Error::new(kind, detail),
        }
    }

    fn connect_one(&self) -> Result<Conn> {
        let mut client = self
            .config
            .connect(NoTls)
            .map_err(|e| self.pg_error("postgres connect", &e))?;
        let sync = match self.options.durability {
            Durability::Fsync => "on",
            Durability::Flush | Durability::None => "off",
        };
        client
            .batch_execute(&format!(
                "SET search_path TO \"{}\", public; SET synchronous_commit TO {sync};",
                self.options.schema
            ))
            .map_err(|e| self.pg_error("postgres connect", &e))?;
        Ok(Conn {
            client,
            stmts: HashMap::new(),
        })
    }

    fn checkout(&self) -> Result<Lease> {
        let deadline = std::time::Instant::now() + self.options.checkout_timeout;
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Lease { conn, fresh: false });
            }
            if state.open < self.options.pool_size.max(1) {
                state.open += 1;
                drop(state);
                return match self.connect_one() {
                    Ok(conn) => Ok(Lease { conn, fresh: true }),
                    Err(e) => {
                        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
                        state.open -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(Error::Io {
                    op: "postgres pool checkout",
                    path: PathBuf::from(&self.locator),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "every pooled connection stayed busy",
                    ),
                });
            }
            state = match self.freed.wait_timeout(state, deadline - now) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
    }

    fn checkin(&self, lease: Lease, healthy: bool) {
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if healthy && !lease.conn.client.is_closed() {
            state.idle.push(lease.conn);
        } else {
            state.open -= 1;
        }
        self.freed.notify_one();
    }

    /// Run `f` on a pooled connection. A broken connection is dropped; when
    /// it was a reused one and `retry` is set, `f` runs once more on a fresh one.
    fn run<T>(
        &self,
        op: &'static str,
        retry: bool,
        mut f: impl FnMut(&mut Conn) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut lease = self.checkout()?;
            match f(&mut lease.conn) {
                Ok(v) => {
                    self.checkin(lease, true);
                    return Ok(v);
                }
                Err(e) => {
                    let broken = pg_unavailable(&e);
                    let fresh = lease.fresh;
                    // A failed statement inside an implicit transaction leaves
                    // the connection usable; a broken one is dropped.
                    self.checkin(lease, !broken);
                    if broken && retry && !fresh && attempt < 2 {
                        self.drain_idle();
                        continue;
                    }
                    return Err(self.pg_error(op, &e));
                }
            }
        }
    }

    /// Drop every idle connection (after one was found dead, the others
    /// probably are too: the server restarted).
    fn drain_idle(&self) {
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let idle = std::mem::take(&mut state.idle);
        state.open -= idle.len();
        self.freed.notify_all();
        drop(state);
        drop_conns(idle);
    }

    fn cached_tail(&self, id: &str) -> Option<(u64, Hash)> {
        self.tails.lock().ok()?.get(id).copied()
    }

    fn remember_tail(&self, id: &str, tail: Option<(u64, Hash)>) {
        if let Ok(mut tails) = self.tails.lock() {
            match tail {
                Some(t) => {
                    if tails.len() > 65536 {
                        tails.clear();
                    }
                    tails.insert(id.to_string(), t);
                }
                None => {
                    tails.remove(id);
                }
            }
        }
    }

    fn migrate(&self, conn: &mut Conn) -> Result<()> {
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

    fn detect_vectors(&self, conn: &mut Conn) -> Result<VectorBackend> {
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

    /// Settle a write whose connection broke after it was sent: is the exact
    /// `line` stored at `(id, seq)`? `None` when the database cannot be reached.
    fn stored_line_is(&self, id: &str, seq: u64, line: &str) -> Option<bool> {
        let seq = seq_i64(seq).ok()?;
        self.run("postgres query", true, |c| {
            let s = c.stmt("SELECT line FROM memoir_records WHERE session_id = $1 AND seq = $2")?;
            let row = c.client.query_opt(&s, &[&id, &seq])?;
            Ok(row.is_some_and(|r| r.get::<_, &str>(0) == line))
        })
        .ok()
    }

    /// One append attempt: the compare-and-set fast path when the tail is
    /// cached, else a transaction holding the session row's lock.
    fn append_once(
        &self,
        conn: &mut Conn,
        id: &str,
        records: &[Record],
        expected_next: Option<u64>,
        written: &mut Option<(u64, String)>,
    ) -> std::result::Result<Result<Appended>, postgres::Error> {
        *written = None;
        if let (false, Some((seq, hash))) = (records.is_empty(), self.cached_tail(id)) {
            if expected_next.is_none_or(|e| e == seq + 1) {
                let batch = match encode_batch(seq, hash, records) {
                    Ok(b) => b,
                    Err(e) => return Ok(Err(e)),
                };
                let s = conn.stmt(
                    "WITH upd AS (
                        UPDATE memoir_sessions SET last_seq = $4, last_hash = $5
                        WHERE id = $1 AND last_seq = $2 AND last_hash = $3 AND deleted_at IS NULL
                        RETURNING id)
                     INSERT INTO memoir_records (session_id, seq, line)
                     SELECT upd.id, r.seq, r.line FROM upd, unnest($6::bigint[], $7::text[]) AS r (seq, line)",
                )?;
                *written = Some((seq + 1, batch.lines[0].clone()));
                let n = conn.client.execute(
                    &s,
                    &[
                        &id,
                        &(seq as i64),
                        &&hash[..],
                        &(batch.last_seq as i64),
                        &&batch.last_hash[..],
                        &batch.seqs,
                        &batch.lines,
                    ],
                )?;
                if n as usize == records.len() {
                    self.remember_tail(id, Some((batch.last_seq, batch.last_hash)));
                    return Ok(Ok(Appended {
                        first_seq: seq + 1,
                        last_seq: batch.last_seq,
                        repaired: None,
                    }));
                }
                // Stale cache (another process appended): take the slow path.
                *written = None;
                self.remember_tail(id, None);
            }
        }
        let lock = conn.stmt(
            "SELECT last_seq, last_hash FROM memoir_sessions
             WHERE id = $1 AND deleted_at IS NULL FOR UPDATE",
        )?;
        let insert = conn.stmt(
            "INSERT INTO memoir_records (session_id, seq, line)
             SELECT $1, r.seq, r.line FROM unnest($2::bigint[], $3::text[]) AS r (seq, line)",
        )?;
        let update =
            conn.stmt("UPDATE memoir_sessions SET last_seq = $2, last_hash = $3 WHERE id = $1")?;
        let mut tx = conn.client.transaction()?;
        let Some(row) = tx.query_opt(&lock, &[&id])? else {
            return Ok(Err(Error::NotFound(id.to_string())));
        };
        let last_seq = row.get::<_, i64>(0) as u64;
        let Some(last_hash) = hash_from(row.get::<_, &[u8]>(1)) else {
            return Ok(Err(Error::Corrupt {
                path: self.location(id),
                detail: "last_hash is not a 16-byte hash".into(),
            }));
        };
        let first_seq = last_seq + 1;
        if let Some(expected) = expected_next {
            if expected != first_seq {
                drop(tx);
                self.remember_tail(id, Some((last_seq, last_hash)));
                return Ok(Err(Error::Conflict {
                    id: id.to_string(),
                    expected,
                    actual: first_seq,
                }));
            }
        }
        if records.is_empty() {
            drop(tx);
            self.remember_tail(id, Some((last_seq, last_hash)));
            return Ok(Ok(Appended {
                first_seq,
                last_seq,
                repaired: None,
            }));
        }
        let batch = match encode_batch(last_seq, last_hash, records) {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        tx.execute(&insert, &[&id, &batch.seqs, &batch.lines])?;
        tx.execute(
            &update,
            &[&id, &(batch.last_seq as i64), &&batch.last_hash[..]],
        )?;
        *written = Some((first_seq, batch.lines[0].clone()));
        tx.commit()?;
        self.remember_tail(id, Some((batch.last_seq, batch.last_hash)));
        Ok(Ok(Appended {
            first_seq,
            last_seq: batch.last_seq,
            repaired: None,
        }))
    }

    fn create_once(
        &self,
        conn: &mut Conn,
        meta: &SessionMeta,
        line: &str,
        hash: &Hash,
    ) -> std::result::Result<Result<()>, postgres::Error> {
        let project = meta
            .extra
            .get("project")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let created = meta.created_at.to_rfc3339();
        let ins_session = conn.stmt(
            "INSERT INTO memoir_sessions (id, created_at, project, last_seq, last_hash)
             VALUES ($1, $2::text::timestamptz, $3, 0, $4) ON CONFLICT (id) DO NOTHING",
        )?;
        let ins_header =
            conn.stmt("INSERT INTO memoir_records (session_id, seq, line) VALUES ($1, 0, $2)")?;
        let mut tx = conn.client.transaction()?;
        let n = tx.execute(&ins_session, &[&meta.id, &created, &project, &&hash[..]])?;
        if n == 0 {
            return Ok(Err(Error::SessionExists(meta.id.clone())));
        }
        tx.execute(&ins_header, &[&meta.id, &line])?;
        tx.commit()?;
        Ok(Ok(()))
    }

    // ---- blobs -------------------------------------------------------------

    /// Store `bytes` once, keyed by their BLAKE3 hash (64 lowercase hex
    /// digits, as [`crate::blob::hash_bytes`]); returns the hash. Storing the
    /// same bytes again is a no-op.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String> {
        let hash = crate::blob::hash_bytes(bytes);
        let size = bytes.len() as i64;
        self.run("postgres blob put", true, |c| {
            let s = c.stmt(
                "INSERT INTO memoir_blobs (hash, size, bytes) VALUES ($1, $2, $3)
                 ON CONFLICT (hash) DO NOTHING",
            )?;
            c.client.execute(&s, &[&hash, &size, &bytes])
        })?;
        Ok(hash)
    }

    /// The bytes stored under `hash`, verified (`None` when absent).
    /// [`Error::Corrupt`] when the stored bytes no longer hash to their name.
    pub fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        if !crate::blob::is_valid_hash(hash) {
            return Err(Error::Invalid(format!(
                "invalid blob hash {hash:?}: expected 64 lowercase hex digits"
            )));
        }
        let bytes = self.run("postgres blob get", true, |c| {
            let s = c.stmt("SELECT bytes FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client
                .query_opt(&s, &[&hash])?
                .map(|r| r.get::<_, Vec<u8>>(0)))
        })?;
        match bytes {
            Some(b) if crate::blob::hash_bytes(&b) != hash => Err(Error::Corrupt {
                path: PathBuf::from(format!("{}/blobs/{hash}", self.locator)),
                detail: "blob content does not match its hash".into(),
            }),
            other => Ok(other),
        }
    }

    /// Whether a blob with `hash` is stored.
    pub fn has_blob(&self, hash: &str) -> Result<bool> {
        self.run("postgres blob get", true, |c| {
            let s = c.stmt("SELECT 1 FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client.query_opt(&s, &[&hash])?.is_some())
        })
    }

    /// Remove a blob; true when it existed.
    pub fn delete_blob(&self, hash: &str) -> Result<bool> {
        self.run("postgres blob delete", true, |c| {
            let s = c.stmt("DELETE FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client.execute(&s, &[&hash])? > 0)
        })
    }

    /// Number of blobs and their total size in bytes.
    pub fn blob_stats(&self) -> Result<(u64, u64)> {
        self.run("postgres blob stats", true, |c| {
            let s = c.stmt("SELECT count(*), coalesce(sum(size), 0)::bigint FROM memoir_blobs")?;
            let row = c.client.query_one(&s, &[])?;
            Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
        })
    }

    // ---- chunk vectors -----------------------------------------------------

    /// Insert or replace the vectors of `session`'s chunks, keyed by
    /// `chain_seq`, in one transaction. Every vector must have the same,
    /// non-zero width and only finite values. Returns how many were written.
    pub fn upsert_vectors(&self, session: &str, items: &[(u64, &[f32])]) -> Result<usize> {
        crate::id::validate(session)?;
        let Some(dims) = items.first().map(|(_, v)| v.len()) else {
            return Ok(0);
        };
        if dims == 0 || dims > 16000 {
            return Err(Error::Invalid(format!(
                "vector width {dims} is out of range"
            )));
        }
        let mut seqs = Vec::with_capacity(items.len());
        let mut texts = Vec::with_capacity(items.len());
        for (seq, v) in items {
            if v.len() != dims {
                return Err(Error::Invalid(format!(
                    "vector for chain_seq {seq} has width {}, expected {dims}",
                    v.len()
                )));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(Error::Invalid(format!(
                    "vector for chain_seq {seq} has a non-finite value"
                )));
            }
            seqs.push(seq_i64(*seq)?);
            texts.push(vector_literal(v, self.vectors));
        }
        let dims = dims as i32;
        let sql: &'static str = match self.vectors {
            VectorBackend::PgVector => {
                "INSERT INTO memoir_chunk_vectors (session_id, chain_seq, dims, embedding)
                 SELECT $1, t.s, $2, t.e::vector FROM unnest($3::bigint[], $4::text[]) AS t (s, e)
                 ON CONFLICT (session_id, chain_seq)
                 DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding"
            }
            VectorBackend::Plain => {
                "INSERT INTO memoir_chunk_vectors (session_id, chain_seq, dims, embedding)
                 SELECT $1, t.s, $2, t.e::real[] FROM unnest($3::bigint[], $4::text[]) AS t (s, e)
                 ON CONFLICT (session_id, chain_seq)
                 DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding"
            }
        };
        let n = self.run("postgres vector upsert", true, |c| {
            let s = c.stmt(sql)?;
            c.client.execute(&s, &[&session, &dims, &seqs, &texts])
        })?;
        Ok(n as usize)
    }

    /// Remove `session`'s vectors (one chunk, or all with `None`); returns how many.
    pub fn delete_vectors(&self, session: &str, chain_seq: Option<u64>) -> Result<usize> {
        let n = match chain_seq {
            Some(seq) => {
                let seq = seq_i64(seq)?;
                self.run("postgres vector delete", true, |c| {
                    let s = c.stmt(
                        "DELETE FROM memoir_chunk_vectors WHERE session_id = $1 AND chain_seq = $2",
                    )?;
                    c.client.execute(&s, &[&session, &seq])
                })?
            }
            None => self.run("postgres vector delete", true, |c| {
                let s = c.stmt("DELETE FROM memoir_chunk_vectors WHERE session_id = $1")?;
                c.client.execute(&s, &[&session])
            })?,
        };
        Ok(n as usize)
    }

    /// The `top_k` chunks of `session` closest to `query` by cosine
    /// similarity, best first (ties by `chain_seq`). Only vectors of the
    /// query's width take part.
    pub fn search_vectors(
        &self,
        session: &str,
        query: &[f32],
        top_k: usize,
        how: VectorSearch,
    ) -> Result<Vec<VectorHit>> {
        if query.is_empty() || query.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid("query vector is empty or not finite".into()));
        }
        if top_k == 0 {
            return Ok(Vec::new());
        }
        let dims = query.len() as i32;
        let k = top_k.min(10_000) as i64;
        match self.vectors {
            VectorBackend::Plain => self.search_plain(session, query, top_k),
            VectorBackend::PgVector => {
                let q = vector_literal(query, VectorBackend::PgVector);
                let mut hits = match how {
                    VectorSearch::Exact => self.run("postgres vector search", true, |c| {
                        let s = c.stmt(
                            "SELECT chain_seq, (1 - (embedding <=> $2::text::vector))::real
                             FROM memoir_chunk_vectors WHERE session_id = $1 AND dims = $3
                             ORDER BY embedding <=> $2::text::vector, chain_seq LIMIT $4",
                        )?;
                        let rows = c.client.query(&s, &[&session, &q, &dims, &k])?;
                        Ok(rows_to_hits(&rows))
                    })?,
                    VectorSearch::Index => {
                        self.ensure_hnsw(dims)?;
                        let sql = format!(
                            "SELECT chain_seq, (1 - (embedding::vector({dims}) <=> $2::text::vector({dims})))::real
                             FROM memoir_chunk_vectors WHERE dims = {dims} AND session_id = $1
                             ORDER BY embedding::vector({dims}) <=> $2::text::vector({dims}) LIMIT $3"
                        );
                        let ef = (k * 2).clamp(40, 1000);
                        self.run("postgres vector search", true, |c| {
                            let mut tx = c.client.transaction()?;
                            tx.batch_execute(&format!(
                                "SET LOCAL hnsw.ef_search = {ef}; \
                                 SET LOCAL hnsw.iterative_scan = relaxed_order;"
                            ))?;
                            let rows = tx.query(&sql, &[&session, &q, &k])?;
                            tx.commit()?;
                            Ok(rows_to_hits(&rows))
                        })?
                    }
                };
                sort_hits(&mut hits);
                Ok(hits)
            }
        }
    }

    fn ensure_hnsw(&self, dims: i32) -> Result<()> {
        let sql = format!(
            "CREATE INDEX IF NOT EXISTS memoir_chunk_vectors_hnsw_{dims} ON memoir_chunk_vectors
             USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE dims = {dims}"
        );
        self.run("postgres vector index", true, |c| {
            c.client.batch_execute(&sql)
        })
    }

    fn search_plain(&self, session: &str, query: &[f32], top_k: usize) -> Result<Vec<VectorHit>> {
        let dims = query.len() as i32;
        let rows = self.run("postgres vector search", true, |c| {
            let s = c.stmt(
                "SELECT chain_seq, embedding FROM memoir_chunk_vectors
                 WHERE session_id = $1 AND dims = $2",
            )?;
            c.client.query(&s, &[&session, &dims])
        })?;
        let qn = norm(query);
        let mut hits: Vec<VectorHit> = rows
            .iter()
            .map(|r| {
                let v: Vec<f32> = r.get(1);
                let dot: f32 = v.iter().zip(query).map(|(a, b)| a * b).sum();
                let denom = norm(&v) * qn;
                VectorHit {
                    chain_seq: r.get::<_, i64>(0) as u64,
                    score: if denom > 0.0 { dot / denom } else { 0.0 },
                }
            })
            .collect();
        sort_hits(&mut hits);
        hits.truncate(top_k);
        Ok(hits)
    }
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn rows_to_hits(rows: &[postgres::Row]) -> Vec<VectorHit> {
    rows.iter()
        .map(|r| VectorHit {
            chain_seq: r.get::<_, i64>(0) as u64,
            score: r.get::<_, f32>(1),
        })
        .collect()
}

fn sort_hits(hits: &mut [VectorHit]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.chain_seq.cmp(&b.chain_seq))
    });
}

/// Choose and prepare the vector column type inside the migration transaction.
fn choose_vector_backend(
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

/// Framed lines for `records` after the tail `(seq, hash)`.
struct Batch {
    seqs: Vec<i64>,
    lines: Vec<String>,
    last_seq: u64,
    last_hash: Hash,
}

fn encode_batch(mut seq: u64, mut hash: Hash, records: &[Record]) -> Result<Batch> {
    if records.iter().any(|r| matches!(r, Record::Meta(_))) {
        return Err(Error::Invalid(
            "a header record can only be written by create".into(),
        ));
    }
    let mut seqs = Vec::with_capacity(records.len());
    let mut lines = Vec::with_capacity(records.len());
    let mut buf = Vec::new();
    for record in records {
        seq += 1;
        buf.clear();
        hash = codec::encode_into(&mut buf, seq, &hash, record)?;
        buf.pop(); // the newline: rows hold the line without it
        seqs.push(seq_i64(seq)?);
        lines.push(
            String::from_utf8(std::mem::take(&mut buf))
                .map_err(|_| Error::Invalid("a record encoded to invalid UTF-8".into()))?,
        );
    }
    Ok(Batch {
        seqs,
        lines,
        last_seq: seq,
        last_hash: hash,
    })
}

fn locator_of(config: &postgres::Config, schema: &str) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgres://{host}:{port}/{db}/{schema}")
}

/// Decode a stored header line; `None` unless it verifies as a `seq` 0 header.
fn header_from_line(line: &str) -> Option<SessionMeta> {
    let mut bytes = line.as_bytes().to_vec();
    match codec::decode(&mut bytes).ok()? {
        codec::Decoded {
            seq: 0,
            record: Record::Meta(meta),
            ..
        } => Some(meta),
        _ => None,
    }
}

const _: () = assert!(HASH_LEN == 16);

impl LogStore for PgStore {
    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        crate::id::validate(&meta.id)?;
        let mut buf = Vec::new();
        let hash = codec::encode_into(&mut buf, 0, &ZERO_HASH, &Record::Meta(meta.clone()))?;
        buf.pop();
        let line = String::from_utf8(buf)
            .map_err(|_| Error::Invalid("the header encoded to invalid UTF-8".into()))?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut lease = self.checkout()?;
            match self.create_once(&mut lease.conn, meta, &line, &hash) {
                Ok(result) => {
                    self.checkin(lease, true);
                    if result.is_ok() {
                        self.remember_tail(&meta.id, Some((0, hash)));
                    }
                    return result.map(|()| Appended {
                        first_seq: 0,
                        last_seq: 0,
                        repaired: None,
                    });
                }
                Err(e) => {
                    let broken = pg_unavailable(&e);
                    self.checkin(lease, !broken);
                    if !broken {
                        return Err(self.pg_error("postgres create", &e));
                    }
                    self.drain_idle();
                    match self.stored_line_is(&meta.id, 0, &line) {
                        Some(true) => {
                            self.remember_tail(&meta.id, Some((0, hash)));
                            return Ok(Appended {
                                first_seq: 0,
                                last_seq: 0,
                                repaired: None,
                            });
                        }
                        Some(false) if attempt < 2 => continue,
                        _ => return Err(self.pg_error("postgres create", &e)),
                    }
                }
            }
        }
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        crate::id::validate(id)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut lease = self.checkout()?;
            let mut written = None;
            match self.append_once(&mut lease.conn, id, records, expected_next, &mut written) {
                Ok(result) => {
                    self.checkin(lease, true);
                    return result;
                }
                Err(e) => {
                    let broken = pg_unavailable(&e);
                    let fresh = lease.fresh;
                    self.checkin(lease, !broken);
                    self.remember_tail(id, None);
                    if is_unique_violation(&e) {
                        // Another writer took the seq between our read and write.
                        let actual = self
                            .read_header_and_tail(id)
                            .map(|t| t + 1)
                            .unwrap_or_default();
                        return Err(Error::Conflict {
                            id: id.to_string(),
                            expected: expected_next.unwrap_or(actual),
                            actual,
                        });
                    }
                    if !broken {
                        return Err(self.pg_error("postgres append", &e));
                    }
                    self.drain_idle();
                    let settled = match &written {
                        // Nothing was sent that could have committed.
                        None => Some(false),
                        Some((seq, line)) => self.stored_line_is(id, *seq, line),
                    };
                    match (settled, &written) {
                        (Some(true), Some((first_seq, _))) => {
                            let first_seq = *first_seq;
                            return Ok(Appended {
                                first_seq,
                                last_seq: first_seq + records.len() as u64 - 1,
                                repaired: None,
                            });
                        }
                        (Some(false), _) if attempt < 2 && (!fresh || written.is_some()) => {
                            continue
                        }
                        _ => return Err(self.pg_error("postgres append", &e)),
                    }
                }
            }
        }
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        crate::id::validate(id)?;
        let scanner = self.run("postgres read", true, |c| {
            let s = c.stmt(
                "SELECT r.line FROM memoir_records r JOIN memoir_sessions s ON s.id = r.session_id
                 WHERE s.id = $1 AND s.deleted_at IS NULL ORDER BY r.seq",
            )?;
            let mut rows = c.client.query_raw(&s, [&id as &(dyn ToSql + Sync)])?;
            let mut scanner = Scanner::new();
            let mut offset = 0u64;
            let mut any = false;
            while let Some(row) = rows.next()? {
                any = true;
                let line: &str = row.get(0);
                scanner.push(line.as_bytes(), offset, true);
                offset += line.len() as u64 + 1;
            }
            Ok(any.then_some(scanner))
        })?;
        match scanner {
            Some(s) => Ok(s.finish()),
            None => Err(Error::NotFound(id.to_string())),
        }
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        crate::id::validate(id)?;
        let line = self.run("postgres read", true, |c| {
            let s = c.stmt(
                "SELECT r.line FROM memoir_sessions s
                 LEFT JOIN memoir_records r ON r.session_id = s.id AND r.seq = 0
                 WHERE s.id = $1 AND s.deleted_at IS NULL",
            )?;
            Ok(c.client
                .query_opt(&s, &[&id])?
                .map(|r| r.get::<_, Option<String>>(0)))
        })?;
        match line {
            None => Err(Error::NotFound(id.to_string())),
            Some(None) => Ok(None),
            Some(Some(line)) => Ok(header_from_line(&line)),
        }
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        let rows = self.run("postgres list", true, |c| {
            let s = c.stmt(
                "SELECT s.id, r.line FROM memoir_sessions s
                 LEFT JOIN memoir_records r ON r.session_id = s.id AND r.seq = 0
                 WHERE s.deleted_at IS NULL",
            )?;
            let rows = c.client.query(&s, &[])?;
            Ok(rows
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, Option<String>>(1)))
                .collect::<Vec<_>>())
        })?;
        let mut out = Vec::with_capacity(rows.len());
        let mut unreadable = 0;
        for (id, line) in rows {
            match line.as_deref().and_then(header_from_line) {
                Some(meta) if meta.id == id => out.push(Listed {
                    location: self.location(&id),
                    meta,
                }),
                _ => unreadable += 1,
            }
        }
        sort_newest_first(&mut out);
        Ok((out, unreadable))
    }

    fn location(&self, id: &str) -> PathBuf {
        PathBuf::from(format!("{}/{id}", self.locator))
    }

    fn durability(&self) -> Durability {
        self.options.durability
    }

    fn delete(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let n = self.run("postgres delete", true, |c| {
            let s = c.stmt(
                "UPDATE memoir_sessions SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL",
            )?;
            c.client.execute(&s, &[&id])
        })?;
        self.remember_tail(id, None);
        if n == 0 {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(())
    }

    fn restore(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let n = self.run("postgres restore", true, |c| {
            let s = c.stmt(
                "UPDATE memoir_sessions SET deleted_at = NULL WHERE id = $1 AND deleted_at IS NOT NULL",
            )?;
            c.client.execute(&s, &[&id])
        })?;
        if n == 0 {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(())
    }
}

impl PgStore {
    /// The session's current last `seq` (for conflict reports).
    fn read_header_and_tail(&self, id: &str) -> Option<u64> {
        self.run("postgres query", true, |c| {
            let s = c.stmt("SELECT last_seq FROM memoir_sessions WHERE id = $1")?;
            Ok(c.client
                .query_opt(&s, &[&id])?
                .map(|r| r.get::<_, i64>(0) as u64))
        })
        .ok()
        .flatten()
    }

    /// Sessions whose header names `project` (the `project` header field),
    /// newest first. Cheaper than filtering [`LogStore::list`] on a shared server.
    pub fn list_project(&self, project: &str) -> Result<Vec<Listed>> {
        let rows = self.run("postgres list", true, |c| {
            let s = c.stmt(
                "SELECT s.id, r.line FROM memoir_sessions s
                 JOIN memoir_records r ON r.session_id = s.id AND r.seq = 0
                 WHERE s.deleted_at IS NULL AND s.project = $1",
            )?;
            let rows = c.client.query(&s, &[&project])?;
            Ok(rows
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                .collect::<Vec<_>>())
        })?;
        let mut out: Vec<Listed> = rows
            .into_iter()
            .filter_map(|(id, line)| {
                header_from_line(&line)
                    .filter(|m| m.id == id)
                    .map(|meta| Listed {
                        location: self.location(&id),
                        meta,
                    })
            })
            .collect();
        sort_newest_first(&mut out);
        Ok(out)
    }

    /// Permanently remove a deleted session, its records and its vectors.
    /// [`Error::NotFound`] unless `id` was deleted first.
    pub fn purge(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let n = self.run("postgres purge", true, |c| {
            let mut tx = c.client.transaction()?;
            let n = tx.execute(
                "DELETE FROM memoir_sessions WHERE id = $1 AND deleted_at IS NOT NULL",
                &[&id],
            )?;
            if n > 0 {
                tx.execute(
                    "DELETE FROM memoir_chunk_vectors WHERE session_id = $1",
                    &[&id],
                )?;
            }
            tx.commit()?;
            Ok(n)
        })?;
        if n == 0 {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(())
    }
}
