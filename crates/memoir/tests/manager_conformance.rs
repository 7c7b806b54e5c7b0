//! The session manager over every backend
//! ([`memoir::store::testing::manager`]): each check runs on the file store,
//! the in-memory store and PostgreSQL (pg15 and pg18 when
//! `.ci/postgres.sh`'s variables are set), and one scenario's observable
//! results must be identical on all of them.

mod postgres_common;

use std::sync::Arc;

use memoir::store::file::FileStore;
use memoir::store::memory::MemStore;
use memoir::store::postgres::VectorMode;
use memoir::store::testing::manager as suite;
use memoir::store::testing::manager::Store;
use memoir::store::Durability;

use postgres_common::{pg_store, PGVECTOR_URL, POSTGRES_URL};

fn with_file(check: fn(&Store)) {
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(FileStore::new(dir.path().join("s"), Durability::None));
    check(&store);
}

fn with_memory(check: fn(&Store)) {
    let store: Store = Arc::new(MemStore::new());
    check(&store);
}

fn with_pg(var: &str, check: fn(&Store)) {
    let Some((pg, _schema)) = pg_store(var, VectorMode::Auto) else {
        return;
    };
    let store: Store = pg;
    check(&store);
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod file {
            $(#[test] fn $name() { super::with_file(super::suite::$name); })*
        }
        mod memory {
            $(#[test] fn $name() { super::with_memory(super::suite::$name); })*
        }
        mod postgres {
            $(#[test] fn $name() { super::with_pg(super::POSTGRES_URL, super::suite::$name); })*
        }
        mod pgvector {
            $(#[test] fn $name() { super::with_pg(super::PGVECTOR_URL, super::suite::$name); })*
        }
        #[test]
        fn every_exported_check_runs() {
            let here = [$(stringify!($name)),*];
            let exported: Vec<&str> = suite::CHECKS.iter().map(|(n, _)| *n).collect();
            assert_eq!(here.to_vec(), exported);
        }
    };
}

conformance!(
    create_append_and_reload,
    fork_inside_a_tool_group_moves_back,
    rewrite_and_checkpoint_persist,
    rename_and_list,
    delete_restore_and_purge,
    export_formats,
    lease_refuses_a_second_manager,
    projects_are_isolated,
    switch_repairs_dangling_tool_calls,
    writes_never_land_in_a_reused_id,
);

/// The same scenario gives the same fork cut, listing, trash and export
/// bytes (modulo ids and times) on every backend.
#[test]
fn backends_agree_on_one_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let file: Store = Arc::new(FileStore::new(dir.path(), Durability::None));
    let memory: Store = Arc::new(MemStore::new());
    let want = suite::scenario_digest(&file);
    assert_eq!(suite::scenario_digest(&memory), want);
    for var in [POSTGRES_URL, PGVECTOR_URL] {
        if let Some((pg, _schema)) = pg_store(var, VectorMode::Auto) {
            let pg: Store = pg;
            assert_eq!(suite::scenario_digest(&pg), want, "{var}");
        }
    }
}
