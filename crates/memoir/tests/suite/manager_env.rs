//! `SessionManager::global` and the environment. Alone in its own test
//! binary (one test, one process) because it sets environment variables,
//! which is unsound while other threads may read the environment.

use std::time::Duration;

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::store::Durability;

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
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::env::set_var("MEMOIR_SESSION_DIR", home.path().join("global"));
    let mut g = SessionManager::global(project.path(), opts()).unwrap();
    let mut other = SessionManager::open(&home.path().join("global"), opts()).unwrap();
    std::env::remove_var("MEMOIR_SESSION_DIR");
    let id = g.create_session("mine", None).unwrap();
    other.create_session("not mine", None).unwrap();
    assert_eq!(
        g.sessions_dir(),
        std::fs::canonicalize(home.path().join("global")).unwrap()
    );
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
