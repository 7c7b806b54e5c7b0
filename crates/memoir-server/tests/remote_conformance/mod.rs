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

/// `PUT /v1/blobs/{hash}` checks the hash and the size limit; `GET` serves a
/// project only the blobs it uploaded or references, and the same bytes
/// back, verified.
#[test]
fn blob_routes_check_hashes_sizes_and_projects() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::None));
    let mut config = ServerConfig::new(store, grants());
    config.max_blob = 128 * 1024;
    let server = Running::start(config);
    let url = |hash: &str| format!("{}/v1/blobs/{hash}", server.0.url());
    let bytes = b"a payload".to_vec();
    let hash = memoir::blob::hash_bytes(&bytes);
    // The wrong hash, a malformed hash, too large, no token.
    let other = memoir::blob::hash_bytes(b"something else");
    let (status, text) = crate::raw("PUT", &url(&other), Some(TOKEN_A), None, bytes.clone());
    assert_eq!(
        (status, crate::error_code(&text).as_str()),
        (400, "bad_request"),
        "{text}"
    );
    let (status, _) = crate::raw("PUT", &url("abc"), Some(TOKEN_A), None, bytes.clone());
    assert_eq!(status, 400);
    let big = vec![b'x'; 200 * 1024];
    let (status, text) = crate::raw(
        "PUT",
        &url(&memoir::blob::hash_bytes(&big)),
        Some(TOKEN_A),
        None,
        big,
    );
    assert_eq!(
        (status, crate::error_code(&text).as_str()),
        (413, "too_large"),
        "{text}"
    );
    let (status, _) = crate::raw("PUT", &url(&hash), None, None, bytes.clone());
    assert_eq!(status, 401);
    // Stored once, readable by its uploader, invisible to another project.
    let a = server.client(TOKEN_A);
    a.put_blob(&hash, &bytes, "text/plain").unwrap();
    assert_eq!(a.get_blob(&hash).unwrap(), Some(bytes.clone()));
    let b = server.client(TOKEN_B);
    assert_eq!(b.get_blob(&hash).unwrap(), None, "another project's blob");
    assert_eq!(a.get_blob(&other).unwrap(), None);
    // A project whose session references the blob may read it.
    let b_store: Store = Arc::new(RemoteStore::new(b.clone()));
    let payload = suite::big_output("shared across projects");
    let mut m = memoir::manager::SessionManager::with_store(b_store.clone(), suite::options());
    m.create_session("b's", None).unwrap();
    m.add_messages([
        suite::call(&["x"]),
        memoir::message::Message::tool_result("x", payload.as_str(), false),
    ])
    .unwrap();
    m.flush().unwrap();
    let payload_hash = memoir::blob::hash_bytes(payload.as_bytes());
    assert!(b.get_blob(&payload_hash).unwrap().is_some());
    assert_eq!(a.get_blob(&payload_hash).unwrap(), None);
    drop(m);
    // A new server over the same store (no memory of uploads) finds it
    // through b's sessions, and still not for a.
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::None));
    let again = Running::start(ServerConfig::new(store, grants()));
    let b2 = again.client(TOKEN_B);
    assert_eq!(
        b2.get_blob(&payload_hash).unwrap().as_deref(),
        Some(payload.as_bytes())
    );
    assert_eq!(again.client(TOKEN_A).get_blob(&payload_hash).unwrap(), None);
}

/// A remote lease that is not renewed expires: the next taker gets it and
/// learns whose it was; a live one is refused naming its holder.
#[test]
fn an_unrenewed_remote_lease_is_taken_over() {
    let backend = Backend::start();
    let store = backend.store("alpha");
    memoir::transcript::Session::create_in(store.clone(), memoir::record::SessionMeta::new("l"))
        .unwrap();
    let client = backend.server.client(TOKEN_A);
    let dead = memoir::store::lease::Holder {
        pid: 4_000_000,
        host: "gone".into(),
        since: "then".into(),
    };
    client.acquire_lease("l", dead.clone(), Some(5)).unwrap();
    match store.acquire_lease("l") {
        Err(memoir::Error::Busy { pid, host, .. }) => {
            assert_eq!((pid, host.as_str()), (4_000_000, "gone"))
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    std::thread::sleep(std::time::Duration::from_millis(5_200));
    let lease = store.acquire_lease("l").unwrap();
    assert_eq!(lease.recovered_from, Some(dead));
    assert_eq!(lease.holder.pid, std::process::id());
    drop(lease);
    // Released on drop: taken again at once.
    assert!(store.acquire_lease("l").unwrap().recovered_from.is_none());
}
