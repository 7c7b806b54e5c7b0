//! Shared helpers of the PostgreSQL tests: which servers to use (from the
//! environment `.ci/postgres.sh` exports) and throwaway schemas.
//!
//! A test that needs a server calls [`pg_url`]: when the variable is unset it
//! panics under CI (`CI` set) and otherwise prints a notice and skips.

#![allow(dead_code)]

use std::sync::Arc;

use memoir::store::postgres::{PgOptions, PgStore, VectorMode};
use memoir::store::Durability;

/// The plain PostgreSQL server (Debian's 15; no pgvector).
pub const POSTGRES_URL: &str = "MEMOIR_TEST_POSTGRES_URL";
/// The PostgreSQL server with pgvector.
pub const PGVECTOR_URL: &str = "MEMOIR_TEST_PGVECTOR_URL";

/// True when running under CI (`CI` set to anything but empty, `0` or `false`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The URL in `var`; under CI a missing one fails the test, elsewhere it
/// skips with a notice (`None`).
pub fn pg_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if in_ci() {
                panic!(
                    "{var} is not set, but CI is: the PostgreSQL tests must run in CI. \
                     Start the servers first: `source .ci/postgres.sh` (see .ci/postgres.sh)"
                );
            }
            // Straight to stderr, past the test harness's output capture.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "notice: {var} is not set; skipping this PostgreSQL test \
                 (run `source .ci/postgres.sh` to start local servers)"
            );
            None
        }
    }
}

/// A schema that is dropped (with everything in it) when this goes away.
pub struct TempSchema {
    /// Server URL.
    pub url: String,
    /// Schema name.
    pub name: String,
}

impl TempSchema {
    /// A fresh, unique schema name on `url` (created by the store on connect).
    pub fn new(url: &str) -> TempSchema {
        TempSchema {
            url: url.to_string(),
            name: format!("memoir_t_{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// A raw client with this schema first on the search path.
    pub fn client(&self) -> postgres::Client {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        c.batch_execute(&format!("SET search_path TO \"{}\", public", self.name))
            .expect("search_path");
        c
    }

    /// Store options for this schema.
    pub fn options(&self, vectors: VectorMode) -> PgOptions {
        PgOptions {
            schema: self.name.clone(),
            durability: Durability::Fsync,
            vectors,
            pool_size: 8,
            ..PgOptions::default()
        }
    }
}

impl Drop for TempSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
        }
    }
}

/// A store in a fresh schema of the server named by `var` (`None`: skipped).
pub fn pg_store(var: &str, vectors: VectorMode) -> Option<(Arc<PgStore>, TempSchema)> {
    let url = pg_url(var)?;
    let schema = TempSchema::new(&url);
    let store = PgStore::connect(&url, schema.options(vectors)).expect("connect to PostgreSQL");
    Some((Arc::new(store), schema))
}

/// Hold this while restarting the shared `pgfault` cluster: tests in other
/// threads and other test binaries (nextest runs them in parallel) wait.
pub fn fault_lock() -> std::fs::File {
    let path = std::env::temp_dir().join("memoir-pgfault.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .expect("open the fault lock");
    file.lock().expect("take the fault lock");
    file
}
