//! `SessionManager::global` and the environment. The test runs in a child
//! process started with the variable set (`support::env_child`): setting it
//! here would race the other test threads reading the environment.

use std::time::Duration;

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::store::Durability;

use crate::support::env_child::{in_child, run_in_child};

fn opts() -> ManagerOptions {
    ManagerOptions {
        durability: Durability::None,
        // Deterministic batching: only the count triggers a flush.
        flush_interval: Duration::from_secs(3600),
        ..Default::default()
    }
}

#[test]
fn global_constructor_uses_the_global_store_filtered_to_the_project() {
    if !in_child() {
        let home = tempfile::tempdir().unwrap();
        run_in_child(
            "manager_env::global_constructor_uses_the_global_store_filtered_to_the_project",
            &[("MEMOIR_SESSION_DIR", home.path().join("global").as_os_str())],
        );
        return;
    }
    let global = std::path::PathBuf::from(std::env::var_os("MEMOIR_SESSION_DIR").expect("set"));
    let project = tempfile::tempdir().unwrap();
    let mut g = SessionManager::global(project.path(), opts()).unwrap();
    let mut other = SessionManager::open(&global, opts()).unwrap();
    let id = g.create_session("mine", None).unwrap();
    other.create_session("not mine", None).unwrap();
    assert_eq!(g.sessions_dir(), std::fs::canonicalize(&global).unwrap());
    let listed: Vec<_> = g
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed, vec![id]);
    assert_eq!(
        g.project_path(),
        std::fs::canonicalize(project.path()).unwrap()
    );
}
