//! The session manager over every backend
//! ([`memoir::store::testing::manager`]): each check runs on the file store,
//! the in-memory store and PostgreSQL (pg15 and pg18 when
//! `.ci/postgres.sh`'s variables are set), and one scenario's observable
//! results must be identical on all of them.

use crate::postgres_common;

use std::sync::Arc;

use memoir::store::file::FileStore;
use memoir::store::memory::MemStore;
use memoir::store::postgres::VectorMode;
use memoir::store::testing::manager as suite;
use memoir::store::testing::manager::Store;
use memoir::store::Durability;

use postgres_common::{pg_store, PGVECTOR_URL, POSTGRES_URL};

conformance!(
    memoir::store::Durability::None;
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
    large_payloads_live_in_blobs,
    purge_drops_only_unreferenced_blobs,
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
