//! The backends every conformance suite runs on: the file store in a temp
//! dir, the in-memory store, and PostgreSQL without and with pgvector (each in
//! a fresh schema; skipped with a notice when `.ci/postgres.sh`'s variables
//! are unset). `conformance!(DURABILITY; check, ...)` turns each exported
//! check of the suite imported as `suite` into one test per backend.

use std::sync::Arc;

use memoir::store::file::FileStore;
use memoir::store::memory::MemStore;
use memoir::store::postgres::VectorMode;
use memoir::store::testing::store::Store;
use memoir::store::Durability;

use crate::postgres_common::pg_store;

/// Run `check` on a file store in a fresh temp dir.
pub fn with_file(durability: Durability, check: fn(&Store)) {
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(FileStore::new(dir.path().join("s"), durability));
    check(&store);
}

/// Run `check` on a fresh in-memory store.
pub fn with_memory(check: fn(&Store)) {
    let store: Store = Arc::new(MemStore::new());
    check(&store);
}

/// Run `check` on PostgreSQL at the URL in `var`, in a fresh schema.
pub fn with_pg(var: &str, check: fn(&Store)) {
    let Some((pg, _schema)) = pg_store(var, VectorMode::Auto) else {
        return;
    };
    let store: Store = pg;
    check(&store);
}

macro_rules! conformance {
    ($durability:expr; $($name:ident),* $(,)?) => {
        mod file {
            $(#[test] fn $name() { crate::backends::with_file($durability, super::suite::$name); })*
        }
        mod memory {
            $(#[test] fn $name() { crate::backends::with_memory(super::suite::$name); })*
        }
        mod postgres {
            $(#[test] fn $name() {
                crate::backends::with_pg(crate::postgres_common::POSTGRES_URL, super::suite::$name);
            })*
        }
        mod pgvector {
            $(#[test] fn $name() {
                crate::backends::with_pg(crate::postgres_common::PGVECTOR_URL, super::suite::$name);
            })*
        }
        /// The macro's list is the exported suite's list, nothing left out.
        #[test]
        fn every_exported_check_runs() {
            let here = [$(stringify!($name)),*];
            let exported: Vec<&str> = suite::CHECKS.iter().map(|(n, _)| *n).collect();
            assert_eq!(here.to_vec(), exported);
        }
    };
}
