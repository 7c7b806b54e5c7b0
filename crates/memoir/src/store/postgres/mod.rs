//! The shared store: session logs, blobs and chunk vectors in PostgreSQL.
//!
//! This module owns [`PgStore`], a [`LogStore`] over a PostgreSQL database,
//! its schema and versioned migrations, its small connection pool, the
//! payload blob store of its transcripts (content-addressed, BLAKE3-keyed,
//! verified on read: [`LogStore::blobs`], [`PgStore::put_blob`]) and a side
//! table the semantic view can use: per-session chunk vectors
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
//! Failures: a lost or refused connection becomes
//! [`crate::error::StoreError::Unavailable`] (see [`is_unavailable`]; the pool
//! tells outages apart by SQLSTATE class and error source types, never by text).
//! A pooled connection found dead is replaced and the call retried once. When
//! a write's connection breaks after the statement was sent, the outcome is
//! settled by reading the first written line back on a fresh connection: it is
//! acknowledged only if the exact bytes are stored, and retried once if not.
//! Nothing is acknowledged that was not committed at the store's durability.
//!
//! The schema is documented in `docs/FORMAT.md`, section "PostgreSQL schema".
//!
//! Files: `mod.rs` (the store, its options and shared helpers), `schema.rs`
//! (migrations), `pool.rs` (connections, retries, error mapping), `log.rs`
//! (the [`LogStore`] implementation), `lease.rs` (owner leases as advisory
//! locks), `blobs.rs` and `vectors.rs` (the side tables), `search.rs` (the
//! cross-session search index's tables, `memoir::search` on PostgreSQL),
//! `tokens.rs` (the access-token rows behind [`crate::access`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement};

use super::scan::Scanner;
use super::{Appended, DeletedListed, Durability, Lease as OwnerLease, Listed, LogStore, RawLog};
use crate::error::{Error, Result, StoreError};

mod blobs;
mod lease;
mod log;
mod pool;
mod schema;
pub(crate) mod search;
mod tokens;
mod vectors;

use crate::frame::{Hash, HASH_LEN, ZERO_HASH};
use crate::record::{Record, SessionMeta};
use crate::store::line as codec;
use pool::{drop_conns, is_unique_violation, pg_unavailable, Conn, PoolState};
pub use schema::{MIGRATIONS, SCHEMA_VERSION};

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
    err.kind() == crate::error::ErrorKind::Unavailable
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
    /// The payload blob store (`memoir_blobs`) [`LogStore::blobs`] hands
    /// out; `None` on that store's own connection pool.
    payloads: Option<std::sync::Arc<blobs::PgBlobs>>,
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

const _: () = assert!(HASH_LEN == 16);

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
        let mut store = PgStore::unmigrated(config, options);
        store.payloads = Some(std::sync::Arc::new(blobs::PgBlobs::new(&store)));
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

    /// A store over `config` that connects on first use and runs no
    /// migration (the schema is already current), without a blob store.
    fn unmigrated(config: postgres::Config, options: PgOptions) -> PgStore {
        let locator = locator_of(&config, &options.schema);
        PgStore {
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
            payloads: None,
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
}
