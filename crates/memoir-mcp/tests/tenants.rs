//! `memoir mcp --http`'s tenants (one project per bearer token over a shared
//! store) search through the shared store's own index, restricted to their
//! project, on the file store and on a real PostgreSQL server.
//!
//! PostgreSQL comes from `.ci/postgres.sh` (see `postgres_common`); without
//! it the PostgreSQL case skips with a notice (and fails under CI).

#[path = "../../memoir/tests/suite/postgres_common/mod.rs"]
mod postgres_common;

use std::path::Path;
use std::sync::Arc;

use memoir::embed::HashEmbedder;
use memoir::message::Message;
use memoir::store::file::FileStore;
use memoir::store::postgres::VectorMode;
use memoir::store::{Durability, LogStore};
use memoir_mcp::{Backend, McpConfig, MemoirMcp};
use serde_json::{json, Value};

fn server(store: Arc<dyn LogStore>, index_root: &Path) -> MemoirMcp {
    MemoirMcp::new(McpConfig {
        backend: Backend::Tenants {
            store,
            index_root: index_root.to_path_buf(),
        },
        allow_writes: false,
        embedder: Arc::new(HashEmbedder::new(256)),
        blobs: None,
    })
}

/// A session of `project` in the shared store; its id as the project sees it.
fn session(store: &Arc<dyn LogStore>, project: &str, text: &str) -> String {
    let mut m = memoir_server::namespace::project_manager(store.clone(), project);
    let id = m.create_session(text, None).unwrap();
    m.add_message(Message::assistant("noted")).unwrap();
    m.flush().unwrap();
    id
}

fn search(s: &MemoirMcp, tenant: &str, query: &str) -> Vec<String> {
    let args = json!({ "query": query }).as_object().unwrap().clone();
    let r = s.call_blocking(Some(tenant), "search_sessions", args);
    assert_ne!(r.is_error, Some(true), "{:?}", r.content);
    let hits: Value = r.structured_content.unwrap()["hits"].clone();
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| h["session"].as_str().unwrap().to_string())
        .collect()
}

/// Both projects' sessions, then each tenant's search: only its own, by the
/// ids it knows, and a session added later is found on the next search.
fn check_scoping(store: Arc<dyn LogStore>, index_root: &Path) {
    let a1 = session(&store, "alpha", "the wombat protocol for alpha");
    let mut betas = vec![session(&store, "beta", "the wombat protocol for beta")];
    for i in 0..30 {
        // Better matches in the other project must not crowd alpha out.
        betas.push(session(
            &store,
            "beta",
            &format!("wombat wombat protocol protocol {i}"),
        ));
    }
    let s = server(store.clone(), index_root);
    assert_eq!(search(&s, "alpha", "wombat protocol"), vec![a1.clone()]);
    let beta = search(&s, "beta", "wombat protocol");
    assert_eq!(beta.len(), 10, "{beta:?}");
    assert!(beta.iter().all(|id| betas.contains(id)), "{beta:?}");
    let a2 = session(&store, "alpha", "a later quokka report");
    assert_eq!(search(&s, "alpha", "quokka"), vec![a2]);
    assert!(search(&s, "beta", "quokka").is_empty());
    // The shared store's index answered: no per-project index was built.
    assert!(!index_root.join("alpha").exists());
}

#[test]
fn tenants_search_the_file_stores_own_index_scoped_to_their_project() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Fsync));
    let index_root = dir.path().join("mcp-indexes");
    check_scoping(store, &index_root);
    assert!(dir.path().join(memoir::search::INDEX_DIR).exists());
}

#[test]
fn tenants_search_the_postgres_stores_own_index_scoped_to_their_project() {
    let Some((store, schema)) =
        postgres_common::pg_store(postgres_common::POSTGRES_URL, VectorMode::Auto)
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = store;
    check_scoping(store, root.path());
    // The documents are in the store's own search tables.
    let docs: i64 = schema
        .client()
        .query_one("SELECT count(*) FROM memoir_search_docs", &[])
        .unwrap()
        .get(0);
    assert!(docs >= 33, "{docs} documents indexed in PostgreSQL");
}

/// A note is a message: one whose text is a reference to another
/// project's blob is refused, so the blob's bytes never reach the tenant.
#[test]
fn a_note_cannot_name_another_projects_blob() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    let secret = "alpha's private payload: the launch codes";
    let hash = store
        .blobs()
        .unwrap()
        .store
        .put_payload(secret.as_bytes(), "text/plain")
        .unwrap();
    let mut m = memoir_server::namespace::project_manager(store.clone(), "alpha");
    m.create_session("alpha's session", None).unwrap();
    m.add_message(Message::tool_result(
        "c1",
        memoir::blob::blob_ref(&hash).as_str(),
        false,
    ))
    .unwrap();
    m.flush().unwrap();
    let s = server(store.clone(), &dir.path().join("ix"));
    for text in [
        memoir::blob::blob_ref(&hash),
        memoir::blob::blob_ref(&memoir::blob::hash_bytes(b"nobody's")),
    ] {
        let args = json!({ "text": text }).as_object().unwrap().clone();
        let r = s.call_blocking(Some("beta"), "remember", args);
        assert_eq!(r.is_error, Some(true), "{:?}", r.content);
        let args = json!({}).as_object().unwrap().clone();
        let notes = s.call_blocking(Some("beta"), "list_notes", args);
        let listed = format!("{:?}", notes.structured_content);
        assert!(!listed.contains("launch codes"), "{listed}");
    }
    // Alpha may note what it holds.
    let args = json!({ "text": memoir::blob::blob_ref(&hash) })
        .as_object()
        .unwrap()
        .clone();
    let r = s.call_blocking(Some("alpha"), "remember", args);
    assert_ne!(r.is_error, Some(true), "{:?}", r.content);
}
