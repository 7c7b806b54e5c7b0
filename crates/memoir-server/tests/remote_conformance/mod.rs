//! The manager conformance suite ([`memoir::store::testing::manager`]) on a
//! fifth backend: a [`RemoteStore`] over a real `memoir serve` (in process,
//! on loopback, over a file store in a temp dir). Every check of the suite
//! runs here as on the file, memory and PostgreSQL stores; the checks that
//! need several projects get one token (one `RemoteStore`) per project,
//! since on a server the token is the project.

use std::sync::Arc;

use memoir::client::RemoteStore;
use memoir::store::file::FileStore;
use memoir::store::testing::manager as suite;
use memoir::store::testing::manager::Store;
use memoir::store::{Durability, LogStore};
use memoir_server::ServerConfig;

use crate::{grants, Running, TOKEN_A, TOKEN_B};

/// A fresh server over an empty file store, and its tokens' stores.
struct Backend {
    server: Running,
    _dir: tempfile::TempDir,
}

impl Backend {
    fn start() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::None));
        Backend {
            server: Running::start(ServerConfig::new(store, grants())),
            _dir: dir,
        }
    }

    /// The store of project `p` (`alpha` or `beta`).
    fn store(&self, project: &str) -> Store {
        let token = match project {
            "alpha" => TOKEN_A,
            "beta" => TOKEN_B,
            other => panic!("no token for project {other}"),
        };
        Arc::new(RemoteStore::new(self.server.client(token)))
    }
}

/// Run the check named `name` on a fresh server.
fn run(name: &str) {
    let backend = Backend::start();
    if let Some((_, check)) = suite::PROJECT_CHECKS.iter().find(|(n, _)| *n == name) {
        check(&|p: &str| backend.store(p));
        return;
    }
    let (_, check) = suite::CHECKS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no check {name}"));
    check(&backend.store("alpha"));
}

macro_rules! remote_checks {
    ($($name:ident),* $(,)?) => {
        $(#[test] fn $name() { run(stringify!($name)); })*

        /// Every exported check runs here, nothing left out.
        #[test]
        fn every_exported_check_runs() {
            let here = [$(stringify!($name)),*];
            let exported: Vec<&str> = suite::CHECKS.iter().map(|(n, _)| *n).collect();
            assert_eq!(here.to_vec(), exported);
        }
    };
}

remote_checks!(
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

/// The remote backend gives the same fork cut, listing, trash and export
/// bytes (modulo ids and times) as the file store.
#[test]
fn agrees_with_the_file_store_on_one_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let file: Store = Arc::new(FileStore::new(dir.path(), Durability::None));
    let backend = Backend::start();
    assert_eq!(
        suite::scenario_digest(&backend.store("alpha")),
        suite::scenario_digest(&file)
    );
}
